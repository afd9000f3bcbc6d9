"""The net-true decision boundary: is a candidate's gain in facts worth what it costs?

Per candidate (a submission and its run manifest `<S without .json>.run.json`):
- net-true facts on the held-out (test) records: true facts submitted (tp) minus false facts
  submitted (fp); a missed fact counts neither way. `net_true_rate` divides by the gold facts.
- two questions, kept apart: **on these records**, `net_true` (and `gain`) is the exact count of
  the frozen test set (a deterministic candidate's 4,326 on s8f's perfect answers is exact, no
  interval); **beyond these records**, `net_true_ci_low/_high` (and `gain_ci_*`) is a 95%
  prediction interval for the net-true a *new* test set drawn the same way (as many split
  components, drawn from the same population) would show: observed + (T1 - T2) over pairs of
  independent cluster-bootstrap totals T1, T2 (`microctx.grading.stats.bootstrap_totals`), since
  both the observed and the new test set vary. Assumptions: components are independent and alike
  (each drawn from one population), facts inside a component are not independent (drawn
  together). One set of draws is shared by every candidate (columns of one matrix), so the gain
  against the baseline has a paired interval. No interval at all (NaN ends, the reason in
  `method`) when one component could dominate a test set (`interval_reason`): the test set's
  n_eff below 10, or a component of the corpus the test set lacks that would bring it there.
  Coverage of a new test set's net-true, and that the rule fires on s8f-like draws, is checked
  by simulation (tests/test_slice_simulation.py, benchmarks/bench_coverage.py).
- cost from the manifest: wall and CPU seconds (the runner's measure); model calls, input,
  output and cached tokens as the model gateway counted them, or the runner's proxy when it
  could (record mode, plain HTTP: `model_usage_check`), else as the candidate reported them (unknown, NaN, when it did
  not), with `counts_agree` False when the two differ (`microctx.contract.records.model_counts`);
  model dollars as the model gateway counted them (`gateway.dollars`, --model-endpoint), else
  (`cost_microdollars`) as the candidate reported them, compute dollars = CPU
  seconds x `cpu_dollars_per_hour` (an assumed price, a parameter), dollars = model + compute;
  each also per corpus record.
- the Pareto front on (cost per record, net-true), `microctx.grading.stats.pareto_front`: a
  candidate is on it when no other candidate has lower or equal cost and higher or equal
  net-true with one of them strict. Candidates whose cost is unknown are left off the front.
- against the baseline (exact-sql by default): gain = net-true minus the baseline's (paired
  interval), extra cost per record, and the break-even value of one net-true fact:
  extra cost per corpus record / gain per held-out record (cost assumed proportional to the
  records processed); only where paying more buys a gain (or paying less loses one): empty
  (NaN) for a dominated or dominating candidate. The verdict reads it: "dominated" (no more net-true facts for no less
  cost), "dominates", "pays off when a net-true fact is worth more than X", or "cheaper and
  worse: pays off only when a net-true fact is worth less than X".

`frontier_table(inputs, paths, names, ...)` does all of it: it reads each run manifest with the
one typed reader (`microctx.contract.records.read_manifest`, a `RunManifest`) and its model counts
(`contract.records.model_counts`); the notebook only shows it. Each candidate graded on test is
one look in the held-out ledger (`microctx.grading.ledger.record_report_look`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from microctx.contract.costs import COST_MEASURES
from microctx.errors import InputError

if TYPE_CHECKING:  # numpy and pandas are imported where used: the CLI's parser imports this module
    import numpy as np
    import pandas as pd

    from microctx.contract.records import RunManifest
    from microctx.contract.score import GradeResult

DEFAULT_CPU_DOLLARS_PER_HOUR = 0.05  # an assumed price of one vCPU-hour; pass your own
DEFAULT_BASELINE = "exact-sql"
FRONTIER_COLUMNS = (
    "candidate",
    "run_candidate",
    "net_true",
    "net_true_ci_low",
    "net_true_ci_high",
    "net_true_rate",
    "true_facts",
    "false_facts",
    "missed_facts",
    "gold_facts",
    "aggregate_errors",
    "quality_pass",
    "records",
    "test_records",
    "wall_seconds",
    "cpu_seconds",
    "model_calls",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "counts_source",
    "counts_agree",
    "model_dollars",
    "compute_dollars",
    "dollars",
    "cost",
    "cost_measure",
    "on_front",
    "gain",
    "gain_ci_low",
    "gain_ci_high",
    "extra_cost_per_record",
    "break_even_per_fact",
    "verdict",
    "method",
)


@dataclass
class Frontier:
    table: pd.DataFrame  # one row per candidate, FRONTIER_COLUMNS
    baseline: str
    cost_measure: str
    method: str
    looks: dict[str, Any] = field(default_factory=dict)  # candidate name -> its held-out ledger entry (this grading)


def _float(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def test_components(records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(component roots of the held-out records, held-out records per component)."""
    import numpy as np

    roots, sizes = np.unique(records.loc[records["split"] == "test", "component"].to_numpy(), return_counts=True)
    return roots, sizes.astype(np.float64)


