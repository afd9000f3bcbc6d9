"""Slice analysis: per-slice grading of one submission's fact table, so weak classes stay visible.

A grade is one average; this module takes it apart: one row per slice in the shape of
fairlearn's MetricFrame, the overall row beside the by-group rows. Every row answers two
questions, kept apart (docs/statistics.md):
- **on these records**: `support`, `tp`, `fp`, `fn`, `precision`, `recall`, `f1`, `records`,
  `exact_records`, `exact_rate` are the exact figures of the frozen test set (a deterministic
  candidate has no uncertainty about them, and no interval is given for them);
- **beyond these records**: every `*_ci_low/_ci_high`, `p_value`, `weak` and
  `min_detectable_gap` is about a new test set drawn the same way (Korn-Graubard intervals from
  a cluster bootstrap over split components), given only when the slice is `estimable`; otherwise
  `no_interval_reason` says why and which component it rests on.

The pieces: `records` (the record table, the component index), `counts` (slice definitions and
the per-component counts), `estimate` (estimability, bounds, sensitivity, tests), `stats` (the
bootstrap), `frame` (`SliceFrame`), `paired` (two candidates). This module composes them.

Public API: `load_facts`, `facts_frame`, `record_table` (from `records`); `slice_table(facts,
corpus, *, min_support=20, min_components=10, min_n_eff=10, n_boot=10000, seed=0, min_gap=0.0,
alpha=0.05, adjustment="holm", group_by=(), records=None)`; `slice_frame`, `SliceFrame`;
`compare_table`; `paired_comparison`; `overall_metrics` (the overall row's metrics and
intervals from per-component counts: the tune metrics of sweeps); `write_slices_csv`;
`method_text`; `settings`; `wilson_interval`, `mcnemar_exact` (independence-assuming references).

Slices (`slice_kind`, `slice`): `overall/all`; `fact_kind/<kind>` (tp/fp/fn sum to the grade's
totals); `label/<L>`; `state/<S>` (every fact of records in that state); `cue_word/<W>` (all five
listed); `body_length/<bucket>`; `has_references/with|without references`; `split/train|tune|test`
(train and tune listed with zero support: not scored); any extra `group_by` column of
`record_table` (list columns give one slice per element).

Sort order: the overall row, then kinds in `SLICE_KINDS` order (extra kinds last), within a kind
the slices with enough support before the too-small ones (estimable first), each worst first
(F1 ascending, NaN last, then larger support, then name).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from microctx._io.atomic import atomic_write
from microctx.grading import counts as counting
from microctx.grading import estimate, stats
from microctx.grading.counts import component_counts_of_rows
from microctx.grading.frame import SliceFrame
from microctx.grading.paired import PAIRED_COLUMNS, paired_comparison
from microctx.grading.records import BODY_LENGTH_BUCKETS, OUTCOMES, facts_frame, load_facts, record_table
from microctx.grading.stats import Z95, mcnemar_exact, wilson_interval

if TYPE_CHECKING:
    from microctx.corpus.public import Corpus

__all__ = [
    "Z95",
    "mcnemar_exact",
    "wilson_interval",
    "load_facts",
    "facts_frame",
    "record_table",
    "slice_table",
    "slice_frame",
    "SliceFrame",
    "compare_table",
    "paired_comparison",
    "overall_metrics",
    "component_counts_of_rows",
    "write_slices_csv",
    "method_text",
    "settings",
    "SLICE_COLUMNS",
    "PAIRED_COLUMNS",
    "SLICE_KINDS",
    "BODY_LENGTH_BUCKETS",
    "OUTCOMES",
]

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


def _bootstrap(layout: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_columns, 5) cluster-bootstrap replicates of every slice's totals."""
    flat = np.ascontiguousarray(layout.reshape(layout.shape[0], layout.shape[1] * layout.shape[2]))
    return stats.bootstrap_totals(flat, n_boot, seed).reshape(n_boot, layout.shape[1], len(QUANTITIES))


def _intervals(
    totals: np.ndarray, by: np.ndarray, replicates: np.ndarray, level: float
) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(points, intervals before estimability, replicates, n_eff) per metric; the intervals are
    Korn-Graubard's (`estimate.korn_graubard`), F1's through q = tp / (tp + fp + fn)."""
    points = estimate.metric_points(totals)
    metrics = estimate.metric_points(replicates)
    weights = estimate.metric_weights(by)
    n_eff = {name: stats.kish_n_eff(w, axis=1) for name, w in weights.items()}
    intervals = {}
    for name in ("precision", "recall", "exact_rate"):
        low, high, _ = estimate.korn_graubard(points[name], metrics[name], n_eff[name], level)
        intervals[name] = (low, high)
    low, high, _ = estimate.korn_graubard(estimate.f1_share(totals), estimate.f1_share(replicates), n_eff["f1"], level)
    intervals["f1"] = (estimate.f1_of_q(low), estimate.f1_of_q(high))
    return points, intervals, metrics, n_eff


def _rest(
    specs: Sequence[counting.Spec], totals: np.ndarray, replicates: np.ndarray, parts_index: np.ndarray, n_slices: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(family, rest q, rest q replicates, record-level?) of every slice against its family's rest
    (q = tp / (tp + fp + fn); a record-level slice's rest standardised to its fact-kind mix)."""
    family = counting.family_of(specs)
    fam = np.where(family >= 0, family, 0)
    rest_tot = (totals[fam] - totals[:n_slices])[:, :3].astype(np.float64)
    rest_reps = replicates[:, fam, :3] - replicates[:, :n_slices, :3]
    record_level = (parts_index[:, 0] >= 0) & (family >= 0)
    for i in np.flatnonzero(record_level):
        own, base = n_slices + parts_index[i], n_slices + parts_index[fam[i]]
        rest_tot[i] = estimate.standardised_rest(totals[own], totals[base])
        rest_reps[:, i] = estimate.standardised_rest(replicates[:, own], replicates[:, base])
    return family, estimate.f1_share(rest_tot), estimate.f1_share(rest_reps), record_level


