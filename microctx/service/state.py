"""The competition row of a service state: created once, bound to one answer bundle, closed once.

The first command that opens a state creates the competition: a secret split seed (32 random
bytes, `secrets`) that decides which split components are public, and the Ed25519 signing key
of its receipts. Both stay in the state database: whoever can read it can derive the split and
sign receipts, so the database is as private as the answers (docs/service.md).
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError

from microctx.errors import InputError
from microctx.service.db import competition
from microctx.service.receipts import new_private_key

RUNNING, CLOSED = "running", "closed"


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """An instant as the ledgers write it: UTC, milliseconds, `Z`."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def competition_row(connection: Connection, *, hold: bool = False) -> Row:
    """The competition row; `hold`: kept from changing until the transaction ends (PostgreSQL:
    `FOR SHARE`, so `close` waits for a submission that read it as running; SQLite's write
    transactions are serialised whole)."""
    query = select(competition).where(competition.c.id == 1)
    if hold and connection.dialect.name == "postgresql":
        query = query.with_for_update(read=True)
    row = connection.execute(query).first()
    if row is None:
        raise InputError("--state", "no competition in this state (open it with any `microctx serve` command first)")
    return row


def ensure_competition(engine: Engine) -> Row:
    """The competition, created (seed and key) when the state has none; safe against a racing creator."""
    with engine.begin() as connection:
        row = connection.execute(select(competition).where(competition.c.id == 1)).first()
        if row is not None:
            return row
    try:
        with engine.begin() as connection:
            connection.execute(
                insert(competition).values(
                    id=1,
                    created_at=iso(utc_now()),
                    split_seed=secrets.token_hex(32),
                    signing_key=new_private_key(),
                    status=RUNNING,
                )
            )
    except IntegrityError:
        pass  # another process created it first: theirs is the competition
    with engine.begin() as connection:
        return competition_row(connection)


def bind_answers(engine: Engine, answers_sha256: str, corpus_sha256: str) -> Row:
    """Bind the competition to its answer bundle on the first `serve`; refuse another bundle later."""
    ensure_competition(engine)
    with engine.begin() as connection:
        row = competition_row(connection)
        if row.answers_sha256 is None:
            connection.execute(
                update(competition)
                .where(competition.c.id == 1)
                .values(answers_sha256=answers_sha256, corpus_sha256=corpus_sha256)
            )
        elif row.answers_sha256 != answers_sha256:
            raise InputError(
                "--answers",
                f"this state's competition grades answers {row.answers_sha256[:12]}…, "
                f"not {answers_sha256[:12]}…: give its answer bundle or a new --state",
            )
        return competition_row(connection)


def close(engine: Engine) -> Row:
    """Close the competition: no more submissions; the private board is released. Idempotent."""
    ensure_competition(engine)
    with engine.begin() as connection:
        if competition_row(connection).status != CLOSED:
            connection.execute(update(competition).where(competition.c.id == 1).values(status=CLOSED, closed_at=iso(utc_now())))
        return competition_row(connection)
