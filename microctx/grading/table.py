"""The slice table as numpy columns: every statistic of a slice table, computed without pandas.

`slices.slice_table` (the DataFrame for notebooks and the API) and `microctx slices` (which
writes slices.csv straight from these columns with `csvout.columns_csv_bytes`, byte for byte
what the DataFrame gives, so the command never imports pandas) both come from `slice_columns`.

- `slice_columns(prepared, records, **options) -> dict`: the sorted table, column name -> values.
- `settings`, `method_text`, `overall_metrics`: see `slices`.

The bootstrap computes only the replicate columns a table reads (each slice's five totals; the
per-kind parts only of the slices the weak test judges) from the same draws over the same
merged components as `stats.bootstrap_totals`, so every number is the same to the bit: the
replicate totals are integers, exact in float64 (and in float32 when every total is below 2**24).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from microctx.grading import counts as counting
from microctx.grading import estimate, stats

QUANTITIES = counting.QUANTITIES
SLICE_KINDS = ("overall", "fact_kind", "label", "state", "cue_word", "body_length", "has_references", "split")
SLICE_COLUMNS = (
    "slice_kind",
    "slice",
    "support",
    "tp",
    "fp",
    "fn",
    "precision",
    "recall",
    "f1",
    "ci_low",
    "ci_high",
    "weak",
    "too_small",
    "estimable",
    "no_interval_reason",
    "p_value",
    "p_adjusted",
    "min_detectable_gap",
    "not_judged_reason",
    "rest_f1",
    "rest_mix",
    "n_components",
    "n_eff",
    "largest_component_share",
    "rests_on",
    "f1_without_largest",
    "loo_max_shift",
    "train_support",
    "tune_support",
    "records",
    "exact_records",
    "exact_rate",
    "exact_ci_low",
    "exact_ci_high",
    "precision_ci_low",
    "precision_ci_high",
    "recall_ci_low",
    "recall_ci_high",
    "f1_ci_low",
    "f1_ci_high",
    "boot_no_gold",
    "boot_no_submitted",
    "ci_method",
)
SAME_KINDS, STANDARDISED = "same fact kinds", "standardised to the slice's fact-kind mix"


def settings(
    *,
    seed: int = stats.DEFAULT_SEED,
    n_boot: int = stats.DEFAULT_N_BOOT,
    min_support: int = stats.DEFAULT_MIN_SUPPORT,
    min_components: int = stats.DEFAULT_MIN_COMPONENTS,
) -> dict[str, Any]:
    """Every statistics setting of a slice table, checked (InputError naming the option): the
    four a user sets, then the fixed ones, as a report records them in report.json."""
    counting.check_options(n_boot, min_support, min_components, stats.ALPHA, stats.ADJUSTMENT)
    return {
        "seed": int(seed),
        "n_boot": int(n_boot),
        "min_support": int(min_support),
        "min_components": int(min_components),
        "min_n_eff": stats.DEFAULT_MIN_N_EFF,
        "alpha": stats.ALPHA,
        "confidence": stats.CONFIDENCE,
        "adjustment": stats.ADJUSTMENT,
        "min_gap": 0.0,
        "exact_flip_limit": stats.EXACT_FLIP_LIMIT,
        "on_these_records": "exact counts and metrics of the frozen test set (no interval)",
        "interval": f"beyond these records: {stats.INTERVAL_METHOD}, given only "
        "with enough components and effective components and a leave-one-component-out check passed",
        "weak_test": "one-sided test of slice F1 against the rest of its family (same fact-kind mix): "
        "Fisher's exact test at the effective sizes",
        "paired_test": "two-sided paired bootstrap t test of equal expected F1 (significant), "
        "beside the component sign-flip test of exchangeability",
    }


def method_text(
    *,
    n_boot: int,
    seed: int,
    n_components: int,
    min_components: int,
    min_support: int,
    alpha: float = stats.ALPHA,
    min_gap: float = 0.0,
    adjustment: str = "holm",
    judged: int | None = None,
    min_n_eff: float = stats.DEFAULT_MIN_N_EFF,
) -> str:
    """The paragraph a report prints under its slice table: how intervals and `weak` were made."""
    adjust = {"holm": "Holm", "bh": "Benjamini-Hochberg"}[adjustment]
    gap = f" by more than {min_gap:g}" if min_gap else ""
    judged_text = f" over the {judged} judged slices" if judged is not None else " over all judged slices"
    return (
        f"On these records: counts and F1 are exact for this test set (no interval). Beyond these records "
        f"(a new test set drawn the same way): 95% {stats.INTERVAL_NAME}, Clopper-Pearson at the effective size "
        f"a cluster bootstrap over {n_components} split components implies (n_boot={n_boot}, seed={seed}; capped "
        f"at n_eff), assuming components are independent and alike, given only "
        f"to slices with at least {min_components} components and n_eff >= {min_n_eff:g} that rest on no one "
        f"component (leaving it out moves F1 outside the interval, and F1 lies outside the interval without it; "
        f"else no_interval_reason names the component); a metric at exactly 1 (or 0) gets the one-sided 2.5% bound (0.025)^(1/n_eff) on the "
        f"fact-weighted metric. Weak: support >= {min_support}, estimable, and F1 below the rest of its family"
        f"{gap} (record-level slices against a rest of the same fact-kind mix) in a one-sided test (Fisher's exact "
        f"test at the effective sizes), p-values {adjust}-adjusted{judged_text}, alpha={alpha:g}."
    )


class _Metrics(NamedTuple):
    """Per metric (`estimate.METRICS`), one value per slice: what `_intervals` computes and the
    estimability check and the columns read."""

    points: dict[str, np.ndarray]
    intervals: dict[str, tuple[np.ndarray, np.ndarray]]  # (low, high), before estimability
    undefined: dict[str, np.ndarray]  # replicates with a zero denominator
    n_eff: dict[str, np.ndarray]  # Kish's effective number of components


def _intervals(
    totals: np.ndarray, by: np.ndarray, replicates: np.ndarray, level: float, chosen: np.ndarray | None = None
) -> _Metrics:
    """Points, intervals, undefined replicates and n_eff per metric of `totals` (n, 5), with
    per-component counts `by` and bootstrap `replicates` (n_boot, n, 5). The intervals are
    Korn-Graubard's (`estimate.korn_graubard`), F1's through q = tp / (tp + fp + fn), for the
    `chosen` slices (default all; NaN for the others)."""
    points = estimate.metric_points(totals)
    weights = estimate.metric_weights(by)
    n_eff = {name: stats.kish_n_eff(w, axis=1) for name, w in weights.items()}
    intervals = {name: (np.full(len(totals), np.nan), np.full(len(totals), np.nan)) for name in estimate.METRICS}
    chosen = np.arange(len(totals)) if chosen is None else np.asarray(chosen, dtype=np.int64)
    if len(chosen) == 1 and len(totals) > 1:
        # never a single column: a one-column array sums its replicates pairwise, several columns
        # row by row, and the table's numbers must not depend on how many slices are chosen
        chosen = np.array([chosen[0], 1 if chosen[0] == 0 else 0])
    if len(chosen):
        picked = np.ascontiguousarray(replicates[:, chosen])  # row-major like the whole table
        metrics = estimate.metric_points(picked)
        for name in ("precision", "recall", "exact_rate"):
            low, high, _ = estimate.korn_graubard(points[name][chosen], metrics[name], n_eff[name][chosen], level)
            intervals[name][0][chosen], intervals[name][1][chosen] = low, high
        q = estimate.f1_share(totals)[chosen]
        low, high, _ = estimate.korn_graubard(q, estimate.f1_share(picked), n_eff["f1"][chosen], level)
        intervals["f1"][0][chosen], intervals["f1"][1][chosen] = estimate.f1_of_q(low), estimate.f1_of_q(high)
    return _Metrics(points, intervals, _undefined(replicates), n_eff)


def _undefined(replicates: np.ndarray) -> dict[str, np.ndarray]:
    """Per metric and slice, the replicates in which the metric is undefined (a zero denominator)."""
    tp, fp, fn, records = (replicates[..., j] for j in range(4))
    return {
        "precision": ((tp + fp) <= 0).sum(axis=0),
        "recall": ((tp + fn) <= 0).sum(axis=0),
        "f1": ((2 * tp + fp + fn) <= 0).sum(axis=0),
        "exact_rate": (records <= 0).sum(axis=0),
    }


def _not_judged(spec: counting.Spec, support: float, min_support: int, estimable: bool, reason: str, rest_ok: bool) -> str:
    """Why the weak test does not judge a slice (the first reason that holds), or "" when it may."""
    if spec.kind == "overall":
        return "overall row: no rest to compare with"
    if support < min_support:
        return f"{int(support)} gold facts, fewer than {min_support}"
    if not estimable:
        return reason
    return "" if rest_ok else "its rest is not estimable"


def _estimates(
    specs: Sequence[counting.Spec], counts: counting.Counts, metrics: _Metrics, roots: np.ndarray, options: dict[str, Any]
) -> dict[str, Any]:
    """Estimability of each slice's F1 interval, with its reason, leave-one-component-out
    sensitivity, the component (`#root`) it rests on, its components and n_eff."""
    n = len(specs)
    intervals, n_eff = metrics.intervals, metrics.n_eff
    by = counts.by_component[:n]
    weights = counts.facts_per_component[:n]
    loo = estimate.leave_one_out(counts.totals[:n], by)
    moved = np.nan_to_num(loo["shift"]) > 0
    named = np.where(moved, loo["influential"], loo["largest"])  # the largest when no component moves it
    rests_on = [f"#{roots[j]}" if j >= 0 else "" for j in named]
    largest = [f"#{roots[j]}" if j >= 0 else "" for j in loo["largest"]]
    n_comp = (weights > 0).sum(axis=1)
    estimable, reasons = estimate.estimability(
        n_comp, n_eff["f1"][:n], (intervals["f1"][0][:n], intervals["f1"][1][:n]), loo, rests_on, largest=largest,
        min_components=options["min_components"], min_n_eff=options["min_n_eff"],
    )  # fmt: skip
    return {"estimable": estimable, "reasons": reasons, "loo": loo, "rests_on": rests_on, "n_comp": n_comp,
            "n_eff": n_eff["f1"][:n]}  # fmt: skip


def _columns(
    specs: Sequence[counting.Spec],
    counts: counting.Counts,
    metrics: _Metrics,
    est: dict[str, Any],
    verdict: dict[str, Any],
    split_support: dict[str, np.ndarray],
) -> dict[str, Any]:
    """Every column of the table (SLICE_COLUMNS but `ci_method`), rows in `specs` order; the
    intervals only where estimable (NaN elsewhere)."""
    n = len(specs)
    points, intervals, undefined = metrics.points, metrics.intervals, metrics.undefined
    tp, fp, fn, n_records, n_exact = (counts.totals[:n, j] for j in range(5))
    weights = counts.facts_per_component[:n]
    facts = weights.sum(axis=1)
    keep = est["estimable"]
    ci = {k: (np.where(keep, lo[:n], np.nan), np.where(keep, hi[:n], np.nan)) for k, (lo, hi) in intervals.items()}
    with np.errstate(invalid="ignore", divide="ignore"):
        largest = np.where(facts > 0, weights.max(axis=1, initial=0) / np.where(facts > 0, facts, 1), np.nan)
    return {
        "slice_kind": [s.kind for s in specs], "slice": [s.name for s in specs], "support": tp + fn,
        "tp": tp, "fp": fp, "fn": fn, "precision": points["precision"][:n], "recall": points["recall"][:n],
        "f1": points["f1"][:n], "ci_low": ci["f1"][0], "ci_high": ci["f1"][1], "weak": verdict["weak"],
        "too_small": verdict["too_small"], "estimable": keep,
        "no_interval_reason": ["" if k else r for k, r in zip(keep, est["reasons"])],
        "p_value": verdict["p_value"], "p_adjusted": verdict["p_adjusted"], "min_detectable_gap": verdict["mdd"],
        "not_judged_reason": verdict["reasons"], "rest_f1": verdict["rest_f1"], "rest_mix": verdict["mix"],
        "n_components": est["n_comp"], "n_eff": est["n_eff"], "largest_component_share": largest,
        "rests_on": est["rests_on"], "f1_without_largest": est["loo"]["without_largest"],
        "loo_max_shift": est["loo"]["shift"], "train_support": split_support["train"],
        "tune_support": split_support["tune"], "records": n_records, "exact_records": n_exact,
        "exact_rate": points["exact_rate"][:n], "exact_ci_low": ci["exact_rate"][0], "exact_ci_high": ci["exact_rate"][1],
        "precision_ci_low": ci["precision"][0], "precision_ci_high": ci["precision"][1],
        "recall_ci_low": ci["recall"][0], "recall_ci_high": ci["recall"][1],
        "f1_ci_low": ci["f1"][0], "f1_ci_high": ci["f1"][1],
        "boot_no_gold": undefined["recall"][:n],
        "boot_no_submitted": undefined["precision"][:n],
    }  # fmt: skip


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
    replicates = _replicates(layout, np.arange(layout.shape[1] * len(QUANTITIES)), n_boot, seed).reshape(
        n_boot, layout.shape[1], len(QUANTITIES)
    )
    metrics = _intervals(counts.totals, counts.by_component, replicates, stats.CONFIDENCE)
    points, intervals, undefined, _ = metrics
    spec = counting.Spec("overall", "all")
    options = {"min_components": min_components, "min_n_eff": min_n_eff}
    est = _estimates([spec], counts, metrics, np.arange(layout.shape[0]), options)
    out: dict[str, Any] = {"estimable": bool(est["estimable"][0]), "no_interval_reason": est["reasons"][0],
                           "n_eff": float(est["n_eff"][0])}  # fmt: skip
    for name in estimate.METRICS:
        low, high = intervals[name]
        keep = out["estimable"]
        out[name] = float(points[name][0])
        out[f"{name}_ci_low"] = float(low[0]) if keep else float("nan")
        out[f"{name}_ci_high"] = float(high[0]) if keep else float("nan")
        out[f"{name}_undefined_draws"] = int(undefined[name][0]) if keep else None
    return out


def _replicates(layout: np.ndarray, wanted: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, len(wanted)) cluster-bootstrap replicates of the flat columns `wanted` of
    `layout` (n_components, n_columns, 5): the columns `stats.bootstrap_totals` gives for the whole
    layout, from the same draws over the same merged components, bit for bit (integer totals).
    Columns no component has a count in are 0 without a product; the products run in float32
    when every total stays below 2**24 (exact there), else in float64."""
    flat = np.ascontiguousarray(layout.reshape(layout.shape[0], layout.shape[1] * layout.shape[2]))
    profiles, multiplicity = stats.compress(flat)
    weights = profiles[:, wanted]
    out = np.zeros((n_boot, len(wanted)), dtype=np.float64)
    live = np.flatnonzero(weights.any(axis=0)) if weights.shape[0] else np.array([], dtype=np.int64)
    if not len(live):
        return out
    chosen = weights[:, live]
    dtype = np.float32 if int(multiplicity.sum()) * int(chosen.max()) < 2**24 else np.float64
    chosen = chosen.astype(dtype)
    start = 0
    for draws in stats.multinomial_draws(multiplicity, n_boot, seed):
        out[start : start + len(draws), live] = draws.astype(dtype) @ chosen
        start += len(draws)
    return out


