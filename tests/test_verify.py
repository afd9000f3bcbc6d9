"""`microctx verify`: passes on the published files; names every planted problem."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from microctx.cli import main
from microctx.contract.canonical import dumps
from microctx.corpus import halves
from microctx.corpus import verify as verifying
from microctx.corpus.freeze_stream import FreezePass
from microctx.errors import InputError


@pytest.fixture(params=["parsed whole", "parsed in batches", "read in two halves"], autouse=True)
def public_parsing(request, monkeypatch):
    """Every case runs three times: large public files are parsed record by record, and the
    streaming rebuild reads a large one in two halves, the second in a forked process."""
    if request.param == "parsed in batches":
        monkeypatch.setattr(verifying, "STREAM_PUBLIC_FROM_BYTES", 0)
    if request.param == "read in two halves":
        monkeypatch.setattr(halves, "TWO_HALVES_FROM", 0)
        monkeypatch.setattr(halves, "_cores", lambda: 2)


@pytest.fixture()
def copies(tmp_path, s8f):
    out = {}
    for key in ("public", "answers", "report"):
        out[key] = tmp_path / f"{key}.json"
        out[key].write_bytes(Path(getattr(s8f, key)).read_bytes())
    return out


def run_verify(paths, capsys) -> tuple[int, str]:
    code = main(
        ["verify", "--public", str(paths["public"]), "--answers", str(paths["answers"]), "--report", str(paths["report"])]
    )
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def edit_and_verify(copies, capsys, key: str, change) -> tuple[int, str]:
    """Apply `change` to the parsed copy of one artifact, write it canonically, run verify."""
    doc = orjson.loads(copies[key].read_bytes())
    change(doc)
    copies[key].write_bytes(dumps(doc))
    return run_verify(copies, capsys)


def test_published_files_verify(copies, capsys):
    code, text = run_verify(copies, capsys)
    assert code == 0, text
    assert text.startswith("ok: 1000 records")


def test_changed_byte_in_a_body(copies, capsys):
    data = copies["public"].read_bytes()
    at = data.index(b'"body": "') + len(b'"body": "') + 3  # inside the first record's body
    assert data[at : at + 1].isalpha()
    copies["public"].write_bytes(data[:at] + (b"x" if data[at : at + 1] != b"x" else b"y") + data[at + 1 :])
    code, text = run_verify(copies, capsys)
    assert code == 1
    assert "record issue-5105: field body_sha256" in text
    assert "answers: corpus_sha256" in text and "report: corpus_sha256" in text


def test_edited_answer(copies, capsys):
    def change(doc):
        doc["answers"][0]["references"] = [4968, 4969]

    code, text = edit_and_verify(copies, capsys, "answers", change)
    assert code == 1
    assert "answers: record issue-5105: field references: file has [4968, 4969], recomputed [4968]" in text
    assert "report: answers_sha256" in text


def test_leak_check_set_to_false(copies, capsys):
    def change(doc):
        doc["leak_checks"]["disjoint_train_tune_test_ids"] = False

    code, text = edit_and_verify(copies, capsys, "report", change)
    assert code == 1
    assert "leak check disjoint_train_tune_test_ids is False, not true" in text


def test_wrong_record_count(copies, capsys):
    def change(doc):
        doc["records"] = 999

    code, text = edit_and_verify(copies, capsys, "report", change)
    assert code == 1
    assert "record counts disagree: public 1000, answers 1000, report 999" in text


def test_moved_record_changes_split(copies, capsys):
    def change(doc):
        record = doc["records"][0]
        record["split"] = "train" if record["split"] != "train" else "test"

    code, text = edit_and_verify(copies, capsys, "public", change)
    assert code == 1
    assert "public: record issue-5105: field split" in text  # the first record


def test_truncated_file_is_unusable(copies, capsys):
    data = copies["answers"].read_bytes()
    copies["answers"].write_bytes(data[: len(data) // 2])
    code, text = run_verify(copies, capsys)
    assert code == 2
    assert "answers.json: not valid JSON" in text and "Traceback" not in text


def test_every_problem_is_listed(copies, capsys):
    def change(doc):
        for answer in doc["answers"][:3]:
            answer["state"] = "OPEN" if answer["state"] == "CLOSED" else "CLOSED"

    code, text = edit_and_verify(copies, capsys, "answers", change)
    assert code == 1
    assert sum("field state" in line for line in text.splitlines()) == 3


def test_id_that_does_not_match_its_number(copies, capsys):
    def change(doc):
        doc["records"][0]["id"] = "issue-1"

    code, text = edit_and_verify(copies, capsys, "public", change)
    assert code == 1
    assert "public: record issue-1 has no recomputed counterpart" in text
    assert "public: record issue-5105 missing" in text


def test_answers_out_of_order(copies, capsys):
    def change(doc):
        doc["answers"][0], doc["answers"][1] = doc["answers"][1], doc["answers"][0]

    code, text = edit_and_verify(copies, capsys, "answers", change)
    assert code == 1 and "answers: answers are not in corpus order" in text


def test_exact_files_verify_in_one_streaming_rebuild(copies, capsys, monkeypatch):
    """Files that are what a freeze of the public records makes verify without either document
    parsed whole (the whole-document comparison is not run)."""

    def parsed_whole(*_args):
        raise AssertionError("the documents were parsed whole")

    monkeypatch.setattr(verifying, "_verify_whole", parsed_whole)
    monkeypatch.setattr(verifying, "build", parsed_whole)
    code, text = run_verify(copies, capsys)
    assert code == 0, text
    assert text.startswith("ok: 1000 records")


@pytest.mark.parametrize(
    ("key", "change"),
    [
        ("report", lambda doc: doc.update(scrubbed_matches=-1)),  # the files' digests still agree
        ("report", lambda doc: doc["blind_oracle_grade"].update(exact_records=1)),
        ("report", lambda doc: doc["question_slices"].append(1)),
        ("answers", lambda doc: doc["answers"][0].update(references=[4968, 4969])),
        ("public", lambda doc: doc["records"][0].update(state="open")),  # rebuilt as it is, refused whole
    ],
)
def test_streaming_rebuild_passes_nothing_else(copies, key, change):
    """Any difference sends verify to the whole-document comparison, which names it."""
    assert verifying._verify_streaming(copies["public"], copies["answers"], copies["report"]).ok
    doc = orjson.loads(copies[key].read_bytes())
    change(doc)
    copies[key].write_bytes(dumps(doc))
    assert verifying._verify_streaming(copies["public"], copies["answers"], copies["report"]) is None


def test_two_halves_make_the_rebuild_of_one(copies, monkeypatch):
    """The second half's pass, absorbed, gives the same digests and report as one pass; a record
    that fails its check in the second half fails the read, and verify names it as before."""
    absorbed = []
    absorb = FreezePass.absorb
    monkeypatch.setattr(
        FreezePass, "absorb", lambda fp, other, spill: absorbed.append(len(other.numbers)) or absorb(fp, other, spill)
    )
    monkeypatch.setattr(halves, "TWO_HALVES_FROM", 0)
    monkeypatch.setattr(halves, "_cores", lambda: 2)
    assert verifying._verify_streaming(copies["public"], copies["answers"], copies["report"]).ok
    assert 400 < absorbed[0] < 600  # the second half of 1,000 records
    doc = orjson.loads(copies["public"].read_bytes())
    doc["records"][-1]["state"] = "open"
    copies["public"].write_bytes(dumps(doc))
    assert verifying._verify_streaming(copies["public"], copies["answers"], copies["report"]) is None
    with pytest.raises(InputError, match=r"records\[999\].*expected OPEN or CLOSED"):
        verifying.verify_files(copies["public"], copies["answers"], copies["report"])
