"""The vectorized trace table against a plain per-span implementation, on real recorded traces."""

from collections import defaultdict

import polars as pl
import pytest

from tracesleuth.io import read_spans
from tracesleuth.model import assemble, build_trace_table
from tracesleuth.model.table import calls_column, exclusive_column


def naive_exclusive(assembled: pl.DataFrame, endpoint: str) -> dict:
    """{(trace_id, op): (exclusive_ns, calls)} by walking each span's children one by one."""
    rows = assembled.to_dicts()
    children = defaultdict(list)
    for i, r in enumerate(rows):
        if r["parent_row"] is not None:
            children[r["parent_row"]].append(i)
    out = defaultdict(lambda: [0, 0])

    def walk(i, trace):
        r = rows[i]
        ivs = []
        for c in children[i]:
            k = rows[c]
            if k["kind"] in ("producer", "consumer") or k["follows_from"] or k["end_ns"] > r["end_ns"]:
                continue
            ivs.append((max(k["start_ns"], r["start_ns"]), k["end_ns"]))
        covered, cur_s, cur_e = 0, None, None
        for s, e in sorted(ivs):
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    covered += max(cur_e - cur_s, 0)
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            covered += max(cur_e - cur_s, 0)
        key = (trace, f"{r['service']}:{r['operation']}")
        out[key][0] += max(r["end_ns"] - r["start_ns"] - covered, 0)
        out[key][1] += 1
        for c in children[i]:
            walk(c, trace)

    for i, r in enumerate(rows):
        if r["parent_row"] is None and f"{r['service']}:{r['operation']}" == endpoint:
            walk(i, r["trace_id"])
    return out


def check_against_naive(spans, endpoint=None):
    tt = build_trace_table(spans, endpoint)
    assembled, _ = assemble(spans)
    expected = naive_exclusive(assembled, tt.endpoint)
    got = {}
    for r in tt.frame.iter_rows(named=True):
        for op in tt.operations:
            if r[exclusive_column(op)] is not None:
                got[(r["trace_id"], op)] = [r[exclusive_column(op)], r[calls_column(op)]]
    assert got == {k: v for k, v in expected.items()}
    return tt


def test_trainticket_window_matches_naive(shared_data):
    f = shared_data / "nezha/trainticket/2023-01-29/trace/08_43_trace.csv.gz"
    result = read_spans(f)
    tt = check_against_naive(result)
    assert tt.endpoint == "ts-gateway-service:/*" and tt.n_requests == 53


@pytest.mark.parametrize("name", ["smartthings-mobile-web-install.json", "smartthings-oauth-authorization.json",
                                  "yelp.json", "skew.json", "messaging2.json"])
def test_zipkin_production_traces_match_naive(shared_data, name):
    pytest.importorskip("tracesleuth.io.zipkin")
    result = read_spans(shared_data / "zipkin-lens" / name)
    tt = check_against_naive(result)
    assert tt.n_requests >= 1


def test_trainticket_day_built_in_partitions_is_the_same_table(shared_data):
    """The whole TrainTicket day (329k spans, 4,483 requests, 244 operations) in partitions of
    about 40,000 spans gives the table of one build."""
    spans = read_spans(shared_data / "nezha/trainticket/2023-01-29/trace").spans
    whole = build_trace_table(spans)
    parts = build_trace_table(spans, partition_spans=40_000)
    assert parts.frame.equals(whole.frame, null_equal=True) and parts.frame.columns == whole.frame.columns
    assert (parts.operations, parts.endpoints, parts.assembly) == (whole.operations, whole.endpoints, whole.assembly)
    assert whole.n_requests == 4483


def test_trainticket_day_in_any_row_order_is_the_same_table(shared_data):
    """Spans in no order (the sorts then take their other path) give the table of spans in file order."""
    import numpy as np
    import pyarrow as pa

    spans = read_spans(shared_data / "nezha/trainticket/2023-01-29/trace").spans
    shuffled = spans.take(pa.array(np.random.default_rng(0).permutation(spans.num_rows)))
    a, b = build_trace_table(spans), build_trace_table(shuffled)
    assert a.frame.equals(b.frame, null_equal=True) and a.frame.columns == b.frame.columns
    assert (a.operations, a.endpoints, a.assembly) == (b.operations, b.endpoints, b.assembly)


@pytest.mark.parametrize("name", ["smartthings-mobile-web-install.json", "yelp.json", "skew.json",
                                  "messaging2.json"])
def test_zipkin_production_traces_built_in_partitions(shared_data, name):
    pytest.importorskip("tracesleuth.io.zipkin")
    spans = read_spans(shared_data / "zipkin-lens" / name).spans
    whole = build_trace_table(spans)
    parts = build_trace_table(spans, partition_spans=3)
    assert parts.frame.equals(whole.frame, null_equal=True) and parts.assembly == whole.assembly


@pytest.mark.parametrize("name", ["smartthings-mobile-web-install.json", "yelp.json", "skew.json",
                                  "messaging2.json"])
def test_spans_read_from_a_store_dictionary_encoded_give_the_same_table(shared_data, tmp_path, name):
    """A store reads the name columns dictionary-encoded, one dictionary per part (here parts of
    5 spans): the table and the assembled spans are those of the spans as the reader gave them."""
    from tracesleuth.io.store import SpanStore

    pytest.importorskip("tracesleuth.io.zipkin")
    spans = read_spans(shared_data / "zipkin-lens" / name).spans
    store = SpanStore(tmp_path / "store")
    store.append_spans(spans.to_batches(max_chunksize=5), part_spans=5)
    stored = store.read_spans()
    assert stored.column("service").type.value_type == "string"
    assert stored.column("service").num_chunks == -(-spans.num_rows // 5)
    a, b = build_trace_table(spans), build_trace_table(stored)
    assert a.frame.equals(b.frame, null_equal=True) and a.frame.columns == b.frame.columns
    assert (a.operations, a.endpoints, a.assembly) == (b.operations, b.endpoints, b.assembly)
    (fa, ra), (fb, rb) = assemble(spans), assemble(stored)
    assert fa.equals(fb, null_equal=True) and fa.schema == fb.schema and ra == rb
