"""The held-out ledger (microctx.grading.ledger): one entry per grading against test answers,
append-only, nothing lost to concurrent writers; `microctx grade`, `ledger` and the reports."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import orjson
import pytest

from microctx.cli import main
from microctx.contract.digests import file_sha256
from microctx.grading import ledger

WRITER = """
import sys
from microctx.grading.ledger import record_look
for i in range(int(sys.argv[2])):
    record_look(answers_sha256="a" * 64, submission_sha256=f"{i:064d}", candidate=sys.argv[1], config_digest=None,
                via="test", grade={"test_records": i})
"""


def test_concurrent_writers_lose_no_entry(tmp_path, monkeypatch):
    path = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("MICROCTX_LEDGER", str(path))
    writers, each = 4, 40
    processes = [subprocess.Popen([sys.executable, "-c", WRITER, f"writer{w}", str(each)]) for w in range(writers)]
    assert [p.wait() for p in processes] == [0] * writers
    rows = ledger.entries(path=path)
    assert len(rows) == writers * each and [r["id"] for r in rows] == list(range(1, writers * each + 1))
    for w in range(writers):
        mine = [r for r in rows if r["candidate"] == f"writer{w}"]
        assert [orjson.loads(r["summary"])["test_records"] for r in mine] == list(range(each))  # in order, none lost
    assert ledger.looks("a" * 64, path=path) == writers * each and ledger.looks("a" * 64, "writer2", path=path) == each
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_ledger_is_append_only(tmp_path):
    path = tmp_path / "ledger.sqlite"
    entry = ledger.record_look(
        answers_sha256="b" * 64, submission_sha256=None, candidate="x", config_digest=None, via="test", grade={}, path=path
    )
    assert entry["id"] == 1 and entry["answers_looks"] == entry["candidate_looks"] == 1
    connection = sqlite3.connect(path)
    for statement in ("UPDATE looks SET candidate = 'y'", "DELETE FROM looks"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            connection.execute(statement)
    connection.close()
    assert [e["candidate"] for e in ledger.entries(path=path)] == ["x"]


def test_default_path_is_in_the_users_data_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("MICROCTX_LEDGER")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert ledger.ledger_path() == tmp_path / "data" / "microctx" / "ledger.sqlite"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ledger.ledger_path() == tmp_path / "home" / ".local" / "share" / "microctx" / "ledger.sqlite"


def test_grade_appends_one_look_and_tune_grades_none(tmp_path, s8f, capsys):
    from microctx.candidates.devkit import make_devkit
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers

    answers = load_answers(s8f.answers)
    submission = tmp_path / "oracle.json"
    submission.write_bytes(
        dumps(
            {
                "schema": "fak-microcontext-submission/1",
                "corpus_sha256": answers["corpus_sha256"],
                "answers": answers["answers"],
                "aggregates": answers["aggregates"],
            }
        )
    )
    (tmp_path / "oracle.run.json").write_bytes(dumps({"candidate": "oracle-cand", "version": "1", "parameters": {"k": 1}}))
    for n in (1, 2):
        assert (
            main(["grade", "--answers", str(s8f.answers), "--submission", str(submission), "--output", str(tmp_path / "g.json")])
            == 0
        )
        assert f"looked at {n} time" in capsys.readouterr().out
    devkit = tmp_path / "devkit.json"
    devkit.write_bytes(dumps(make_devkit(answers)))
    assert (
        main(
            [
                "grade",
                "--split",
                "tune",
                "--devkit",
                str(devkit),
                "--submission",
                str(submission),
                "--output",
                str(tmp_path / "t.json"),
            ]
        )
        == 0
    )
    assert "108/108 tune records exact" in capsys.readouterr().out
    rows = ledger.entries()
    assert len(rows) == 2  # the tune grade is not a look at the held-out answers
    assert {r["answers_sha256"] for r in rows} == {file_sha256(s8f.answers)}
    assert {r["submission_sha256"] for r in rows} == {file_sha256(submission)}
    assert {r["candidate"] for r in rows} == {"oracle-cand"} and rows[0]["config_digest"] and rows[0]["via"] == "grade"
    assert orjson.loads(rows[0]["summary"]) == {
        "test_records": 680,
        "exact_records": 680,
        "false_positive_facts": 0,
        "false_negative_facts": 0,
        "aggregate_errors": 0,
        "citation_errors": 0,
        "quality_pass": True,
    }
    assert main(["ledger", "--answers", str(s8f.answers)]) == 0
    listed = capsys.readouterr()
    lines = listed.out.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("id\tat\tanswers_sha256") and "PASS 680/680 exact" in lines[1]
    assert "2 looks at held-out answers (1 answer bundle)" in listed.err
    assert main(["ledger", "--answers", "0" * 64]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1


def test_an_unwritable_ledger_stops_the_grade(tmp_path, s8f, monkeypatch, capsys):
    (tmp_path / "dir.sqlite").mkdir()
    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path / "dir.sqlite"))
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.grading.examples import demo_submissions  # any valid submission

    submission = tmp_path / "planted.json"
    submission.write_bytes(dumps(demo_submissions(load_answers(s8f.answers))["planted"]))
    assert (
        main(["grade", "--answers", str(s8f.answers), "--submission", str(submission), "--output", str(tmp_path / "g.json")]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "held-out ledger" in err[0] and not (tmp_path / "g.json").exists()


def test_reports_count_their_looks(s8f, tmp_path):
    """The example submissions' looks are kept, marked, and never counted; a candidate's run counts,
    by its configuration digest."""
    from microctx.contract.canonical import dumps
    from microctx.grading.examples import planted_submission
    from microctx.reports import tables

    inputs = tables.load_inputs(str(s8f.public), str(s8f.answers), default=["planted"])
    first = tables.grade_outputs(inputs, n_boot=10)
    assert first.look["marked"] == "planted" and first.look["answers_looks"] == 0
    assert "a planted look, kept in the ledger and not counted" in tables.held_out_looks(first)
    submission = tmp_path / "run.json"  # the planted answers, but made by a candidate run: a counted look
    submission.write_bytes(dumps(planted_submission(orjson.loads(s8f.answers.read_bytes()))))
    (tmp_path / "run.run.json").write_bytes(dumps({"candidate": "mine", "version": "1", "parameters": {"k": 1}}))
    ran = tables.load_inputs(str(s8f.public), str(s8f.answers), [str(submission)])
    looked = [tables.grade_outputs(ran, n_boot=10).look for _ in range(2)]
    assert [(x["marked"], x["answers_looks"], x["candidate_looks"]) for x in looked] == [(None, 1, 1), (None, 2, 2)]
    text = tables.held_out_looks(tables.grade_outputs(ran, n_boot=10))
    assert "graded on test **3 times**" in text and f"configuration `{looked[0]['config_digest'][:12]}…`): 3 looks" in text
    assert str(__import__("pathlib").Path.home()) not in text and "ledger.sqlite" not in text  # no local path in a report
    pair = tables.load_inputs(str(s8f.public), str(s8f.answers))
    compared = tables.compare_outputs(pair, n_boot=10)
    assert [g.look["marked"] for g in compared.grades.values()] == ["oracle", "planted"]
    assert len(ledger.entries()) == 6 and ledger.looks(looked[0]["answers_sha256"]) == 3


def test_the_python_api_counts_each_test_grading(s8f, tmp_path, monkeypatch):
    """microctx.grade() is a look like `microctx grade`: one entry per call; the oracle and planted
    examples and the demo's gradings are marked; record_look=False (the self-check) adds none."""
    import microctx
    from microctx.contract.canonical import dumps
    from microctx.grading.examples import DEMO_ENV, oracle_submission, planted_submission

    answers = microctx.load_answers(s8f.answers)
    submission = tmp_path / "sub.json"
    submission.write_bytes(dumps(planted_submission(answers)))
    (tmp_path / "sub.run.json").write_bytes(dumps({"candidate": "mine", "version": "2", "parameters": {}}))
    first = microctx.grade(s8f.answers, submission)
    second = microctx.grade(answers, str(submission))
    assert len(ledger.entries()) == 2 and (first.look["candidate_looks"], second.look["candidate_looks"]) == (1, 2)
    assert first.look["candidate"] == "mine" and first.look["via"] == "python grade"
    assert first.look["answers_sha256"] == second.look["answers_sha256"] == file_sha256(s8f.answers)
    example = microctx.grade(answers, planted_submission(answers))
    assert example.look["marked"] == "planted" and example.look["answers_looks"] == 2
    assert microctx.grade(answers, oracle_submission(answers), record_look=False).look is None
    monkeypatch.setenv(DEMO_ENV, "1")
    # the demo's variable marks only runs of the demo's own baselines: "mine" is still counted
    assert microctx.grade(s8f.answers, submission).look["marked"] is None
    rows = ledger.entries()
    assert [r["marked"] for r in rows] == [None, None, "planted", None] and ledger.looks(file_sha256(s8f.answers)) == 3
    assert [r["id"] for r in ledger.entries(candidate="mine")] == [1, 2, 4]
    assert len(ledger.entries(config=first.look["config_digest"][:10])) == 3


