"""The one rule for whose a risen gap is (tracesleuth.model.gaps), over many random call graphs."""

import numpy as np
import polars as pl
import pytest

from tracesleuth.model.gaps import gap_owner


def _edges(pairs, rose):
    return pl.DataFrame({"caller": [a for a, _ in pairs], "callee": [b for _, b in pairs], "rose": rose})


def test_a_caller_whose_every_call_rose_owns_them_a_single_edge_is_the_callees():
    edges = _edges([("a", "b"), ("a", "c"), ("a", "d"), ("x", "b")], [True, True, True, False])
    assert gap_owner(edges).to_list() == ["a", "a", "a", "b"]
    assert gap_owner(_edges([("a", "b")], [True])).to_list() == ["b"]


def test_calls_into_one_service_that_rose_from_every_caller_are_its():
    edges = _edges([("a", "s"), ("b", "s"), ("c", "s"), ("a", "t"), ("b", "u")], [True, True, True, False, False])
    assert gap_owner(edges).to_list()[:3] == ["s", "s", "s"]


def test_planted_slow_callee_or_starved_caller_is_found_among_noise():
    """40 random call graphs (12 services, 30 edges) with 5% of edges rising by chance, and either
    a callee whose every incoming edge rose or a caller whose every outgoing edge rose: the planted
    service owns >= 90% of its risen edges (measured 89 of 91, 0.98: the rest are ties with a service whose
    few other edges rose by chance, which go to the callee)."""
    owned, total = 0, 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        services = [f"s{i}" for i in range(12)]
        pairs = sorted({(a, b) for a, b in rng.choice(services, size=(60, 2)) if a != b})[:30]
        rose = rng.random(len(pairs)) < 0.05
        planted = services[int(rng.integers(12))]
        end = int(rng.integers(2))  # 0: a starved caller, 1: a slow callee
        mine = np.array([pair[end] == planted for pair in pairs])
        if mine.sum() < 2:
            continue
        owners = np.array(gap_owner(_edges(pairs, (rose | mine).tolist())).to_list())
        owned += int((owners[mine] == planted).sum())
        total += int(mine.sum())
    assert total >= 60 and owned / total >= 0.9


def test_missing_column_is_named():
    with pytest.raises(KeyError, match="rose"):
        gap_owner(pl.DataFrame({"caller": ["a"], "callee": ["b"]}))
