"""Metrics of Section 4.3 (Cortellessa & Traini, ICPE 2020) on hand-made clusters and labels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracesleuth.errors import ParameterError
from tracesleuth.evaluation.metrics import f_score, match_clusters

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
