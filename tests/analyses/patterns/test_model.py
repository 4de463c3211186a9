"""Conditions, patterns and Q(P, I) on hand-computed tables (eqs. 2-5, Definitions 2.2-2.3, 5.3-5.4)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tracesleuth.errors import ParameterError
from tracesleuth.analyses.patterns import Condition, LatencyInterval, Pattern, f_score, format_duration_ns, pattern_quality

MS = 1_000_000
A = "exclusive_ns[svc-a:op]"
V = "attr[version]"


@pytest.fixture
def tiny() -> pl.DataFrame:
    # r2, r3, r4 have latency in I = [200 ms, 400 ms); r6 never called svc-a:op.
    return pl.DataFrame(
        {
            "trace_id": [f"t{i}" for i in range(7)],
            "latency_ns": [100 * MS, 110 * MS, 300 * MS, 310 * MS, 320 * MS, 105 * MS, 115 * MS],
            A: pl.Series([10 * MS, 12 * MS, 60 * MS, 62 * MS, 11 * MS, 61 * MS, None], dtype=pl.Int64),
            V: ["1.3", "1.4", "1.4", "1.4", "1.3", "1.3", "1.4"],
        }
    )


I = LatencyInterval(200 * MS, 400 * MS)


@pytest.mark.parametrize(
    ("pattern", "tp", "fp", "precision", "recall", "f"),
    [
        # A in [50, 70) ms: r2, r3 (positives) and r5 (negative)
        (Pattern([Condition.continuous(A, 50 * MS, 70 * MS)]), 2, 1, 2 / 3, 2 / 3, 2 / 3),
        # ... and version = 1.4: r2, r3
        (Pattern([Condition.continuous(A, 50 * MS, 70 * MS), Condition.categorical(V, "1.4")]), 2, 0, 1.0, 2 / 3, 0.8),
        # version = 1.4: r1, r2, r3, r6
        (Pattern([Condition.categorical(V, "1.4")]), 2, 2, 0.5, 2 / 3, 4 / 7),
        # A called (both ends open): every request but r6
        (Pattern([Condition.continuous(A)]), 3, 3, 0.5, 1.0, 2 / 3),
        # A < 5 ms: nobody (r6's missing value does not satisfy it): F = 0 by definition
        (Pattern([Condition.continuous(A, None, 5 * MS)]), 0, 0, 0.0, 0.0, 0.0),
        # A >= 11 ms: r1, r2, r3, r4, r5
        (Pattern([Condition.continuous(A, 11 * MS, None)]), 3, 2, 0.6, 1.0, 0.75),
    ],
)
def test_quality_hand_computed(tiny, pattern, tp, fp, precision, recall, f):
    q = pattern.quality(tiny, I)
    assert (q.tp, q.fp, q.n_positives) == (tp, fp, 3)
    assert q.precision == pytest.approx(precision)
    assert q.recall == pytest.approx(recall)
    assert q.f_score == pytest.approx(f)
    assert f_score(tp, fp, 3) == pytest.approx(f)
    assert q.support == tp + fp


def test_condition_bounds_are_half_open(tiny):
    c = Condition.continuous(A, 60 * MS, 62 * MS)
    assert c.satisfied_by(tiny).tolist() == [False, False, True, False, False, True, False]


def test_missing_never_satisfies_categorical():
    frame = pl.DataFrame({V: ["1.4", None, "1.3"], "latency_ns": [1, 2, 3]})
    assert Condition.categorical(V, "1.4").satisfied_by(frame).tolist() == [True, False, False]


def test_empty_pattern_is_satisfied_by_all(tiny):
    assert Pattern().satisfied_by(tiny).all()
    assert Pattern().describe() == "any request"


def test_f_score_zero_when_no_true_positive():
    assert f_score(0, 10, 5) == 0.0
    assert f_score(0, 0, 0) == 0.0
    np.testing.assert_allclose(f_score(np.array([0, 1, 2]), np.array([0, 1, 0]), 2), [0.0, 0.5, 1.0])
    q = pattern_quality(0, 0, 0)
    assert (q.precision, q.recall, q.f_score) == (0.0, 0.0, 0.0)


def test_pattern_quality_rejects_impossible_counts():
    with pytest.raises(ParameterError, match="tp=5"):
        pattern_quality(5, 0, 3)


def test_pattern_at_most_one_condition_per_attribute():
    with pytest.raises(ParameterError, match="at most one condition per attribute"):
        Pattern([Condition.continuous(A, 1, 2), Condition.continuous(A, 3, 4)])


def test_pattern_is_frozenset_like():
    c1, c2 = Condition.continuous(A, 1, 2), Condition.categorical(V, "1.4")
    p, q = Pattern([c1, c2]), Pattern([c2, c1])
    assert p == q and hash(p) == hash(q) and len(p) == 2 and c1 in p
    assert p == frozenset({c1, c2})
    assert {p: 1}[q] == 1


def test_condition_validation():
    with pytest.raises(ParameterError, match="low_ns < high_ns"):
        Condition.continuous(A, 5, 5)
    with pytest.raises(ParameterError, match="no low_ns/high_ns"):
        Condition(V, low_ns=1, value="x")
    with pytest.raises(ParameterError, match="low < high"):
        LatencyInterval(10, 10)


def test_words():
    p = Pattern([
        Condition.categorical("attr[version]", "1.4"),
        Condition.continuous("exclusive_ns[ts-order-service:GET /order]", 80 * MS, 102 * MS),
    ])
    assert p.describe() == "ts-order-service:GET /order exclusive in [80 ms, 102 ms) and version = 1.4"
    assert Condition.continuous(A, 1_500_000_000, None).describe() == "svc-a:op exclusive >= 1.5 s"
    assert Condition.continuous(A, None, 250_000).describe() == "svc-a:op exclusive < 250 µs"
    assert Condition.continuous(A).describe() == "svc-a:op called"
    assert Condition.categorical("instance[svc-a:op]", "pod-3").describe() == "svc-a:op instance = pod-3"


@pytest.mark.parametrize(
    ("ns", "text"),
    [(0, "0 ns"), (999, "999 ns"), (1_000, "1 µs"), (80 * MS, "80 ms"), (101_500_000, "101.5 ms"),
     (1_234_567_890, "1.235 s"), (-2 * MS, "-2 ms")],
)
def test_format_duration(ns, text):
    assert format_duration_ns(ns) == text


def test_to_dict_is_json_safe():
    p = Pattern([Condition.continuous(A, 1, None), Condition.categorical(V, "1.4")])
    text = json.dumps(p.to_dict())
    assert "version = 1.4" in text
    assert json.loads(json.dumps(I.to_dict()))["low_ns"] == 200 * MS
