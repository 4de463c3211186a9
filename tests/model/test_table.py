"""Exclusive times, call counts, signatures and repairs against hand-computed values."""

import polars as pl
import pytest

from spans import MS, span, table
from tracesleuth.errors import EmptyDataError, ParameterError
from tracesleuth.model import assemble, build_trace_table
from tracesleuth.model.table import exclusive_column as X, calls_column as C


def trace_one(tid="1"):
    return [
        span(tid, "1", None, "web", "home", 0, 100, instance="web-1", attributes={"http.method": "GET"}),
        span(tid, "2", "1", "a", "get", 10, 40, instance="a-1"),
        span(tid, "3", "1", "b", "get", 30, 60, instance="b-1"),          # overlaps a: union 10..60
        span(tid, "4", "1", "c", "get", 70, 80, instance="c-1"),
        span(tid, "5", "1", "c", "get", 82, 85, instance="c-2"),          # repeated call
        span(tid, "6", "1", "q", "publish", 86, 90, kind="producer"),     # asynchronous by kind
        span(tid, "7", "1", "f", "log", 88, 95, follows_from=True),       # FOLLOWS_FROM
        span(tid, "8", "1", "l", "late", 90, 130),                        # outlives its parent
        span(tid, "9", "2", "d", "query", 15, 25, kind="client"),
    ]


def trace_two(tid="2"):
    return [span(tid, "1", None, "web", "home", 0, 50, attributes={"http.method": "POST"}),
            span(tid, "2", "1", "a", "get", 5, 15)]


def row(tt, trace):
    return tt.frame.filter(pl.col("trace_id") == trace.rjust(32, "0")).to_dicts()[0]


def test_exclusive_times_hand_computed():
    tt = build_trace_table(table(trace_one() + trace_two()))
    assert tt.endpoint == "web:home" and tt.n_requests == 2
    r = row(tt, "1")
    assert r["latency_ns"] == 100 * MS
    assert r[X("web:home")] == 37 * MS          # 100 - |[10,60] u [70,80] u [82,85]|
    assert r[X("a:get")] == 20 * MS             # 30 - 10 (its child d)
    assert r[X("b:get")] == 30 * MS
    assert r[X("c:get")] == 13 * MS and r[C("c:get")] == 2
    assert r[X("d:query")] == 10 * MS
    assert r[X("q:publish")] == 4 * MS and r[X("f:log")] == 7 * MS and r[X("l:late")] == 40 * MS
    assert r["instance[c:get]"] == "c-1"         # the first call's instance
    r2 = row(tt, "2")
    assert r2[X("web:home")] == 40 * MS and r2[X("a:get")] == 10 * MS
    assert r2[X("b:get")] is None and r2[C("b:get")] is None   # absent is missing, not zero
    assert r["attr[http.method]"] == "GET" and r2["attr[http.method]"] == "POST"
    assert set(tt.continuous_columns) == {X(k) for k in tt.operations}


def test_a_server_span_closing_after_its_client_span_was_waited_for():
    """The server side of a call closes its span after sending the response, so it may end after
    the client span that waited for it: the client's exclusive time is then its time outside the
    server span up to the client's end (its gap), not its whole duration; a late child of any
    other kind still outlives a parent that did not wait."""
    spans = [
        span("1", "1", None, "web", "home", 0, 100, kind="server"),
        span("1", "2", "1", "web", "getcart", 10, 60, kind="client"),
        span("1", "3", "2", "cart", "getcart", 12, 63, kind="server"),      # ends 3 ms after its client
        span("1", "4", "1", "l", "late", 90, 130),                          # outlives its parent
    ]
    r = row(build_trace_table(table(spans)), "1")
    assert r[X("web:getcart")] == 2 * MS                 # 50 - (60 - 12): the gap before the server span
    assert r[X("cart:getcart")] == 51 * MS
    assert r[X("web:home")] == 50 * MS                   # 100 - [10, 60]; the late internal span is not waited for
    assert r[X("l:late")] == 40 * MS


def test_signature_ignores_timing_and_sibling_order():
    a = trace_one("1")
    b = [dict(s) for s in trace_one("3")]
    b[1], b[4] = b[4], b[1]
    for s in b:
        s["start_ns"] += 7 * MS
        s["end_ns"] += 9 * MS
    tt = build_trace_table(table(a + b + trace_two()))
    sigs = dict(zip(tt.frame["trace_id"].str.strip_chars_start("0"), tt.frame["signature"]))
    assert sigs["1"] == sigs["3"] != sigs["2"]
    assert sigs["2"] == "web:home(a:get)"
    assert sigs["1"].startswith("web:home(a:get(d:query),b:get,c:get,c:get,")


