"""A slice table's weak test: each slice against the rest of its family (docs/statistics.md).

- `families(specs, counts, parts_index, rules, test) -> Families`: what the test needs from the
  totals alone (each slice's family, its rest's size and estimability, too small, record-level),
  and which slices may get an interval or be judged (so only their replicates are drawn).
- `judge(specs, counts, reps, fams, est, test) -> Verdict`: judged, p-values, weak, minimum
  detectable gaps, the rest's F1 and why a slice is not judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from microctx.grading import counts as counting
from microctx.grading import estimate, stats
from microctx.grading.intervals import Estimates, Rules
from microctx.grading.replicates import Replicates

SAME_KINDS, STANDARDISED = "same fact kinds", "standardised to the slice's fact-kind mix"


@dataclass(frozen=True)
class Test:
    """The weak test's settings: `min_support` gold facts to be judged, the level `alpha`, the
    multiplicity `adjustment` (`stats.ADJUSTMENTS`) and the F1 gap `min_gap` it tests beyond."""

    min_support: int
    alpha: float
    adjustment: str
    min_gap: float


@dataclass(frozen=True)
class Families:
    """Per slice, from the totals alone: its `family` (-1 for the overall row; `fam` the same with
    0 there), its rest's n_eff and whether that rest is estimable, its support, whether it is too
    small and record-level, whether it may get an interval (`interval`) and whether the test may
    judge it through its parts (`maybe`); `parts_index` (`counts.kind_specs`)."""

    family: np.ndarray
    fam: np.ndarray
    rest_n_eff: np.ndarray
    rest_ok: np.ndarray
    support: np.ndarray
    too_small: np.ndarray
    record_level: np.ndarray
    maybe: np.ndarray
    interval: np.ndarray
    parts_index: np.ndarray


@dataclass(frozen=True)
class Verdict:
    """Per slice: judged, too small, p-value (NaN when not judged) and its adjusted value, weak,
    the minimum detectable F1 gap, the rest's F1, why it is not judged, and its rest's mix."""

    judged: np.ndarray
    too_small: np.ndarray
    p_value: np.ndarray
    p_adjusted: np.ndarray
    weak: np.ndarray
    mdd: np.ndarray
    rest_f1: np.ndarray
    reasons: list[str]
    mix: list[str]


def families(
    specs: Sequence[counting.Spec],
    counts: counting.Counts,
    parts_index: np.ndarray,
    n_eff: np.ndarray,
    rules: Rules,
    test: Test,
) -> Families:
    """What the weak test needs from the totals alone (see `Families`); `n_eff`: Kish's n_eff of
    each slice's F1 (`intervals.metric_n_eff`)."""
    n = len(specs)
    totals, weights = counts.totals, counts.facts_per_component
    family = counting.family_of(specs)
    fam = np.where(family >= 0, family, 0)
    rest_w = np.clip(weights[fam] - weights[:n], 0, None)
    rest_n_eff = stats.kish_n_eff(rest_w, axis=1)
    rest_ok = ((rest_w > 0).sum(axis=1) >= rules.min_components) & (rest_n_eff >= rules.min_n_eff)
    support = totals[:n, 0] + totals[:n, 2]
    too_small = support < test.min_support
    record_level = (parts_index[:, 0] >= 0) & (family >= 0)
    n_comp = (weights[:n] > 0).sum(axis=1)
    # the slices whose intervals estimability reads (enough components and effective components)
    interval = (n_comp >= rules.min_components) & (n_eff >= rules.min_n_eff)
    # a superset of the record-level slices the weak test judges: their parts are resampled
    maybe = record_level & ~too_small & rest_ok & interval
    return Families(family, fam, rest_n_eff, rest_ok, support, too_small, record_level, maybe, interval, parts_index)


def _rest_q(counts: counting.Counts, fams: Families, n: int) -> np.ndarray:
    """q = tp / (tp + fp + fn) of every slice's rest (record-level: standardised to its mix)."""
    totals, fam = counts.totals, fams.fam
    rest_tot = (totals[fam] - totals[:n])[:, :3].astype(np.float64)
    for i in np.flatnonzero(fams.record_level):
        own, base = n + fams.parts_index[i], n + fams.parts_index[fam[i]]
        rest_tot[i] = estimate.standardised_rest(totals[own], totals[base])
    return estimate.f1_share(rest_tot)


def _rest_q_replicates(reps: Replicates, fams: Families, chosen: np.ndarray) -> np.ndarray:
    """(n_boot, len(chosen)) replicates of q of the rests of the `chosen` slices (record-level:
    from their parts, standardised to the slice's mix; else family minus slice)."""
    fam = fams.fam
    rest = np.empty((reps.slices.shape[0], len(chosen), 3), dtype=np.float64)
    for k, i in enumerate(chosen):
        if fams.record_level[i]:
            own = np.stack([reps.parts[p] for p in fams.parts_index[i]], axis=1)
            base = np.stack([reps.parts[p] for p in fams.parts_index[fam[i]]], axis=1)
            rest[:, k] = estimate.standardised_rest(own, base)
        else:
            pair = reps.of(np.array([fam[i], i]))
            rest[:, k] = pair[:, 0, :3] - pair[:, 1, :3]
    returned: np.ndarray = estimate.f1_share(rest)
    return returned


def _not_judged(spec: counting.Spec, support: float, min_support: int, estimable: bool, reason: str, rest_ok: bool) -> str:
    """Why the weak test does not judge a slice (the first reason that holds), or "" when it may."""
    if spec.kind == "overall":
        return "overall row: no rest to compare with"
    if support < min_support:
        return f"{int(support)} gold facts, fewer than {min_support}"
    if not estimable:
        return reason
    return "" if rest_ok else "its rest is not estimable"


def judge(
    specs: Sequence[counting.Spec], counts: counting.Counts, reps: Replicates, fams: Families, est: Estimates, test: Test
) -> Verdict:
    """Slice against the rest of its family: judged, p-values, weak, minimum detectable gaps."""
    n, family = len(specs), fams.family
    rest_q = _rest_q(counts, fams, n)
    judged = (family >= 0) & est.estimable & ~fams.too_small & fams.rest_ok
    q = estimate.f1_share(counts.totals[:n])
    rest_f1 = np.where(family >= 0, estimate.f1_of_q(rest_q), np.nan)
    p_value, mdd = np.full(n, np.nan), np.full(n, np.nan)
    if judged.any():
        chosen = np.flatnonzero(judged)
        p, m = estimate.rest_test(
            (q[judged], rest_q[judged]),
            (estimate.f1_share(reps.of(chosen)), _rest_q_replicates(reps, fams, chosen)),
            (est.n_eff[judged], fams.rest_n_eff[judged]), test.alpha, int(judged.sum()), test.min_gap,
        )  # fmt: skip
        p_value[judged], mdd[judged] = p, m
    p_adjusted = stats.ADJUSTMENTS[test.adjustment](p_value)
    without = est.loo["without_largest"]
    steady = without < rest_f1  # still below its rest without its largest component
    weak = judged & (p_adjusted < test.alpha) & np.where(np.isnan(without), True, steady)
    reasons = [
        _not_judged(s, fams.support[i], test.min_support, est.estimable[i], est.reasons[i], fams.rest_ok[i])
        for i, s in enumerate(specs)
    ]
    mix = [STANDARDISED if fams.record_level[i] else (SAME_KINDS if family[i] >= 0 else "") for i in range(n)]
    return Verdict(judged, fams.too_small, p_value, p_adjusted, weak, mdd, rest_f1, reasons, mix)
