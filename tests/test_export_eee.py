"""`microctx export`: a grade, a comparison and a sweep in the Every Eval Ever schema, each document
validated by the `every_eval_ever` package itself: its `validate` command (the pydantic model of the
schema plus its semantic rules: continuous scores need bounds, finite numbers, the model's
deployment axes, the datastore path), and its bundled `eval.schema.json` through jsonschema.

The package declares Python >= 3.12; its validator's code runs on 3.11 (`make setup-test` installs
it with --no-deps --ignore-requires-python from requirements-eee.lock), and
`test_the_package_validator_catches_planted_faults` shows it is live here."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from microctx import cli
from microctx.grading import ledger
from microctx.reports import eee


def package_verdict(doc: dict, root: Path) -> tuple[bool, list]:
    """The package's `validate` command on `doc`, filed where its datastore puts it
    (data/<benchmark>/<developer>/<model>/<uuid4>.json), plus its bundled JSON schema."""
    import jsonschema
    from every_eval_ever.schema import schema_json
    from every_eval_ever.validator.validate import _local_path_context as where
    from every_eval_ever.validator.validate import render_report_json, validate_file

    model = doc["model_info"]["id"].split("/", 1)[1]
    path = root / "data" / "microctx" / "microctx" / model / f"{uuid.uuid4()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    repo_path, files = where(path)
    report = validate_file(
        path, repo_path=repo_path, available_files=files, read_repo_file=files.read_text, run_semantic_checks=True
    )
    problems = [*report.errors, *report.warnings]
    schema_errors = [e.message for e in jsonschema.Draft7Validator(schema_json("eval.schema.json")).iter_errors(doc)]
    assert json.loads(render_report_json([report]))[0]["valid"] is report.valid
    return report.valid and not report.warnings and not schema_errors, problems + schema_errors


def assert_valid(doc: dict, root: Path) -> None:
    ok, problems = package_verdict(doc, root)
    assert ok, problems


def test_the_package_validator_catches_planted_faults(tmp_path, synthetic):
    """The validator is the real package at the schema version we write, and it can fail."""
    from every_eval_ever.schema import get_schema_version

    assert get_schema_version() == eee.SCHEMA_VERSION
    doc = _graded_export(tmp_path, synthetic)
    assert_valid(doc, tmp_path / "good")
    faults = {
        "no bounds on a continuous score": lambda d: d["evaluation_results"][0]["metric_config"].pop("max_score"),
        "a detail that is not a string": lambda d: d["evaluation_results"][0]["score_details"]["details"].update(n_eff=3.2),
        "no deployment axis": lambda d: d["model_info"]["additional_details"].pop("deployment_type"),
        "an unknown top-level field": lambda d: d.update(microctx={"x": 1}),
        "a confidence level above 1": lambda d: d["evaluation_results"][0]["score_details"]["uncertainty"][
            "confidence_interval"
        ].update(confidence_level=95),
    }
    for what, plant in faults.items():
        broken = json.loads(json.dumps(doc))
        plant(broken)
        assert not package_verdict(broken, tmp_path / what.replace(" ", "-"))[0], what


def _graded_export(tmp_path, synthetic) -> dict:
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.grading.examples import planted_submission

    submission = tmp_path / "run.json"
    submission.write_bytes(dumps(planted_submission(load_answers(synthetic.answers))))
    (tmp_path / "run.run.json").write_bytes(dumps({"candidate": "mine", "version": "3", "parameters": {"k": 2}}))
    out = tmp_path / "eee.json"
    argv = ["export", "--public", str(synthetic.public), "--answers", str(synthetic.answers), "--submission", str(submission)]
    assert cli.main([*argv, "--output", str(out), "--n-boot", "200"]) == 0
    return json.loads(out.read_text())


def test_export_of_a_grade_validates_with_the_package(tmp_path, synthetic):
    doc = _graded_export(tmp_path, synthetic)
    assert_valid(doc, tmp_path)
    names = [r["evaluation_name"] for r in doc["evaluation_results"]]
    assert names[:4] == ["fact F1", "fact precision", "fact recall", "exact-record rate"] and "fact F1: label" in names
    f1 = doc["evaluation_results"][0]["score_details"]
    assert f1["uncertainty"]["num_bootstrap_samples"] == 200 and f1["uncertainty"]["num_samples"] == int(
        f1["details"]["n_components"]
    )
    assert "cluster bootstrap" in f1["uncertainty"]["confidence_interval"]["method"]
    assert "n_boot=200" in f1["uncertainty"]["confidence_interval"]["method"]
    assert float(f1["details"]["n_eff"]) > 0 and doc["model_info"]["name"] == "mine"
    details = doc["source_metadata"]["additional_details"]
    assert details["held_out_looks_of_answers"] == "1" and details["configuration_digest"] == ledger.entries()[0]["config_digest"]
    assert [e["via"] for e in ledger.entries()] == ["export"]  # an export is a look at the test answers


def test_export_of_a_comparison_validates_with_the_package(tmp_path, synthetic):
    """Two submissions: one document each, each with its paired F1 difference to the other (signs
    opposite, the interval mirrored), the paired method, resamples, n_eff; one look each."""
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.grading.examples import planted_submission

    planted = tmp_path / "planted.json"
    planted.write_bytes(dumps(planted_submission(load_answers(synthetic.answers))))
    oracle = tmp_path / "oracle.json"
    oracle.write_bytes(synthetic.answers.read_bytes())
    (tmp_path / "oracle.run.json").write_bytes(dumps({"candidate": "gold", "version": "1", "parameters": {}}))
    out = tmp_path / "compared"
    argv = ["export", "--public", str(synthetic.public), "--answers", str(synthetic.answers)]
    assert (
        cli.main([*argv, "--submission", str(planted), "--submission", str(oracle), "--output", str(out), "--n-boot", "300"]) == 0
    )
    docs = {p.stem: json.loads(p.read_text()) for p in sorted(out.iterdir())}
    assert sorted(docs) == ["oracle", "planted"]
    for doc in docs.values():
        assert_valid(doc, tmp_path / "check")
        assert doc["source_metadata"]["source_name"] == "microctx compare"
    diffs = {k: d["evaluation_results"][-1] for k, d in docs.items()}
    assert diffs["planted"]["evaluation_name"] == "fact F1 difference vs oracle"
    assert diffs["oracle"]["evaluation_name"] == "fact F1 difference vs planted"
    a, b = diffs["planted"]["score_details"], diffs["oracle"]["score_details"]
    assert a["score"] == -b["score"] and a["score"] < 0  # the planted faults cost F1 against the answers themselves
    ci_a, ci_b = a["uncertainty"]["confidence_interval"], b["uncertainty"]["confidence_interval"]
    assert (ci_a["lower"], ci_a["upper"]) == (-ci_b["upper"], -ci_b["lower"]) and ci_a["upper"] < 0
    assert "paired percentile cluster bootstrap" in ci_a["method"] and a["uncertainty"]["num_bootstrap_samples"] == 300
    assert float(a["details"]["n_eff"]) > 0 and a["details"]["significant"] == "True"
    assert a["details"]["records_exact_only_there"] == b["details"]["records_exact_only_here"] != "0"
    assert docs["oracle"]["model_info"]["name"] == "gold"  # the run manifest's name
    assert docs["oracle"]["source_metadata"]["additional_details"]["held_out_looks_of_configuration"] == "1"
    assert docs["planted"]["source_metadata"]["additional_details"]["look_marked"] == "planted"
    assert sorted(e["via"] for e in ledger.entries()) == ["export", "export"]  # a look per candidate


@pytest.mark.slow
def test_export_of_a_sweep_validates_with_the_package(tmp_path, s8f):
    """A real two-configuration sweep: one document per configuration with its tune metrics, their
    cluster-bootstrap intervals, components and n_eff, whether it was chosen, and its looks."""
    from test_sweep import sweep_file

    from microctx.candidates.devkit import make_devkit
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.corpus.public import load_corpus
    from microctx.grading import stats
    from microctx.tuning.sweep import run_sweep

    devkit = tmp_path / "devkit.json"
    devkit.write_bytes(dumps(make_devkit(load_answers(s8f.answers), corpus=load_corpus(s8f.public))))
    spec = sweep_file(tmp_path, "miss = [0, 6]\ncalls = [1]")
    run_sweep(spec, s8f.public, devkit, tmp_path / "sweep", workers=1, progress=False)
    out = tmp_path / "eee"
    assert cli.main(["export", "--sweep", str(tmp_path / "sweep"), "--output", str(out)]) == 0
    docs = [json.loads(p.read_text()) for p in sorted(out.iterdir())]
    assert len(docs) == 2
    chosen = [d for d in docs if d["source_metadata"]["additional_details"]["selected"] == "True"]
    assert len(chosen) == 1 and "miss=0" in chosen[0]["model_info"]["name"]  # rule "max": the configuration that misses nothing
    for doc in docs:
        assert_valid(doc, tmp_path / "check")
        f1 = doc["evaluation_results"][0]
        assert f1["evaluation_name"] == "tune fact F1" and f1["source_data"]["additional_details"]["split"] == "tune"
        u = f1["score_details"]["uncertainty"]
        assert u["num_bootstrap_samples"] == stats.DEFAULT_N_BOOT and u["num_samples"] > 10
        assert u["confidence_interval"]["lower"] <= f1["score_details"]["score"] <= u["confidence_interval"]["upper"]
        assert float(f1["score_details"]["details"]["n_eff"]) > 1
        assert doc["source_metadata"]["additional_details"]["held_out_looks_of_configuration"] == "0"
    assert ledger.entries() == []  # a sweep export reads tune metrics only: no look at test


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


def test_export_of_a_comparison_needs_a_new_or_empty_folder(tmp_path, synthetic):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    argv = ["export", "--public", str(synthetic.public), "--answers", str(synthetic.answers)]
    two = ["--submission", str(synthetic.answers), "--submission", str(synthetic.answers), "--name", "a", "--name", "b"]
    assert cli.main([*argv, *two, "--output", str(tmp_path / "full"), "--n-boot", "50"]) == 2
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
    assert cli.main(["export", "--sweep", str(tmp_path), "--output", str(tmp_path / "x")]) == 2  # no sweep.csv


def test_a_sweep_export_of_a_broken_sweep_folder_is_one_line(tmp_path, capsys):
    import shutil

    from microctx.reports.tables import EXAMPLE_SWEEP

    folder = tmp_path / "sweep"
    shutil.copytree(EXAMPLE_SWEEP, folder)
    (folder / "sweep.csv").write_text("index,key\n0,abc\n")
    assert cli.main(["export", "--sweep", str(folder), "--output", str(tmp_path / "a")]) == 2
    assert "not a sweep table: no column selected, status, tune_records" in capsys.readouterr().err
    shutil.copyfile(EXAMPLE_SWEEP / "sweep.csv", folder / "sweep.csv")
    (folder / "selected.json").write_text('{"schema": 3}')
    assert cli.main(["export", "--sweep", str(folder), "--output", str(tmp_path / "b")]) == 2
    assert "field 'schema'" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    shutil.copyfile(EXAMPLE_SWEEP / "selected.json", folder / "selected.json")
    assert cli.main(["export", "--sweep", str(folder), "--output", str(tmp_path / "c")]) == 0  # the shipped example: 4 documents
    assert len(list((tmp_path / "c").iterdir())) == 4
