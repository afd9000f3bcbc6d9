"""Grading: exact counts for planted faults, as the contract defines them."""

from __future__ import annotations

import copy
import csv

import orjson
import pytest

from microctx.cli import main
from microctx.contract.canonical import dumps
from microctx.contract.score import grade


@pytest.fixture()
def oracle(s8f_answers):
    return copy.deepcopy(s8f_answers)


def counts(result):
    g = result.grade
    return (
        g["test_records"],
        g["exact_records"],
        g["false_positive_facts"],
        g["false_negative_facts"],
        g["aggregate_errors"],
        g["citation_errors"],
        g["quality_pass"],
    )


def first(answers, split="test", where=lambda a: True):
    return next(a for a in answers["answers"] if a["split"] == split and where(a))


def test_published_answers_pass(s8f_answers, oracle):
    result = grade(s8f_answers, oracle)
    assert counts(result) == (680, 680, 0, 0, 0, 0, True)
    assert sum(r.outcome == "tp" for r in result.facts) == len(result.facts)


@pytest.mark.parametrize(
    "field,kind",
    [
        ("state", "state"),
        ("labels", "label"),
        ("references", "ref"),
        ("duplicate_targets", "dup"),
        ("scope_contradictions", "contradiction"),
    ],
)
def test_planted_miss_of_each_fact_kind(s8f_answers, oracle, field, kind):
    answer = first(oracle, where=lambda a: a[field])
    if field == "state":
        answer["state"] = None
    else:
        answer[field] = answer[field][1:]
    result = grade(s8f_answers, oracle)
    assert counts(result) == (680, 679, 0, 1, 0, 0, False)
    missed = [r for r in result.facts if r.outcome == "fn"]
    assert [(r.record_id, r.kind) for r in missed] == [(answer["id"], kind)]


def test_extra_fact_and_wrong_value(s8f_answers, oracle):
    a = first(oracle)
    a["references"] = sorted(a["references"] + [999999])
    b = first(oracle, where=lambda x: x["id"] != a["id"])
    b["state"] = "closed" if b["state"] == "CLOSED" else "open"  # compared exactly, no case folding
    result = grade(s8f_answers, oracle)
    assert counts(result) == (680, 678, 2, 1, 0, 0, False)


def test_unknown_and_repeated_ids(s8f_answers, oracle):
    repeat = copy.deepcopy(first(oracle))
    stale = copy.deepcopy(repeat)
    stale["labels"] = ["not-a-label"]
    # the stale copy comes first; the last one counts, so the record stays exact
    oracle["answers"].insert(0, stale)
    oracle["answers"].append(dict(repeat, id="issue-424242"))
    result = grade(s8f_answers, oracle)
    assert counts(result) == (680, 680, 0, 0, 0, 2, False)
    details = sorted(r.detail for r in result.facts if r.kind == "citation")
    assert details == ["repeated id; the last one counts", "unknown id"]


def test_last_repeat_counts(s8f_answers, oracle):
    wrong = copy.deepcopy(first(oracle, where=lambda a: a["labels"]))
    wrong["labels"] = []
    oracle["answers"].append(wrong)
    result = grade(s8f_answers, oracle)
    assert counts(result)[1:4] == (679, 0, len(first(s8f_answers, where=lambda a: a["id"] == wrong["id"])["labels"]))
    assert result.grade["citation_errors"] == 1


def test_wrong_corpus_digest(s8f_answers, oracle):
    oracle["corpus_sha256"] = "0" * 64
    result = grade(s8f_answers, oracle)
    assert result.grade["corpus_sha256"] == s8f_answers["corpus_sha256"]
    assert counts(result) == (0, 0, 0, 0, 0, 0, False)


@pytest.mark.parametrize("field", ["state_counts", "label_counts", "newest_issue_ids", "most_recently_updated_issue_ids"])
def test_each_aggregate_field_wrong(s8f_answers, oracle, field):
    value = oracle["aggregates"][field]
    if isinstance(value, dict):
        value["zzz-extra"] = 0  # an extra key with count 0 is a difference
    else:
        value[0], value[1] = value[1], value[0]  # order matters
    result = grade(s8f_answers, oracle)
    assert counts(result) == (680, 680, 0, 0, 1, 0, False)
    assert [(r.kind, r.value) for r in result.facts if r.outcome == "error"] == [("aggregate", field)]


