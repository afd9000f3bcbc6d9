"""The agreement report: papermill executes notebooks/semantic_report.ipynb on a simulated s8f
study (three annotators, one careless) through the reports machinery; the HTML is offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from semantic_sim import CARELESS, adjudicate, good, simulate, truth_for

from microctx.semantic.freeze import write_semantic
from microctx.semantic.items import init_folder

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_agreement_report_is_made_with_papermill(s8f, tmp_path):
    folder = init_folder(ROOT / "studies" / "s8f-conflicts.toml", s8f.public, s8f.answers, tmp_path / "study")
    truth = truth_for(folder, 81)
    simulate(folder, truth, {"ann": good(0.9), "ben": good(0.85), "cat": CARELESS}, seed=82)
    adjudicate(folder, truth, "simulated: the truth")
    write_semantic(folder.path, tmp_path / "semantic.json", n_boot=500)
    out = tmp_path / "report"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "microctx",
            "report",
            "semantic",
            folder.path,
            "--semantic",
            tmp_path / "semantic.json",
            "--out",
            out,
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "report.json").read_text())
    assert manifest["kind"] == "semantic" and manifest["charts"] == ["agreement_by_slice"]
    html = (out / "semantic_report.html").read_text()
    assert "Every SHA-256 binding holds" in html and "ann vs cat" in html and "ben vs cat" in html
    assert "simulated: the truth" in html and "krippendorff_alpha" in html and "No judge was run" in html
    assert (out / "lexical.csv").read_text().startswith("question,rule,measure,value,ci_low,ci_high")


@pytest.mark.slow
def test_the_grade_report_shows_lexical_and_semantic_verdicts_side_by_side(s8f, tmp_path):
    import os

    from microctx.contract.schemas import SUBMISSION_SCHEMA

    folder = init_folder(ROOT / "studies" / "s8f-conflicts.toml", s8f.public, s8f.answers, tmp_path / "study")
    truth = truth_for(folder, 91)
    simulate(folder, truth, {"ann": good(0.9), "ben": good(0.9), "cat": good(0.9)}, seed=92)
    adjudicate(folder, truth)
    write_semantic(folder.path, tmp_path / "semantic.json", n_boot=200)
    answers = json.loads(Path(s8f.answers).read_text())
    submission = tmp_path / "submission.json"
    submission.write_text(
        json.dumps(
            {
                "schema": SUBMISSION_SCHEMA,
                "corpus_sha256": answers["corpus_sha256"],
                "answers": answers["answers"],
                "aggregates": answers["aggregates"],
            }
        )
    )
    out = tmp_path / "report"
    argv = [
        "report",
        "grade",
        "--public",
        s8f.public,
        "--answers",
        s8f.answers,
        "--submission",
        submission,
        "--semantic",
        tmp_path / "semantic.json",
        "--n-boot",
        "200",
        "--out",
        out,
    ]
    run = subprocess.run(
        [sys.executable, "-m", "microctx", *map(str, argv)],
        capture_output=True,
        text=True,
        env={**os.environ, "MICROCTX_LEDGER": str(tmp_path / "ledger.sqlite")},
    )
    assert run.returncode == 0, run.stderr
    html = (out / "grade_report.html").read_text()
    assert "Lexical and semantic verdicts" in html and "semantic layer: conflict" in html
    rows = (out / "grade.semantic.csv").read_text().splitlines()
    assert rows[0] == "item,record_id,question,gold_label,submitted,lexical,semantic"
    assert len(rows) - 1 == sum(1 for i in folder.items.values() if i["split"] == "test")
