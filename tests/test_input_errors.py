"""Unusable input: exit 2, one line naming file, record and field; nothing written or replaced."""

from __future__ import annotations

import copy
import subprocess
import sys

import orjson
import pytest

from microctx.cli import main
from microctx.corpus.public import corpus_to_export


@pytest.fixture(scope="module")
def rows(s8f_corpus):
    return corpus_to_export(s8f_corpus)[:60]


def freeze_rows(tmp_path, payload: bytes, capsys, *extra):
    raw = tmp_path / "raw.json"
    raw.write_bytes(payload)
    outs = [tmp_path / f"{k}.json" for k in ("public", "answers", "report")]
    code = main(
        [
            "freeze",
            str(raw),
            "--public",
            str(outs[0]),
            "--answers",
            str(outs[1]),
            "--report",
            str(outs[2]),
            "--source",
            "test",
            *extra,
        ]
    )
    return code, capsys.readouterr(), outs


def mutate(rows, index, **changes):
    rows = copy.deepcopy(rows)
    for key, value in changes.items():
        if value is KeyError:
            del rows[index][key]
        else:
            rows[index][key] = value
    return orjson.dumps(rows)


@pytest.mark.parametrize(
    "changes,expected",
    [
        ({"title": ""}, "record #5 (number {n}): field 'title': empty title"),
        ({"url": ""}, "record #5 (number {n}): field 'url': empty URL"),
        ({"number": 0}, "record #5 (number 0): field 'number': issue number must be positive, got 0"),
        ({"number": -3}, "field 'number': issue number must be positive"),
        ({"number": 1 << 63}, "field 'number': issue number above 9,223,372,036,854,775,807 (2^63 - 1)"),
        ({"number": "12"}, "record #5: field 'number': expected number, got string"),
        ({"title": KeyError}, "record #5 (number {n}): field 'title': missing"),
        ({"createdAt": "2026-13-01T00:00:00Z"}, "field 'createdAt': month must be in 1..12"),
        ({"updatedAt": "yesterday"}, "field 'updatedAt': not an RFC 3339 timestamp"),
        ({"labels": [{"name": 3}]}, "field 'labels': label 0: expected an object with a string \"name\""),
        ({"state": None}, "field 'state': expected string, got null"),
    ],
)
def test_bad_records(tmp_path, rows, capsys, changes, expected):
    code, captured, outs = freeze_rows(tmp_path, mutate(rows, 5, **changes), capsys)
    message = expected.format(n=rows[5]["number"])
    assert code == 2
    assert captured.err.count("\n") == 1 and "raw.json: " in captured.err and message in captured.err, captured.err
    assert not any(p.exists() for p in outs)


def test_repeated_number(tmp_path, rows, capsys):
    code, captured, _ = freeze_rows(tmp_path, mutate(rows, 9, number=rows[2]["number"]), capsys)
    assert (
        code == 2
        and f"record #9 (number {rows[2]['number']}): field 'number': number {rows[2]['number']} repeats record #2"
        in captured.err
    )


def test_too_few_records(tmp_path, rows, capsys):
    code, captured, _ = freeze_rows(tmp_path, orjson.dumps(rows[:49]), capsys)
    assert code == 2 and "49 issues, at least 50 are needed" in captured.err


@pytest.mark.parametrize(
    "payload,expected",
    [
        (b'{"not": "an array"}', "expected a JSON array of issues, got object"),
        (b"[1, 2]", "record #0: expected an object, got number"),
        (b'[{"number": 1,', "not valid JSON"),
        (b"", "empty file, expected JSON"),
        (b'[{"title": "caf\xe9"}]', "not valid UTF-8"),
    ],
)
def test_unusable_files(tmp_path, capsys, payload, expected):
    code, captured, _ = freeze_rows(tmp_path, payload, capsys)
    assert code == 2 and expected in captured.err and "Traceback" not in captured.err


def test_missing_file(tmp_path, capsys):
    code = main(["grade", "--answers", str(tmp_path / "nope.json"), "--submission", "x", "--output", str(tmp_path / "g.json")])
    assert code == 2 and "nope.json: cannot read file" in capsys.readouterr().err


