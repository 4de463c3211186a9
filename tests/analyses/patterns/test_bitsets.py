"""Bit-string evaluation (Section 3.2) equals a naive numpy evaluation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracesleuth.analyses.patterns._bitsets import AttributeEncoding, PatternEvaluator, interval_counts, simplify
from tracesleuth.analyses.patterns.split_points import attribute_thresholds


def _naive_counts(codes, latency_class, n_classes, lo, hi):
    n_patterns = lo.shape[0]
    sat = np.ones((n_patterns, codes.shape[0]), dtype=bool)
    for j in range(codes.shape[1]):
        on = lo[:, j] >= 0
        ok = (codes[None, :, j] >= lo[:, j, None]) & (codes[None, :, j] < hi[:, j, None])
        sat &= np.where(on[:, None], ok, True)
    return np.stack([(sat & (latency_class == c)[None]).sum(axis=1) for c in range(n_classes)], axis=1)


@st.composite
def problems(draw):
    n = draw(st.integers(1, 300))
    m = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    duplicates = draw(st.booleans())
    rng = np.random.default_rng(seed)
    n_bins = rng.integers(1, 6, size=m)
    codes = np.stack([rng.integers(-1, n_bins[j], size=n) for j in range(m)], axis=1)
    if duplicates:  # few distinct rows, heavy weights
        codes = codes[rng.integers(0, max(1, n // 20), size=n)]
    n_classes = int(rng.integers(1, 6))
    latency_class = rng.integers(0, n_classes, size=n)
    n_patterns = 40
    lo = np.full((n_patterns, m), -1)
    hi = np.full((n_patterns, m), -1)
    for i in range(n_patterns):
        for j in range(m):
            if rng.random() < 0.5:
                a, b = sorted(rng.choice(n_bins[j] + 1, size=2, replace=False))
                lo[i, j], hi[i, j] = a, b
    return codes, n_bins, latency_class, n_classes, lo, hi


@given(problems())
@settings(max_examples=150, deadline=None)
def test_bitset_counts_equal_naive(problem):
    codes, n_bins, latency_class, n_classes, lo, hi = problem
    ev = PatternEvaluator(codes, n_bins, latency_class, n_classes)
    got = ev.class_counts(lo, hi)
    np.testing.assert_array_equal(got, _naive_counts(codes, latency_class, n_classes, lo, hi))
    # a pattern's string as the AND of its conditions' strings (the GA's tabled conditions)
    attribute = np.broadcast_to(np.arange(lo.shape[1]), lo.shape)
    strings = ev.condition_bits(attribute.ravel(), lo.ravel(), hi.ravel()).reshape(lo.shape + (-1,))
    np.testing.assert_array_equal(ev.count_bits(np.bitwise_and.reduce(strings, axis=1)), got)
    ev._byte_table = None  # the weight planes (long bit strings) count the same
    np.testing.assert_array_equal(ev.class_counts(lo, hi), got)
    np.testing.assert_array_equal(ev.count_bits(np.bitwise_and.reduce(strings, axis=1)), got)
    assert ev.n_cells <= codes.shape[0]
    np.testing.assert_array_equal(ev.class_sizes, np.bincount(latency_class, minlength=n_classes))


def test_heavy_weights_use_several_planes():
    rng = np.random.default_rng(0)
    n = 200_000
    codes = rng.integers(-1, 3, size=(n, 3))
    codes[: n // 2] = [1, 1, 1]  # one cell of weight >= 100000: 17 weight planes
    latency_class = rng.integers(0, 3, size=n)
    ev = PatternEvaluator(codes, np.array([3, 3, 3]), latency_class, 3)
    assert ev.n_cells < 200
    lo = np.array([[1, -1, -1], [0, 1, -1], [-1, -1, -1], [1, 1, 1]])
    hi = np.array([[2, -1, -1], [3, 2, -1], [-1, -1, -1], [2, 2, 2]])
    np.testing.assert_array_equal(ev.class_counts(lo, hi), _naive_counts(codes, latency_class, 3, lo, hi))
    assert ev._byte_table is not None
    ev._byte_table = None
    np.testing.assert_array_equal(ev.class_counts(lo, hi), _naive_counts(codes, latency_class, 3, lo, hi))


@given(
    st.lists(st.one_of(st.none(), st.integers(0, 5 * 10**8)), min_size=1, max_size=200),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=100, deadline=None)
def test_decoded_conditions_agree_with_raw_values(raw, seed):
    """Code ranges decoded into Conditions select the same requests on the raw values."""
    present = np.array([v is not None for v in raw])
    if not present.any():
        return
    values = np.array([0 if v is None else v for v in raw], dtype=np.int64)
    thresholds = attribute_thresholds(values[present])
    code = np.searchsorted(thresholds, values, side="right") - 1
    code[~present] = -1
    enc = AttributeEncoding("exclusive_ns[a:b]", "continuous", thresholds.size - 1, thresholds=thresholds)
    rng = np.random.default_rng(seed)
    for _ in range(10):
        a, b = sorted(rng.choice(enc.n_bins + 1, size=2, replace=False))
        cond = enc.condition(a, b)
        by_code = (code >= a) & (code < b)
        np.testing.assert_array_equal(cond.satisfied(values, present), by_code)


def test_categorical_encoding_decodes_values():
    enc = AttributeEncoding("attr[version]", "categorical", 2, categories=("1.3", "1.4"))
    assert enc.condition(1, 2).value == "1.4"
    with pytest.raises(ValueError):
        enc.condition(1, 3)


def test_interval_counts_and_simplify():
    codes = np.array([[0, 0], [1, 0], [1, 1], [1, 1], [0, 1]])
    latency_class = np.array([0, 1, 1, 2, 0])
    ev = PatternEvaluator(codes, np.array([2, 2]), latency_class, 3)
    counts = ev.class_counts(np.array([[1, -1]]), np.array([[2, -1]]))
    assert counts.tolist() == [[0, 2, 1]]
    assert interval_counts(counts, 0, 1).tolist() == [2]  # class 1 = [s_0, s_1)
    assert interval_counts(counts, 0, 2).tolist() == [3]
    # attr0 = 1 and attr1 in [0, 2) (every present value): the second condition is redundant
    lo, hi = simplify(ev, np.array([1, 0]), np.array([2, 2]))
    assert lo.tolist() == [1, -1] and hi.tolist() == [2, -1]
    # attr0 = 1 and attr1 = 1: both matter
    lo, hi = simplify(ev, np.array([1, 1]), np.array([2, 2]))
    assert lo.tolist() == [1, 1]


def test_memory_is_bounded_by_chunks():
    """Many patterns with many conditions over long strings are evaluated chunk by chunk."""
    rng = np.random.default_rng(1)
    n, m = 50_000, 8
    codes = rng.integers(0, 4, size=(n, m))
    latency_class = rng.integers(0, 4, size=n)
    ev = PatternEvaluator(codes, np.full(m, 4), latency_class, 4)
    lo = rng.integers(0, 2, size=(300, m))
    hi = lo + rng.integers(1, 3, size=(300, m))
    np.testing.assert_array_equal(ev.class_counts(lo, hi), _naive_counts(codes, latency_class, 4, lo, hi))


def test_min_precision_lifts_the_share_or_cuts_the_rest():
    from tracesleuth.analyses.patterns._bitsets import min_precision

    assert min_precision([100, 600, 0], 1000, 2.0).tolist() == pytest.approx([0.2, 0.8, 0.0])
    assert min_precision([100], 1000, None).tolist() == [0.0]


def test_prune_drops_a_condition_that_barely_changes_the_score():
    from tracesleuth.analyses.patterns._bitsets import prune

    rng = np.random.default_rng(0)
    n = 400
    degraded = rng.random(n) < 0.25
    codes = np.column_stack([degraded.astype(int), rng.integers(0, 2, n)])
    ev = PatternEvaluator(codes, np.array([2, 2]), degraded.astype(int) + 1, 3)
    # attribute 0 = 1 explains class 2 alone; attribute 1 is noise
    lo, hi = np.array([1, 0]), np.array([2, 2])
    assert prune(ev, lo, hi, 1, 2, tolerance=0.0)[0].tolist() == [1, -1]  # all of attribute 1: no change
    # attribute 1 < 1 halves the recall: pruned at once (the F-score rises without it)
    assert prune(ev, np.array([1, 0]), np.array([2, 1]), 1, 2, tolerance=0.01)[0].tolist() == [1, -1]
    # attribute 0 is the cause: never pruned, even with a generous tolerance
    assert prune(ev, np.array([1, -1]), np.array([2, -1]), 1, 2, tolerance=0.5)[0].tolist() == [1, -1]
