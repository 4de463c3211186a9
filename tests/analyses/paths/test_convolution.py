"""The convolution algorithm (Aguilera et al. 2003): spikes, the correlation, the causal graph."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tracesleuth.analyses.paths import CausalPaths
from tracesleuth.analyses.paths.convolution import _correlation, causal_graph, spikes
from tracesleuth.analyses.paths.synthetic import spaced_requests
from tracesleuth.errors import ParameterError

MS = 1_000_000


def test_spikes_need_n_sigma_and_a_dip_below_s_sigma_between_them():
    c = np.zeros(201)
    zero = 100
    c[zero + 10] = c[zero + 11] = 50.0   # one run above S: one spike, at its largest point
    c[zero + 11] = 60.0
    c[zero + 40] = 55.0                  # separated by points below S: a second spike
    c[zero + 60] = 2.0                   # too low to be a spike
    found = spikes(c, zero)
    assert [k for k, _ in found] == [11, 40]
    assert found[0][1] > found[1][1] > 4
    assert spikes(c, zero, min_messages=58) == [(11, found[0][1])]
    assert spikes(np.ones(21), 10) == []  # no spread: nothing stands out


def test_the_direct_sums_and_the_fft_give_the_same_correlation():
    rng = np.random.default_rng(3)
    steps, lag = 4000, 40
    sparse = [np.unique(rng.integers(0, steps, 200), return_counts=True) for _ in range(2)]
    dense = [np.unique(rng.integers(0, steps, 60000), return_counts=True) for _ in range(2)]
    for a, b in (sparse, dense):
        da, db = np.zeros(steps), np.zeros(steps)
        da[a[0]], db[b[0]] = a[1], b[1]
        ref = np.array([np.dot(da[max(0, -t): steps - max(0, t)], db[max(0, t): steps - max(0, -t)])
                        for t in range(-lag, lag + 1)])
        np.testing.assert_allclose(_correlation(a, b, lag, steps), ref, atol=1e-6)


def test_a_recurring_delay_becomes_a_causal_edge():
    rng = np.random.default_rng(0)
    starts = np.sort(rng.uniform(0, 60e9, 400)).astype(np.int64)
    rows = [(int(t), "<client>", "A", None, None) for t in starts]
    rows += [(int(t + 3 * MS + rng.integers(0, 200_000)), "A", "B", None, None) for t in starts]
    rows += [(int(t), "A", "C", None, None) for t in np.sort(rng.uniform(0, 60e9, 400)).astype(np.int64)]
    log = pl.DataFrame(rows, schema={"timestamp_ns": pl.Int64, "sender": pl.String, "receiver": pl.String,
                                     "kind": pl.String, "call_id": pl.String}, orient="row")
    graph = causal_graph(log, quantum_ns=MS // 10, max_delay_ns=50 * MS)
    assert [(e.cause, e.effect) for e in graph] == [(("<client>", "A"), ("A", "B"))]
    assert 3 * MS <= graph[0].delay_ns <= 3.2 * MS and graph[0].depth == 1


def test_convolution_finds_the_true_call_pairs_of_simulated_traffic():
    res = CausalPaths(algorithm="convolution", quantum_ns=MS, max_delay_ns=100 * MS).fit(
        spaced_requests(1000, 0.02, poisson=True)).result_
    assert res.graph_recall == 1.0 and res.graph_precision == 1.0
    assert res.to_frame().height == len(res.graph) and "causal edges" in res.describe()
    assert res.to_dict()["graph"][0]["cause"]


def test_a_quantum_too_fine_for_the_log_is_refused():
    log = pl.DataFrame({"timestamp_ns": [0, 10**15], "sender": ["a", "b"], "receiver": ["b", "a"],
                        "kind": [None, None], "call_id": [None, None]},
                       schema={"timestamp_ns": pl.Int64, "sender": pl.String, "receiver": pl.String,
                               "kind": pl.String, "call_id": pl.String})
    with pytest.raises(ParameterError, match="larger quantum_ns"):
        CausalPaths(algorithm="convolution").fit(log)
    with pytest.raises(ParameterError, match="s_sigma"):
        CausalPaths(algorithm="convolution", n_sigma=2.0, s_sigma=3.0).fit(log)


def test_200_ms_added_on_one_node_shows_in_both_algorithms():
    from tracesleuth.evaluation.protocols.paths import _added_delay

    row = _added_delay(100, 0).row(0, named=True)
    assert abs(row["nesting_after_ms"] - row["nesting_before_ms"] - 200) < 2
    assert abs(row["convolution_after_ms"] - row["convolution_before_ms"] - 200) <= 2
