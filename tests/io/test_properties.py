"""Property tests of the JSON and protobuf readers: random valid span tables round-trip through
each writer and reader; random damage (truncation, garbage, non-UTF-8 bytes) never crashes a
reader, and the spans it reports (read + rejected) add up."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from test_contract import comparable
from tracesleuth import schema as S
from tracesleuth.io import RejectLog, iter_span_batches, read_spans
from tracesleuth.io._jsondoc import count_keys
from tracesleuth.io.jaeger import CONSUMED_TAGS, EVENT_FIELD
from tracesleuth.io.otlp_json import count_spans
from tracesleuth.io.zipkin import PEER_SERVICE, ZIPKIN_SHARED
from writers import RESOURCE_KEYS, write

ROUND_TRIP = ("otlp-json", "otlp-json-body", "otlp-proto", "otlp-proto-prefixed", "jaeger-json", "zipkin-json")
READER_FORMAT = {"otlp-json-body": "otlp-json", "otlp-proto-prefixed": "otlp-proto"}
#: The member name each JSON writer writes exactly once per span (how the readers count spans,
#: with :func:`tracesleuth.io._jsondoc.count_keys`: as a member name, followed by a colon); OTLP
#: writes ``spanId`` in each link too (:func:`tracesleuth.io.otlp_json.count_spans`).
SPAN_KEY = {"otlp-json": b'"spanId"', "otlp-json-body": b'"spanId"', "jaeger-json": b'"operationName"',
            "zipkin-json": b'"traceId"'}
#: Attribute keys a format uses for something else (resource, kind, status): not random attributes.
RESERVED = RESOURCE_KEYS | CONSUMED_TAGS | {PEER_SERVICE, ZIPKIN_SHARED}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def hex_id(n_digits: int):
    """Non-zero ids of ``n_digits`` hexadecimal digits."""
    return st.integers(1, 16 ** n_digits - 1).map(lambda i: f"{i:0{n_digits}x}")


attr_value = st.one_of(text, st.integers(-2**63, 2**63 - 1), st.booleans(),
                       st.floats(allow_nan=False, allow_infinity=False))


def typed(attrs: dict) -> list[dict]:
    return [{"key": k, "str": v if isinstance(v, str) else None,
             "int": v if isinstance(v, int) and not isinstance(v, bool) else None,
             "float": v if isinstance(v, float) else None,
             "bool": v if isinstance(v, bool) else None} for k, v in attrs.items()]


#: A status message every format keeps as it is (a Zipkin ``error`` tag of ``true`` or ``1`` is a flag).
status_message = st.one_of(st.none(), text.filter(lambda t: t.strip().lower() not in ("", "true", "1")))


@st.composite
def events(draw, start_us: int, end_us: int):
    """0-3 events of a span, in whole microseconds (within the span or not), typed attributes
    (not Jaeger's name field)."""
    return [{"time_ns": draw(st.integers(start_us - 1000, end_us + 1000)) * 1000, "name": draw(text),
             S.ATTRIBUTES: typed(draw(st.dictionaries(text.filter(lambda k: k != EVENT_FIELD), attr_value, max_size=3)))}
            for _ in range(draw(st.integers(0, 3)))]


@st.composite
def span_tables(draw):
    """A valid canonical span table: 1-12 spans in 1-3 traces, times in whole microseconds
    (Jaeger and Zipkin carry microseconds), attributes consistent with service and instance
    (``service.name``, ``service.instance.id``: what OTLP and Jaeger carry per resource);
    events, links into other traces (a Jaeger reference into the span's own trace may be read as
    its parent) and status messages."""
    trace_ids = draw(st.lists(hex_id(32), min_size=1, max_size=3, unique=True))
    n = draw(st.integers(1, 12))
    span_ids = draw(st.lists(hex_id(16), min_size=n, max_size=n, unique=True))
    services = draw(st.lists(text.map(str.strip).filter(bool), min_size=1, max_size=3, unique=True))
    rows = []
    base_us = 1_700_000_000_000_000
    for i, sid in enumerate(span_ids):
        trace = draw(st.sampled_from(trace_ids))
        siblings = [r[S.SPAN_ID] for r in rows if r[S.TRACE_ID] == trace]
        parent = draw(st.one_of(st.none(), st.sampled_from(siblings))) if siblings else None
        service = draw(st.sampled_from(services))
        instance = draw(st.one_of(st.none(), st.tuples(st.integers(0, 255), st.integers(1, 65535))
                                  .map(lambda t: f"10.0.0.{t[0]}:{t[1]}")))
        start = base_us + draw(st.integers(0, 10**9))
        end = start + draw(st.integers(0, 10**8))
        attrs = draw(st.dictionaries(text.filter(lambda k: k not in RESERVED), attr_value, max_size=4))
        links = [{S.TRACE_ID: t, S.SPAN_ID: s, S.ATTRIBUTES: typed(a)} for t, s, a in draw(st.lists(st.tuples(
            hex_id(32).filter(lambda t: t not in trace_ids), hex_id(16),
            st.dictionaries(text, attr_value, max_size=2)), max_size=2))]
        attrs[S.ATTR_SERVICE_NAME] = service
        if instance is not None:
            attrs[S.ATTR_SERVICE_INSTANCE_ID] = instance
        rows.append({
            S.TRACE_ID: trace, S.SPAN_ID: sid, S.PARENT_SPAN_ID: parent, S.SERVICE: service,
            S.OPERATION: draw(text), S.INSTANCE: instance, S.KIND: draw(st.sampled_from(S.SPAN_KINDS)),
            S.START_NS: start * 1000, S.END_NS: end * 1000, S.STATUS: draw(st.sampled_from(S.STATUS_CODES)),
            S.FOLLOWS_FROM: parent is not None and draw(st.booleans()),
            S.ATTRIBUTES: typed(attrs), S.STATUS_MESSAGE: draw(status_message),
            S.EVENTS: draw(events(start, end)), S.LINKS: links,
        })
    return pa.Table.from_pylist(rows, schema=S.SPAN_SCHEMA)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("properties")


def read_forced(path, fmt):
    """Read ``path`` as ``fmt`` without raising; returns (spans read, RejectLog)."""
    log = RejectLog()
    n = 0
    for batch in iter_span_batches(path, format=READER_FORMAT.get(fmt, fmt), log=log):
        assert batch.schema == S.SPAN_SCHEMA
        n += batch.num_rows
    assert all(r[1] >= 0 and r[4] >= 0 and r[3] for r in log.rows)
    return n, log


# Each drawn table goes through every format: drawing a table is most of a property test's time
# (~0.2 s of ~0.25 s an example), and a test parametrized by format drew the same derandomized
# tables once per format. A failure names its format.
@SETTINGS
@given(table=span_tables())
def test_valid_tables_round_trip(workdir, table):
    for fmt in ROUND_TRIP:
        path = write(fmt, table, workdir / f"round-trip-{fmt}")
        result = read_spans(path)
        assert result.spans_rejected == 0 and result.rejects.num_rows == 0, (fmt, result.rejects.to_pylist())
        assert comparable(result.spans, fmt) == comparable(table, fmt), fmt


@SETTINGS
@given(table=span_tables(), cut=st.floats(0, 1))
def test_truncated_files_never_crash_and_spans_add_up(workdir, table, cut):
    for fmt in ROUND_TRIP:
        path = write(fmt, table, workdir / f"truncated-{fmt}")
        data = path.read_bytes()
        data = data[: int(len(data) * cut)]
        if not data.strip():
            continue
        path.write_bytes(data)
        n_read, log = read_forced(path, fmt)
        assert n_read + log.spans_rejected <= table.num_rows, fmt
        if fmt in SPAN_KEY:  # every span whose key survived the cut is either read or reported lost
            # (OTLP: not counting a link's spanId)
            assert n_read + log.spans_rejected == (count_spans(data) if fmt.startswith("otlp") else
                                                   count_keys(data, (SPAN_KEY[fmt],))), fmt


@pytest.mark.parametrize("fmt", ROUND_TRIP)
@SETTINGS
@given(table=span_tables(), seed=st.integers(0, 2**32 - 1), n_bad=st.integers(1, 4),
       kind=st.sampled_from(["non-utf8", "garbage", "insert"]))
def test_damaged_files_never_crash(workdir, fmt, table, seed, n_bad, kind):
    path = write(fmt, table, workdir / f"damaged-{fmt}")
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    for _ in range(n_bad):
        pos = rng.randrange(len(data))
        if kind == "non-utf8":
            data[pos] = rng.choice([0x80, 0xBF, 0xC0, 0xFE, 0xFF])
        elif kind == "garbage":
            data[pos] = rng.randrange(256)
        else:
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    path.write_bytes(bytes(data))
    n_read, log = read_forced(path, fmt)
    assert n_read + log.spans_rejected <= table.num_rows + n_bad * 8


@pytest.mark.parametrize("fmt", ["otlp-json", "otlp-proto", "jaeger-json", "zipkin-json"])
@SETTINGS
@given(data=st.binary(min_size=1, max_size=300))
def test_random_bytes_are_rejected_and_counted(workdir, fmt, data):
    """Garbage never crashes a reader, gives no span, and is reported: the reject log names the
    file and why it was refused, and its span counts add up (no span was in it to lose)."""
    assume(data.strip())
    path = workdir / f"garbage-{fmt}"
    path.write_bytes(data)
    n_read, log = read_forced(path, fmt)
    assert n_read == 0 and sum(log.spans_read.values()) == 0
    assert log.rows, f"{data!r} was read as {fmt} without a word"
    assert all(r[0] == str(path) and r[3] for r in log.rows), log.rows       # the file and the reason
    if fmt in SPAN_KEY:  # whatever span the garbage seemed to hold is counted as lost
        assert log.spans_rejected == (count_spans(data) if fmt.startswith("otlp") else
                                      count_keys(data, (SPAN_KEY[fmt],)))


# -- the OTLP JSON reader's two paths -----------------------------------------------------------
def _read_both_paths(path):
    """(spans, log rows, blocks the fast path took) read normally, and the same read with the
    native fast path refused for every block."""
    from unittest import mock

    from tracesleuth.io import _otlp_arrow

    taken = []
    real = _otlp_arrow.read_block

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        taken.append(1)
        return out

    def refusing(*args, **kwargs):
        raise _otlp_arrow.NotClean("forced")

    out = []
    for fake in (counting, refusing):
        log = RejectLog()
        with mock.patch.object(_otlp_arrow, "read_block", fake):
            batches = list(iter_span_batches(path, format="otlp-json", log=log))
        spans = pa.Table.from_batches(batches, schema=S.SPAN_SCHEMA)
        out.append((spans, sorted(log.rows, key=repr)))
    return out[0], out[1], len(taken)


def _messy_line(table: pa.Table, rnd: random.Random) -> bytes:
    """One file-exporter line in a spelling the careful path must read: base64 ids, kind names,
    numeric times, a span attribute shadowing a resource one, an array value, a null field..."""
    import base64

    import orjson

    from writers import otlp_json_requests, rows_of
    request = otlp_json_requests(rows_of(table))[0]
    span = request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    choice = rnd.randrange(15)
    if choice >= 9:  # members the native parse skips or refuses, spellings the reader must not confuse
        value = span["attributes"][0]["value"] if span["attributes"] else None
        resource = request["resourceSpans"][0]
        if choice == 9 and value:
            value.update({"arrayValue": None} if rnd.random() < 0.5 else {"intValue": None, "doubleValue": None})
        elif choice == 10 and value:
            span["attributes"][0]["value"] = {"arrayValue": None, **value, "string_value": "snake"}
        elif choice == 11:
            span.update(flags=1, traceState="k=v", events=[{"name": "e", "attributes": [{"key": "x", "value": {}}]}],
                        links=[{"traceId": span["traceId"], "spanId": span["spanId"]}], unknown={"a": [1, None]})
        elif choice == 12:
            span["status"] = {**span.get("status", {}), "message": "\udcff"}  # invalid UTF-8 once written
        elif choice == 13:
            resource["instrumentationLibrarySpans"] = resource.pop("scopeSpans")
        else:
            resource["scope_spans"] = [{"spans": []}]  # beside scopeSpans: lowerCamelCase wins
    elif choice >= 7:  # an over-long resource attribute (a warning), alone or with a base64 id
        request["resourceSpans"][0]["resource"]["attributes"].append(
            {"key": "long", "value": {"stringValue": "r" * 5000}})
        if choice == 8:
            span["traceId"] = base64.b64encode(bytes.fromhex(span["traceId"])).decode()
    elif choice == 0:
        span["traceId"] = base64.b64encode(bytes.fromhex(span["traceId"])).decode()
    elif choice == 1:
        span["kind"] = "SPAN_KIND_SERVER"
    elif choice == 2:
        span["startTimeUnixNano"] = int(span["startTimeUnixNano"])
    elif choice == 3:
        span["attributes"].append({"key": "service.name", "value": {"stringValue": "shadow"}})
    elif choice == 4:
        span["attributes"].append({"key": "list", "value": {"arrayValue": {"values": [{"intValue": "1"}]}}})
    elif choice == 5:
        span["status"] = {"code": 7}
    else:
        span["attributes"].append({"key": "long", "value": {"stringValue": "x" * 5000}})
    if choice == 12:  # orjson refuses lone surrogates; the standard library writes them as UTF-8
        return json.dumps(request, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n"
    return orjson.dumps(request) + b"\n"


@SETTINGS
@given(table=span_tables(), seed=st.integers(0, 2**32 - 1),
       damage=st.sampled_from(["none", "int-numbers", "all-int-numbers", "messy", "garbage"]),
       sizes=st.sampled_from([None, (64, 64), (700, 300)]))
def test_otlp_json_fast_path_reads_exactly_like_the_careful_path(workdir, table, seed, damage, sizes):
    """Also with blocks and parse pieces smaller than a line (``sizes``: bytes of a block, of a
    piece), which the reader must grow or read whole."""
    import re
    from unittest import mock

    from tracesleuth.io import _otlp_arrow, otlp_json

    path = write("otlp-json", table, workdir / "fast-vs-careful")
    rnd = random.Random(seed)
    if damage in ("int-numbers", "all-int-numbers"):  # some exporters write 64-bit integers as JSON numbers
        share = 0.5 if damage == "int-numbers" else 1.0
        path.write_bytes(re.sub(rb'"intValue":"(-?[0-9]+)"',
                                lambda m: m.group(0) if rnd.random() >= share else b'"intValue":' + m.group(1),
                                path.read_bytes()))
    elif damage != "none":
        lines = path.read_bytes().splitlines(keepends=True)
        extra = _messy_line(table, rnd) if damage == "messy" else b'{"resourceSpans": [{"resource": \xff garbage\n'
        lines.insert(rnd.randrange(len(lines) + 1), extra)
        path.write_bytes(b"".join(lines))
    block, piece = sizes or (otlp_json.BLOCK_BYTES, _otlp_arrow.PARSE_BYTES)
    with mock.patch.object(otlp_json, "BLOCK_BYTES", block), mock.patch.object(_otlp_arrow, "PARSE_BYTES", piece):
        (fast_spans, fast_log), (careful_spans, careful_log), taken = _read_both_paths(path)
    assert fast_spans.equals(careful_spans)
    assert fast_log == careful_log
    if damage in ("none", "int-numbers", "all-int-numbers"):
        assert taken >= 1  # clean file-exporter output is read natively
        if sizes is None:
            assert taken == 1


def test_otlp_json_members_the_native_parse_skips(workdir):
    """The native parse skips members the reader does not read; what the careful path would make
    of them decides: skipped alike, or the block is read carefully."""
    import orjson

    span = {"traceId": "1" * 32, "spanId": "2" * 16, "name": "op", "kind": 2,
            "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
            "attributes": [{"key": "a", "value": {"arrayValue": None, "stringValue": "x"}},
                           {"key": "b", "value": {"intValue": None, "doubleValue": 1.5, "note": "?"}}],
            "events": [{"timeUnixNano": "1500", "name": "e", "droppedAttributesCount": 1}], "droppedEventsCount": 2,
            "links": [{"traceId": "5" * 32, "spanId": "6" * 16, "traceState": "k=v", "flags": 257}],
            "flags": 1, "status": {"code": 2, "message": "boom"}}
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]}

    def line(s: dict, scopes: str = "scopeSpans") -> bytes:
        return orjson.dumps({"resourceSpans": [{"resource": resource, scopes: [{"spans": [s]}]}]}) + b"\n"

    path = workdir / "skipped.json"
    path.write_bytes(line(span) + line({**span, "spanId": "3" * 16}, "instrumentationLibrarySpans")
                     + line({**span, "spanId": "4" * 16}).replace(b"boom", b"bo\xffom"))
    (spans, log), (careful_spans, careful_log), taken = _read_both_paths(path)
    assert spans.equals(careful_spans) and log == careful_log
    assert taken == 0  # the last two lines send the block to the careful path
    assert "invalid UTF-8" in repr(log) and spans.num_rows == 3
    path.write_bytes(line(span))
    (spans, log), (careful_spans, careful_log), taken = _read_both_paths(path)
    assert spans.equals(careful_spans) and log == careful_log and taken == 1
    assert spans.column(S.EVENTS).to_pylist() == [[{"time_ns": 1500, "name": "e", S.ATTRIBUTES: []}]]
    assert spans.column(S.LINKS).to_pylist() == [[{S.TRACE_ID: "5" * 32, S.SPAN_ID: "6" * 16, S.ATTRIBUTES: []}]]
    assert spans.column(S.STATUS_MESSAGE).to_pylist() == ["boom"]
    assert spans.column(S.ATTRIBUTES).to_pylist()[0][:2] == [
        {"key": "a", "str": "x", "int": None, "float": None, "bool": None},
        {"key": "b", "str": None, "int": None, "float": 1.5, "bool": None}]


