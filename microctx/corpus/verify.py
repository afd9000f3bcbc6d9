"""Verifying three artifact files: the contract's checks, then a full recomputation.

The contract's checks: all three parse, schemas match, the digests bind the files to each other,
record counts agree, every leak check is true and the blind oracle passed. Deeper, and not made
by the published tool: every title/body digest, split, answer, aggregate and report count is
recomputed from the public text alone (a rebuild, as `freeze` would make it), and the public
file must be the canonical encoding of its own content. Every disagreement is listed, not only
the first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import BinaryIO, cast

from microctx._io.hashing import HashingReader
from microctx._io.jsonio import gc_paused, open_input, parse_json, read_bytes
from microctx._io.jsonscan import IrregularJSON, ObjectStream
from microctx.contract.digests import file_sha256, sha256_hex
from microctx.contract.schemas import REPORT_COUNTS, REPORT_SCHEMA, check_answers_document
from microctx.contract.score import grade_counts
from microctx.corpus.freeze import build, rebuild_digests
from microctx.corpus.halves import public_filler
from microctx.corpus.public import check_corpus_document, corpus_head, corpus_to_issues
from microctx.corpus.redact import MARKER
from microctx.display import MAX_ROWS, Markup, Summary, card_html, fields_html, short, table_html, verdict_html
from microctx.errors import InputError

_MAX_LISTED_PER_FIELD = 20
STREAM_PUBLIC_FROM_BYTES = 1 << 24  # smaller public files are parsed whole (tests may lower it)


@dataclass
class Verification:
    """What `verify` found: `.ok`/`.passed` when nothing, `.problems` every disagreement, `.summary` one line."""

    problems: list[str] = field(default_factory=list)
    summary: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    passed = ok

    def __post_init__(self) -> None:
        self.summary = Summary(self.summary)

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, Summary(value) if name == "summary" else value)

    def __repr__(self) -> str:
        verdict = "ok" if self.ok else f"{len(self.problems):,} problems, first: {short(self.problems[0], 120)}"
        return f"Verification({verdict}; {short(self.summary, 200)})"

    def _repr_html_(self) -> str:
        fields = fields_html(
            [
                ("verdict", Markup(verdict_html(self.ok, "every check holds", f"{len(self.problems):,} problems"))),
                ("summary", self.summary),
            ]
        )
        rows = [(p,) for p in self.problems[:MAX_ROWS]]
        return card_html("Verification", fields, table_html(("problem",), rows, total=len(self.problems)) if rows else "")


def _load(path) -> tuple[str, object]:
    """The file's SHA-256 and parsed content; the bytes are not kept (a large corpus is big twice)."""
    data = read_bytes(path)
    return sha256_hex(data), parse_json(data, path)


def _load_public(path) -> tuple[str, object]:
    """Like `_load`, parsing a large public corpus record batch by record batch when it can."""
    try:
        if os.path.getsize(path) < STREAM_PUBLIC_FROM_BYTES:
            return _load(path)
        with ObjectStream(path, "records", tail_keys=False, hashed=True) as stream:  # the digest of the bytes checked
            document = {**stream.head, "records": list(stream.items())}
        assert stream.sha256 is not None  # `items` read it all, or raised IrregularJSON
        return stream.sha256, document
    except (IrregularJSON, OSError):
        return _load(path)  # whose errors name the problem


def verify_files(public_path: str | os.PathLike, answers_path: str | os.PathLike, report_path: str | os.PathLike) -> Verification:
    """Check three artifact files; InputError when one cannot be read or parsed."""
    with gc_paused():
        return _verify_files(public_path, answers_path, report_path)


def _verify_files(public_path, answers_path, report_path) -> Verification:
    if "-" not in (os.fspath(public_path), os.fspath(answers_path), os.fspath(report_path)):
        streamed = _verify_streaming(public_path, answers_path, report_path)
        if streamed is not None:
            return streamed
    return _verify_whole(public_path, answers_path, report_path)