@pytest.mark.parametrize("via", ["cli", "api"])
def test_the_demo_variable_marks_only_the_demos_own_baselines(s8f, tmp_path, monkeypatch, via):
    """MICROCTX_DEMO (set by `microctx demo`) keeps a look uncounted only for a run of a built-in
    candidate the demo runs: a researcher's own candidate named like one, a command candidate, or a
    submission without a run is counted with the variable set (a look nobody could hide by setting it).
    `microctx grade` (the streamed grade, LookMark) and `microctx.grade` (look_mark) alike."""
    import microctx
    from microctx.contract.canonical import dumps
    from microctx.grading.examples import DEMO_ENV, planted_submission

    monkeypatch.setenv(DEMO_ENV, "1")
    body = planted_submission(microctx.load_answers(s8f.answers))
    body["candidate"] = "x"  # no longer the planted example
    runs = [{"candidate": "exact-sql", "kind": "builtin"}, {"candidate": "exact-sql", "kind": "command"}]
    runs += [{"candidate": "mine", "kind": "builtin"}, None]
    marks = []
    for i, run in enumerate(runs):
        submission = tmp_path / f"sub{i}.json"
        submission.write_bytes(dumps(body))
        if run is not None:
            (tmp_path / f"sub{i}.run.json").write_bytes(dumps({**run, "version": "1", "parameters": {}}))
        if via == "cli":
            argv = ["grade", "--answers", str(s8f.answers), "--submission", str(submission)]
            assert main([*argv, "--output", str(tmp_path / f"grade{i}.json")]) in (0, 1)
        else:
            microctx.grade(s8f.answers, submission)
        marks.append(ledger.entries()[-1]["marked"])
    assert marks == ["demo", None, None, None]
    assert ledger.looks(file_sha256(s8f.answers)) == 3


