"""Reading a raw issue export: `gh issue list --json ...` output, or GitHub REST API issue objects.

Both shapes become `RawIssue` values. Anything that is not that shape is an `InputError` that
names the file, the record and the field. Tolerated as the published tool tolerates them:
extra keys, a missing or null `closedAt`, a null `body` or `labels`, a state in any case.
REST objects carrying a `pull_request` key are pull requests and are skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from microctx.contract.schemas import STATES
from microctx.contract.timestamps import Timestamp, parse_timestamp
from microctx.errors import InputError, json_type_name
from microctx.files import IrregularJSON, gc_paused, iter_json_array, read_json

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
    if isinstance(document, (dict, str, int, float, bool)) or document is None:
        raise InputError(path, f"expected a JSON array of issues, got {json_type_name(document)}")
    issues: list[RawIssue] = []
    seen: dict[int, int] = {}
    for index, item in enumerate(document):
        where = f"#{index}"
        if not isinstance(item, dict):
            raise InputError(path, f"expected an object, got {json_type_name(item)}", record=where)
        if "pull_request" in item:
            continue
        rest = "html_url" in item or "created_at" in item
        keys = _REST_KEYS if rest else _GH_KEYS
        issue = _fast_issue(item, keys) or _parse_issue(item, keys, path, where)
        if issue.number in seen:
            raise InputError(path, f"number {issue.number} repeats record #{seen[issue.number]}",
                             record=f"{where} (number {issue.number})", field=keys["number"])
        seen[issue.number] = index
        issues.append(issue)
    if len(issues) < MIN_RECORDS:
        raise InputError(path, f"{len(issues)} issues, at least {MIN_RECORDS} are needed")
    return issues


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
    if (type(number) is not int or number <= 0 or type(title) is not str or not title
            or type(url) is not str or not url or type(state) is not str):
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


def _parse_issue(item: dict, keys: dict[str, str], path, where: str) -> RawIssue:
    def fail(field: str, message: str):
        raise InputError(path, message, record=where, field=keys[field])

    def need(field: str, kinds: tuple, *, nullable: bool = False, missing_ok: bool = False):
        key = keys[field]
        if key not in item:
            if missing_ok:
                return None
            fail(field, "missing")
        value = item[key]
        if value is None and nullable:
            return None
        if not isinstance(value, kinds) or isinstance(value, bool):
            expected = " or ".join(json_type_name(k()) for k in kinds) + (" or null" if nullable else "")
            fail(field, f"expected {expected}, got {json_type_name(value)}")
        return value

    number = need("number", (int,))
    where = f"{where} (number {number})"
    if number <= 0:
        fail("number", f"issue number must be positive, got {number}")
    title = need("title", (str,))
    if not title:
        fail("title", "empty title")
    body = need("body", (str,), nullable=True) or ""
    state = need("state", (str,)).upper()
    if not state:
        fail("state", "empty state")
    if state not in STATES:
        fail("state", f"expected {' or '.join(STATES)} (any case), got {state!r}")
    labels: list[str] = []
    for i, label in enumerate(need("labels", (list,), nullable=True) or []):
        if isinstance(label, dict):
            name = label.get("name")
        else:
            name = label
        if not isinstance(name, str):
            fail("labels", f"label {i}: expected an object with a string \"name\", got {json_type_name(label)}")
        labels.append(name)

    def stamp(field: str, nullable: bool = False) -> Timestamp | None:
        text = need(field, (str,), nullable=nullable, missing_ok=nullable)
        if text is None:
            return None
        try:
            return parse_timestamp(text)
        except ValueError as exc:
            fail(field, str(exc))

    created_at = stamp("created_at")
    updated_at = stamp("updated_at")
    closed_at = stamp("closed_at", nullable=True)
    url = need("url", (str,))
    if not url:
        fail("url", "empty URL")
    return RawIssue(number, title, body, state, labels, created_at, updated_at, closed_at, url)


def read_export(path: str | os.PathLike) -> list[RawIssue]:
    """Read a raw export file (gh CLI or REST API shape), record by record when it can."""
    with gc_paused():
        try:
            return parse_export(iter_json_array(path), path)
        except IrregularJSON:
            return parse_export(read_json(path), path)