def _verify_streaming(public_path, answers_path, report_path) -> Verification | None:
    """The verification of three files that are exactly what a freeze of the public records
    makes: one streaming rebuild from the public file, whose documents are hashed as they are
    made and compared with the files' digests (equal digests: equal bytes, so every record,
    answer and aggregate agrees), then the report's checks. None when anything differs or the
    files cannot be read that way: `_verify_whole` then names every problem (or the error)."""
    try:
        with open_input(public_path) as handle:
            reader = cast(BinaryIO, HashingReader(handle))  # the public file hashed as it is read
            head, list_start = corpus_head(public_path, reader)
            rebuilt = rebuild_digests(public_filler(public_path, reader, list_start), head["source"], public_path)
            public_sha = cast(HashingReader, reader).hexdigest() or file_sha256(public_path)
        report_sha, report = _load(report_path)
        answers_sha = file_sha256(answers_path)
    except (IrregularJSON, InputError, OSError):
        return None
    n = rebuilt.report["records"]
    if not n or (public_sha, answers_sha) != (rebuilt.public_sha256, rebuilt.answers_sha256):
        return None
    if not isinstance(report, dict) or report.get("schema") != REPORT_SCHEMA:
        return None
    problems: list[str] = []
    _contract_checks(report, public_sha, answers_sha, n, n, problems)
    _compare_report(report, rebuilt.report, rebuilt.report["scrubbed_records"], problems)
    if report.get("blind_oracle_grade") != rebuilt.report["blind_oracle_grade"]:
        problems.append("report: blind_oracle_grade differs")  # listed in full by _verify_whole
    return None if problems else Verification(summary=_summary(n, public_sha, answers_sha, report_sha))


def _summary(n: int, public_sha: str, answers_sha: str, report_sha: str) -> str:
    return (
        f"{n} records; public {public_sha}; answers {answers_sha}; report {report_sha}; every digest, split and answer recomputed"
    )


def _verify_whole(public_path, answers_path, report_path) -> Verification:
    """Both documents parsed whole and compared with a rebuild record by record, field by field."""
    public_sha, public = _load_public(public_path)
    answers_sha, answers = _load(answers_path)
    report_sha, report = _load(report_path)
    public = check_corpus_document(public, public_path)
    answers = check_answers_document(answers, answers_path)
    if not isinstance(report, dict):
        raise InputError(report_path, "expected a JSON object")
    if report.get("schema") != REPORT_SCHEMA:
        raise InputError(report_path, f"expected schema {REPORT_SCHEMA!r}, got {report.get('schema')!r}", field="schema")
    out = Verification()
    problems = out.problems
    if answers["corpus_sha256"] != public_sha:
        problems.append(f"answers: corpus_sha256 {answers['corpus_sha256']} is not the public file's digest {public_sha}")
    n_public, n_answers = len(public["records"]), len(answers["answers"])
    _contract_checks(report, public_sha, answers_sha, n_public, n_answers, problems)

    # Deeper: recompute everything from the public text.
    rebuilt = build(corpus_to_issues(public), public["source"])
    _compare_public(public, rebuilt.public, problems)
    if rebuilt.public_sha256 != public_sha and not any(p.startswith("public: record") for p in problems):
        problems.append(f"public: file is not the canonical encoding of its content (rebuilt digest {rebuilt.public_sha256})")
    _compare_answers(answers, rebuilt.answers, problems)
    marked = sum(MARKER in r["title"] or MARKER in r["body"] for r in public["records"])
    _compare_report(report, rebuilt.report, marked, problems)
    own_oracle = grade_counts(answers, answers)
    oracle = report.get("blind_oracle_grade")
    if isinstance(oracle, dict) and oracle != own_oracle:
        problems.append(
            f"report: blind_oracle_grade differs from the grade of the answers file graded as a submission ({own_oracle})"
        )
    out.summary = _summary(n_public, public_sha, answers_sha, report_sha)
    return out


def _contract_checks(report: dict, public_sha: str, answers_sha: str, n_public: int, n_answers: int, problems: list[str]) -> None:
    """The published tool's checks of the report: digests, record counts, leak checks, oracle."""
    if report.get("corpus_sha256") != public_sha:
        problems.append(f"report: corpus_sha256 {report.get('corpus_sha256')} is not the public file's digest {public_sha}")
    if report.get("answers_sha256") != answers_sha:
        problems.append(f"report: answers_sha256 {report.get('answers_sha256')} is not the answers file's digest {answers_sha}")
    if not (n_public == n_answers == report.get("records")):
        problems.append(f"record counts disagree: public {n_public}, answers {n_answers}, report {report.get('records')}")
    checks = report.get("leak_checks")
    if not isinstance(checks, dict) or not checks:
        problems.append("report: leak_checks missing")
    else:
        for name, value in sorted(checks.items()):
            if value is not True:
                problems.append(f"report: leak check {name} is {value!r}, not true")
    oracle = report.get("blind_oracle_grade")
    if not isinstance(oracle, dict) or oracle.get("quality_pass") is not True:
        problems.append("report: blind_oracle_grade did not pass")


