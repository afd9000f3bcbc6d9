"""Wall time, CPU time and peak memory of each built-in candidate, on s8f and on a scale corpus.

Each candidate runs through the runner in its sandbox (as `microctx run` runs it),
so the figures are the run manifest's: wall seconds, CPU seconds and peak resident memory of
the candidate's process (os.wait4). The grade of each submission is shown beside them.

    python benchmarks/bench_candidates.py                  # s8f and 100,000 records
    python benchmarks/bench_candidates.py --sizes 20000    # s8f and a 20,000-record corpus
    python benchmarks/bench_candidates.py --sizes          # s8f only

The scale corpus (benchmarks/scale.py) is frozen once into --folder and reused.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from microctx.candidates.devkit import make_devkit  # noqa: E402
from microctx.candidates.runner import run_candidate  # noqa: E402
from microctx.contract.canonical import dumps  # noqa: E402
from microctx.contract.schemas import load_answers, load_submission  # noqa: E402
from microctx.contract.score import grade  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402

BUILTINS = ("exact-sql", "text-only")


def bench_corpus(label: str, public: Path, answers: Path, folder: Path) -> list[dict]:
    """Run every built-in on one corpus; one row of figures per candidate."""
    gold = load_answers(answers)
    devkit = folder / f"devkit-{label}.json"
    devkit.write_bytes(dumps(make_devkit(gold)))
    rows = []
    for name in BUILTINS:
        submission = folder / f"{name}-{label}.json"
        manifest = run_candidate(name, public, submission, devkit=devkit if name == "text-only" else None)
        verdict = grade(gold, load_submission(submission)).summary() if manifest["ok"] else f"FAILED RUN: {manifest['error']}"
        rows.append(
            {
                "corpus": label,
                "records": len(gold["answers"]),
                "candidate": name,
                "wall_s": manifest["wall_seconds"],
                "cpu_s": manifest["cpu_seconds"],
                "peak_mib": manifest["peak_memory_bytes"] / 2**20,
                "grade": verdict,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000], help="scale corpus sizes (records)")
    parser.add_argument(
        "--folder",
        default=str(Path(tempfile.gettempdir()) / "microctx-bench"),
        help="where scale corpora and submissions go (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    s8f = data.s8f()
    rows = bench_corpus("s8f", s8f.public, s8f.answers, folder)
    for n in args.sizes:
        from scale import freeze_scale_corpus

        started = time.monotonic()
        public, answers = freeze_scale_corpus(folder, n)
        print(
            f"scale corpus of {n} records ready in {time.monotonic() - started:.1f} s ({public.stat().st_size / 2**20:.0f} MiB)",
            file=sys.stderr,
        )
        rows += bench_corpus(f"scale-{n}", public, answers, folder)
    print(f"{'corpus':<14} {'records':>8} {'candidate':<10} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}  grade")
    for r in rows:
        print(
            f"{r['corpus']:<14} {r['records']:>8} {r['candidate']:<10} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} "
            f"{r['peak_mib']:>9.0f}  {r['grade']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