def _families(specs: Sequence[counting.Spec], counts: counting.Counts, options: dict[str, Any]) -> dict[str, Any]:
    """What the weak test needs from the totals alone: each slice's family, its rest's size and
    whether that rest is estimable, whether the slice is too small, and whether it is record-level
    (compared with a rest standardised to its fact-kind mix)."""
    n = len(specs)
    totals, weights = counts.totals, counts.facts_per_component
    family = counting.family_of(specs)
    fam = np.where(family >= 0, family, 0)
    rest_w = np.clip(weights[fam] - weights[:n], 0, None)
    rest_n_eff = stats.kish_n_eff(rest_w, axis=1)
    rest_ok = ((rest_w > 0).sum(axis=1) >= options["min_components"]) & (rest_n_eff >= options["min_n_eff"])
    support = totals[:n, 0] + totals[:n, 2]
    too_small = support < options["min_support"]
    record_level = (options["parts_index"][:, 0] >= 0) & (family >= 0)
    n_comp = (weights[:n] > 0).sum(axis=1)
    n_eff = stats.kish_n_eff(estimate.metric_weights(counts.by_component[:n])["f1"], axis=1)
    # the slices whose intervals estimability reads (enough components and effective components)
    interval = (n_comp >= options["min_components"]) & (n_eff >= options["min_n_eff"])
    # a superset of the record-level slices the weak test judges: their parts are resampled
    maybe = record_level & ~too_small & rest_ok & interval
    return {"family": family, "fam": fam, "rest_n_eff": rest_n_eff, "rest_ok": rest_ok, "support": support,
            "too_small": too_small, "record_level": record_level, "maybe": maybe, "interval": interval}  # fmt: skip


