"""Loading a frozen public corpus (schema fak-microcontext-corpus/1) and turning it back into an export.

`load_corpus` validates the shape of every record and keeps the file's digest beside the parsed
document, so everything made from it can name what it was made from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from microctx._io.jsonio import parse_json, read_bytes
from microctx._io.jsonscan import _scan_array as scan_array  # the array reader of read_object_streaming
from microctx._io.jsonscan import read_head
from microctx.contract.digests import sha256_hex
from microctx.contract.schemas import CORPUS_SCHEMA, MAX_NUMBER, STATES
from microctx.contract.split import SPLITS
from microctx.contract.timestamps import parse_timestamp
from microctx.corpus.export import RawIssue
from microctx.display import MAX_ROWS, Markup, Summary, card_html, counts_text, fields_html, short, short_digest, table_html
from microctx.errors import InputError

_STRING_FIELDS = ("id", "title", "body", "created_at", "updated_at", "url", "state", "title_sha256", "body_sha256")


@dataclass
class Corpus:
    """A public corpus as loaded: the parsed document, its SHA-256 and where it came from."""

    document: dict
    sha256: str
    path: str = ""
    _by_id: dict = field(default_factory=dict, repr=False)

    @property
    def records(self) -> list[dict]:
        return self.document["records"]

    @property
    def source(self) -> str:
        return self.document["source"]

    def record(self, record_id: str) -> dict:
        if not self._by_id:
            self._by_id = {r["id"]: r for r in self.records}
        return self._by_id[record_id]

    def frame(self):
        """The records as a pandas DataFrame (pandas is imported only here)."""
        import pandas as pd

        frame = pd.DataFrame.from_records(self.records)
        frame["labels"] = frame["labels"].map(lambda v: list(v) if v else [])
        for column in ("created_at", "updated_at", "closed_at"):
            frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
        return frame

    def __len__(self) -> int:
        return len(self.records)

    def counts(self) -> dict[str, dict[str, int]]:
        """Records per split and per state (every split listed, zero included)."""
        splits = dict.fromkeys(SPLITS, 0)
        states: dict[str, int] = {}
        for r in self.records:
            splits[r["split"]] = splits.get(r["split"], 0) + 1
            states[r["state"]] = states.get(r["state"], 0) + 1
        return {"split": splits, "state": dict(sorted(states.items()))}

    @property
    def summary(self) -> Summary:
        counts = self.counts()
        return Summary(
            f"{len(self):,} records ({counts_text(counts['split'])}; {counts_text(counts['state'])}), "
            f"sha256 {short_digest(self.sha256)}"
        )

    def __repr__(self) -> str:
        where = f", path={short(self.path, 60)!r}" if self.path else ""
        return f"Corpus({self.summary}, source={short(self.source, 60)!r}{where})"

    def _repr_html_(self) -> str:
        counts = self.counts()
        fields = fields_html(
            [
                ("records", f"{len(self):,}"),
                ("splits", counts_text(counts["split"])),
                ("states", counts_text(counts["state"])),
                ("sha256", Markup(f"<code>{self.sha256}</code>")),
                ("source", short(self.source)),
                ("frozen at", self.document.get("frozen_at", "")),
            ]
            + ([("path", short(self.path))] if self.path else [])
        )
        rows = [(r["id"], r["split"], r["state"], ", ".join(r["labels"] or []), r["title"]) for r in self.records[:MAX_ROWS]]
        return card_html("Corpus", fields, table_html(("id", "split", "state", "labels", "title"), rows, total=len(self)))


def check_corpus_record(record: object, index: int, path) -> RawIssue:
    """Validate one record of a public corpus (`records[index]`); InputError names record and
    field. The record as a raw issue (how a rebuild from the public corpus starts)."""
    issue = _plain_record(record)
    return issue if issue is not None else _checked_record(record, index, path)


def _plain_record(record: object) -> RawIssue | None:
    """The raw issue of a record whose every field is plainly well-formed, else None (then
    `_checked_record` finds what is wrong): the same result as that check with a fraction of its
    cost, for a large corpus is almost all well-formed records."""
    if type(record) is not dict:
        return None
    try:
        number, title, body, state, url = record["number"], record["title"], record["body"], record["state"], record["url"]
        created, updated, closed, labels = record["created_at"], record["updated_at"], record["closed_at"], record["labels"]
        plain = type(record["id"]) is str and type(record["title_sha256"]) is str and type(record["body_sha256"]) is str
        plain = plain and record["split"] in SPLITS
    except KeyError:
        return None
    if not (
        plain
        and type(number) is int
        and 0 < number <= MAX_NUMBER
        and type(title) is str
        and type(body) is str
        and type(url) is str
    ):
        return None
    if type(state) is not str or state not in STATES:
        return None
    if type(created) is not str or type(updated) is not str or not (closed is None or type(closed) is str):
        return None
    if not (labels is None or (type(labels) is list and all(type(x) is str for x in labels))):
        return None
    try:
        stamps = parse_timestamp(created), parse_timestamp(updated), parse_timestamp(closed) if closed is not None else None
    except ValueError:
        return None
    return RawIssue(number, title, body, state, list(labels or []), *stamps, url)


def _checked_record(record: object, index: int, path) -> RawIssue:
    """`check_corpus_record`, field by field: an InputError names the first field at fault."""
    where = f"records[{index}]"
    if not isinstance(record, dict):
        raise InputError(path, "expected an object", record=where)
    if isinstance(record.get("id"), str):
        where = f"{where} ({record['id']})"
    for key in _STRING_FIELDS:
        if not isinstance(record.get(key), str):
            raise InputError(path, "expected a string", record=where, field=key)
    number = record.get("number")
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        raise InputError(path, "expected a positive integer", record=where, field="number")
    if number > MAX_NUMBER:
        raise InputError(path, f"expected at most {MAX_NUMBER:,} (2^63 - 1), got {number}", record=where, field="number")
    if record.get("state") not in STATES:
        raise InputError(path, f"expected {' or '.join(STATES)}", record=where, field="state")
    if record.get("split") not in SPLITS:
        raise InputError(path, f"expected one of {', '.join(SPLITS)}", record=where, field="split")
    labels = record.get("labels")
    if labels is not None and not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
        raise InputError(path, "expected an array of strings or null", record=where, field="labels")
    if record.get("closed_at") is not None and not isinstance(record.get("closed_at"), str):
        raise InputError(path, "expected a string or null", record=where, field="closed_at")
    stamps = []
    for key in ("created_at", "updated_at", "closed_at"):
        try:
            stamps.append(parse_timestamp(record[key]) if record.get(key) is not None else None)
        except ValueError as exc:
            raise InputError(path, str(exc), record=where, field=key) from None
    created, updated, closed = stamps
    title, body, state, url = record["title"], record["body"], record["state"], record["url"]
    return RawIssue(number, title, body, state, list(labels or []), created, updated, closed, url)  # type: ignore[arg-type]


def check_corpus_document(document: object, path, check_records: bool = True) -> dict:
    """Validate the shape of a parsed public corpus; InputError names record and field."""
    if not isinstance(document, dict):
        raise InputError(path, "expected a JSON object")
    if document.get("schema") != CORPUS_SCHEMA:
        raise InputError(path, f"expected schema {CORPUS_SCHEMA!r}, got {document.get('schema')!r}", field="schema")
    for key in ("source", "frozen_at"):
        if not isinstance(document.get(key), str):
            raise InputError(path, "expected a string", field=key)
    records = document.get("records")
    if not isinstance(records, list):
        raise InputError(path, "expected an array", field="records")
    if not records:
        raise InputError(path, "no records: a public corpus holds at least one", field="records")
    for index, record in enumerate(records if check_records else ()):
        check_corpus_record(record, index, path)
    return document


def corpus_head(path: str | os.PathLike, handle: BinaryIO) -> tuple[dict, int]:
    """The keys before `records` of a public corpus file open as `handle` (checked as
    `check_corpus_document` checks them), and the offset of the `[` that opens its records,
    where `handle` is left. IrregularJSON when the file is not laid out as freeze writes it
    (`records` last) or is not JSON: parse it whole then."""
    head, offset = read_head(handle, "records")
    check_corpus_document({**head, "records": [_PLACEHOLDER]}, path, check_records=False)
    return {**head, "records": []}, offset


def corpus_records(path: str | os.PathLike, handle: BinaryIO, trailer: int | None = ord("}")) -> Iterator[RawIssue]:
    """The records of the array `handle` is at, checked and turned into raw issues as they are
    read, one block of the file in memory at a time (`trailer`: the byte that must follow the
    array, then the end of the file; IrregularJSON otherwise)."""
    records = scan_array(handle, 1 << 24, trailer=trailer, depth=2)  # the top object's `records`
    return (check_corpus_record(record, index, path) for index, record in enumerate(records))


_PLACEHOLDER = object()  # a record, for checking a document's keys without its records


def load_corpus(path: str | os.PathLike) -> Corpus:
    """Read, validate and digest a public corpus file."""
    data = read_bytes(path)
    document = check_corpus_document(parse_json(data, path), path)
    return Corpus(document, sha256_hex(data), os.fspath(path))


def corpus_to_issues(corpus: Corpus | dict) -> list[RawIssue]:
    """Turn public records back into raw issues (how a rebuild from the public corpus starts)."""
    document = corpus.document if isinstance(corpus, Corpus) else corpus
    issues = []
    for r in document["records"]:
        closed = r.get("closed_at")
        issues.append(
            RawIssue(
                r["number"],
                r["title"],
                r["body"],
                r["state"],
                list(r["labels"] or []),
                parse_timestamp(r["created_at"]),
                parse_timestamp(r["updated_at"]),
                parse_timestamp(closed) if closed else None,
                r["url"],
            )
        )
    return issues


def corpus_to_export(corpus: Corpus | dict) -> list[dict]:
    """The public records as `gh issue list --json ...` rows, as s8f's README describes."""
    document = corpus.document if isinstance(corpus, Corpus) else corpus
    return [
        {
            "number": r["number"],
            "title": r["title"],
            "body": r["body"],
            "state": r["state"],
            "labels": [{"name": name} for name in r["labels"] or []],
            "createdAt": r["created_at"],
            "updatedAt": r["updated_at"],
            "closedAt": r["closed_at"],
            "url": r["url"],
        }
        for r in document["records"]
    ]
