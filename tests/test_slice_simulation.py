"""Do the slice statistics mean what they say? Simulated submissions on s8f's real records and
components, with known expected values (tests/slice_worlds.py; issue 19).

- Coverage: in the four settings (independent misses, heterogeneous component rates, whole
  components missed, only the giant fails) every F1 interval the table gives covers the true
  expected F1 at 0.90 or more, overall and per slice (allowing the Monte Carlo error of the
  runs), and every slice without an interval says why.
- Like for like: when only fact kinds differ, no record-level slice is called weak.
- Size: the slice-vs-rest test and the paired test of equal expected F1 reject a true null at
  most about 5% of the time (pooled over judged slices), under clustered errors too.
- Power: a label with most of its facts missed is found weak.
- The frontier: the perfect answers' net-true is exactly 4,326 on these records, and its
  beyond-these-records interval covers a new test set's net-true at 0.90 or more.
s8f has about three effective components (one component holds half the test records), so few
of its slices can be judged; the size, like-for-like and power checks therefore also run on the
same records with every record its own component (`per_record_components`), where many are.
Fixed seeds: the counts asserted are reproducible. Larger runs: benchmarks/bench_coverage.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import slice_worlds as W

from microctx.grading import slices

N_BOOT = 500
RUNS = 20


@pytest.fixture(scope="module")
def world(s8f_corpus, s8f_answers):
    return W.make_world(s8f_corpus, s8f_answers)


@pytest.fixture(scope="module")
def records_world(s8f_corpus, s8f_answers, world):
    return W.make_world(s8f_corpus, s8f_answers, W.per_record_components(world.records))


@pytest.mark.slow
@pytest.mark.parametrize("setting", W.SETTINGS)
def test_every_interval_given_covers_the_true_expected_f1(world, s8f_corpus, setting):
    result = W.coverage_runs(world, s8f_corpus, setting, RUNS, N_BOOT)
    given, covered = sum(result["given"].values()), sum(result["covered"].values())
    assert given >= 4 * RUNS  # intervals are given (a few slices every run), so coverage is really tested
    assert covered / given >= W.monte_carlo_floor(0.90, given), (covered, given)
    for key, n in result["given"].items():  # per slice, within its own Monte Carlo error
        assert result["covered"][key] / n >= W.monte_carlo_floor(0.90, n, z=2.5), (key, result["covered"][key], n)


def test_a_slice_without_an_interval_says_why_and_names_its_component(world, s8f_corpus):
    table = W.run_table(world, s8f_corpus, W.draw_misses(world, "independent", W.miss_probability(world, "independent"),
                                                         np.random.default_rng(0)), 0, 200)  # fmt: skip
    scored = table[table["support"] > 0]
    missing = scored[scored["ci_low"].isna()]
    assert len(missing) > 0 and (missing["no_interval_reason"] != "").all() and not missing["estimable"].any()
    assert (scored.loc[scored["ci_low"].notna(), "no_interval_reason"] == "").all()
    overall = table.iloc[0]
    # s8f's test split: 257 components but n_eff about 3, so the overall row gets no interval either
    assert overall["n_components"] == 257 and overall["n_eff"] < 4 and np.isnan(overall["ci_low"])
    giant = f"#{world.records['component'].value_counts().index[0]}"
    assert overall["rests_on"] == giant and giant in overall["no_interval_reason"]
    judged = scored["p_value"].notna()
    assert (scored.loc[~judged, "not_judged_reason"] != "").all() and (scored.loc[judged, "not_judged_reason"] == "").all()


@pytest.mark.slow
def test_record_level_slices_are_compared_like_for_like(records_world, s8f_corpus):
    """Misses depend on the fact kind only (labels 25%, references never): a record-level slice
    with fewer easy reference facts ("without references") is not weak for that alone."""
    p = W.miss_probability(records_world, "kinds")
    record_level = ("state", "body_length", "has_references", "split")
    alarms, judged = 0, []
    for run in range(RUNS):
        miss = W.draw_misses(records_world, "kinds", p, np.random.default_rng(300 + run))
        table = W.run_table(records_world, s8f_corpus, miss, run, N_BOOT)
        rows = table[table["slice_kind"].isin(record_level)]
        judged.append(int(rows["p_value"].notna().sum()))
        alarms += bool(rows["weak"].any())
        assert (rows.loc[rows["p_value"].notna(), "rest_mix"] == slices.STANDARDISED).all()
        # what "not weak" means: every judged slice says what gap it could have found, no other does
        tested = table["p_value"].notna()
        assert table.loc[tested, "min_detectable_gap"].between(0, 1, inclusive="right").all()
        assert table.loc[~tested, "min_detectable_gap"].isna().all() and (table.loc[~tested, "not_judged_reason"] != "").all()
    assert min(judged) >= 6  # with references, without, states, body lengths: really judged
    assert alarms <= 0.05 * RUNS, alarms


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["independent", "heterogeneous", "whole"])
def test_the_slice_against_rest_test_holds_its_size(records_world, s8f_corpus, setting):
    result = W.rest_test_size(records_world, s8f_corpus, setting, RUNS, N_BOOT)
    tests, rejected = sum(result["judged"].values()), sum(result["rejected"].values())
    assert tests >= 20 * RUNS
    assert rejected / tests <= 0.06 + 2 * np.sqrt(0.06 * 0.94 / tests), (rejected, tests)
    assert result["any_weak_runs"] <= 0.10 * RUNS  # Holm: the family-wise rate


@pytest.mark.slow
def test_the_paired_test_of_equal_expected_f1_holds_its_size(records_world, world, s8f_corpus):
    """a misses facts independently, b whole components, both at 10%: equal expected F1, different
    error structure. The equal-F1 test must hold its size; the sign-flip test's null is
    exchangeability (it may reject here, and is not what `significant` reads)."""
    for w, runs in ((records_world, 10), (world, 10)):
        result = W.paired_size(w, s8f_corpus, "independent", "whole", runs, N_BOOT)
        rejected, tests = result["equal_f1"]
        assert tests >= 5 * runs and rejected / tests <= 0.06 + 2 * np.sqrt(0.06 * 0.94 / tests), (rejected, tests)


@pytest.mark.slow
def test_a_planted_weak_label_is_found(records_world, s8f_corpus):
    scored = records_world.scored
    probe = W.run_table(records_world, s8f_corpus, np.zeros(len(scored), dtype=bool), 0, N_BOOT)
    labels = probe[(probe["slice_kind"] == "label") & (probe["support"] >= 40)]["slice"].tolist()[:8]
    assert len(labels) >= 6
    found = 0
    for run, label in enumerate(labels):
        rng = np.random.default_rng(2000 + run)
        planted = ((scored["kind"] == "label") & (scored["value"] == label)).to_numpy()
        miss = np.where(planted, rng.random(len(scored)) < 0.7, rng.random(len(scored)) < 0.02)
        table = W.run_table(records_world, s8f_corpus, miss, run, N_BOOT)
        row = table[(table["slice_kind"] == "label") & (table["slice"] == label)].iloc[0]
        found += bool(row["weak"])
        assert row["min_detectable_gap"] < row["rest_f1"] - row["f1"]  # the gap was detectable, and said so
    assert found >= 0.8 * len(labels), (found, len(labels))


def test_the_frontier_is_exact_on_these_records_and_covers_beyond_them_when_it_says_so(world, records_world):
    """On these records the perfect answers score exactly 4,326. Beyond them, the frontier gives no
    interval where none could cover: s8f's own test set rests on its giant component, and a test
    set drawn from s8f's components either holds the giant or lacks a component the corpus holds
    (a new set drawing it would rest on it). Where it gives one (records as independent
    components, the observed set drawn too), the interval covers a new test set's net-true."""
    from microctx.grading import frontier

    nets = frontier.net_true_by_component(world.scored, world.records)
    assert nets.sum() == 4326  # the perfect answers: every gold fact, exactly (on these records)
    for kw in ({"fixed_observed": True}, {}):
        refused = W.frontier_coverage(world, 100, 200, **kw)
        assert refused["fired"] == refused["runs"] and refused["printed"] == 0, (kw, refused)
    given = W.frontier_coverage(records_world, 200, 400)
    assert given["printed"] == given["runs"]  # the rule does not fire where nothing dominates
    assert given["covered"] / given["printed"] >= W.monte_carlo_floor(0.90, given["printed"]), given