def _rest_q(counts: counting.Counts, fams: dict[str, Any], parts_index: np.ndarray, n: int) -> np.ndarray:
    """q = tp / (tp + fp + fn) of every slice's rest (record-level: standardised to its mix)."""
    totals, fam = counts.totals, fams["fam"]
    rest_tot = (totals[fam] - totals[:n])[:, :3].astype(np.float64)
    for i in np.flatnonzero(fams["record_level"]):
        own, base = n + parts_index[i], n + parts_index[fam[i]]
        rest_tot[i] = estimate.standardised_rest(totals[own], totals[base])
    return estimate.f1_share(rest_tot)


def _rest_q_replicates(
    reps: np.ndarray, parts: dict[int, np.ndarray], fams: dict[str, Any], chosen: np.ndarray, parts_index: np.ndarray
) -> np.ndarray:
    """(n_boot, n_slices) replicates of q of the rests of the `chosen` slices (NaN for the others);
    `parts`: part index -> its (n_boot, 3) replicates. The caller takes the chosen columns out as
    `[:, judged]`, so the variances read the same memory layout, and sum in the same order, as
    when every rest is resampled."""
    fam = fams["fam"]
    rest = np.empty((reps.shape[0], len(chosen), 3), dtype=np.float64)
    for k, i in enumerate(chosen):
        if fams["record_level"][i]:
            own = np.stack([parts[p] for p in parts_index[i]], axis=1)
            base = np.stack([parts[p] for p in parts_index[fam[i]]], axis=1)
            rest[:, k] = estimate.standardised_rest(own, base)
        else:
            rest[:, k] = reps[:, fam[i], :3] - reps[:, i, :3]
    out = np.full(reps.shape[:2], np.nan)
    out[:, chosen] = estimate.f1_share(rest)
    return out


