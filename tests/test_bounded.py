"""Bounded inputs, outputs that are ours by content, special files, formulas in CSV, linear-time
redaction (issue 23): each a planted hostile input that must end in exit 2 and one line, fast."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from microctx._io.csvout import csv_bytes, escape_cell, unescape_cell

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def cli(*argv, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    command = [sys.executable, "-m", "microctx", *map(str, argv)]
    return subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=timeout)


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip()


def freeze_args(folder: Path, raw) -> list:
    return [
        "freeze",
        raw,
        "--public",
        folder / "p.json",
        "--answers",
        folder / "a.json",
        "--report",
        folder / "r.json",
        "--source",
        "x",
    ]


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
def test_a_fifo_a_device_or_a_folder_as_raw_export_is_refused_at_once(tmp_path, kind):
    raw = {"fifo": tmp_path / "raw.fifo", "zero": Path("/dev/zero"), "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(raw)  # nobody ever writes to it: reading it would block for ever
    started = time.monotonic()
    line = one_line(cli(*freeze_args(tmp_path, raw), timeout=30))
    assert time.monotonic() - started < 20
    assert str(raw) in line and "not a regular file" in line
    assert not (tmp_path / "p.json").exists()


def test_dev_zero_and_a_fifo_as_submission_are_refused(tmp_path):
    fifo = tmp_path / "sub.fifo"
    os.mkfifo(fifo)
    for submission in (Path("/dev/zero"), fifo):
        done = cli(
            "grade",
            "--answers",
            DATA / "synthetic-answers.json",
            "--submission",
            submission,
            "--output",
            tmp_path / "g.json",
            timeout=30,
        )
        assert "not a regular file" in one_line(done)


@pytest.mark.parametrize("command", ["ledger", "run", "verify"])
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_fifo_or_a_device_hashed_by_name_is_refused_at_once(tmp_path, command, kind):
    """Inputs hashed by name (`ledger --answers`, the public corpus of `run`, the answers of
    `verify`) went through a plain open(): a FIFO nobody writes to blocked for ever and /dev/zero
    was hashed for ever. `file_sha256` now reads as every input does (`open_input`)."""
    special = {"fifo": tmp_path / "x.fifo", "zero": Path("/dev/zero")}[kind]
    if kind == "fifo":
        os.mkfifo(special)
    argv = {
        "ledger": ["ledger", "--answers", special],
        "run": ["run", "exact-sql", "--public", special, "--submission", tmp_path / "s.json"],
        "verify": [
            "verify",
            "--public",
            DATA / "synthetic-public.json",
            "--answers",
            special,
            "--report",
            DATA / "synthetic-report.json",
        ],
    }[command]
    started = time.monotonic()
    line = one_line(cli(*argv, env={"MICROCTX_LEDGER": str(tmp_path / "ledger.sqlite")}, timeout=30))
    assert time.monotonic() - started < 20
    assert str(special) in line and "not a regular file" in line
    assert not (tmp_path / "s.json").exists()


def test_an_input_over_the_size_limit_is_refused(tmp_path):
    line = one_line(cli(*freeze_args(tmp_path, DATA / "synthetic-raw.json"), env={"MICROCTX_MAX_INPUT_BYTES": "1000"}))
    assert "over the input limit of 1000" in line and "MICROCTX_MAX_INPUT_BYTES" in line


@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_a_special_file_at_an_output_path_is_refused_not_replaced(tmp_path, kind):
    target = tmp_path / "r.json"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        (tmp_path / "r.json").symlink_to("/dev/null")  # a link's own name is replaced: use the device itself below
        target.unlink()
        os.mknod(target, 0o600 | 0o020000, os.makedev(1, 3))  # a character device, as /dev/null
    line = one_line(cli(*freeze_args(tmp_path, DATA / "synthetic-raw.json")))
    assert "special file" in line and "r.json" in line
    assert not (tmp_path / "p.json").exists() and not target.is_file()  # the set was not written, the node stays


def test_report_out_does_not_take_a_freeze_folder_for_a_report(tmp_path):
    """The README names freeze's report `report.json`; a folder holding it is not a report folder:
    which folders are ours is decided by the manifest's schema id, never by a file name."""
    release = tmp_path / "release"
    release.mkdir()
    assert (
        cli(
            "freeze",
            DATA / "synthetic-raw.json",
            "--public",
            release / "public.json",
            "--answers",
            release / "answers.json",
            "--report",
            release / "report.json",
            "--source",
            "x",
        ).returncode
        == 0
    )
    before = sorted(p.name for p in release.iterdir())
    line = one_line(cli("report", "corpus", "--public", DATA / "synthetic-public.json", "--out", release))
    assert "not a microctx output folder" in line
    assert sorted(p.name for p in release.iterdir()) == before == ["answers.json", "public.json", "report.json"]


