"""The dynamic program of eq. (8): optimal partitions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracesleuth.errors import ParameterError
from tracesleuth.analyses.patterns.dp import optimal_partition


def _all_partitions(k):
    for r in range(k):
        for cuts in itertools.combinations(range(1, k), r):
            points = (0, *cuts, k)
            yield tuple(zip(points[:-1], points[1:]))


def test_known_theta():
    # s_0..s_3; two causes: [s_0, s_2) is one mode explained well, [s_2, s_3) another
    theta = {(0, 1): 0.40, (1, 2): 0.45, (2, 3): 0.95, (0, 2): 0.97, (1, 3): 0.50, (0, 3): 0.60}
    p = optimal_partition(4, theta)
    assert p.sub_intervals == ((0, 2), (2, 3))
    assert p.score == pytest.approx(1.92)
    assert p.best_scores[0] == 0.0


def test_theta_called_once_per_pair():
    calls = []

    def theta(j, i):
        calls.append((j, i))
        return (i - j) ** 0.5

    p = optimal_partition(6, theta)
    assert len(calls) == len(set(calls)) == 15  # k (k + 1) / 2 with k = 5
    assert p.sub_intervals == tuple((i, i + 1) for i in range(5))  # concave: finest partition


def test_ties_prefer_fewer_sub_intervals():
    theta = {(0, 1): 0.5, (1, 2): 0.5, (0, 2): 1.0}
    assert optimal_partition(3, theta).sub_intervals == ((0, 2),)


@given(st.integers(2, 7), st.data())
@settings(max_examples=150, deadline=None)
def test_dp_equals_brute_force(n_points, data):
    k = n_points - 1
    theta = {(j, i): data.draw(st.floats(0, 1)) for i in range(1, k + 1) for j in range(i)}
    p = optimal_partition(n_points, theta)
    best = max(sum(theta[s] for s in part) for part in _all_partitions(k))
    assert p.score == pytest.approx(best, abs=1e-12)
    assert sum(theta[s] for s in p.sub_intervals) == pytest.approx(p.score, abs=1e-12)
    assert p.sub_intervals[0][0] == 0 and p.sub_intervals[-1][1] == k
    assert all(a[1] == b[0] for a, b in zip(p.sub_intervals, p.sub_intervals[1:]))


def test_needs_two_split_points():
    with pytest.raises(ParameterError, match="at least 2 split points"):
        optimal_partition(1, {})