def _judge(
    specs: Sequence[counting.Spec],
    counts: counting.Counts,
    reps: np.ndarray,
    parts: dict[int, np.ndarray],
    fams: dict[str, Any],
    est: dict[str, Any],
    options: dict[str, Any],
) -> dict[str, Any]:
    """Slice against the rest of its family: judged, p-values, weak, minimum detectable gaps."""
    n = len(specs)
    family, parts_index = fams["family"], options["parts_index"]
    rest_q = _rest_q(counts, fams, parts_index, n)
    judged = (family >= 0) & est["estimable"] & ~fams["too_small"] & fams["rest_ok"]
    q = estimate.f1_share(counts.totals[:n])
    rest_f1 = np.where(family >= 0, estimate.f1_of_q(rest_q), np.nan)
    p_value, mdd = np.full(n, np.nan), np.full(n, np.nan)
    if judged.any():
        chosen = np.flatnonzero(judged)
        p, m = estimate.rest_test(
            (q[judged], rest_q[judged]),
            (estimate.f1_share(reps)[:, judged], _rest_q_replicates(reps, parts, fams, chosen, parts_index)[:, judged]),
            (est["n_eff"][judged], fams["rest_n_eff"][judged]), options["alpha"], int(judged.sum()), options["min_gap"],
        )  # fmt: skip
        p_value[judged], mdd[judged] = p, m
    p_adjusted = stats.ADJUSTMENTS[options["adjustment"]](p_value)
    steady = est["loo"]["without_largest"] < rest_f1  # still below its rest without its largest component
    weak = judged & (p_adjusted < options["alpha"]) & np.where(np.isnan(est["loo"]["without_largest"]), True, steady)
    reasons = [
        _not_judged(s, fams["support"][i], options["min_support"], est["estimable"][i], est["reasons"][i], fams["rest_ok"][i])
        for i, s in enumerate(specs)
    ]
    mix = [STANDARDISED if fams["record_level"][i] else (SAME_KINDS if family[i] >= 0 else "") for i in range(n)]
    return {"judged": judged, "too_small": fams["too_small"], "p_value": p_value, "p_adjusted": p_adjusted,
            "weak": weak, "mdd": mdd, "rest_f1": rest_f1, "reasons": reasons, "mix": mix}  # fmt: skip


