"""Two candidates on the same records, per slice: the paired comparison (`paired.csv`).

- on these records: `f1_a`, `f1_b`, `f1_diff`, `exact_a`, `exact_b`, `b10`, `b01` are exact.
- beyond these records: `f1_diff_ci_low/_high` (paired cluster bootstrap: one draw of components
  recomputes both F1s), given only when the slice is estimable (as in `slice_table`: enough
  components and effective components, and no single component whose removal moves the
  difference outside its interval; else `no_interval_reason`).
- two tests with two different nulls: `p_equal_f1`, a paired bootstrap t test (standard error of
  the paired bootstrap, t with n_eff - 1 degrees of freedom) of **equal expected F1**, which is
  what `significant` reads; and `p_value`, the component sign-flip test of **exchangeability**
  (a's and b's outcomes swapped inside random sets of components; exact up to 12 discordant
  components), which also rejects when two candidates have equal expected F1 but different
  error structure. `exact_p` is the sign-flip test on exact records (replacing McNemar).
  Each is Holm-adjusted (or Benjamini-Hochberg) over the judged slices of the pair.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from microctx.errors import InputError
from microctx.grading import counts as counting
from microctx.grading import estimate, stats
from microctx.grading.records import record_table

if TYPE_CHECKING:
    from microctx.corpus.public import Corpus

PAIRED_COLUMNS = (
    "slice_kind",
    "slice",
    "support",
    "too_small",
    "estimable",
    "no_interval_reason",
    "n_components",
    "n_eff",
    "records",
    "exact_a",
    "exact_b",
    "b10",
    "b01",
    "exact_p",
    "exact_p_adjusted",
    "f1_a",
    "f1_b",
    "f1_diff",
    "f1_diff_ci_low",
    "f1_diff_ci_high",
    "f1_diff_excludes_zero",
    "p_equal_f1",
    "p_equal_f1_adjusted",
    "p_value",
    "p_adjusted",
    "significant",
    "method",
)


def _exact_by_component(
    counts_a: counting.Counts, counts_b: counting.Counts, component: np.ndarray, n_components: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per slice and component: records with a slice fact under a or b, those exact under a, under b."""
    n = len(counts_a.records)
    union = np.zeros((n, n_components), dtype=np.int64)
    exact_a = np.zeros_like(union)
    exact_b = np.zeros_like(union)
    for i in range(n):
        records = np.union1d(counts_a.records[i], counts_b.records[i])
        union[i] = np.bincount(component[records], minlength=n_components)
        exact_a[i] = union[i] - np.bincount(component[counts_a.bad[i]], minlength=n_components)
        exact_b[i] = union[i] - np.bincount(component[counts_b.bad[i]], minlength=n_components)
    return union, exact_a, exact_b


def _flip_statistics(
    a_tot: np.ndarray, b_tot: np.ndarray
) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """Statistics of swapped candidates from kept sums K of a - b over components (columns
    tp, fp, fn, exact): a' = b + K and b' = a - K. Returns (F1 difference, exact difference)."""

    def f1_diff(kept: np.ndarray) -> np.ndarray:
        a = b_tot[None, :] + kept
        b = a_tot[None, :] - kept
        returned: np.ndarray = stats.f1_score(a[:, 0], a[:, 1], a[:, 2]) - stats.f1_score(b[:, 0], b[:, 1], b[:, 2])
        return returned

    def exact_diff(kept: np.ndarray) -> np.ndarray:
        returned: np.ndarray = (b_tot[3] + kept[:, 3]) - (a_tot[3] - kept[:, 3])
        return returned

    return f1_diff, exact_diff


