"""Results that travel: a grade in the Every Eval Ever schema (evaleval/every_eval_ever,
`eval.schema.json`, version 0.2.1).

One document per graded submission: the candidate is the "model" (`model_info`), microctx the
evaluation library, the corpus the private dataset (`source_data_private`, its digest in the
details). Each metric (F1, precision, recall of the facts, the exact-record rate, and F1 of every
fact kind) is one evaluation result with its 95% interval under `score_details.uncertainty`
(`confidence_interval` with its method, `num_bootstrap_samples`, `num_samples` the split
components resampled). What the schema has no field for goes in its string-valued
`additional_details` / `details`: n_eff, the largest component's share, the quality verdict, and
the held-out ledger's look count for this answer bundle and configuration.
"""

from __future__ import annotations

import math
import time

SCHEMA_VERSION = "0.2.1"
METRICS = (  # (column, low, high, evaluation name, description)
    ("f1", "ci_low", "ci_high", "fact F1", "F1 over every gold and submitted fact of the held-out records"),
    ("precision", "precision_ci_low", "precision_ci_high", "fact precision", "submitted facts that are gold"),
    ("recall", "recall_ci_low", "recall_ci_high", "fact recall", "gold facts that were submitted"),
    ("exact_rate", "exact_ci_low", "exact_ci_high", "exact-record rate", "held-out records answered exactly"),
)


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def _result(row, column: str, low: str, high: str, name: str, description: str, dataset: dict, n_boot: int) -> dict | None:
    score = row[column]
    if score is None or (isinstance(score, float) and math.isnan(score)):
        return None
    from microctx.grading import stats

    uncertainty: dict = {"num_samples": int(row["n_components"])}
    if bool(row["estimable"]) and not math.isnan(row[low]):
        uncertainty["confidence_interval"] = {
            "lower": float(row[low]),
            "upper": float(row[high]),
            "confidence_level": 0.95,
            "method": stats.INTERVAL_METHOD,
        }
        uncertainty["num_bootstrap_samples"] = int(n_boot)
    return {
        "evaluation_name": name,
        "source_data": dataset,
        "metric_config": {
            "evaluation_description": description,
            "lower_is_better": False,
            "score_type": "continuous",
            "min_score": 0.0,
            "max_score": 1.0,
        },
        "score_details": {
            "score": float(score),
            "details": {
                "support": _text(int(row["support"])),
                "n_eff": _text(row["n_eff"]),
                "n_components": _text(int(row["n_components"])),
                "largest_component_share": _text(row["largest_component_share"]),
                "estimable": _text(bool(row["estimable"])),
            },
            "uncertainty": uncertainty,
        },
    }


def eee_document(result, table, *, candidate: str, corpus_sha256: str, source: str, look: dict | None, n_boot: int) -> dict:
    """The Every Eval Ever document of one grade (`result`) and its slice table (`table`)."""
    from microctx._version import __version__

    dataset = {
        "dataset_name": f"microctx corpus {corpus_sha256[:12]}",
        "source_type": "other",
        "additional_details": {"corpus_sha256": corpus_sha256, "source": source, "split": "test"},
    }
    overall = table[table["slice_kind"] == "overall"].iloc[0]
    results = [_result(overall, *metric, dataset, n_boot) for metric in METRICS]
    for _, row in table[table["slice_kind"] == "fact_kind"].iterrows():
        results.append(
            _result(
                row, "f1", "ci_low", "ci_high", f"fact F1: {row['slice']}", f"F1 of the {row['slice']} facts", dataset, n_boot
            )
        )
    now = time.time()
    g = result.grade
    details = {
        "quality_pass": _text(bool(g["quality_pass"])),
        "test_records": _text(g["test_records"]),
        "exact_records": _text(g["exact_records"]),
        "aggregate_errors": _text(g["aggregate_errors"]),
        "citation_errors": _text(g["citation_errors"]),
    }
    if look:
        details.update(
            held_out_looks_of_answers=_text(look["answers_looks"]),
            held_out_looks_of_configuration=_text(look["candidate_looks"]),
            configuration_digest=_text(look.get("config_digest")),
            look_marked=_text(look.get("marked")),
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"microctx/{candidate}/{int(now)}",
        "retrieved_timestamp": str(int(now)),
        "evaluation_timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "source_metadata": {
            "source_name": "microctx grade",
            "source_type": "evaluation_run",
            "source_organization_name": "microctx user",
            "evaluator_relationship": "first_party",
            "additional_details": details,
        },
        "model_info": {"name": candidate, "id": f"microctx/{candidate}"},
        "eval_library": {"name": "microctx", "version": __version__},
        "evaluation_results": [r for r in results if r is not None],
    }
