"""The call view (``TraceTable.calls``): hand-computed values, and the vectorized view against a
plain per-span implementation on real recorded traces."""

from collections import defaultdict

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from spans import MS, event, span, table
from tracesleuth import schema as S
from tracesleuth.errors import ParameterError
from tracesleuth.io import read_spans
from tracesleuth.model import TraceTable, assemble, build_trace_table
from tracesleuth.model.flows import CALL_COLUMNS

TRAINTICKET_08 = "nezha/trainticket/2023-01-29/trace"


def rpc_trace(tid="1"):
    return [
        span(tid, "1", None, "web", "home", 0, 100, instance="web-1"),
        span(tid, "2", "1", "web", "call", 10, 50, kind="client", instance="web-1"),
        span(tid, "3", "2", "b", "handle", 12, 48, kind="server", instance="b-1"),      # gap 4 ms
        span(tid, "4", "3", "b", "db", 20, 30, kind="client", instance="b-1"),          # no server child
        span(tid, "5", "1", "web", "retry", 55, 95, kind="client", instance="web-1"),
        span(tid, "6", "5", "c", "serve", 60, 70, kind="server", instance="c-1"),       # two attempts:
        span(tid, "7", "5", "d", "serve", 65, 80, kind="server", instance="d-1"),       # union 60..80
        span(tid, "8", "1", "web", "step", 96, 99, kind="internal"),
        span(tid, "9", "1", "web", "emit", 97, 98, kind="producer"),
        span(tid, "a", "9", "q", "consume", 97, 130, kind="consumer", instance="q-1"),  # outlives the request
    ]


def calls_of(tt, trace):
    return {r["span_id"].lstrip("0"): r for r in tt.calls().filter(pl.col("trace_id") == trace.rjust(32, "0"))
            .iter_rows(named=True)}


def test_call_view_hand_computed():
    tt = build_trace_table(table(rpc_trace("1") + rpc_trace("2")))
    calls = tt.calls()
    assert calls.columns == list(CALL_COLUMNS) and calls.height == 20
    assert calls.schema[S.REQUEST] == pl.Int64 and calls.schema[S.GAP_NS] == pl.Int64
    c = calls_of(tt, "1")
    assert c["1"]["depth"] == 0 and c["1"]["caller_key"] is None and c["1"]["start_offset_ns"] == 0
    assert c["1"]["exclusive_ns"] == (100 - 40 - 40 - 3) * MS        # the producer is not waited for
    assert (c["2"]["caller_key"], c["2"]["depth"], c["2"]["start_offset_ns"]) == ("web:home", 1, 10 * MS)
    assert (c["2"]["server_service"], c["2"]["gap_ns"], c["2"]["exclusive_ns"]) == ("b", 4 * MS, 4 * MS)
    assert (c["3"]["caller_key"], c["3"]["depth"], c["3"]["server_service"], c["3"]["gap_ns"]) == (
        "web:call", 2, None, None)
    assert (c["4"]["server_service"], c["4"]["gap_ns"], c["4"]["depth"]) == (None, None, 3)   # a database call
    assert (c["5"]["server_service"], c["5"]["gap_ns"]) == ("c", 20 * MS)     # earliest server; union covered
    assert c["8"]["server_service"] is None and c["9"]["server_service"] is None
    assert c["a"]["duration_ns"] == 33 * MS and c["a"]["caller_key"] == "web:emit"
    assert (c["6"]["instance"], c["6"]["kind"], c["6"]["service"], c["6"]["operation"]) == (
        "c-1", "server", "c", "serve")
    assert c["6"]["parent_span_id"] == "5".rjust(16, "0")
    # Rows: by request, then start offset, then depth.
    assert calls.select(pl.col("request").diff().min()).item() >= 0
    first = calls.filter(pl.col("request") == 0)
    assert first["start_offset_ns"].is_sorted()
    # The exclusive times per request and operation are the table's.
    assert_matches_table(tt)


def test_kinds_unspecified_a_call_to_another_service_is_a_server_call():
    rows = [span("1", "1", None, "gw", "/*", 0, 100, kind="unspecified"),
            span("1", "2", "1", "gw", "HTTP POST", 5, 95, kind="unspecified"),       # same service: a step
            span("1", "3", "2", "b", "/api", 10, 80, kind="unspecified"),            # another service: a call
            span("1", "4", "2", "b", "/later", 20, 30, kind="unspecified", follows_from=True)]
    c = calls_of(build_trace_table(table(rows)), "1")
    assert c["1"]["server_service"] is None and c["1"]["gap_ns"] is None
    assert c["2"]["server_service"] == "b" and c["2"]["gap_ns"] == 20 * MS      # FOLLOWS_FROM not a call
    assert c["3"]["server_service"] is None