def test_aggregates_missing_or_empty(s8f_answers, oracle):
    del oracle["aggregates"]["newest_issue_ids"]
    oracle["aggregates"]["label_counts"] = {}
    oracle["aggregates"]["extra_key"] = "ignored"
    result = grade(s8f_answers, oracle)
    assert result.grade["aggregate_errors"] == 1  # one error however many fields differ
    assert sorted(r.value for r in result.facts if r.kind == "aggregate") == ["label_counts", "newest_issue_ids"]
    assert {r.detail for r in result.facts if r.kind == "aggregate"} == {"missing", "differs from gold"}


def test_missing_test_record(s8f_answers, oracle):
    gone = first(oracle, where=lambda a: len(a["references"]) > 2)
    oracle["answers"].remove(gone)
    gold_facts = (
        1 + len(gone["labels"]) + len(gone["references"]) + len(gone["duplicate_targets"]) + len(gone["scope_contradictions"])
    )
    result = grade(s8f_answers, oracle)
    assert counts(result) == (680, 679, 0, gold_facts, 0, 0, False)
    assert {r.detail for r in result.facts if r.outcome == "fn"} == {"record not submitted"}


def test_non_test_records_never_count(s8f_answers, oracle):
    for answer in oracle["answers"]:
        if answer["split"] != "test":
            answer["labels"] = ["wrong"]
            answer["state"] = "WRONG"
    oracle["answers"] = [a for i, a in enumerate(oracle["answers"]) if a["split"] == "test" or i % 2]
    for answer in oracle["answers"]:
        answer["split"] = "train"  # a submission's own split field is ignored
    assert counts(grade(s8f_answers, oracle)) == (680, 680, 0, 0, 0, 0, True)


def test_cli_writes_grade_and_fact_table(tmp_path, s8f, s8f_answers, oracle, capsys):
    first(oracle)["labels"] = []
    first(oracle, where=lambda a: a["references"])["references"].append(1)
    sub = tmp_path / "sub.json"
    sub.write_bytes(dumps(oracle))
    out = tmp_path / "grade.json"
    code = main(["grade", "--answers", str(s8f.answers), "--submission", str(sub), "--output", str(out)])
    summary = capsys.readouterr().out
    assert code == 1 and summary.startswith("FAIL: ")
    grade_doc = orjson.loads(out.read_bytes())
    assert list(grade_doc) == [
        "schema",
        "corpus_sha256",
        "test_records",
        "exact_records",
        "false_positive_facts",
        "false_negative_facts",
        "aggregate_errors",
        "citation_errors",
        "quality_pass",
    ]
    assert out.read_bytes().endswith(b"}\n") and b'  "quality_pass": false' in out.read_bytes()
    rows = list(csv.DictReader((tmp_path / "grade.facts.csv").open()))
    assert list(rows[0]) == ["record_id", "split", "kind", "value", "outcome", "detail"]
    fp = sum(r["outcome"] == "fp" for r in rows)
    fn = sum(r["outcome"] == "fn" for r in rows)
    assert (fp, fn) == (grade_doc["false_positive_facts"], grade_doc["false_negative_facts"])
    assert {r["split"] for r in rows if r["kind"] in ("state", "label", "ref", "dup", "contradiction")} == {"test"}


def test_blind_oracle_grade_is_byte_identical_to_published(tmp_path, s8f):
    out = tmp_path / "g.json"
    assert main(["grade", "--answers", str(s8f.answers), "--submission", str(s8f.answers), "--output", str(out)]) == 0
    published = orjson.loads(open(s8f.report, "rb").read())["blind_oracle_grade"]
    assert out.read_bytes() == dumps(published)


@pytest.mark.parametrize(
    "patch,field",
    [
        (lambda d: d["answers"][0].update(references=["12"]), "references"),
        (lambda d: d["answers"][0].update(id=5), "id"),
        (lambda d: d.update(corpus_sha256=None), "corpus_sha256"),
        (lambda d: d["aggregates"].update(state_counts={"OPEN": "1"}), "state_counts"),
    ],
)
def test_mistyped_submission_is_unusable(tmp_path, s8f, oracle, capsys, patch, field):
    patch(oracle)
    sub = tmp_path / "sub.json"
    sub.write_bytes(dumps(oracle))
    out = tmp_path / "grade.json"
    code = main(["grade", "--answers", str(s8f.answers), "--submission", str(sub), "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "sub.json" in err and repr(field) in err
    assert not out.exists() and not (tmp_path / "grade.facts.csv").exists()
