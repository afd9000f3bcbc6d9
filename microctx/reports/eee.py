"""Results that travel: a grade, a comparison or a sweep in the Every Eval Ever schema
(evaleval/every_eval_ever, `eval.schema.json`, version 0.3.0; tests validate every kind with the
`every_eval_ever` package's own validator and its bundled JSON schema).

One document per candidate (a grade: one; a comparison: one per submission; a sweep: one per
configuration that ran): the candidate is the "model" (`model_info`), microctx the evaluation
library, the corpus the private dataset (`source_data_private`, its digest in the details). Each
metric (F1, precision, recall of the facts, the exact-record rate; for a grade also F1 of every fact
kind; for a comparison also the F1 difference to every other candidate) is one evaluation result
with its 95% interval under `score_details.uncertainty` (`confidence_interval` with its method,
`num_bootstrap_samples` the resamples, `num_samples` the split components resampled). What the
schema has no field for goes in its string-valued `additional_details` / `details` (the
extension fields): n_eff, the largest component's share, why a metric has no interval, the
quality verdict, the paired tests' p-values, and the held-out ledger's look counts.
"""

from __future__ import annotations

import math
import time

SCHEMA_VERSION = "0.3.0"
# A microctx candidate is a program run by the user; who serves any model it calls, and whether its
# weights are open, microctx cannot tell: the schema's "unknown" on both axes.
MODEL_DETAILS = {"deployment_type": "unknown", "model_availability": "unknown"}
METRICS = (  # (column, low, high, evaluation name, description)
    ("f1", "ci_low", "ci_high", "fact F1", "F1 over every gold and submitted fact of the held-out records"),
    ("precision", "precision_ci_low", "precision_ci_high", "fact precision", "submitted facts that are gold"),
    ("recall", "recall_ci_low", "recall_ci_high", "fact recall", "gold facts that were submitted"),
    ("exact_rate", "exact_ci_low", "exact_ci_high", "exact-record rate", "held-out records answered exactly"),
)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _text(value) -> str:
    return "" if _missing(value) else str(value)


def _dataset(corpus_sha256: str, source: str, split: str, **more: str) -> dict:
    details = {"corpus_sha256": corpus_sha256, "source": source, "split": split, **more}
    return {"dataset_name": f"microctx corpus {corpus_sha256[:12]}", "source_type": "other", "additional_details": details}


def _result(name: str, description: str, dataset: dict, score, interval: dict | None, details: dict, bounds=(0.0, 1.0)) -> dict:
    """One evaluation result; `interval`: lower, upper, method, resamples, components (or None)."""
    uncertainty: dict = {}
    if interval is not None:
        if interval.get("components") is not None:
            uncertainty["num_samples"] = int(interval["components"])
        if not _missing(interval.get("lower")) and not _missing(interval.get("upper")):
            uncertainty["confidence_interval"] = {
                "lower": float(interval["lower"]),
                "upper": float(interval["upper"]),
                "confidence_level": 0.95,
                "method": interval["method"],
            }
            uncertainty["num_bootstrap_samples"] = int(interval["resamples"])
    return {
        "evaluation_name": name,
        "source_data": dataset,
        "metric_config": {
            "evaluation_description": description,
            "lower_is_better": False,
            "score_type": "continuous",
            "min_score": bounds[0],
            "max_score": bounds[1],
        },
        "score_details": {
            "score": float(score),
            "details": {k: _text(v) for k, v in details.items()},
            "uncertainty": uncertainty,
        },
    }


def _slice_result(row, metric: tuple, dataset: dict, n_boot: int, name: str | None = None, description: str | None = None):
    """One evaluation result of a slice-table row for `metric` (an entry of METRICS; `name` and
    `description` override its own), its interval only when estimable; None when the metric is
    undefined on the row."""
    column, low, high, default_name, default_description = metric
    if _missing(row[column]):
        return None
    reason = row.get("no_interval_reason")
    details = {
        "support": int(row["support"]),
        "n_eff": row["n_eff"],
        "n_components": int(row["n_components"]),
        "largest_component_share": row["largest_component_share"],
        "estimable": bool(row["estimable"]),
        "no_interval_reason": reason if isinstance(reason, str) else "",
    }
    interval = {"lower": row[low], "upper": row[high], "method": str(row["ci_method"]), "resamples": n_boot,
                "components": row["n_components"]}  # fmt: skip
    if not bool(row["estimable"]):
        interval["lower"] = interval["upper"] = None
    return _result(name or default_name, description or default_description, dataset, row[column], interval, details)