#: Ids validation rejects or rewrites (hex_id draws only canonical ones).
_BAD_TRACE_IDS = ["", "0" * 32, "ABC", " 00ff ", "xyz", "0" * 40]
_BAD_SPAN_IDS = ["", "0" * 16, "AbC", "1" * 17, " 42"]
_ids = st.one_of(hex_id(32), st.sampled_from(_BAD_TRACE_IDS), st.none())
_span_ids = st.one_of(hex_id(16), st.sampled_from(_BAD_SPAN_IDS), st.none())
_times = st.one_of(st.integers(0, 2**62).map(str), st.sampled_from(["", "1.5", "2e3", " 7", "x"]), st.none())


_services = st.one_of(st.sampled_from(["s", "s", "shop", " s", "s\t", "", "\u3000s", "\x1cs"]), st.none())


@SETTINGS
@given(rows=st.one_of(
    st.lists(st.tuples(_ids, _span_ids, _span_ids, _times, _times, _services), min_size=1, max_size=8),
    st.lists(st.tuples(hex_id(32), hex_id(16), st.one_of(hex_id(16), st.none()), st.integers(0, 9).map(str),
                       st.integers(9, 20).map(str), st.sampled_from(["s", "shop"])), min_size=1, max_size=8)),
       int_times=st.booleans())
