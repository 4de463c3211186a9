"""The harder simulator (bookshop sessions): well-formed spans, reproducible, and actually harder
than the paper's (degraded bands inside the normal latency tail)."""

from __future__ import annotations

import numpy as np
import pytest

from tracesleuth import schema as S
from tracesleuth.errors import ParameterError
from tracesleuth.evaluation.bookshop import (ASYNC_TARGETS, BOOKSHOP_ENDPOINT, DEGRADABLE, DELAY_RANGE_MS,
                                             simulate_bookshop)
from tracesleuth.model import build_trace_table


@pytest.fixture(scope="module")
def session():
    return simulate_bookshop(n_requests=800, noised=True, random_state=11)


def test_spans_follow_the_schema_and_every_endpoint_is_there(session):
    assert session.spans.schema.equals(S.SPAN_SCHEMA)
    roots = session.spans.filter(session.spans[S.PARENT_SPAN_ID].is_null())
    ops = set(zip(roots[S.SERVICE].to_pylist(), roots[S.OPERATION].to_pylist()))
    assert {"GET /product/{id}", "GET /search", "POST /basket"} == {o for _, o in ops}
    assert roots.num_rows == 800


def test_same_seed_same_session():
    a = simulate_bookshop(n_requests=120, random_state=5)
    b = simulate_bookshop(n_requests=120, random_state=5)
    assert a.spans.equals(b.spans) and a.labels.equals(b.labels)
    assert not a.spans.equals(simulate_bookshop(n_requests=120, random_state=6).spans)


def test_degradations_follow_the_protocol(session):
    types = sorted(d.type for d in session.degradations)
    assert len(set(types)) == 2 and set(types) <= {1, 2, 3}
    for d in session.degradations:
        assert set(d.rpcs) <= set(DEGRADABLE)
        assert DELAY_RANGE_MS[0] * 1e6 <= d.delay_ns <= DELAY_RANGE_MS[1] * 1e6
        assert d.deviating_rpc in d.rpcs and d.async_rpc in ASYNC_TARGETS


def test_table_of_the_degraded_endpoint_drops_identifiers(session):
    table = build_trace_table(session.spans, session.endpoint)
    assert table.endpoint == BOOKSHOP_ENDPOINT
    dropped = dict(table.dropped_attributes)
    assert dropped["client.port"] == "identifier" and dropped["session.id"] == "identifier"
    assert "attr[customer.tier]" in table.categorical_columns
    truth = session.labels_for(table.frame["trace_id"])
    assert 0.12 < np.mean([t is not None for t in truth]) < 0.28


def test_degraded_bands_overlap_the_normal_tail():
    """Harder than the paper's: in most sessions the fastest degraded requests are faster than the
    slowest normal ones (no density gap separates them)."""
    overlaps = 0
    for seed in range(6):
        s = simulate_bookshop(n_requests=700, random_state=seed)
        table = build_trace_table(s.spans, s.endpoint)
        lat = table.frame["latency_ns"].to_numpy()
        affected = np.array([t is not None for t in s.labels_for(table.frame["trace_id"])])
        overlaps += lat[affected].min() < np.quantile(lat[~affected], 0.99)
    assert overlaps >= 5


def test_bad_parameters():
    with pytest.raises(ParameterError, match="'n_requests'"):
        simulate_bookshop(n_requests=0)
    with pytest.raises(ParameterError, match="'p_affected'"):
        simulate_bookshop(p_affected=0.7)