def _look_details(look: dict | None) -> dict:
    """The held-out ledger's counts of a grade's look (the entry `grading.ledger.record_look` returns), as details."""
    if not look:
        return {}
    return {
        "held_out_looks_of_answers": look["answers_looks"],
        "held_out_looks_of_configuration": look["candidate_looks"],
        "configuration_digest": look.get("config_digest"),
        "look_marked": look.get("marked"),
    }


def _document(kind: str, name: str, model_id: str, details: dict, results: list, now: float) -> dict:
    """One Every Eval Ever document: the candidate `name`/`model_id` evaluated by microctx at
    `now` (a `kind` of grade, compare or sweep), with `details` and the results that are not None."""
    from microctx._version import __version__

    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"microctx/{model_id.removeprefix('microctx/')}/{int(now)}",
        "retrieved_timestamp": str(int(now)),
        "evaluation_timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "source_metadata": {
            "source_name": f"microctx {kind}",
            "source_type": "evaluation_run",
            "source_organization_name": "microctx user",
            "evaluator_relationship": "first_party",
            "additional_details": {k: _text(v) for k, v in details.items()},
        },
        "model_info": {"name": name, "id": model_id, "additional_details": dict(MODEL_DETAILS)},
        "eval_library": {"name": "microctx", "version": __version__},
        "evaluation_results": [r for r in results if r is not None],
    }


def eee_document(result, table, *, candidate: str, corpus_sha256: str, source: str, look: dict | None, n_boot: int,
                 kind: str = "grade", extra: list | None = None) -> dict:  # fmt: skip
    """The Every Eval Ever document of one grade (`result`) and its slice table (`table`);
    `extra`: more evaluation results (a comparison's differences)."""
    dataset = _dataset(corpus_sha256, source, "test")
    overall = table[table["slice_kind"] == "overall"].iloc[0]
    results = [_slice_result(overall, metric, dataset, n_boot) for metric in METRICS]
    for _, row in table[table["slice_kind"] == "fact_kind"].iterrows():
        label = row["slice"]
        results.append(_slice_result(row, METRICS[0], dataset, n_boot, f"fact F1: {label}", f"F1 of the {label} facts"))
    g = result.grade
    details = {k: g[k] for k in ("test_records", "exact_records", "aggregate_errors", "citation_errors")}
    details = {"quality_pass": bool(g["quality_pass"]), **details, **_look_details(look)}
    return _document(kind, candidate, f"microctx/{candidate}", details, results + list(extra or ()), time.time())


def _difference(row, this_is_a: bool, other: str, dataset: dict, n_boot: int) -> dict | None:
    """The overall F1 difference (this candidate minus `other`) of one paired-comparison row."""
    if _missing(row["f1_diff"]):
        return None
    sign = 1.0 if this_is_a else -1.0
    low, high = row["f1_diff_ci_low"], row["f1_diff_ci_high"]
    if not this_is_a and not _missing(low):
        low, high = -high, -low
    interval = {"lower": low, "upper": high, "method": str(row["method"]), "resamples": n_boot, "components": row["n_components"]}
    details = {
        "compared_with": other,
        "n_eff": row["n_eff"],
        "n_components": int(row["n_components"]),
        "estimable": bool(row["estimable"]),
        "p_value_sign_flip": row["p_value"],
        "p_equal_f1": row["p_equal_f1"],
        "significant": bool(row["significant"]),
        "records_exact_only_here": row["b10"] if this_is_a else row["b01"],
        "records_exact_only_there": row["b01"] if this_is_a else row["b10"],
        "exact_p_sign_flip": row["exact_p"],
    }
    description = f"fact F1 of this candidate minus that of {other} on the same held-out records (paired)"
    return _result(f"fact F1 difference vs {other}", description, dataset, sign * row["f1_diff"], interval, details, (-1.0, 1.0))