def test_signatures_match_a_recursive_definition_on_random_trees():
    import random

    rng = random.Random(7)
    spans, expected = [], {}
    for t in range(60):
        tid, ops, n = str(t + 1), ["x", "y", "z"], rng.randint(1, 12)
        parents = [None] + [rng.randrange(i) for i in range(1, n)]  # node i hangs below an earlier one
        names = ["home"] + [rng.choice(ops) for _ in range(1, n)]
        for i in range(n):
            spans.append(span(tid, str(i + 1), None if parents[i] is None else str(parents[i] + 1),
                              "web" if i == 0 else "s", names[i], i, 1000 - i))

        def text(i):
            key = ("web:" if i == 0 else "s:") + names[i]
            kids = sorted(text(j) for j in range(n) if parents[j] == i)
            return f"{key}({','.join(kids)})" if kids else key

        expected[tid.rjust(32, "0")] = text(0)
    tt = build_trace_table(table(spans))
    assert dict(zip(tt.frame["trace_id"], tt.frame["signature"])) == expected


def test_endpoint_subtree_requests():
    tt = build_trace_table(table(trace_one() + trace_two()), endpoint="a:get")
    assert tt.n_requests == 2
    lat = sorted(tt.frame["latency_ns"].to_list())
    assert lat == [10 * MS, 30 * MS]
    assert X("web:home") not in tt.frame.columns
    with pytest.raises(ParameterError, match="matches no operation"):
        build_trace_table(table(trace_one()), endpoint="nope")
    with pytest.raises(ParameterError, match="several services"):
        build_trace_table(table(trace_one()), endpoint="get")


def test_clock_skew_is_corrected_like_jaeger():
    rows = [
        span("5", "1", None, "a", "root", 90, 210, instance="h1"),
        span("5", "2", "1", "a", "post", 100, 200, kind="client", instance="h1"),
        span("5", "3", "2", "b", "post", 30, 120, instance="h2"),         # 70 ms early: skewed clock
        span("5", "4", "3", "b", "async", 40, 60, kind="internal", instance="h2"),
    ]
    df, rep = assemble(table(rows))
    got = dict(zip(df["span_id"].str.strip_chars_start("0"), zip(df["start_ns"], df["end_ns"], df["skew_ns"])))
    base = 1_700_000_000_000 * MS
    assert got["3"] == (base + 105 * MS, base + 195 * MS, 75 * MS)   # centred in its parent
    assert got["4"] == (base + 115 * MS, base + 135 * MS, 75 * MS)   # same host inherits the delta
    assert rep.skew_corrected_spans == 1 and rep.skew_shifted_spans == 2 and rep.max_abs_skew_ns == 75 * MS
    assert rep.skew_by_service == {"a -> b": 1}
    tt = build_trace_table(table(rows))
    r = tt.frame.to_dicts()[0]
    assert r[X("a:post")] == 10 * MS and r[X("b:post")] == 70 * MS


@pytest.mark.parametrize("machines, corrected", [
    ((None, None), True),                    # instances differ, machines unknown: skew
    (("node-1", "node-2"), True),            # two machines
    (("node-1", "node-1"), False),           # two processes of one machine share its clock
])
def test_skew_needs_another_machine(machines, corrected):
    """A server span ending after its client is corrected only across machines (Jaeger compares
    the ``ip`` tags, Zipkin the endpoint addresses), not between processes of one machine."""
    attrs = [{"host.name": m} if m else None for m in machines]
    rows = [span("8", "1", None, "a", "call", 100, 200, kind="client", instance="p1", attributes=attrs[0]),
            span("8", "2", "1", "b", "serve", 130, 210, instance="p2", attributes=attrs[1])]
    df, rep = assemble(table(rows))
    assert (rep.skew_corrected_spans == 1) is corrected
    assert df["skew_ns"].to_list() == [0, -20 * MS if corrected else 0]


def test_zipkin_endpoints_on_one_ip_share_a_clock():
    rows = [span("9", "1", None, "a", "r", 100, 150, instance="10.0.0.1:8080"),
            span("9", "2", "1", "b", "s", 90, 140, instance="10.0.0.1:9090"),
            span("9", "3", "1", "c", "s", 90, 140, instance="10.0.0.2:9090")]
    df, rep = assemble(table(rows))
    assert df["skew_ns"].to_list() == [0, 0, 10 * MS]


def test_longer_child_only_moves_start():
    rows = [span("6", "1", None, "a", "r", 100, 150, instance="h1"),
            span("6", "2", "1", "b", "s", 80, 160, instance="h2")]
    df, rep = assemble(table(rows))
    assert df["skew_ns"].to_list() == [0, 20 * MS]