def _not_judged(spec: counting.Spec, support: float, min_support: int, estimable: bool, reason: str, rest_ok: bool) -> str:
    if spec.kind == "overall":
        return "overall row: no rest to compare with"
    if support < min_support:
        return f"{int(support)} gold facts, fewer than {min_support}"
    if not estimable:
        return reason
    return "" if rest_ok else "its rest is not estimable"


def _judge(
    specs: Sequence[counting.Spec],
    counts: counting.Counts,
    replicates: np.ndarray,
    est: dict[str, Any],
    options: dict[str, Any],
) -> dict[str, Any]:
    """Slice against the rest of its family: judged, p-values, weak, minimum detectable gaps."""
    n = len(specs)
    totals, weights = counts.totals, counts.facts_per_component
    family, rest_q, rest_reps, record_level = _rest(specs, totals, replicates, options["parts_index"], n)
    fam = np.where(family >= 0, family, 0)
    rest_w = np.clip(weights[fam] - weights[:n], 0, None)
    rest_n_eff = stats.kish_n_eff(rest_w, axis=1)
    rest_ok = ((rest_w > 0).sum(axis=1) >= options["min_components"]) & (rest_n_eff >= options["min_n_eff"])
    support = totals[:n, 0] + totals[:n, 2]
    too_small = support < options["min_support"]
    judged = (family >= 0) & est["estimable"] & ~too_small & rest_ok
    q = estimate.f1_share(totals[:n])
    rest_f1 = np.where(family >= 0, estimate.f1_of_q(rest_q), np.nan)
    p_value, mdd = np.full(n, np.nan), np.full(n, np.nan)
    if judged.any():
        q_reps = estimate.f1_share(replicates[:, :n])
        p, m = estimate.rest_test(
            (q[judged], rest_q[judged]), (q_reps[:, judged], rest_reps[:, judged]),
            (est["n_eff"][judged], rest_n_eff[judged]), options["alpha"], int(judged.sum()), options["min_gap"],
        )  # fmt: skip
        p_value[judged], mdd[judged] = p, m
    p_adjusted = stats.ADJUSTMENTS[options["adjustment"]](p_value)
    steady = est["loo"]["without_largest"] < rest_f1  # still below its rest without its largest component
    weak = judged & (p_adjusted < options["alpha"]) & np.where(np.isnan(est["loo"]["without_largest"]), True, steady)
    reasons = [
        _not_judged(s, support[i], options["min_support"], est["estimable"][i], est["reasons"][i], rest_ok[i])
        for i, s in enumerate(specs)
    ]
    mix = [STANDARDISED if record_level[i] else (SAME_KINDS if family[i] >= 0 else "") for i in range(n)]
    return {"judged": judged, "too_small": too_small, "p_value": p_value, "p_adjusted": p_adjusted, "weak": weak,
            "mdd": mdd, "rest_f1": rest_f1, "reasons": reasons, "mix": mix}  # fmt: skip


def _estimates(
    specs: Sequence[counting.Spec],
    counts: counting.Counts,
    points: dict[str, np.ndarray],
    intervals: dict[str, tuple[np.ndarray, np.ndarray]],
    n_eff: dict[str, np.ndarray],
    roots: np.ndarray,
    options: dict[str, Any],
) -> dict[str, Any]:
    n = len(specs)
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
    points: dict[str, np.ndarray],
    intervals: dict[str, tuple[np.ndarray, np.ndarray]],
    metrics: dict[str, np.ndarray],
    est: dict[str, Any],
    verdict: dict[str, Any],
    split_support: dict[str, np.ndarray],
) -> dict[str, Any]:
    n = len(specs)
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
        "boot_no_gold": np.isnan(metrics["recall"][:, :n]).sum(axis=0),
        "boot_no_submitted": np.isnan(metrics["precision"][:, :n]).sum(axis=0),
    }  # fmt: skip


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    kinds = {k: i for i, k in enumerate(SLICE_KINDS)}
    extra = {k: len(kinds) + i for i, k in enumerate(dict.fromkeys(table["slice_kind"])) if k not in kinds}
    order = table.assign(
        _kind=table["slice_kind"].map(lambda k: kinds.get(k, extra.get(k))),
        _not_estimable=~table["estimable"].astype(bool),
        _f1=table["f1"].fillna(np.inf),
        _neg_support=-table["support"],
    ).sort_values(["_kind", "too_small", "_not_estimable", "_f1", "_neg_support", "slice"], kind="mergesort")
    return table.loc[order.index].reset_index(drop=True)


