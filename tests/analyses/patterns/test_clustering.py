"""Clustering baselines of Cortellessa & Traini (ICPE 2020), Section 4.5: quality floors on seeded
blobs, missing values, infeasible k, selection of k, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from tracesleuth.errors import EmptyDataError, ParameterError, TraceSleuthError
from tracesleuth.analyses.patterns.clustering import CLUSTERING_METHODS, ClusteringWarning, cluster_degraded

MS = 1_000_000
ARI_FLOOR = 0.9


def blobs(seed: int, n_per: int = 40, k: int = 3, n_features: int = 8, spread_ms: float = 2.0):
    """``k`` groups of degraded requests, each with +50 ms in its own RPC columns (ns)."""
    rng = np.random.default_rng(seed)
    base = rng.lognormal(np.log(5.0), 0.2, size=n_features)
    X, y = [], []
    for g in range(k):
        centre = base.copy()
        centre[g] += 50.0
        centre[(g + 3) % n_features] += 50.0 * (g % 2)
        X.append(centre + rng.normal(0, spread_ms, size=(n_per, n_features)))
        y += [g] * n_per
    return np.vstack(X) * MS, np.array(y)


@pytest.mark.parametrize("method", CLUSTERING_METHODS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_separates_well_separated_blobs(method, seed):
    X, y = blobs(seed)
    labels = cluster_degraded(X, method=method, random_state=seed)
    assert labels.shape == y.shape and labels.dtype == np.int64
    assert adjusted_rand_score(y, labels) >= ARI_FLOOR


@pytest.mark.parametrize("method", CLUSTERING_METHODS)
def test_labels_are_contiguous_from_zero_in_order_of_appearance(method):
    X, _ = blobs(3)
    labels = cluster_degraded(X, method=method, random_state=0)
    k = labels.max() + 1
    assert set(labels.tolist()) == set(range(k))
    first = [int(np.flatnonzero(labels == c)[0]) for c in range(k)]
    assert first == sorted(first)


@pytest.mark.parametrize("method", CLUSTERING_METHODS)
def test_missing_values_are_imputed_as_zero_time(method):
    X, y = blobs(4)
    X[y == 1, 5] = 0.0              # group 1 never calls RPC 5 ...
    with_nan = X.copy()
    with_nan[y == 1, 5] = np.nan    # ... which the trace table records as missing
    a = cluster_degraded(X, method=method, random_state=0)
    b = cluster_degraded(with_nan, method=method, random_state=0)
    np.testing.assert_array_equal(a, b)
    assert adjusted_rand_score(y, b) >= ARI_FLOOR


def test_an_rpc_called_by_one_group_only_separates_it():
    rng = np.random.default_rng(5)
    X = rng.normal(10, 1, size=(60, 3)) * MS
    X[:30, 2] = np.nan              # first half never calls the third RPC
    labels = cluster_degraded(X, method="hierarchical", random_state=0)
    assert adjusted_rand_score(np.repeat([0, 1], 30), labels) == 1.0


def test_input_is_not_modified():
    X, _ = blobs(6)
    X[0, 0] = np.nan
    before = X.copy()
    cluster_degraded(X, method="kmeans", random_state=0, standardize=True)
    np.testing.assert_array_equal(X, before)


@pytest.mark.parametrize("method", ["kmeans", "hierarchical"])
def test_k_larger_than_the_data_allow_is_dropped_with_a_note(method):
    X, _ = blobs(7, n_per=2, k=2)   # 4 requests: silhouette allows k <= 3
    with pytest.warns(ClusteringWarning, match=r"k = \[4, 5, 6\] dropped"):
        labels = cluster_degraded(X, method=method, random_state=0)
    assert labels.shape == (4,) and 2 <= labels.max() + 1 <= 3


def test_no_feasible_k_is_a_parameter_error():
    X, _ = blobs(8, n_per=2, k=2)
    with pytest.raises(ParameterError, match=r"'k_range'.*at most k = 3.*Got \[10, 12\]"):
        cluster_degraded(X, method="kmeans", k_range=[10, 12])


def test_a_score_callback_may_use_k_up_to_the_distinct_rows():
    X, _ = blobs(9, n_per=2, k=2)
    labels = cluster_degraded(X, method="kmeans", random_state=0, k_range=[4],
                              select=lambda lab: 0.0)
    assert len(set(labels.tolist())) == 4


@pytest.mark.parametrize("bad", [[], [1, 2], [0], "abc", 3])
def test_bad_k_range(bad):
    X, _ = blobs(10)
    with pytest.raises(ParameterError, match="'k_range'"):
        cluster_degraded(X, method="kmeans", k_range=bad)


@pytest.mark.parametrize("method", CLUSTERING_METHODS)
def test_identical_rows_give_one_cluster_with_a_note(method):
    X = np.full((5, 3), 7 * MS, dtype=float)
    with pytest.warns(ClusteringWarning, match="identical"):
        labels = cluster_degraded(X, method=method)
    np.testing.assert_array_equal(labels, np.zeros(5))


@pytest.mark.parametrize("method", CLUSTERING_METHODS)
def test_a_single_request(method):
    with pytest.warns(ClusteringWarning):
        assert cluster_degraded(np.array([[1.0 * MS, np.nan]]), method=method).tolist() == [0]


def test_no_request_is_empty_data():
    with pytest.raises(EmptyDataError):
        cluster_degraded(np.empty((0, 4)), method="kmeans")


@pytest.mark.parametrize("X, match", [
    (np.ones(5), "two-dimensional"),
    (np.ones((3, 0)), "at least one feature"),
    (np.array([[1.0, np.inf], [2.0, 3.0]]), r"Got inf at row 0, column 1"),
    ([["a", "b"]], "numeric"),
])
def test_bad_X(X, match):
    with pytest.raises(ParameterError, match=match):
        cluster_degraded(X, method="kmeans")


def test_bad_method_and_select_name_the_parameter():
    X, _ = blobs(11)
    with pytest.raises(ParameterError, match=r"'method'.*'kmeans'.*Got 'dbscan'"):
        cluster_degraded(X, method="dbscan")
    with pytest.raises(ParameterError, match="'select'"):
        cluster_degraded(X, method="kmeans", select="elbow")
    assert issubclass(ParameterError, TraceSleuthError) and issubclass(ParameterError, ValueError)


@pytest.mark.parametrize("method", ["kmeans", "hierarchical"])
def test_select_callable_receives_each_candidate_and_its_maximum_wins(method):
    X, _ = blobs(12)
    seen = []

    def prefer_four(labels):
        k = labels.max() + 1
        seen.append(k)
        return -abs(k - 4)

    labels = cluster_degraded(X, method=method, random_state=0, select=prefer_four)
    assert seen == [2, 3, 4, 5, 6]
    assert labels.max() + 1 == 4


def test_silhouette_finds_the_number_of_blobs():
    X, _ = blobs(13, k=4)
    for method in ("kmeans", "hierarchical"):
        assert cluster_degraded(X, method=method, random_state=0).max() + 1 == 4


@pytest.mark.parametrize("method", CLUSTERING_METHODS)
def test_reproducible_by_random_state(method):
    X, _ = blobs(14, spread_ms=15.0)
    a = cluster_degraded(X, method=method, random_state=3)
    b = cluster_degraded(X, method=method, random_state=3)
    c = cluster_degraded(X, method=method, random_state=np.random.default_rng(3))
    d = cluster_degraded(X, method=method, random_state=np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, d)


def test_standardize_is_an_option_and_unit_variance_does_not_break_blobs():
    X, y = blobs(15)
    labels = cluster_degraded(X, method="kmeans", random_state=0, standardize=True)
    assert adjusted_rand_score(y, labels) >= ARI_FLOOR


@pytest.mark.parametrize("method", ["kmeans", "hierarchical"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_not_standardizing_keeps_network_jitter_from_outweighing_a_degradation(method, seed):
    """Six network-hop columns of ~0.3 ms that are 0.1 ms slower together for half the requests
    (a slower node), independently of the degradation. Raw, the 50 ms degradation decides;
    scaled to unit variance, the hops outvote it (the module's rationale for the default)."""
    rng = np.random.default_rng(seed)
    n = 80
    y = np.repeat([0, 1], n // 2)
    degraded = 5 + 50 * y + rng.normal(0, 1, n)
    hops = 0.3 + 0.1 * rng.integers(0, 2, (n, 1)) + rng.normal(0, 0.005, (n, 6))
    X = np.column_stack([degraded, hops]) * MS
    raw = cluster_degraded(X, method=method, random_state=0, k_range=[2])
    scaled = cluster_degraded(X, method=method, random_state=0, k_range=[2], standardize=True)
    assert adjusted_rand_score(y, raw) == 1.0
    assert adjusted_rand_score(y, scaled) < 0.5
