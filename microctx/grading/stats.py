"""The statistics behind slice tables: cluster bootstrap, effective sizes, tests and adjustments.

Facts are not independent trials here: records joined by duplicate text or references (the split
components) succeed or fail together, and on s8f one component holds about half the test records.
So every interval and test in this module resamples or flips *components*, never facts or records,
and says so. The machinery is numpy only and vectorised; `slices` composes it into tables.

What each function assumes (the plain-words version is docs/statistics.md):
- `bootstrap_totals`: components are independent draws from a population of components (the
  cluster bootstrap). Components with identical count vectors are merged into one category
  before drawing, which is exact: drawing G components uniformly with replacement and counting
  how often each *kind* of component came up is a multinomial draw over the kinds with
  probabilities multiplicity / G. Exact in distribution, and far faster on large corpora. The
  counts of the kinds with few components come from uniform index draws, those of the others
  from numpy's multinomial, each the cheaper way for its kinds (`component_draws`): the same
  distribution.
- `percentile_interval`: the percentile interval of the replicates in which the statistic is
  defined; the number of replicates where it is not (no fact of the slice drawn) is returned,
  never dropped silently.
- `boundary_bound`: the exact one-sided Clopper-Pearson bound for n successes in n trials,
  alpha ** (1 / n); slices use it (through `estimate.korn_graubard`) with n = n_eff and alpha =
  the 2.5% tail of a two-sided 95% interval: "at least ...", not "exactly 1".
- `kish_n_eff`: Kish's effective number of components, (sum w)^2 / sum w^2 with w the facts per
  component: 10 components of which one holds 90% of the facts count as about 1.2.
- `holm`: Holm's step-down adjustment (family-wise error rate), valid under any dependence
  between the tests. `benjamini_hochberg` is offered for readers who prefer FDR control.
- `sign_flip_*`: the paired randomisation test over components. Under the null that candidates
  a and b are exchangeable within every component, swapping a's and b's outcomes inside any
  set of components leaves the distribution unchanged; the p-value is the share of swaps whose
  statistic is at least as extreme as the observed one (exact enumeration for up to
  `EXACT_FLIP_LIMIT` discordant components, Monte Carlo with the +1 correction beyond).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

Z95 = 1.959963984540054  # two-sided 95% normal quantile
CONFIDENCE = 0.95
ALPHA = 0.05
DEFAULT_N_BOOT = 10_000
DEFAULT_SEED = 0
DEFAULT_MIN_SUPPORT = 20
DEFAULT_MIN_COMPONENTS = 10
# effective components a slice needs for a beyond-these-records interval (see docs/statistics.md for how it
# was chosen; coverage by n_eff band:
# benchmarks/bench_coverage.py, docs/statistics.md)
DEFAULT_MIN_N_EFF = 10.0
ADJUSTMENT = "holm"
EXACT_FLIP_LIMIT = 12  # 2**12 = 4,096 swaps enumerated exactly
BLOCK = 1000  # replicates drawn per block (memory stays small on large corpora)
# categories of fewer components than this are drawn as one integer per component drawn, the others
# by numpy's multinomial (one of its binomials costs about as much as 10-15 index draws)
INDEX_DRAWS_BELOW = 16
INDEX_BLOCK_DRAWS = 2**21  # integers per block of index draws


# the one name of the slice tables' (and sweeps') intervals, wherever a table, chart or export names them
INTERVAL_NAME = "Korn-Graubard interval"
INTERVAL_METHOD = (
    "Korn-Graubard: Clopper-Pearson at the effective size a cluster bootstrap over split components implies "
    "(components resampled, not records; capped at Kish's n_eff)"
)

# what a report prints (markdown) so every interval states what it assumes; docs/statistics.md says more
METHOD_SUMMARY = (
    "**How these numbers were made.** Every row answers two questions. **On these records:** the counts, "
    "precision, recall and F1 are the exact figures of this frozen test set; for a deterministic candidate "
    "nothing about them is uncertain, and no interval is given for them. **Beyond these records:** the "
    "interval says what a new test set drawn the same way would show. Facts are not independent: records "
    "linked by duplicate text or references (a *split component*) succeed or fail together, and one component "
    "can hold half the test records, so the interval comes from resampling whole components (a cluster "
    "bootstrap, 10,000 times by default, fixed seed) and is Clopper-Pearson's at the effective size that "
    "resampling implies (Korn and Graubard's interval; a slice with every fact right reads `at least ...`, "
    "every fact wrong `at most ...`, at the same 2.5% tail as every other end). It assumes three things: "
    "(1) components are independent of each other; (2) they are alike, so the ones we have stand for the "
    "ones a new test set would bring; (3) there are enough *effective* components (`n_eff`, Kish's count: "
    "one component with half the facts makes 257 components worth about 3). When (3) fails (fewer than 10 "
    "components or n_eff below 10) or (2) visibly fails (leaving out one component moves the value outside "
    "its interval, and the value lies outside the interval without it), the row gets no interval and no verdict, and `no_interval_reason` names the component it "
    "rests on; (1) cannot be checked from one test set, and is what every interval here takes on trust. "
    "A slice is *weak* when it is judged (support, estimable, and an estimable rest) and a one-sided test "
    "(Fisher's exact test at the same effective sizes) finds its share of right facts below "
    "that of the rest of its family (the other labels for a label, the other cue words for a cue word, all "
    "other facts otherwise; for record-level slices the rest is reweighted to the slice's mix of fact kinds), "
    "with p-values Holm-adjusted over every judged slice at 0.05, and it is still below without its largest "
    'component. `min_detectable_gap` is the F1 gap that test would find with 80% power: "not weak" means no '
    "gap that large, not no gap. Paired comparisons give two tests with two nulls: `p_equal_f1` (equal "
    "expected F1; `significant` reads it) and the sign-flip `p_value` (the candidates are exchangeable inside "
    "every component; it also rejects when error structures differ). `train_support` and `tune_support` count "
    "each slice's facts in the training and tuning records: a weak label with few training examples is label "
    "shift. Several candidates or pairs in one report: each table is adjusted on its own (see the note)."
)


def family_wise_note(n_candidates: int, n_pairs: int = 0) -> str:
    """What a report holding several candidates (or pairs) does and does not guarantee (markdown)."""
    if n_candidates <= 1 and n_pairs <= 1:
        return ""
    return (
        f"**Several candidates ({n_candidates}) and pairs ({n_pairs}) in one report.** Holm's adjustment "
        "holds the chance of any false finding at 5% within one candidate's slice table, or within one "
        "pair's paired table, not across them: with k tables, up to about k x 5% of reports would show at "
        "least one false finding somewhere. Read a finding in one table as that table's, or multiply its "
        f"adjusted p-value by {max(n_candidates, n_pairs)} (Bonferroni across the tables) for a report-wide claim."
    )


# ---------------------------------------------------------------- classic helpers


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n *independent* trials; (nan, nan) when n == 0.

    Not used for slice intervals (facts are clustered); kept as the reference an independence
    assumption would give, e.g. to measure how much clustering widens an interval.
    """
    if n <= 0:
        return (math.nan, math.nan)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(b01: int, b10: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of min(b01, b10) in b01 + b10 at 1/2.

    It treats records as independent; the paired comparison uses the component-level sign-flip
    test instead (to which this is equal when every discordant component holds one record).
    """
    n = b01 + b10
    if n == 0:
        return 1.0
    tail, term = 0, 1  # exact integers: term walks C(n, 0), C(n, 1), ... C(n, min)
    for i in range(min(b01, b10) + 1):
        tail += term
        term = term * (n - i) // (i + 1)
    returned: float = min(1.0, 2 * tail / 2**n)  # int / int is correctly rounded, even for huge n
    return returned


def kish_n_eff(weights: np.ndarray, axis: int = -1) -> np.ndarray:
    """Kish's effective sample size (sum w)^2 / sum w^2 along `axis`; 0 where every weight is 0."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum(axis=axis)
    squares = (w * w).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(squares > 0, total * total / np.where(squares > 0, squares, 1), 0.0)


def boundary_bound(n: np.ndarray | int, alpha: float = ALPHA) -> np.ndarray:
    """Exact one-sided lower bound on a success probability after n successes in n independent
    trials (Clopper-Pearson): alpha ** (1 / n). NaN for n == 0. 1 - bound is the upper bound
    after n failures in n trials."""
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, alpha ** (1 / np.where(n > 0, n, 1)), np.nan)


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values; NaN entries are not tests (left NaN, not counted)."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = len(idx)
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="mergesort")]
    steps = p[order] * (m - np.arange(m))
    out[order] = np.minimum(1.0, np.maximum.accumulate(steps))
    return out


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values (false discovery rate); NaN left out."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = len(idx)
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="mergesort")]
    steps = p[order] * m / np.arange(1, m + 1)
    out[order] = np.minimum(1.0, np.minimum.accumulate(steps[::-1])[::-1])
    return out


ADJUSTMENTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"holm": holm, "bh": benjamini_hochberg}


# ---------------------------------------------------------------- ratios


def ratio(num: npt.ArrayLike, den: npt.ArrayLike) -> np.ndarray:
    """num / den elementwise, NaN where den == 0."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast_shapes(num.shape, den.shape), np.nan)
    np.divide(num, den, out=out, where=den > 0)  # the same quotients, without the two selections' copies
    return out


def f1_score(tp: npt.ArrayLike, fp: npt.ArrayLike, fn: npt.ArrayLike) -> np.ndarray:
    """2tp / (2tp + fp + fn), NaN when there is no fact at all."""
    tp = np.asarray(tp, dtype=np.float64)
    return ratio(2 * tp, 2 * tp + np.asarray(fp, dtype=np.float64) + np.asarray(fn, dtype=np.float64))


# ---------------------------------------------------------------- the cluster bootstrap


def distinct(values: npt.ArrayLike) -> np.ndarray:
    """The sorted distinct values of a 1-d array, as `np.unique(values)` gives them, without its
    masked-array check (which imports numpy.ma, about 12 ms, on a command's first call)."""
    return distinct_sorted(np.sort(np.asarray(values).ravel()))


def distinct_sorted(ordered: np.ndarray) -> np.ndarray:
    """The distinct values of an already sorted 1-d array (no sort)."""
    if len(ordered) < 2:
        return ordered
    returned: np.ndarray = ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])]
    return returned


