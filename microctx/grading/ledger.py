"""The held-out ledger: every grading against the test answers leaves one entry, and none is ever removed.

A look at the held-out answers is a grade of a submission on the `test` split (`microctx grade`,
`microctx slices`, `microctx evaluate`, the grade, compare and frontier reports). Each appends one row to a SQLite file (path
from MICROCTX_LEDGER, default `$XDG_DATA_HOME/microctx/ledger.sqlite`, i.e.
`~/.local/share/microctx/ledger.sqlite`): the time (UTC), the answer bundle's SHA-256, the
submission's SHA-256, the candidate, the configuration digest (when known), what looked
(`via`), the grade summary, and `marked`: "oracle", "planted" or "demo" for the example
submissions and the demo's gradings, which are kept but left out of every count. `microctx ledger`
lists them (by candidate or configuration digest); reports say how many times this answer bundle
and this configuration (its digest; the candidate's name when no digest is known) were looked at.

Append-only: triggers refuse UPDATE and DELETE on the table (a user with the file can still
delete it; the ledger makes looks visible, it does not make them impossible). Concurrent writers
lose nothing: the file is in WAL mode, each append is one `BEGIN IMMEDIATE` transaction (the
write lock is taken before anything is read), and a writer that finds the database busy
retries with backoff, for at most LOCK_WAIT seconds in all (10 s, or MICROCTX_LEDGER_WAIT): a
ledger held longer by another process is one line, exit 2, and nothing is written.
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from microctx.contract.canonical import dumps
from microctx.contract.digests import file_sha256, sha256_hex
from microctx.errors import InputError

if TYPE_CHECKING:
    from microctx.contract.records import RunManifest
    from microctx.contract.score import GradeResult

T = TypeVar("T")

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
        summary TEXT NOT NULL,
        marked TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS looks_answers ON looks (answers_sha256, candidate)",
    """CREATE TRIGGER IF NOT EXISTS looks_no_update BEFORE UPDATE ON looks
    BEGIN SELECT RAISE(ABORT, 'the held-out ledger is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS looks_no_delete BEFORE DELETE ON looks
    BEGIN SELECT RAISE(ABORT, 'the held-out ledger is append-only'); END""",
)
COLUMNS = ("id", "at", "answers_sha256", "submission_sha256", "candidate", "config_digest", "via", "summary", "marked")
MARKS = ("oracle", "planted", "demo")  # looks that are not a candidate's: kept, never counted
_ATTEMPTS = 50
LOCK_WAIT_ENV = "MICROCTX_LEDGER_WAIT"
LOCK_WAIT = 10.0  # seconds a command waits for the ledger's write lock, in all


def lock_wait() -> float:
    """Seconds to wait for the ledger's lock: MICROCTX_LEDGER_WAIT (0 to 600), else 10."""
    try:
        value = float(os.environ.get(LOCK_WAIT_ENV, LOCK_WAIT))
    except ValueError:
        return LOCK_WAIT
    return min(max(value, 0.0), 600.0) if value == value else LOCK_WAIT


def ledger_path() -> Path:
    """MICROCTX_LEDGER, else the user's data folder (XDG_DATA_HOME, default ~/.local/share)."""
    given = os.environ.get(LEDGER_ENV)
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "microctx" / "ledger.sqlite"


def _connect(path: Path, what: str = "held-out ledger", field: str = LEDGER_ENV, wait: float | None = None) -> sqlite3.Connection:
    wait = lock_wait() if wait is None else wait
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=wait, isolation_level=None)
        connection.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
        connection.execute("PRAGMA synchronous = FULL")  # a COMMIT returns once the WAL is on disk
        if keep_wal_on_close(connection):  # the WAL stays between commands: keep it short to read back
            connection.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")
    except (OSError, sqlite3.Error) as exc:
        raise InputError(path, f"cannot open the {what}: {exc}", field=field) from None
    return connection


NO_CKPT_ON_CLOSE = 1006  # SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE (SQLite 3.16.2 and later)
# pages the WAL may hold before a commit checkpoints it (about 20 appends): each command's first
# read recovers the whole WAL (the shared index is rebuilt when no other connection is open)
WAL_PAGES = 64


