"""The fast path of the OTLP JSON reader: a block of file-exporter lines parsed natively.

Apache Arrow's JSON reader (C++, multi-threaded) parses a block of
``ExportTraceServiceRequest`` lines against an explicit schema of the OTLP JSON encoding;
spans, their attributes and their resource's attributes are then laid out as canonical columns
with Arrow compute and numpy, and checked by the same :func:`~._builder.validate_spans` as
every other reader.

The explicit schema names the members the reader reads; Arrow skips the others, as the careful
path does. It refuses a member of another JSON type, malformed JSON, and the ``AnyValue``
members the fast path does not reproduce (``arrayValue``, ``kvlistValue``, ``bytesValue``,
declared as null so that any value of theirs is refused). The fast path also refuses what it
does not reproduce exactly (a block that is not all valid UTF-8, another spelling of a member
it reads, base64 ids, a kind or status code outside OTLP's enums, an attribute value that is
not exactly one of string/int/double/bool, an over-long string, a span attribute shadowing a
resource attribute, ...). Any of these makes :func:`read_block` raise :class:`NotClean`, and
the reader parses that block line by line on its careful path, which reports each problem with
its line and field. So a block gives the same spans and the same rejects whichever path reads
it; the fast path only decides how fast.
"""

from __future__ import annotations

import codecs
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from .. import schema as S
from ._builder import MAX_ATTRIBUTE_CHARS, RAW_EVENT_TYPE, RAW_LINK_TYPE, RejectLog, SpanBatchBuilder, validate_spans
from ._otlp import KIND_BY_CODE, STATUS_BY_CODE, OtlpValueError, ResourceContext, json_key_value

__all__ = ["NotClean", "read_block", "OTLP_JSON_SCHEMA"]


class NotClean(Exception):
    """The block holds something only the careful path reads faithfully (the message says what)."""


def _schema(int_value: pa.DataType = pa.string()) -> pa.Schema:
    """The members of the OTLP JSON encoding the reader reads (``intValue`` as decimal strings,
    as the encoding prescribes); Arrow skips the others (scopes, trace states, flags, dropped
    counts...), which costs less than building them."""
    refused = pa.null()  # any value but null fails to parse: the block goes to the careful path
    any_value = pa.struct([("stringValue", pa.string()), ("intValue", int_value),
                           ("doubleValue", pa.float64()), ("boolValue", pa.bool_()),
                           ("arrayValue", refused), ("kvlistValue", refused), ("bytesValue", refused)])
    kvs = pa.list_(pa.struct([("key", pa.string()), ("value", any_value)]))
    text = pa.string()
    event = pa.struct([("timeUnixNano", text), ("name", text), ("attributes", kvs)])
    link = pa.struct([("traceId", text), ("spanId", text), ("attributes", kvs)])
    span = pa.struct([
        ("traceId", text), ("spanId", text), ("parentSpanId", text), ("name", text), ("kind", pa.int32()),
        ("startTimeUnixNano", text), ("endTimeUnixNano", text), ("attributes", kvs),
        ("status", pa.struct([("code", pa.int32()), ("message", text)])),
        ("events", pa.list_(event)), ("links", pa.list_(link)),
    ])
    resource_spans = pa.struct([
        ("resource", pa.struct([("attributes", kvs)])),
        ("scopeSpans", pa.list_(pa.struct([("spans", pa.list_(span))]))),
    ])
    return pa.schema([("resourceSpans", pa.list_(resource_spans))])


#: One line of the collector's file exporter, in the OTLP JSON encoding (lowerCamelCase names,
#: hexadecimal ids, 64-bit integers as decimal strings, enums as integers).
OTLP_JSON_SCHEMA = _schema()
_PARSE = pj.ParseOptions(explicit_schema=OTLP_JSON_SCHEMA, unexpected_field_behavior="ignore",
                         newlines_in_values=False)
#: The same with every ``intValue`` a JSON number.
_PARSE_INT_NUMBERS = pj.ParseOptions(explicit_schema=_schema(pa.int64()), unexpected_field_behavior="ignore",
                                     newlines_in_values=False)