def _roots(records: Any, component: np.ndarray, n_components: int) -> np.ndarray:
    """The component root (a record number) of each component index."""
    roots = np.zeros(n_components, dtype=np.int64)
    hit = component >= 0
    roots[component[hit]] = np.asarray(records["component"])[hit]
    return roots


def _bootstrap_needed(
    counts: counting.Counts, fams: dict[str, Any], parts_index: np.ndarray, n: int, n_boot: int, seed: int
) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """((n_boot, n, 5) replicates of the slices, part index -> (n_boot, 3) replicates of the parts
    that the weak test may read: those of the record-level slices it may judge, and their families')."""
    maybe = np.flatnonzero(fams["maybe"])
    wanted_parts = np.unique(np.concatenate([parts_index[maybe], parts_index[fams["fam"][maybe]]]).ravel())
    wanted_parts = wanted_parts[wanted_parts >= 0]
    part_columns = ((n + wanted_parts)[:, None] * 5 + np.arange(3)[None, :]).ravel()
    wanted = np.concatenate([np.arange(n * 5), part_columns]).astype(np.int64)
    out = _replicates(counts.layout, wanted, n_boot, seed)
    reps = out[:, : n * 5].reshape(n_boot, n, 5)
    parts = {int(p): out[:, n * 5 + 3 * k : n * 5 + 3 * k + 3] for k, p in enumerate(wanted_parts)}
    return reps, parts


