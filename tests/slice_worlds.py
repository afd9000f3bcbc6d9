"""Simulated submissions on s8f's real records and components, with known expected values.

A *world* is the oracle's fact table (every fact a tp) plus, per fact, a miss probability and a
way of drawing misses. The true expected value of a slice is the ratio of expectations over
the world's outcomes (no false positives are planted, so recall r = E[tp] / gold and
F1 = 2r / (1 + r)). The four settings of issue 19:
- `independent`: every fact missed with probability 0.1, independently;
- `heterogeneous`: each component has its own miss rate (Beta(0.5, 4.5), mean 0.1, drawn once
  per world), facts missed independently at their component's rate;
- `whole`: each component missed as a whole with probability 0.1;
- `giant`: only the largest component fails, as a whole, with probability 0.3.
Plus `kinds`: misses depend on the fact kind only (independent per fact).

Used by tests/test_slice_simulation.py (few runs) and benchmarks/bench_coverage.py (many).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from microctx.contract.facts import FACT_KINDS
from microctx.contract.score import grade
from microctx.grading import counts as counting
from microctx.grading import slices

SETTINGS = ("independent", "heterogeneous", "whole", "giant")
KIND_RATES = {"state": 0.02, "label": 0.25, "ref": 0.0, "dup": 0.1, "contradiction": 0.1}


@dataclass
class World:
    records: pd.DataFrame
    scored: pd.DataFrame  # the oracle's scored facts (all tp)
    component: np.ndarray  # component index per fact
    n_components: int
    giant: int  # component index holding the most facts
    masks: np.ndarray  # (slices, facts): which facts each slice of the table holds
    keys: list[tuple[str, str]]  # (slice_kind, slice) per mask row


def make_world(corpus, answers, records: pd.DataFrame | None = None) -> World:
    """The oracle's facts on `corpus` with the slice masks of `slice_table` (records: a
    record_table, possibly with its `component` column replaced)."""
    records = slices.record_table(corpus) if records is None else records
    oracle = slices.facts_frame(grade(answers, answers).facts)
    scored = oracle[oracle["kind"].isin(FACT_KINDS)].reset_index(drop=True)
    prepared = counting.prepare(scored, records, "oracle")
    specs = counting.slice_specs([prepared], records, ())
    index, n = counting.scored_components([prepared], records)
    component = index[prepared.record]
    masks = np.array([prepared.mask(s) for s in specs])
    giant = int(np.bincount(component, minlength=n).argmax())
    return World(records, scored, component, n, giant, masks, [(s.kind, s.name) for s in specs])


def miss_probability(world: World, setting: str, seed: int = 0) -> np.ndarray:
    """Per fact, its probability of being missed in `setting` (fixed for the world)."""
    n_facts = len(world.scored)
    if setting in ("independent", "whole"):
        return np.full(n_facts, 0.1)
    if setting == "heterogeneous":
        rates = np.random.default_rng(seed).beta(0.5, 4.5, size=world.n_components)
        return rates[world.component]
    if setting == "giant":
        return np.where(world.component == world.giant, 0.3, 0.0)
    if setting == "kinds":
        return world.scored["kind"].map(KIND_RATES).to_numpy(dtype=np.float64)
    raise ValueError(setting)


def draw_misses(world: World, setting: str, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One run's missed facts (bool per fact)."""
    if setting in ("whole", "giant"):
        per_component = np.zeros(world.n_components)
        np.maximum.at(per_component, world.component, p)
        failed = rng.random(world.n_components) < per_component
        return failed[world.component]
    return rng.random(len(world.scored)) < p


def true_f1(world: World, p: np.ndarray) -> pd.Series:
    """Each slice's expected F1 (ratio of expectations), indexed by (slice_kind, slice)."""
    gold = world.masks.sum(axis=1).astype(np.float64)
    expected_tp = world.masks @ (1 - p)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(gold > 0, expected_tp / np.where(gold > 0, gold, 1), np.nan)
    return pd.Series(2 * recall / (1 + recall), index=pd.MultiIndex.from_tuples(world.keys))


def facts_with(world: World, miss: np.ndarray) -> pd.DataFrame:
    facts = world.scored.copy()
    facts.loc[miss, "outcome"] = "fn"
    return facts


def run_table(world: World, corpus, miss: np.ndarray, seed: int, n_boot: int, **kw) -> pd.DataFrame:
    return slices.slice_table(facts_with(world, miss), corpus, records=world.records, n_boot=n_boot, seed=seed, **kw)


def coverage_runs(world: World, corpus, setting: str, runs: int, n_boot: int, seed: int = 0, **kw) -> dict:
    """Per slice: how many runs gave an F1 interval, and how many of those covered the truth;
    plus the runs in which any slice was called weak although its truth is not below its rest's."""
    p = miss_probability(world, setting, seed)
    truth = true_f1(world, p)
    given: dict = {}
    covered: dict = {}
    by_n_eff: list[tuple[float, int]] = []
    false_weak = 0
    for run in range(runs):
        rng = np.random.default_rng(10_000 * seed + run)
        table = run_table(world, corpus, draw_misses(world, setting, p, rng), run, n_boot, **kw)
        table = table.set_index(["slice_kind", "slice"])
        rows = table[table["ci_low"].notna()]
        for key, row in rows.iterrows():
            hit = int(row["ci_low"] - 1e-9 <= truth[key] <= row["ci_high"] + 1e-9)
            given[key] = given.get(key, 0) + 1
            covered[key] = covered.get(key, 0) + hit
            by_n_eff.append((float(row["n_eff"]), hit))
        false_weak += bool(table["weak"].any()) and setting != "giant"
    return {"given": given, "covered": covered, "false_weak_runs": false_weak, "runs": runs, "by_n_eff": by_n_eff}


