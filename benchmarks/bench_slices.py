"""Time the slice statistics (targets, issue 24: `microctx slices` within 2x `microctx grade` on s8f
and under 5 s at 100,000 records; the s8f grade report under 20 s end to end).

    python benchmarks/bench_slices.py [--records N] [--repeat N] [--no-report] [--commands-only] [--work DIR]

Prints, best of N runs each:
- `slice_table` on s8f (the planted demo submission), 10,000 resamples, and the Monte-Carlo
  spread of its interval ends across 5 seeds (the issue asks for +-0.005);
- `paired_comparison` on s8f (oracle against planted);
- `slice_table` on a scale corpus of N records (benchmarks/scale.py: s8f replicated under new
  numbers), for the planted submission and for a submission with 10% of facts missed at random
  (more distinct components, so the bootstrap's merging of identical components helps less);
- `microctx grade` and `microctx slices` as commands (fresh processes, best of N, bytecode cached)
  on s8f and on the scale corpus: wall and CPU seconds, and their ratios beside the 2x goal;
- `microctx report grade` on s8f end to end (kernel start, papermill, charts, HTML).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # noqa: E402
from timing import best_of  # noqa: E402

from microctx.contract.canonical import dumps  # noqa: E402
from microctx.contract.schemas import load_answers  # noqa: E402
from microctx.contract.score import grade  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402
from microctx.corpus.public import load_corpus  # noqa: E402
from microctx.grading import slices  # noqa: E402
from microctx.grading.examples import demo_submissions  # noqa: E402

SLICE_TARGET, REPORT_TARGET, CLI_RATIO = 5.0, 20.0, 2.0


def command_seconds(repeat: int, *argv: str) -> tuple[float, float]:
    """(best wall, best CPU) seconds of `microctx ARGV` in a fresh process (imports included, as a
    user waits; CPU is user + system of the child, steadier than wall on a shared machine)."""
    import os
    import subprocess

    env = dict(os.environ, MICROCTX_LEDGER=str(Path(tempfile.gettempdir()) / "bench-slices-ledger.sqlite"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's installed package has its bytecode caches
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "bench-slices-pycache")
    command = [sys.executable, "-m", "microctx", *argv]
    best_wall = best_cpu = float("inf")
    for _ in range(repeat + 1):  # the first run writes the bytecode caches and is not counted
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=False, capture_output=True, env=env)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if _ > 0:
            best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    return best_wall, best_cpu


def grade_against_slices(repeat: int, public, answers, submission, out: Path, label: str) -> float:
    grade_s, grade_cpu = command_seconds(repeat, "grade", "--answers", str(answers), "--submission", str(submission),
                                         "--output", str(out / "g.json"))  # fmt: skip
    slices_s, slices_cpu = command_seconds(repeat, "slices", "--public", str(public), "--answers", str(answers),
                                           "--submission", str(submission), "--output", str(out / "s.csv"))  # fmt: skip
    ratio, cpu_ratio = slices_s / grade_s, slices_cpu / grade_cpu
    print(f"{label}: microctx grade {grade_s:.2f} s (CPU {grade_cpu:.2f} s), microctx slices {slices_s:.2f} s "
          f"(CPU {slices_cpu:.2f} s): {ratio:.1f}x wall, {cpu_ratio:.1f}x CPU "
          f"({'meets' if ratio <= CLI_RATIO else 'MISSES'} the {CLI_RATIO:g}x goal)", flush=True)  # fmt: skip
    return slices_s


def random_misses(facts, rate: float, seed: int):
    out = facts.copy()
    scored = out["kind"].isin(("state", "label", "ref", "dup", "contradiction")).to_numpy()
    miss = scored & (np.random.default_rng(seed).random(len(out)) < rate)
    out.loc[miss, "outcome"] = "fn"
    return out


def in_process(repeat: int, corpus, records, planted, oracle) -> None:
    """slice_table (the DataFrame API) and the columns the command writes, the Monte-Carlo spread of
    the interval ends, and the paired comparison, in this process (imports not counted)."""
    from microctx.grading.counts import prepare
    from microctx.grading.table import slice_columns

    seconds = best_of(repeat, lambda: slices.slice_table(planted, corpus, records=records))
    print(f"s8f slice_table, 10,000 resamples: {seconds:.2f} s", flush=True)
    prepared = prepare(planted, records, "facts")
    seconds = best_of(repeat, lambda: slice_columns(prepared, records))
    print(f"s8f slice_columns (what microctx slices computes), 10,000 resamples: {seconds:.2f} s", flush=True)
    columns = [
        "ci_low",
        "ci_high",
        "precision_ci_low",
        "precision_ci_high",
        "recall_ci_low",
        "recall_ci_high",
        "exact_ci_low",
        "exact_ci_high",
    ]
    ends = np.array(
        [slices.slice_table(planted, corpus, records=records, seed=s)[columns].to_numpy(dtype=float) for s in range(8)]
    )
    defined = ~np.isnan(ends).any(axis=0)
    spread = ends.std(axis=0, ddof=1)[defined]
    print(
        f"s8f interval ends across 8 seeds ({defined.sum()} ends): Monte-Carlo standard deviation "
        f"largest {spread.max():.4f}, median {np.median(spread):.4f}",
        flush=True,
    )
    seconds = best_of(repeat, lambda: slices.paired_comparison(oracle, planted, corpus, records=records))
    print(f"s8f paired_comparison, 10,000 resamples and flips: {seconds:.2f} s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="scale corpus size (0 to skip)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-report", action="store_true", help="skip the end-to-end grade report")
    parser.add_argument("--work", help="folder to keep (and reuse) the frozen scale corpus in; default a temporary one")
    parser.add_argument("--commands-only", action="store_true", help="only the commands (no in-process tables)")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores", flush=True)
    ok = True
    paths = data.s8f()
    corpus, answers = load_corpus(paths.public), load_answers(paths.answers)
    records = slices.record_table(corpus)
    subs = demo_submissions(answers)
    planted = slices.facts_frame(grade(answers, subs["planted"]).facts)
    oracle = slices.facts_frame(grade(answers, subs["oracle"]).facts)

    if not args.commands_only:
        in_process(args.repeat, corpus, records, planted, oracle)

    with tempfile.TemporaryDirectory(prefix="bench-slices-") as tmp:
        tmp_path = Path(tmp)
        planted_path = tmp_path / "planted.json"
        planted_path.write_bytes(dumps(subs["planted"]))
        grade_against_slices(max(args.repeat, 3), paths.public, paths.answers, planted_path, tmp_path, "s8f commands")
        if args.records:
            start = time.perf_counter()
            public, gold = scale.freeze_scale_corpus(Path(args.work) if args.work else tmp_path, args.records)
            big_answers = load_answers(gold)
            big_subs = demo_submissions(big_answers)
            if not args.commands_only:  # the in-process tables at scale
                big = load_corpus(public)
                big_records = slices.record_table(big)
                print(
                    f"({args.records} records frozen and loaded in {time.perf_counter() - start:.1f} s; "
                    f"record_table made once, as the reports do)",
                    flush=True,
                )
                big_planted = slices.facts_frame(grade(big_answers, big_subs["planted"]).facts)
                big_random = random_misses(slices.facts_frame(grade(big_answers, big_subs["oracle"]).facts), 0.10, 1)
                for name, facts in (("planted", big_planted), ("10% random misses", big_random)):
                    seconds = best_of(args.repeat, lambda facts=facts: slices.slice_table(facts, big, records=big_records))
                    verdict = "meets" if seconds < SLICE_TARGET else "MISSES"
                    ok &= seconds < SLICE_TARGET
                    print(
                        f"{args.records} records slice_table ({name}, {len(facts)} fact rows): {seconds:.2f} s "
                        f"({verdict} the {SLICE_TARGET:.0f} s target)",
                        flush=True,
                    )
                seconds = best_of(args.repeat, lambda: slices.record_table(big))
                print(f"{args.records} records record_table: {seconds:.2f} s", flush=True)
            big_sub = tmp_path / "big-planted.json"
            big_sub.write_bytes(dumps(big_subs["planted"]))
            took = grade_against_slices(args.repeat, public, gold, big_sub, tmp_path, f"{args.records} records commands")
            ok &= took < SLICE_TARGET
            print(f"{args.records} records microctx slices: {took:.2f} s "
                  f"({'meets' if took < SLICE_TARGET else 'MISSES'} the {SLICE_TARGET:g} s goal)", flush=True)  # fmt: skip
            children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest command: slices at scale
            print(f"peak memory of the commands: {children:.0f} MiB", flush=True)

        if not args.no_report:
            from microctx.reports import build as reports

            sub = tmp_path / "planted.json"
            sub.write_bytes(dumps(subs["planted"]))
            seconds = best_of(
                args.repeat,
                lambda: reports.grade_report(str(paths.public), str(paths.answers), str(sub), tmp_path / "grade", progress=False),
            )
            verdict = "meets" if seconds < REPORT_TARGET else "MISSES"
            ok &= seconds < REPORT_TARGET
            print(f"s8f grade report end to end: {seconds:.1f} s ({verdict} the {REPORT_TARGET:.0f} s target)", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory of this process: {peak:.0f} MiB")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
