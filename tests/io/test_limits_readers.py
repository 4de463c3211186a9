"""Span limits (:class:`~tracesleuth.io._builder.SpanLimits`, OpenTelemetry's) and the time and
id checks, through every reader: what is over a limit is kept, cut and reported (``spans=0``,
naming record, field and what was kept); a negative time is rejected; a padded id is reported
with the count. The shared validation's shortcut (``_as_is``) gives what the general path gives."""

from __future__ import annotations

import orjson
import polars as pl
import pyarrow as pa
import pytest

from spans import event, link, span, table
from tracesleuth import schema as S
from tracesleuth.errors import ParameterError
from tracesleuth.io import RejectLog, iter_span_batches
from tracesleuth.io import _builder
from tracesleuth.io._builder import DEFAULT_SPAN_LIMITS, SpanBatchBuilder, SpanLimits, validate_spans
from writers import FORMATS, write

T1 = "4bf92f3577b34da6a3ce929d0e0e4736"
LONG_SERVICE, LONG_OPERATION, LONG_INSTANCE = "s" * 1000, "o" * 2000, "i" * 300
BLOB = "x" * 5000
#: Formats with attributes (CSV has none).
WITH_ATTRIBUTES = tuple(f for f in FORMATS if f != "csv")


def read_all(path, **kwargs):
    log = RejectLog()
    rows = [r for b in iter_span_batches(path, log=log, **kwargs) for r in b.to_pylist()]
    return rows, log


def warnings(log, field=None):
    found = [dict(zip(S.REJECT_SCHEMA.names, r)) for r in log.rows if r[4] == 0]
    return [w for w in found if field is None or w["field"] == field]


def oversized_trace():
    """A root span over every limit (names, attribute count, an attribute value) and a clean child."""
    attributes = {"a.blob": BLOB, **{f"k{j:03d}": j for j in range(200)},
                  S.ATTR_SERVICE_NAME: LONG_SERVICE}
    return table([
        span(T1, "a1", None, LONG_SERVICE, LONG_OPERATION, 0, 100, instance=LONG_INSTANCE, attributes=attributes),
        span(T1, "a2", "a1", "checkout", "POST /cart", 5, 40, kind="client", instance="10.0.0.2:8081",
             attributes={"peer.port": 8081, S.ATTR_SERVICE_NAME: "checkout"}),
    ])


# -- SpanLimits ---------------------------------------------------------------------------------
def test_defaults_are_the_sdks():
    limits = SpanLimits()
    assert (limits.max_attributes, limits.max_events, limits.max_links) == (128, 128, 128)
    assert (limits.max_attribute_value_chars, limits.max_service_chars, limits.max_operation_chars,
            limits.max_instance_chars) == (4096, 256, 1024, 256)
    assert DEFAULT_SPAN_LIMITS == limits and _builder.MAX_ATTRIBUTE_CHARS == 4096


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True])
def test_limits_are_checked_at_the_boundary(bad):
    with pytest.raises(ParameterError, match=r"'max_attributes' parameter of SpanLimits must be an int in the "
                                             r"range \[1, inf\) or None\. Got"):
        SpanLimits(max_attributes=bad)


# -- every reader -------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_reader_cuts_and_reports(tmp_path, fmt):
    path = write(fmt, oversized_trace(), tmp_path / f"t.{fmt}")
    rows, log = read_all(path)
    assert len(rows) == 2 and log.spans_rejected == 0  # in = stored + rejected: nothing lost
    root = next(r for r in rows if r[S.PARENT_SPAN_ID] is None)
    assert root[S.SERVICE] == "s" * 256 and root[S.OPERATION] == "o" * 1024
    assert root[S.INSTANCE] in (None, "i" * 256)
    child = next(r for r in rows if r[S.PARENT_SPAN_ID] is not None)
    assert (child[S.SERVICE], child[S.OPERATION]) == ("checkout", "POST /cart")  # untouched
    for field, reason, length in ((S.SERVICE, "service name cut to its first 256 characters", 1000),
                                  (S.OPERATION, "operation name cut to its first 1024 characters", 2000)):
        (w,) = warnings(log, field)
        assert w["reason"] == reason and w["source"] == str(path) and w["record"] >= 1
        assert w["excerpt"].startswith(f"{length} characters: ")
    if root[S.INSTANCE] is not None:
        assert warnings(log, S.INSTANCE)[0]["reason"] == "instance name cut to its first 256 characters"
    if fmt in WITH_ATTRIBUTES:
        assert len(root[S.ATTRIBUTES]) == 128
        assert all(a["str"] is None or len(a["str"]) <= 4096 for a in root[S.ATTRIBUTES])
        (count,) = warnings(log, S.ATTRIBUTES)
        assert count["reason"] == "attribute list cut to its first 128 attributes"
        (value,) = warnings(log, "attributes.a.blob")
        assert value["reason"] == "attribute value cut to its first 4096 characters"
        assert value["excerpt"].startswith("5000 characters: xxx")
        blob = [a["str"] for a in root[S.ATTRIBUTES] if a["key"] == "a.blob"]
        assert blob == ["x" * 4096]