#: ``"intValue": 42``, an integer written as a JSON number.
_INT_NUMBER = re.compile(rb'"intValue"\s*:\s*(-?[0-9]+)')
#: Bytes the native parser takes at a time (a line must fit in one piece; a longer one is read too).
PARSE_BYTES = 4 << 20
_POOL = ThreadPoolExecutor(2, thread_name_prefix="tracesleuth-otlp-json")
_KINDS = pa.array([KIND_BY_CODE[i] for i in range(6)], pa.string())
_STATUSES = pa.array([STATUS_BY_CODE[i] for i in range(3)], pa.string())


def start_parse(block: bytes | bytearray) -> Callable[[], pa.Table]:
    """Start parsing a block of whole file-exporter lines on the reader's two threads.

    The reader starts the next block's parse before it lays out the current one, so the
    native parse and the layout (mostly one thread) overlap.

    Returns
    -------
    callable
        Waits for the parse and returns the table of lines (one row a line); raises
        :class:`NotClean` when a part of the block does not parse against the OTLP JSON schema.
    """
    futures = [_POOL.submit(_parse_half, half) for half in _halves(block)]

    def result() -> pa.Table:
        errors = [f.exception() for f in futures]  # waits for both: no parse outlives the block
        for e in errors:
            if e is not None:
                raise e
        tables = [f.result() for f in futures]
        return pa.concat_tables(tables) if tables else OTLP_JSON_SCHEMA.empty_table()
    return result


def read_block(parse: Callable[[], pa.Table], n_lines: int, first_line: int, builder: SpanBatchBuilder
               ) -> pa.RecordBatch | None:
    """Read a block of whole file-exporter lines.

    Parameters
    ----------
    parse : callable
        The block's parse, from :func:`start_parse`.
    n_lines : int
        Lines in the block (newlines).
    first_line : int
        1-based line number of the block's first line in the file (the spans' record numbers).
    builder : SpanBatchBuilder
        Gives the source and the reject log; resource attribute values longer than
        :data:`~._builder.MAX_ATTRIBUTE_CHARS` are reported there, as the careful path does.

    Returns
    -------
    pyarrow.RecordBatch or None
        The block's valid spans in :data:`~tracesleuth.schema.SPAN_SCHEMA` (rejects go to the log),
        ``None`` for a block without spans.

    Raises
    ------
    NotClean
        When the block must be read line by line instead; nothing has been logged then.
    """
    table = parse()
    if table.num_rows != n_lines:
        raise NotClean("blank lines")  # Arrow skips them; line numbers would shift
    lines = table.column("resourceSpans").combine_chunks()
    if lines.null_count:
        raise NotClean("a line without resourceSpans")
    resource_spans = lines.flatten()
    rs_line = pc.list_parent_indices(lines).to_numpy() + first_line
    scope_spans = resource_spans.field("scopeSpans")
    if scope_spans.null_count:  # perhaps under another name (instrumentationLibrarySpans, scope_spans)
        raise NotClean("a resourceSpans without scopeSpans")
    scopes = scope_spans.flatten()
    scope_rs = pc.list_parent_indices(scope_spans).to_numpy()
    span_lists = scopes.field("spans")
    if scopes.null_count or span_lists.null_count:
        raise NotClean("a null scope or a scope without spans")
    spans = span_lists.flatten()
    span_rs = scope_rs[pc.list_parent_indices(span_lists).to_numpy()]
    n = len(spans)
    if n == 0:
        return None

    # Warnings (over-long resource attribute values) wait in a log of their own until the block
    # is accepted: a block refused later is read again by the careful path, which reports them.
    warnings = SpanBatchBuilder(builder.source, RejectLog(), limits=builder.limits)
    contexts = _resource_contexts(resource_spans.field("resource"), rs_line, warnings)
    trace_id, span_id, parent = spans.field("traceId"), spans.field("spanId"), spans.field("parentSpanId")
    name, start, end = spans.field("name"), spans.field("startTimeUnixNano"), spans.field("endTimeUnixNano")
    for col, what in ((trace_id, "traceId"), (span_id, "spanId"), (name, "name"), (start, "startTimeUnixNano"),
                      (end, "endTimeUnixNano")):
        if col.null_count:
            raise NotClean(f"a span without {what}")
    if not (_all(pc.equal(pc.binary_length(trace_id), 32)) and _all(pc.equal(pc.binary_length(span_id), 16))
            and _all(pc.is_in(pc.binary_length(parent.fill_null("")), pa.array([0, 16], pa.int32())))):
        raise NotClean("an id that is not hexadecimal of the right length (base64?)")
    kind_code = spans.field("kind").fill_null(0).to_numpy(zero_copy_only=False)
    status = spans.field("status")
    status_code = pc.if_else(status.is_null(), 0, status.field("code").fill_null(0)).to_numpy(zero_copy_only=False)
    if (kind_code < 0).any() or (kind_code > 5).any() or (status_code < 0).any() or (status_code > 2).any():
        raise NotClean("a kind or status code outside OTLP's enums")

    attributes = _attributes(spans.field("attributes"), span_rs, contexts)
    events, links = _events(spans.field("events")), _links(spans.field("links"))
    message = status.field("message")
    if message.null_count < len(message):
        message = pc.if_else(pc.equal(message, ""), pa.scalar(None, pa.string()), message)
    by_span = pa.array(span_rs.astype(np.int32))
    raw = pa.table({
        "_record": pa.array(rs_line[span_rs]),
        "_raw_trace": trace_id,
        "_raw_span": span_id,
        "_raw_parent": pc.if_else(pc.equal(parent, ""), None, parent),
        S.SERVICE: pa.DictionaryArray.from_arrays(by_span, pa.array([c.service for c in contexts], pa.string())),
        S.OPERATION: name,
        S.INSTANCE: pa.array([c.instance for c in contexts], pa.string()).take(by_span),
        S.KIND: _KINDS.take(pa.array(kind_code)),
        "_start": start,
        "_end": end,
        S.STATUS: _STATUSES.take(pa.array(status_code)),
        S.FOLLOWS_FROM: pa.array(np.zeros(n, dtype=bool)),
        S.STATUS_MESSAGE: message,
    })
    builder.log.merge(warnings.log)
    return validate_spans(raw, attributes, builder.source, builder.log, limits=builder.limits, events=events,
                          links=links)


