"""The cluster-bootstrap replicates a slice table reads, and nothing more.

A slice table needs resampled totals for three things only:
- the intervals of the slices that may get one (enough components and effective components):
  their five totals (tp, fp, fn, records, exact records);
- the weak test of the slices it may judge: the tp, fp, fn of their families, and the per-kind
  parts of the record-level ones and of their families (`counts.kind_specs`);
- `boot_no_submitted` / `boot_no_gold` of every slice: how many replicates drew no component with
  a submitted (tp + fp) or a gold (tp + fn) fact of it, from one 0/1 column each.

`bootstrap(layout, request, n_boot, seed) -> Replicates` draws those columns only, from one set of
draws (`stats.component_draws`) over the components merged by the columns drawn (`stats.compress`),
as one matrix product per block of draws. The products run in float32 when every total stays
below 2**24 (integers, so exact), else in float64: the replicate totals are the integers
`stats.bootstrap_totals` would give for the same columns and draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from microctx.grading import stats

N_QUANTITIES = 5  # tp, fp, fn, records, exact records (`counts.QUANTITIES`)


@dataclass(frozen=True)
class Request:
    """Which replicate columns a table reads: every quantity of the `held` slices, tp, fp and fn of
    the `parts` (indices into the parts that follow the slices in the layout), and for every
    one of the first `n` slices whether a replicate drew a submitted and a gold fact of it."""

    n: int
    held: np.ndarray
    parts: np.ndarray


@dataclass(frozen=True)
class Replicates:
    """Replicate totals of one request: `slices` (n_boot, len(held), 5) in `held` order; `parts`
    part index -> (n_boot, 3) tp, fp, fn; `no_submitted` and `no_gold` per slice (of the first n):
    the replicates in which its precision, its recall is undefined (a zero denominator)."""

    held: np.ndarray
    slices: np.ndarray
    parts: dict[int, np.ndarray]
    no_submitted: np.ndarray
    no_gold: np.ndarray

    def of(self, chosen: np.ndarray) -> np.ndarray:
        """(n_boot, len(chosen), 5) replicates of the `chosen` slices (each must be held), a
        C-contiguous copy whatever `chosen` is, so sums over it read one memory layout."""
        where = np.searchsorted(self.held, np.asarray(chosen, dtype=np.int64))
        return np.ascontiguousarray(self.slices[:, where])


def columns(layout: np.ndarray, request: Request) -> np.ndarray:
    """(n_components, n_columns) int32 columns of `layout` (n_components, n_columns, 5) a
    request draws: the held slices' five quantities, the parts' tp, fp and fn, then for each of
    the first n slices whether the component has a submitted fact (tp + fp > 0) and a gold fact
    (tp + fn > 0) of it."""
    n, held = request.n, np.asarray(request.held, dtype=np.int64)
    parts = n + np.asarray(request.parts, dtype=np.int64)
    g, width, part_width = layout.shape[0], len(held) * N_QUANTITIES, 3 * len(parts)
    out = np.empty((g, width + part_width + 2 * n), dtype=np.int32)  # each block written in place, no concatenation
    out[:, :width].reshape(g, len(held), N_QUANTITIES)[...] = layout[:, held, :]
    out[:, width : width + part_width].reshape(g, len(parts), 3)[...] = layout[:, parts, :3]
    tp, fp, fn = (layout[:, :n, j] for j in range(3))
    np.greater(tp + fp, 0, out=out[:, width + part_width : width + part_width + n], casting="unsafe")
    np.greater(tp + fn, 0, out=out[:, width + part_width + n :], casting="unsafe")
    return out


def draw_totals(per_component: np.ndarray, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Cluster-bootstrap totals of the integer columns `per_component`, each distinct column once:
    ((n_boot, n_distinct + 1) totals, the last column 0; per column the index of its distinct
    column, -1 (that last, zero column) where no component has a count). The components are
    merged (`stats.compress`), drawn (`stats.component_draws`) and summed as one matrix product
    per block (float32 while exact, below 2**24): the integers `stats.bootstrap_totals` gives.
    Slices often share a column (on s8f 232 columns with a count are 97 distinct ones)."""
    profiles, multiplicity = stats.compress(per_component)
    column = np.full(per_component.shape[1], -1, dtype=np.int64)
    live = np.flatnonzero(profiles.any(axis=0)) if profiles.shape[0] else np.array([], dtype=np.int64)
    if not len(live):
        return np.zeros((n_boot, 1)), column
    distinct, inverse = np.unique(profiles[:, live].T, axis=0, return_inverse=True)
    column[live] = inverse.reshape(-1)
    dtype: type[np.floating[Any]] = np.float32 if int(multiplicity.sum()) * int(distinct.max()) < 2**24 else np.float64
    weights: np.ndarray = np.ascontiguousarray(distinct.T, dtype=dtype)
    out = np.zeros((n_boot, len(distinct) + 1), dtype=np.float64)
    start = 0
    with stats.one_blas_thread():
        for draws in stats.component_draws(multiplicity, n_boot, seed):
            counts: np.ndarray = draws.astype(dtype)
            out[start : start + len(draws), :-1] = counts @ weights
            start += len(draws)
    return out, column


def bootstrap(layout: np.ndarray, request: Request, n_boot: int, seed: int) -> Replicates:
    """The replicates of `request` from (n_components, n_columns, 5) per-component counts."""
    n, held, parts = request.n, request.held, request.parts
    totals, column = draw_totals(columns(layout, request), n_boot, seed)
    width, part_width = len(held) * N_QUANTITIES, 3 * len(parts)
    part_columns = totals[:, column[width : width + part_width]]
    undefined = (totals <= 0).sum(axis=0)[column[width + part_width :]]  # per flag column
    return Replicates(
        held=np.asarray(held, dtype=np.int64),
        slices=totals[:, column[:width]].reshape(n_boot, len(held), N_QUANTITIES),
        parts={int(p): part_columns[:, 3 * k : 3 * k + 3] for k, p in enumerate(parts)},
        no_submitted=undefined[:n],
        no_gold=undefined[n:],
    )


def held_slices(chosen: np.ndarray, family: np.ndarray, record_level: np.ndarray) -> np.ndarray:
    """The slices whose totals a table resamples: those that may get an interval (`chosen`) and
    the families the weak test compares them with (record-level slices compare through parts)."""
    chosen = np.asarray(chosen, dtype=np.int64)
    families = family[chosen][(family[chosen] >= 0) & ~record_level[chosen]]
    return stats.distinct(np.concatenate([chosen, families]).astype(np.int64))


def wanted_parts(maybe: Sequence[int] | np.ndarray, family: np.ndarray, parts_index: np.ndarray) -> np.ndarray:
    """The parts the weak test may read: those of the record-level slices it may judge (`maybe`)
    and of their families."""
    maybe = np.asarray(maybe, dtype=np.int64)
    wanted = stats.distinct(np.concatenate([parts_index[maybe], parts_index[family[maybe]]]).ravel())
    return wanted[wanted >= 0].astype(np.int64)