def test_validation_shortcuts_change_nothing(rows, int_times):
    """Ids and times already canonical skip the general normalisation, and a batch that needs
    none at all is read straight from Arrow (``_as_is``); the result and the log are those of the
    general path."""
    from unittest import mock

    import polars as pl

    from tracesleuth.io import _builder

    def digits(t):
        return t is not None and t.isdigit()

    def times(k):  # int64 when asked and every value allows it, else the text
        values = [r[k] for r in rows]
        return pl.Series([int(t) for t in values], dtype=pl.Int64) if int_times and all(map(digits, values)) \
            else pl.Series(values, dtype=pl.String)

    raw = pl.DataFrame({
        "_record": list(range(1, len(rows) + 1)),
        "_raw_trace": [r[0] for r in rows], "_raw_span": [r[1] for r in rows], "_raw_parent": [r[2] for r in rows],
        S.SERVICE: [r[5] for r in rows], S.OPERATION: ["o"] * len(rows), S.INSTANCE: [None] * len(rows),
        S.KIND: ["server"] * len(rows), "_start": times(3), "_end": times(4),
        S.STATUS: ["unset"] * len(rows), S.FOLLOWS_FROM: [False] * len(rows),
    }, schema_overrides={c: pl.String for c in ("_raw_trace", "_raw_span", "_raw_parent", S.SERVICE, S.INSTANCE)})
    general_log = RejectLog()
    with mock.patch.object(_builder, "_canonical_columns", lambda raw: dict.fromkeys(
            ("_raw_trace", "_raw_span", "_raw_parent", "_start", "_end"), False)):
        general = _builder.validate_spans(raw, None, "f", general_log)
    arrow = raw.to_arrow(compat_level=pl.CompatLevel.oldest())
    arrow = arrow.cast(pa.schema([pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
                                  for f in arrow.schema]))
    with_dictionary = arrow.set_column(arrow.schema.get_field_index(S.SERVICE), S.SERVICE,
                                       arrow.column(S.SERVICE).dictionary_encode())
    for form in (raw, arrow, with_dictionary):
        log = RejectLog()
        assert _builder.validate_spans(form, None, "f", log).equals(general)
        assert log.rows == general_log.rows
    # nothing rejected, nothing to normalise: canonical ids (never all zero), digits, plain names
    clean = not general_log.rows and all(
        r[0] not in _BAD_TRACE_IDS and r[1] not in _BAD_SPAN_IDS and r[2] not in _BAD_SPAN_IDS
        and digits(r[3]) and digits(r[4]) and r[5] in ("s", "shop") for r in rows)
    assert (_builder._as_is(arrow, None) is not None) == clean