def test_the_measured_case_service_name_and_attributes(tmp_path):
    """Issue 14: a 100,018-character service name and 100,000 attributes on one span were stored
    as they were (the warning said "kept its first 4096" of the resource attribute only)."""
    spans = [{"traceId": T1, "spanId": "00f067aa0ba902b7", "name": "op", "kind": 2,
              "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000000001000",
              "attributes": [{"key": f"k{j}", "value": {"intValue": str(j)}} for j in range(100_000)]}]
    doc = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name",
                                                            "value": {"stringValue": "s" * 100_018}}]},
                              "scopeSpans": [{"spans": spans}]}]}
    path = tmp_path / "huge.jsonl"
    path.write_bytes(orjson.dumps(doc) + b"\n")
    (row,), log = read_all(path)
    assert len(row[S.SERVICE]) == 256 and len(row[S.ATTRIBUTES]) == 128
    assert [a["int"] for a in row[S.ATTRIBUTES]] == list(range(128))  # the first ones kept
    (w,) = warnings(log, S.SERVICE)
    assert w["record"] == 1 and w["excerpt"].startswith("100018 characters")
    assert warnings(log, S.ATTRIBUTES)[0]["excerpt"] == "100001 attributes"  # with the resource's


def test_limits_are_configurable():
    log = RejectLog()
    limits = SpanLimits(max_attributes=2, max_operation_chars=None, max_attribute_value_chars=3)
    b = SpanBatchBuilder("mem", log, limits=limits)
    for i in range(3):
        b.add_attributes([("a", "abcdef"), ("b", 1), ("c", 2)], record=i + 1)
        b.add(i + 1, T1, f"{i + 1:016x}", None, "svc", "o" * 5000, None, "server", 10, 20)
    batch = b.flush()
    assert batch.column(S.OPERATION).to_pylist() == ["o" * 5000] * 3  # unbounded
    assert batch.column(S.ATTRIBUTES).to_pylist()[0] == [
        {"key": "a", "str": "abc", "int": None, "float": None, "bool": None},
        {"key": "b", "str": None, "int": 1, "float": None, "bool": None}]
    assert sorted({w["reason"] for w in warnings(log)}) == [
        "attribute list cut to its first 2 attributes", "attribute value cut to its first 3 characters"]
    assert [w["record"] for w in warnings(log, S.ATTRIBUTES)] == [1, 2, 3]  # one per record


@pytest.mark.parametrize("fmt", ["csv", "parquet", "otlp-json"])
def test_vectorized_readers_apply_the_builders_limits(tmp_path, fmt):
    """The tabular readers and the OTLP JSON block path validate without the builder's flush:
    they must still cut to the builder's limits, not the defaults."""
    from tracesleuth.io import _reader

    path = write(fmt, table([span(T1, "a1", None, "checkout", "POST /cart", 0, 100)]), tmp_path / f"t.{fmt}")
    log = RejectLog()
    builder = SpanBatchBuilder(str(path), log, limits=SpanLimits(max_service_chars=3, max_operation_chars=4))
    with open(path, "rb") as f:
        rows = [r for b in _reader(fmt)(f, builder) for r in b.to_pylist()]
    assert [(r[S.SERVICE], r[S.OPERATION]) for r in rows] == [("che", "POST")]
    assert [w["reason"] for w in warnings(log)] == ["service name cut to its first 3 characters",
                                                     "operation name cut to its first 4 characters"]


