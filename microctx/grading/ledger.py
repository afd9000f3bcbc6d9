"""The held-out ledger: every grading against the test answers leaves one entry, and none is ever removed.

A look at the held-out answers is a grade of a submission on the `test` split (`microctx grade`,
`microctx slices`, `microctx evaluate`, the grade, compare and frontier reports). Each appends one row to a SQLite file (path
from MICROCTX_LEDGER, default `$XDG_DATA_HOME/microctx/ledger.sqlite`, i.e.
`~/.local/share/microctx/ledger.sqlite`): the time (UTC), the answer bundle's SHA-256, the
submission's SHA-256, the candidate, the configuration digest (when known), what looked
(`via`), and the grade summary. `microctx ledger` lists them; reports say how many times this
answer bundle and this candidate have been looked at.

Append-only: triggers refuse UPDATE and DELETE on the table (a user with the file can still
delete it; the ledger makes looks visible, it does not make them impossible). Concurrent writers
lose nothing: the file is in WAL mode, each append is one `BEGIN IMMEDIATE` transaction (the
write lock is taken before anything is read), SQLite waits up to `busy_timeout` for the lock,
and a writer that still finds the database busy retries with backoff.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson

from microctx.contract.canonical import dumps
from microctx.contract.digests import file_sha256, sha256_hex
from microctx.errors import InputError

LEDGER_ENV = "MICROCTX_LEDGER"
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS looks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        answers_sha256 TEXT NOT NULL,
        submission_sha256 TEXT,
        candidate TEXT,
        config_digest TEXT,
        via TEXT NOT NULL,
        summary TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS looks_answers ON looks (answers_sha256, candidate)",
    """CREATE TRIGGER IF NOT EXISTS looks_no_update BEFORE UPDATE ON looks
    BEGIN SELECT RAISE(ABORT, 'the held-out ledger is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS looks_no_delete BEFORE DELETE ON looks
    BEGIN SELECT RAISE(ABORT, 'the held-out ledger is append-only'); END""",
)
COLUMNS = ("id", "at", "answers_sha256", "submission_sha256", "candidate", "config_digest", "via", "summary")
_ATTEMPTS = 50


def ledger_path() -> Path:
    """MICROCTX_LEDGER, else the user's data folder (XDG_DATA_HOME, default ~/.local/share)."""
    given = os.environ.get(LEDGER_ENV)
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "microctx" / "ledger.sqlite"


def _connect(path: Path, what: str = "held-out ledger", field: str = LEDGER_ENV) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=30, isolation_level=None)
        connection.execute("PRAGMA busy_timeout = 30000")
    except (OSError, sqlite3.Error) as exc:
        raise InputError(path, f"cannot open the {what}: {exc}", field=field) from None
    return connection


def connect(path: str | os.PathLike, what: str, field: str) -> sqlite3.Connection:
    """An open connection to an append-only log (for reading; `transaction` writes)."""
    return _connect(Path(path), what, field)


def transaction(path: str | os.PathLike, work, *, schema: tuple[str, ...], what: str, field: str):
    """Run `work(connection)` in one BEGIN IMMEDIATE transaction on the SQLite file `path` (WAL mode,
    `schema` statements run first), retrying with backoff while the database is busy. Any
    append-only log uses this (the held-out ledger, the semantic layer's event log); errors name
    the file as `what` with `field`."""
    path = Path(path)
    delay = 0.005
    for attempt in range(_ATTEMPTS):
        connection = _connect(path, what, field)
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("BEGIN IMMEDIATE")
            try:
                for statement in schema:  # not executescript: it would commit the open transaction
                    connection.execute(statement)
                value = work(connection)
                connection.execute("COMMIT")
                return value
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if ("locked" not in text and "busy" not in text) or attempt == _ATTEMPTS - 1:
                raise InputError(path, f"cannot write the {what}: {exc}", field=field) from None
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)
        except sqlite3.DatabaseError as exc:
            raise InputError(path, f"not a usable {what}: {exc}", field=field) from None
        finally:
            connection.close()
    raise AssertionError("unreachable")


def _with_retry(path: Path, work):
    """Run `work(connection)` in one transaction on the held-out ledger (`transaction`)."""
    return transaction(path, work, schema=_SCHEMA, what="held-out ledger", field=LEDGER_ENV)


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def grade_summary(grade: dict) -> dict:
    """The part of a grade document the ledger keeps."""
    keys = (
        "test_records",
        "exact_records",
        "false_positive_facts",
        "false_negative_facts",
        "aggregate_errors",
        "citation_errors",
        "quality_pass",
    )
    return {k: grade.get(k) for k in keys}


def config_digest(manifest: dict | None) -> str | None:
    """A run manifest's configuration digest: SHA-256 of candidate, version and parameters."""
    if not manifest:
        return None
    return sha256_hex(
        dumps(
            {"candidate": manifest.get("candidate"), "version": manifest.get("version"), "parameters": manifest.get("parameters")}
        )
    )