def compare_documents(compared, *, corpus_sha256: str, source: str, n_boot: int) -> dict[str, dict]:
    """One document per candidate of a comparison (`reports.tables.CompareOutputs`): its grade as
    `eee_document` gives it, plus its overall F1 difference to every other candidate with the
    paired interval and tests."""
    dataset = _dataset(corpus_sha256, source, "test")
    paired = compared.paired[compared.paired["slice_kind"] == "overall"]
    documents = {}
    for name, graded in compared.grades.items():
        extra = [_difference(row, row["a"] == name, row["b"] if row["a"] == name else row["a"], dataset, n_boot)
                 for _, row in paired[(paired["a"] == name) | (paired["b"] == name)].iterrows()]  # fmt: skip
        candidate = (graded.look or {}).get("candidate") or name
        documents[name] = eee_document(graded.result, graded.slices, candidate=candidate, corpus_sha256=corpus_sha256,
                                       source=source, look=graded.look, n_boot=n_boot, kind="compare", extra=extra)  # fmt: skip
    return documents


TUNE_METRICS = (  # (column, evaluation name, description): sweep.csv's tune metrics
    ("f1", "tune fact F1", "F1 over every gold and submitted fact of the tune records"),
    ("precision", "tune fact precision", "submitted facts that are gold (tune records)"),
    ("recall", "tune fact recall", "gold facts that were submitted (tune records)"),
    ("exact_rate", "tune exact-record rate", "tune records answered exactly"),
)


def tune_method() -> str:
    """How a sweep's tune intervals are made (`tuning.tune.tune_metrics`: the package's defaults)."""
    from microctx.grading import stats

    return (
        f"95% {stats.INTERVAL_NAME} from a cluster bootstrap over the tune split's components (n_boot={stats.DEFAULT_N_BOOT}, "
        f"seed={stats.DEFAULT_SEED}), given only with at least {stats.DEFAULT_MIN_COMPONENTS} components and "
        f"n_eff >= {stats.DEFAULT_MIN_N_EFF:g}"
    )


def sweep_documents(frame, selected: dict, looks: dict[str, int], metrics: dict[str, dict]) -> dict[str, dict]:
    """One document per configuration that ran in a sweep (`sweep.csv` as `frame`, `selected.json`):
    its tune metrics with their intervals, its parameters, whether the selection chose it,
    `looks` (configuration digest -> counted held-out looks in the ledger) and `metrics`
    (configuration key -> its `runs/<key>/result.json` metrics: the components and n_eff the
    intervals rest on, which sweep.csv does not carry)."""
    from microctx.grading import stats

    candidate = selected["candidate"]["name"]
    dataset = _dataset(
        str(selected["corpus_sha256"]), "the devkit's tune split", "tune", devkit_sha256=str(selected["devkit_sha256"])
    )
    params = [c for c in frame.columns if c.startswith("param.")]
    now, documents = time.time(), {}
    for _, row in frame[frame["status"] == "ok"].iterrows():
        kept = metrics.get(str(row["key"])) or {}
        components, n_eff = kept.get("tune_components"), kept.get("tune_n_eff")
        results = []
        for column, name, description in TUNE_METRICS:
            interval = {"lower": row.get(f"{column}_ci_low"), "upper": row.get(f"{column}_ci_high"), "method": tune_method(),
                        "resamples": stats.DEFAULT_N_BOOT, "components": None if _missing(components) else components}  # fmt: skip
            details = {"n_eff": n_eff if not _missing(n_eff) else "not recorded by this sweep",
                       "tune_records": row["tune_records"], "undefined_draws": kept.get(f"{column}_undefined_draws")}  # fmt: skip
            if not _missing(row.get(column)):
                results.append(_result(name, description, dataset, row[column], interval, details))
        digest = _text(row.get("config_digest"))
        details = {f"parameter {p[6:]}": row[p] for p in params}
        details.update(configuration_key=row["key"], configuration_digest=digest, selected=str(row["selected"]).lower() == "true",
                       selection_rule=selected["selection"]["rule"], selection_reason=selected.get("reason", ""),
                       held_out_looks_of_configuration=looks.get(digest, 0))  # fmt: skip
        label = ", ".join(f"{p[6:]}={row[p]}" for p in params)
        model_id = f"microctx/{candidate}-{str(row['key'])[:12]}"
        documents[str(row["key"])[:12]] = _document("sweep", f"{candidate} ({label})" if label else candidate, model_id, details,
                                                    results, now)  # fmt: skip
    return documents