def test_tolerated_variations(tmp_path, rows, capsys):
    varied = copy.deepcopy(rows)
    varied[0]["state"] = "closed"
    varied[1]["body"] = None
    varied[2]["labels"] = None
    del varied[3]["closedAt"]
    varied[4]["extra"] = {"ignored": True}
    varied[5]["labels"] = [{"name": ""}, {"name": "b"}, {"name": "a"}, {"name": "b"}]
    varied[6]["createdAt"] = "2026-01-02T03:04:05.120+02:00"
    code, captured, outs = freeze_rows(tmp_path, orjson.dumps(varied), capsys)
    assert code == 0, captured.err
    public = {r["number"]: r for r in orjson.loads(outs[0].read_bytes())["records"]}
    assert public[rows[0]["number"]]["state"] == "CLOSED"
    assert public[rows[1]["number"]]["body"] == ""
    assert public[rows[2]["number"]]["labels"] is None
    assert public[rows[3]["number"]]["closed_at"] is None
    assert public[rows[5]["number"]]["labels"] == ["a", "b", "b"]  # empty names dropped, duplicates kept
    assert public[rows[6]["number"]]["created_at"] == "2026-01-02T03:04:05.12+02:00"


def test_failure_leaves_good_outputs_untouched(tmp_path, rows, capsys):
    code, _, outs = freeze_rows(tmp_path, orjson.dumps(rows), capsys)
    assert code == 0
    before = [p.read_bytes() for p in outs]
    code, _, outs = freeze_rows(tmp_path, mutate(rows, 1, title=""), capsys)
    assert code == 2
    assert [p.read_bytes() for p in outs] == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answers.json", "public.json", "raw.json", "report.json"]


def test_cli_runs_as_a_program_without_pandas(tmp_path, s8f):
    probe = (
        "import sys, microctx.cli as c; code = c.main(sys.argv[1:]); "
        "assert 'pandas' not in sys.modules and 'duckdb' not in sys.modules and 'papermill' not in sys.modules, "
        "sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'duckdb', 'papermill')); sys.exit(code)"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            probe,
            "grade",
            "--answers",
            str(s8f.answers),
            "--submission",
            str(s8f.answers),
            "--output",
            str(tmp_path / "g.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("PASS: 680/680 test records exact")


@pytest.mark.parametrize(
    "payload,expected",
    [
        (b'{"not": "an array"}', "-: expected a JSON array of issues, got object"),
        (b'[{"number": 1,', "-: not valid JSON"),
        (b"[1, 2]", "-: record #0: expected an object, got number"),
        (b"[]" + b" " * (1 << 16) + b"[1]", "-: not valid JSON: unexpected content after document"),
        (None, None),  # a good export: the same three files as from the file
    ],
)
def test_an_export_on_standard_input_is_read_once(tmp_path, rows, payload, expected):
    """`freeze -`: the streaming reader closed standard input, and a layout it could not take was
    then read again from it: exit 70 (read of closed file), or a parse of the bytes it had not
    consumed. Now standard input is parsed whole, its errors named as a file's."""
    good = orjson.dumps(rows)
    outs = [tmp_path / f"{k}.json" for k in ("public", "answers", "report")]
    argv = [sys.executable, "-m", "microctx", "freeze", "-", "--source", "test"]
    argv += [x for k, p in zip(("--public", "--answers", "--report"), outs, strict=True) for x in (k, str(p))]
    done = subprocess.run(argv, input=good if payload is None else payload, capture_output=True)
    if payload is None:
        assert done.returncode == 0, done.stderr
        raw = tmp_path / "raw.json"
        raw.write_bytes(good)
        (tmp_path / "again").mkdir()
        again = [tmp_path / "again" / p.name for p in outs]
        assert (
            main(
                [
                    "freeze",
                    str(raw),
                    "--source",
                    "test",
                    "--public",
                    str(again[0]),
                    "--answers",
                    str(again[1]),
                    "--report",
                    str(again[2]),
                ]
            )
            == 0
        )
        assert [p.read_bytes() for p in outs] == [p.read_bytes() for p in again]
        return
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1 and expected in err, err
    assert not any(p.exists() for p in outs)