def _order(columns: dict[str, Any]) -> np.ndarray:
    """The table's row order: the overall row, kinds in SLICE_KINDS order (extra kinds last), within
    a kind judged-size rows first, estimable first, F1 ascending (NaN last), larger support, name."""
    kinds = {k: i for i, k in enumerate(SLICE_KINDS)}
    extra = {k: len(kinds) + i for i, k in enumerate(dict.fromkeys(columns["slice_kind"])) if k not in kinds}
    names = {name: i for i, name in enumerate(sorted(set(columns["slice"])))}
    keys = (
        np.array([names[s] for s in columns["slice"]], dtype=np.int64),
        -np.asarray(columns["support"]),
        np.where(np.isnan(columns["f1"]), np.inf, columns["f1"]),
        ~np.asarray(columns["estimable"], dtype=bool),
        np.asarray(columns["too_small"], dtype=bool),
        np.array([kinds.get(k, extra.get(k)) for k in columns["slice_kind"]], dtype=np.int64),
    )
    return np.lexsort(keys)  # stable: ties keep their order (pandas' mergesort)


def slice_columns(
    prepared: counting.FactTable,
    records: Any,
    *,
    min_support: int = stats.DEFAULT_MIN_SUPPORT,
    min_components: int = stats.DEFAULT_MIN_COMPONENTS,
    min_n_eff: float = stats.DEFAULT_MIN_N_EFF,
    n_boot: int = stats.DEFAULT_N_BOOT,
    seed: int = stats.DEFAULT_SEED,
    min_gap: float = 0.0,
    alpha: float = stats.ALPHA,
    adjustment: str = stats.ADJUSTMENT,
    group_by: Sequence[str] = (),
) -> dict[str, Any]:
    """The slice table of one prepared fact table (`counts.prepare`/`prepare_rows`) over
    `records` (the record table it was prepared on) as sorted columns: name -> list or array, in
    SLICE_COLUMNS order (see `slices` for slices and columns). The keyword options are the slice
    table's, with their defaults (`slices.slice_table` forwards its own here); bad values are one
    InputError naming the option (`counts.check_options`)."""
    counting.check_options(n_boot, min_support, min_components, alpha, adjustment, min_n_eff)
    specs = counting.slice_specs([prepared], records, group_by)
    parts, parts_index = counting.kind_specs(specs)
    component, n_components = counting.scored_components([prepared], records)
    counts = counting.count(prepared, [*specs, *parts], component, n_components)
    n = len(specs)  # the first n columns are the slices; the rest their per-kind parts (for the weak test only)
    options = {"min_support": min_support, "min_components": min_components, "min_n_eff": min_n_eff, "alpha": alpha,
               "adjustment": adjustment, "min_gap": min_gap, "parts_index": parts_index}  # fmt: skip
    fams = _families(specs, counts, options)
    reps, part_reps = _bootstrap_needed(counts, fams, parts_index, n, n_boot, seed)
    metrics = _intervals(counts.totals[:n], counts.by_component[:n], reps, stats.CONFIDENCE, np.flatnonzero(fams["interval"]))
    est = _estimates(specs, counts, metrics, _roots(records, component, n_components), options)
    verdict = _judge(specs, counts, reps, part_reps, fams, est, options)
    columns = _columns(specs, counts, metrics, est, verdict, counting.split_support(records, specs))
    columns["ci_method"] = [method_text(
        n_boot=n_boot, seed=seed, n_components=n_components, min_components=min_components, min_support=min_support,
        alpha=alpha, min_gap=min_gap, adjustment=adjustment, judged=int(verdict["judged"].sum()), min_n_eff=min_n_eff,
    )] * n  # fmt: skip
    order = _order(columns)
    return {name: _take(columns[name], order) for name in SLICE_COLUMNS}


def _take(values: Any, order: np.ndarray) -> Any:
    """A column (array or list) in `order`."""
    return values[order] if isinstance(values, np.ndarray) else [values[i] for i in order]
