"""Submission quotas: per team per UTC day, and in total, taken inside the scoring transaction.

Only scored submissions count (a refused or refunded one does not). The check and the insert of
the new submission are one transaction that holds the team's lock (SQLite: the database write
lock of `BEGIN IMMEDIATE`; PostgreSQL: `SELECT ... FOR UPDATE` on the team row), so concurrent
submissions of one team racing for its last slot score exactly as many as are left.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from microctx.service.db import submissions, teams
from microctx.service.state import iso

SCORED, REFUNDED = "scored", "refunded"


@dataclass(frozen=True)
class Quota:
    """The competition's limits (None: unlimited)."""

    daily: int | None = None
    total: int | None = None


@dataclass(frozen=True)
class QuotaState:
    used_today: int
    used_total: int
    remaining_today: int | None
    remaining_total: int | None
    resets_at: str  # the next UTC midnight

    @property
    def exhausted(self) -> bool:
        return self.remaining_today == 0 or self.remaining_total == 0

    def as_json(self) -> dict:
        return {
            "used_today": self.used_today,
            "used_total": self.used_total,
            "remaining_today": self.remaining_today,
            "remaining_total": self.remaining_total,
            "resets_at": self.resets_at,
        }


class QuotaExceeded(Exception):
    def __init__(self, state: QuotaState):
        self.state = state
        super().__init__("the team's submission quota is used up")


def day_of(moment: datetime) -> str:
    return moment.date().isoformat()


def next_reset(moment: datetime) -> str:
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    return iso(midnight)


def lock_team(connection: Connection, team_id: int) -> None:
    """Serialise this team's quota and Ladder steps (SQLite already holds the database lock)."""
    if connection.dialect.name == "postgresql":
        connection.execute(select(teams.c.id).where(teams.c.id == team_id).with_for_update())


def usage(connection: Connection, team_id: int, now: datetime, quota: Quota) -> QuotaState:
    counted = (submissions.c.team_id == team_id) & (submissions.c.state == SCORED)
    today = connection.execute(select(func.count()).where(counted & (submissions.c.day == day_of(now)))).scalar_one()
    total = connection.execute(select(func.count()).where(counted)).scalar_one()
    return QuotaState(
        today,
        total,
        None if quota.daily is None else max(0, quota.daily - today),
        None if quota.total is None else max(0, quota.total - total),
        next_reset(now),
    )


def take(connection: Connection, team_id: int, now: datetime, quota: Quota) -> QuotaState:
    """Lock the team and check it has a slot left (QuotaExceeded if not); the state after this one is taken."""
    lock_team(connection, team_id)
    state = usage(connection, team_id, now, quota)
    if state.exhausted:
        raise QuotaExceeded(state)
    return QuotaState(
        state.used_today + 1,
        state.used_total + 1,
        None if state.remaining_today is None else state.remaining_today - 1,
        None if state.remaining_total is None else state.remaining_total - 1,
        state.resets_at,
    )
