"""One submission, from request body to released score: validate, score, then one transaction.

The order keeps three promises. A submission that cannot be scored (`Rejected`) is refused
before anything is counted. The grade is computed before the transaction and written only
inside it, so a process killed while scoring leaves nothing: no submission row, no ledger
entry, no quota used (the submission is either scored and counted, or neither). And the quota
check, the Ladder step and the writes are one transaction holding the team's lock, so
concurrent submissions racing for the last slot score exactly the quota. A failure that is the
service's own (anything but a refusal or an exhausted quota) is refunded: recorded with state
`refunded`, never counted, and answered 503.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import orjson
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection, Engine, Row

from microctx.contract.digests import sha256_hex
from microctx.grading.ledger import config_digest, grade_summary
from microctx.service import ladder
from microctx.service.competition import METRIC, Competition, Scored, outcomes_of, outcomes_text, parse_submission, score
from microctx.service.db import ledger, reading, submissions, teams, write_lock
from microctx.service.quotas import REFUNDED, SCORED, Quota, QuotaExceeded, QuotaState, day_of, take, usage
from microctx.service.receipts import sign
from microctx.service.state import CLOSED, competition_row, iso, utc_now

VIA = "service"


class Closed(Exception):
    """The competition is closed: no more submissions."""


class Revoked(Exception):
    """The team's token was revoked while its submission was scored: not counted."""


class Refunded(Exception):
    """The service failed on its own account; the submission was not counted."""

    def __init__(self, submission_id: str, detail: str):
        self.submission_id = submission_id
        super().__init__(detail)


@dataclass(frozen=True)
class Settings:
    quota: Quota
    ladder: bool = True


def best_released(connection: Connection, team: str) -> ladder.Best | None:
    """The team's current released public score, with the raw score and outcomes of the submission that set it."""
    row = connection.execute(
        select(submissions.c.released, submissions.c.public_raw, submissions.c.outcomes)
        .select_from(ledger.join(submissions, submissions.c.id == ledger.c.submission_id))
        .where(ledger.c.team == team, ledger.c.part == "public", ledger.c.decision != ladder.NOT_SIGNIFICANT)
        .order_by(ledger.c.id.desc())
        .limit(1)
    ).first()
    return None if row is None else ladder.Best(float(row.released), float(row.public_raw), outcomes_of(row.outcomes))


def _receipt(
    comp: Competition, key: str, team: str, submission_id: str, sha: str, decision: ladder.Decision, part: str, at: str
) -> dict:
    return sign(
        {
            "corpus_sha256": comp.corpus_sha256,
            "answers_sha256": comp.answers_sha256,
            "submission_sha256": sha,
            "submission_id": submission_id,
            "team": team,
            "metric": METRIC,
            "part": part,
            "released": decision.released,
            "decision": decision.decision,
            "at": at,
        },
        key,
    )


def _record(
    connection: Connection, comp: Competition, team: Row, scored: Scored, sha: str, manifest: dict | None, settings: Settings
) -> dict:
    """Inside the transaction: take the quota, take the Ladder's step, write submission and ledger entry.

    The competition's status and the team's token were checked before scoring; both are read
    again here, under lock (the competition row held against `close`, the team row locked by
    `take`), so a close or a revocation that commits while this submission is scored is seen."""
    now = utc_now()
    row = competition_row(connection, hold=True)
    if row.status == CLOSED:  # closed while this one was scored
        raise Closed("the competition is closed: submissions are no longer scored")
    quota = take(connection, team.id, now, settings.quota)
    if connection.execute(select(teams.c.revoked_at).where(teams.c.id == team.id)).scalar() is not None:
        raise Revoked("the team's token was revoked")
    mask = comp.part("public")
    raw = scored.rate(mask)
    decision = ladder.decide(
        raw, scored.exact, best_released(connection, team.name), comp.component, mask, comp.n_components, ladder=settings.ladder
    )
    submission_id, at = str(uuid.uuid4()), iso(now)
    receipt = _receipt(comp, row.signing_key, team.name, submission_id, sha, decision, "public", at)
    connection.execute(
        insert(submissions).values(
            id=submission_id,
            team_id=team.id,
            received_at=at,
            day=day_of(now),
            state=SCORED,
            submission_sha256=sha,
            public_raw=raw,
            private_raw=scored.rate(comp.part("private")),
            released=decision.released,
            decision=decision.decision,
            outcomes=outcomes_text(scored.exact),
            receipt=orjson.dumps(receipt).decode(),
        )
    )
    candidate = manifest.get("candidate") if manifest else None
    connection.execute(
        insert(ledger).values(
            at=at,
            answers_sha256=comp.answers_sha256,
            submission_sha256=sha,
            candidate=str(candidate) if candidate is not None else team.name,
            config_digest=config_digest(manifest),
            via=VIA,
            summary=orjson.dumps(grade_summary(scored.grade)).decode(),
            team=team.name,
            submission_id=submission_id,
            part="public",
            raw_score=raw,
            best_before=decision.best_before,
            threshold=decision.threshold,
            released=decision.released,
            decision=decision.decision,
        )
    )
    return result_document(submission_id, team.name, at, decision.released, decision.decision, receipt, settings.ladder, quota)


def result_document(
    submission_id: str,
    team: str,
    at: str,
    released: float | None,
    decision: str | None,
    receipt: dict | None,
    ladder_on: bool,
    quota: QuotaState | None = None,
) -> dict:
    """What a team is told about one of its submissions (never a raw score or a per-record outcome)."""
    document = {
        "id": submission_id,
        "team": team,
        "received_at": at,
        "metric": METRIC,
        "part": "public",
        "score": released,
        "decision": decision,
        "ladder": ladder_on,
        "receipt": receipt,
    }
    if quota is not None:
        document["quota"] = quota.as_json()
    return document


def _refund(engine: Engine, team: Row, sha: str, detail: str) -> str:
    submission_id, now = str(uuid.uuid4()), utc_now()
    with write_lock(engine), engine.begin() as connection:
        connection.execute(
            insert(submissions).values(
                id=submission_id,
                team_id=team.id,
                received_at=iso(now),
                day=day_of(now),
                state=REFUNDED,
                submission_sha256=sha,
                detail=detail[:500],
            )
        )
    return submission_id


def accept(engine: Engine, comp: Competition, settings: Settings, team: Row, body: bytes, manifest: dict | None = None) -> dict:
    """Score one submission body for `team`: its result document, or Rejected / QuotaExceeded /
    Closed / Revoked (nothing counted) / Refunded (the service's failure, recorded and not counted)."""
    with reading(engine) as connection:
        if competition_row(connection).status == CLOSED:
            raise Closed("the competition is closed: submissions are no longer scored")
        state = usage(connection, team.id, utc_now(), settings.quota)  # early refusal; `take` decides
    if state.exhausted:
        raise QuotaExceeded(state)
    submission = parse_submission(body, comp)
    sha = sha256_hex(body)
    try:
        scored = score(comp, submission)
        with write_lock(engine), engine.begin() as connection:
            return _record(connection, comp, team, scored, sha, manifest, settings)
    except (QuotaExceeded, Closed, Revoked):
        raise
    except Exception as exc:  # the service's own failure: refunded, never counted
        detail = f"{type(exc).__name__}: {exc}"
        raise Refunded(_refund(engine, team, sha, detail), detail) from exc