# -- the shortcut ------------------------------------------------------------------------------
def _raw(n, *, service="svc", operation="op", start=None):
    return pa.table({
        "_record": pa.array(range(1, n + 1), pa.int64()),
        "_raw_trace": [T1] * n, "_raw_span": [f"{i + 1:016x}" for i in range(n)], "_raw_parent": pa.nulls(n, pa.string()),
        S.SERVICE: [service] * n, S.OPERATION: [operation] * n, S.INSTANCE: pa.nulls(n, pa.string()),
        S.KIND: ["server"] * n, "_start": pa.array(start if start is not None else [10] * n, pa.int64()),
        "_end": pa.array([20] * n, pa.int64()), S.STATUS: ["unset"] * n, S.FOLLOWS_FROM: [False] * n,
    })


def _both_paths(raw, attrs=None, limits=None):
    """(batch, log rows) through the shortcut and through the general (polars) path."""
    fast_log, general_log = RejectLog(), RejectLog()
    fast = validate_spans(raw, attrs, "f", fast_log, limits=limits)
    general = validate_spans(pl.from_arrow(raw), attrs, "f", general_log, limits=limits)
    assert fast.equals(general) and fast_log.rows == general_log.rows
    return fast, fast_log


def test_clean_batch_takes_the_shortcut_and_is_not_copied():
    raw = _raw(1000)
    assert _builder._as_is(raw, None) is not None
    batch, log = _both_paths(raw)
    assert not log.rows and batch.num_rows == 1000


def test_a_batch_over_a_limit_takes_the_shortcut_then_is_cut():
    attrs = pa.array([[{"key": f"k{j}", "str": "v" * (5000 if j == 1 else 1)} for j in range(130)]] * 3,
                     pa.list_(S.ATTRIBUTE_TYPE))
    raw = _raw(3, service="é" * 300, operation="o" * 1024)  # 300 characters, 600 bytes; 1024 is within
    assert _builder._as_is(raw, attrs) is not None
    batch, log = _both_paths(raw, attrs)
    assert batch.column(S.SERVICE).to_pylist() == ["é" * 256] * 3
    assert batch.column(S.OPERATION).to_pylist() == ["o" * 1024] * 3
    kept = batch.column(S.ATTRIBUTES).to_pylist()
    assert [len(a) for a in kept] == [128] * 3 and kept[0][1]["str"] == "v" * 4096
    assert [(w["record"], w["field"]) for w in warnings(log)] == (
        [(r, S.SERVICE) for r in (1, 2, 3)] + [(r, S.ATTRIBUTES) for r in (1, 2, 3)]
        + [(r, "attributes.k1") for r in (1, 2, 3)])


def test_bytes_over_the_limit_but_characters_within_are_kept():
    raw = _raw(2, service="é" * 200)  # 400 bytes, 200 characters
    batch, log = _both_paths(raw)
    assert batch.column(S.SERVICE).to_pylist() == ["é" * 200] * 2 and not log.rows


# -- times --------------------------------------------------------------------------------------
def test_negative_times_are_rejected_on_both_paths():
    raw = _raw(3, start=[10, -1, -5])
    assert _builder._as_is(raw, None) is None
    batch, log = _both_paths(raw)
    assert batch.num_rows == 1 and log.spans_rejected == 2
    assert [(r[1], r[2], r[3]) for r in log.rows] == [(2, S.START_NS, _builder._NEGATIVE_TIME),
                                                 (3, S.START_NS, _builder._NEGATIVE_TIME)]
    assert "unsigned" in _builder._NEGATIVE_TIME


def test_negative_end_is_named_before_negative_duration():
    log = RejectLog()
    raw = _raw(1).set_column(9, "_end", pa.array([-3], pa.int64()))
    validate_spans(raw, None, "f", log)
    assert log.rows[0][2:4] == (S.END_NS, _builder._NEGATIVE_TIME)


@pytest.mark.parametrize("fmt,body", [
    ("otlp-json", lambda: orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": T1, "spanId": "00f067aa0ba902b7", "name": "a", "startTimeUnixNano": "-1",
         "endTimeUnixNano": "5"},
        {"traceId": T1, "spanId": "00f067aa0ba902b8", "name": "b", "startTimeUnixNano": "1",
         "endTimeUnixNano": "5"}]}]}]})),
    ("zipkin-json", lambda: orjson.dumps([
        {"traceId": T1, "id": "00f067aa0ba902b7", "name": "a", "timestamp": -5, "duration": 3},
        {"traceId": T1, "id": "00f067aa0ba902b8", "name": "b", "timestamp": 5, "duration": 3}])),
    ("csv", lambda: b"trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\n"
                    + f"{T1},00f067aa0ba902b7,,web,a,-5,200\n{T1},00f067aa0ba902b8,,web,b,5,200\n".encode()),
])
def test_readers_reject_negative_times(tmp_path, fmt, body):
    path = tmp_path / f"t.{fmt.split('-')[-1]}"
    path.write_bytes(body())
    rows, log = read_all(path, format=fmt)
    assert [r[S.OPERATION] for r in rows] == ["b"] and log.spans_rejected == 1
    assert [(r[2], r[3]) for r in log.rows] == [(S.START_NS, _builder._NEGATIVE_TIME)]


