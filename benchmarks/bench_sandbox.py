"""What the sandbox costs per run: exact-sql on s8f, sandboxed vs `--isolation process`.

Runs are interleaved (process, sandbox, process, sandbox, ...) so that load from elsewhere on the
machine falls on both alike; the figures are the manifests' wall seconds (the runner's clock from
start to the end of the whole process tree) and the runner's own wall time around run_candidate
(which adds copying the corpus, cgroup setup and teardown, reading and checking the submission).
Also shown: one sandboxed run in network record mode (the forwarder starts inside the sandbox).
Goal: the sandbox adds under 0.3 s of wall time per run.

    python benchmarks/bench_sandbox.py            # 7 runs of each
    python benchmarks/bench_sandbox.py --runs 15
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from microctx.candidates.runner import run_candidate  # noqa: E402
from microctx.candidates.sandbox import SandboxSettings, check_available  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402

MODES = {
    "process": SandboxSettings(isolation="process"),
    "sandbox": SandboxSettings(),
    "sandbox+record": SandboxSettings(network="record", allow_hosts=("127.0.0.1:9",)),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each mode (default %(default)s)")
    args = parser.parse_args(argv)
    check_available()
    public = data.s8f().public
    figures: dict[str, dict[str, list[float]]] = {mode: {"manifest": [], "call": [], "cpu": []} for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="microctx-bench-sandbox-") as folder:
        run_candidate("exact-sql", public, Path(folder) / "warm.json")  # warm the page cache and the probe
        for i in range(args.runs):
            for mode, settings in MODES.items():
                started = time.monotonic()
                manifest = run_candidate("exact-sql", public, Path(folder) / f"{mode}-{i}.json", sandbox=settings)
                took = time.monotonic() - started
                if not manifest["ok"]:
                    print(f"{mode}: FAILED RUN: {manifest['error']}", file=sys.stderr)
                    return 1
                figures[mode]["manifest"].append(manifest["wall_seconds"])
                figures[mode]["call"].append(took)
                figures[mode]["cpu"].append(manifest["cpu_seconds"])
    base = {key: statistics.median(values) for key, values in figures["process"].items()}
    print(f"exact-sql on s8f, {args.runs} interleaved runs each; medians (min-max)")
    print(f"{'mode':<16} {'manifest wall s':>22} {'run_candidate s':>22} {'CPU s':>7} {'added wall s':>13}")
    for mode, values in figures.items():
        med = {key: statistics.median(v) for key, v in values.items()}
        print(f"{mode:<16} {med['manifest']:>8.3f} ({min(values['manifest']):.3f}-{max(values['manifest']):.3f}) "
              f"{med['call']:>8.3f} ({min(values['call']):.3f}-{max(values['call']):.3f}) {med['cpu']:>7.3f} "
              f"{med['call'] - base['call']:>+13.3f}")
    added = statistics.median(figures["sandbox"]["call"]) - base["call"]
    print(f"sandbox overhead per run (median run_candidate time, sandbox - process): {added:+.3f} s "
          f"({'within' if added < 0.3 else 'OVER'} the 0.3 s goal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
