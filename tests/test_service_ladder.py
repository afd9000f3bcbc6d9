"""The Ladder's standard error, its decisions, the rank groups' paired test, and the split,
against independent implementations and by simulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from microctx.service import ladder, leaderboard


def _planted(rng, n_components: int = 60, max_size: int = 8):
    sizes = rng.integers(1, max_size + 1, n_components)
    component = np.repeat(np.arange(n_components), sizes)
    return component, np.ones(len(component), dtype=bool)


def _linearised_se(new, best, component, n_components) -> float:
    """The textbook cluster (ratio-estimator) standard error of rate(new) - rate(best), written
    independently of the bootstrap: sqrt(sum_c (d_c - D n_c)^2) / N with D the observed difference."""
    d = np.bincount(component, weights=new.astype(float) - best.astype(float), minlength=n_components)
    n = np.bincount(component, minlength=n_components).astype(float)
    difference = d.sum() / n.sum()
    return float(np.sqrt(((d - difference * n) ** 2).sum()) / n.sum())


def test_the_paired_standard_error_matches_the_linearised_cluster_formula():
    rng = np.random.default_rng(7)
    for trial in range(5):
        component, mask = _planted(rng)
        best = rng.random(len(component)) < 0.6
        new = best.copy()
        flip = rng.random(len(component)) < 0.15
        new[flip] = ~new[flip]
        se = ladder.paired_standard_error(new, best, component, mask, 60)
        assert se == pytest.approx(_linearised_se(new, best, component, 60), rel=0.08), trial


def test_identical_submissions_have_no_spread_and_are_not_released():
    rng = np.random.default_rng(1)
    component, mask = _planted(rng)
    exact = rng.random(len(component)) < 0.5
    rate = float(exact.mean())
    assert ladder.paired_standard_error(exact, exact, component, mask, 60) == 0.0
    best = ladder.Best(ladder.released_value(rate), rate, exact)
    decision = ladder.decide(rate, exact, best, component, mask, 60)
    assert decision.decision == ladder.NOT_SIGNIFICANT and decision.released == best.released
    assert ladder.decide(rate, exact, None, component, mask, 60).decision == ladder.FIRST
    off = ladder.decide(0.12345, exact, best, component, mask, 60, ladder=False)
    assert (off.decision, off.released) == (ladder.LADDER_OFF, 0.123)


def test_under_the_null_the_ladder_releases_about_one_step_in_six():
    """A new submission that differs from the best by exchangeable noise beats it by more than one
    standard error with probability about P(Z > 1) = 0.16 (the normal approximation)."""
    rng = np.random.default_rng(3)
    component, mask = _planted(rng, n_components=80)
    released = 0
    trials = 300
    for _ in range(trials):
        truth = rng.random(len(component)) < 0.5
        a, b = truth.copy(), truth.copy()
        for vector in (a, b):
            flip = rng.random(len(component)) < 0.2
            vector[flip] = ~vector[flip]
        best = ladder.Best(ladder.released_value(b.mean()), float(b.mean()), b)
        released += ladder.decide(float(a.mean()), a, best, component, mask, 80).is_release
    assert 0.09 < released / trials < 0.24


def test_a_clear_improvement_is_released_rounded():
    rng = np.random.default_rng(5)
    component, mask = _planted(rng)
    best_exact = rng.random(len(component)) < 0.4
    better = best_exact | (rng.random(len(component)) < 0.5)
    best = ladder.Best(ladder.released_value(best_exact.mean()), float(best_exact.mean()), best_exact)
    decision = ladder.decide(float(better.mean()), better, best, component, mask, 60)
    assert decision.decision == ladder.IMPROVED and decision.released == round(float(better.mean()), 3)
    assert decision.threshold > 0 and decision.best_before == best.raw


def _enumerated_p(delta: np.ndarray) -> float:
    observed = abs(delta.sum())
    flips = [abs(sum(s * d for s, d in zip(signs, delta))) for signs in itertools.product((1, -1), repeat=len(delta))]
    return float(np.mean([f >= observed - 1e-12 for f in flips]))


class _Comp:
    def __init__(self, component, n):
        self.component, self.n_components = component, n


def test_the_rank_groups_paired_test_is_the_enumerated_sign_flip_test():
    rng = np.random.default_rng(11)
    component = np.repeat(np.arange(10), 3)
    mask = np.ones(30, dtype=bool)
    comp = _Comp(component, 10)
    for _ in range(5):
        a, b = rng.random(30) < 0.6, rng.random(30) < 0.5
        delta = np.bincount(component, weights=a.astype(float) - b.astype(float), minlength=10)
        assert leaderboard.paired_p_value(a, b, comp, mask) == pytest.approx(_enumerated_p(delta[delta != 0]))


def test_the_paired_test_is_mcnemars_when_every_component_is_one_record():
    from scipy.stats import binomtest

    rng = np.random.default_rng(2)
    component = np.arange(200)
    comp = _Comp(component, 200)
    a, b = rng.random(200) < 0.55, rng.random(200) < 0.45
    b01, b10 = int((a & ~b).sum()), int((~a & b).sum())
    exact = binomtest(min(b01, b10), b01 + b10, 0.5).pvalue
    assert leaderboard.paired_p_value(a, b, comp, np.ones(200, dtype=bool)) == pytest.approx(exact, abs=0.02)


def test_the_split_keeps_components_whole_depends_on_the_secret_and_halves_them(s8f, tmp_path):
    import secrets

    from service_support import private_answers

    from microctx.service.competition import is_public, load_competition

    answers = private_answers(s8f.answers, tmp_path)
    one, two = (load_competition(answers, s8f.public, secrets.token_hex(32)) for _ in range(2))
    for comp in (one, two):
        for c in range(comp.n_components):
            assert len(set(comp.public[comp.component == c])) == 1  # a component is wholly public or private
    assert not np.array_equal(one.public, two.public)
    shares = [np.mean([is_public(secrets.token_hex(32), key) for key in range(400)]) for _ in range(20)]
    assert 0.45 < float(np.mean(shares)) < 0.55