def keep_wal_on_close(connection: sqlite3.Connection) -> bool:
    """Ask SQLite not to checkpoint the WAL into the main file, and delete it, when this connection
    closes; True when it agreed. Durability is the same (WAL with synchronous=FULL: a commit is on
    disk when COMMIT returns, one fsync of the WAL); what goes is the close's own checkpoint, two
    more fsyncs (the WAL, the main file), and the next command's fresh WAL header and folder sync
    (issue 24: the ledger append of every command). SQLite still checkpoints on its own, every
    `WAL_PAGES` pages. Python 3.12 has `Connection.setconfig`; on CPython 3.11 the same SQLite call is made
    through ctypes on the connection's handle (the first field of the 3.11 Connection object);
    anything else keeps SQLite's default."""
    setconfig = getattr(connection, "setconfig", None)
    try:
        if setconfig is not None:
            setconfig(NO_CKPT_ON_CLOSE, True)
            return True
        return _db_config_cpython311(connection)
    except (OSError, AttributeError, ValueError, sqlite3.Error):
        return False


def _db_config_cpython311(connection: sqlite3.Connection) -> bool:
    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11) or type(connection) is not sqlite3.Connection:
        return False
    if sqlite3.sqlite_version_info < (3, 16, 2):
        return False
    import _sqlite3
    import ctypes

    library = ctypes.CDLL(_sqlite3.__file__)  # the SQLite this module is linked with
    handle = ctypes.c_void_p.from_address(id(connection) + object.__basicsize__).value  # pysqlite_Connection.db
    config = library.sqlite3_db_config
    config.restype = ctypes.c_int
    state = ctypes.c_int(-1)
    done = config(ctypes.c_void_p(handle), NO_CKPT_ON_CLOSE, ctypes.c_int(1), ctypes.byref(state))
    return done == 0 and state.value == 1


def connect(path: str | os.PathLike[str], what: str, field: str) -> sqlite3.Connection:
    """An open connection to an append-only log (for reading; `transaction` writes)."""
    return _connect(Path(path), what, field)


def transaction(
    path: str | os.PathLike[str], work: Callable[[sqlite3.Connection], T], *, schema: tuple[str, ...], what: str, field: str
) -> T:
    """Run `work(connection)` in one BEGIN IMMEDIATE transaction on the SQLite file `path` (WAL mode,
    `schema` statements run first), retrying with backoff while the database is busy. Any
    append-only log uses this (the held-out ledger, the semantic layer's event log); errors name
    the file as `what` with `field`."""
    path = Path(path)
    delay = 0.005
    deadline = time.monotonic() + lock_wait()
    for attempt in range(_ATTEMPTS):
        connection = _connect(path, what, field, max(deadline - time.monotonic(), 0.0))
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
            busy = "locked" in text or "busy" in text
            if busy and (attempt == _ATTEMPTS - 1 or time.monotonic() >= deadline):
                raise InputError(
                    path,
                    f"the {what} is locked by another process (waited {lock_wait():g} s, {LOCK_WAIT_ENV}); "
                    "nothing was recorded, try again",
                    field=field,
                ) from None
            if not busy:
                raise InputError(path, f"cannot write the {what}: {exc}", field=field) from None
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)
        except sqlite3.DatabaseError as exc:
            raise InputError(path, f"not a usable {what}: {exc}", field=field) from None
        finally:
            connection.close()
    raise AssertionError("unreachable")


