"""Mean-shift split points, the automatic interval and interval parsing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import MeanShift, estimate_bandwidth

from tracesleuth.errors import ParameterError
from tracesleuth.analyses.patterns import LatencyInterval
from tracesleuth.units import format_duration_ns
from tracesleuth.analyses.patterns.split_points import (
    attribute_thresholds,
    degraded_interval,
    density_split_points,
    estimate_bandwidth_1d,
    interval_split_points,
    mean_shift_1d,
    parse_duration,
    parse_interval,
)

MS = 1_000_000


def _mixture(rng, n):
    return np.concatenate([
        rng.normal(100, 5, int(n * 0.8)),
        rng.normal(150, rng.uniform(1, 20), int(n * 0.1)),
        rng.exponential(30, int(n * 0.1)) + 180,
    ])


@pytest.mark.parametrize("seed", range(12))
def test_mean_shift_equals_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    x = _mixture(rng, int(rng.integers(30, 2500)))
    X = x.reshape(-1, 1)
    bw = estimate_bandwidth(X, quantile=0.3)
    assert estimate_bandwidth_1d(x, quantile=0.3) == pytest.approx(bw, rel=1e-12)
    min_freq = max(1, int(0.01 * x.size))
    ms = MeanShift(bandwidth=bw, bin_seeding=True, min_bin_freq=min_freq).fit(X)
    ours = mean_shift_1d(x, bandwidth=bw, min_bin_fraction=(min_freq - 0.5) / x.size)
    order = np.argsort(ms.cluster_centers_.ravel())
    np.testing.assert_allclose(ours.centers, ms.cluster_centers_.ravel()[order], rtol=1e-9)
    counts = np.bincount(ms.labels_, minlength=order.size)[order]
    np.testing.assert_array_equal(ours.counts, counts[counts > 0])


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=300), st.floats(0.05, 1.0))
@settings(max_examples=60, deadline=None)
def test_bandwidth_equals_scikit_learn(values, quantile):
    x = np.array(values, dtype=np.float64)
    expected = estimate_bandwidth(x.reshape(-1, 1), quantile=quantile)
    got = estimate_bandwidth_1d(x, quantile=quantile)
    if expected > 0 or x.min() == x.max():
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-9)
    else:  # 0 for a non-constant sample: re-estimated on distinct values, positive
        assert got > 0


@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=400))
@settings(max_examples=80, deadline=None)
def test_thresholds_partition_values(values):
    x = np.array(values, dtype=np.int64)
    t = attribute_thresholds(x)
    assert t[0] == x.min() and t[-1] == x.max() + 1
    assert np.all(np.diff(t) > 0)
    bins = np.searchsorted(t, x, side="right") - 1
    assert bins.min() >= 0 and bins.max() <= t.size - 2
    assert np.all(np.bincount(bins, minlength=t.size - 1) > 0)  # no empty bin


def test_split_points_separate_modes():
    rng = np.random.default_rng(3)
    x = np.round(np.concatenate([rng.normal(100, 3, 800), rng.normal(150, 3, 100), rng.normal(200, 3, 100)]) * MS)
    sp = density_split_points(x.astype(np.int64))
    assert sp.size == 2
    assert 110 * MS < sp[0] < 140 * MS and 160 * MS < sp[1] < 190 * MS
    # each split point lies in an empty gap between the modes
    assert not np.any((x >= sp[0] - 2 * MS) & (x < sp[0] + 2 * MS))


def test_constant_values_one_mode():
    r = mean_shift_1d(np.full(50, 7.0))
    assert r.n_clusters == 1 and r.counts.tolist() == [50]
    assert attribute_thresholds(np.full(5, 7, dtype=np.int64)).tolist() == [7, 8]


def test_degraded_interval_rule():
    rng = np.random.default_rng(0)
    lat = np.round(np.concatenate([rng.normal(300, 10, 800), rng.normal(400, 10, 100), rng.normal(500, 10, 100)]) * MS)
    lat = lat.astype(np.int64)
    interval, clusters = degraded_interval(lat)
    assert clusters.n_clusters == 3
    assert 330 * MS < interval.low_ns < 370 * MS
    assert interval.high_ns == lat.max() + 1
    inside = interval.contains(lat)
    assert inside.sum() == 200


def test_degraded_interval_none_when_main_mode_is_slowest():
    rng = np.random.default_rng(0)
    lat = np.round(np.concatenate([rng.normal(100, 3, 100), rng.normal(300, 5, 900)]) * MS).astype(np.int64)
    interval, clusters = degraded_interval(lat)
    assert interval is None and clusters.n_clusters == 2


def test_interval_split_points_inside_and_capped():
    rng = np.random.default_rng(1)
    modes = [rng.normal(m, 2, 100) for m in (100, 130, 160, 190, 220)]
    lat = np.round(np.concatenate([rng.normal(50, 2, 2000), *modes]) * MS).astype(np.int64)
    interval = LatencyInterval(80 * MS, 240 * MS)
    # five equal modes: a 30% quantile bandwidth spans two modes, so a finer one is needed
    bounds = interval_split_points(lat, interval, quantile=0.1)
    assert bounds[0] == interval.low_ns and bounds[-1] == interval.high_ns
    assert bounds.size == 6  # 4 inner split points between 5 modes
    capped = interval_split_points(lat, interval, max_split_points=2, quantile=0.1)
    assert capped.size == 4 and set(capped) <= set(bounds)


@pytest.mark.parametrize(
    ("text", "ns"),
    [("350ms", 350 * MS), ("1.5 s", 1_500_000_000), ("200us", 200_000), ("200µs", 200_000),
     ("75000ns", 75_000), ("0.25ms", 250_000), ("1e3ms", 1_000 * MS)],
)
def test_parse_duration(text, ns):
    assert parse_duration(text) == ns


@pytest.mark.parametrize("bad", ["350", "ms", "-3ms", "3 min", "", "3ms5"])
def test_parse_duration_rejects(bad):
    with pytest.raises(ParameterError, match="duration"):
        parse_duration(bad)


def test_parse_interval():
    assert parse_interval("350ms:700ms") == LatencyInterval(350 * MS, 700 * MS)
    lat = np.array([10, 20, 30]) * MS
    assert parse_interval("15ms:", latency_ns=lat) == LatencyInterval(15 * MS, 30 * MS + 1)
    assert parse_interval(":15ms", latency_ns=lat) == LatencyInterval(10 * MS, 15 * MS)
    assert parse_interval((1, 5)) == LatencyInterval(1, 5)
    for bad in ("700ms:350ms", "350ms", "a:b", 42, (5, 1)):
        with pytest.raises(ParameterError, match="interval|duration"):
            parse_interval(bad)
    with pytest.raises(ParameterError, match="open side"):
        parse_interval("1ms:")


@given(st.integers(0, 10**12), st.integers(1, 10**12))
@settings(max_examples=100, deadline=None)
def test_parse_interval_round_trip_in_ns(low, width):
    assert parse_interval(f"{low}ns:{low + width}ns") == LatencyInterval(low, low + width)


@given(st.integers(1, 10**11))
@settings(max_examples=100, deadline=None)
def test_rendered_durations_parse_back_closely(ns):
    text = format_duration_ns(ns).replace(" ", "")
    assert parse_duration(text) == pytest.approx(ns, rel=5e-4)


def test_climb_seed_by_seed_equals_all_seeds_at_once(monkeypatch):
    """Mean shift's two climbs (seed by seed in floats, all seeds as arrays) give the same means and
    counts, bit for bit, including seeds with no value nearby and climbs cut at ``max_iter``."""
    from tracesleuth.analyses.patterns import split_points as sp

    rng = np.random.default_rng(0)
    for case in range(300):
        n = int(rng.integers(2, 600))
        xs = np.sort(rng.lognormal(3, 1, n))
        xs = np.round(xs - xs[0]) if case % 3 == 0 else xs - xs[0]
        prefix = np.concatenate(([0.0], np.cumsum(xs)))
        h = float(rng.uniform(0.1, 20))
        seeds = rng.choice(xs, int(rng.integers(1, 20))) + rng.normal(0, 0.3)
        if case % 7 == 0:
            seeds[0] = xs[-1] + 5 * h
        max_iter = int(rng.integers(0, 50))
        monkeypatch.setattr(sp, "CLIMB_LISTS", -1)
        arrays = sp._climb(seeds.copy(), xs, prefix, h, max_iter)
        monkeypatch.setattr(sp, "CLIMB_LISTS", 10**9)
        each = sp._climb(seeds.copy(), xs, prefix, h, max_iter)
        assert np.array_equal(arrays[0], each[0]) and np.array_equal(arrays[1], each[1]), case


def test_kth_neighbour_distance_is_the_least_window():
    """The k-th neighbour distance (itself first) is the least, over the windows of k sorted values
    holding the value, of its distance to the window's far end (brute force on integer ns)."""
    from tracesleuth.analyses.patterns.split_points import _kth_neighbour_distance

    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        x = np.sort(rng.integers(0, int(rng.choice([5, 1000, 10**9])), n)).astype(np.float64)
        k = int(rng.integers(1, n + 1))
        brute = [min(max(x[i] - x[l], x[l + k - 1] - x[i]) for l in range(max(0, i - k + 1), min(i, n - k) + 1))
                 for i in range(n)]
        assert np.array_equal(_kth_neighbour_distance(x, k), np.array(brute)), (n, k)
