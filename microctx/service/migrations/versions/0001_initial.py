"""The first schema: competition, teams, submissions, and the append-only ledger.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_SQLITE_GUARDS = (
    """CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
    BEGIN SELECT RAISE(ABORT, 'the service ledger is append-only'); END""",
    """CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
    BEGIN SELECT RAISE(ABORT, 'the service ledger is append-only'); END""",
)
_POSTGRES_GUARDS = (
    """CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'the service ledger is append-only'; END $$""",
    """CREATE TRIGGER ledger_no_change BEFORE UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only()""",
)


def upgrade() -> None:
    op.create_table(
        "competition",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("split_seed", sa.String(64), nullable=False),
        sa.Column("signing_key", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("closed_at", sa.String(32)),
        sa.Column("answers_sha256", sa.String(64)),
        sa.Column("corpus_sha256", sa.String(64)),
    )
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("revoked_at", sa.String(32)),
    )
    op.create_table(
        "submissions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False),
        sa.Column("received_at", sa.String(32), nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("submission_sha256", sa.String(64), nullable=False),
        sa.Column("public_raw", sa.Float),
        sa.Column("private_raw", sa.Float),
        sa.Column("released", sa.Float),
        sa.Column("decision", sa.Text),
        sa.Column("outcomes", sa.Text),
        sa.Column("receipt", sa.Text),
        sa.Column("detail", sa.Text),
    )
    op.create_index("ix_submissions_team_id", "submissions", ["team_id"])
    op.create_table(
        "ledger",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.String(32), nullable=False),
        sa.Column("answers_sha256", sa.String(64), nullable=False),
        sa.Column("submission_sha256", sa.String(64)),
        sa.Column("candidate", sa.Text),
        sa.Column("config_digest", sa.String(64)),
        sa.Column("via", sa.String(32), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("team", sa.String(100), nullable=False),
        sa.Column("submission_id", sa.String(36), nullable=False),
        sa.Column("part", sa.String(16), nullable=False),
        sa.Column("raw_score", sa.Float, nullable=False),
        sa.Column("best_before", sa.Float),
        sa.Column("threshold", sa.Float),
        sa.Column("released", sa.Float),
        sa.Column("decision", sa.Text, nullable=False),
    )
    guards = _POSTGRES_GUARDS if op.get_bind().dialect.name == "postgresql" else _SQLITE_GUARDS
    for statement in guards:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("the service state is never downgraded (the ledger is append-only)")