def test_a_catastrophic_redaction_pattern_runs_in_linear_time(tmp_path):
    """`(a+)+$` takes exponential time in a backtracking engine on `aaaa...b`; RE2 is linear."""
    import json

    rows = json.loads((DATA / "synthetic-raw.json").read_bytes())
    rows[0]["body"] = "a" * 50_000 + "b"
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(rows))
    rules = tmp_path / "red.toml"
    rules.write_text('[[rule]]\npattern = "(a+)+$"\nreplacement = "[redacted:public-corpus]"\n')
    started = time.monotonic()
    done = cli(*freeze_args(tmp_path, raw), "--redactions", rules, timeout=60)
    assert time.monotonic() - started < 30, "the pattern backtracked"
    assert done.returncode in (0, 1), done.stderr


def test_a_body_that_is_nothing_but_matches_stops_the_freeze_naming_record_and_rule(tmp_path):
    """A hostile body written to match one rule past the limit per body (each match would grow it
    by the replacement): exit 2, one line naming the record and the rule, nothing written."""
    import json

    from microctx.corpus.redact import MAX_MATCHES

    rows = json.loads((DATA / "synthetic-raw.json").read_bytes())
    rows[3]["body"] = "ok 10.0.0.1 " + "10.0.0.1 " * MAX_MATCHES  # one past the limit
    rows[1]["body"] = "10.0.0.1 " * MAX_MATCHES  # exactly at the limit: redacted
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(rows))
    rules = tmp_path / "red.toml"
    rules.write_text(
        '[[rule]]\npattern = "x"\nreplacement = "y"\n[[rule]]\npattern = "10\\\\.0\\\\.0\\\\.1"\nreplacement = "[ip]"\n'
    )
    line = one_line(cli(*freeze_args(tmp_path, raw), "--redactions", rules))
    number = rows[3]["number"]
    assert line == (
        f"microctx freeze: {rules}: record number {number}: field 'rule[1].pattern': the pattern matches more than {MAX_MATCHES:,} "
        "times in one title or body, past the limit per body; narrow the pattern"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw.json", "red.toml"]
    rows[3]["body"] = "fine"
    raw.write_text(json.dumps(rows))
    done = cli(*freeze_args(tmp_path, raw), "--redactions", rules)
    assert done.returncode in (0, 1), done.stderr
    frozen = {r["number"]: r for r in json.loads((tmp_path / "p.json").read_bytes())["records"]}
    assert frozen[rows[1]["number"]]["body"] == "[ip] " * MAX_MATCHES


def test_a_pattern_re2_cannot_run_in_linear_time_is_refused(tmp_path):
    rules = tmp_path / "red.toml"
    rules.write_text('[[rule]]\npattern = "(a)\\\\1"\nreplacement = "x"\n')
    line = one_line(cli(*freeze_args(tmp_path, DATA / "synthetic-raw.json"), "--redactions", rules))
    assert "field 'rule[0].pattern'" in line and "RE2" in line


@pytest.mark.parametrize(
    "value, written",
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1", "'+1"),
        ("-x", "'-x"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("'=already", "''=already"),
        ("plain", "plain"),
        ("'quoted'", "'quoted'"),
        ("", ""),
    ],
)
def test_formula_cells_are_written_as_text_and_read_back(value, written):
    assert escape_cell(value) == written
    assert unescape_cell(escape_cell(value)) == value
    assert escape_cell(-0.5) == -0.5 and escape_cell(None) == ""
    row = next(csv.reader(io.StringIO(csv_bytes(["h"], [[value]]).decode().split("\n", 1)[1])), [""])
    assert row == [written] or (written == "" and row in ([""], []))


def test_a_formula_in_a_sweep_grid_is_text_in_sweep_csv():
    from microctx.tuning.sweep import sweep_csv

    rows = [{"index": 0, "key": "k", "status": "ok", "param.model": '=HYPERLINK("http://evil")', "f1": -0.25}]
    text = sweep_csv(rows, "k").decode()
    assert text == 'index,key,status,param.model,f1,selected\n0,k,ok,"\'=HYPERLINK(""http://evil"")",-0.25,True\n'


def _hub_export(tmp_path: Path) -> tuple[Path, int]:
    import json

    rows = json.loads((DATA / "synthetic-raw.json").read_bytes())
    numbers = sorted(r["number"] for r in rows)
    rows[5]["body"] = "See " + " ".join(f"#{n}" for n in numbers)  # anyone can post this issue
    raw = tmp_path / "hub.json"
    raw.write_text(json.dumps(rows))
    return raw, rows[5]["number"]


def test_a_hub_issue_that_collapses_the_split_is_named(tmp_path):
    raw, hub = _hub_export(tmp_path)
    done = cli(*freeze_args(tmp_path, raw))
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert f"no test record is left (60 records): issue #{hub} references 59 in-corpus issues" in done.stderr
    assert not (tmp_path / "p.json").exists()


def test_isolate_hubs_keeps_the_references_as_facts_but_not_as_merges(tmp_path):
    import json

    raw, hub = _hub_export(tmp_path)
    done = cli(*freeze_args(tmp_path, raw), "--isolate-hubs")
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"warning: issue #{hub} references 59 in-corpus issues (more than 50): its references join "
        "their components into one split (see --isolate-hubs)\n"
    )
    answers = json.loads((tmp_path / "a.json").read_bytes())["answers"]
    assert len(next(a for a in answers if a["id"] == f"issue-{hub}")["references"]) == 60  # its own number too: facts as written
    report = json.loads((tmp_path / "r.json").read_bytes())
    assert report["test_records"] > 0 and report["train_records"] > 0