_py_ids = st.one_of(hex_id(32), hex_id(16), st.sampled_from(["", "ABC", " 42", "0" * 16]), st.none(),
                    st.integers(0, 2**70), st.binary(max_size=4))
_py_times = st.one_of(st.integers(-5, 2**62), st.integers(2**63, 2**64), st.sampled_from([1.0, 1.5, 2e3, float("nan")]),
                      st.integers(0, 2**40).map(str), st.sampled_from(["", " 7", "x", True]), st.none())


@SETTINGS
@given(rows=st.lists(st.tuples(_py_ids, _py_ids, _py_ids, _py_times, _py_times,
                               st.one_of(st.sampled_from(["s", " s", ""]), st.none(), st.integers(0, 3))),
                     min_size=1, max_size=8))
def test_builder_arrow_fast_path_changes_nothing(rows):
    """The builder hands plainly typed spans to :func:`validate_spans` as an Arrow table (no
    polars round trip); any other Python value (a float, bool or byte-string time or id, an
    integer beyond int64) takes polars' conversion. Either way, the same spans and log."""
    from unittest import mock

    from tracesleuth.io import _builder

    def flush(builder_patch):
        log = RejectLog()
        builder = _builder.SpanBatchBuilder("f", log)
        for i, (tid, sid, pid, start, end, service) in enumerate(rows, 1):
            builder.add(i, tid, sid, pid, service, "o", None, "server", start, end)
        with builder_patch:
            batch = builder.flush()
        return batch, log.rows

    from contextlib import nullcontext

    fast, fast_log = flush(nullcontext())
    slow, slow_log = flush(mock.patch.object(_builder.SpanBatchBuilder, "_arrow_raw", lambda self: None))
    assert fast.equals(slow)
    assert fast_log == slow_log
