"""What the slice statistics claim, measured by simulation on s8f's real records and components.

    python benchmarks/bench_coverage.py [--runs N] [--n-boot N] [--parts coverage,bands,like,sizes,paired,frontier]

Prints, with run counts and Monte Carlo intervals (Wilson, 95%):
- coverage of every F1 interval the slice table gives, in the four settings of issue 19
  (independent misses; heterogeneous component rates; whole components missed; only the giant
  fails), pooled and for the worst slice;
- the same coverage by n_eff band with the n_eff rule switched off (min_n_eff=1), which is how
  the threshold (stats.DEFAULT_MIN_N_EFF) was chosen;
- runs with a weak record-level slice when only fact kinds differ (s8f and the same records as
  independent components);
- the size of the slice-vs-rest test in the four settings, pooled and for the three hottest
  slices, each with its own Monte Carlo interval (`--parts sizes --runs 300 --n-boot 1000` for
  the figures in docs/statistics.md);
- the size of the paired equal-F1 test (and the sign-flip test beside it) under clustered errors;
- the frontier: how often its no-interval rule fires, and how often the intervals it gives
  cover a new test set's net-true.
The worlds are tests/slice_worlds.py (the simulation tests use the same code with fewer runs).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
import slice_worlds as W  # noqa: E402

from microctx.contract.schemas import load_answers  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402
from microctx.corpus.public import load_corpus  # noqa: E402
from microctx.grading.stats import wilson_interval  # noqa: E402

BANDS = ((1, 3), (3, 5), (5, 8), (8, 10), (10, 15), (15, 30), (30, math.inf))


def share(k: int, n: int) -> str:
    if n == 0:
        return "n/a (0 runs)"
    low, high = wilson_interval(k, n)
    return f"{k / n:.3f} [{low:.3f}, {high:.3f}] ({k}/{n})"


def coverage(world, corpus, runs: int, n_boot: int) -> None:
    print("\n## Coverage of the true expected F1 by every interval given (default rules)")
    for setting in W.SETTINGS:
        started = time.perf_counter()
        r = W.coverage_runs(world, corpus, setting, runs, n_boot)
        given, covered = sum(r["given"].values()), sum(r["covered"].values())
        worst = min(r["given"], key=lambda k: (r["covered"][k] / r["given"][k], -r["given"][k]))
        print(
            f"- {setting}: {share(covered, given)}; slices with an interval per run "
            f"{given / runs:.1f}; worst slice {worst[0]}/{worst[1]}: {share(r['covered'][worst], r['given'][worst])}; "
            f"runs with a weak slice {r['false_weak_runs']}/{runs} ({time.perf_counter() - started:.0f} s)"
        )


def bands(world, corpus, runs: int, n_boot: int) -> None:
    print("\n## Coverage by n_eff band with the n_eff rule off (min_n_eff=1, min_components=1)")
    for setting in W.SETTINGS:
        r = W.coverage_runs(world, corpus, setting, runs, n_boot, min_n_eff=1, min_components=1)
        cells = []
        for low, high in BANDS:
            hits = [h for n_eff, h in r["by_n_eff"] if low <= n_eff < high]
            cells.append(f"[{low:g}, {high:g}): {share(sum(hits), len(hits))}")
        print(f"- {setting}: " + "; ".join(cells))


def like_for_like(world, records_world, corpus, runs: int, n_boot: int) -> None:
    print("\n## Fact-kind-only differences (labels missed 25%, references never): runs with a weak record-level slice")
    record_level = ("state", "body_length", "has_references", "split")
    for name, w in (("s8f components", world), ("records as components", records_world)):
        p = W.miss_probability(w, "kinds")
        alarms, judged = 0, 0
        for run in range(runs):
            table = W.run_table(w, corpus, W.draw_misses(w, "kinds", p, np.random.default_rng(300 + run)), run, n_boot)
            rows = table[table["slice_kind"].isin(record_level)]
            judged += int(rows["p_value"].notna().sum())
            alarms += bool(rows["weak"].any())
        print(f"- {name}: {share(alarms, runs)}; record-level slices judged per run {judged / runs:.1f}")


def sizes(world, records_world, corpus, runs: int, n_boot: int) -> None:
    print("\n## Size at nominal 0.05 under a true null (pooled over judged slices; per-slice worst)")
    # on s8f's own components nothing is judged (the overall n_eff is 3): a fifth of the runs shows it
    for name, w, n_runs in (("records as components", records_world, runs), ("s8f components", world, max(runs // 5, 1))):
        for setting in W.SETTINGS:
            r = W.rest_test_size(w, corpus, setting, n_runs, n_boot)
            tests, rejected = sum(r["judged"].values()), sum(r["rejected"].values())
            ranked = sorted(r["judged"], key=lambda k: (-r["rejected"][k] / r["judged"][k], -r["judged"][k]))
            tail = "".join(
                f"; {k[0]}/{k[1]} {share(r['rejected'][k], r['judged'][k])}" for k in ranked[:3]
            )  # the three hottest slices, each with its own Monte Carlo interval
            print(
                f"- slice vs rest, {name}, {setting}: pooled {share(rejected, tests)}; slices judged "
                f"{len(r['judged'])}, worst{tail or ' n/a'}; runs with a weak slice {r['any_weak_runs']}/{n_runs}"
            )


def paired(world, records_world, corpus, runs: int, n_boot: int) -> None:
    print("\n## Paired tests under equal expected F1 (pooled over judged slices)")
    for name, w in (("records as components", records_world), ("s8f components", world)):
        for a, b in (("independent", "whole"), ("whole", "whole"), ("heterogeneous", "independent")):
            r = W.paired_size(w, corpus, a, b, max(runs // 2, 1), n_boot)
            print(
                f"- paired, {name}, a {a} vs b {b}: equal-F1 test {share(*r['equal_f1'])}; "
                f"sign-flip (exchangeability) {share(*r['sign_flip'])}"
            )


def frontier(world, records_world, runs: int, n_boot: int) -> None:
    print("\n## Frontier: the beyond-these-records interval against a new test set's net-true")
    print("(printed: runs given an interval; covered: of those; refused: runs the no-interval rule fired)")
    worlds = (
        ("s8f's own test set, new sets from its components", world, {"fixed_observed": True}),
        ("observed drawn from s8f's components", world, {}),
        ("observed drawn from s8f's components without the giant", world, {"without_giant": True}),
        ("records as components, observed drawn", records_world, {}),
    )
    for miss in (0.0, 0.1):
        for name, w, kw in worlds:
            r = W.frontier_coverage(w, runs, n_boot, miss, **kw)
            print(
                f"- miss rate {miss:g}, {name}: covered {share(r['covered'], r['printed'])}; "
                f"refused {share(r['fired'], r['runs'])}"
            )


PARTS = ("coverage", "bands", "like", "sizes", "paired", "frontier")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--n-boot", type=int, default=2000)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if parts - set(PARTS):
        parser.error(f"--parts: unknown {sorted(parts - set(PARTS))}; choose from {', '.join(PARTS)}")
    paths = data.s8f()
    corpus, answers = load_corpus(paths.public), load_answers(paths.answers)
    world = W.make_world(corpus, answers)
    records_world = W.make_world(corpus, answers, W.per_record_components(world.records))
    print(f"# bench_coverage: {args.runs} runs per setting, n_boot={args.n_boot}, s8f ({world.n_components} test components)")
    print(f"# load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    started = time.perf_counter()
    if "coverage" in parts:
        coverage(world, corpus, args.runs, args.n_boot)
    if "bands" in parts:
        bands(world, corpus, args.runs, args.n_boot)
    if "like" in parts:
        like_for_like(world, records_world, corpus, args.runs, args.n_boot)
    if "sizes" in parts:
        sizes(world, records_world, corpus, args.runs, args.n_boot)
    if "paired" in parts:
        paired(world, records_world, corpus, args.runs, args.n_boot)
    if "frontier" in parts:
        frontier(world, records_world, max(args.runs, 200), args.n_boot)
    print(
        f"\n# {time.perf_counter() - started:.0f} s; load average at end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
