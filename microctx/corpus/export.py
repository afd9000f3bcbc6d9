"""Reading a raw issue export: `gh issue list --json ...` output, or GitHub REST API issue objects.

Both shapes become `RawIssue` values. Anything that is not that shape is an `InputError` that
names the file, the record and the field. Tolerated as the published tool tolerates them:
extra keys, a missing or null `closedAt`, a null `body` or `labels`, a state in any case.
REST objects carrying a `pull_request` key are pull requests and are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from microctx._io.jsonio import gc_paused, read_json
from microctx._io.jsonscan import IrregularJSON, iter_json_array
from microctx.contract.schemas import MAX_NUMBER, STATES
from microctx.contract.timestamps import Timestamp, parse_timestamp
from microctx.errors import InputError, json_type_name

MIN_RECORDS = 50

# field in the record -> (gh export key, REST API key)
_FIELDS = {
    "number": ("number", "number"),
    "title": ("title", "title"),
    "body": ("body", "body"),
    "state": ("state", "state"),
    "labels": ("labels", "labels"),
    "created_at": ("createdAt", "created_at"),
    "updated_at": ("updatedAt", "updated_at"),
    "closed_at": ("closedAt", "closed_at"),
    "url": ("url", "html_url"),
}


@dataclass(slots=True)
class RawIssue:
    number: int
    title: str
    body: str
    state: str  # upper case
    labels: list[str]  # names as given (empty names included; the corpus drops them)
    created_at: Timestamp
    updated_at: Timestamp
    closed_at: Timestamp | None
    url: str


def parse_export(document: object, path: str | os.PathLike = "<export>") -> list[RawIssue]:
    """Turn a parsed export (a JSON array, or any iterable of its items) into RawIssues."""
    return list(iter_export(document, path))


def iter_export(document: object, path: str | os.PathLike = "<export>") -> Iterator[RawIssue]:
    """The RawIssues of a parsed export (a JSON array, or any iterable of its items), one at a
    time; an InputError at the first bad item, or at the end when too few issues came."""
    if isinstance(document, (dict, str, int, float, bool)) or document is None:
        raise InputError(path, f"expected a JSON array of issues, got {json_type_name(document)}")
    items: Iterable[object] = document  # type: ignore[assignment]  # an iterable by the check above
    seen: dict[int, int] = {}
    for index, item in enumerate(items):
        where = f"#{index}"
        if not isinstance(item, dict):
            raise InputError(path, f"expected an object, got {json_type_name(item)}", record=where)
        if "pull_request" in item:
            continue
        rest = "html_url" in item or "created_at" in item
        keys = _REST_KEYS if rest else _GH_KEYS
        issue = _fast_issue(item, keys) or _parse_issue(item, keys, path, where)
        first = seen.setdefault(issue.number, index)
        if first != index:
            raise InputError(
                path,
                f"number {issue.number} repeats record #{first}",
                record=f"{where} (number {issue.number})",
                field=keys["number"],
            )
        yield issue
    check_enough(seen, path)


def check_enough(issues: Sized, path: object) -> None:
    """Refuse an export of fewer than MIN_RECORDS issues (a split and its statistics need them)."""
    if len(issues) < MIN_RECORDS:
        raise InputError(path, f"{len(issues)} issues, at least {MIN_RECORDS} are needed")


_GH_KEYS = {name: pair[0] for name, pair in _FIELDS.items()}
_REST_KEYS = {name: pair[1] for name, pair in _FIELDS.items()}


def _fast_issue(item: dict, keys: dict[str, str]) -> RawIssue | None:
    """The issue when every field is plainly well-formed, else None (then `_parse_issue` decides).

    Same result as `_parse_issue` on such items, with a fraction of its checks' cost: a large
    export is almost all well-formed records.
    """
    try:
        number, title, body = item[keys["number"]], item[keys["title"]], item[keys["body"]]
        state, labels, url = item[keys["state"]], item[keys["labels"]], item[keys["url"]]
        created, updated = item[keys["created_at"]], item[keys["updated_at"]]
    except KeyError:
        return None
    closed = item.get(keys["closed_at"])
    if (
        type(number) is not int
        or not 0 < number <= MAX_NUMBER
        or type(title) is not str
        or not title
        or type(url) is not str
        or not url
        or type(state) is not str
    ):
        return None
    if body is None:
        body = ""
    elif type(body) is not str:
        return None
    state = state.upper()
    if state not in STATES:
        return None
    names: list[str] = []
    if labels is not None:
        if type(labels) is not list:
            return None
        for label in labels:
            name = label.get("name") if type(label) is dict else label
            if type(name) is not str:
                return None
            names.append(name)
    if type(created) is not str or type(updated) is not str or not (closed is None or type(closed) is str):
        return None
    try:
        created_at, updated_at = parse_timestamp(created), parse_timestamp(updated)
        closed_at = parse_timestamp(closed) if closed is not None else None
    except ValueError:
        return None
    return RawIssue(number, title, body, state, names, created_at, updated_at, closed_at, url)


class _Checked:
    """One export item's fields, checked one by one; a failure names the file, record and field."""

    def __init__(self, item: dict, keys: dict[str, str], path, where: str) -> None:
        self.item, self.keys, self.path, self.where = item, keys, path, where

    def fail(self, field: str, message: str) -> NoReturn:
        raise InputError(self.path, message, record=self.where, field=self.keys[field])

    def value(self, field: str, kinds: tuple[type, ...], *, nullable: bool = False, missing_ok: bool = False) -> Any:
        """The field's value when it has one of `kinds` (None when null and `nullable`, or missing
        and `missing_ok`)."""
        key = self.keys[field]
        if key not in self.item:
            if missing_ok:
                return None
            self.fail(field, "missing")
        value = self.item[key]
        if value is None and nullable:
            return None
        if not isinstance(value, kinds) or isinstance(value, bool):
            expected = " or ".join(json_type_name(k()) for k in kinds) + (" or null" if nullable else "")
            self.fail(field, f"expected {expected}, got {json_type_name(value)}")
        return value

    def text(self, field: str, empty: str) -> str:
        """A string that must not be empty (`empty` says what it is)."""
        value: str = self.value(field, (str,))
        if not value:
            self.fail(field, empty)
        return value

    def labels(self) -> list[str]:
        names: list[str] = []
        for i, label in enumerate(self.value("labels", (list,), nullable=True) or []):
            name = label.get("name") if isinstance(label, dict) else label
            if not isinstance(name, str):
                self.fail("labels", f'label {i}: expected an object with a string "name", got {json_type_name(label)}')
            names.append(name)
        return names

    def stamp(self, field: str) -> Timestamp:
        try:
            return parse_timestamp(self.value(field, (str,)))
        except ValueError as exc:
            self.fail(field, str(exc))

    def optional_stamp(self, field: str) -> Timestamp | None:
        text = self.value(field, (str,), nullable=True, missing_ok=True)
        return None if text is None else self.stamp(field)


