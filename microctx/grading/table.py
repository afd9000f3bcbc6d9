"""The slice table as numpy columns: every statistic of a slice table, computed without pandas.

`slices.slice_table` (the DataFrame for notebooks and the API) and `microctx slices` (which
writes slices.csv straight from these columns with `csvout.columns_csv_bytes`, byte for byte
what the DataFrame gives, so the command never imports pandas) both come from `slice_columns`.

- `slice_columns(prepared, records, **options) -> dict`: the sorted table, column name -> values.
- `settings`, `method_text`: see `slices`.

The pieces: `counts` (slices and per-component counts), `replicates` (one set of cluster-bootstrap
draws, only the columns the table reads), `intervals` (intervals and estimability; the overall row
alone for sweeps, `overall_metrics`), `judge` (the weak test).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from microctx._io.jsonio import gc_paused
from microctx.grading import counts as counting
from microctx.grading import replicates, stats
from microctx.grading.intervals import Estimates, Metrics, Rules, estimates, intervals, metric_n_eff
from microctx.grading.judge import Families, Test, Verdict, families, judge

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


def _columns(
    specs: Sequence[counting.Spec],
    counts: counting.Counts,
    metrics: Metrics,
    est: Estimates,
    verdict: Verdict,
    split_support: dict[str, np.ndarray],
) -> dict[str, Any]:
    """Every column of the table (SLICE_COLUMNS but `ci_method`), rows in `specs` order; the
    intervals only where estimable (NaN elsewhere)."""
    n = len(specs)
    points, intervals_ = metrics.points, metrics.intervals
    tp, fp, fn, n_records, n_exact = (counts.totals[:n, j] for j in range(5))
    weights = counts.facts_per_component[:n]
    facts = weights.sum(axis=1)
    keep = est.estimable
    ci = {k: (np.where(keep, lo[:n], np.nan), np.where(keep, hi[:n], np.nan)) for k, (lo, hi) in intervals_.items()}
    with np.errstate(invalid="ignore", divide="ignore"):
        largest = np.where(facts > 0, weights.max(axis=1, initial=0) / np.where(facts > 0, facts, 1), np.nan)
    return {
        "slice_kind": [s.kind for s in specs], "slice": [s.name for s in specs], "support": tp + fn,
        "tp": tp, "fp": fp, "fn": fn, "precision": points["precision"][:n], "recall": points["recall"][:n],
        "f1": points["f1"][:n], "ci_low": ci["f1"][0], "ci_high": ci["f1"][1], "weak": verdict.weak,
        "too_small": verdict.too_small, "estimable": keep,
        "no_interval_reason": ["" if k else r for k, r in zip(keep, est.reasons)],
        "p_value": verdict.p_value, "p_adjusted": verdict.p_adjusted, "min_detectable_gap": verdict.mdd,
        "not_judged_reason": verdict.reasons, "rest_f1": verdict.rest_f1, "rest_mix": verdict.mix,
        "n_components": est.n_comp, "n_eff": est.n_eff, "largest_component_share": largest,
        "rests_on": est.rests_on, "f1_without_largest": est.loo["without_largest"],
        "loo_max_shift": est.loo["shift"], "train_support": split_support["train"],
        "tune_support": split_support["tune"], "records": n_records, "exact_records": n_exact,
        "exact_rate": points["exact_rate"][:n], "exact_ci_low": ci["exact_rate"][0], "exact_ci_high": ci["exact_rate"][1],
        "precision_ci_low": ci["precision"][0], "precision_ci_high": ci["precision"][1],
        "recall_ci_low": ci["recall"][0], "recall_ci_high": ci["recall"][1],
        "f1_ci_low": ci["f1"][0], "f1_ci_high": ci["f1"][1],
        "boot_no_gold": metrics.no_gold[:n],
        "boot_no_submitted": metrics.no_submitted[:n],
    }  # fmt: skip


def _roots(records: Any, component: np.ndarray, n_components: int) -> np.ndarray:
    """The component root (a record number) of each component index."""
    roots = np.zeros(n_components, dtype=np.int64)
    hit = component >= 0
    roots[component[hit]] = np.asarray(records["component"])[hit]
    return roots


def _bootstrap(counts: counting.Counts, fams: Families, n: int, n_boot: int, seed: int) -> replicates.Replicates:
    """The replicates the table reads: the totals of the slices that may get an interval and of
    their families, the parts of the record-level slices the weak test may judge and of their
    families, and every slice's undefined precision and recall."""
    chosen = np.flatnonzero(fams.interval)
    request = replicates.Request(
        n=n,
        held=replicates.held_slices(chosen, fams.family, fams.record_level),
        parts=replicates.wanted_parts(np.flatnonzero(fams.maybe), fams.fam, fams.parts_index),
    )
    return replicates.bootstrap(counts.layout, request, n_boot, seed)


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
    with gc_paused():  # many arrays and lists, no cycles: no collection over a large record table
        return _slice_columns(prepared, records, group_by, n_boot, seed, Rules(min_components, min_n_eff),
                              Test(min_support, alpha, adjustment, min_gap))  # fmt: skip


def _slice_columns(
    prepared: counting.FactTable, records: Any, group_by: Sequence[str], n_boot: int, seed: int, rules: Rules, test: Test
) -> dict[str, Any]:
    specs = counting.slice_specs([prepared], records, group_by)
    parts, parts_index = counting.kind_specs(specs)
    component, n_components = counting.scored_components([prepared], records)
    counts = counting.count(prepared, [*specs, *parts], component, n_components)
    n = len(specs)  # the first n columns are the slices; the rest their per-kind parts (for the weak test only)
    n_eff = metric_n_eff(counts.layout[:, :n])
    fams = families(specs, counts, parts_index, n_eff["f1"], rules, test)
    reps = _bootstrap(counts, fams, n, n_boot, seed)
    metrics = intervals(counts.totals[:n], n_eff, reps, np.flatnonzero(fams.interval))
    est = estimates(specs, counts, metrics, _roots(records, component, n_components), rules)
    verdict = judge(specs, counts, reps, fams, est, test)
    columns = _columns(specs, counts, metrics, est, verdict, counting.split_support(records, specs))
    columns["ci_method"] = [method_text(
        n_boot=n_boot, seed=seed, n_components=n_components, min_components=rules.min_components,
        min_support=test.min_support, alpha=test.alpha, min_gap=test.min_gap, adjustment=test.adjustment,
        judged=int(verdict.judged.sum()), min_n_eff=rules.min_n_eff,
    )] * n  # fmt: skip
    order = _order(columns)
    return {name: _take(columns[name], order) for name in SLICE_COLUMNS}


def _take(values: Any, order: np.ndarray) -> Any:
    """A column (array or list) in `order`."""
    return values[order] if isinstance(values, np.ndarray) else [values[i] for i in order]
