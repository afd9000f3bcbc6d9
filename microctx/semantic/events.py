"""The study's event log: every label, skip, undo, adjudication and judge label, appended, never edited.

One SQLite file in the study folder (`events.sqlite`), written through the held-out ledger's
transaction helper (WAL, BEGIN IMMEDIATE, retry with backoff); triggers refuse UPDATE and DELETE.
An event: time (UTC), annotator, item, kind (`label`, `skip`, `undo`, `adjudicate`, `judge`),
label, note, reason, the guideline version, and for an undo the event it takes back. An undo is
a new event: replaying the log (`current_labels`) drops the undone event and the item returns
to what it was before.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from microctx.errors import InputError
from microctx.grading.ledger import connect, transaction

KINDS = ("label", "skip", "undo", "adjudicate", "judge")
COLUMNS = ("id", "at", "annotator", "item", "kind", "label", "note", "reason", "guideline_version", "undoes")
_WHAT, _FIELD = "study event log", "events.sqlite"
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        annotator TEXT NOT NULL,
        item TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('label', 'skip', 'undo', 'adjudicate', 'judge')),
        label TEXT,
        note TEXT NOT NULL DEFAULT '',
        reason TEXT NOT NULL DEFAULT '',
        guideline_version TEXT NOT NULL,
        undoes INTEGER REFERENCES events (id)
    )""",
    """CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'the study event log is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'the study event log is append-only'); END""",
)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def create(path: str | os.PathLike) -> None:
    """An empty event log (the tables and triggers)."""
    transaction(path, lambda connection: None, schema=SCHEMA, what=_WHAT, field=_FIELD)


def append(path: str | os.PathLike, events: list[dict]) -> list[int]:
    """Append events in one transaction (all or none); their ids. Each needs annotator, item, kind,
    guideline_version; label, note, reason and undoes are optional."""
    at = utc_now()
    rows = [{"at": at, "label": None, "note": "", "reason": "", "undoes": None, **e} for e in events]

    def work(connection: sqlite3.Connection) -> list[int]:
        ids = []
        for row in rows:
            cursor = connection.execute(
                "INSERT INTO events (at, annotator, item, kind, label, note, reason, guideline_version, undoes) "
                "VALUES (:at, :annotator, :item, :kind, :label, :note, :reason, :guideline_version, :undoes)",
                row,
            )
            ids.append(int(cursor.lastrowid or 0))
        return ids

    return transaction(path, work, schema=SCHEMA, what=_WHAT, field=_FIELD)


def read(path: str | os.PathLike) -> list[dict]:
    """Every event, oldest first (none when the log does not exist yet)."""
    if not Path(path).exists():
        return []
    connection = connect(path, _WHAT, _FIELD)
    try:
        rows = connection.execute("SELECT " + ", ".join(COLUMNS) + " FROM events ORDER BY id").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(path, f"not a usable {_WHAT}: {exc}", field=_FIELD) from None
    finally:
        connection.close()
    return [dict(zip(COLUMNS, row)) for row in rows]


def active(events: list[dict], kinds: tuple[str, ...] = ("label", "skip")) -> list[dict]:
    """The events of `kinds` still in force: each undo takes back the event it names."""
    undone = {e["undoes"] for e in events if e["kind"] == "undo"}
    return [e for e in events if e["kind"] in kinds and e["id"] not in undone]


def current_labels(events: list[dict], kind: str = "label") -> dict[tuple[str, str], dict]:
    """(annotator, item) -> the last event in force of `kind` (or a skip, for `label`): the label now."""
    current: dict[tuple[str, str], dict] = {}
    for e in active(events, ("label", "skip") if kind == "label" else (kind,)):
        current[(e["annotator"], e["item"])] = e
    return current


def last_undoable(events: list[dict], annotator: str, kinds: tuple[str, ...] = ("label", "skip")) -> dict | None:
    """The annotator's most recent event of `kinds` still in force (what `undo` takes back)."""
    mine = [e for e in active(events, kinds) if e["annotator"] == annotator]
    return mine[-1] if mine else None