def compress(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge identical rows: (distinct rows in a fixed order, how many times each occurs).

    The order is that of the rows' bytes, so the result depends on the data alone. The rows are
    grouped by a 64-bit hash of their bytes (`_hash_groups`: one matrix-vector product), checked
    row by row against their group's first row, and only the distinct rows are sorted by their
    bytes; where two different rows share a hash, every row is sorted by its bytes instead (the
    same result, slower: at 100,000 records 24,339 rows of 3.7 kB, 0.11 s against 0.02 s).
    """
    rows = np.ascontiguousarray(rows)
    if rows.shape[0] == 0:
        return rows.reshape(0, rows.shape[1] if rows.ndim == 2 else 0), np.zeros(0, dtype=np.int64)
    width = rows.dtype.itemsize * rows.shape[1]
    if width == 0:
        return rows[:1], np.array([rows.shape[0]], dtype=np.int64)
    groups = _hash_groups(rows)
    if groups is None:
        keys = rows.view(np.dtype((np.void, width))).ravel()
        _, first, counts = np.unique(keys, return_index=True, return_counts=True)
        return rows[first], counts.astype(np.int64)
    first, counts = groups
    order = np.argsort(rows[first].view(np.dtype((np.void, width))).ravel())  # distinct keys: no ties
    return rows[first[order]], counts[order]


def _hash_groups(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(each group's first row, its size) of the C-contiguous 2-d `rows` grouped by equal bytes,
    or None when two different rows hash alike (or the rows do not fill whole 8-byte words)."""
    if (rows.dtype.itemsize * rows.shape[1]) % 8:
        return None
    words = rows.view(np.uint64)
    hashes = words @ _mixers(words.shape[1])  # wraps modulo 2**64
    _, first, inverse, counts = np.unique(hashes, return_index=True, return_inverse=True, return_counts=True)
    group_first = first[inverse.reshape(-1)]
    step = max(1, (4 << 20) // (rows.dtype.itemsize * rows.shape[1]))  # compared 4 MB at a time, not copied whole
    for start in range(0, rows.shape[0], step):
        if not np.array_equal(rows[start : start + step], rows[group_first[start : start + step]]):
            return None
    return first, counts.astype(np.int64)


def _mixers(n: int) -> np.ndarray:
    """`n` fixed odd 64-bit multipliers (splitmix64 of 1..n): a hash, not a random stream."""
    z = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: np.ndarray = (z ^ (z >> np.uint64(31))) | np.uint64(1)
    return mixed


def component_draws(multiplicity: np.ndarray, n_boot: int, seed: int) -> Iterator[np.ndarray]:
    """Cluster-bootstrap draws over merged components: blocks of (replicates, categories) int64 counts.

    Each replicate draws G = multiplicity.sum() components uniformly with replacement; a row says
    how many of the draws fell in each category (a multinomial draw with probabilities
    multiplicity / G). It is made in two exact parts, each the cheaper way for its categories:
    - how many of the G draws fall among the categories of fewer than `INDEX_DRAWS_BELOW`
      components (S of the G components): Binomial(G, S / G);
    - those draws as uniform integers in [0, S), component i of category k being one of that
      category's multiplicity[k] consecutive indices (about 10-25 ns per component drawn);
    - the others by numpy's multinomial over the larger categories (K conditional binomials,
      about 95 ns per category, whatever its size).
    Given the split, the two parts are independent multinomials over their categories, so the
    counts are the multinomial over all. One generator seeded with `seed` makes every block, and
    the split and the block size follow from the multiplicities, so the draws depend on the seed,
    n_boot and the data alone.
    """
    rng = np.random.default_rng(seed)
    multiplicity = np.asarray(multiplicity, dtype=np.int64)
    total, k = int(multiplicity.sum()), len(multiplicity)
    small = np.flatnonzero(multiplicity < INDEX_DRAWS_BELOW)
    large = np.flatnonzero(multiplicity >= INDEX_DRAWS_BELOW)
    s = int(multiplicity[small].sum())
    category = np.repeat(np.arange(len(small), dtype=np.intp), multiplicity[small])
    block = max(1, min(BLOCK, INDEX_BLOCK_DRAWS // max(s, 1)))  # a block of index draws stays small in memory
    for start in range(0, n_boot, block):
        size = min(block, n_boot - start)
        out = np.zeros((size, k), dtype=np.int64)
        if total == 0:
            yield out
            continue
        in_small = np.full(size, s, dtype=np.int64) if s in (0, total) else rng.binomial(total, s / total, size=size)
        if s:
            rows = np.repeat(np.arange(size, dtype=np.intp) * len(small), in_small)
            rows += category[rng.integers(0, s, size=len(rows), dtype=np.uint16 if s <= 2**16 else np.uint32)]
            out[:, small] = np.bincount(rows, minlength=size * len(small)).reshape(size, len(small))
        if len(large):
            out[:, large] = rng.multinomial(total - in_small, multiplicity[large] / (total - s))
        yield out


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """The bootstrap's matrix products on one BLAS thread while inside (restored after): each
    block is a few milliseconds of work, and OpenBLAS's threads cost more CPU than they save
    (on a loaded 2-core machine 7 times the time of one thread). Nothing to do when the process
    started OpenBLAS with one thread (`microctx slices` does); without threadpoolctl (it comes
    with scikit-learn) the BLAS keeps its own setting."""
    if os.environ.get("OPENBLAS_NUM_THREADS") == "1":
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - installed with scikit-learn
        yield
        return
    with threadpool_limits(1, user_api="blas"):
        yield


def bootstrap_totals(per_component: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Cluster-bootstrap replicates of column totals: (n_boot, K) from (G components, K counts).

    Replicate r is the column sums over G components drawn with replacement (`component_draws`
    over the distinct rows, `compress`); float64 totals are exact below 2**53.
    """
    profiles, multiplicity = compress(np.asarray(per_component))
    weights = profiles.astype(np.float64)
    with one_blas_thread():
        parts = [draws.astype(np.float64) @ weights for draws in component_draws(multiplicity, n_boot, seed)]
    return np.vstack(parts) if parts else np.empty((0, per_component.shape[1]))


def percentile_interval(replicates: np.ndarray, level: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, undefined) per column of (replicates, columns): the central `level` percentile
    interval over the replicates that are not NaN, and how many were NaN (NaN bounds when all)."""
    values = np.asarray(replicates, dtype=np.float64)
    undefined = np.isnan(values).sum(axis=0)
    valid = values.shape[0] - undefined
    ordered = np.sort(values, axis=0)  # NaN sorts last, so each column's defined values come first
    tail = (1 - level) / 2
    bounds = []
    columns = np.arange(values.shape[1])
    for q in (tail, 1 - tail):
        # numpy's default ("linear") percentile over the valid values of each column
        position = q * np.maximum(valid - 1, 0)
        below = np.floor(position).astype(np.int64)
        above = np.minimum(below + 1, np.maximum(valid - 1, 0))
        if values.shape[0] == 0:
            bounds.append(np.full(values.shape[1], np.nan))
            continue
        low_value, high_value = ordered[below, columns], ordered[above, columns]
        with np.errstate(invalid="ignore"):
            bound = low_value + (position - below) * (high_value - low_value)
        bound = np.where(high_value == low_value, low_value, bound)  # no rounding drift on flat stretches
        bounds.append(np.where(valid > 0, bound, np.nan))
    return bounds[0], bounds[1], undefined


def bootstrap_p_worse(diff: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """One-sided bootstrap p-value that a difference is below -margin, per column.

    (1 + replicates with diff >= -margin or undefined) / (n + 1): the share of resamples in
    which the slice was not worse, with the +1 that keeps a p-value from being 0. Undefined
    replicates count as "not worse" (conservative).
    """
    d = np.asarray(diff, dtype=np.float64)
    not_worse = ~(d < -margin)  # NaN compares False, so NaN counts as not worse
    returned: np.ndarray = (1 + not_worse.sum(axis=0)) / (d.shape[0] + 1)
    return returned


# ---------------------------------------------------------------- the paired sign-flip test


def sign_flip_exact(
    delta: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], observed: float, tol: float = 1e-12
) -> float:
    """Exact two-sided sign-flip p-value over k components (k small: 2**k swaps enumerated).

    `delta`: (k, q) per component a-minus-b counts; `statistic(kept)` maps (n, q) sums of delta
    over the kept components to n statistic values. p = share of the 2**k keep/swap patterns
    whose |statistic| is at least |observed|.
    """
    k = delta.shape[0]
    patterns = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(np.float64)
    values = statistic(patterns @ delta)
    return float(np.mean(np.abs(values) >= abs(observed) - tol))


def binomial_flips(multiplicity: np.ndarray, n_flips: int, seed: int) -> np.ndarray:
    """Monte Carlo sign flips over merged components: (n_flips, categories) counts of the
    components kept (not swapped), Binomial(multiplicity, 1/2) per category."""
    rng = np.random.default_rng(seed)
    return rng.binomial(multiplicity[None, :], 0.5, size=(n_flips, len(multiplicity))).astype(np.float64)


def sign_flip_p_monte_carlo(values: np.ndarray, observed: np.ndarray, tol: float = 1e-12) -> np.ndarray:
    """(1 + flips with |statistic| >= |observed|) / (n + 1), per column of (flips, columns)."""
    v = np.asarray(values, dtype=np.float64)
    extreme = ~(np.abs(v) < np.abs(observed)[None, :] - tol)  # NaN counts as extreme (conservative)
    returned: np.ndarray = (1 + extreme.sum(axis=0)) / (v.shape[0] + 1)
    return returned


# ---------------------------------------------------------------- the Pareto front


def pareto_front(cost: Sequence[float], value: Sequence[float]) -> list[bool]:
    """For each point (cost[i], value[i]), whether it is on the Pareto front: lower cost and higher
    value are better, and a point is dominated only when another point is no worse in both and
    strictly better in one (so ties on both stay on the front together). A point with a NaN
    cost or value is never on the front, and never dominates another."""
    points = [(float(c), float(v)) for c, v in zip(cost, value, strict=True)]
    front = []
    for i, (c, v) in enumerate(points):
        if math.isnan(c) or math.isnan(v):
            front.append(False)
            continue
        beaten = any(
            j != i and not math.isnan(c2) and not math.isnan(v2) and c2 <= c and v2 >= v and (c2 < c or v2 > v)
            for j, (c2, v2) in enumerate(points)
        )
        front.append(not beaten)
    return front