def net_true_by_component(facts: pd.DataFrame, records: pd.DataFrame) -> np.ndarray:
    """Net-true facts (tp - fp) per held-out component (in `test_components` order) from a fact
    table, through grading's one per-component count (`counts.component_counts`)."""
    import numpy as np

    from microctx.grading import counts as counting

    roots, _ = test_components(records)
    prepared = counting.prepare(facts, records, "facts")
    where = np.full(len(records), -1, dtype=np.int64)
    test = np.flatnonzero((records["split"] == "test").to_numpy())
    where[test] = np.searchsorted(roots, records["component"].to_numpy()[test])
    keep = where[prepared.record] >= 0
    per = counting.component_counts(where[prepared.record][keep], prepared.outcome[keep], prepared.record[keep], len(roots))
    returned: np.ndarray = (per[:, 0] - per[:, 1]).astype(np.float64)
    return returned


def interval_reason(
    test_sizes: np.ndarray,
    test_roots: np.ndarray,
    population_sizes: np.ndarray,
    population_roots: np.ndarray,
    *,
    min_components: int,
    min_n_eff: float,
) -> str:
    """Why there is no beyond-these-records interval ("" when there is one): the slice table's
    rule on the test set as a whole, and on the test set a new draw could bring.

    `test_sizes` / `test_roots`: units (records, or facts) per held-out component and its root;
    `population_sizes` / `population_roots`: the same for every component a new test set could
    draw (the whole corpus: the split puts whole components in train, tune or test at random).
    No interval when the test set has fewer than `min_components` components or a Kish n_eff
    below `min_n_eff` (it rests on its largest component), or when the corpus holds a component
    the test set lacks that would bring the test set's n_eff below `min_n_eff` (a new test set
    that drew it would rest on it; this one cannot say what it would do there)."""
    import numpy as np

    from microctx.grading import stats

    sizes = np.asarray(test_sizes, dtype=np.float64)
    if len(sizes) < min_components:
        return f"{len(sizes)} test components, fewer than {min_components}"
    n_eff = float(stats.kish_n_eff(sizes))
    if n_eff < min_n_eff:
        return (
            f"the test set's n_eff is {n_eff:.1f}, below {min_n_eff:g}: it rests on component #{test_roots[int(sizes.argmax())]}"
        )
    unseen = ~np.isin(population_roots, test_roots)
    if unseen.any():
        j = np.flatnonzero(unseen)[int(np.asarray(population_sizes, dtype=np.float64)[unseen].argmax())]
        with_it = float(stats.kish_n_eff(np.append(sizes, float(population_sizes[j]))))
        if with_it < min_n_eff:
            return (
                f"the corpus holds component #{population_roots[j]} ({int(population_sizes[j])} units), not in this "
                f"test set; a new test set drawing it would have n_eff {with_it:.1f}, below {min_n_eff:g}, and rest on it"
            )
    return ""


def corpus_interval_reason(records: pd.DataFrame, min_components: int, min_n_eff: float) -> str:
    """`interval_reason` over held-out records per component, the corpus's components as the population."""
    import numpy as np

    roots, sizes = test_components(records)
    all_roots, all_sizes = np.unique(records["component"].to_numpy(), return_counts=True)
    return interval_reason(sizes, roots, all_sizes, all_roots, min_components=min_components, min_n_eff=min_n_eff)