def test_a_request_below_the_root_has_offsets_and_depths_from_its_entry_span():
    tt = build_trace_table(table(rpc_trace("1")), endpoint="web:call")
    calls = tt.calls()
    assert tt.n_requests == 1 and calls["span_id"].str.strip_chars_start("0").to_list() == ["2", "3", "4"]
    assert calls["depth"].to_list() == [0, 1, 2] and calls["start_offset_ns"].to_list() == [0, 2 * MS, 10 * MS]
    assert calls["caller_key"].to_list() == [None, "web:call", "b:handle"]
    assert calls["parent_span_id"][0] == "1".rjust(16, "0")   # the entry span's caller is outside the request


def test_zipkin_shared_span_and_skew_use_the_tables_repairs():
    rows = [span("7", "1", None, "a", "root", 0, 100),
            span("7", "x", "1", "a", "call", 10, 50, kind="client", instance="h1"),
            span("7", "x", "1", "b", "handle", 2, 38, kind="server", instance="h2"),     # shared id, skewed
            span("7", "c", "x", "b", "db", 10, 20, kind="client", instance="h2")]
    tt = build_trace_table(table(rows))
    c = tt.calls()
    handle = c.filter(pl.col("operation_key") == "b:handle").to_dicts()[0]
    assert handle["caller_key"] == "a:call" and handle["span_id"] != "x".rjust(16, "0")
    assert handle["start_offset_ns"] == 12 * MS                       # centred in its client after correction
    call = c.filter(pl.col("operation_key") == "a:call").to_dicts()[0]
    assert (call["server_service"], call["gap_ns"]) == ("b", 4 * MS)
    assert_matches_table(tt)


def test_call_view_is_cached_partition_independent_and_needs_spans():
    rows = rpc_trace("1") + rpc_trace("2") + rpc_trace("3")
    tt = build_trace_table(table(rows))
    assert tt.calls() is tt.calls()
    for p in (1, 4, 11):
        assert build_trace_table(table(rows), partition_spans=p).calls().equals(tt.calls(), null_equal=True)
    with pytest.raises(ParameterError, match="holds no spans"):
        TraceTable(frame=tt.frame, endpoint=tt.endpoint, operations=tt.operations).calls()


def _instance_numbers(spans) -> pl.DataFrame:
    """A span column: the number in the instance name of the spans that have one."""
    frame = pl.from_arrow(S.plain_spans(spans.select([S.TRACE_ID, S.SPAN_ID, S.INSTANCE])))
    return frame.drop_nulls(S.INSTANCE).select(S.TRACE_ID, S.SPAN_ID, z=pl.col(S.INSTANCE).str.extract(r"(\d+)")
                                               .cast(pl.Int64), a=pl.lit(1.0))


def test_span_columns_are_joined_by_span_id_whatever_the_partitioning():
    rows = rpc_trace("1") + rpc_trace("2") + rpc_trace("3")
    tt = build_trace_table(table(rows))
    calls = tt.calls(span_columns=_instance_numbers)
    assert calls.columns == [*CALL_COLUMNS, "a", "z"] and calls.drop("a", "z").equals(tt.calls(), null_equal=True)
    assert calls.filter(pl.col(S.INSTANCE).is_null())["z"].null_count() == calls[S.INSTANCE].null_count() > 0
    assert calls.filter(pl.col(S.INSTANCE) == "web-1")["z"].to_list() == [1] * 9
    for p in (1, 4, 11):
        assert build_trace_table(table(rows), partition_spans=p).calls(span_columns=_instance_numbers).equals(
            calls, null_equal=True)
    with pytest.raises(ValueError, match="call-view column"):
        tt.calls(span_columns=lambda spans: _instance_numbers(spans).rename({"z": S.DEPTH}))


def failing_trace(tid="1"):
    """A request whose spans fail in each way: status error (b), an exception event with the status
    left unset (c: handled, typed), an untyped exception after a plain event (d), a plain event only
    (e), two exceptions (f: the first's type counts)."""
    exc = lambda at, kind=None: event(S.EXCEPTION_EVENT, at, {S.ATTR_EXCEPTION_TYPE: kind} if kind else {})  # noqa: E731
    return [
        span(tid, "1", None, "web", "home", 0, 100),
        span(tid, "2", "1", "b", "pay", 10, 20, status="error", status_message="declined"),
        span(tid, "3", "1", "c", "stock", 20, 30, events=[exc(25, "KeyError")]),
        span(tid, "4", "1", "d", "ship", 30, 40, status="ok", events=[event("retry", 31), exc(35)]),
        span(tid, "5", "1", "e", "mail", 40, 50, events=[event("cache.miss", 41, {"key": "x"})]),
        span(tid, "6", "1", "f", "log", 50, 60, events=[exc(51, "TimeoutError"), exc(52, "ValueError")]),
    ]