def _roots(records: pd.DataFrame, component: np.ndarray, n_components: int) -> np.ndarray:
    """The component root (a record number) of each component index."""
    roots = np.zeros(n_components, dtype=np.int64)
    hit = component >= 0
    roots[component[hit]] = records["component"].to_numpy()[hit]
    return roots


def slice_table(
    facts: pd.DataFrame,
    corpus: Corpus,
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
    records: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per-slice metrics of one fact table (see the module docstring for slices and columns).

    `facts`: a frame from `load_facts`/`facts_frame` (rows that are not scored facts are
    ignored); `corpus`: the public Corpus the grade was made on; `records`: a precomputed
    `record_table(corpus)`. Deterministic given `seed`: same inputs and options, same bytes.
    """
    counting.check_options(n_boot, min_support, min_components, alpha, adjustment, min_n_eff)
    records = record_table(corpus) if records is None else records
    prepared = counting.prepare(facts, records, "facts")
    specs = counting.slice_specs([prepared], records, group_by)
    parts, parts_index = counting.kind_specs(specs)
    component, n_components = counting.scored_components([prepared], records)
    counts = counting.count(prepared, [*specs, *parts], component, n_components)
    replicates = _bootstrap(counts.layout, n_boot, seed)
    n = len(specs)  # the first n columns are the slices; the rest their per-kind parts (for `_rest` only)
    points, intervals, metrics, n_eff = _intervals(
        counts.totals[:n], counts.by_component[:n], replicates[:, :n], stats.CONFIDENCE
    )
    options = {"min_support": min_support, "min_components": min_components, "min_n_eff": min_n_eff, "alpha": alpha,
               "adjustment": adjustment, "min_gap": min_gap, "parts_index": parts_index}  # fmt: skip
    est = _estimates(specs, counts, points, intervals, n_eff, _roots(records, component, n_components), options)
    verdict = _judge(specs, counts, replicates, est, options)
    columns = _columns(specs, counts, points, intervals, metrics, est, verdict, counting.split_support(records, specs))
    columns["ci_method"] = method_text(
        n_boot=n_boot, seed=seed, n_components=n_components, min_components=min_components, min_support=min_support,
        alpha=alpha, min_gap=min_gap, adjustment=adjustment, judged=int(verdict["judged"].sum()), min_n_eff=min_n_eff,
    )  # fmt: skip
    return _sorted(pd.DataFrame(columns)[list(SLICE_COLUMNS)])


def slice_frame(facts: pd.DataFrame, corpus: Corpus, **kw: Any) -> SliceFrame:
    """`slice_table` wrapped in a SliceFrame."""
    return SliceFrame(slice_table(facts, corpus, **kw))


def compare_table(facts_by_candidate: Mapping[str, pd.DataFrame], corpus: Corpus, **kw: Any) -> pd.DataFrame:
    """The slice table of each candidate, stacked, with a leading `candidate` column.

    Each candidate's table is computed on its own (same seed); candidates keep their given order.
    """
    records = kw.pop("records", None)
    records = record_table(corpus) if records is None else records
    tables = []
    for name, facts in facts_by_candidate.items():
        table = slice_table(facts, corpus, records=records, **kw)
        table.insert(0, "candidate", name)
        tables.append(table)
    if not tables:
        return pd.DataFrame(columns=["candidate", *SLICE_COLUMNS])
    return pd.concat(tables, ignore_index=True)


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
    slice table's rule) and `<m>_undefined_draws` (None when not estimable), plus `estimable`
    and `no_interval_reason`."""
    layout = np.asarray(per_component, dtype=np.int64)[:, None, :]
    counts = counting.Counts(layout, [], [])
    replicates = _bootstrap(layout, n_boot, seed)
    points, intervals, metrics, n_eff = _intervals(counts.totals, counts.by_component, replicates, stats.CONFIDENCE)
    spec = counting.Spec("overall", "all")
    options = {"min_components": min_components, "min_n_eff": min_n_eff}
    est = _estimates([spec], counts, points, intervals, n_eff, np.arange(layout.shape[0]), options)
    out: dict[str, Any] = {"estimable": bool(est["estimable"][0]), "no_interval_reason": est["reasons"][0]}
    for name in estimate.METRICS:
        low, high = intervals[name]
        keep = out["estimable"]
        out[name] = float(points[name][0])
        out[f"{name}_ci_low"] = float(low[0]) if keep else float("nan")
        out[f"{name}_ci_high"] = float(high[0]) if keep else float("nan")
        out[f"{name}_undefined_draws"] = int(np.isnan(metrics[name][:, 0]).sum()) if keep else None
    return out


def write_slices_csv(table: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write a slice (or compare/paired) table as CSV, atomically; floats with full precision."""
    from microctx._io.csvout import frame_csv_bytes

    atomic_write(path, frame_csv_bytes(table))