def test_duplicates_shared_spans_orphans_and_roots():
    rows = [
        span("7", "1", None, "a", "root", 0, 100),
        span("7", "1", None, "a", "root", 0, 100),                        # exact copy
        span("7", "x", "1", "a", "call", 10, 50, kind="client"),
        span("7", "x", "1", "b", "handle", 12, 48, kind="server"),        # Zipkin shared id
        span("7", "c", "x", "b", "db", 20, 30, kind="client"),            # recorded by the server side
        span("7", "o", "dead", "z", "lost", 60, 70),                      # orphan
    ]
    df, rep = assemble(table(rows))
    assert rep.exact_duplicates == 1 and rep.shared_spans_split == 1 and rep.orphan_spans == 1
    assert rep.traces_with_several_roots == 1 and df.height == 5
    server = df.filter(pl.col("operation") == "handle").to_dicts()[0]
    assert server["parent_span_id"] == "x".rjust(16, "0") and server["span_id"] != "x".rjust(16, "0")
    db = df.filter(pl.col("operation") == "db").to_dicts()[0]
    assert db["parent_span_id"] == server["span_id"]
    tt = build_trace_table(table(rows))
    r = tt.frame.to_dicts()[0]
    assert r[X("a:call")] == 4 * MS and r[X("b:handle")] == 26 * MS and r[X("b:db")] == 10 * MS
    assert r["incomplete"] is True
    # the orphan stays in the assembled spans (counted above) but its place in the request is
    # unknown, so it is not attributed to the request; the request is flagged instead
    assert X("z:lost") not in tt.frame.columns
    assert tt.endpoints == {"a:root": 1}          # traces, not root spans: the exact copy is not counted


def test_parent_links_survive_a_key_collision():
    """Parents are found by a key of the trace code and the top bits of the span id hash; when
    two spans of a trace share a key, the links are made again by (trace, span id hash)."""
    import numpy as np

    from tracesleuth.model._codes import _SpanKeys

    trace = np.array([0, 0, 0, 1, 1], dtype=np.int32)
    has_parent = np.array([False, True, True, False, True])
    # two traces: 1 bit of trace code, so the keys drop the lowest hash bit; 10 and 11 collide
    span_hash = np.array([10, 11, 12, 10, 13], dtype=np.uint64)
    parent_hash = np.array([0, 10, 11, 0, 10], dtype=np.uint64)
    keys = _SpanKeys(trace, span_hash, parent_hash)
    shared, shared_keys = keys.shared()
    assert shared.tolist() == [0, 1] and len(shared_keys) == 1
    assert keys.parents(trace, span_hash, parent_hash, has_parent).tolist() == [-1, 0, 1, -1, 3]
    # the same in no order (the keys are sorted by polars, not by runs)
    order = np.array([3, 1, 4, 0, 2])
    arrays = trace[order], span_hash[order], parent_hash[order]
    assert _SpanKeys(*arrays, grouped=False).parents(*arrays, has_parent[order]).tolist() == [-1, 3, 0, -1, 1]
    # a key match that is not the same trace and span id hash is never taken as a link
    arrays = trace, np.array([10, 12, 14, 10, 16], np.uint64), np.array([0, 10, 11, 0, 11], np.uint64)
    # (parent 11 has the key of span 0 in trace 0, of span 3 in trace 1)
    assert _SpanKeys(*arrays).parents(*arrays, has_parent).tolist() == [-1, 0, -1, -1, -1]
    # dropping spans keeps the other keys sorted
    keys = _SpanKeys(trace, span_hash, parent_hash)
    keep = np.array([True, False, True, True, True])
    keys.drop(keep)
    arrays = trace[keep], span_hash[keep], parent_hash[keep]
    assert keys.parents(*arrays, has_parent[keep]).tolist() == [-1, -1, -1, 2]


def test_id_hashes_are_exact_for_hexadecimal_ids_and_one_function_for_all_columns():
    import numpy as np
    import pyarrow as pa

    from tracesleuth.model._codes import id_hash, id_hashes, mix64

    ids = ["00000000000000ff", "a4424f20bffee416", "0000000000000000"]
    spans = pa.chunked_array([pa.array(["ffffffffffffffff"] + ids[:2]).slice(1), pa.array(ids[2:])])
    parents = pa.chunked_array([pa.array([None, ids[0], ids[1]], pa.large_string())])
    (h, p), exact = id_hashes(spans, parents)
    assert exact and len(set(h.tolist())) == 3 and p[1:].tolist() == h[:2].tolist()
    assert id_hash(pl.Series(ids), True).tolist() == h.tolist()
    # the id's 8 bytes, permuted, then mixed: a bijection
    assert h[1] == mix64(np.array([int("".join(["a4424f20bffee416"[i:i + 2] for i in (6, 4, 2, 0, 14, 12, 10, 8)]),
                                        16)], np.uint64))[0]
    # one id that is not 16 hexadecimal digits (here upper case): every column is hashed by polars
    (h2, p2), exact = id_hashes(spans, pa.chunked_array([pa.array([None, "A4424F20BFFEE416", ids[1]])]))
    assert not exact and h2[0] != h[0] and p2[2] == h2[1] and p2[1] != h2[1]
    assert id_hash(pl.Series(ids), False).tolist() == h2.tolist()


