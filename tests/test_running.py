"""The isolated runner: what a candidate can see, what a failed run leaves, what the manifest holds."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from microctx.candidates.devkit import make_devkit
from microctx.candidates.runner import manifest_path, run_candidate
from microctx.cli import main
from microctx.contract.canonical import dumps
from microctx.errors import InputError

HERE = Path(__file__).resolve().parent
SNOOP = HERE / "candidates" / "snoop.py"
FAULTY = HERE / "candidates" / "faulty.py"
sys.path.insert(0, str(HERE / "candidates"))
import snoop  # noqa: E402


@pytest.fixture(scope="module")
def devkit_file(s8f_answers, tmp_path_factory):
    path = tmp_path_factory.mktemp("devkit") / "devkit.json"
    path.write_bytes(dumps(make_devkit(s8f_answers)))
    return path


def _manifest(submission: Path) -> dict:
    return json.loads(manifest_path(submission).read_text())


def test_snoop_finds_the_answers_when_they_are_in_reach(s8f):
    # the control: the nosy candidate does find the answers when handed a path beside them
    findings, _ = snoop.search([str(s8f.public)])
    assert any("file named like the answers" in f for f in findings)
    assert any("MICROCTX_DATA_DIR" in f for f in findings)  # the test process itself has it


def _check_snoop_report(report: dict, s8f_answers) -> None:
    assert report["findings"] == []
    assert len(report["folders"]) >= 4  # it did look: cwd and parents, every given path's folders
    assert report["devkit_splits"] == ["train", "tune"]
    test_ids = {a["id"] for a in s8f_answers["answers"] if a["split"] == "test"}
    assert len(report["devkit_ids"]) == 320 and not test_ids & set(report["devkit_ids"])
    assert "MICROCTX_DATA_DIR" not in report["environment"]
    assert "PLANTED_ANSWERS_PATH" not in report["environment"] and "PLANTED_DATA" not in report["environment"]
    assert not report["cwd"].startswith(str(HERE.parent))


def test_function_candidate_sees_no_answers(s8f, s8f_answers, devkit_file, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANTED_ANSWERS_PATH", str(s8f.answers))
    monkeypatch.setenv("PLANTED_DATA", str(s8f.answers.parent))
    monkeypatch.setenv("PATH", f"{s8f.answers.parent}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "snoop.json"
    manifest = run_candidate(f"{SNOOP}:run", s8f.public, out, devkit=devkit_file)
    assert manifest["ok"], manifest["error"]
    _check_snoop_report(json.loads(out.read_text())["snoop"], s8f_answers)
    assert manifest["counters"]["tool_calls"] == len(json.loads(out.read_text())["snoop"]["folders"])


def test_command_candidate_sees_no_answers(s8f, s8f_answers, devkit_file, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANTED_ANSWERS_PATH", str(s8f.answers))
    monkeypatch.chdir(HERE)  # the template names the script relative to here; the runner makes it absolute
    out = tmp_path / "snoop-cmd.json"
    code = main(
        [
            "run",
            "snoop",
            "--public",
            str(s8f.public),
            "--submission",
            str(out),
            "--devkit",
            str(devkit_file),
            "--cmd",
            "python candidates/snoop.py {public} {submission} {devkit}",
        ]
    )
    assert code == 0
    _check_snoop_report(json.loads(out.read_text())["snoop"], s8f_answers)
    manifest = _manifest(out)
    assert manifest["kind"] == "command" and manifest["version"] == "snoop-cmd"
    assert manifest["counters"]["tool_calls"] >= 4 and manifest["counters"]["model_calls"] is None


@pytest.mark.parametrize(
    "function, params, expected",
    [
        ("crash", [], "exited with status 1: candidate failed: RuntimeError: planted crash"),
        ("sleep", ["--timeout", "1.5"], "timed out after 1.5 seconds"),
        ("invalid_json", [], "invalid submission: submission: not valid JSON"),
        ("wrong_shape", [], "expected a string id, got number"),
        ("wrong_corpus", [], "bound to corpus 0000000000000000000000000000000000000000000000000000000000000000"),
        ("no_output", [], "the candidate wrote no submission"),
    ],
)
def test_failed_runs_leave_a_manifest_and_no_submission(s8f, tmp_path, function, params, expected):
    out = tmp_path / "sub.json"
    out.write_text('{"corpus_sha256": "stale"}')  # an earlier run's file must not survive a failed run
    code = main(["run", f"{FAULTY}:{function}", "--public", str(s8f.public), "--submission", str(out), *params])
    assert code == 1
    assert not out.exists()
    manifest = _manifest(out)
    assert manifest["ok"] is False and expected in manifest["error"]
    assert manifest["submission_sha256"] is None
    assert manifest["timed_out"] is (function == "sleep")
    if function == "sleep":
        assert manifest["wall_seconds"] < 10 and manifest["exit_status"] == -9


def test_manifest_records_counters_version_parameters_and_cost(s8f, tmp_path):
    out = tmp_path / "counted.json"
    code = main(
        [
            "run",
            f"{FAULTY}:counted",
            "--public",
            str(s8f.public),
            "--submission",
            str(out),
            "--param",
            "k=3",
            "--param",
            "name=bm25",
            "--param",
            "flag=true",
        ]
    )
    assert code == 0
    m = _manifest(out)
    assert m["ok"] is True and m["error"] == ""
    assert m["counters"] == {"model_calls": 3, "tool_calls": 2, "input_tokens": 1200, "output_tokens": 345}
    assert m["version"] == "counted-1"
    assert m["parameters"] == {"k": 3, "name": "bm25", "flag": True}
    assert json.loads(out.read_text())["params"] == {"k": 3, "name": "bm25", "flag": True}
    assert m["corpus_sha256"] == "0740c911815eba7e44c63a14e021f418b66e8a42556d40f14b8b4cd58f173827"
    import hashlib

    assert m["submission_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert m["peak_memory_bytes"] > 1 << 20 and m["cpu_seconds"] > 0 and m["wall_seconds"] > 0
    assert m["started_at"].endswith("Z") and m["started_at"] <= m["ended_at"]
    assert m["exit_status"] == 0 and m["timed_out"] is False


def test_unusable_input_exits_2_and_runs_nothing(s8f, tmp_path):
    out = str(tmp_path / "x.json")
    cases = [
        ["run", "exact-sql", "--public", str(s8f.answers), "--submission", out],  # answers as the corpus
        ["run", "exact-sql", "--public", str(s8f.public), "--submission", out, "--devkit", str(s8f.answers)],
        ["run", "no-such-candidate", "--public", str(s8f.public), "--submission", out],
        ["run", "exact-sql", "--public", str(s8f.public), "--submission", out, "--param", "nope=1"],
        ["run", "exact-sql", "--public", str(s8f.public), "--submission", out, "--param", "novalue"],
        ["run", "c", "--public", str(s8f.public), "--submission", out, "--cmd", "python x.py {devkit}"],
        ["run", "c", "--public", str(s8f.public), "--submission", out, "--cmd", f"cat {s8f.answers}"],
        ["run", "text-only", "--public", str(s8f.public), "--submission", out],  # needs a devkit
    ]
    for argv in cases:
        assert main(argv) == 2, argv
    assert not list(tmp_path.iterdir())


def test_devkit_bound_to_another_corpus_is_refused(s8f, s8f_answers, tmp_path):
    other = make_devkit(s8f_answers)
    other["corpus_sha256"] = "f" * 64
    path = tmp_path / "devkit.json"
    path.write_bytes(dumps(other))
    with pytest.raises(InputError, match="devkit is bound to corpus ffff"):
        run_candidate("exact-sql", s8f.public, tmp_path / "s.json", devkit=path)


def test_module_function_from_the_callers_folder(s8f, tmp_path, monkeypatch):
    # `module:function` found in the caller's directory is imported in the child from there alone
    (tmp_path / "my_pipeline.py").write_text(FAULTY.read_text())
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out" / "s.json"
    out.parent.mkdir()
    manifest = run_candidate("my_pipeline:counted", s8f.public, out, params={"k": 1})
    assert manifest["ok"], manifest["error"]
    assert manifest["entry"] == "my_pipeline:counted" and manifest["version"] == "counted-1"
    assert json.loads(out.read_text())["params"] == {"k": 1}


def test_clean_environment_keeps_path_but_drops_data_entries(s8f, tmp_path, monkeypatch):
    from microctx.candidates.runner import clean_environment

    monkeypatch.setenv("PATH", f"{s8f.answers.parent}{os.pathsep}/usr/bin")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LC_ALL", f"{s8f.answers}")  # a kept name with a private value is dropped
    env = clean_environment(tmp_path)
    assert env["PATH"] == f"{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin"
    assert "LC_ALL" not in env and env["LANG"] == "C.UTF-8" and env["HOME"] == str(tmp_path)
    assert "MICROCTX_DATA_DIR" not in env and "PYTHONPATH" not in env
