"""The tune grade of one sweep run: the grade on the devkit's tune answers and its metrics with
cluster-bootstrap intervals (see `tune_metrics`)."""

from __future__ import annotations

import math
import threading
from pathlib import Path

from microctx.contract.digests import file_sha256

_COMPONENTS: dict[str, dict] = {}
_COMPONENTS_LOCK = threading.Lock()  # pool threads (and a Dask worker's threads) share the cache


def _components(public_path: Path) -> dict:
    """Record id -> split component (the split rule's unit) of a public corpus, cached by digest."""
    digest = file_sha256(public_path)
    with _COMPONENTS_LOCK:
        cached = _COMPONENTS.get(digest)
    if cached is not None:
        return cached
    from microctx.corpus.public import load_corpus
    from microctx.grading.slices import record_table

    table = record_table(load_corpus(public_path))
    components = dict(zip(table["id"], table["component"]))
    with _COMPONENTS_LOCK:
        _COMPONENTS.clear()  # one corpus at a time; a reader holds its own reference
        _COMPONENTS[digest] = components
    return components


def tune_grade(public_path, devkit_path, submission_path) -> tuple[dict, bytes, dict]:
    """The tune grade of a submission against a devkit: grade document, fact table, metrics."""
    from microctx.contract.facts import facts_csv
    from microctx.contract.schemas import load_answers, load_submission
    from microctx.contract.score import grade

    result = grade(load_answers(devkit_path), load_submission(submission_path), split="tune")
    return result.grade, facts_csv(result.facts), tune_metrics(result, _components(Path(public_path)))


def tune_metrics(
    result,
    components: dict,
    n_boot: int | None = None,
    seed: int | None = None,
    min_components: int | None = None,
    min_n_eff: float | None = None,
) -> dict:
    """Exact rate, precision, recall and F1 of a tune grade, with 95% intervals.

    Every interval is Korn-Graubard's from the cluster bootstrap of `microctx.grading.stats`, as
    slice tables make it (docs/statistics.md): split components resampled with their tp, fp, fn,
    records and exact records, `stats.DEFAULT_N_BOOT` replicates, seed `stats.DEFAULT_SEED`.
    The overall row of a slice table (`slices.overall_metrics`): with fewer than
    `stats.DEFAULT_MIN_COMPONENTS` components or effective components (`stats.DEFAULT_MIN_N_EFF`),
    or one component that moves F1 outside its interval, the metrics get no interval (NaN bounds).
    Replicates where a metric is undefined (no fact of its denominator drawn) are counted in `<metric>_undefined_draws`, never dropped silently.
    A record is exact when it has no fp and no fn (every tune record has a fact: its state).
    """
    from microctx.grading import slices, stats

    n_boot = stats.DEFAULT_N_BOOT if n_boot is None else n_boot
    seed = stats.DEFAULT_SEED if seed is None else seed
    min_components = stats.DEFAULT_MIN_COMPONENTS if min_components is None else min_components
    min_n_eff = stats.DEFAULT_MIN_N_EFF if min_n_eff is None else min_n_eff
    _, per = slices.component_counts_of_rows(result.facts, components)  # the grading path's per-component count
    g = result.grade
    tp, fp, fn = (int(per[:, i].sum()) for i in range(3))
    n, exact = g["test_records"], g["exact_records"]
    metrics: dict = {"tune_records": n, "exact_records": exact, "tp": tp, "fp": fp, "fn": fn, "tune_components": len(per)}
    overall = slices.overall_metrics(per, n_boot=n_boot, seed=seed, min_components=min_components, min_n_eff=min_n_eff)
    metrics["tune_n_eff"] = overall["n_eff"]  # the effective number of components the intervals rest on
    metrics["exact_rate"] = exact / n if n else math.nan
    for name in ("precision", "recall", "f1"):
        metrics[name] = overall[name]
    for name in ("exact_rate", "precision", "recall", "f1"):
        for key in (f"{name}_ci_low", f"{name}_ci_high", f"{name}_undefined_draws"):
            metrics[key] = overall[key]
    return {k: (round(v, 6) if isinstance(v, float) and not math.isnan(v) else v) for k, v in metrics.items()}