def record_look(
    *,
    answers_sha256: str,
    submission_sha256: str | None,
    candidate: str | None,
    config_digest: str | None,
    via: str,
    grade: dict,
    path: str | os.PathLike | None = None,
) -> dict:
    """Append one entry; returns it with `answers_looks` and `candidate_looks` (this one included)."""
    where = Path(path) if path is not None else ledger_path()
    entry = {
        "at": _utc_now(),
        "answers_sha256": answers_sha256,
        "submission_sha256": submission_sha256,
        "candidate": candidate,
        "config_digest": config_digest,
        "via": via,
        "summary": orjson.dumps(grade_summary(grade)).decode(),
    }

    def append(connection):
        cursor = connection.execute(
            "INSERT INTO looks (at, answers_sha256, submission_sha256, candidate, config_digest, via, summary) "
            "VALUES (:at, :answers_sha256, :submission_sha256, :candidate, :config_digest, :via, :summary)",
            entry,
        )
        answers_looks = connection.execute("SELECT COUNT(*) FROM looks WHERE answers_sha256 = ?", (answers_sha256,)).fetchone()[0]
        candidate_looks = connection.execute(
            "SELECT COUNT(*) FROM looks WHERE answers_sha256 = ? AND candidate IS ?", (answers_sha256, candidate)
        ).fetchone()[0]
        return {"id": cursor.lastrowid, **entry, "answers_looks": answers_looks, "candidate_looks": candidate_looks}

    return _with_retry(where, append)


def entries(answers_sha256: str | None = None, path: str | os.PathLike | None = None) -> list[dict]:
    """Every entry (of one answer bundle, when given), oldest first. No ledger file: no entries."""
    where = Path(path) if path is not None else ledger_path()
    if not where.exists():
        return []
    connection = _connect(where)
    try:
        query = "SELECT " + ", ".join(COLUMNS) + " FROM looks"
        args: tuple = ()
        if answers_sha256 is not None:
            query += " WHERE answers_sha256 = ?"
            args = (answers_sha256,)
        rows = connection.execute(query + " ORDER BY id", args).fetchall()
    except sqlite3.DatabaseError as exc:
        if "no such table" in str(exc):
            return []
        raise InputError(where, f"not a usable held-out ledger: {exc}", field=LEDGER_ENV) from None
    finally:
        connection.close()
    return [dict(zip(COLUMNS, row)) for row in rows]


def looks(answers_sha256: str, candidate: str | None = None, path: str | os.PathLike | None = None) -> int:
    """How many entries this answer bundle has (of this candidate, when given)."""
    return sum(1 for e in entries(answers_sha256, path) if candidate is None or e["candidate"] == candidate)


def looks_line(entry: dict) -> str:
    """One line for a grade's output: how often this answer bundle and candidate were looked at."""
    times = "time" if entry["answers_looks"] == 1 else "times"
    return (
        f"held-out ledger: answers {entry['answers_sha256'][:12]}… looked at {entry['answers_looks']} {times}, "
        f"{entry['candidate_looks']} by {entry['candidate'] or 'an unnamed candidate'} "
        f"(entry {entry['id']} in {ledger_path()})"
    )


def submission_identity(submission_path: str | os.PathLike, manifest: dict | None = None) -> tuple[str, str | None, str | None]:
    """(submission SHA-256, candidate, configuration digest) of a submission file; the last two
    from its run `manifest` when the caller found one (microctx.candidates.runner.read_manifest:
    the grading layer does not know where runs put their manifests)."""
    candidate = manifest.get("candidate") if manifest else None
    return file_sha256(submission_path), (str(candidate) if candidate is not None else None), config_digest(manifest)


def record_grade(
    answers_path: str | os.PathLike,
    grade: dict,
    *,
    via: str,
    submission_path=None,
    submission=None,
    candidate: str | None = None,
    config: str | None = None,
    manifest: dict | None = None,
) -> dict:
    """Append the look that grading `submission_path` (or the `submission` document) on test was.

    The candidate and configuration come from the submission's run `manifest` when the caller
    read one (`microctx.candidates.runner.read_manifest(submission_path)`); otherwise the
    candidate is the given name (or the file name), the configuration `config`."""
    sub_sha, found_candidate, found_config = (
        submission_identity(submission_path, manifest)
        if submission_path is not None
        else (sha256_hex(dumps(submission)) if submission is not None else None, None, None)
    )
    candidate = found_candidate or candidate or (Path(submission_path).name.removesuffix(".json") if submission_path else None)
    return record_look(
        answers_sha256=file_sha256(answers_path),
        submission_sha256=sub_sha,
        candidate=candidate,
        config_digest=config or found_config,
        via=via,
        grade=grade,
    )
