"""`microctx slices` and the statistics options of `microctx report`: exit codes, atomic output,
same bytes for the same inputs, every setting recorded."""

from __future__ import annotations

import csv

import pytest

from microctx import cli
from microctx.contract.canonical import dumps
from microctx.grading import slices
from microctx.grading.examples import planted_submission
from microctx.reports import build as reports


@pytest.fixture(scope="module")
def planted(tmp_path_factory, s8f_answers):
    path = tmp_path_factory.mktemp("sub") / "planted.json"
    path.write_bytes(dumps(planted_submission(s8f_answers)))
    return path


def _args(s8f, submission, output, *extra):
    return [
        "slices",
        "--public",
        str(s8f.public),
        "--answers",
        str(s8f.answers),
        "--submission",
        str(submission),
        "--output",
        str(output),
        *extra,
    ]


def test_slices_writes_the_table_and_same_inputs_give_same_bytes(s8f, planted, tmp_path, capsys):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    assert cli.main(_args(s8f, planted, first, "--n-boot", "2000", "--seed", "3")) == 0
    assert cli.main(_args(s8f, planted, second, "--n-boot", "2000", "--seed", "3")) == 0
    assert first.read_bytes() == second.read_bytes()
    out = capsys.readouterr().out
    assert f"wrote {first}" in out and "weak of" in out and "n_boot=2000, seed=3" in out
    with open(first, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(slices.SLICE_COLUMNS)
    for column in (
        "n_components",
        "n_eff",
        "largest_component_share",
        "estimable",
        "p_value",
        "p_adjusted",
        "train_support",
        "tune_support",
    ):
        assert column in rows[0]
    assert "n_boot=2000, seed=3" in rows[0]["ci_method"]
    # issue 19: s8f's test split has about three effective components, so the planted label gets no
    # verdict; the row says so, and the printed count of judged slices is the table's own
    enhancement = next(r for r in rows if (r["slice_kind"], r["slice"]) == ("label", "enhancement"))
    assert enhancement["weak"] == "False" and "rests on component" in enhancement["not_judged_reason"]
    judged = sum(r["p_value"] != "" for r in rows)
    assert f"weak of {judged} judged" in out


def test_slices_options_change_the_table(s8f, planted, tmp_path):
    out = tmp_path / "s.csv"
    assert cli.main(_args(s8f, planted, out, "--n-boot", "200", "--min-components", "50", "--min-support", "100")) == 0
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert all(r["estimable"] == "False" for r in rows if int(r["n_components"]) < 50)
    assert all(r["no_interval_reason"].endswith("fewer than 50") for r in rows if 0 < int(r["n_components"]) < 50)
    assert all(r["too_small"] == ("True" if int(r["support"]) < 100 else "False") for r in rows)
    assert "at least 50 components" in rows[0]["ci_method"]


@pytest.mark.parametrize(
    "extra,message",
    [
        (("--n-boot", "0"), "--n-boot"),
        (("--min-components", "0"), "--min-components"),
        (("--min-support", "-2"), "--min-support"),
    ],
)
def test_bad_options_exit_2_and_keep_the_old_file(s8f, planted, tmp_path, capsys, extra, message):
    out = tmp_path / "keep.csv"
    out.write_text("previous\n")
    assert cli.main(_args(s8f, planted, out, *extra)) == 2
    err = capsys.readouterr().err
    assert err.startswith("microctx slices: ") and message in err and "Traceback" not in err and err.count("\n") == 1
    assert out.read_text() == "previous\n"


def test_unusable_submission_exits_2(s8f, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = tmp_path / "s.csv"
    assert cli.main(_args(s8f, bad, out)) == 2
    assert "bad.json" in capsys.readouterr().err and not out.exists()


def test_report_refuses_bad_statistics_before_a_kernel(s8f, planted, tmp_path, capsys):
    out = tmp_path / "r"
    assert cli.main(["report", "grade", "--submission", str(planted), "--out", str(out), "--n-boot", "0"]) == 2
    assert "--n-boot" in capsys.readouterr().err and not out.exists()


def test_report_options_reach_the_notebook_and_report_json(monkeypatch, s8f, planted, tmp_path):
    """What `report grade` hands to make_report (no kernel here: the notebook run is tested in
    test_reports): the notebook parameters and the full settings for report.json."""
    seen = {}

    def fake_make_report(kind, parameters, destination, **kw):
        seen.update(kind=kind, parameters=parameters, **kw)
        return {"kind": kind, "notebook": "grade_report.ipynb", "charts": [], "seconds": 0.0}

    monkeypatch.setattr(reports, "make_report", fake_make_report)
    assert (
        cli.main(
            [
                "report",
                "grade",
                "--submission",
                str(planted),
                "--out",
                str(tmp_path / "r"),
                "--seed",
                "7",
                "--n-boot",
                "2000",
                "--min-components",
                "12",
            ]
        )
        == 0
    )
    assert {k: seen["parameters"][k] for k in ("seed", "n_boot", "min_support", "min_components")} == {
        "seed": 7,
        "n_boot": 2000,
        "min_support": 20,
        "min_components": 12,
    }
    statistics = seen["statistics"]
    assert statistics["seed"] == 7 and statistics["n_boot"] == 2000 and statistics["min_components"] == 12
    assert {"alpha", "confidence", "adjustment", "min_gap", "min_support"} <= set(statistics)


def test_slices_marks_an_example_submissions_look_as_grade_does(s8f, s8f_answers, planted, tmp_path, capsys):
    """`microctx slices` grades on test, so it records a look; an example submission's look (the
    planted one here) is kept marked and not counted, as `microctx grade` keeps it. It was counted."""
    import copy

    from microctx.grading import ledger

    assert cli.main(_args(s8f, planted, tmp_path / "a.csv", "--n-boot", "200")) == 0
    assert "a planted look" in capsys.readouterr().out
    edited = copy.deepcopy(planted_submission(s8f_answers))
    edited["answers"][0]["labels"] = [*edited["answers"][0]["labels"], "bug?"]  # no longer the example
    (tmp_path / "edited.json").write_bytes(dumps(edited))
    assert cli.main(_args(s8f, tmp_path / "edited.json", tmp_path / "b.csv", "--n-boot", "200")) == 0
    assert [e["marked"] for e in ledger.entries()] == ["planted", None]
