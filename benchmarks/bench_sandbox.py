"""What the sandbox costs per run: exact-sql on s8f, sandboxed vs `--isolation process`.

Runs are interleaved (process, sandbox, process, sandbox, ...) so that load from elsewhere on the
machine falls on both alike; the figures are the manifests' wall seconds (the runner's clock from
start to the end of the whole process tree) and the runner's own wall time around run_candidate
(which adds copying the corpus, cgroup setup and teardown, reading and checking the submission).
Also shown: sandboxed runs in network record mode (the forwarder starts inside the sandbox), and
the same three modes on a trivial candidate (writes an empty submission), where the fixed cost
per run is not hidden under the candidate's own time. On a loaded machine compare the minimums.
Goal: the sandbox adds under 0.3 s of wall time per run.

Last, the model gateway's overhead per call: a sandboxed candidate makes the same chat
completion calls to the local fake endpoint (tests/fake_openai.py) through the gateway
(`--model-endpoint`) and through the recording proxy (`--network record`, the endpoint allowed),
timing each call itself; the difference of the medians is what the gateway adds per call; and
through the gateway with token and dollar budgets (each call reserved before it is forwarded).

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
from microctx.candidates.settings import GatewaySettings  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402

MODES = {
    "process": SandboxSettings(isolation="process"),
    "sandbox": SandboxSettings(),
    "sandbox+record": SandboxSettings(network="record", allow_hosts=("127.0.0.1:9",)),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each mode (default %(default)s)")
    parser.add_argument(
        "--calls", type=int, default=50, help="model calls through the gateway and the proxy (default %(default)s)"
    )
    args = parser.parse_args(argv)
    check_available()
    public = data.s8f().public
    with tempfile.TemporaryDirectory(prefix="microctx-bench-sandbox-") as folder:
        trivial = Path(folder) / "trivial.py"
        trivial.write_text(
            "import hashlib, json\n"
            "def run(public_path, output_path, *, devkit_path=None, params=None):\n"
            "    digest = hashlib.sha256(open(public_path, 'rb').read()).hexdigest()\n"
            "    open(output_path, 'w').write(json.dumps({'corpus_sha256': digest, 'answers': []}))\n"
        )
        run_candidate("exact-sql", public, Path(folder) / "warm.json")  # warm the page cache and the probe
        for candidate, label in (("exact-sql", "exact-sql"), (f"{trivial}:run", "trivial candidate")):
            figures: dict[str, dict[str, list[float]]] = {mode: {"manifest": [], "call": [], "cpu": []} for mode in MODES}
            for i in range(args.runs):
                for mode, settings in MODES.items():
                    started = time.monotonic()
                    manifest = run_candidate(candidate, public, Path(folder) / f"{mode}-{i}.json", sandbox=settings)
                    took = time.monotonic() - started
                    if not manifest["ok"]:
                        print(f"{mode}: FAILED RUN: {manifest['error']}", file=sys.stderr)
                        return 1
                    figures[mode]["manifest"].append(manifest["wall_seconds"])
                    figures[mode]["call"].append(took)
                    figures[mode]["cpu"].append(manifest["cpu_seconds"])
            _print(label, args.runs, figures)
        _gateway_overhead(public, Path(folder), calls=args.calls)
    return 0


_CALLER = """
import hashlib, json, os, sys, time, urllib.request
base, calls = sys.argv[2], int(sys.argv[3])
record = json.load(open("public.json"))["records"][0]
user = "FIELDS: state\\nRECORDS (JSON):\\n" + json.dumps([record])
body = json.dumps({"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": user}]}).encode()
seconds = []
for _ in range(calls):
    started = time.perf_counter()
    request = urllib.request.Request(base + "/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
    seconds.append(time.perf_counter() - started)
digest = hashlib.sha256(open("public.json", "rb").read()).hexdigest()
json.dump({"corpus_sha256": digest, "answers": [], "seconds": seconds}, open(sys.argv[1], "w"))
"""


def _gateway_overhead(public: Path, folder: Path, calls: int) -> None:
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from fake_openai import FakeOpenAI

    caller = folder / "caller.py"
    caller.write_text(_CALLER)
    medians = {}
    with FakeOpenAI() as fake:
        host = fake.base_url.split("//", 1)[1].split("/", 1)[0]
        ways = {
            "gateway": (SandboxSettings(gateway=GatewaySettings(fake.base_url)), "http://model.gateway/v1"),
            "proxy": (SandboxSettings(network="record", allow_hosts=(host,)), fake.base_url),
            "gateway+budget": (  # token and dollar budgets: each call reserved, bounded and settled
                SandboxSettings(
                    gateway=GatewaySettings(fake.base_url, max_tokens=10**9, max_dollars=1e6, price_in=1, price_out=2)
                ),
                "http://model.gateway/v1",
            ),
        }
        for way, (settings, base) in ways.items():
            out = folder / f"calls-{way}.json"
            cmd = f"python {caller} {{submission}} {base} {calls}"
            manifest = run_candidate("calls", public, out, cmd=cmd, sandbox=settings)
            if not manifest["ok"]:
                print(f"{way}: FAILED RUN: {manifest['error']}", file=sys.stderr)
                return
            medians[way] = statistics.median(json.loads(out.read_text())["seconds"])
    print(f"\nmodel calls from inside the sandbox, {calls} sequential calls each; median seconds per call")
    for way, value in medians.items():
        print(f"{way:<16} {value * 1000:>8.2f} ms")
    print(f"gateway overhead per call (gateway - recording proxy): {(medians['gateway'] - medians['proxy']) * 1000:+.2f} ms")
    budget = (medians["gateway+budget"] - medians["gateway"]) * 1000
    print(f"budget reservation per call (gateway+budget - gateway): {budget:+.2f} ms")


def _print(label: str, runs: int, figures: dict[str, dict[str, list[float]]]) -> None:
    base = {key: (statistics.median(v), min(v)) for key, v in figures["process"].items()}
    print(f"\n{label} on s8f, {runs} interleaved runs each; median (min-max) seconds")
    print(f"{'mode':<16} {'manifest wall':>22} {'run_candidate call':>22} {'CPU':>7} {'added: median':>14} {'min':>7}")
    for mode, values in figures.items():
        med = {key: statistics.median(v) for key, v in values.items()}
        print(
            f"{mode:<16} {med['manifest']:>8.3f} ({min(values['manifest']):.3f}-{max(values['manifest']):.3f}) "
            f"{med['call']:>8.3f} ({min(values['call']):.3f}-{max(values['call']):.3f}) {med['cpu']:>7.3f} "
            f"{med['call'] - base['call'][0]:>+14.3f} {min(values['call']) - base['call'][1]:>+7.3f}"
        )
    added = min(figures["sandbox"]["call"]) - base["call"][1]
    print(
        f"sandbox overhead per run (fastest sandboxed call - fastest process call): {added:+.3f} s "
        f"({'within' if added < 0.3 else 'OVER'} the 0.3 s goal)"
    )


if __name__ == "__main__":
    sys.exit(main())