def _field_problems(label: str, mine: dict, theirs: dict, keys, problems: list[str], counter: dict) -> None:
    for key in keys:
        if mine.get(key, _MISSING) != theirs.get(key, _MISSING):
            counter[key] = counter.get(key, 0) + 1
            if counter[key] <= _MAX_LISTED_PER_FIELD:
                problems.append(
                    f"{label}: field {key}: file has {_show(mine.get(key, _MISSING))}, "
                    f"recomputed {_show(theirs.get(key, _MISSING))}"
                )


_MISSING = object()


def _show(value) -> str:
    if value is _MISSING:
        return "nothing"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _summarise_overflow(counter: dict, what: str, problems: list[str]) -> None:
    for key, count in counter.items():
        if count > _MAX_LISTED_PER_FIELD:
            problems.append(f"{what}: field {key}: {count - _MAX_LISTED_PER_FIELD} more records disagree (not listed)")


def _by_id(items: list[dict], problems: list[str], what: str) -> dict[str, dict]:
    seen: dict[str, dict] = {}
    for item in items:
        if item["id"] in seen:
            problems.append(f"{what}: id {item['id']} appears more than once")
        seen[item["id"]] = item
    return seen


def _compare_items(
    what: str, file_items: list[dict], rebuilt_items: list[dict], problems: list[str], *, order: str, key_order: bool
) -> None:
    """Compare records (or answers) by id, field by field, in the order they were recomputed."""
    mine = _by_id(file_items, problems, what)
    known = {item["id"] for item in rebuilt_items}
    for rid in mine:
        if rid not in known:
            problems.append(f"{what}: record {rid} has no recomputed counterpart (its id does not match a number)")
    if [i["id"] for i in file_items] != [i["id"] for i in rebuilt_items] and set(mine) == known and len(mine) == len(file_items):
        problems.append(f"{what}: {order}")
    counter: dict[str, int] = {}
    for item in rebuilt_items:
        have = mine.get(item["id"])
        if have is None:
            problems.append(f"{what}: record {item['id']} missing")
            continue
        if key_order and list(have) != list(item):
            problems.append(f"{what}: record {item['id']}: keys {list(have)} are not in contract order {list(item)}")
        _field_problems(f"{what}: record {item['id']}", have, item, item.keys(), problems, counter)
    _summarise_overflow(counter, what, problems)


def _compare_public(file_doc: dict, rebuilt: dict, problems: list[str]) -> None:
    for key in ("schema", "source", "frozen_at"):
        if file_doc.get(key) != rebuilt[key]:
            problems.append(f"public: field {key}: file has {_show(file_doc.get(key))}, recomputed {_show(rebuilt[key])}")
    _compare_items(
        "public",
        file_doc["records"],
        rebuilt["records"],
        problems,
        order="records are not in ascending issue-number order",
        key_order=True,
    )


def _compare_answers(file_doc: dict, rebuilt: dict, problems: list[str]) -> None:
    _compare_items(
        "answers", file_doc["answers"], rebuilt["answers"], problems, order="answers are not in corpus order", key_order=False
    )
    for key, value in rebuilt["aggregates"].items():
        if file_doc["aggregates"].get(key) != value:
            problems.append(
                f"answers: aggregates.{key}: file has {_show(file_doc['aggregates'].get(key))}, recomputed {_show(value)}"
            )


def _compare_report(report: dict, rebuilt: dict, marked: int, problems: list[str]) -> None:
    """The report's counts against the rebuild's; `marked`: public records carrying MARKER."""
    for key in REPORT_COUNTS:
        if report.get(key) != rebuilt[key]:
            problems.append(f"report: {key} is {_show(report.get(key))}, recomputed {rebuilt[key]}")
    scrubbed = report.get("scrubbed_records")
    if not isinstance(scrubbed, int) or scrubbed < marked:
        problems.append(f"report: scrubbed_records is {_show(scrubbed)}, but {marked} public records carry {MARKER}")
    matches = report.get("scrubbed_matches")
    if not isinstance(matches, int) or matches < 0:
        problems.append(f"report: scrubbed_matches is {_show(matches)}, expected a count")
    for name, value in rebuilt["leak_checks"].items():
        if not value:
            problems.append(f"public/answers: leak check {name} fails when recomputed")
    for key in ("question_slices", "provenance"):
        value = report.get(key)
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            problems.append(f"report: {key} should be a list of strings")