def test_a_span_with_an_exception_event_fails_whatever_its_status():
    tt = build_trace_table(table(failing_trace("1") + failing_trace("2")[:1] + [
        span("3", "1", None, "web", "home", 0, 100), span("3", "2", "1", "e", "mail", 40, 50,
                                                           events=[event("cache.miss", 41)])]))
    assert tt.frame.sort(S.TRACE_ID)[S.ERROR].to_list() == [True, False, False]
    c = calls_of(tt, "1")
    assert {k: (r[S.ERROR], r[S.EXCEPTION_TYPE]) for k, r in c.items()} == {
        "1": (False, None), "2": (True, None), "3": (True, "KeyError"), "4": (True, None), "5": (False, None),
        "6": (True, "TimeoutError")}
    assert tt.calls().schema[S.EXCEPTION_TYPE] == pl.String


def test_spans_without_events_read_as_without_exceptions():
    """Spans of a store written before events were kept (the column null) or with none at all."""
    spans = table(failing_trace("1"))
    for old in (spans.set_column(spans.column_names.index(S.EVENTS), S.EVENTS,
                                 pa.nulls(spans.num_rows, spans.schema.field(S.EVENTS).type)),
                spans.drop_columns(list(S.LATER_SPAN_COLUMNS))):
        tt = build_trace_table(old)
        assert tt.frame[S.ERROR].to_list() == [True]  # b's status
        assert tt.calls()[S.ERROR].to_list() == [False, True, False, False, False, False]
        assert tt.calls()[S.EXCEPTION_TYPE].null_count() == 6


def test_instance_latencies():
    tt = build_trace_table(table(rpc_trace("1") + rpc_trace("2")))
    lat = tt.instance_latencies()
    assert lat.columns == ["operation_key", "instance", "request", "span_id", "start_offset_ns", "duration_ns",
                           "exclusive_ns", "gap_ns"]
    assert lat.height == tt.calls().height
    keys = lat.select("operation_key", "instance").rows()
    assert keys == sorted(keys, key=lambda k: (k[0], k[1] is None, k[1] or ""))
    c = lat.filter(pl.col("operation_key") == "c:serve")
    assert c["instance"].to_list() == ["c-1", "c-1"] and c["duration_ns"].to_list() == [10 * MS, 10 * MS]
    assert c["request"].to_list() == [0, 1]


# --- against a plain per-span implementation on real data ---------------------------------------


def naive_calls(spans, tt) -> dict:
    """{(trace_id, span_id): call row} by walking each span's ancestors and children one by one."""
    assembled, _ = assemble(spans)
    rows = assembled.to_dicts()
    children = defaultdict(list)
    for i, r in enumerate(rows):
        if r["parent_row"] is not None:
            children[r["parent_row"]].append(i)
    row_of = {(t, s): i for i, (t, s) in enumerate(zip(tt.frame["trace_id"], tt.frame["span_id"]))}
    key = [f"{r['service']}:{r['operation']}" for r in rows]
    out = {}
    for i, r in enumerate(rows):
        entry, j = None, i
        while j is not None:  # the outermost ancestor-or-self of the endpoint's operation
            if key[j] == tt.endpoint:
                entry = j
            j = rows[j]["parent_row"]
        if entry is None:
            continue
        sync, servers = [], []
        for c in children[i]:
            k = rows[c]
            if k["kind"] not in ("producer", "consumer") and not k["follows_from"] and k["end_ns"] <= r["end_ns"]:
                sync.append((max(k["start_ns"], r["start_ns"]), k["end_ns"]))
            rpc = ((r["kind"] == "client" and k["kind"] == "server")
                   or (r["kind"] in ("client", "unspecified") and k["kind"] in ("server", "unspecified")
                       and k["service"] != r["service"]))
            if rpc and not k["follows_from"]:
                s = min(max(k["start_ns"], r["start_ns"]), r["end_ns"])
                servers.append((s, max(min(k["end_ns"], r["end_ns"]), s), c))
        duration = r["end_ns"] - r["start_ns"]
        gap = server = None
        if servers:
            gap = duration - union_length(servers)
            server = rows[min(servers, key=lambda x: (rows[x[2]]["start_ns"], x[2]))[2]]["service"]
        e = rows[entry]
        out[(r["trace_id"], r["span_id"])] = {
            "trace_id": r["trace_id"], "request": row_of[(e["trace_id"], e["span_id"])], "span_id": r["span_id"],
            "parent_span_id": r["parent_span_id"], "operation_key": key[i], "service": r["service"],
            "operation": r["operation"], "instance": r["instance"], "kind": r["kind"],
            "follows_from": bool(r["follows_from"]), "depth": r["depth"] - e["depth"], "start_offset_ns": r["start_ns"] - e["start_ns"],
            "duration_ns": duration, "exclusive_ns": max(duration - union_length(sync), 0),
            "error": r["status"] == "error" or any(ev["name"] == "exception" for ev in r["events"] or []),
            "exception_type": naive_exception_type(r["events"]),
            "caller_key": None if i == entry else key[r["parent_row"]],
            "server_service": server, "gap_ns": gap}
    return out


