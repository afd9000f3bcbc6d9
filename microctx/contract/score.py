"""Grading a submission against the answer bundle (schema fak-microcontext-grade/1).

Only gold answers of split `test` are scored (the contract's grade). `grade(..., split="tune")`
scores the `tune` answers of a devkit instead, for tuning (see microctx.tuning.sweep): the
same counts, `test_records` then counting that split's records, aggregates not scored (the
gold aggregates span every split, a devkit's only its own), ids the devkit does not hold (the
test records) not counted as citation errors, and the document says which split
(`"split"`) it scored; the default `test` grade is the contract's, byte for byte. A record's facts are the set `state:S`,
`label:L`..., `ref:N`..., `dup:N`..., `contradiction:W`...; facts submitted and not in gold are
false positives, gold facts not submitted are false negatives, and a record is exact when it has
neither. Aggregates count as one error when any of the four fields differs. Citation errors are
submitted ids that are unknown or repeat an earlier one (the last one counts).

Besides the grade, `grade` returns the per-fact outcome table that slice reports read: one row
per scored fact (tp, fp, fn) and one per aggregate field or citation in error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from sys import intern
from typing import Any, Protocol

from microctx._io.jsonio import gc_paused
from microctx.contract.facts import FACT_KINDS, FactRow
from microctx.contract.schemas import AGGREGATE_FIELDS, ANSWER_FIELDS, GRADE_SCHEMA


@dataclass
class GradeResult:
    """A grade (`.grade`, the contract's document) and its fact table (`.facts`, FactRows).

    `.passed`/`.ok` the quality floor, `.summary()` one line, `.facts_frame()` the fact table as a
    DataFrame, `.write(path)` the grade and its table. `microctx.grade` returns the subclass
    `microctx.api.Grade`, which adds `.slices(corpus)` (slices sit above the scorer).
    """

    grade: dict[str, Any]
    facts: list[FactRow] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.grade["quality_pass"])

    @property
    def corpus_mismatch(self) -> str:
        """Why nothing was scored when the submission is bound to another corpus, else ""."""
        return next((row.detail for row in self.facts if row.kind == "corpus"), "")

    def summary(self) -> str:
        g = self.grade
        if self.corpus_mismatch:
            return f"FAIL: the corpus digests differ: {self.corpus_mismatch}"
        verdict = "PASS" if g["quality_pass"] else "FAIL"
        return (
            f"{verdict}: {g['exact_records']}/{g['test_records']} {g.get('split', 'test')} records exact, "
            f"{g['false_positive_facts']} false positive facts, {g['false_negative_facts']} false negative facts, "
            f"{g['aggregate_errors']} aggregate errors, {g['citation_errors']} citation errors"
        )

    # notebook side: the same verdict as `ok`, the fact table as a frame, writing, the views
    @property
    def ok(self) -> bool:
        return self.passed

    def facts_frame(self) -> Any:
        """The fact table as a pandas DataFrame (columns record_id, split, kind, value, outcome,
        detail; every cell a string, as `slices.load_facts` reads a facts.csv)."""
        import pandas as pd

        from microctx.contract.facts import FACT_COLUMNS

        data = [(r.record_id, r.split, r.kind, r.value, r.outcome, r.detail) for r in self.facts]
        return pd.DataFrame(data, columns=list(FACT_COLUMNS), dtype=str)

    frame = facts_frame

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the grade JSON and its fact table beside it (`<grade>.facts.csv`), atomically."""
        from microctx.contract.facts import write_grade

        write_grade(self, path)

    def _outcomes(self) -> dict[str, dict[str, int]]:
        table: dict[str, dict[str, int]] = {}
        for row in self.facts:
            if row.outcome in ("tp", "fp", "fn"):
                counts = table.setdefault(row.kind, {"tp": 0, "fp": 0, "fn": 0})
                counts[row.outcome] += 1
        return {kind: table[kind] for kind in FACT_KINDS if kind in table}

    def __repr__(self) -> str:
        from microctx.display import short_digest  # the views load with a notebook, not with `microctx grade`

        return f"GradeResult({self.summary()}; {len(self.facts):,} fact rows, corpus {short_digest(self.grade['corpus_sha256'])})"

    def _repr_html_(self) -> str:
        from microctx.display import MAX_ROWS, Markup, card_html, fields_html, table_html, verdict_html

        g = self.grade
        fields = fields_html(
            [
                ("quality floor", Markup(verdict_html(self.passed))),
                ("summary", self.summary()),
                ("exact test records", f"{g['exact_records']:,} / {g['test_records']:,}"),
                ("false positive facts", f"{g['false_positive_facts']:,}"),
                ("false negative facts", f"{g['false_negative_facts']:,}"),
                ("aggregate errors", f"{g['aggregate_errors']:,}"),
                ("citation errors", f"{g['citation_errors']:,}"),
                ("corpus sha256", Markup(f"<code>{g['corpus_sha256']}</code>")),
            ]
        )
        rows = [(kind, c["tp"], c["fp"], c["fn"]) for kind, c in self._outcomes().items()]
        misses = [r for r in self.facts if r.outcome != "tp"]
        shown = [(r.record_id, r.kind, r.value, r.outcome, r.detail) for r in misses[:MAX_ROWS]]
        return card_html(
            "Grade",
            fields,
            table_html(("fact kind", "tp", "fp", "fn"), rows),
            "<div style='margin-top:4px'>facts in error</div>",
            table_html(("record", "kind", "value", "outcome", "detail"), shown, total=len(misses)),
        )


# (answer key, fact kind, is a list) of ANSWER_FIELDS, unpacked once: `record_facts` runs twice per
# graded record
_FACT_FIELDS = tuple((key, kind, is_list) for key, (kind, _, is_list) in ANSWER_FIELDS.items())


def record_facts(answer: dict[str, Any]) -> set[tuple[str, str]]:
    """The fact set of one answer, as (kind, value) pairs."""
    facts: set[tuple[str, str]] = set()
    get = answer.get
    for key, kind, is_list in _FACT_FIELDS:
        value = get(key)
        if value is None:
            continue
        if is_list:
            if value:  # an empty list (most duplicate targets and cue words) adds nothing
                facts.update(zip(repeat(kind), map(str, value)))
        else:
            facts.add((kind, str(value)))
    return facts


def same_json(a: object, b: object) -> bool:
    """JSON equality that keeps types apart (true is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b


_KIND_ORDER = {kind: index for index, kind in enumerate(FACT_KINDS)}


def _fact_sort_key(fact: tuple[str, str]) -> tuple[int, int, str]:
    kind, value = fact
    return (_KIND_ORDER[kind], int(value) if kind in ("ref", "dup") else 0, value)


SCORED_SPLITS = ("test", "tune")


class RowSink(Protocol):
    """Where fact rows go: a list, or a writer of the fact table (`facts.StreamedFacts`, whose
    `append_cells` the record rows go to as plain cells when it has one)."""

    def append(self, row: FactRow, /) -> None: ...


def grade(
    answers: dict[str, Any], submission: dict[str, Any], split: str = "test", rows_to: RowSink | None = None
) -> GradeResult:
    """Grade a (validated) submission against a (validated) answer bundle.

    `split="tune"` grades the tune answers of a devkit (aggregates not scored; see the module
    docstring); the default is the contract's test grade. `rows_to`: the fact rows go there as
    they are made (`append`, see `facts.StreamedFacts`) and `.facts` keeps only a corpus mismatch.
    """
    if split not in SCORED_SPLITS:
        raise ValueError(f"split must be one of {SCORED_SPLITS}, got {split!r}")
    with gc_paused():
        return _score(answers, submission, with_rows=True, split=split, rows_to=rows_to)


def grade_counts(answers: dict[str, Any], submission: dict[str, Any]) -> dict[str, Any]:
    """The grade document of `grade(answers, submission)`, without building the fact table.

    For the blind oracle of freeze and verify, which only need the counts.
    """
    return _score(answers, submission, with_rows=False).grade


def _score(
    answers: dict[str, Any], submission: dict[str, Any], *, with_rows: bool, split: str = "test", rows_to: RowSink | None = None
) -> GradeResult:
    return score_stream(
        answers["corpus_sha256"],
        answers["answers"],
        lambda: answers["aggregates"],
        _Whole(submission),
        with_rows=with_rows,
        split=split,
        rows_to=rows_to,
    )


class Submitted(Protocol):
    """What the scorer reads of a submission: a parsed document (`_Whole`) or one held compactly
    (`schemas.CompactSubmission`)."""

    @property
    def corpus_sha256(self) -> object: ...

    @property
    def aggregates(self) -> dict[str, Any] | None: ...

    @property
    def ids(self) -> list[str]: ...

    def answer(self, rid: str) -> dict[str, Any] | None: ...


class _Whole:
    """A parsed submission as `Submitted`."""

    def __init__(self, submission: dict[str, Any]) -> None:
        self.corpus_sha256 = submission.get("corpus_sha256")
        self.aggregates = submission.get("aggregates")
        given = submission.get("answers") or []
        self.ids = [answer["id"] for answer in given]
        self._by_id = {answer["id"]: answer for answer in given}  # the last one of a repeated id counts

    def answer(self, rid: str) -> dict[str, Any] | None:
        return self._by_id.get(rid)


def score_stream(
    digest: str,
    gold_answers: Iterable[dict[str, Any]],
    gold_aggregates: Callable[[], dict[str, Any]],
    submission: Submitted,
    *,
    with_rows: bool = True,
    split: str = "test",
    rows_to: RowSink | None = None,
) -> GradeResult:
    """`grade` of gold answers given one at a time (a streamed answer bundle: `schemas.AnswerStream`),
    the gold aggregates asked for (`gold_aggregates()`) after the last. Holds the submission and
    each gold id's split, not the gold answers: the same document and rows as `grade`, in the same
    order (record rows in gold order, then aggregate rows, then citation rows). The gold answers
    are read to the end even when the corpus digests differ, so a bad record is still reported."""
    mismatch = submission.corpus_sha256 != digest
    records = RecordScore(split, with_rows, sink=rows_to)
    gold_split: dict[str, str] = {}
    for gold in gold_answers:
        if mismatch:
            continue
        gold_split[gold["id"]] = intern(gold["split"])  # one string per split name, not one per record
        records.add(gold, submission.answer(gold["id"]) if gold["split"] == split else None)
    aggregates = gold_aggregates()
    if mismatch:
        return _mismatch(digest, submission.corpus_sha256, split, rows_to)
    citation_rows = _citation_rows(submission.ids, gold_split, unknown_is_error=split == "test")
    # a devkit's aggregates span its own splits only: aggregates are scored on test alone
    aggregate_rows = aggregate_error_rows(aggregates, submission.aggregates or {}) if split == "test" else []
    grade_doc = grade_document(digest, records, 1 if aggregate_rows else 0, len(citation_rows))
    if rows_to is not None:
        for row in aggregate_rows + citation_rows:
            rows_to.append(row)
        return GradeResult(grade_doc, [])
    return GradeResult(grade_doc, records.rows + aggregate_rows + citation_rows if with_rows else [])


def _mismatch(digest: str, given: object, split: str, rows_to: RowSink | None) -> GradeResult:
    """The grade of a submission bound to another corpus (`given`): nothing scored, one `corpus` row."""
    grade_doc = _grade_doc(digest, 0, 0, 0, 0, 0, 0, False, split)
    row = FactRow(
        "",
        "",
        "corpus",
        str(given),
        "error",
        f"submission is bound to corpus {given}, the answers to {digest}; nothing was scored",
    )
    if rows_to is not None:
        rows_to.append(row)
    return GradeResult(grade_doc, [row])


def grade_document(digest: str, records: RecordScore, aggregate_errors: int, citation_errors: int) -> dict[str, Any]:
    """The grade document of scored records and the error counts (the quality floor: some
    records scored, every one exact, no aggregate or citation error)."""
    passed = (
        records.test > 0
        and records.exact == records.test
        and records.fp == 0
        and records.fn == 0
        and aggregate_errors == 0
        and citation_errors == 0
    )
    return _grade_doc(
        digest, records.test, records.exact, records.fp, records.fn, aggregate_errors, citation_errors, passed, records.split
    )


def _citation_rows(submitted_ids: list[str], gold_split: dict[str, str], *, unknown_is_error: bool = True) -> list[FactRow]:
    """A row per citation error: an unknown id (unless `unknown_is_error` is false: a devkit lacks
    the test ids), or a repeated one (the last one counts). `gold_split`: each gold id's split."""
    seen: set[str] = set()
    rows: list[FactRow] = []
    for rid in submitted_ids:
        if rid not in gold_split:
            if unknown_is_error:
                rows.append(FactRow(rid, "", "citation", rid, "error", "unknown id"))
            continue
        if rid in seen:
            rows.append(FactRow(rid, gold_split[rid], "citation", rid, "error", "repeated id; the last one counts"))
        seen.add(rid)
    return rows


@dataclass
class RecordScore:
    """The record counts of a grade, one gold answer at a time (`add`); with `with_rows`, one
    fact-table row per fact."""

    split: str = "test"
    with_rows: bool = False
    test: int = 0
    exact: int = 0
    fp: int = 0
    fn: int = 0
    rows: list[FactRow] = field(default_factory=list)
    sink: RowSink | None = None  # where the rows go instead of `rows`

    def add(self, gold: dict[str, Any], got: dict[str, Any] | None) -> None:
        """Score the submitted answer `got` (None: not submitted) of a gold answer (of any split:
        those not of `split` are skipped)."""
        if gold["split"] != self.split:
            return
        self.test += 1
        gold_facts = record_facts(gold)
        # the blind oracle grades the bundle as its own submission: the same object, the same facts
        sub_facts = gold_facts if got is gold else record_facts(got) if got is not None else set()
        if not self.with_rows:
            if sub_facts == gold_facts:
                self.exact += 1
            else:
                self.fp += len(sub_facts - gold_facts)
                self.fn += len(gold_facts - sub_facts)
            return
        missing = "record not submitted" if got is None else ""
        fp = sub_facts - gold_facts
        fn = gold_facts - sub_facts
        self.fp += len(fp)
        self.fn += len(fn)
        self.exact += not fp and not fn
        rid, split = gold["id"], self.split
        rows = self.rows if self.sink is None else self.sink
        cells = getattr(rows, "append_cells", None)  # a fact table writer takes the cells alone
        if cells is not None and not fp and not fn:  # an exact record: every fact a tp
            for kind, value in sorted(gold_facts, key=_fact_sort_key):
                cells((rid, split, kind, value, "tp", ""))
            return
        for fact in sorted(gold_facts | sub_facts, key=_fact_sort_key):
            outcome = "fp" if fact in fp else "fn" if fact in fn else "tp"
            detail = missing if outcome == "fn" else ""
            if cells is not None:
                cells((rid, split, fact[0], fact[1], outcome, detail))
            else:
                rows.append(FactRow(rid, split, fact[0], fact[1], outcome, detail))


def aggregate_error_rows(gold: dict[str, Any], submitted: dict[str, Any]) -> list[FactRow]:
    """A row per aggregate field that differs from gold (together they count as one error)."""
    rows = []
    for key in AGGREGATE_FIELDS:
        expected, given = gold.get(key), submitted.get(key)
        if not same_json(expected, given):
            rows.append(FactRow("", "", "aggregate", key, "error", "missing" if given is None else "differs from gold"))
    return rows


def _grade_doc(
    digest: str,
    test_records: int,
    exact_records: int,
    fp: int,
    fn: int,
    aggregate_errors: int,
    citation_errors: int,
    passed: bool,
    split: str = "test",
) -> dict[str, Any]:
    doc: dict[str, Any] = {
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
    if split != "test":
        doc["split"] = split
    return doc