def test_ledger_filters_by_candidate_and_configuration(s8f, tmp_path, capsys):
    from microctx.cli import main

    for name, version in (("a", "1"), ("b", "1"), ("a", "2")):
        ledger.record_look(
            answers_sha256="c" * 64,
            submission_sha256=None,
            candidate=name,
            config_digest=(name + version) * 32,
            via="grade",
            grade={},
        )
    capsys.readouterr()
    assert main(["ledger", "--candidate", "a"]) == 0
    assert [line.split("\t")[4] for line in capsys.readouterr().out.splitlines()[1:]] == ["a", "a"]
    assert main(["ledger", "--config", "a2a2"]) == 0
    listed = capsys.readouterr()
    assert len(listed.out.splitlines()) == 2 and listed.err.startswith("1 look at held-out answers")


def _oracle(tmp_path, s8f, manifest: dict | None = None):
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers

    answers = load_answers(s8f.answers)
    submission = tmp_path / "oracle.json"
    submission.write_bytes(
        dumps(
            {
                "schema": "fak-microcontext-submission/1",
                "corpus_sha256": answers["corpus_sha256"],
                "answers": answers["answers"],
                "aggregates": answers["aggregates"],
            }
        )
    )
    if manifest is not None:
        (tmp_path / "oracle.run.json").write_bytes(dumps(manifest))
    return submission