def _with_retry(path: Path, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run `work(connection)` in one transaction on the held-out ledger (`transaction`)."""

    def migrated(connection: sqlite3.Connection) -> T:
        if "marked" not in {row[1] for row in connection.execute("PRAGMA table_info(looks)")}:
            connection.execute("ALTER TABLE looks ADD COLUMN marked TEXT")  # a ledger from before marks
        return work(connection)

    return transaction(path, migrated, schema=_SCHEMA, what="held-out ledger", field=LEDGER_ENV)


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def grade_summary(grade: dict[str, Any]) -> dict[str, Any]:
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


def config_digest(manifest: RunManifest | dict[str, Any] | None) -> str | None:
    """A run manifest's configuration digest (`microctx.contract.records.Configuration`: candidate,
    code version, parameters and isolation, as a type); None without a manifest."""
    from microctx.contract.records import config_digest as digest

    return digest(manifest)


def record_look(
    *,
    answers_sha256: str,
    submission_sha256: str | None,
    candidate: str | None,
    config_digest: str | None,
    via: str,
    grade: dict[str, Any],
    path: str | os.PathLike[str] | None = None,
    marked: str | None = None,
) -> dict[str, Any]:
    """Append one entry; returns it with `answers_looks` and `candidate_looks` (this one included,
    marked looks left out): the looks at these answers, and those of this configuration digest
    (of this candidate name when the digest is unknown)."""
    from microctx.contract.records import LedgerEntry

    if marked is not None and marked not in MARKS:
        raise ValueError(f"marked: one of {MARKS}, not {marked!r}")
    where = Path(path) if path is not None else ledger_path()
    entry = LedgerEntry(
        at=_utc_now(),
        answers_sha256=answers_sha256,
        submission_sha256=submission_sha256,
        candidate=candidate,
        config_digest=config_digest,
        via=via,
        summary=orjson.dumps(grade_summary(grade)).decode(),
        marked=marked,
    ).as_dict()
    counted = "answers_sha256 = ? AND marked IS NULL"
    same = ("config_digest = ?", config_digest) if config_digest else ("config_digest IS NULL AND candidate IS ?", candidate)

    def append(connection: sqlite3.Connection) -> dict[str, Any]:
        cursor = connection.execute(
            "INSERT INTO looks (at, answers_sha256, submission_sha256, candidate, config_digest, via, summary, marked) "
            "VALUES (:at, :answers_sha256, :submission_sha256, :candidate, :config_digest, :via, :summary, :marked)",
            entry,
        )
        answers_looks = connection.execute(f"SELECT COUNT(*) FROM looks WHERE {counted}", (answers_sha256,)).fetchone()[0]
        candidate_looks = connection.execute(
            f"SELECT COUNT(*) FROM looks WHERE {counted} AND {same[0]}", (answers_sha256, same[1])
        ).fetchone()[0]
        return {"id": cursor.lastrowid, **entry, "answers_looks": answers_looks, "candidate_looks": candidate_looks}

    return _with_retry(where, append)


def record_report_look(inputs: Any, name: str, result: GradeResult, via: str) -> dict[str, Any]:
    """Append a report's grading on test of `inputs.submissions[name]` (a reports.tables.Inputs)
    to the held-out ledger (`record_graded`, with the digest of the bytes graded)."""
    path = inputs.paths.get(name) or None
    return record_graded(
        inputs.answers_path,
        inputs.answers,
        inputs.submissions[name],
        result.grade,
        via=via,
        submission_path=path,
        candidate=name,
        answers_sha256=inputs.answers_sha256,
        submission_sha256=inputs.digests.get(name),
    )


def record_graded(
    answers_path: str | os.PathLike[str],
    answers: dict[str, Any],
    submission: dict[str, Any],
    grade: dict[str, Any],
    *,
    via: str,
    submission_path: str | os.PathLike[str] | None = None,
    candidate: str | None = None,
    answers_sha256: str | None = None,
    submission_sha256: str | None = None,
) -> dict[str, Any]:
    """Append the look that grading `submission` (the document read from `submission_path`, or
    given parsed when that is None) on `answers` was: with the run manifest beside the file
    (`contract.records.read_manifest`, checked against `submission_sha256`, the digest of the
    bytes graded; an unreadable one is no manifest) and its look mark (`grading.examples.look_mark`:
    an example submission's look is kept, not counted). The one home of these steps for every
    grading that holds both documents parsed (grade read whole, slices, the API, the reports);
    the streamed grade marks as it reads (`examples.LookMark`) and calls `record_grade` itself."""
    from microctx.contract.records import read_manifest
    from microctx.grading.examples import look_mark

    manifest = read_manifest(submission_path, sha256=submission_sha256) if submission_path is not None else None
    return record_grade(
        answers_path,
        grade,
        via=via,
        submission_path=submission_path,
        submission=None if submission_path is not None else submission,
        candidate=candidate,
        manifest=manifest,
        marked=look_mark(answers, submission, manifest),
        answers_sha256=answers_sha256,
        submission_sha256=submission_sha256,
    )


def entries(
    answers_sha256: str | None = None,
    path: str | os.PathLike[str] | None = None,
    *,
    candidate: str | None = None,
    config: str | None = None,
) -> list[dict[str, Any]]:
    """Every entry (of one answer bundle, candidate or configuration digest prefix, when given),
    oldest first, marked ones included. No ledger file: no entries."""
    where = Path(path) if path is not None else ledger_path()
    if not where.exists():
        return []
    connection = _connect(where)
    try:
        known = {row[1] for row in connection.execute("PRAGMA table_info(looks)")}
        columns = [c if c in known else f"NULL AS {c}" for c in COLUMNS]  # a ledger from before marks
        where_sql, args = _filters(answers_sha256, candidate, config)
        rows = connection.execute(f"SELECT {', '.join(columns)} FROM looks{where_sql} ORDER BY id", args).fetchall()
    except sqlite3.DatabaseError as exc:
        if "no such table" in str(exc):
            return []
        raise InputError(where, f"not a usable held-out ledger: {exc}", field=LEDGER_ENV) from None
    finally:
        connection.close()
    return [dict(zip(COLUMNS, row)) for row in rows]


def _filters(answers_sha256: str | None, candidate: str | None, config: str | None) -> tuple[str, tuple[str | None, ...]]:
    clauses, args = [], []
    for clause, value in (("answers_sha256 = ?", answers_sha256), ("candidate = ?", candidate)):
        if value is not None:
            clauses.append(clause)
            args.append(value)
    if config is not None:
        clauses.append("config_digest LIKE ?")
        args.append(config.lower() + "%")
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), tuple(args)


def looks(
    answers_sha256: str, candidate: str | None = None, path: str | os.PathLike[str] | None = None, *, config: str | None = None
) -> int:
    """How many counted (unmarked) entries this answer bundle has (of this candidate or configuration, when given)."""
    return sum(1 for e in entries(answers_sha256, path, candidate=candidate, config=config) if e["marked"] is None)


def looks_line(entry: dict[str, Any]) -> str:
    """One line for a grade's output: how often this answer bundle and candidate were looked at."""
    times = "time" if entry["answers_looks"] == 1 else "times"
    if entry.get("marked"):
        return (
            f"held-out ledger: a {entry['marked']} look, kept as entry {entry['id']} in {ledger_path()} and not counted "
            f"(answers {entry['answers_sha256'][:12]}… looked at {entry['answers_looks']} {times})"
        )
    whose = f"configuration {entry['config_digest'][:12]}…" if entry.get("config_digest") else None
    return (
        f"held-out ledger: answers {entry['answers_sha256'][:12]}… looked at {entry['answers_looks']} {times}, "
        f"{entry['candidate_looks']} by {entry['candidate'] or 'an unnamed candidate'}"
        f"{f' ({whose})' if whose else ''} (entry {entry['id']} in {ledger_path()})"
    )


def submission_identity(
    submission_path: str | os.PathLike[str],
    manifest: RunManifest | dict[str, Any] | None = None,
    sha256: str | None = None,
) -> tuple[str, str | None, str | None]:
    """(submission SHA-256, candidate, configuration digest) of a submission file; the last two
    from its run `manifest` when the caller found one (microctx.contract.records.read_manifest:
    the grading layer does not know where runs put their manifests). `sha256`: the digest of the
    bytes the caller graded (`schemas.read_submission`), the file hashed only without it."""
    from microctx.contract.records import RunManifest, as_record

    record = as_record(manifest, RunManifest, "the run manifest") if isinstance(manifest, dict) and manifest else manifest
    candidate = record.candidate if isinstance(record, RunManifest) else None
    return sha256 or file_sha256(submission_path), candidate, config_digest(record or None)


def record_grade(
    answers_path: str | os.PathLike[str],
    grade: dict[str, Any],
    *,
    via: str,
    submission_path: str | os.PathLike[str] | None = None,
    submission: dict[str, Any] | None = None,
    candidate: str | None = None,
    config: str | None = None,
    manifest: RunManifest | dict[str, Any] | None = None,
    marked: str | None = None,
    answers_sha256: str | None = None,
    submission_sha256: str | None = None,
) -> dict[str, Any]:
    """Append the look that grading `submission_path` (or the `submission` document) on test was;
    `answers_sha256` and `submission_sha256` are the digests of the bytes graded, when the caller
    read them (a file is hashed by name only without them: `-` cannot be read twice).

    The candidate and configuration come from the submission's run `manifest` when the caller
    read one (`microctx.contract.records.read_manifest(submission_path)`); otherwise the
    candidate is the given name (or the file name), the configuration `config`."""
    sub_sha, found_candidate, found_config = (
        submission_identity(submission_path, manifest, submission_sha256)
        if submission_path is not None
        else (sha256_hex(dumps(submission)) if submission is not None else None, None, None)
    )
    candidate = found_candidate or candidate or (Path(submission_path).name.removesuffix(".json") if submission_path else None)
    return record_look(
        answers_sha256=answers_sha256 or file_sha256(answers_path),
        submission_sha256=sub_sha,
        candidate=candidate,
        config_digest=config or found_config,
        via=via,
        grade=grade,
        marked=marked,
    )
