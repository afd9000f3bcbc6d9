"""The Ladder (Blum & Hardt, 2015), parameter-free and cluster-aware: what a team is told.

A team's released public score changes only when a submission beats the best it has released
by more than a paired standard error; otherwise the previous released score is returned with
"not a significant improvement". Blum & Hardt's parameter-free Ladder takes the standard error
of the per-example loss differences between the new submission and the best one so far; here
the units are the *split components* of the public part (records inside a component are not
independent), so the standard error is that of the difference of exact-record rates under the
cluster bootstrap of `microctx.grading.stats` (components resampled with replacement, both
submissions scored on the same draw). Released values are rounded to ROUND_TO decimals. With
the Ladder off, every submission's public score is released (rounded): the baseline the
boosting attack is measured against (benchmarks/boosting_attack.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from microctx.grading import stats

ROUND_TO = 3
SE_REPLICATES = 2000
SE_SEED = 0
FIRST = "first release"
IMPROVED = "released: beats the best released score by more than a paired standard error"
NOT_SIGNIFICANT = "not a significant improvement"
LADDER_OFF = "released (the Ladder is off)"


@dataclass(frozen=True)
class Best:
    """The submission that set a team's current released score: that value, its raw score, its outcomes."""

    released: float
    raw: float
    exact: np.ndarray


@dataclass(frozen=True)
class Decision:
    released: float  # the value the team is shown
    decision: str
    raw: float
    best_before: float | None  # the raw score of the submission that set the released score (never shown)
    threshold: float | None  # the paired standard error it had to beat the best by

    @property
    def is_release(self) -> bool:
        return self.decision != NOT_SIGNIFICANT


def released_value(raw: float) -> float:
    return round(raw, ROUND_TO)


def per_component(exact: np.ndarray, component: np.ndarray, mask: np.ndarray, n_components: int) -> np.ndarray:
    """(exact records, records) per component of the records in `mask`, components without one dropped."""
    records = np.bincount(component[mask], minlength=n_components)
    hits = np.bincount(component[mask], weights=exact[mask].astype(np.float64), minlength=n_components)
    keep = records > 0
    return np.column_stack([hits[keep], records[keep]]).astype(np.float64)


def paired_standard_error(new: np.ndarray, best: np.ndarray, component: np.ndarray, mask: np.ndarray, n_components: int) -> float:
    """Cluster-bootstrap standard error of rate(new) - rate(best) over the components of `mask`."""
    rows = np.column_stack(
        [per_component(new, component, mask, n_components)[:, 0], per_component(best, component, mask, n_components)]
    )
    totals = stats.bootstrap_totals(rows, SE_REPLICATES, SE_SEED)
    differences = stats.ratio(totals[:, 0] - totals[:, 1], totals[:, 2])
    return float(np.std(differences, ddof=1))


def decide(
    raw: float,
    exact: np.ndarray,
    best: Best | None,
    component: np.ndarray,
    mask: np.ndarray,
    n_components: int,
    *,
    ladder: bool = True,
) -> Decision:
    """The Ladder's step for a submission with public score `raw` and per-record outcomes `exact`,
    given the submission behind the team's released score (None: nothing released yet).

    The comparison is with that submission's raw score, not its rounding, so rounding never
    lowers the bar (a released 0.665 may stand for a raw 0.6654)."""
    if not ladder:
        return Decision(released_value(raw), LADDER_OFF, raw, best.raw if best else None, None)
    if best is None:
        return Decision(released_value(raw), FIRST, raw, None, None)
    threshold = paired_standard_error(exact, best.exact, component, mask, n_components)
    if raw > best.raw + threshold and not math.isclose(raw, best.raw + threshold):
        return Decision(released_value(raw), IMPROVED, raw, best.raw, threshold)
    return Decision(best.released, NOT_SIGNIFICANT, raw, best.raw, threshold)