def test_slices_is_a_look_and_cannot_overwrite_the_answers(tmp_path, s8f, capsys):
    import shutil

    answers = tmp_path / "answers.json"
    shutil.copyfile(s8f.answers, answers)
    before = answers.read_bytes()
    submission = _oracle(tmp_path, s8f, {"candidate": "sliced-cand", "version": "2", "parameters": {}})
    base = ["slices", "--public", str(s8f.public), "--answers", str(answers), "--submission", str(submission), "--n-boot", "20"]
    for target in (answers, submission, tmp_path / "." / "answers.json"):  # the gold answers, the submission
        assert main([*base, "--output", str(target)]) == 2
        err = capsys.readouterr().err
        assert "--output is the same file as the input" in err and err.count("\n") == 1
    assert answers.read_bytes() == before and ledger.entries() == []  # refused before any grading
    assert main([*base, "--output", str(tmp_path / "slices.csv")]) == 0
    assert "held-out ledger: answers" in capsys.readouterr().out
    rows = ledger.entries()
    assert [(r["via"], r["candidate"]) for r in rows] == [("slices", "sliced-cand")]
    assert rows[0]["config_digest"] == ledger.config_digest({"candidate": "sliced-cand", "version": "2", "parameters": {}})
    assert rows[0]["submission_sha256"] == file_sha256(submission)


def test_the_frontier_records_a_look_per_candidate(tmp_path, s8f):
    from microctx.grading import frontier
    from microctx.reports import tables

    submission = _oracle(
        tmp_path,
        s8f,
        {"candidate": "exact-sql", "version": "1", "parameters": {}, "cpu_seconds": 1.0, "counters": {"model_calls": 0}},
    )
    paths = [str(submission), str(submission)]
    inputs = tables.load_inputs(str(s8f.public), str(s8f.answers), paths, ["a", "b"])
    result = frontier.frontier_table(inputs, paths, ["a", "b"], n_boot=10)
    rows = ledger.entries()
    assert [(r["via"], r["candidate"]) for r in rows] == [("report frontier", "exact-sql")] * 2
    assert [result.looks[n]["answers_looks"] for n in ("a", "b")] == [1, 2]
    text = tables.held_out_looks(result.looks)
    digest = rows[0]["config_digest"][:12]
    assert (
        "graded on test **2 times**" in text
        and f"- `a` (ledger candidate `exact-sql`, configuration `{digest}…`): 1 look\n" in text
    )
    assert f"- `b` (ledger candidate `exact-sql`, configuration `{digest}…`): 2 looks" in text


def test_a_ledger_candidate_cannot_break_out_of_its_code_span(tmp_path, s8f):
    from microctx.reports import tables

    submission = _oracle(tmp_path, s8f, {"candidate": "x` <img src=x onerror=alert(1)> `y"})
    inputs = tables.load_inputs(str(s8f.public), str(s8f.answers), [str(submission)], ["oracle"])
    text = tables.held_out_looks(tables.grade_outputs(inputs, n_boot=10))
    assert "ledger candidate `x' <img src=x onerror=alert(1)> 'y`" in text and text.count("`") % 2 == 0


def test_an_append_is_one_durable_commit_and_leaves_the_wal_for_the_next(tmp_path):
    """Issue 24: the close's checkpoint (two more fsyncs, and a fresh WAL with a folder sync for the
    next command) is off; the commit itself stays durable (WAL, synchronous=FULL), and a new
    process reads the entry back from the WAL."""
    path = tmp_path / "ledger.sqlite"
    grade = {"passed": True, "score": 1.0}
    for via in ("first", "second"):
        ledger.record_look(answers_sha256="a" * 64, submission_sha256=None, candidate="c", config_digest=None,
                           via=via, grade=grade, path=path)  # fmt: skip
    wal = tmp_path / "ledger.sqlite-wal"
    assert wal.exists() and wal.stat().st_size > 0  # not checkpointed and deleted when the connection closed
    connection = ledger._connect(path)
    try:
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == ledger.WAL_PAGES
    finally:
        connection.close()
    code = f"import sqlite3; print([r[0] for r in sqlite3.connect({str(path)!r}).execute('SELECT via FROM looks ORDER BY id')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['first', 'second']"
