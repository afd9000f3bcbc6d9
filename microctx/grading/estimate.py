"""What a slice's numbers can say beyond its records: estimability, bounds, sensitivity and tests.

Two questions are kept apart everywhere (docs/statistics.md):
- *on these records*: the counts and metrics of the frozen test set. For a deterministic
  candidate they are exact; no interval is needed or given for them.
- *beyond these records*: what a new test set drawn the same way (new split components from the
  same population) would show. That is what every interval here answers, and it rests on three
  assumptions: components are independent, alike enough that resampling them mimics drawing
  new ones, and there are enough effective ones. When the last two visibly fail for a slice
  (too few effective components, or one component moves the value beyond its interval) the
  slice gets no interval and no verdict, and the row says why and which component it rests on.

Functions (numpy, vectorised over slices):
- `metric_points(totals)`: precision, recall, F1, exact-record rate from (..., 5) totals.
- `metric_weights(counts)`: per metric, the units each component contributes (the weights
  of its n_eff).
- `korn_graubard(point, replicates, n_eff, level)`: the interval of a clustered proportion
  (precision, recall, exact rate, and F1 through q = tp / (tp + fp + fn)): Clopper-Pearson at
  the effective size the cluster bootstrap's variance implies, capped at Kish's n_eff; a
  perfect (or all-wrong) slice gets (tail)^(1/n_eff), the same one-sided tail as every other end.
- `leave_one_out(totals, by_component)`: F1 without each component, the largest and the most
  influential one.
- `estimability(...)`: whether a slice gets an interval, and the reason when not.
- `standardised_rest(...)`: a record-level slice's rest reweighted to the slice's mix of fact kinds.
- `rest_test(...)`: one-sided test that a slice's expected F1 is below its rest's: Fisher's exact
  test at the effective sizes (the cluster bootstrap's, capped at n_eff), and the minimum
  detectable difference at 80% power (scipy.stats' tails through `discrete`, without its import).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from microctx.grading import stats

METRICS = ("precision", "recall", "f1", "exact_rate")
POWER = 0.80


def metric_points(totals: np.ndarray) -> dict[str, np.ndarray]:
    """precision, recall, f1, exact_rate from (..., 5) totals (tp, fp, fn, records, exact)."""
    tp, fp, fn, rec, exact = (totals[..., j] for j in range(5))
    return {
        "precision": stats.ratio(tp, tp + fp),
        "recall": stats.ratio(tp, tp + fn),
        "f1": stats.f1_score(tp, fp, fn),
        "exact_rate": stats.ratio(exact, rec),
    }


def metric_weights(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Per metric, the units of its denominator in (..., 5) counts (tp, fp, fn, records, exact):
    per component, these are the weights of its Kish n_eff."""
    tp, fp, fn, records = (counts[..., j] for j in range(4))
    return {"precision": tp + fp, "recall": tp + fn, "f1": tp + fp + fn, "exact_rate": records}


def f1_of_q(q: np.ndarray) -> np.ndarray:
    """F1 from the share q = tp / (tp + fp + fn) of right facts among all scored facts."""
    returned: np.ndarray = 2 * q / (1 + q)
    return returned


