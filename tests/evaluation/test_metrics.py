"""Metrics of Section 4.3 (Cortellessa & Traini, ICPE 2020) on hand-made clusters and labels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracesleuth.errors import ParameterError
from tracesleuth.analyses.metrics import f_score, f_score_from_counts, labels_for, match_clusters, precision_recall_f

# 10 requests: 4 affected by A1, 3 by A2, 3 not affected.
TRUTH = ["A1", "A1", "A1", "A1", "A2", "A2", "A2", None, None, None]


def test_perfect_clusters():
    m = match_clusters(TRUTH, [0, 0, 0, 0, 1, 1, 1, -1, -1, -1])
    assert (m.precision, m.recall, m.f_score) == (1.0, 1.0, 1.0)
    assert m.matched == {"A1": 0, "A2": 1}
    assert (m.n_correct, m.n_affected, m.n_clustered) == (7, 7, 7)


def test_a_cluster_with_unaffected_requests_lowers_precision_only():
    # cluster 1 = A2's three requests + 2 unaffected ones
    m = match_clusters(TRUTH, [0, 0, 0, 0, 1, 1, 1, 1, 1, -1])
    assert m.recall == 1.0
    assert m.precision == pytest.approx(7 / 9)
    assert m.f_score == pytest.approx(2 * (7 / 9) / (7 / 9 + 1))
    assert m.match_f_scores == {"A1": 1.0, "A2": pytest.approx(2 * 3 / (5 + 3))}


def test_a_degradation_split_in_two_clusters_lowers_recall_only():
    # A1 split into clusters 0 (3 requests) and 2 (1 request): A1 picks cluster 0.
    m = match_clusters(TRUTH, [0, 0, 0, 2, 1, 1, 1, -1, -1, -1])
    assert m.matched == {"A1": 0, "A2": 1}
    assert m.precision == 1.0
    assert m.recall == pytest.approx(6 / 7)
    assert m.f_score == pytest.approx(2 * (6 / 7) / (1 + 6 / 7))


def test_one_cluster_for_everything_is_picked_by_both_and_counted_twice():
    m = match_clusters(TRUTH, [5] * 10)
    assert m.matched == {"A1": 5, "A2": 5}
    # G = all 7 affected; |C1| + |C2| = 10 + 10
    assert m.recall == 1.0
    assert m.precision == pytest.approx(7 / 20)
    assert m.n_clustered == 20


def test_best_match_is_by_f_score_not_by_overlap():
    # cluster 0 holds all of A1 but also all of A2 and the unaffected ones (F = 8/14);
    # cluster 1 holds 3 of A1's 4 requests only (F = 6/7): A1 picks cluster 1.
    masks = np.array([[True] * 10, [True, True, True, False] + [False] * 6])
    m = match_clusters(TRUTH, masks)
    assert m.matched["A1"] == 1
    assert m.match_f_scores["A1"] == pytest.approx(6 / 7)
    assert m.matched["A2"] == 0         # the only cluster holding A2's requests


def test_overlapping_masks_are_accepted_and_ties_go_to_the_first_cluster():
    a = np.array([True, True, False, False, False, False, False, False, False, False])
    b = np.array([False, False, True, True, False, False, False, False, False, False])
    m = match_clusters(TRUTH, [a, b])
    assert m.matched["A1"] == 0          # both have F = 2*2/(2+4)
    assert m.match_f_scores["A1"] == pytest.approx(2 / 3)


def test_no_cluster_at_all():
    for clusters in ([-1] * 10, [], np.zeros((0, 10), dtype=bool)):
        m = match_clusters(TRUTH, clusters)
        assert (m.precision, m.recall, m.f_score) == (0.0, 0.0, 0.0)
        assert m.matched == {"A1": -1, "A2": -1}


def test_no_affected_request_gives_nan_recall():
    m = match_clusters([None, None, None], [0, 0, 1], degradations=["A1", "A2"])
    assert m.precision == 0.0 and math.isnan(m.recall) and math.isnan(m.f_score)


def test_degradations_default_to_the_truth_values_and_nan_means_none():
    truth = np.array(["A2", np.nan, "A1"], dtype=object)
    m = match_clusters(truth, [0, -1, 1])
    assert list(m.matched) == ["A1", "A2"] and m.f_score == 1.0


def test_cluster_ids_are_the_labels_given():
    m = match_clusters(TRUTH, [7, 7, 7, 7, 3, 3, 3, -1, -1, -1])
    assert m.matched == {"A1": 7, "A2": 3}
    assert m.to_dict()["matched"] == {"A1": 7, "A2": 3}


@pytest.mark.parametrize("clusters, match", [
    ([0, 1, 2], r"shape \(10,\)"),
    (np.zeros((2, 3), dtype=bool), r"shape \(10,\)"),
    (np.zeros((2, 10), dtype=int), "boolean"),
    (np.linspace(0, 1, 10), "integers"),
])
def test_bad_clusters(clusters, match):
    with pytest.raises(ParameterError, match=match):
        match_clusters(TRUTH, clusters)


def test_f_score_is_eq_5():
    assert f_score(1.0, 1.0) == 1.0
    assert f_score(0.5, 1.0) == pytest.approx(2 / 3)
    assert f_score(0.0, 0.0) == 0.0
    assert math.isnan(f_score(float("nan"), 1.0))


def test_f_score_is_vectorized_with_the_same_conventions():
    got = f_score(np.array([1.0, 0.5, 0.0, np.nan]), np.array([1.0, 1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(got[:3], [1.0, 2 / 3, 0.0])
    assert np.isnan(got[3])


def test_precision_recall_f_from_counts_and_the_0_0_conventions():
    assert precision_recall_f(8, 2, 10) == (0.8, 0.8, pytest.approx(0.8))
    assert precision_recall_f(0, 0, 5) == (0.0, 0.0, 0.0)               # nothing predicted
    assert precision_recall_f(0, 3, 0) == (0.0, 0.0, 0.0)               # no positive: recall 0 ...
    p, r, f = precision_recall_f(0, 3, 0, no_positives=float("nan"))    # ... or NaN when asked
    assert p == 0.0 and math.isnan(r) and math.isnan(f)
    p, r, f = precision_recall_f(np.array([1, 2, 0]), np.array([1, 0, 0]), 2)
    np.testing.assert_array_equal(p, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(r, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(f, [0.5, 1.0, 0.0])


def test_the_two_f_score_forms_agree():
    rng = np.random.default_rng(0)
    tp = rng.integers(0, 1000, 500)
    fp = rng.integers(0, 1000, 500)
    n_pos = tp + rng.integers(0, 1000, 500)
    _, _, f = precision_recall_f(tp, fp, n_pos)
    np.testing.assert_allclose(f_score_from_counts(tp, fp, n_pos), f, rtol=1e-15, atol=0)
    assert f_score_from_counts(0, 0, 0) == 0.0 and isinstance(f_score_from_counts(1, 1, 2), float)


def test_labels_for_aligns_ground_truth_to_trace_ids():
    import polars as pl

    truth = {"t1": "A1", "t2": None, "t3": "A2"}
    frame = pl.DataFrame({"trace_id": ["t3", "t9", "t1"]})
    assert labels_for(frame, truth).tolist() == ["A2", None, "A1"]          # unknown: not affected
    assert labels_for(["t2"], truth).dtype == object
    with pytest.raises(ParameterError, match="1 trace ids"):
        labels_for(frame, truth, missing="raise")
    with pytest.raises(ParameterError, match="'missing' parameter"):
        labels_for(frame, truth, missing="drop")
