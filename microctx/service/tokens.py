"""Teams and their bearer tokens: a token is shown once, only its SHA-256 is stored.

A token is `mctx_` and 32 random bytes (URL-safe base64), so its SHA-256 is a safe stored
form (no salt needed: the secret has 256 bits of entropy, nothing to guess). A request's token
is hashed and the stored row looked up by that hash; the two digests are then compared with
`hmac.compare_digest` (constant time). A revoked team's token is refused like an unknown one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError

from microctx.errors import InputError
from microctx.service.db import teams
from microctx.service.state import ensure_competition, iso, utc_now

TOKEN_PREFIX = "mctx_"
MAX_NAME = 100


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_team_name(name: str) -> str:
    """A team name: 1 to 100 characters, no control characters (markup is allowed: pages escape it)."""
    if not name.strip() or len(name) > MAX_NAME or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InputError("NAME", f"expected 1 to {MAX_NAME} printable characters, got {name!r}")
    return name


def add_team(engine: Engine, name: str) -> str:
    """Register a team; its token (returned once, never stored)."""
    check_team_name(name)
    ensure_competition(engine)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with engine.begin() as connection:
            connection.execute(insert(teams).values(name=name, token_sha256=token_sha256(token), created_at=iso(utc_now())))
    except IntegrityError:
        raise InputError("NAME", f"a team named {name!r} already exists") from None
    return token


def revoke_team(engine: Engine, name: str) -> None:
    """Revoke a team's token (its submissions and scores stay)."""
    with engine.begin() as connection:
        done = connection.execute(
            update(teams).where(teams.c.name == name, teams.c.revoked_at.is_(None)).values(revoked_at=iso(utc_now()))
        )
        if done.rowcount == 0:
            raise InputError("NAME", f"no team named {name!r} with a valid token")


def team_of_token(connection: Connection, token: str | None) -> Row | None:
    """The team whose valid token this is, else None."""
    if not token:
        return None
    digest = token_sha256(token)
    row = connection.execute(select(teams).where(teams.c.token_sha256 == digest)).first()
    if row is None or not hmac.compare_digest(row.token_sha256, digest) or row.revoked_at is not None:
        return None
    return row


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header, else None."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def teams_row(connection: Connection, name: str) -> Row | None:
    """A team's row by name (None when there is no such team)."""
    return connection.execute(select(teams).where(teams.c.name == name)).first()
