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
- `metric_weights(by_component)`: per metric, the units each component contributes (the weights
  of its n_eff).
- `boundary(point, low, high, n_eff, level)`: a perfect (or all-wrong) slice's bound on the
  fact-weighted metric: `stats.boundary_bound(n_eff, (1 - level) / 2)`, the same one-sided
  (1 - level) / 2 tail as each end of the column's two-sided intervals.
- `leave_one_out(totals, by_component)`: F1 without each component, the largest and the most
  influential one.
- `estimability(...)`: whether a slice gets an interval, and the reason when not.
- `standardised_rest(...)`: a record-level slice's rest reweighted to the slice's mix of fact kinds.
- `rest_test(...)`: one-sided test that a slice's expected F1 is below its rest's, calibrated for
  few effective components (bootstrap standard error, Student t with n_eff - 1 degrees of freedom),
  and the minimum detectable difference at 80% power.
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


def metric_weights(by_component: np.ndarray) -> dict[str, np.ndarray]:
    """Per metric, (n_slices, n_components) units of its denominator in each component."""
    by = by_component.astype(np.int64)
    return {
        "precision": by[:, 0] + by[:, 1],
        "recall": by[:, 0] + by[:, 2],
        "f1": by[:, 0] + by[:, 1] + by[:, 2],
        "exact_rate": by[:, 3],
    }


def f1_of_q(q: np.ndarray) -> np.ndarray:
    """F1 from the share q = tp / (tp + fp + fn) of right facts among all scored facts."""
    return 2 * q / (1 + q)


def boundary(
    point: np.ndarray, low: np.ndarray, high: np.ndarray, n_eff: np.ndarray, level: float, f1: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Replace the degenerate bootstrap interval of a metric at exactly 1 (or 0).

    The bound is on the fact-weighted metric: with n_eff effective components all right, the
    Clopper-Pearson bound (tail / 2) ** (1 / n_eff) at the same one-sided tail as each end of the
    column's two-sided intervals (2.5% for 95%). For F1 it is taken on q = tp / (tp + fp + fn)
    and mapped by F1 = 2q / (1 + q). Checked by simulation (tests/test_slice_simulation.py).
    """
    bound = stats.boundary_bound(n_eff, (1 - level) / 2)
    lower, upper = bound, 1 - bound
    if f1:
        lower, upper = f1_of_q(lower), f1_of_q(upper)
    return np.where(point == 1, lower, low), np.where(point == 0, upper, high)


def leave_one_out(totals: np.ndarray, by_component: np.ndarray) -> dict[str, np.ndarray]:
    """F1 of every slice without each of its components, summarised per slice.

    Returns `without_largest` (F1 without the component holding most of the slice's facts),
    `largest` and `influential` (component indices; -1 for an empty slice), `low` and `high`
    (the smallest and largest leave-one-out F1) and `shift` (the largest |change| of F1).
    """
    weights = by_component[:, :3].sum(axis=1)  # (S, G)
    if weights.shape[1] == 0:  # no component at all
        empty = np.full(weights.shape[0], np.nan)
        none = np.full(weights.shape[0], -1, dtype=np.int64)
        return {"without_largest": empty, "largest": none, "influential": none, "low": empty, "high": empty, "shift": empty}
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
    }


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
    (`rests_on`) when leaving it out moves the value."""
    largest = rests_on if largest is None else largest
    low, high = interval
    tol = 1e-12
    stable = (loo["low"] >= low - tol) & (loo["high"] <= high + tol)
    stable = np.where(np.isnan(loo["low"]), True, stable)  # a single component: caught by the counts
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
    return (w[..., None] * r + own).sum(axis=-2)


def rest_test(
    diff: np.ndarray, diff_reps: np.ndarray, df: np.ndarray, alpha: float, n_tests: int
) -> tuple[np.ndarray, np.ndarray]:
    """(p-value, minimum detectable difference) per judged slice.

    H0: the slice's expected F1 is not below its rest's. The statistic is the observed difference
    over its cluster-bootstrap standard error, referred to Student's t with `df` (n_eff - 1) degrees
    of freedom, which widens the test when few effective components carry it. The minimum
    detectable difference is the gap this test finds with 80% power at the family-wise level
    alpha / n_tests (Holm's first step, the strictest).
    """
    from scipy.special import stdtr, stdtrit

    se = np.nanstd(diff_reps, axis=0, ddof=1) if diff_reps.shape[0] > 1 else np.full(diff.shape, np.nan)
    df = np.maximum(np.asarray(df, dtype=np.float64), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(se > 0, diff / np.where(se > 0, se, 1), np.where(diff < 0, -np.inf, np.inf))
    p = stdtr(df, t)
    level = alpha / max(int(n_tests), 1)
    mdd = (stdtrit(df, 1 - level) + stdtrit(df, POWER)) * se
    return np.where(np.isnan(diff), 1.0, p), mdd
