"""The service's tables (SQLAlchemy Core) and opening a state URL, migrated by Alembic.

A state URL is a SQLite URL (`sqlite:///state.db`), a bare file path (taken as SQLite) or a
PostgreSQL URL (`postgresql://user@host:port/db`, driven by psycopg). `open_state` migrates
the schema to the newest revision (`migrations/`) before anything is read, so every command
that takes `--state` works on a new or an old database alike.

SQLite: every transaction that may write is `BEGIN IMMEDIATE` (the write lock is taken before anything is
read, so a quota check and its insert are one serialised step), the file is in WAL mode with
`synchronous = NORMAL` (a killed process loses no committed transaction; a power cut may lose
the last ones, never consistency), and a writer waits up to 30 s for the lock. PostgreSQL: the quota transaction locks the team's row
(`SELECT ... FOR UPDATE`), so one team's submissions are serialised and other teams' are not.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from microctx.errors import InputError, scrub_urls

METADATA = MetaData()

competition = Table(
    "competition",
    METADATA,
    Column("id", Integer, primary_key=True),  # always 1: one competition per state
    Column("created_at", String(32), nullable=False),
    Column("split_seed", String(64), nullable=False),  # secret: decides the public/private split
    Column("signing_key", Text, nullable=False),  # Ed25519 private key, PEM (PKCS#8)
    Column("status", String(16), nullable=False),  # running | closed
    Column("closed_at", String(32)),
    Column("answers_sha256", String(64)),  # bound by the first `serve`
    Column("corpus_sha256", String(64)),
)

teams = Table(
    "teams",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("token_sha256", String(64), nullable=False, unique=True),
    Column("created_at", String(32), nullable=False),
    Column("revoked_at", String(32)),
)

submissions = Table(
    "submissions",
    METADATA,
    Column("id", String(36), primary_key=True),
    Column("team_id", Integer, ForeignKey("teams.id"), nullable=False, index=True),
    Column("received_at", String(32), nullable=False),
    Column("day", String(10), nullable=False),  # UTC date the quota counts it on
    Column("state", String(16), nullable=False),  # scored (counted) | refunded (not counted)
    Column("submission_sha256", String(64), nullable=False),
    Column("public_raw", Float),  # never released while running (the Ladder releases a rounding)
    Column("private_raw", Float),  # never released before close
    Column("released", Float),
    Column("decision", Text),
    Column("outcomes", Text),  # exact (1) or not (0) per test record, in the answers' order
    Column("receipt", Text),
    Column("detail", Text),  # why a refund happened
)

ledger = Table(
    "ledger",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # the local held-out ledger's fields (microctx.grading.ledger) ...
    Column("at", String(32), nullable=False),
    Column("answers_sha256", String(64), nullable=False),
    Column("submission_sha256", String(64)),
    Column("candidate", Text),
    Column("config_digest", String(64)),
    Column("via", String(32), nullable=False),
    Column("summary", Text, nullable=False),
    # ... and the service's: who, which submission, what the Ladder decided
    Column("team", String(100), nullable=False),
    Column("submission_id", String(36), nullable=False),
    Column("part", String(16), nullable=False),
    Column("raw_score", Float, nullable=False),
    Column("best_before", Float),
    Column("threshold", Float),
    Column("released", Float),
    Column("decision", Text, nullable=False),
)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
READ_ONLY = "microctx_read_only"
_WRITE_LOCKS: dict[int, threading.Lock] = {}


def write_lock(engine: Engine) -> AbstractContextManager:
    """SQLite: one lock per engine that this process's writers queue on before `BEGIN IMMEDIATE`,
    so threads wait their turn instead of SQLite's sleep-and-retry busy handler (which starves
    some writers for seconds under load); other processes still meet SQLite's own lock.
    PostgreSQL: no lock (row locks do the work)."""
    if engine.dialect.name != "sqlite":
        return nullcontext()
    return _WRITE_LOCKS.setdefault(id(engine), threading.Lock())


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A transaction that only reads: on SQLite a deferred `BEGIN` (WAL readers never wait for the
    writer), elsewhere an ordinary transaction."""
    with engine.connect() as connection:
        connection.execution_options(**{READ_ONLY: True})
        with connection.begin():
            yield connection


def engine_for(url: str) -> Engine:
    """An engine for a state URL (SQLite file, bare path, or PostgreSQL); InputError when unusable."""
    text = url if "://" in url else f"sqlite:///{Path(url).expanduser()}"
    try:
        parsed = make_url(text)
        parsed.port  # noqa: B018  (a malformed port raises here, not later)
    except (ArgumentError, ValueError) as exc:
        message = scrub_urls(str(exc))
        password = text.partition("://")[2].rpartition("@")[0].partition(":")[2]
        raise InputError(
            "--state", f"not a database URL: {message.replace(password, '[hidden]') if password else message}"
        ) from None
    if parsed.get_backend_name() == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, pool_size=10, max_overflow=60, pool_timeout=60, pool_pre_ping=True)
    if parsed.get_backend_name() != "sqlite":
        raise InputError("--state", f"expected a sqlite:/// or postgresql:// URL, got {parsed.get_backend_name()!r}")
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        parsed, connect_args={"timeout": 30, "check_same_thread": False}, pool_size=10, max_overflow=60, pool_timeout=60
    )
    _immediate_transactions(engine)
    return engine


def _immediate_transactions(engine: Engine) -> None:
    """SQLite: autocommit at the driver, `BEGIN IMMEDIATE` for every SQLAlchemy transaction."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA busy_timeout = 30000")
        dbapi_connection.execute("PRAGMA journal_mode = WAL")
        dbapi_connection.execute("PRAGMA synchronous = NORMAL")  # WAL: a crashed process loses nothing committed
        dbapi_connection.execute("PRAGMA foreign_keys = ON")

    @event.listens_for(engine, "begin")
    def _begin(connection) -> None:
        deferred = connection.get_execution_options().get(READ_ONLY)
        connection.exec_driver_sql("BEGIN" if deferred else "BEGIN IMMEDIATE")


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (a no-op when it is there)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def open_state(url: str) -> Engine:
    """The migrated engine of a state URL; InputError naming --state when the database is unusable
    (the message never shows the URL's password: scrubbed by value and as a URL part)."""
    engine = engine_for(url)
    try:
        migrate(engine)
    except SQLAlchemyError as exc:
        engine.dispose()
        cause = getattr(exc, "orig", None) or exc
        first_line = scrub_urls((str(cause).splitlines() or [""])[0])
        if engine.url.password:
            first_line = first_line.replace(str(engine.url.password), "[hidden]")
        raise InputError("--state", f"cannot open the service state: {type(cause).__name__}: {first_line}") from None
    return engine