def test_bad_input_errors():
    with pytest.raises(EmptyDataError):
        build_trace_table(table([]))
    only_orphans = [span("8", "2", "9", "a", "x", 0, 10)]
    with pytest.raises(EmptyDataError, match="no root"):
        build_trace_table(table(only_orphans))


def assert_same_table(a, b):
    assert a.frame.equals(b.frame, null_equal=True) and a.frame.columns == b.frame.columns
    assert (a.endpoint, a.operations, a.endpoints, a.assembly) == (b.endpoint, b.operations, b.endpoints, b.assembly)


@pytest.mark.parametrize("partition_spans", [1, 2, 5, 9, 14])
def test_a_table_built_in_partitions_is_the_same_table(partition_spans):
    """Partitions of whole traces, built one after another, give the table of one build:
    operations absent from a partition are null, attribute columns are chosen over all
    requests, repairs are counted and shared spans renamed alike."""
    rows = (trace_one("1") + trace_two("2") + trace_one("3")
            + [span("7", "1", None, "web", "home", 0, 100, attributes={"http.method": "PUT"}),
               span("7", "1", None, "web", "home", 0, 100),                   # exact copy
               span("7", "x", "1", "web", "call", 10, 50, kind="client"),
               span("7", "x", "1", "b", "handle", 12, 48, kind="server"),     # shared id
               span("7", "c", "x", "b", "db", 20, 30, kind="client"),
               span("8", "1", None, "cron", "tick", 0, 10)]                   # another root operation
            + trace_two("9"))
    whole = build_trace_table(table(rows))
    parts = build_trace_table(table(rows), partition_spans=partition_spans)
    assert_same_table(parts, whole)
    assert whole.n_requests == 5 and whole.endpoints == {"web:home": 5, "cron:tick": 1}
    assert whole.assembly.exact_duplicates == 1 and whole.assembly.shared_spans_split == 1
    assert_same_table(build_trace_table(table(rows), "cron:tick", partition_spans=partition_spans),
                      build_trace_table(table(rows), "cron:tick"))


def test_trace_partitions_hold_whole_traces():
    import numpy as np

    from tracesleuth.model.table import trace_partitions

    rows = trace_one("1") + trace_two("2") + trace_one("3") + trace_two("4")   # 9, 2, 9, 2 spans
    t = table(rows)
    parts = trace_partitions(t, 10)
    assert [len(p) for p in parts] == [11, 9, 2]       # traces starting at spans 0 and 9, 11, 20
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(t.num_rows))
    trace_ids = t.column("trace_id").to_numpy(zero_copy_only=False)
    assert [set(trace_ids[p]) for p in parts] == [{"1".rjust(32, "0"), "2".rjust(32, "0")},
                                                  {"3".rjust(32, "0")}, {"4".rjust(32, "0")}]
    assert all((np.diff(p) > 0).all() for p in parts)
    with pytest.raises(ParameterError):
        build_trace_table(t, partition_spans=0)


def test_take_rows_slices_a_run_and_takes_the_rest():
    import numpy as np
    import pyarrow as pa

    from tracesleuth.model._codes import take_rows

    data = pa.chunked_array([[0, 1, 2], [3, 4], [5, 6, 7]])
    assert take_rows(data, np.array([2, 3, 4])).to_pylist() == [2, 3, 4]
    assert take_rows(data, np.array([1, 4, 6])).to_pylist() == [1, 4, 6]
    assert take_rows(data, np.array([6, 1])).to_pylist() == [6, 1]
    assert take_rows(data, np.array([], dtype=np.int64)).to_pylist() == []
    table = pa.table({"a": data})
    assert take_rows(table, np.array([5, 6, 7])).column("a").to_pylist() == [5, 6, 7]
    # Any rows, repeated and in any order, from columns chunked differently from each other.
    table = pa.table({"a": data, "b": pa.chunked_array([list("abcde"), list("fgh")])})
    rng = np.random.default_rng(0)
    for size in (1, 2, 5, 12, 30):
        rows = rng.integers(0, 8, size)
        for asked in (rows, np.sort(rows)):
            taken = take_rows(table, asked)
            assert taken.column("a").to_pylist() == asked.tolist()
            assert taken.column("b").to_pylist() == ["abcdefgh"[i] for i in asked]
            assert take_rows(data, asked).to_pylist() == asked.tolist()