# -- ids ----------------------------------------------------------------------------------------
def test_padded_ids_are_reported_with_their_count(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\n"
                    f"{T1},00f067aa0ba902b7,,web,a,1,2\n"
                    f"{T1},abc,00f067aa0ba902b7,web,b,1,2\n"
                    "0af7651916cd43dd,0bc,abc,web,c,1,2\n"       # a 64-bit trace id: widened, not reported
                    "f00,00f067aa0ba902b9,,web,d,1,2\n")
    rows, log = read_all(path)
    assert [r[S.SPAN_ID] for r in rows][1:3] == ["0000000000000abc", "00000000000000bc"]
    assert rows[2][S.TRACE_ID] == "00000000000000000af7651916cd43dd" and rows[3][S.TRACE_ID] == "0" * 29 + "f00"
    assert log.spans_rejected == 0
    got = {w["field"]: (w["record"], w["reason"], w["excerpt"]) for w in warnings(log)}
    assert got == {
        S.TRACE_ID: (5, "1 trace id(s) shorter than 32 hexadecimal digits (and not a 64-bit id of 16) "
                        "left-padded with zeros", "record 5: 'f00'"),
        S.SPAN_ID: (3, "2 span id(s) shorter than 16 hexadecimal digits left-padded with zeros",
                    "record 3: 'abc'; record 4: '0bc'"),
        S.PARENT_SPAN_ID: (4, "1 parent span id(s) shorter than 16 hexadecimal digits left-padded with zeros",
                           "record 4: 'abc'"),
    }


def test_zipkin_short_trace_id_is_padded_and_reported(tmp_path):
    path = tmp_path / "z.json"
    path.write_bytes(orjson.dumps([
        {"traceId": "463ac35c9f6413ad", "id": "a2fb4a1d1a96d312", "name": "a", "timestamp": 5, "duration": 3},
        {"traceId": "3ad", "id": "b2fb4a1d1a96d312", "name": "b", "timestamp": 5, "duration": 3}]))
    rows, log = read_all(path)
    assert [r[S.TRACE_ID] for r in rows] == ["0" * 16 + "463ac35c9f6413ad", "0" * 29 + "3ad"]
    (w,) = warnings(log)
    assert (w["record"], w["field"]) == (2, S.TRACE_ID) and w["reason"].startswith("1 trace id(s)")


def test_rejected_ids_are_not_counted_as_padded():
    log = RejectLog()
    raw = _raw(2).set_column(2, "_raw_span", pa.array(["abc", "xyz"]))
    raw = raw.set_column(8, "_start", pa.array([10, -1], pa.int64()))
    validate_spans(raw, None, "f", log)
    assert [r[3] for r in log.rows] == ["missing, all zero, or not a hexadecimal id of at most 16 digits",
                                        "1 span id(s) shorter than 16 hexadecimal digits left-padded with zeros"]


# -- events and links ---------------------------------------------------------------------------
#: What each format keeps of events and links (:mod:`test_contract`): Zipkin has event names and
#: times only and no links; CSV neither.
EVENT_ATTRIBUTES = ("otlp-json", "otlp-json-body", "otlp-proto", "otlp-proto-prefixed", "jaeger-json", "parquet")
WITH_LINKS = EVENT_ATTRIBUTES
LINK_ATTRIBUTES = ("otlp-json", "otlp-json-body", "otlp-proto", "otlp-proto-prefixed", "parquet")
T2 = "5b8efff798038103d269b633813fc60c"


def crowded_trace():
    """A span over the event and link limits: 150 events, the first an exception with a long
    stack trace and 150 attributes; 140 links into another trace, the first with 140 attributes."""
    first = event(S.EXCEPTION_EVENT, 1, {S.ATTR_EXCEPTION_STACKTRACE: BLOB, **{f"e{j:03d}": j for j in range(149)}})
    events = [first] + [event(f"tick {j}", 2 + j / 100) for j in range(149)]
    links = [link(T2, f"{j + 1:x}", {f"l{k:03d}": k for k in range(140)} if j == 0 else None) for j in range(140)]
    return table([span(T1, "a1", None, "checkout", "POST /cart", 0, 100, events=events, links=links,
                       attributes={S.ATTR_SERVICE_NAME: "checkout"})])