def _halves(block: bytes | bytearray) -> list[pa.Buffer]:
    """The block cut at the newline nearest its middle (one piece for a single line), no copy."""
    middle = block.rfind(b"\n", 0, len(block) // 2) + 1
    buffer = pa.py_buffer(block)
    return [h for h in (buffer.slice(0, middle), buffer.slice(middle)) if h.size]


def _parse_half(data: pa.Buffer) -> pa.Table:
    """Parse whole lines; integers written as JSON numbers (OTLP's decoders accept both) are
    read too, and come out as decimal strings like the others.

    Arrow's own multi-threaded parse is not used: after a parse error its tasks may still run
    when Python exits, which aborts the process; the reader's threads are always joined.
    """
    _check_utf8(data)
    try:
        return _read_json(data, _PARSE)
    except NotClean as e:
        if "intValue" not in str(e):
            raise
    try:  # every integer a JSON number, as the JavaScript SDK writes them
        return _read_json(data, _PARSE_INT_NUMBERS).cast(OTLP_JSON_SCHEMA)
    except NotClean as e:
        if "intValue" not in str(e):
            raise
    # Some of each: the numbers are rewritten as strings. The pattern starts with a literal (fast
    # search), so text inside a string value that looks like the member, an escaped quote before
    # it, sends the block to the careful path.
    text = data.to_pybytes()
    if b'\\"intValue' in text:
        raise NotClean("an escaped intValue member inside a string")
    parts = _INT_NUMBER.split(text)  # text, digits, text, digits, ..., text
    parts[1::2] = [b'"intValue":"' + digits + b'"' for digits in parts[1::2]]
    return _read_json(pa.py_buffer(b"".join(parts)), _PARSE)


def _check_utf8(data: pa.Buffer) -> None:
    """Raise :class:`NotClean` unless ``data`` is valid UTF-8: the parser neither checks the
    members it skips nor the strings it builds, and the careful path reports invalid bytes."""
    octets = np.frombuffer(data, np.uint8)
    for at in range(0, len(octets), PARSE_BYTES):
        if octets[at:at + PARSE_BYTES].max() >= 0x80:  # else ASCII
            try:
                codecs.utf_8_decode(memoryview(data)[at:], "strict", True)
            except UnicodeDecodeError as e:
                raise NotClean(f"invalid UTF-8: {e.reason}") from None
            return


def _read_json(data: pa.Buffer, options: pj.ParseOptions) -> pa.Table:
    """Parse whole lines in pieces of :data:`PARSE_BYTES` (the parser's buffers then stay small and
    are reused); a line longer than a piece is parsed with the rest in one piece."""
    try:
        try:
            table = pj.read_json(pa.BufferReader(data), parse_options=options,
                                 read_options=pj.ReadOptions(use_threads=False, block_size=PARSE_BYTES))
        except pa.ArrowInvalid as e:
            if "straddl" not in str(e):
                raise
            table = pj.read_json(pa.BufferReader(data), parse_options=options,
                                 read_options=pj.ReadOptions(use_threads=False, block_size=data.size + 1))
    except (pa.ArrowException, UnicodeDecodeError, ValueError) as e:
        raise NotClean(str(e)) from None
    return table


def _all(mask: pa.Array) -> bool:
    return bool(pc.all(mask.fill_null(False)).as_py()) if len(mask) else True


def _resource_contexts(resources: pa.StructArray, rs_line: np.ndarray, builder: SpanBatchBuilder
                       ) -> list[ResourceContext]:
    """A :class:`~._otlp.ResourceContext` per ``ResourceSpans`` (a few per line: plain Python)."""
    out = []
    for r, resource in enumerate(resources.to_pylist()):
        items = []
        for i, kv in enumerate((resource or {}).get("attributes") or ()):
            value = kv.get("value")
            if value is not None:
                value = {k: v for k, v in value.items() if v is not None}
                if len(value) != 1:
                    raise NotClean("a resource attribute value that is not exactly one of string/int/double/bool")
            try:
                items.append(json_key_value({"key": kv.get("key"), "value": value}, f"resource.attributes[{i}]"))
            except OtlpValueError as e:
                raise NotClean(str(e)) from None
        if len({k for k, _ in items}) != len(items):
            raise NotClean("a repeated resource attribute key")
        out.append(ResourceContext(items, builder, int(rs_line[r])))
    return out


def _events(lists: pa.ListArray) -> pa.ListArray | None:
    """Each span's events (:data:`~._builder.RAW_EVENT_TYPE`: times still text), None when no
    span of the block has any."""
    if lists.null_count == len(lists):
        return None
    events = lists.flatten()
    if events.null_count or events.field("timeUnixNano").null_count:
        raise NotClean("an event without timeUnixNano")
    names = events.field("name")
    values = pa.StructArray.from_arrays([events.field("timeUnixNano"), names.fill_null("") if names.null_count
                                         else names, _typed_lists(events.field("attributes"))],
                                        fields=list(RAW_EVENT_TYPE))
    return pa.ListArray.from_arrays(_list_offsets(lists), values)


def _links(lists: pa.ListArray) -> pa.ListArray | None:
    """Each span's links (:data:`~._builder.RAW_LINK_TYPE`), None when no span of the block has any."""
    if lists.null_count == len(lists):
        return None
    links = lists.flatten()
    trace_id, span_id = links.field("traceId"), links.field("spanId")
    if links.null_count or trace_id.null_count or span_id.null_count:
        raise NotClean("a link without traceId or spanId")
    if not (_all(pc.equal(pc.binary_length(trace_id), 32)) and _all(pc.equal(pc.binary_length(span_id), 16))):
        raise NotClean("a link id that is not hexadecimal of the right length (base64?)")
    values = pa.StructArray.from_arrays([trace_id, span_id, _typed_lists(links.field("attributes"))],
                                        fields=list(RAW_LINK_TYPE))
    return pa.ListArray.from_arrays(_list_offsets(lists), values)


def _list_offsets(lists: pa.ListArray) -> pa.Array:
    """Offsets from 0 of the lists of ``lists`` (a null list: an empty one), for their flattened values."""
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))


