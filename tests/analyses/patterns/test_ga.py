"""The genetic algorithm (Section 3.1): operators, planted pattern recovery, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from tracesleuth.analyses.patterns.ga import GASettings, _Space, _tournament, genetic_search

from ._planted import CATEGORICAL, N_BINS, planted_problem

# attr1 in [bins 2, 4) (a range of two mean-shift bins) and the categorical attr4 = value 2
PLANTED_LO = [-1, 2, -1, -1, 2, -1]
PLANTED_HI = [-1, 4, -1, -1, 3, -1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ga_recovers_planted_pattern(seed):
    ev, planted_f, _ = planted_problem(seed, planted_lo=PLANTED_LO, planted_hi=PLANTED_HI)
    assert planted_f >= 0.95
    (res,) = genetic_search(ev, CATEGORICAL, [(0, 1)], settings=GASettings(generations=150), random_state=seed)
    assert res.f_score >= planted_f - 1e-12  # as good as the planted pattern (or better on the noise)
    assert res.f_score >= 0.95
    assert res.lo[1] == 2 and res.hi[1] == 4 and res.lo[4] == 2  # the planted conditions themselves
    assert res.history[-1] == res.f_score and np.all(np.diff(res.history) >= 0)
    assert res.tp + res.fp == res.class_counts.sum() and res.tp == res.class_counts[1]


def test_ga_several_sub_intervals_at_once():
    ev, planted_f, _ = planted_problem(5, planted_lo=PLANTED_LO, planted_hi=PLANTED_HI)
    results = genetic_search(ev, CATEGORICAL, [(0, 1), (0, 2), (1, 2)], settings=GASettings(generations=100),
                             random_state=3)
    assert [(r.first, r.last) for r in results] == [(0, 1), (0, 2), (1, 2)]
    assert results[0].f_score >= planted_f - 1e-12
    for r in results:
        assert r.n_positives == int(ev.class_sizes[r.first + 1 : r.last + 1].sum())
        assert 0.0 <= r.f_score <= 1.0


def test_ga_same_seed_same_result_different_seed_runs():
    ev, _, _ = planted_problem(7, planted_lo=PLANTED_LO, planted_hi=PLANTED_HI, flip=0.05)
    settings = GASettings(generations=60)
    a = genetic_search(ev, CATEGORICAL, [(0, 1), (1, 2)], settings=settings, random_state=11)
    b = genetic_search(ev, CATEGORICAL, [(0, 1), (1, 2)], settings=settings, random_state=11)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.lo, y.lo)
        np.testing.assert_array_equal(x.hi, y.hi)
        np.testing.assert_array_equal(x.history, y.history)
        assert x.f_score == y.f_score
    c = genetic_search(ev, CATEGORICAL, [(0, 1), (1, 2)], settings=settings, random_state=12)
    assert all(r.f_score > 0 for r in c)


def test_ga_zero_generations_and_one_attribute():
    ev, _, _ = planted_problem(1, planted_lo=PLANTED_LO, planted_hi=PLANTED_HI)
    (res,) = genetic_search(ev, CATEGORICAL, [(0, 1)], settings=GASettings(generations=0), random_state=0)
    assert res.history.shape == (1,) and res.f_score > 0


def _valid(lo, hi, n_bins, categorical):
    absent = lo < 0
    assert np.all(hi[absent] == -1)
    present = ~absent
    nb = np.broadcast_to(n_bins, lo.shape)
    cat = np.broadcast_to(categorical, lo.shape)
    assert np.all(lo[present] < hi[present]) and np.all(hi[present] <= nb[present]) and np.all(lo[present] >= 0)
    assert np.all(hi[present & cat] == lo[present & cat] + 1)


def test_operators_keep_individuals_valid():
    rng = np.random.default_rng(0)
    space = _Space(N_BINS, CATEGORICAL, rng)
    ids = space.initial((500,), 2)
    lo, hi = space.decode(ids)
    _valid(lo, hi, N_BINS, CATEGORICAL)
    np.testing.assert_array_equal(space.encode(lo, hi), ids)  # ids and code ranges are one to one
    assert np.all((lo >= 0).sum(axis=1) == 2)
    for _ in range(50):
        ids = space.mutate(ids)
        lo, hi = space.decode(ids)
        _valid(lo, hi, N_BINS, CATEGORICAL)
        np.testing.assert_array_equal(space.encode(lo, hi), ids)
    ids2 = space.initial((500,), 3)
    child = space.crossover(ids, ids2)
    clo, chi = space.decode(child)
    _valid(clo, chi, N_BINS, CATEGORICAL)
    # union and split: every condition of the child comes from a parent, on the same attribute
    assert np.all((child == 0) | (child == ids) | (child == ids2))
    # a condition that only one parent has is kept by the first child about half the time
    only_first = (ids > 0) & (ids2 == 0)
    kept = (child > 0)[only_first].mean()
    assert 0.4 < kept < 0.6
    # of two different conditions on one attribute, the child keeps one, each about half the time
    conflict = (ids > 0) & (ids2 > 0) & (ids != ids2)
    assert np.all(child[conflict] > 0) and 0.4 < (child == ids)[conflict].mean() < 0.6


def test_every_condition_has_an_id_and_random_conditions_are_uniform():
    space = _Space(N_BINS, CATEGORICAL, np.random.default_rng(2))
    for j, nb in enumerate(N_BINS):
        n = space.n_conditions[j]
        assert n == (nb if CATEGORICAL[j] else nb * (nb + 1) // 2)
        draws = space.random_conditions(np.full(20000, j))
        freq = np.bincount(draws, minlength=n + 1)[1:] / draws.size
        assert freq.min() > 0.8 / n and freq.max() < 1.2 / n


def test_tournament_has_the_distribution_of_drawn_aspirants():
    """The sampled winner's law equals that of running tournaments (best drawn, first drawn among equals)."""
    rng = np.random.default_rng(3)
    f = np.array([[0.2, 0.9, 0.5, 0.9, 0.1, 0.5, 0.0, 0.9]])
    size, n_draws = 3, 200000
    sampled = np.bincount(_tournament(np.repeat(f, 50, axis=0), n_draws // 50, size, rng).ravel(), minlength=8)
    aspirants = rng.integers(0, f.shape[1], size=(n_draws, size))
    ran = np.bincount(aspirants[np.arange(n_draws), f[0, aspirants].argmax(axis=1)], minlength=8)
    np.testing.assert_allclose(sampled / n_draws, ran / n_draws, atol=0.005)


def test_mutation_kinds_all_happen():
    rng = np.random.default_rng(1)
    space = _Space(N_BINS, CATEGORICAL, rng)
    ids = space.initial((3000,), 2)
    mutated = space.mutate(ids)
    n_before, n_after = (ids > 0).sum(axis=1), (mutated > 0).sum(axis=1)
    assert (n_after == n_before + 1).any()  # add
    assert (n_after == n_before - 1).any()  # remove
    modified = (n_after == n_before) & (mutated != ids).any(axis=1)
    assert modified.any()  # modify


def test_patience_freezes_settled_populations():
    ev, planted_f, _ = planted_problem(5, planted_lo=PLANTED_LO, planted_hi=PLANTED_HI)
    pairs = [(0, 1), (0, 2), (1, 2)]
    full = genetic_search(ev, CATEGORICAL, pairs, settings=GASettings(generations=300), random_state=3)
    quick = genetic_search(ev, CATEGORICAL, pairs, settings=GASettings(generations=300, patience=30),
                           random_state=3)
    assert quick[0].f_score >= planted_f - 1e-12
    for q, f in zip(quick, full):
        assert q.history.shape == f.history.shape and np.all(np.diff(q.history) >= 0)
        assert q.history[-1] == q.f_score and q.f_score >= f.f_score - 0.05
        stalled = np.flatnonzero(np.diff(q.history) > 0)
        assert stalled.size == 0 or 300 - stalled[-1] >= 30  # it ran at least `patience` past its last gain
    # no patience: the paper's search, every generation (the default)
    assert GASettings().patience is None


@pytest.mark.parametrize("cache", ["sorted", "hashed", "counted by class_counts"])
def test_every_fitness_cache_gives_the_same_search(monkeypatch, cache):
    """Dense index, sorted keys and checked hashes (spaces beyond an int64) only change how repeats are
    found; the conditions' tabled bit strings only how new genomes are counted."""
    from tracesleuth.analyses.patterns import ga

    ev, _, _ = planted_problem(6, planted_lo=PLANTED_LO, planted_hi=PLANTED_HI, flip=0.05)
    settings = GASettings(generations=40)
    dense = genetic_search(ev, CATEGORICAL, [(0, 1), (1, 2)], settings=settings, random_state=5)
    if cache == "counted by class_counts":
        monkeypatch.setattr(ga, "_CONDITION_BITS_BYTES", 0)
    else:
        monkeypatch.setattr(ga, "_DENSE_KEYS", 0)
    if cache == "hashed":
        monkeypatch.setattr(ga, "_MAX_KEY_BITS", 0)
    other = genetic_search(ev, CATEGORICAL, [(0, 1), (1, 2)], settings=settings, random_state=5)
    for x, y in zip(dense, other):
        np.testing.assert_array_equal(x.lo, y.lo)
        np.testing.assert_array_equal(x.history, y.history)
        assert x.n_evaluated == y.n_evaluated


def test_hash_collisions_are_counted_apart(monkeypatch):
    """Genomes whose hashed keys collide keep their own scores."""
    from tracesleuth.analyses.patterns import ga

    ev, _, _ = planted_problem(2, planted_lo=PLANTED_LO, planted_hi=PLANTED_HI)
    monkeypatch.setattr(ga, "_MAX_KEY_BITS", 0)
    space = ga._Space(ev.n_bins, CATEGORICAL, np.random.default_rng(0))
    scores = ga._Scores(ev, space, np.array([0]), np.array([1]), np.array([int(ev.class_sizes[1])]), np.zeros(1))
    scores.weights = np.zeros_like(scores.weights)  # every key collides
    ids = space.initial((40,), 2)
    rows = scores(ids)
    rows_again = scores(ids[::-1])
    lo, hi = space.decode(ids)
    counts = ev.class_counts(lo, hi)
    expected = 2 * counts[:, 1] / (counts.sum(axis=1) + ev.class_sizes[1])
    np.testing.assert_allclose(scores.f[rows, 0], expected)
    np.testing.assert_allclose(scores.f[rows_again, 0], expected[::-1])


def test_tabled_modify_equals_computed_modify():
    """A mutation gives the same ids whether *modify* reads its table or computes the ranges, and
    every id it gives decodes to a valid condition (continuous and categorical attributes)."""
    for seed in range(20):
        rng = np.random.default_rng(seed)
        m = int(rng.integers(1, 12))
        n_bins, categorical = rng.integers(1, 12, m), rng.random(m) < 0.4
        tabled = _Space(n_bins, categorical, np.random.default_rng(seed))
        computed = _Space(n_bins, categorical, np.random.default_rng(seed))
        computed._modify_table = None
        ids = tabled.initial((300,), 2)
        computed.initial((300,), 2)
        for _ in range(20):
            a, b = tabled.mutate(ids), computed.mutate(ids)
            assert np.array_equal(a, b)
            lo, hi = tabled.decode(a)
            assert (((lo >= 0) & (lo < hi) & (hi <= n_bins)) | ((lo == -1) & (hi == -1))).all()
            assert np.array_equal(tabled.encode(lo, hi), a)
            ids = a
