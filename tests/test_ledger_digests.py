"""The held-out ledger records the digest of the bytes graded: each input is read once, so a
submission or an answer bundle on standard input (`-`) is graded and looked at (it was hashed by
name afterwards: `-: No such file or directory`, exit 2), and a file changed after its read is not
taken for the one graded (nor is its run manifest dropped for it)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import orjson
import pytest

from microctx.cli import main
from microctx.grading import ledger


def _submission(tmp_path, s8f, manifest: dict | None = None):
    from microctx.contract.schemas import load_answers

    answers = load_answers(s8f.answers)
    document = {key: answers[key] for key in ("corpus_sha256", "answers", "aggregates")}
    path = tmp_path / "mine.json"
    path.write_bytes(orjson.dumps({"schema": "fak-microcontext-submission/1", **document}))
    if manifest is not None:
        manifest = {**manifest, "submission_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        (tmp_path / "mine.run.json").write_bytes(orjson.dumps(manifest))
    return path


def _run(args, stdin: bytes, ledger_path):
    env = {**os.environ, "MICROCTX_LEDGER": str(ledger_path)}
    return subprocess.run([sys.executable, "-m", "microctx", *map(str, args)], input=stdin, capture_output=True, env=env)


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize("command", ["grade", "slices", "grade --answers -"])
def test_an_input_on_standard_input_is_graded_and_its_bytes_recorded(tmp_path, s8f, monkeypatch, command):
    submission = _submission(tmp_path, s8f)
    stdin_answers = command.endswith("-")
    answers, given = ("-", submission) if stdin_answers else (s8f.answers, "-")
    args = [command.split()[0], "--answers", answers, "--submission", given, "--output", tmp_path / "out.csv"]
    if command == "slices":
        args += ["--public", s8f.public, "--n-boot", "20"]
    stdin = (s8f.answers if stdin_answers else submission).read_bytes()
    done = _run(args, stdin, tmp_path / "ledger.sqlite")
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "out.csv").is_file() and b"held-out ledger" in done.stdout
    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path / "ledger.sqlite"))
    [entry] = ledger.entries()
    assert (entry["answers_sha256"], entry["submission_sha256"]) == (_sha(s8f.answers), _sha(submission))
    assert entry["candidate"] == ("mine" if stdin_answers else "-")


@pytest.mark.parametrize("command", ["grade", "slices"])
def test_standard_input_given_for_two_inputs_is_refused(tmp_path, s8f, monkeypatch, command):
    """`--answers - --submission -`: standard input can be read once, so the second input would be
    empty (it failed on the answers' schema, naming neither option). Refused up front, naming both,
    exit 2, nothing written and no look."""
    args = [command, "--answers", "-", "--submission", "-", "--output", tmp_path / "out.csv"]
    if command == "slices":
        args += ["--public", s8f.public]
    done = _run(args, s8f.answers.read_bytes(), tmp_path / "ledger.sqlite")
    assert done.returncode == 2 and not (tmp_path / "out.csv").exists()
    assert "--submission: standard input (-) is also --answers" in done.stderr.decode(), done.stderr.decode()
    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path / "ledger.sqlite"))
    assert ledger.entries() == []


@pytest.mark.parametrize("command", ["grade", "grade whole", "slices"])
def test_a_submission_changed_after_its_read_is_not_recorded_for_it(tmp_path, s8f, monkeypatch, capsys, command):
    """The submission is rewritten (the same answers, other bytes) while it is graded, after
    its read: the ledger names the bytes graded and keeps the run manifest that vouches for them."""
    from microctx.contract import score

    submission = _submission(tmp_path, s8f, {"candidate": "cand-x", "version": "1", "parameters": {}})
    graded = submission.read_bytes()
    for name in ("grade", "score_stream"):  # the real grader, then the file changes under it
        real = getattr(score, name)

        def rewriting(*a, real=real, **k):
            submission.write_bytes(orjson.dumps(orjson.loads(graded), option=orjson.OPT_INDENT_2))
            return real(*a, **k)

        monkeypatch.setattr(score, name, rewriting)
    answers = tmp_path / "answers.json"
    if command == "grade whole":  # a bundle the streaming reader cannot take: read whole
        bundle = orjson.loads(s8f.answers.read_bytes())
        answers.write_bytes(orjson.dumps({"answers": bundle.pop("answers"), **bundle}))
    else:
        answers.write_bytes(s8f.answers.read_bytes())
    args = [command.split()[0], "--answers", answers, "--submission", submission, "--output", tmp_path / "out.csv"]
    if command == "slices":
        args += ["--public", s8f.public, "--n-boot", "20"]
    assert main(list(map(str, args))) == 0, capsys.readouterr().err
    assert submission.read_bytes() != graded  # it did change
    [entry] = ledger.entries()
    assert entry["submission_sha256"] == hashlib.sha256(graded).hexdigest()
    assert entry["answers_sha256"] == _sha(answers)
    assert entry["candidate"] == "cand-x"  # the manifest names the bytes graded


@pytest.mark.parametrize("kind", ["grade", "corpus"])
def test_a_report_refuses_standard_input_before_its_notebook_runs(tmp_path, s8f, kind):
    """A report's notebook reads its inputs again by path: `-` was read by the parent's check and
    the notebook then found it empty (a failed cell, a `.failed` folder). Refused up front."""
    submission = _submission(tmp_path, s8f)
    out = tmp_path / "report"
    if kind == "grade":
        args = ["report", "grade", "--public", s8f.public, "--answers", s8f.answers, "--submission", "-"]
    else:
        args = ["report", "corpus", "--public", "-"]
    stdin = (submission if kind == "grade" else s8f.public).read_bytes()
    done = _run([*args, "--out", out], stdin, tmp_path / "ledger.sqlite")
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "microctx report: -: a report's notebook reads its inputs by path: give a file, not standard input\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.json"]  # no report, no .failed folder, no ledger


def test_export_takes_a_submission_on_standard_input(tmp_path, s8f, monkeypatch):
    """`microctx export --submission -` failed as grade did: its look hashed `-` by name."""
    submission = _submission(tmp_path, s8f)
    args = ["export", "--public", s8f.public, "--answers", s8f.answers, "--submission", "-"]
    done = _run([*args, "--output", tmp_path / "eee.json", "--n-boot", "20"], submission.read_bytes(), tmp_path / "ledger.sqlite")
    assert done.returncode == 0, done.stderr.decode()
    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path / "ledger.sqlite"))
    [entry] = ledger.entries()
    assert (entry["via"], entry["submission_sha256"]) == ("export", _sha(submission))