@pytest.mark.parametrize("fmt", WITH_ATTRIBUTES)
def test_every_reader_cuts_events_and_links_and_reports(tmp_path, fmt):
    path = write(fmt, crowded_trace(), tmp_path / f"t.{fmt}")
    (row,), log = read_all(path)
    assert log.spans_rejected == 0
    events = row[S.EVENTS]
    assert len(events) == 128 and events[0]["name"] == S.EXCEPTION_EVENT and events[-1]["name"] == "tick 126"
    (w,) = warnings(log, S.EVENTS)
    assert (w["reason"], w["record"], w["excerpt"]) == ("event list cut to its first 128 events", 1, "150 events")
    if fmt in EVENT_ATTRIBUTES:
        attributes = events[0][S.ATTRIBUTES]
        assert len(attributes) == 128 and attributes[0]["str"] == "x" * 4096
        assert warnings(log, f"{S.EVENTS}.{S.ATTRIBUTES}")[0]["reason"] == \
            "event attribute list cut to its first 128 event attributes"
        (value,) = warnings(log, f"{S.EVENTS}.{S.ATTRIBUTES}.{S.ATTR_EXCEPTION_STACKTRACE}")
        assert value["reason"] == "attribute value cut to its first 4096 characters"
        assert value["excerpt"].startswith("5000 characters: xxx")
    if fmt in WITH_LINKS:
        assert len(row[S.LINKS]) == 128 and row[S.LINKS][0][S.SPAN_ID] == f"{1:016x}"
        assert warnings(log, S.LINKS)[0]["reason"] == "link list cut to its first 128 links"
    if fmt in LINK_ATTRIBUTES:
        assert len(row[S.LINKS][0][S.ATTRIBUTES]) == 128
        assert warnings(log, f"{S.LINKS}.{S.ATTRIBUTES}")[0]["reason"] == \
            "link attribute list cut to its first 128 link attributes"


def test_event_and_link_limits_are_configurable_and_read_from_the_environment():
    limits = SpanLimits.from_environment({"OTEL_ATTRIBUTE_COUNT_LIMIT": "5", "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT": "2",
                                          "OTEL_SPAN_EVENT_COUNT_LIMIT": "3", "OTEL_SPAN_LINK_COUNT_LIMIT": "1"})
    assert (limits.max_event_attributes, limits.max_link_attributes, limits.max_events, limits.max_links) == (5, 2, 3, 1)
    assert SpanLimits.from_environment({"OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT": "7"}).max_event_attributes == 7
    log = RejectLog()
    b = SpanBatchBuilder("mem", log, limits=SpanLimits(max_events=1, max_event_attributes=1, max_links=None,
                                                       max_attribute_value_chars=2))
    b.add_event(15, "exception", {"exception.type": "KeyError", "exception.message": "m"}, 1)
    b.add_event(16, "retry", None, 1)
    for j in range(200):
        b.add_link(T2, f"{j + 1:016x}", None, 1)
    b.add(1, T1, "1" * 16, None, "svc", "op", None, "server", 10, 20)
    row = b.flush().to_pylist()[0]
    assert row[S.EVENTS] == [{"time_ns": 15, "name": "exception", S.ATTRIBUTES: [
        {"key": "exception.type", "str": "Ke", "int": None, "float": None, "bool": None}]}]
    assert len(row[S.LINKS]) == 200  # unbounded
    assert sorted((w["field"], w["reason"]) for w in warnings(log)) == [
        (S.EVENTS, "event list cut to its first 1 events"),
        (f"{S.EVENTS}.{S.ATTRIBUTES}", "event attribute list cut to its first 1 event attributes"),
        (f"{S.EVENTS}.{S.ATTRIBUTES}.exception.type", "attribute value cut to its first 2 characters")]


def _raw_events(times):
    return pa.array([[{"time_ns": t, "name": "e", S.ATTRIBUTES: []} for t in ts] for ts in times],
                    pa.list_(_builder.RAW_EVENT_TYPE))


