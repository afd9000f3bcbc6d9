"""Grading a submission against the answer bundle (schema fak-microcontext-grade/1).

Only gold answers of split `test` are scored. A record's facts are the set `state:S`,
`label:L`..., `ref:N`..., `dup:N`..., `contradiction:W`...; facts submitted and not in gold are
false positives, gold facts not submitted are false negatives, and a record is exact when it has
neither. Aggregates count as one error when any of the four fields differs. Citation errors are
submitted ids that are unknown or repeat an earlier one (the last one counts).

Besides the grade, `grade` returns the per-fact outcome table that slice reports read: one row
per scored fact (tp, fp, fn) and one per aggregate field or citation in error.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field
from itertools import repeat

from .errors import InputError, json_type_name
from .files import gc_paused

GRADE_SCHEMA = "fak-microcontext-grade/1"
SUBMISSION_SCHEMA = "fak-microcontext-submission/1"
AGGREGATE_FIELDS = ("state_counts", "label_counts", "newest_issue_ids", "most_recently_updated_issue_ids")
FACT_KINDS = ("state", "label", "ref", "dup", "contradiction")
FACT_COLUMNS = ("record_id", "split", "kind", "value", "outcome", "detail")

# answer key -> (fact kind, element type, is a list)
_ANSWER_FIELDS = {
    "state": ("state", str, False),
    "labels": ("label", str, True),
    "references": ("ref", int, True),
    "duplicate_targets": ("dup", int, True),
    "scope_contradictions": ("contradiction", str, True),
}


@dataclass(frozen=True, slots=True)
class FactRow:
    record_id: str
    split: str
    kind: str
    value: str
    outcome: str  # tp, fp, fn for facts; error for aggregate and citation rows
    detail: str = ""


@dataclass
class GradeResult:
    grade: dict
    facts: list[FactRow] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.grade["quality_pass"])

    def summary(self) -> str:
        g = self.grade
        verdict = "PASS" if g["quality_pass"] else "FAIL"
        return (f"{verdict}: {g['exact_records']}/{g['test_records']} test records exact, "
                f"{g['false_positive_facts']} false positive facts, {g['false_negative_facts']} false negative facts, "
                f"{g['aggregate_errors']} aggregate errors, {g['citation_errors']} citation errors")


def _is(value: object, kind: type) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def check_answer_list(answers: object, path, *, gold: bool) -> list[dict]:
    """Validate the `answers` array of an answer bundle (gold) or a submission."""
    if not isinstance(answers, list):
        raise InputError(path, f"expected an array, got {json_type_name(answers)}", field="answers")
    for index, answer in enumerate(answers):
        if not isinstance(answer, dict):
            raise InputError(path, f"expected an object, got {json_type_name(answer)}", record=f"answers[{index}]")
        if not _is(answer.get("id"), str):
            raise InputError(path, f"expected a string id, got {json_type_name(answer.get('id'))}",
                             record=f"answers[{index}]", field="id")
        where = f"answers[{index}] ({answer['id']})"
        required = ("split",) + tuple(_ANSWER_FIELDS) if gold else ()
        for key in required:
            if key not in answer:
                raise InputError(path, "missing", record=where, field=key)
        if gold and not _is(answer["split"], str):
            raise InputError(path, f"expected a string, got {json_type_name(answer['split'])}", record=where, field="split")
        for key, (_, element, is_list) in _ANSWER_FIELDS.items():
            value = answer.get(key)
            if value is None and not (gold and key == "state"):
                continue
            if not is_list:
                if not _is(value, element):
                    raise InputError(path, f"expected a {json_type_name(element())}, got {json_type_name(value)}", record=where, field=key)
                continue
            if not isinstance(value, list) or not all(_is(v, element) for v in value):
                raise InputError(path, f"expected an array of {json_type_name(element())}s or null", record=where, field=key)
    return answers


def check_aggregates(aggregates: object, path, *, gold: bool) -> dict | None:
    """Validate an `aggregates` object: count maps of integers, id lists of strings."""
    if aggregates is None and not gold:
        return None
    if not isinstance(aggregates, dict):
        raise InputError(path, f"expected an object, got {json_type_name(aggregates)}", field="aggregates")
    for key in AGGREGATE_FIELDS:
        value = aggregates.get(key)
        if value is None:
            if gold:
                raise InputError(path, "missing", record="aggregates", field=key)
            continue
        if key.endswith("_counts"):
            ok = isinstance(value, dict) and all(_is(v, int) for v in value.values())
            expected = "an object of integer counts"
        else:
            ok = isinstance(value, list) and all(_is(v, str) for v in value)
            expected = "an array of id strings"
        if not ok:
            raise InputError(path, f"expected {expected} or null", record="aggregates", field=key)
    return aggregates


def check_answers_document(document: object, path) -> dict:
    """Validate a parsed answer bundle (schema fak-microcontext-answers/1)."""
    if not isinstance(document, dict):
        raise InputError(path, f"expected a JSON object, got {json_type_name(document)}")
    if document.get("schema") != "fak-microcontext-answers/1":
        raise InputError(path, f"expected schema 'fak-microcontext-answers/1', got {document.get('schema')!r}", field="schema")
    if not _is(document.get("corpus_sha256"), str):
        raise InputError(path, "expected a string", field="corpus_sha256")
    check_answer_list(document.get("answers"), path, gold=True)
    check_aggregates(document.get("aggregates"), path, gold=True)
    return document


def check_submission_document(document: object, path) -> dict:
    """Validate a parsed submission. Its `schema` is not checked (the blind oracle submits answers)."""
    if not isinstance(document, dict):
        raise InputError(path, f"expected a JSON object, got {json_type_name(document)}")
    if not _is(document.get("corpus_sha256"), str):
        raise InputError(path, f"expected a string, got {json_type_name(document.get('corpus_sha256'))}", field="corpus_sha256")
    if document.get("answers") is not None:
        check_answer_list(document["answers"], path, gold=False)
    check_aggregates(document.get("aggregates"), path, gold=False)
    return document


def record_facts(answer: dict) -> set[tuple[str, str]]:
    """The fact set of one answer, as (kind, value) pairs."""
    facts: set[tuple[str, str]] = set()
    for key, (kind, _, is_list) in _ANSWER_FIELDS.items():
        value = answer.get(key)
        if value is None:
            continue
        if is_list:
            facts.update(zip(repeat(kind), map(str, value)))
        else:
            facts.add((kind, str(value)))
    return facts


def same_json(a: object, b: object) -> bool:
    """JSON equality that keeps types apart (true is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b


def _fact_sort_key(fact: tuple[str, str]):
    kind, value = fact
    return (FACT_KINDS.index(kind), int(value) if kind in ("ref", "dup") else 0, value)


def grade(answers: dict, submission: dict) -> GradeResult:
    """Grade a (validated) submission against a (validated) answer bundle."""
    with gc_paused():
        return _score(answers, submission, with_rows=True)


def grade_counts(answers: dict, submission: dict) -> dict:
    """The grade document of `grade(answers, submission)`, without building the fact table.

    For the blind oracle of freeze and verify, which only need the counts.
    """
    return _score(answers, submission, with_rows=False).grade


def _score(answers: dict, submission: dict, *, with_rows: bool) -> GradeResult:
    digest = answers["corpus_sha256"]
    if submission.get("corpus_sha256") != digest:
        grade_doc = _grade_doc(digest, 0, 0, 0, 0, 0, 0, False)
        row = FactRow("", "", "corpus", str(submission.get("corpus_sha256")), "error",
                      f"submission is bound to corpus {submission.get('corpus_sha256')}, the answers to {digest}; nothing was scored")
        return GradeResult(grade_doc, [row])

    gold_by_id = {a["id"]: a for a in answers["answers"]}
    submitted: dict[str, dict] = {}
    rows: list[FactRow] = []
    citation_errors = 0
    for answer in submission.get("answers") or []:
        rid = answer["id"]
        if rid not in gold_by_id:
            citation_errors += 1
            rows.append(FactRow(rid, "", "citation", rid, "error", "unknown id"))
            continue
        if rid in submitted:
            citation_errors += 1
            rows.append(FactRow(rid, gold_by_id[rid]["split"], "citation", rid, "error", "repeated id; the last one counts"))
        submitted[rid] = answer

    test_records = exact_records = fp_total = fn_total = 0
    fact_rows: list[FactRow] = []
    for gold in answers["answers"]:
        if gold["split"] != "test":
            continue
        test_records += 1
        rid = gold["id"]
        gold_facts = record_facts(gold)
        got = submitted.get(rid)
        sub_facts = record_facts(got) if got is not None else set()
        if not with_rows:
            if sub_facts == gold_facts:
                exact_records += 1
            else:
                fp_total += len(sub_facts - gold_facts)
                fn_total += len(gold_facts - sub_facts)
            continue
        missing = "record not submitted" if got is None else ""
        fp = sub_facts - gold_facts
        fn = gold_facts - sub_facts
        fp_total += len(fp)
        fn_total += len(fn)
        exact_records += not fp and not fn
        for fact in sorted(gold_facts | sub_facts, key=_fact_sort_key):
            outcome = "fp" if fact in fp else "fn" if fact in fn else "tp"
            fact_rows.append(FactRow(rid, "test", fact[0], fact[1], outcome, missing if outcome == "fn" else ""))

    sub_aggregates = submission.get("aggregates") or {}
    aggregate_rows = []
    for key in AGGREGATE_FIELDS:
        expected, given = answers["aggregates"].get(key), sub_aggregates.get(key)
        if not same_json(expected, given):
            aggregate_rows.append(FactRow("", "", "aggregate", key, "error",
                                          "missing" if given is None else "differs from gold"))
    aggregate_errors = 1 if aggregate_rows else 0
    passed = (test_records > 0 and exact_records == test_records and fp_total == 0 and fn_total == 0
              and aggregate_errors == 0 and citation_errors == 0)
    grade_doc = _grade_doc(digest, test_records, exact_records, fp_total, fn_total, aggregate_errors, citation_errors, passed)
    return GradeResult(grade_doc, fact_rows + aggregate_rows + rows if with_rows else [])


def _grade_doc(digest, test_records, exact_records, fp, fn, aggregate_errors, citation_errors, passed) -> dict:
    return {
        "schema": GRADE_SCHEMA,
        "corpus_sha256": digest,
        "test_records": test_records,
        "exact_records": exact_records,
        "false_positive_facts": fp,
        "false_negative_facts": fn,
        "aggregate_errors": aggregate_errors,
        "citation_errors": citation_errors,
        "quality_pass": passed,
    }


def facts_csv(rows: list[FactRow]) -> bytes:
    """The per-fact outcome table as CSV bytes (header included)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FACT_COLUMNS)
    writer.writerows((r.record_id, r.split, r.kind, r.value, r.outcome, r.detail) for r in rows)
    return buffer.getvalue().encode()


def facts_path(grade_path: str | os.PathLike) -> str:
    """Where the fact table goes beside a grade file: `<G without .json>.facts.csv`."""
    text = os.fspath(grade_path)
    return (text[:-5] if text.endswith(".json") else text) + ".facts.csv"
