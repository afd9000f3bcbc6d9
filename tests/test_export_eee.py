"""`microctx export`: a grade in the Every Eval Ever schema (eval.schema.json 0.2.1). The
`every_eval_ever` package needs Python 3.12 or later (this project runs on 3.11), so the document is
checked against the schema's rules it relies on, written out here independently: the required
fields, no unknown top-level field, the enums, string-valued detail maps, the fields a continuous
score requires, and each interval's bounds around its score."""

from __future__ import annotations

import json
import math

from microctx import cli
from microctx.grading import ledger

REQUIRED = (
    "schema_version",
    "evaluation_id",
    "retrieved_timestamp",
    "source_metadata",
    "model_info",
    "eval_library",
    "evaluation_results",
)
TOP = {*REQUIRED, "dedupe_identity", "evaluation_timestamp", "detailed_evaluation_results"}


def check_against_schema_rules(doc: dict) -> None:
    assert set(doc) <= TOP and all(k in doc for k in REQUIRED)  # additionalProperties: false
    meta = doc["source_metadata"]
    assert meta["source_type"] in ("documentation", "evaluation_run") and meta["evaluator_relationship"] in (
        "first_party",
        "third_party",
        "collaborative",
        "other",
    )
    assert all(isinstance(v, str) for v in meta["additional_details"].values())
    assert doc["model_info"]["name"] and doc["model_info"]["id"] and doc["eval_library"]["version"]
    for result in doc["evaluation_results"]:
        assert {"evaluation_name", "source_data", "metric_config", "score_details"} <= set(result)
        assert result["source_data"]["source_type"] == "other" and result["source_data"]["dataset_name"]
        config = result["metric_config"]
        assert config["lower_is_better"] is False and config["score_type"] == "continuous"
        assert {"min_score", "max_score"} <= set(config)  # required for a continuous score
        score = result["score_details"]
        assert isinstance(score["score"], float) and math.isfinite(score["score"])
        assert all(isinstance(v, str) for v in score["details"].values())
        interval = score["uncertainty"].get("confidence_interval")
        if interval:
            assert interval["lower"] <= score["score"] <= interval["upper"] and 0 <= interval["confidence_level"] <= 1


def test_export_writes_a_valid_every_eval_ever_document(tmp_path, synthetic):
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.grading.examples import planted_submission

    submission = tmp_path / "run.json"
    submission.write_bytes(dumps(planted_submission(load_answers(synthetic.answers))))
    (tmp_path / "run.run.json").write_bytes(dumps({"candidate": "mine", "version": "3", "parameters": {"k": 2}}))
    out = tmp_path / "eee.json"
    argv = ["export", "--public", str(synthetic.public), "--answers", str(synthetic.answers), "--submission", str(submission)]
    assert cli.main([*argv, "--output", str(out), "--n-boot", "200"]) == 0
    doc = json.loads(out.read_text())
    check_against_schema_rules(doc)
    names = [r["evaluation_name"] for r in doc["evaluation_results"]]
    assert names[:4] == ["fact F1", "fact precision", "fact recall", "exact-record rate"] and "fact F1: label" in names
    f1 = doc["evaluation_results"][0]["score_details"]
    assert (
        f1["uncertainty"]["num_bootstrap_samples"] == 200
        and "cluster bootstrap" in f1["uncertainty"]["confidence_interval"]["method"]
    )
    assert float(f1["details"]["n_eff"]) > 0 and doc["model_info"]["name"] == "mine"
    details = doc["source_metadata"]["additional_details"]
    assert details["held_out_looks_of_answers"] == "1" and details["configuration_digest"] == ledger.entries()[0]["config_digest"]
    assert [e["via"] for e in ledger.entries()] == ["export"]  # an export is a look at the test answers


def test_export_refuses_an_output_that_is_an_input(tmp_path, synthetic):
    argv = [
        "export",
        "--public",
        str(synthetic.public),
        "--answers",
        str(synthetic.answers),
        "--submission",
        str(synthetic.answers),
    ]
    assert cli.main([*argv, "--output", str(synthetic.answers)]) == 2