def _flip_p_values(
    delta: np.ndarray,
    discordant: np.ndarray,
    a_tot: np.ndarray,
    b_tot: np.ndarray,
    judged: np.ndarray,
    n_boot: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Sign-flip p-values (F1 difference, exact records) of every judged slice."""
    n_slices, _, n_components = delta.shape
    f1_p, exact_p = np.full(n_slices, np.nan), np.full(n_slices, np.nan)
    monte_carlo = [i for i in range(n_slices) if judged[i] and discordant[i].sum() > stats.EXACT_FLIP_LIMIT]
    position = {i: j for j, i in enumerate(monte_carlo)}
    kept_mc = np.empty((0, 0, 4))
    if monte_carlo:
        rows = delta[monte_carlo].reshape(len(monte_carlo) * 4, n_components).T  # (G, len(mc) * 4)
        rows = rows[(rows != 0).any(axis=1)]
        profiles, multiplicity = stats.compress(rows)
        kept_mc = (stats.binomial_flips(multiplicity, n_boot, seed + 1) @ profiles).reshape(n_boot, len(monte_carlo), 4)
    observed_exact = a_tot[:, 3] - b_tot[:, 3]
    for i in map(int, np.flatnonzero(judged)):
        f1_stat, exact_stat = _flip_statistics(a_tot[i], b_tot[i])
        observed_f1 = float(f1_stat(np.zeros((1, 4)))[0]) * -1  # F1(a) - F1(b): the statistic with nothing kept, negated
        if i in position:
            kept = kept_mc[:, position[i]]
            f1_p[i] = stats.sign_flip_p_monte_carlo(f1_stat(kept)[:, None], np.array([observed_f1]))[0]
            exact_p[i] = stats.sign_flip_p_monte_carlo(exact_stat(kept)[:, None], np.array([observed_exact[i]]))[0]
        else:
            d = delta[i][:, discordant[i]].T  # (k, 4)
            f1_p[i] = stats.sign_flip_exact(d, f1_stat, observed_f1)
            exact_p[i] = stats.sign_flip_exact(d, exact_stat, observed_exact[i])
    return f1_p, exact_p


def _diff_estimability(
    by_a: np.ndarray,
    by_b: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    n_comp: np.ndarray,
    n_eff: np.ndarray,
    roots: np.ndarray,
    min_components: int,
    min_n_eff: float,
) -> tuple[np.ndarray, list[str]]:
    """(estimable, reasons) of the F1 difference: the slice table's rule, on a - b."""
    tot_a, tot_b = by_a.sum(axis=2), by_b.sum(axis=2)
    present = (by_a[:, :3].sum(axis=1) + by_b[:, :3].sum(axis=1)) > 0
    ra = tot_a[:, :3, None] - by_a[:, :3]
    rb = tot_b[:, :3, None] - by_b[:, :3]
    loo = stats.f1_score(ra[:, 0], ra[:, 1], ra[:, 2]) - stats.f1_score(rb[:, 0], rb[:, 1], rb[:, 2])
    point = stats.f1_score(tot_a[:, 0], tot_a[:, 1], tot_a[:, 2]) - stats.f1_score(tot_b[:, 0], tot_b[:, 1], tot_b[:, 2])
    shift = np.where(present & ~np.isnan(loo), np.abs(loo - point[:, None]), -1.0)
    masked = np.where(present & ~np.isnan(loo), loo, np.nan)
    has = np.asarray((~np.isnan(masked)).any(axis=1), dtype=bool)
    summary = {
        "low": np.where(has, np.nanmin(np.where(has[:, None], masked, 0), axis=1), np.nan),
        "high": np.where(has, np.nanmax(np.where(has[:, None], masked, 0), axis=1), np.nan),
    }
    rests_on = [f"#{roots[j]}" for j in shift.argmax(axis=1)] if shift.shape[1] else [""] * len(point)
    return estimate.estimability(
        n_comp, n_eff, (low, high), summary, rests_on, min_components=min_components, min_n_eff=min_n_eff
    )


def _equal_f1_test(diff_reps: np.ndarray, observed: np.ndarray, n_eff: np.ndarray, judged: np.ndarray) -> np.ndarray:
    """Two-sided paired bootstrap t test of equal expected F1 (t with n_eff - 1 df) per judged slice."""
    from microctx.grading.special import stdtr

    p = np.full(len(observed), np.nan)
    if not judged.any() or diff_reps.shape[0] < 2:
        return p
    se = np.sqrt(estimate.nan_var(diff_reps[:, judged]))
    d = observed[judged]
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(se > 0, np.abs(d) / np.where(se > 0, se, 1), np.where(d == 0, 0.0, np.inf))
    p[judged] = np.minimum(1.0, 2 * stdtr(np.maximum(n_eff[judged] - 1, 1.0), -t))
    return p


def _paired_counts(
    facts_a: pd.DataFrame, facts_b: pd.DataFrame, records: pd.DataFrame, group_by: Sequence[str]
) -> tuple[list[counting.Spec], counting.Counts, counting.Counts, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    prepared = [counting.prepare(facts_a, records, "facts a"), counting.prepare(facts_b, records, "facts b")]
    specs = counting.slice_specs(prepared, records, group_by)
    component, n_components = counting.scored_components(prepared, records)
    counts_a, counts_b = (counting.count(p, specs, component, n_components) for p in prepared)
    support_a = counts_a.totals[:, 0] + counts_a.totals[:, 2]
    support_b = counts_b.totals[:, 0] + counts_b.totals[:, 2]
    if support_a[0] != support_b[0] or (support_a != support_b).any():
        raise InputError(
            facts_b.attrs.get("path", "facts b"),
            f"gold facts differ from facts a ({support_b[0]} against {support_a[0]}): "
            "paired comparison needs grades against the same answers",
        )
    union, exact_a, exact_b = _exact_by_component(counts_a, counts_b, component, n_components)
    by_a = np.concatenate([counts_a.by_component[:, :3], exact_a[:, None]], axis=1)  # (S, 4, G)
    by_b = np.concatenate([counts_b.by_component[:, :3], exact_b[:, None]], axis=1)
    roots = np.zeros(n_components, dtype=np.int64)
    roots[component[component >= 0]] = records["component"].to_numpy()[component >= 0]
    return specs, counts_a, counts_b, support_a, by_a, by_b, roots


def paired_comparison(
    facts_a: pd.DataFrame,
    facts_b: pd.DataFrame,
    corpus: Corpus,
    *,
    n_boot: int = stats.DEFAULT_N_BOOT,
    seed: int = stats.DEFAULT_SEED,
    min_support: int = stats.DEFAULT_MIN_SUPPORT,
    min_components: int = stats.DEFAULT_MIN_COMPONENTS,
    min_n_eff: float = stats.DEFAULT_MIN_N_EFF,
    alpha: float = stats.ALPHA,
    adjustment: str = stats.ADJUSTMENT,
    group_by: Sequence[str] = (),
    records: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Candidate a against candidate b on the same records, per slice (every slice kind); see the
    module docstring. Both fact tables must come from the same answers (equal gold support)."""
    counting.check_options(n_boot, min_support, min_components, alpha, adjustment, min_n_eff)
    records = record_table(corpus) if records is None else records
    specs, counts_a, counts_b, support, by_a, by_b, roots = _paired_counts(facts_a, facts_b, records, group_by)
    n_slices, n_components = len(specs), by_a.shape[2]
    a_tot, b_tot = by_a.sum(axis=2).astype(np.float64), by_b.sum(axis=2).astype(np.float64)
    weights = by_a[:, :3].sum(axis=1) + by_b[:, :3].sum(axis=1)
    n_comp, n_eff = (weights > 0).sum(axis=1), stats.kish_n_eff(weights, axis=1)
    joint = np.ascontiguousarray(np.concatenate([by_a[:, :3], by_b[:, :3]], axis=1).reshape(n_slices * 6, n_components).T)
    reps = stats.bootstrap_totals(joint, n_boot, seed).reshape(n_boot, n_slices, 6)
    diff = stats.f1_score(reps[..., 0], reps[..., 1], reps[..., 2]) - stats.f1_score(reps[..., 3], reps[..., 4], reps[..., 5])
    low, high, _ = stats.percentile_interval(diff)
    estimable, reasons = _diff_estimability(by_a, by_b, low, high, n_comp, n_eff, roots, min_components, min_n_eff)
    low, high = np.where(estimable, low, np.nan), np.where(estimable, high, np.nan)
    f1_a = stats.f1_score(a_tot[:, 0], a_tot[:, 1], a_tot[:, 2])
    f1_b = stats.f1_score(b_tot[:, 0], b_tot[:, 1], b_tot[:, 2])
    too_small = support < min_support
    judged = estimable & ~too_small
    delta = (by_a - by_b).astype(np.float64)  # (S, 4, G)
    f1_p, exact_p = _flip_p_values(delta, (delta != 0).any(axis=1), a_tot, b_tot, judged, n_boot, seed)
    equal_p = _equal_f1_test(diff, f1_a - f1_b, n_eff, judged)
    adjust = stats.ADJUSTMENTS[adjustment]
    columns = {
        "slice_kind": [s.kind for s in specs], "slice": [s.name for s in specs], "support": support.astype(np.int64),
        "too_small": too_small, "estimable": estimable,
        "no_interval_reason": ["" if e else r for e, r in zip(estimable, reasons)],
        "n_components": n_comp, "n_eff": n_eff,
        **_exact_columns(counts_a, counts_b, a_tot, b_tot, n_slices),
        "exact_p": exact_p, "exact_p_adjusted": adjust(exact_p), "f1_a": f1_a, "f1_b": f1_b, "f1_diff": f1_a - f1_b,
        "f1_diff_ci_low": low, "f1_diff_ci_high": high, "f1_diff_excludes_zero": (low > 0) | (high < 0),
        "p_equal_f1": equal_p, "p_equal_f1_adjusted": adjust(equal_p), "p_value": f1_p, "p_adjusted": adjust(f1_p),
    }  # fmt: skip
    columns["significant"] = judged & (columns["p_equal_f1_adjusted"] < alpha)
    columns["method"] = _method(n_components, n_boot, seed, adjustment, int(judged.sum()), min_support, min_components,
                                min_n_eff, alpha)  # fmt: skip
    return pd.DataFrame(columns)[list(PAIRED_COLUMNS)]


def _exact_columns(
    counts_a: counting.Counts, counts_b: counting.Counts, a_tot: np.ndarray, b_tot: np.ndarray, n_slices: int
) -> dict[str, Any]:
    union = [len(np.union1d(counts_a.records[i], counts_b.records[i])) for i in range(n_slices)]
    b10 = [len(np.setdiff1d(counts_b.bad[i], counts_a.bad[i])) for i in range(n_slices)]
    b01 = [len(np.setdiff1d(counts_a.bad[i], counts_b.bad[i])) for i in range(n_slices)]
    return {"records": union, "exact_a": a_tot[:, 3].astype(np.int64), "exact_b": b_tot[:, 3].astype(np.int64),
            "b10": b10, "b01": b01}  # fmt: skip


def _method(
    n_components: int,
    n_boot: int,
    seed: int,
    adjustment: str,
    judged: int,
    min_support: int,
    min_components: int,
    min_n_eff: float,
    alpha: float,
) -> str:
    return (
        f"on these records: f1_a, f1_b, f1_diff and the exact-record counts are exact; beyond these records: "
        f"f1_diff's 95% paired percentile cluster bootstrap over {n_components} split components "
        f"(n_boot={n_boot}, seed={seed}), given only when estimable; p_equal_f1: two-sided paired bootstrap t test "
        f"of equal expected F1 (t with n_eff - 1 df; significant reads it); p_value / exact_p: two-sided component "
        f"sign-flip tests of exchangeability, of the F1 difference / of exact records (exact up to "
        f"{stats.EXACT_FLIP_LIMIT} discordant components, else {n_boot} random flips, seed={seed + 1}); each "
        f"{adjustment}-adjusted over {judged} judged slices (support >= {min_support}, at least {min_components} "
        f"components, n_eff >= {min_n_eff:g}, leave-one-component-out check), alpha={alpha:g}"
    )