def naive_exception_type(events):
    """``exception.type`` of the first exception event, one event at a time."""
    for ev in events or []:
        if ev["name"] == "exception":
            return next((a["str"] for a in ev["attributes"] or [] if a["key"] == "exception.type"), None)
    return None


def union_length(intervals) -> int:
    total, cur = 0, None
    for s, e, *_ in sorted(intervals):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += max(cur[1] - cur[0], 0)
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (max(cur[1] - cur[0], 0) if cur else 0)


def assert_matches_table(tt):
    """Summed per request and operation, the calls give the table's exclusive_ns[K] and calls[K]."""
    per = tt.calls().group_by("request", "operation_key").agg(pl.col("exclusive_ns").sum(), pl.len().alias("n"))
    got = {(r, k): (x, n) for r, k, x, n in per.iter_rows()}
    want = {}
    for i, row in enumerate(tt.frame.iter_rows(named=True)):
        for op in tt.operations:
            if row[S.exclusive_column(op)] is not None:
                want[(i, op)] = (row[S.exclusive_column(op)], row[S.calls_column(op)])
    assert got == want


def check_against_naive(spans, endpoint=None):
    tt = build_trace_table(spans, endpoint)
    calls = tt.calls()
    expected = naive_calls(spans, tt)
    got = {(r["trace_id"], r["span_id"]): r for r in calls.iter_rows(named=True)}
    assert len(got) == calls.height and got.keys() == expected.keys()
    for k in expected:
        assert got[k] == expected[k], k
    order = calls.select("request", "start_offset_ns", "depth").rows()
    assert order == sorted(order)
    assert_matches_table(tt)
    return tt


@pytest.mark.parametrize("endpoint", [None, "ts-travel-service:/api/v1/travelservice/trips/left"])
def test_trainticket_window_matches_naive(shared_data, endpoint):
    files = sorted((shared_data / TRAINTICKET_08).glob("08_4*_trace.csv.gz"))
    tt = check_against_naive(read_spans(files), endpoint)
    calls = tt.calls()
    assert tt.n_requests >= 50 and calls.height > 10 * tt.n_requests
    assert calls["gap_ns"].is_not_null().sum() > 0 and (calls["gap_ns"].drop_nulls() >= 0).all()
    # Every service-to-service call of a request is a server call with a gap, and only those.
    crossing = calls.join(calls.select("request", pl.col("span_id").alias("parent_span_id"),
                                       pl.col("service").alias("_parent_service")),
                          on=["request", "parent_span_id"]).filter(pl.col("service") != pl.col("_parent_service"))
    clients = set(crossing["parent_span_id"])
    assert set(calls.filter(pl.col("gap_ns").is_not_null())["span_id"]) == clients


@pytest.mark.parametrize("name", ["smartthings-mobile-web-install.json", "yelp.json", "skew.json",
                                  "messaging2.json"])
def test_zipkin_production_traces_match_naive(shared_data, name):
    pytest.importorskip("tracesleuth.io.zipkin")
    tt = check_against_naive(read_spans(shared_data / "zipkin-lens" / name))
    assert tt.calls().height >= tt.n_requests


def test_trainticket_day_calls_in_partitions_are_the_same(shared_data):
    spans = read_spans(shared_data / TRAINTICKET_08).spans
    whole = build_trace_table(spans)
    calls = whole.calls()
    assert calls.height == 321_068 and calls["request"].n_unique() == whole.n_requests == 4483
    parts = build_trace_table(spans, partition_spans=40_000).calls()
    assert parts.equals(calls, null_equal=True)
    lat = whole.instance_latencies()
    assert lat.height == calls.height
    per = lat.group_by("operation_key", "instance").agg(pl.col("exclusive_ns").sum())
    assert per["exclusive_ns"].sum() == int(np.sum([whole.frame[c].sum() for c in whole.continuous_columns]))