def bootstrap_net_true(sizes: np.ndarray, nets: dict[str, np.ndarray], n_boot: int, seed: int) -> dict[str, np.ndarray]:
    """Cluster-bootstrap replicates of each candidate's net-true on a test set drawn like this one.

    `sizes`: held-out records per component; `nets`: name -> net-true per component (both in
    `test_components` order). A replicate draws as many components as there are, with
    replacement, and sums their net-true (a new test set of as many components, not scaled to
    the record count). One draw of components serves every candidate (they are columns of one
    matrix for `stats.bootstrap_totals`), so differences between candidates are paired.
    """
    import numpy as np

    from microctx.grading import stats

    matrix = np.column_stack([sizes, *nets.values()]) if len(sizes) else np.zeros((0, 1 + len(nets)))
    totals = stats.bootstrap_totals(matrix, n_boot, seed)
    return {name: totals[:, i + 1] for i, name in enumerate(nets)}


def prediction_interval(observed: float, replicates: np.ndarray) -> tuple[float, float]:
    """95% interval for the value a new test set drawn the same way would show: the percentile
    interval of observed + (T1 - T2) over pairs of independent bootstrap replicates (the second
    half of the replicates against the first), since both the observed and the new set vary."""
    import numpy as np

    values = np.asarray(replicates, dtype=np.float64)
    half = len(values) // 2
    if half == 0:
        return (math.nan, math.nan)
    return _interval(observed + values[:half] - values[half : 2 * half])


