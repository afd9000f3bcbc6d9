"""A slice table's beyond-these-records intervals and whether each slice may have one.

- `intervals(totals, n_eff, reps, chosen) -> Metrics`: per metric (`estimate.METRICS`) the points, the
  Korn-Graubard intervals of the `chosen` slices, Kish's n_eff, and the replicates in which
  precision and recall are undefined.
- `estimates(specs, counts, metrics, roots, rules) -> Estimates`: estimability of each slice's F1
  interval with its reason, leave-one-component-out sensitivity, the component it rests on.
- `overall_metrics(per_component, ...)`: the overall row of a slice table from per-component
  counts alone (the tune metrics of sweeps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from microctx.grading import counts as counting
from microctx.grading import estimate, stats
from microctx.grading.replicates import Replicates, Request, bootstrap


@dataclass(frozen=True)
class Rules:
    """When a slice gets an interval: at least `min_components` components and `min_n_eff`
    effective ones (and the leave-one-component-out check, `estimate.estimability`)."""

    min_components: int
    min_n_eff: float


@dataclass(frozen=True)
class Metrics:
    """Per metric (`estimate.METRICS`), one value per slice."""

    points: dict[str, np.ndarray]
    intervals: dict[str, tuple[np.ndarray, np.ndarray]]  # (low, high), before estimability
    no_submitted: np.ndarray  # replicates in which precision is undefined
    no_gold: np.ndarray  # replicates in which recall is undefined
    n_eff: dict[str, np.ndarray]  # Kish's effective number of components


@dataclass(frozen=True)
class Estimates:
    """Per slice: estimable, the reason when not, leave-one-out summaries (`estimate.leave_one_out`),
    the component it rests on (`#root`), its components and the n_eff of its F1."""

    estimable: np.ndarray
    reasons: list[str]
    loo: dict[str, np.ndarray]
    rests_on: list[str]
    n_comp: np.ndarray
    n_eff: np.ndarray


def metric_n_eff(layout: np.ndarray) -> dict[str, np.ndarray]:
    """Kish's n_eff of each metric's units (`estimate.metric_weights`) per slice, from
    (n_components, n_slices, 5) per-component counts (sums of whole numbers: exact in any order)."""
    return {name: stats.kish_n_eff(w, axis=0) for name, w in estimate.metric_weights(layout).items()}


def intervals(totals: np.ndarray, n_eff: dict[str, np.ndarray], reps: Replicates, chosen: np.ndarray) -> Metrics:
    """Points and intervals per metric of `totals` (n, 5), with Kish's `n_eff` per metric
    (`metric_n_eff`) and the bootstrap `reps`. The intervals are Korn-Graubard's
    (`estimate.korn_graubard`), F1's through q = tp / (tp + fp + fn), for the `chosen` slices
    (held by `reps`; NaN for the others)."""
    points = estimate.metric_points(totals)
    out = {name: (np.full(len(totals), np.nan), np.full(len(totals), np.nan)) for name in estimate.METRICS}
    chosen = np.asarray(chosen, dtype=np.int64)
    if len(chosen):
        # never a single column: a one-column array sums its replicates pairwise, several columns
        # row by row, and a slice's numbers must not depend on how many slices are chosen (a lone
        # slice is taken twice; both copies write the same values)
        pick = np.repeat(chosen, 2) if len(chosen) == 1 else chosen
        picked = reps.of(pick)
        metrics = estimate.metric_points(picked)
        for name in ("precision", "recall", "exact_rate"):
            low, high, _ = estimate.korn_graubard(points[name][pick], metrics[name], n_eff[name][pick], stats.CONFIDENCE)
            out[name][0][pick], out[name][1][pick] = low, high
        q = estimate.f1_share(totals)[pick]
        low, high, _ = estimate.korn_graubard(q, estimate.f1_share(picked), n_eff["f1"][pick], stats.CONFIDENCE)
        out["f1"][0][pick], out["f1"][1][pick] = estimate.f1_of_q(low), estimate.f1_of_q(high)
    return Metrics(points, out, reps.no_submitted, reps.no_gold, n_eff)


def estimates(
    specs: Sequence[counting.Spec], counts: counting.Counts, metrics: Metrics, roots: np.ndarray, rules: Rules
) -> Estimates:
    """Estimability of each slice's F1 interval, with its reason, leave-one-component-out
    sensitivity, the component (`#root`) it rests on, its components and n_eff."""
    n = len(specs)
    by = np.ascontiguousarray(counts.by_component[:n])  # one copy: every step below reads it along components
    loo = estimate.leave_one_out(counts.totals[:n], by)
    moved = np.nan_to_num(loo["shift"]) > 0
    named = np.where(moved, loo["influential"], loo["largest"])  # the largest when no component moves it
    rests_on = [f"#{roots[j]}" if j >= 0 else "" for j in named]
    largest = [f"#{roots[j]}" if j >= 0 else "" for j in loo["largest"]]
    n_comp = (counts.facts_per_component[:n] > 0).sum(axis=1)
    low, high = metrics.intervals["f1"]
    estimable, reasons = estimate.estimability(
        n_comp, metrics.n_eff["f1"][:n], (low[:n], high[:n]), loo, rests_on, largest=largest,
        min_components=rules.min_components, min_n_eff=rules.min_n_eff,
    )  # fmt: skip
    return Estimates(estimable, reasons, loo, rests_on, n_comp, metrics.n_eff["f1"][:n])


def overall_metrics(
    per_component: np.ndarray,
    *,
    n_boot: int = stats.DEFAULT_N_BOOT,
    seed: int = stats.DEFAULT_SEED,
    min_components: int = stats.DEFAULT_MIN_COMPONENTS,
    min_n_eff: float = stats.DEFAULT_MIN_N_EFF,
) -> dict[str, Any]:
    """The overall row of a slice table from (n_components, 5) per-component counts
    (`counts.component_counts`): the tune metrics of sweeps. Returns per metric (precision,
    recall, f1, exact_rate) its value, `<m>_ci_low/_ci_high` (NaN when not estimable, by the
    slice table's rule) and `<m>_undefined_draws` (None when not estimable), plus `estimable`,
    `no_interval_reason` and `n_eff` (of F1, as the slice table's column)."""
    layout = np.asarray(per_component, dtype=np.int64)[:, None, :]
    counts = counting.Counts(layout, [], [])
    one = np.zeros(1, dtype=np.int64)
    reps = bootstrap(layout, Request(n=1, held=one, parts=np.zeros(0, dtype=np.int64)), n_boot, seed)
    metrics = intervals(counts.totals, metric_n_eff(counts.layout), reps, one)
    est = estimates([counting.Spec("overall", "all")], counts, metrics, np.arange(layout.shape[0]),
                    Rules(min_components, min_n_eff))  # fmt: skip
    drawn = reps.of(one)[:, 0]
    undefined = {
        "precision": int(reps.no_submitted[0]),
        "recall": int(reps.no_gold[0]),
        "f1": int((drawn[:, :3].sum(axis=1) <= 0).sum()),
        "exact_rate": int((drawn[:, 3] <= 0).sum()),
    }
    keep = bool(est.estimable[0])
    out: dict[str, Any] = {"estimable": keep, "no_interval_reason": est.reasons[0], "n_eff": float(est.n_eff[0])}
    for name in estimate.METRICS:
        low, high = metrics.intervals[name]
        out[name] = float(metrics.points[name][0])
        out[f"{name}_ci_low"] = float(low[0]) if keep else float("nan")
        out[f"{name}_ci_high"] = float(high[0]) if keep else float("nan")
        out[f"{name}_undefined_draws"] = undefined[name] if keep else None
    return out