def _parse_issue(item: dict, keys: dict[str, str], path, where: str) -> RawIssue:
    """The issue, or an InputError naming the first field that is not as the export's shape says."""
    checked = _Checked(item, keys, path, where)
    number: int = checked.value("number", (int,))
    checked.where = f"{where} (number {number})"
    if number <= 0:
        checked.fail("number", f"issue number must be positive, got {number}")
    if number > MAX_NUMBER:
        checked.fail("number", f"issue number above {MAX_NUMBER:,} (2^63 - 1), got {number}")
    title = checked.text("title", "empty title")
    body = checked.value("body", (str,), nullable=True) or ""
    state = checked.text("state", "empty state").upper()
    if state not in STATES:
        checked.fail("state", f"expected {' or '.join(STATES)} (any case), got {state!r}")
    labels = checked.labels()
    created_at, updated_at = checked.stamp("created_at"), checked.stamp("updated_at")
    closed_at = checked.optional_stamp("closed_at")
    url = checked.text("url", "empty URL")
    return RawIssue(number, title, body, state, labels, created_at, updated_at, closed_at, url)


def read_export(path: str | os.PathLike) -> list[RawIssue]:
    """Read a raw export file (gh CLI or REST API shape), record by record when it can."""
    return with_export(path, list)


_T = TypeVar("_T")


def with_export(path: str | os.PathLike, consume: Callable[[Iterator[RawIssue]], _T]) -> _T:
    """`consume` the issues of a raw export file as they are read (record by record when the
    streaming reader can take the file; when it cannot, `consume` starts again on the file
    parsed whole, so it must not have published anything before it returns)."""
    with gc_paused():
        try:  # standard input (`-`) is read whole at once: the stream refuses it before reading
            return consume(iter_export(iter_json_array(path), path))
        except IrregularJSON:
            return consume(iter_export(read_json(path), path))