def null_misses(world: World, setting: str, rng: np.random.Generator) -> np.ndarray:
    """Misses with the same expected rate (0.1) for every fact: `heterogeneous` redraws the
    component rates each run (so no slice is worse in expectation)."""
    p = miss_probability(world, setting, int(rng.integers(1 << 30))) if setting == "heterogeneous" else None
    return draw_misses(world, setting, miss_probability(world, setting) if p is None else p, rng)


def rest_test_size(world: World, corpus, setting: str, runs: int, n_boot: int) -> dict:
    """Under the null (every slice equally good in expectation): per judged slice, the share of
    runs with an unadjusted p_value below 0.05 (the test's size), and runs with any weak slice.
    `giant` is no null for slices holding a fact of the giant component (they are worse in
    expectation), so there only the slices without one count (their null holds: they are
    perfect in every run)."""
    rejected: dict = {}
    judged: dict = {}
    any_weak = 0
    counted = None
    if setting == "giant":
        clear = ~(world.masks[:, world.component == world.giant]).any(axis=1)
        counted = {key for key, ok in zip(world.keys, clear) if ok}
    for run in range(runs):
        rng = np.random.default_rng(50_000 + run)
        miss = (
            draw_misses(world, setting, miss_probability(world, setting), rng)
            if counted is not None
            else null_misses(world, setting, rng)
        )
        table = run_table(world, corpus, miss, run, n_boot).set_index(["slice_kind", "slice"])
        tested = table[table["p_value"].notna()]
        for key, p in tested["p_value"].items():
            if counted is not None and key not in counted:
                continue
            judged[key] = judged.get(key, 0) + 1
            rejected[key] = rejected.get(key, 0) + int(p < 0.05)
        any_weak += bool(table.loc[[k for k in table.index if counted is None or k in counted], "weak"].any())
    return {"judged": judged, "rejected": rejected, "any_weak_runs": any_weak, "runs": runs}


def paired_size(world: World, corpus, setting_a: str, setting_b: str, runs: int, n_boot: int) -> dict:
    """Two candidates with equal expected F1 in every slice (miss rate 0.1 per fact) but possibly
    different error structure: per judged slice, how often each paired test rejects at 0.05."""
    out = {"equal_f1": [0, 0], "sign_flip": [0, 0]}
    for run in range(runs):
        rng = np.random.default_rng(70_000 + run)
        a = facts_with(world, null_misses(world, setting_a, rng))
        b = facts_with(world, null_misses(world, setting_b, rng))
        table = slices.paired_comparison(a, b, corpus, records=world.records, n_boot=n_boot, seed=run)
        for column, name in (("p_equal_f1", "equal_f1"), ("p_value", "sign_flip")):
            tested = table[column].dropna()
            out[name][0] += int((tested < 0.05).sum())
            out[name][1] += len(tested)
    return out


def frontier_coverage(
    world: World,
    runs: int,
    n_boot: int,
    miss_rate: float = 0.0,
    seed: int = 0,
    fixed_observed: bool = False,
    without_giant: bool = False,
) -> dict:
    """Does the frontier's beyond-these-records interval, when it gives one, cover a new test
    set's net-true? And does it give none where it cannot?

    The population is s8f's test components (`without_giant`: all but the largest); an observed
    and a new test set each draw as many components with replacement; the candidate misses each
    fact with `miss_rate` (0: the perfect answers, net-true = gold facts). The frontier's rule
    (`frontier.interval_reason`, gold facts per component, the population as the corpus) decides
    whether the observed set gets an interval; `printed` counts the runs that got one, `covered`
    those whose interval holds the new set's net-true, `fired` the runs the rule refused.
    `fixed_observed`: the observed set is s8f's own test set; else it is a draw too.
    """
    from microctx.grading import frontier, stats

    rng = np.random.default_rng(seed)
    test = np.unique(world.component)
    gold = np.bincount(world.component, minlength=world.n_components).astype(np.float64)[test]
    if without_giant:
        keep = test != world.giant
        test, gold = test[keep], gold[keep]
    g = len(test)
    covered = printed = fired = 0
    for run in range(runs):
        observed = np.arange(g) if fixed_observed else rng.integers(0, g, g)
        new = rng.integers(0, g, g)
        net_observed = rng.binomial(gold[observed].astype(np.int64), 1 - miss_rate).astype(np.float64)
        net_new = rng.binomial(gold[new].astype(np.int64), 1 - miss_rate).sum()
        reason = frontier.interval_reason(
            gold[observed], observed, gold, np.arange(g),
            min_components=stats.DEFAULT_MIN_COMPONENTS, min_n_eff=stats.DEFAULT_MIN_N_EFF,
        )  # fmt: skip
        if reason:
            fired += 1
            continue
        boot = frontier.bootstrap_net_true(np.ones(g), {"c": net_observed}, n_boot, seed=run)["c"]
        low, high = frontier.prediction_interval(float(net_observed.sum()), boot)
        printed += 1
        covered += int(low <= net_new <= high)
    return {"covered": covered, "printed": printed, "fired": fired, "runs": runs}


def monte_carlo_floor(target: float, n: int, z: float = 2.0) -> float:
    """The lowest observed coverage consistent with a true `target` over n runs (z standard errors)."""
    return target - z * np.sqrt(target * (1 - target) / max(n, 1))


def per_record_components(records: pd.DataFrame) -> pd.DataFrame:
    """The same records with every record its own component (a world of many independent units)."""
    out = records.copy()
    out["component"] = out["number"]
    out["component_size"] = 1
    return out
