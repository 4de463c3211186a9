"""Branch and bound (Krushevskaja & Sandler 2013): optimal with an unlimited budget."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tracesleuth.analyses.patterns._bitsets import PatternEvaluator
from tracesleuth.analyses.patterns.bnb import branch_and_bound

from ._planted import N_BINS, planted_problem


def _brute_force_best(ev: PatternEvaluator, first: int, last: int) -> float:
    """Best F over every conjunction of single-bin conditions, at most one per attribute."""
    options = [[-1, *range(int(b))] for b in ev.n_bins]
    patterns = np.array(list(itertools.product(*options)))
    patterns = patterns[(patterns >= 0).any(axis=1)]
    lo = patterns
    hi = np.where(patterns >= 0, patterns + 1, -1)
    counts = ev.class_counts(lo, hi)
    tp = counts[:, first + 1 : last + 1].sum(axis=1)
    n_pos = ev.class_sizes[first + 1 : last + 1].sum()
    f = np.where(tp > 0, 2 * tp / (counts.sum(axis=1) + n_pos), 0.0)
    return float(f.max())


@pytest.mark.parametrize("seed", range(15))
def test_exhaustive_bnb_is_optimal(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(20, 400)), int(rng.integers(1, 5))
    n_bins = rng.integers(1, 4, size=m)
    codes = np.stack([rng.integers(-1, n_bins[j], size=n) for j in range(m)], axis=1)
    # a weak planted signal so that the optimum is not trivial
    latency_class = np.where((codes[:, 0] == 0) & (rng.random(n) < 0.8), 1, rng.integers(0, 4, size=n))
    ev = PatternEvaluator(codes, n_bins, latency_class, 4)
    for first, last in [(0, 1), (0, 2), (1, 2)]:
        (res,) = branch_and_bound(ev, [(first, last)], max_nodes=None)
        assert res.exhaustive
        assert res.f_score == pytest.approx(_brute_force_best(ev, first, last), abs=1e-12)
        if res.tp:
            assert np.all(res.hi[res.lo >= 0] == res.lo[res.lo >= 0] + 1)  # single bins only


@pytest.mark.parametrize("seed", [0, 1])
def test_bnb_recovers_planted_single_bin_pattern(seed):
    # attr1 = bin 3 and attr4 = value 2
    ev, planted_f, _ = planted_problem(seed, planted_lo=[-1, 3, -1, -1, 2, -1], planted_hi=[-1, 4, -1, -1, 3, -1], flip=0.003)
    assert planted_f >= 0.95
    (res,) = branch_and_bound(ev, [(0, 1)], max_nodes=None)
    assert res.exhaustive and res.f_score >= planted_f - 1e-12 and res.f_score >= 0.95
    assert res.lo[1] == 3 and res.lo[4] == 2


def test_budget_stops_search_and_says_so():
    ev, _, _ = planted_problem(3, planted_lo=[-1, 3, -1, -1, 2, -1], planted_hi=[-1, 4, -1, -1, 3, -1], flip=0.2)
    (res,) = branch_and_bound(ev, [(0, 1)], max_nodes=1)
    assert not res.exhaustive
    assert res.f_score > 0  # the best single condition found at the root
    (res_t,) = branch_and_bound(ev, [(0, 1)], max_nodes=None, time_budget_s=1e-9)
    assert not res_t.exhaustive


def test_no_positive_gives_empty_result():
    codes = np.zeros((5, 1), dtype=int)
    ev = PatternEvaluator(codes, np.array([1]), np.zeros(5, dtype=int), 3)
    (res,) = branch_and_bound(ev, [(0, 1)])
    assert res.tp == 0 and res.f_score == 0.0 and res.exhaustive and np.all(res.lo == -1)
    assert N_BINS.size == 6  # the shared problem's layout is what the planted tests assume


@pytest.mark.parametrize("max_nodes", [None, 5])
def test_searches_in_lockstep_equal_searches_alone(max_nodes):
    """Run together (children of shared nodes counted once), each search visits what it visits alone."""
    ev, _, _ = planted_problem(4, planted_lo=[-1, 2, -1, -1, 2, -1], planted_hi=[-1, 4, -1, -1, 3, -1], flip=0.1)
    pairs = [(0, 1), (0, 2), (1, 2)]
    together = branch_and_bound(ev, pairs, max_nodes=max_nodes)
    for pair, res in zip(pairs, together):
        (alone,) = branch_and_bound(ev, [pair], max_nodes=max_nodes)
        np.testing.assert_array_equal(res.lo, alone.lo)
        np.testing.assert_array_equal(res.hi, alone.hi)
        assert (res.f_score, res.n_evaluated, res.exhaustive) == (alone.f_score, alone.n_evaluated, alone.exhaustive)