def test_isolate_hubs_leaves_a_corpus_without_hubs_byte_identical(tmp_path):
    plain, isolated = tmp_path / "plain", tmp_path / "isolated"
    plain.mkdir()
    isolated.mkdir()
    assert cli(*freeze_args(plain, DATA / "synthetic-raw.json")).returncode == 0
    assert cli(*freeze_args(isolated, DATA / "synthetic-raw.json"), "--isolate-hubs").returncode == 0
    for name in ("p.json", "a.json", "r.json"):
        assert (plain / name).read_bytes() == (isolated / name).read_bytes()


def test_lab_dir_never_writes_through_a_dangling_link(tmp_path):
    from microctx.lab.server import WORKBENCH, prepare_lab
    from microctx.reports.build import NOTEBOOKS

    lab, outside = tmp_path / "lab", tmp_path / "outside"
    lab.mkdir()
    outside.mkdir()
    names = [*NOTEBOOKS.values(), WORKBENCH]
    for name in names:
        (lab / name).symlink_to(outside / name)  # dangling: following it would write outside the folder
    assert prepare_lab(lab) == []
    assert list(outside.iterdir()) == []
    assert all((lab / name).is_symlink() for name in names)
    fresh = tmp_path / "fresh"
    assert sorted(p.name for p in prepare_lab(fresh)) == sorted(names)
