"""The leaderboard: per team, the chosen submission's score on one part, its interval, rank groups.

While the competition runs the board shows the public part: each team's released score (the
Ladder's), scored by the submission that set it (its *chosen* submission). After `admin close`
it shows the private part: the same chosen submission scored on the private records, released
with a receipt signed at the closing time. Raw public scores are never shown.

- interval: 95% percentile cluster bootstrap over the part's split components
  (`microctx.grading.stats`), answering "how far could this rate move on other records like
  these" (beyond these records), assuming components are independent; rounded like scores. A
  rate of exactly 1 (or 0) gets the exact one-sided bound alpha ** (1 / components) instead.
- rank groups: teams in score order; a team starts a new group when the paired sign-flip test
  over components (`stats.sign_flip_exact`, Monte Carlo beyond EXACT_FLIP_LIMIT discordant
  components) separates it from the first team of the current group at ALPHA = 0.05
  (two-sided, unadjusted: a group is "not shown to differ", not "shown equal").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from microctx.grading import stats
from microctx.service import ladder
from microctx.service.competition import METRIC, Competition, outcomes_of
from microctx.service.db import ledger, reading, submissions, teams
from microctx.service.quotas import SCORED
from microctx.service.receipts import sign
from microctx.service.state import CLOSED, competition_row

N_BOOT = 2000
N_FLIPS = 5000
SEED = 0
PRIVATE_DECISION = "private score of the team's chosen submission (its last released)"


@dataclass
class Entry:
    team: str
    submission_id: str
    submission_sha256: str
    exact: np.ndarray
    score: float
    looks: int
    receipt: dict


def interval(exact: np.ndarray, comp: Competition, mask: np.ndarray) -> tuple[float, float]:
    """95% percentile cluster-bootstrap interval of the exact-record rate on `mask`; when every
    component is all right (or all wrong) the bootstrap has no spread, and the exact one-sided
    bound `stats.boundary_bound` over the components replaces the missing side."""
    rows = ladder.per_component(exact, comp.component, mask, comp.n_components)
    totals = stats.bootstrap_totals(rows, N_BOOT, SEED)
    low, high, _ = stats.percentile_interval(stats.ratio(totals[:, 0], totals[:, 1])[:, None])
    if rows[:, 0].sum() == rows[:, 1].sum():
        low = stats.boundary_bound(len(rows))
    elif rows[:, 0].sum() == 0:
        high = 1 - stats.boundary_bound(len(rows))
    return ladder.released_value(float(np.ravel(low)[0])), ladder.released_value(float(np.ravel(high)[0]))


def paired_p_value(a: np.ndarray, b: np.ndarray, comp: Competition, mask: np.ndarray) -> float:
    """Two-sided sign-flip p-value of exact(a) - exact(b) over the part's components."""
    delta = (
        ladder.per_component(a, comp.component, mask, comp.n_components)[:, 0]
        - ladder.per_component(b, comp.component, mask, comp.n_components)[:, 0]
    )
    delta = delta[delta != 0][:, None]
    observed = float(delta.sum())
    if len(delta) == 0:
        return 1.0
    if len(delta) <= stats.EXACT_FLIP_LIMIT:
        return stats.sign_flip_exact(delta, lambda kept: 2 * kept[:, 0] - observed, observed)
    profiles, multiplicity = stats.compress(delta)
    kept = stats.binomial_flips(multiplicity, N_FLIPS, SEED) @ profiles
    return float(stats.sign_flip_p_monte_carlo(2 * kept - observed, np.array([observed]))[0])


def rank_groups(entries: list[Entry], comp: Competition, mask: np.ndarray) -> list[int]:
    """Group numbers (1, 2, ...) of entries already in score order."""
    groups: list[int] = []
    leader = None
    for entry in entries:
        if leader is None or paired_p_value(leader.exact, entry.exact, comp, mask) < stats.ALPHA:
            leader = entry
            groups.append(len(set(groups)) + 1)
        else:
            groups.append(groups[-1])
    return groups


def _entries(engine: Engine, comp: Competition, closed_at: str | None, key: str) -> list[Entry]:
    """Each team's chosen submission (its last release), scored on the board's part."""
    last_release = (
        select(ledger.c.team, func.max(ledger.c.id).label("id"))
        .where(ledger.c.part == "public", ledger.c.decision != ladder.NOT_SIGNIFICANT)
        .group_by(ledger.c.team)
        .subquery()
    )
    looks = (
        select(submissions.c.team_id, func.count().label("looks"))
        .where(submissions.c.state == SCORED)
        .group_by(submissions.c.team_id)
        .subquery()
    )
    query = select(teams.c.name, submissions, looks.c.looks).select_from(
        last_release.join(ledger, ledger.c.id == last_release.c.id)
        .join(submissions, submissions.c.id == ledger.c.submission_id)
        .join(teams, teams.c.id == submissions.c.team_id)
        .join(looks, looks.c.team_id == teams.c.id)
    )
    with reading(engine) as connection:
        rows = connection.execute(query).all()
    out = []
    for row in rows:
        if closed_at is None:
            score, receipt = float(row.released), orjson.loads(row.receipt)
        else:
            score = ladder.released_value(float(row.private_raw))
            receipt = sign(
                {
                    "corpus_sha256": comp.corpus_sha256,
                    "answers_sha256": comp.answers_sha256,
                    "submission_sha256": row.submission_sha256,
                    "submission_id": row.id,
                    "team": row.name,
                    "metric": METRIC,
                    "part": "private",
                    "released": score,
                    "decision": PRIVATE_DECISION,
                    "at": closed_at,
                },
                key,
            )
        out.append(Entry(row.name, row.id, row.submission_sha256, outcomes_of(row.outcomes), score, int(row.looks), receipt))
    return sorted(out, key=lambda e: (-e.score, e.team))


def board(engine: Engine, comp: Competition) -> dict:
    """The leaderboard document (GET /v1/leaderboard)."""
    with reading(engine) as connection:
        row = competition_row(connection)
    closed = row.status == CLOSED
    part = "private" if closed else "public"
    mask = comp.part(part)
    entries = _entries(engine, comp, row.closed_at if closed else None, row.signing_key)
    groups = rank_groups(entries, comp, mask)
    teams_out = []
    for entry, group in zip(entries, groups):
        low, high = interval(entry.exact, comp, mask)
        teams_out.append(
            {
                "team": entry.team,
                "rank_group": group,
                "score": entry.score,
                "ci_low": low,
                "ci_high": high,
                "looks": entry.looks,
                "submission_id": entry.submission_id,
                "receipt": entry.receipt,
            }
        )
    return {
        "status": row.status,
        "part": part,
        "metric": METRIC,
        "corpus_sha256": comp.corpus_sha256,
        "records": int(mask.sum()),
        "components": int(len(np.unique(comp.component[mask]))),
        "closed_at": row.closed_at,
        "teams": teams_out,
        "method": "score: exact-record rate of each team's chosen submission (its last released); interval: 95% "
        "percentile cluster bootstrap over split components; rank group: teams the paired sign-flip test "
        "over components does not separate from the group's first team at 0.05",
    }