def _typed_lists(lists: pa.ListArray) -> pa.ListArray:
    """OTLP JSON ``KeyValue`` lists as :data:`~tracesleuth.schema.ATTRIBUTE_TYPE` lists (a null list:
    an empty one)."""
    return pa.ListArray.from_arrays(_list_offsets(lists), _typed_values(lists.flatten()))


def _typed_values(kv: pa.StructArray) -> pa.StructArray:
    """OTLP JSON ``KeyValue`` objects as :data:`~tracesleuth.schema.ATTRIBUTE_TYPE` entries; raises
    :class:`NotClean` at a value the careful path would read otherwise."""
    key, value = kv.field("key"), kv.field("value")
    if key.null_count or value.null_count:
        raise NotClean("an attribute without key or value")
    s, i_text, f, b = (value.field(x) for x in ("stringValue", "intValue", "doubleValue", "boolValue"))
    # exactly one each: one at least in every value, and as many in all as there are values
    some = pc.or_(pc.or_(s.is_valid(), i_text.is_valid()), pc.or_(f.is_valid(), b.is_valid()))
    if sum(len(c) - c.null_count for c in (s, i_text, f, b)) != len(kv) or not _all(some):
        raise NotClean("an attribute value that is not exactly one of string/int/double/bool")
    if len(kv) and (pc.max(pc.binary_length(s)).as_py() or 0) > MAX_ATTRIBUTE_CHARS \
            and not _all(pc.less_equal(pc.utf8_length(s.fill_null("")), MAX_ATTRIBUTE_CHARS)):  # characters <= bytes
        raise NotClean("an attribute value longer than the limit")
    try:
        i = pc.cast(i_text, pa.int64())
    except pa.ArrowInvalid:
        raise NotClean("an intValue that is not a 64-bit decimal integer") from None
    return pa.StructArray.from_arrays([key, s, i, f, b], fields=list(S.ATTRIBUTE_TYPE))