def _raw_links(ids):
    return pa.array([[{S.TRACE_ID: t, S.SPAN_ID: s, S.ATTRIBUTES: []} for t, s in pairs] for pairs in ids],
                    pa.list_(_builder.RAW_LINK_TYPE))


def test_bad_event_times_and_link_ids_drop_the_entry_not_the_span_on_both_paths():
    """An event time that is not an integer timestamp, a link id that is not an id: the entry is
    dropped and reported (record and field), the span kept; link ids are normalised like span
    ids (a padded one reported, a 64-bit trace id widened silently); both paths agree."""
    raw = _raw(3)
    events = _raw_events([["1500", "-4", "1.6e3"], ["x"], []])
    links = _raw_links([[(T2.upper(), "ABC"), ("zz", "1" * 16)], [("0" * 32, "1" * 16), ("af7651916cd43dd0", "0")],
                        [("", "1")]])
    results = []
    for form in (raw, pl.from_arrow(raw)):
        log = RejectLog()
        results.append((validate_spans(form, None, "f", log, events=events, links=links), log.rows))
    (batch, rows), (general, general_rows) = results
    assert batch.equals(general) and rows == general_rows
    assert batch.num_rows == 3 and not any(r[4] for r in rows)  # no span lost
    assert [[e["time_ns"] for e in es] for es in batch.column(S.EVENTS).to_pylist()] == [[1500, 1600], [], []]
    assert batch.column(S.LINKS).to_pylist() == [
        [{S.TRACE_ID: T2, S.SPAN_ID: "0000000000000abc", S.ATTRIBUTES: []}],
        [], []]
    found = {(r[1], r[2], r[3]) for r in rows}
    assert (1, "events.time_ns", "event dropped: " + _builder._NEGATIVE_TIME) in found
    assert (2, "events.time_ns", "event dropped: its time is missing or not an integer timestamp") in found
    assert (1, "links.trace_id", "link dropped: its trace id is missing, all zero, or not a hexadecimal id of at "
                                 "most 32 digits") in found
    assert (2, "links.trace_id", "link dropped: its trace id is missing, all zero, or not a hexadecimal id of at "
                                 "most 32 digits") in found  # all zero
    assert (2, "links.span_id", "link dropped: its span id is missing, all zero, or not a hexadecimal id of at "
                                "most 16 digits") in found  # the first failing id of a link names it
    assert (3, "links.trace_id", "link dropped: its trace id is missing, all zero, or not a hexadecimal id of at "
                                 "most 32 digits") in found
    assert (1, "links.span_id", "1 link span id(s) shorter than 16 hexadecimal digits left-padded with zeros") in found
    assert not any(f == "links.trace_id" and "padded" in why for _, f, why in found)


@pytest.mark.parametrize("fmt,body,field", [
    ("otlp-json", {"events": [{"timeUnixNano": "5", "name": 7}, {"timeUnixNano": "6", "name": "ok"}],
                   "links": [{"traceId": 3, "spanId": "1" * 16}]}, ("resourceSpans[0].scopeSpans[0].spans[0].events[0].name",
                                                                 "resourceSpans[0].scopeSpans[0].spans[0].links[0].traceId")),
    ("jaeger-json", {"logs": [{"timestamp": "soon", "fields": []}, {"timestamp": 6, "fields": [
        {"key": "message", "type": "string", "value": "ok"}]}]}, ("logs[0].timestamp",)),
    ("zipkin-json", {"annotations": [{"timestamp": 5}, {"timestamp": 6, "value": "ok"}]}, ("annotations[0].value",)),
])
def test_a_malformed_event_or_link_is_dropped_with_a_warning_and_its_span_kept(tmp_path, fmt, body, field):
    path = write(fmt, table([span(T1, "a1", None, "checkout", "POST /cart", 0, 100)]), tmp_path / f"t.{fmt}")
    doc = orjson.loads(path.read_bytes().splitlines()[0] if fmt == "otlp-json" else path.read_bytes())
    target = (doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0] if fmt == "otlp-json" else
              doc["data"][0]["spans"][0] if fmt == "jaeger-json" else doc[0])
    target.update(body)
    path.write_bytes(orjson.dumps(doc) + b"\n")
    (row,), log = read_all(path)
    assert [e["name"] for e in row[S.EVENTS]] == ["ok"] and row[S.LINKS] == []
    assert log.spans_rejected == 0 and sorted(w["field"] for w in warnings(log)) == sorted(field)
    assert all(w["reason"].startswith(("event dropped", "link dropped")) for w in warnings(log))