def clopper_pearson(p: np.ndarray, n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The central `level` Clopper-Pearson interval for x = p n successes in n trials (n may be
    fractional: the beta-quantile form); (0, 1]-ended at x = 0 or x = n; NaN where p is NaN or n <= 0."""
    from microctx.grading.special import betaincinv

    p, n = np.asarray(p, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(all="ignore"):
        x = p * n
        tail = (1 - level) / 2
        low = np.where(x > 0, betaincinv(np.maximum(x, 1e-300), n - x + 1, tail), 0.0)
        high = np.where(n - x > 0, betaincinv(x + 1, np.maximum(n - x, 1e-300), 1 - tail), 1.0)
    defined = ~np.isnan(p) & (n > 0)
    return np.where(defined, low, np.nan), np.where(defined, high, np.nan)


def korn_graubard(
    point: np.ndarray, replicates: np.ndarray, n_eff: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, effective size) of a clustered proportion: Korn and Graubard's interval.

    The Clopper-Pearson interval at the effective sample size n* = p(1 - p) / var, with var the
    cluster-bootstrap variance of the proportion over `replicates` (NaN replicates left out), capped
    at Kish's n_eff (`n_eff`): so a perfect (or all-wrong) slice, whose bootstrap cannot vary, gets
    (tail)^(1/n_eff) with tail = (1 - level) / 2, the same one-sided tail as each end of every other
    interval in the column, on the fact-weighted metric itself. Non-integer counts x = p n* use
    the beta-quantile form of Clopper-Pearson. Korn & Graubard (1998), Survey Methodology 24(2).
    """
    p = np.asarray(point, dtype=np.float64)
    with np.errstate(all="ignore"):
        var = nan_var(replicates)
        n_star = np.where(var > 0, p * (1 - p) / np.where(var > 0, var, 1), np.inf)
        n = np.minimum(n_star, np.asarray(n_eff, dtype=np.float64))
    low, high = clopper_pearson(p, n, level)
    defined = ~np.isnan(p) & (n > 0)
    return low, high, np.where(defined, n, np.nan)


def nan_var(values: np.ndarray) -> np.ndarray:
    """Sample variance per column over the defined (not NaN) values; 0 with fewer than two."""
    values = np.asarray(values, dtype=np.float64)
    defined = ~np.isnan(values)
    n = defined.sum(axis=0)
    filled = np.where(defined, values, 0.0)
    mean = filled.sum(axis=0) / np.maximum(n, 1)
    squares = (np.where(defined, values - mean, 0.0) ** 2).sum(axis=0)
    return np.where(n > 1, squares / np.maximum(n - 1, 1), 0.0)


def f1_share(totals: np.ndarray) -> np.ndarray:
    """q = tp / (tp + fp + fn) from (..., 5) totals: the proportion behind F1 = 2q / (1 + q)."""
    tp, fp, fn = (np.asarray(totals[..., j], dtype=np.float64) for j in range(3))
    return stats.ratio(tp, tp + fp + fn)


def leave_one_out(totals: np.ndarray, by_component: np.ndarray) -> dict[str, np.ndarray]:
    """F1 of every slice without each of its components, summarised per slice.

    Returns `without_largest` (F1 without the component holding most of the slice's facts),
    `largest` and `influential` (component indices; -1 for an empty slice), `low` and `high`
    (the smallest and largest leave-one-out F1), `shift` (the largest |change| of F1) and `back`:
    whether the slice's value lies outside the 95% Clopper-Pearson interval of the slice without
    its influential component (at that remainder's Kish n_eff). A component the slice *rests on*
    moves the value both ways; one missed fact among 20 independent ones moves it to 1, outside
    the interval, but 1 at 19 units does not exclude the value with it (`estimability`).
    """
    weights = by_component[:, :3].sum(axis=1)  # (S, G)
    if weights.shape[1] == 0:  # no component at all
        empty = np.full(weights.shape[0], np.nan)
        none = np.full(weights.shape[0], -1, dtype=np.int64)
        return {"without_largest": empty, "largest": none, "influential": none, "low": empty, "high": empty,
                "shift": empty, "back": np.zeros(weights.shape[0], dtype=bool)}  # fmt: skip
    present = weights > 0
    rest = totals[:, :3, None].astype(np.float64) - by_component[:, :3].astype(np.float64)
    loo = stats.f1_score(rest[:, 0], rest[:, 1], rest[:, 2])  # (S, G); NaN when nothing is left
    point = stats.f1_score(totals[:, 0], totals[:, 1], totals[:, 2])
    shift = np.where(present & ~np.isnan(loo), np.abs(loo - point[:, None]), -1.0)
    has = present.any(axis=1)
    largest = np.where(has, weights.argmax(axis=1), -1)
    influential = np.where(has, shift.argmax(axis=1), -1)
    rows = np.arange(len(point))
    masked = np.where(present, loo, np.nan)
    with np.errstate(all="ignore"):
        low = np.where(has, np.nanmin(np.where(np.isnan(masked), np.inf, masked), axis=1), np.nan)
        high = np.where(has, np.nanmax(np.where(np.isnan(masked), -np.inf, masked), axis=1), np.nan)
    return {
        "without_largest": np.where(has, loo[rows, np.maximum(largest, 0)], np.nan),
        "largest": largest,
        "influential": influential,
        "low": np.where(np.isfinite(low), low, np.nan),
        "high": np.where(np.isfinite(high), high, np.nan),
        "shift": np.where(has, np.maximum(shift.max(axis=1, initial=-1.0), 0), np.nan),
        "back": _excluded_without(totals, rest, weights, np.maximum(influential, 0)) & has,
    }


def _excluded_without(totals: np.ndarray, rest: np.ndarray, weights: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Per slice: whether its share q = tp / (tp + fp + fn) lies outside the 95% Clopper-Pearson
    interval of the slice without component j (at the remainder's Kish n_eff)."""
    rows = np.arange(len(j))
    q = f1_share(totals)
    kept = rest[rows, :, j]  # (S, 3) tp, fp, fn without component j
    q_without = stats.ratio(kept[:, 0], kept.sum(axis=1))
    w = weights.astype(np.float64)
    total, squares = w.sum(axis=1) - w[rows, j], (w * w).sum(axis=1) - w[rows, j] ** 2
    n_without = stats.ratio(total * total, squares)
    low, high = clopper_pearson(q_without, np.nan_to_num(n_without), stats.CONFIDENCE)
    tol = 1e-12
    returned: np.ndarray = ~np.isnan(low) & ((q < low - tol) | (q > high + tol))
    return returned


def estimability(
    n_components: np.ndarray,
    n_eff: np.ndarray,
    interval: tuple[np.ndarray, np.ndarray],
    loo: dict[str, np.ndarray],
    rests_on: Sequence[str],
    *,
    largest: Sequence[str] | None = None,
    min_components: int,
    min_n_eff: float,
) -> tuple[np.ndarray, list[str]]:
    """(estimable, reason per slice): a slice gets a beyond-these-records interval only with at
    least `min_components` components, an n_eff of at least `min_n_eff`, and every
    leave-one-component-out F1 inside its interval. The reason names the component it rests on:
    the largest (`largest`, default `rests_on`) for too little n_eff, the most influential
    (`rests_on`) when leaving it out moves the value (and, where `loo` has `back`, the value with
    it lies outside the interval of the slice without it: see `leave_one_out`)."""
    largest = rests_on if largest is None else largest
    low, high = interval
    tol = 1e-12
    stable = (loo["low"] >= low - tol) & (loo["high"] <= high + tol)
    stable = np.where(np.isnan(loo["low"]), True, stable)  # a single component: caught by the counts
    if "back" in loo:  # a proportion: it rests on the component only if the value with it is excluded without it too
        stable = stable | ~loo["back"]
    reasons = []
    for i in range(len(n_components)):
        if n_components[i] == 0:
            reasons.append("no scored fact")
        elif n_components[i] < min_components:
            reasons.append(f"{int(n_components[i])} components, fewer than {min_components}")
        elif n_eff[i] < min_n_eff:
            reasons.append(f"n_eff {n_eff[i]:.1f} below {min_n_eff:g}: rests on component {largest[i]}")
        elif np.isnan(low[i]):
            reasons.append("no defined resample")
        elif not stable[i]:
            reasons.append(
                f"leaving out component {rests_on[i]} moves F1 to {_moved(loo, i, low[i], high[i]):.3f}, "
                f"outside its interval: rests on that component"
            )
        else:
            reasons.append("")
    return np.array([not r for r in reasons], dtype=bool), reasons


def _moved(loo: dict[str, np.ndarray], i: int, low: float, high: float) -> float:
    return float(loo["low"][i] if loo["low"][i] < low else loo["high"][i])


def standardised_rest(slice_parts: np.ndarray, family_parts: np.ndarray) -> np.ndarray:
    """A record-level slice's rest, reweighted to the slice's mix of fact kinds.

    `slice_parts`, `family_parts`: (..., n_kinds, 3+) tp, fp, fn per fact kind of the slice and of
    its family. The rest's counts of kind k are scaled by (slice facts of k) / (rest facts of k),
    so the rest has the slice's mix; a kind the rest lacks contributes the slice's own counts to
    both sides (no evidence either way). Returns (..., 3) standardised tp, fp, fn.
    """
    s = slice_parts[..., :3].astype(np.float64)
    r = family_parts[..., :3].astype(np.float64) - s
    n_s, n_r = s.sum(axis=-1), r.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(n_r > 0, n_s / np.where(n_r > 0, n_r, 1), 0.0)
    own = (n_r <= 0)[..., None] * s
    returned: np.ndarray = (w[..., None] * r + own).sum(axis=-2)
    return returned


def effective_size(q: np.ndarray, replicates: np.ndarray, n_eff: np.ndarray) -> np.ndarray:
    """Korn-Graubard's effective size of a proportion: q(1 - q) / bootstrap variance, capped at
    Kish's n_eff (so a proportion at 0 or 1, whose bootstrap cannot vary, counts n_eff units)."""
    var = nan_var(replicates)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_star = np.where(var > 0, q * (1 - q) / np.where(var > 0, var, 1), np.inf)
    return np.minimum(n_star, np.asarray(n_eff, dtype=np.float64))


def effective_counts(q: np.ndarray, size: np.ndarray, *, round_up: bool) -> tuple[np.ndarray, np.ndarray]:
    """(units, failures): an effective size and its share 1 - q of wrong facts, in whole units for
    an exact test (at least one unit). Failures are rounded against rejecting: down for the slice
    (`round_up=False`), up for the rest (`round_up=True`), so the noise of a bootstrap effective size
    never makes a slice look worse (5 of 21 at a bootstrap size of 20.3 is 4 of 20, not 5 of 20);
    whole counts pass through unchanged."""
    with np.errstate(invalid="ignore"):
        units = np.maximum(np.rint(np.where(np.isfinite(size), size, 0.0)), 1.0)
        raw = (1 - np.nan_to_num(q)) * units
        failures = np.ceil(raw - 1e-9) if round_up else np.floor(raw + 1e-9)
    return units, np.clip(failures, 0, units)


def rest_test(
    q: tuple[np.ndarray, np.ndarray],
    replicates: tuple[np.ndarray, np.ndarray],
    n_eff: tuple[np.ndarray, np.ndarray],
    alpha: float,
    n_tests: int,
    min_gap: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(p-value, minimum detectable F1 difference) per judged slice.

    H0: the slice's expected share of right facts q = tp / (tp + fp + fn) (F1 = 2q / (1 + q), so
    the same order as F1) is not below its rest's (by more than `min_gap` in F1). Fisher's exact
    test at the effective sizes: each side counts n* = q(1 - q) / var units (Korn-Graubard, the
    cluster bootstrap's variance, capped at Kish's n_eff; rounded to whole units), of which a
    share 1 - q failed (rounded against rejecting: `effective_counts`); p = P(at least the slice's failures | the units and the failures of both
    sides), the hypergeometric tail. The same effective sizes as the intervals (Clopper-Pearson at
    n*), and exact where a normal or t reference runs hot: a slice of 20 to 40 facts at a 10%
    miss rate rejects up to 6.2% of the time under the t reference (the binomial tail jumps by
    whole facts), at most 5% under Fisher's (conditional size at most alpha). The minimum
    detectable difference is the F1 gap this test finds with 80% power at alpha / n_tests (Holm's
    first, strictest step; `detectable_gap`), converted from q to F1 at the pooled share q0.
    """
    from microctx.grading.discrete import hypergeom_sf

    (q_s, q_r), (reps_s, reps_r), (n_s, n_r) = q, replicates, n_eff
    size_s, size_r = effective_size(q_s, reps_s, n_s), effective_size(q_r, reps_r, n_r)
    with np.errstate(invalid="ignore", divide="ignore"):
        q0 = (q_s * size_s + q_r * size_r) / (size_s + size_r)
        gap_q = min_gap * (1 + q0) ** 2 / 2  # an F1 gap in q units (dF1/dq = 2 / (1 + q)^2)
    units_s, fail_s = effective_counts(q_s, size_s, round_up=False)
    units_r, fail_r = effective_counts(np.clip(q_r - gap_q, 0, 1), size_r, round_up=True)
    p = hypergeom_sf(fail_s - 1, units_s + units_r, fail_s + fail_r, units_s)
    p = np.where(np.isnan(q_s) | np.isnan(q_r), 1.0, np.clip(p, 0.0, 1.0))
    mdd_q = detectable_gap(q0, units_s, units_r, alpha / max(int(n_tests), 1))
    return p, f1_of_q(q0) - f1_of_q(np.clip(q0 - mdd_q, 0, 1))


def detectable_gap(q0: np.ndarray, units_s: np.ndarray, units_r: np.ndarray, level: float) -> np.ndarray:
    """The drop in q below q0 that the slice-vs-rest test finds with 80% power at `level`, the
    larger of two approximations of Fisher's test, each right where the other is weak:
    - the slice alone, the rest's share known (a small slice against a large rest): the exact
      binomial test of the slice's failures at 1 - q0 rejects from c failures on, and c failures
      come up with 80% chance when the failure rate is betaincinv(c, n - c + 1, 0.8);
    - the continuity-corrected normal test of two proportions at q0 (slice and rest both vary).
    A slice that cannot reject even with every fact wrong gets the whole gap q0."""
    from microctx.grading.discrete import binom_isf
    from microctx.grading.special import betaincinv, ndtri

    q0 = np.asarray(q0, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p0 = np.clip(1 - q0, 0.0, 1.0)
        c = binom_isf(level, units_s, p0) + 1  # the fewest failures that reject
        p1 = np.where(c <= units_s, betaincinv(np.maximum(c, 1), np.maximum(units_s - c + 1, 1e-300), POWER), 1.0)
        exact = np.where(np.isnan(q0), np.nan, np.maximum(p1 - p0, 0.0))
        se0 = np.sqrt(q0 * (1 - q0) * (1 / units_s + 1 / units_r))
        normal = (ndtri(1 - level) + ndtri(POWER)) * se0 + (1 / units_s + 1 / units_r) / 2
    returned: np.ndarray = np.minimum(np.maximum(exact, normal), q0)
    return returned