def _attributes(lists: pa.ListArray, span_rs: np.ndarray, contexts: list[ResourceContext]) -> pa.ListArray:
    """Each span's attributes, then its resource's (:data:`~tracesleuth.schema.ATTRIBUTE_TYPE`)."""
    n = len(lists)
    span_len = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    kv = lists.flatten()
    span_values = _typed_values(kv)
    key = kv.field("key")

    res_len = np.array([len(c.columns[0]) for c in contexts], dtype=np.int64)
    res_values = pa.StructArray.from_arrays(
        [pa.array([x for c in contexts for x in c.columns[j]], type=t.type)
         for j, t in enumerate(S.ATTRIBUTE_TYPE)], fields=list(S.ATTRIBUTE_TYPE))
    if len(res_values) and len(kv):
        _check_no_shadowing(key, span_len, span_rs, contexts)

    # Gather span attributes then resource attributes, span by span, from one values array.
    span_off = np.concatenate([[0], np.cumsum(span_len)])
    res_off = np.concatenate([[0], np.cumsum(res_len)])
    seg_start = np.empty(2 * n, dtype=np.int64)
    seg_len = np.empty(2 * n, dtype=np.int64)
    seg_start[0::2], seg_len[0::2] = span_off[:-1], span_len
    seg_start[1::2], seg_len[1::2] = len(kv) + res_off[span_rs], res_len[span_rs]
    out_off = np.concatenate([[0], np.cumsum(seg_len)])
    total = int(out_off[-1])
    take = np.arange(total, dtype=np.int64) + np.repeat(seg_start - out_off[:-1], seg_len)
    values = pa.concat_arrays([span_values, res_values]).take(pa.array(take))
    offsets = np.concatenate([[0], np.cumsum(span_len + res_len[span_rs])]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def _check_no_shadowing(key: pa.Array, span_len: np.ndarray, span_rs: np.ndarray,
                        contexts: list[ResourceContext]) -> None:
    """Raise :class:`NotClean` when a span sets a key its resource sets too (the careful path then
    keeps the span's value and drops the resource's)."""
    names = {k for c in contexts for k in c.keys}
    if not pc.any(pc.is_in(key, pa.array(sorted(names), pa.string()))).as_py():
        return  # no span sets a key that any resource of the block sets
    resource_keys = pl.DataFrame(
        [(r, k) for r, c in enumerate(contexts) for k in c.keys], schema=[("rs", pl.Int64), ("key", pl.String)],
        orient="row")
    span_keys = pl.DataFrame({"rs": np.repeat(span_rs, span_len), "key": pl.from_arrow(key)})
    if span_keys.join(resource_keys, on=["rs", "key"], how="semi").height:
        raise NotClean("a span attribute shadowing a resource attribute")