def _interval(replicates: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of the defined replicates (NaN, NaN with none)."""
    import numpy as np

    from microctx.grading import stats

    if len(replicates) == 0:
        return (math.nan, math.nan)
    low, high, _ = stats.percentile_interval(np.asarray(replicates, dtype=np.float64)[:, None])
    return (float(low[0]), float(high[0]))


def _fmt(value: float) -> str:
    return f"{value:.3g}" if abs(value) >= 0.001 or value == 0 else f"{value:.2e}"


def verdict(gain: float, extra: float, break_even: float, baseline: str, measure: str, gain_ci: tuple[float, float]) -> str:
    """The payoff against the baseline in words (see the module docstring)."""
    unit = "$" if "dollars" in measure else ""
    per = "" if "dollars" in measure else f" {measure.replace('_', ' ')}"
    if math.isnan(extra):
        return "cost unknown (no run manifest or no counters)"
    if gain <= 0 and extra >= 0:
        text = "equal" if gain == 0 and extra == 0 else f"dominated by {baseline}"
    elif gain >= 0 and extra <= 0:
        text = f"dominates {baseline}"
    elif gain > 0:
        text = f"pays off when a net-true fact is worth more than {unit}{_fmt(break_even)}{per}"
    else:
        text = f"cheaper and worse: pays off only when a net-true fact is worth less than {unit}{_fmt(break_even)}{per}"
    low, high = gain_ci
    if gain != 0 and not math.isnan(low) and low <= 0 <= high:
        text += " (the gain's 95% interval includes 0)"
    return text


def pick_baseline(names: Sequence[str], manifests: Sequence[RunManifest | None], requested: str = "") -> str:
    """The requested name; else the candidate whose run was `exact-sql` (by name or manifest); else the first."""
    if requested:
        if requested not in names:
            raise InputError("--baseline", f"{requested!r} is not one of the candidates ({', '.join(names)})")
        return requested
    for name, manifest in zip(names, manifests):
        if name == DEFAULT_BASELINE or (manifest is not None and manifest.candidate == DEFAULT_BASELINE):
            return name
    return names[0]


def _candidate_row(
    name: str,
    result: GradeResult,
    facts: pd.DataFrame,
    manifest: RunManifest | None,
    counts: dict[str, Any],
    cpu_dollars_per_hour: float,
) -> dict[str, Any]:
    from microctx.contract.facts import FACT_KINDS
    from microctx.contract.records import RunManifest

    outcome = facts[facts["kind"].isin(FACT_KINDS)]["outcome"].value_counts()
    tp, fp, fn = (int(outcome.get(k, 0)) for k in ("tp", "fp", "fn"))
    run = manifest if manifest is not None else RunManifest()
    model_dollars = counts["dollars"] if counts.get("dollars") is not None else _float(run.counter("cost_microdollars")) / 1e6
    if math.isnan(model_dollars) and counts["model_calls"] == 0:
        model_dollars = 0.0  # no model call: no model dollars, whether or not the candidate said so
    cpu = _float(run.cpu_seconds)
    compute = cpu * cpu_dollars_per_hour / 3600
    return {
        "candidate": name, "run_candidate": run.candidate, "net_true": tp - fp,
        "net_true_rate": (tp - fp) / (tp + fn) if tp + fn else math.nan,
        "true_facts": tp, "false_facts": fp, "missed_facts": fn, "gold_facts": tp + fn,
        "aggregate_errors": result.grade["aggregate_errors"], "quality_pass": result.grade["quality_pass"],
        "wall_seconds": _float(run.wall_seconds), "cpu_seconds": cpu,
        "model_calls": _float(counts["model_calls"]), "input_tokens": _float(counts["input_tokens"]),
        "output_tokens": _float(counts["output_tokens"]), "cached_tokens": _float(counts["cached_tokens"]),
        "counts_source": counts["counts_source"] if manifest is not None else None, "counts_agree": counts["counts_agree"],
        "model_dollars": model_dollars, "compute_dollars": compute, "dollars": model_dollars + compute,
    }  # fmt: skip


def break_even(gain: float, extra: float, n_test: int) -> float:
    """Extra cost per record / gain per held-out record, only where a trade exists: paying more for
    a gain, or paying less for a loss. NaN for dominated or dominating rows (no trade: a negative
    break-even would read as a price)."""
    if not gain or not n_test or math.isnan(extra) or (gain > 0) != (extra > 0) or extra == 0:
        return math.nan
    return extra / (gain / n_test)


def _against_baseline(table: pd.DataFrame, boot: dict[str, np.ndarray], base: str, n_test: int, cost_measure: str) -> None:
    b = table.index[table["candidate"] == base][0]
    gains, lows, highs, extras, breaks, verdicts = [], [], [], [], [], []
    for i, name in enumerate(table["candidate"]):
        gain = float(table.at[i, "net_true"] - table.at[b, "net_true"])
        low, high = prediction_interval(gain, boot[name] - boot[base])
        extra = float(table.at[i, "cost"] - table.at[b, "cost"])
        per_fact = break_even(gain, extra, n_test)
        gains.append(gain)
        lows.append(float(low))
        highs.append(float(high))
        extras.append(extra)
        breaks.append(per_fact)
        verdicts.append("baseline" if name == base else verdict(gain, extra, per_fact, base, cost_measure, (low, high)))
    table["gain"], table["gain_ci_low"], table["gain_ci_high"] = gains, lows, highs
    table["extra_cost_per_record"], table["break_even_per_fact"], table["verdict"] = extras, breaks, verdicts


def _check(names: Sequence[str], cost_measure: str, n_boot: int, cpu_dollars_per_hour: float) -> None:
    if cost_measure not in COST_MEASURES:
        raise InputError("--cost", f"expected one of {', '.join(COST_MEASURES)}, got {cost_measure!r}")
    if not names:
        raise InputError("--submission", "the frontier needs at least one submission")
    if n_boot < 0 or not math.isfinite(cpu_dollars_per_hour) or cpu_dollars_per_hour < 0:
        raise InputError("--n-boot" if n_boot < 0 else "--cpu-dollars-per-hour", "expected a non-negative, finite number")


def frontier_table(
    inputs: Any,  # a reports.tables.Inputs (a higher layer)
    paths: Sequence[str | os.PathLike[str]],
    names: Sequence[str],
    *,
    baseline: str = "",
    cost_measure: str = "dollars",
    cpu_dollars_per_hour: float = DEFAULT_CPU_DOLLARS_PER_HOUR,
    n_boot: int | None = None,
    seed: int = 0,
    records: pd.DataFrame | None = None,
) -> Frontier:
    """The frontier table of the submissions in `inputs` (tables.Inputs); `paths` locate their run
    manifests (`<S without .json>.run.json`, read strictly: a report that shows costs refuses an
    unreadable one; none: no manifests), whose model counts are `contract.records.model_counts`.

    Every submission is graded on test, and that grading is a look in the held-out ledger (the
    entries are `Frontier.looks`). `n_boot` defaults to `stats.DEFAULT_N_BOOT`; `records`: a
    precomputed `record_table` of the corpus (its components decide the intervals)."""
    import numpy as np
    import pandas as pd

    from microctx.contract.records import RunManifest, model_counts, read_manifest
    from microctx.contract.score import grade
    from microctx.grading import slices, stats
    from microctx.grading.ledger import record_report_look

    manifests = [read_manifest(p, strict=True) for p in paths] if paths else [None for _ in names]
    counts = [model_counts(m if m is not None else RunManifest()) for m in manifests]

    n_boot = stats.DEFAULT_N_BOOT if n_boot is None else int(n_boot)
    _check(names, cost_measure, n_boot, cpu_dollars_per_hour)
    base = pick_baseline(names, manifests, baseline)
    records = slices.record_table(inputs.corpus) if records is None else records
    n_records, n_test = len(records), int((records["split"] == "test").sum())
    roots, sizes = test_components(records)
    rows, nets, looks = [], {}, {}
    for name, manifest, count in zip(names, manifests, counts):
        result = grade(inputs.answers, inputs.submissions[name])
        looks[name] = record_report_look(inputs, name, result, "report frontier")  # a grading on test: one look
        facts = slices.facts_frame(result.facts)
        nets[name] = net_true_by_component(facts, records)
        rows.append(_candidate_row(name, result, facts, manifest, count, cpu_dollars_per_hour))
    table = pd.DataFrame(rows)
    table.insert(table.columns.get_loc("wall_seconds"), "records", n_records)
    table.insert(table.columns.get_loc("wall_seconds"), "test_records", n_test)
    boot = bootstrap_net_true(sizes, nets, n_boot, seed)
    reason = corpus_interval_reason(records, stats.DEFAULT_MIN_COMPONENTS, stats.DEFAULT_MIN_N_EFF)
    if reason:  # no beyond-these-records interval: every replicate NaN, so every interval is (NaN, NaN)
        boot = {name: np.full(0, np.nan) for name in boot}
    intervals = [prediction_interval(float(table.at[i, "net_true"]), boot[name]) for i, name in enumerate(names)]
    table["net_true_ci_low"], table["net_true_ci_high"] = [lo for lo, _ in intervals], [hi for _, hi in intervals]
    totals = {"dollars": table["dollars"], "model_dollars": table["model_dollars"], "wall_seconds": table["wall_seconds"],
              "cpu_seconds": table["cpu_seconds"], "model_calls": table["model_calls"],
              "tokens": table["input_tokens"] + table["output_tokens"]}[cost_measure]  # fmt: skip
    table["cost"] = totals / n_records
    table["cost_measure"] = COST_MEASURES[cost_measure]
    table["on_front"] = stats.pareto_front(table["cost"].tolist(), table["net_true"].astype(float).tolist())
    _against_baseline(table, boot, base, n_test, cost_measure)
    beyond = (
        f"no interval: {reason}"
        if reason
        else (
            f"95% prediction interval for a new test set of {len(roots)} split components drawn from components like "
            f"these (observed + difference of two independent cluster-bootstrap totals; n_boot={n_boot}, seed={seed}), "
            f"paired for the gain; assumes components independent and alike, and none in the corpus large enough to "
            f"bring the test set's n_eff below {stats.DEFAULT_MIN_N_EFF:g}"
        )
    )
    method = (f"on these records: net-true = true - false facts on {n_test} held-out records, exact (no interval); "
              f"beyond these records: {beyond}; "
              f"cost: {COST_MEASURES[cost_measure]}, CPU at ${cpu_dollars_per_hour:g}/hour; "
              f"break-even = extra cost per record / gain per held-out record, only where a trade exists")  # fmt: skip
    table["method"] = method
    return Frontier(table[list(FRONTIER_COLUMNS)], base, cost_measure, method, looks)


def write_frontier_csv(frontier: Frontier, path: str | os.PathLike[str]) -> None:
    from microctx._io.atomic import atomic_write
    from microctx._io.csvout import frame_csv_bytes

    atomic_write(path, frame_csv_bytes(frontier.table))
