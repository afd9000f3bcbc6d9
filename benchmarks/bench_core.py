"""Wall time and peak memory of `microctx freeze`, `verify` and `grade`, as a user runs them.

Each command runs as its own process (interpreter start included); peak memory is the child's
maximum resident set size. Corpora: the published s8f snapshot, and a scale corpus made by
replicating its records (benchmarks/scale.py).

    python benchmarks/bench_core.py [--records 100000] [--repeat 3] [--work /tmp/microctx-bench]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson  # noqa: E402
import scale  # noqa: E402

from microctx import load_corpus  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402
from microctx.corpus.public import corpus_to_export  # noqa: E402

MICROCTX = [sys.executable, "-m", "microctx"]


def run(args: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak MiB, exit code) of one command."""
    start = time.perf_counter()
    child = subprocess.Popen(MICROCTX + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:  # every command here passes on its input: anything else is a broken benchmark
        sys.exit(f"{' '.join(args[:1])} failed: {child.stderr.read().decode()}")
    return wall, usage.ru_maxrss / 1024, child.returncode


def bench(label: str, raw: Path, work: Path, source: str, repeat: int) -> None:
    public, answers, report = work / f"{label}-public.json", work / f"{label}-answers.json", work / f"{label}-report.json"
    grade_out = work / f"{label}-grade.json"
    steps = {
        "freeze": [
            "freeze",
            str(raw),
            "--public",
            str(public),
            "--answers",
            str(answers),
            "--report",
            str(report),
            "--source",
            source,
        ],
        "verify": ["verify", "--public", str(public), "--answers", str(answers), "--report", str(report)],
        "grade": ["grade", "--answers", str(answers), "--submission", str(answers), "--output", str(grade_out)],
    }
    for step, args in steps.items():
        runs = [run(args) for _ in range(repeat)]
        best = min(r[0] for r in runs)
        peak = max(r[1] for r in runs)
        print(f"{label:>14} {step:<7} best {best:7.3f} s of {repeat}   peak {peak:8.1f} MiB   exit {runs[-1][2]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="size of the scale corpus (0 to skip)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", default="/tmp/microctx-bench")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)

    corpus = load_corpus(data.s8f().public)
    raw = work / "s8f-raw.json"
    raw.write_bytes(orjson.dumps(corpus_to_export(corpus), option=orjson.OPT_INDENT_2))
    bench("s8f", raw, work, corpus.source, args.repeat)
    if args.records:
        big = scale.write_scale_export(work, args.records)
        print(f"(scale corpus: {args.records} records, {big.stat().st_size / 2**20:.0f} MiB raw export)", flush=True)
        bench(f"{args.records}", big, work, f"scale:{args.records}", 1)


if __name__ == "__main__":
    main()
