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
    result, components: dict, n_boot: int | None = None, seed: int | None = None, min_components: int | None = None
) -> dict:
    """Exact rate, precision, recall and F1 of a tune grade, with 95% intervals.

    Every interval is the cluster-bootstrap percentile interval of `microctx.grading.stats`, as
    slice tables make it (docs/statistics.md): split components resampled with their tp, fp, fn,
    records and exact records, `stats.DEFAULT_N_BOOT` replicates, seed `stats.DEFAULT_SEED`.
    With fewer than `stats.DEFAULT_MIN_COMPONENTS` components the metrics are not estimable and
    get no interval (NaN bounds). Replicates where a metric is undefined (no fact of its
    denominator drawn) are counted in `<metric>_undefined_draws`, never dropped silently.
    A record is exact when it has no fp and no fn (every tune record has a fact: its state).
    """
    import numpy as np

    from microctx.grading import stats

    n_boot = stats.DEFAULT_N_BOOT if n_boot is None else n_boot
    seed = stats.DEFAULT_SEED if seed is None else seed
    min_components = stats.DEFAULT_MIN_COMPONENTS if min_components is None else min_components
    by_record: dict[str, list[int]] = {}
    for row in result.facts:
        if row.outcome in ("tp", "fp", "fn"):
            by_record.setdefault(row.record_id, [0, 0, 0])[("tp", "fp", "fn").index(row.outcome)] += 1
    per: dict[str, list[int]] = {}  # component -> tp, fp, fn, records, exact records
    for record_id, (rtp, rfp, rfn) in by_record.items():
        counts = per.setdefault(components.get(record_id, record_id), [0, 0, 0, 0, 0])
        counts[0] += rtp
        counts[1] += rfp
        counts[2] += rfn
        counts[3] += 1
        counts[4] += not rfp and not rfn
    g = result.grade
    tp, fp, fn = (sum(c[i] for c in per.values()) for i in range(3))
    n, exact = g["test_records"], g["exact_records"]
    metrics: dict = {"tune_records": n, "exact_records": exact, "tp": tp, "fp": fp, "fn": fn, "tune_components": len(per)}
    metrics["exact_rate"] = exact / n if n else math.nan
    metrics["precision"] = float(stats.ratio(tp, tp + fp))
    metrics["recall"] = float(stats.ratio(tp, tp + fn))
    metrics["f1"] = float(stats.f1_score(tp, fp, fn))
    names = ("exact_rate", "precision", "recall", "f1")
    if len(per) >= min_components:
        totals = stats.bootstrap_totals(np.array(list(per.values()), dtype=np.int64), n_boot, seed)
        btp, bfp, bfn, brecords, bexact = (totals[:, i] for i in range(5))
        replicates = np.column_stack(
            [
                stats.ratio(bexact, brecords),
                stats.ratio(btp, btp + bfp),
                stats.ratio(btp, btp + bfn),
                stats.f1_score(btp, bfp, bfn),
            ]
        )
        low, high, undefined = stats.percentile_interval(replicates)
        for i, name in enumerate(names):
            metrics[f"{name}_ci_low"], metrics[f"{name}_ci_high"] = float(low[i]), float(high[i])
            metrics[f"{name}_undefined_draws"] = int(undefined[i])
    else:  # not estimable: no interval, said by NaN bounds
        for name in names:
            metrics[f"{name}_ci_low"] = metrics[f"{name}_ci_high"] = math.nan
            metrics[f"{name}_undefined_draws"] = None
    return {k: (round(v, 6) if isinstance(v, float) and not math.isnan(v) else v) for k, v in metrics.items()}
