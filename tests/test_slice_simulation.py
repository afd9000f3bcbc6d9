"""Does `weak` mean weak? Simulated submissions on the real s8f records and components.

- Null: misses equally likely in every slice, either independently per fact or through a
  per-component miss propensity (facts of one split component fail together). Any weak slice
  is then a false alarm; issue 9 allows them in at most 5-10% of runs (it was 93-96% before).
- Planted: one label with most of its facts missed and everything else nearly perfect; the
  label must be found weak in at least 80% of runs.
The runs use 2,000 resamples (p-values down to 1/2001, below Holm's smallest threshold for the
~40 judged slices) and fixed seeds, so the counts asserted here are reproducible.
"""

from __future__ import annotations

import numpy as np
import pytest

from microctx.contract.facts import FACT_KINDS
from microctx.contract.score import grade
from microctx.grading import slices

N_BOOT = 2000
NULL_RUNS = 40
MISS_RATE = 0.10


@pytest.fixture(scope="module")
def world(s8f_corpus, s8f_answers):
    records = slices.record_table(s8f_corpus)
    oracle = slices.facts_frame(grade(s8f_answers, s8f_answers).facts)
    scored = oracle[oracle["kind"].isin(FACT_KINDS)].reset_index(drop=True)
    assert (scored["outcome"] == "tp").all()
    component = scored["record_id"].map(dict(zip(records["id"], records["component"]))).to_numpy()
    return records, scored, component


def _table(world, corpus, miss: np.ndarray, seed: int):
    records, scored, _ = world
    facts = scored.copy()
    facts.loc[miss, "outcome"] = "fn"
    return slices.slice_table(facts, corpus, records=records, n_boot=N_BOOT, seed=seed)


def _independent_misses(world, rng):
    return rng.random(len(world[1])) < MISS_RATE


def _component_misses(world, rng):
    """Each component draws a miss propensity (Beta(0.5, 4.5): mean 0.1, many near 0, some
    near 1); its facts are missed with that propensity. Still equal in every slice on average."""
    component = world[2]
    roots, index = np.unique(component, return_inverse=True)
    propensity = rng.beta(0.5, 4.5, size=len(roots))
    return rng.random(len(component)) < propensity[index]


@pytest.mark.slow
@pytest.mark.parametrize("make_misses", [_independent_misses, _component_misses], ids=["independent", "by-component"])
def test_equal_miss_rates_rarely_give_a_weak_slice(world, s8f_corpus, make_misses):
    alarms, judged = [], []
    for run in range(NULL_RUNS):
        rng = np.random.default_rng(1000 + run)
        table = _table(world, s8f_corpus, make_misses(world, rng), seed=run)
        judged.append(int(table["p_value"].notna().sum()))
        if table["weak"].any():
            alarms.append(table.loc[table["weak"], ["slice_kind", "slice"]].to_numpy().tolist())
    assert min(judged) >= 25  # dozens of slices judged per run: multiplicity is really at stake
    assert len(alarms) <= 0.10 * NULL_RUNS, alarms


@pytest.mark.slow
def test_a_planted_weak_label_is_found(world, s8f_corpus):
    _, scored, _ = world
    probe = _table(world, s8f_corpus, _independent_misses(world, np.random.default_rng(0)), seed=0)
    candidates = probe[(probe["slice_kind"] == "label") & probe["p_value"].notna()]["slice"].tolist()
    assert len(candidates) >= 12  # every label that can be judged, large and small
    found, others = 0, []
    for run, label in enumerate(candidates):
        rng = np.random.default_rng(2000 + run)
        planted = ((scored["kind"] == "label") & (scored["value"] == label)).to_numpy()
        miss = np.where(planted, rng.random(len(scored)) < 0.7, rng.random(len(scored)) < 0.02)
        table = _table(world, s8f_corpus, miss, seed=run)
        weak_labels = set(table.loc[table["weak"] & (table["slice_kind"] == "label"), "slice"])
        found += label in weak_labels
        others += sorted(weak_labels - {label})
    assert found >= 0.8 * len(candidates), (found, len(candidates))
    assert len(others) <= 1, others  # the other labels (2% misses) are not dragged along
