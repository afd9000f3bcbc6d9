"""The frontier report's glue: run manifests read here, the frontier itself in `microctx.grading.frontier`.

`frontier_table(inputs, paths, names, ...)` reads each submission's run manifest
(`<S without .json>.run.json`, `candidates.runner.read_manifest`) and the runner's model counts
(`candidates.runner.model_counts`), records each grading on test in the held-out ledger, and
hands them to `microctx.grading.frontier.frontier_table` (which may not import candidates/).
Everything else is re-exported from there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from microctx.contract.costs import COST_MEASURES  # noqa: F401  (re-exported for notebooks and tests)
from microctx.grading.frontier import (  # noqa: F401  (re-exported for notebooks and tests)
    DEFAULT_BASELINE,
    DEFAULT_CPU_DOLLARS_PER_HOUR,
    FRONTIER_COLUMNS,
    Frontier,
    bootstrap_net_true,
    break_even,
    net_true_by_component,
    pick_baseline,
    prediction_interval,
    test_components,
    verdict,
    write_frontier_csv,
)


def frontier_table(
    inputs,
    paths: Sequence[str | os.PathLike],
    names: Sequence[str],
    *,
    baseline: str = "",
    cost_measure: str = "dollars",
    cpu_dollars_per_hour: float = DEFAULT_CPU_DOLLARS_PER_HOUR,
    n_boot: int | None = None,
    seed: int = 0,
    records=None,
) -> Frontier:
    """`grading.frontier.frontier_table` on the submissions in `inputs` (`paths` locate their manifests;
    `records`: a precomputed record table, its components deciding the intervals)."""
    from microctx.candidates.runner import model_counts, read_manifest
    from microctx.grading import frontier
    from microctx.reports.tables import record_report_look

    manifests = [read_manifest(p, strict=True) or {} for p in paths] if paths else [{} for _ in names]
    return frontier.frontier_table(
        inputs,
        names,
        manifests=manifests,
        counts=[model_counts(m) for m in manifests],
        look=lambda name, result: record_report_look(inputs, name, result, "report frontier"),
        baseline=baseline,
        cost_measure=cost_measure,
        cpu_dollars_per_hour=cpu_dollars_per_hour,
        n_boot=n_boot,
        seed=seed,
        records=records,
    )
