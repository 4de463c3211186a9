"""MakeTrace (Aguilera et al. 2003): synthetic RPC logs with known paths, and the nesting on them."""

from __future__ import annotations

import pytest

from tracesleuth.analyses.paths import CausalPaths, recovery_rate
from tracesleuth.analyses.paths.maketrace import DEFAULT_TRACELETS, make_trace
from tracesleuth.analyses.paths.messages import path_key
from tracesleuth.errors import ParameterError


def test_a_log_holds_a_call_and_a_return_per_node_of_every_path():
    messages, truth = make_trace(duration_s=10, mean_gap_ms=100, random_state=1)
    nodes = {path_key(t.tree): path_key(t.tree).count("(") + path_key(t.tree).count(";") + 1 for t in DEFAULT_TRACELETS}
    assert set(truth) <= set(nodes)
    assert messages.height == 2 * sum(nodes[k] * n for k, n in truth.items())
    assert messages["timestamp_ns"].is_sorted()
    again, _ = make_trace(duration_s=10, mean_gap_ms=100, random_state=1)
    assert again.equals(messages)


def test_low_parallelism_is_recovered_and_loss_is_counted():
    messages, truth = make_trace(duration_s=200, mean_gap_ms=1000, random_state=2)
    res = CausalPaths().fit(messages).result_
    assert recovery_rate(truth, res.pattern_counts()) >= 0.99
    lossy, truth = make_trace(duration_s=60, mean_gap_ms=20, drop_rate=0.01, random_state=2)
    res = CausalPaths().fit(lossy).result_
    assert res.counts["returns_without_call"] > 0 and res.counts["never_answered"] > 0
    # the density penalty keeps a lost return from capturing later children (penalty 1: 3.7% measured)
    assert recovery_rate(truth, res.pattern_counts()) > 0.7
    assert recovery_rate(truth, CausalPaths(density=False).fit(lossy).result_.pattern_counts()) < 0.3


@pytest.mark.parametrize("bad", [{"drop_rate": 1.0}, {"delay_cv": -1}, {"mean_gap_ms": 0}, {"tracelets": ()}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ParameterError):
        make_trace(**bad)
