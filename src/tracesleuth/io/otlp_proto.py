"""OTLP protobuf reader: one ``ExportTraceServiceRequest`` (an OTLP/HTTP protobuf body), or the
collector file exporter's stream of length-prefixed requests.

Reference: ``opentelemetry/proto/collector/trace/v1/trace_service.proto`` and
``opentelemetry/proto/trace/v1/trace.proto`` (https://github.com/open-telemetry/opentelemetry-proto);
the collector's file exporter (``exporter/fileexporter``, ``format: proto``) writes each message
after its length as a 4-byte big-endian unsigned integer. Protobuf wire format (read in
:mod:`._protowire`):
https://protobuf.dev/programming-guides/encoding/.
"""

from __future__ import annotations

from typing import BinaryIO, Callable, Iterator

import pyarrow as pa
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

from ._builder import SpanBatchBuilder, batches
from ._jsondoc import NESTED_TOO_DEEP
from ._otlp import ResourceContext, kind_of, proto_any_value, status_of
from ._protowire import _LEN, _WireError, _fields, _read_varint
from ._source import chain

__all__ = ["read_otlp_proto"]

#: ``ExportTraceServiceRequest.resource_spans``, ``ResourceSpans.scope_spans``, ``ScopeSpans.spans``.
_RESOURCE_SPANS = ExportTraceServiceRequest.DESCRIPTOR.fields_by_name["resource_spans"].number
_SCOPE_SPANS = ResourceSpans.DESCRIPTOR.fields_by_name["scope_spans"].number
_SPANS = 2


#: Nesting (messages within messages) at which protobuf's decoder (upb) stops: its default
#: ``upb_DecodeOptions_MaxDepth``. OTLP needs 5 levels for a span's attribute value; each nested
#: ``array_value``/``kvlist_value`` adds 2 (or 3).
PROTOBUF_MAX_DEPTH = 100


def decode_error_reason(error: Exception, message: str) -> str:
    """The reject reason for a protobuf ``DecodeError`` while parsing ``message``: a nesting
    beyond :data:`PROTOBUF_MAX_DEPTH` says so (its reason starts with
    :data:`~tracesleuth.io._jsondoc.NESTED_TOO_DEEP`)."""
    text = str(error)
    if "MaxDepth" in text or "recursion" in text.lower():
        return (f"{NESTED_TOO_DEEP}: messages nested beyond protobuf's decoding limit of {PROTOBUF_MAX_DEPTH}; "
                f"record rejected unread")
    return f"not a valid {message} message: {text}"


def read_otlp_proto(stream: BinaryIO, builder: SpanBatchBuilder) -> Iterator[pa.RecordBatch]:
    """Read OTLP protobuf spans.

    The two layouts are told apart by the first byte: a raw ``ExportTraceServiceRequest`` starts
    with the tag of its field 1 (``0x0a``), a length-prefixed stream with the high byte of a
    length (0 for any message under 16 MiB).

    * A raw request (an OTLP/HTTP protobuf body): a record is an element of ``resource_spans``
      (1-based). The request is not loaded whole: each ``ResourceSpans`` is cut from the stream
      and decoded on its own, so memory follows the largest ``ResourceSpans`` and a corrupt one
      loses only its own spans.
    * The collector file exporter's stream (``format: proto``): each request is preceded by its
      length as a 4-byte big-endian unsigned integer; a record is a request (1-based).

    Parameters
    ----------
    stream : binary file
        The decompressed request, or the exporter's length-prefixed stream.
    builder : SpanBatchBuilder
        Receives the spans; rejected records go to its log (``field`` names the
        ``resource_spans`` element), a truncated stream is logged at its byte offset.

    Yields
    ------
    pyarrow.RecordBatch
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, one resource after another.

    Notes
    -----
    The mapping is that of :func:`~tracesleuth.io.otlp_json.read_otlp_json`: ids are the bytes as
    hexadecimal, times are ``fixed64`` Unix epoch nanoseconds, unchanged; ``bytes_value``
    attributes are kept as base64 text (as OTLP JSON writes them). ``status.message``,
    ``events`` (``time_unix_nano``, ``name``, ``attributes``) and ``links`` (``trace_id``,
    ``span_id``, ``attributes``) are kept; a link whose ids are not 16 and 8 bytes is dropped and
    reported, its span kept.
    """
    yield from read_requests(stream, builder, _read_resource_spans)


def read_requests(stream: BinaryIO, builder, read_resource: Callable, *, field: str = "resource_spans",
                  message: str = "ExportTraceServiceRequest") -> Iterator[pa.RecordBatch]:
    """The batches of a raw request or of the file exporter's stream (told by the first byte):
    ``read_resource(data, builder, record, index)`` adds each resource's records.

    The framing of the span reader and the log reader
    (:func:`~tracesleuth.io.otlp_logs.read_otlp_logs_proto`): their requests differ only in
    ``field`` (the resources' field, named in rejects) and ``message`` (the request type).
    """
    first = stream.read(1)
    stream = chain(first, stream)
    units = (_raw_units(stream, builder, field=field) if first == b"\x0a"
             else _prefixed_units(stream, builder, message=message))
    return batches(builder, (read_resource(data, builder, record, index) for record, index, data in units))


def read_resource(message_type, data: bytes, builder, attributes: SpanBatchBuilder, record: int,
                  index: int | None, field: str) -> tuple:
    """``data`` parsed as ``message_type`` (``ResourceSpans``, ``ResourceLogs``) and its resource's
    :class:`~tracesleuth.io._otlp.ResourceContext` (for the ``attributes`` builder); ``(None, None)``
    with the reject logged at ``field`` (``[index]`` added) when it does not parse: its records
    (as many as can be told from the bytes) are lost."""
    where = field if index is None else f"{field}[{index}]"
    try:
        message = message_type.FromString(data)
    except DecodeError as e:
        builder.log.add(builder.source, record, decode_error_reason(e, message_type.__name__), field=where,
                        spans=_count_spans(data), excerpt=data[:64])  # records: field 2 in field 2 in both
        return None, None
    return message, ResourceContext([(kv.key, proto_any_value(kv.value)) for kv in message.resource.attributes],
                                    attributes, record)


def attributed(scopes, records: str, attributes: SpanBatchBuilder, record: int) -> Iterator[tuple]:
    """``(item, n_attrs)`` for each item of each scope's ``records`` (``spans``, ``log_records``),
    its own attributes added to ``attributes`` first; ``n_attrs`` is where they start (for
    :meth:`~tracesleuth.io._otlp.ResourceContext.extend`)."""
    keys, add_attribute = attributes.attr_key, attributes.add_attribute
    for scope in scopes:
        for item in getattr(scope, records):
            n_attrs = len(keys)
            for kv in item.attributes:
                add_attribute(kv.key, proto_any_value(kv.value), record)
            yield item, n_attrs


# -- framing ----------------------------------------------------------------------------------
def _count_spans(resource_spans: bytes) -> int:
    """Spans identifiable in the bytes of a (possibly corrupt or partial) ``ResourceSpans``."""
    n = 0
    try:
        for number, wire, scope in _fields(resource_spans, partial=True):
            if number == _SCOPE_SPANS and wire == _LEN:
                try:
                    n += sum(1 for f, w, _ in _fields(scope, partial=True) if f == _SPANS and w == _LEN)
                except _WireError:
                    pass
    except _WireError:
        pass
    return n


#: Protobuf's limit on the size of a serialized message; a larger length field is corruption.
_MAX_MESSAGE_BYTES = (1 << 31) - 1
_READ_CHUNK_BYTES = 1 << 26


def _read_up_to(stream: BinaryIO, length: int) -> bytes:
    """Up to ``length`` bytes of ``stream`` (fewer at its end), read in chunks so that a corrupt
    length field costs memory only for the bytes that are really there."""
    if length <= _READ_CHUNK_BYTES:
        return stream.read(length)
    parts, left = [], length
    while left > 0:
        chunk = stream.read(min(left, _READ_CHUNK_BYTES))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _raw_units(stream: BinaryIO, builder: SpanBatchBuilder, *, field: str = "resource_spans"
               ) -> Iterator[tuple[int, int | None, bytes]]:
    """``(record, None, ResourceSpans bytes)`` for each ``resource_spans`` of one raw request
    (``ResourceLogs`` of ``resource_logs`` alike: the same field numbers; ``field`` names it)."""
    offset, record = 0, 0
    while True:
        start = offset
        try:
            key, n = _read_varint(stream)
            if key is None:
                return
            offset += n
            number, wire = key >> 3, key & 7
            if wire == 0:
                _, n = _read_varint(stream)
                if n == 0:
                    raise _WireError("truncated varint")
                offset += n
                continue
            if wire == _LEN:
                length, n = _read_varint(stream)
                if length is None:
                    raise _WireError("truncated length")
                offset += n
                if length > _MAX_MESSAGE_BYTES:
                    raise _WireError(f"length field of {length} bytes beyond protobuf's 2 GiB message limit")
                data = _read_up_to(stream, length)
                offset += len(data)
                if len(data) < length:
                    spans = _count_spans(data) if number == _RESOURCE_SPANS else 0
                    raise _WireError(f"message cut short: {length} bytes announced, {len(data)} present", spans)
                if number == _RESOURCE_SPANS:
                    record += 1
                    yield record, None, data
                continue
            size = {1: 8, 5: 4}.get(wire)
            if size is None or number == 0:
                raise _WireError(f"not a protobuf field (tag {key:#x})")
            if len(stream.read(size)) < size:
                raise _WireError("truncated fixed-size field")
            offset += size
        except _WireError as e:
            spans = e.args[1] if len(e.args) > 1 else 0
            builder.log.add(builder.source, record + 1, f"protobuf framing broken at byte {start}: {e.args[0]}; "
                            f"{record} complete record(s) before it were read", field=field,
                            spans=spans)
            return


def _prefixed_units(stream: BinaryIO, builder: SpanBatchBuilder, *, message: str = "ExportTraceServiceRequest"
                    ) -> Iterator[tuple[int, int, bytes]]:
    """``(record, index, ResourceSpans bytes)`` for each ``resource_spans`` of each
    length-prefixed request (``message`` names the request type in the rejects)."""
    offset, record = 0, 0
    while True:
        prefix = stream.read(4)
        if not prefix:
            return
        record += 1
        if len(prefix) < 4:
            builder.log.add(builder.source, record, f"length prefix cut short at byte {offset}", spans=0,
                            excerpt=prefix)
            return
        length = int.from_bytes(prefix, "big")
        if length > _MAX_MESSAGE_BYTES:
            builder.log.add(builder.source, record, f"length prefix at byte {offset} announces {length} bytes, "
                            f"beyond protobuf's 2 GiB message limit; the rest of the file is not read",
                            spans=0, excerpt=prefix)
            return
        data = _read_up_to(stream, length)
        if len(data) < length:
            spans = sum(_count_spans(rs) for f, w, rs in _safe_fields(data) if f == _RESOURCE_SPANS and w == _LEN)
            builder.log.add(builder.source, record, f"request at byte {offset} cut short: {length} bytes "
                            f"announced, {len(data)} present", spans=spans, excerpt=data[:64])
            return
        try:
            fields = list(_fields(data))
        except _WireError as e:
            spans = sum(_count_spans(rs) for f, w, rs in _safe_fields(data) if f == _RESOURCE_SPANS and w == _LEN)
            builder.log.add(builder.source, record, f"not an {message} (request at byte {offset}): "
                            f"{e.args[0]}", spans=spans, excerpt=data[:64])
            fields = []
        index = 0
        for number, wire, payload in fields:
            if number == _RESOURCE_SPANS and wire == _LEN:
                yield record, index, payload
                index += 1
        offset += 4 + length


def _safe_fields(data: bytes) -> list:
    out = []
    try:
        for f in _fields(data, partial=True):
            out.append(f)
    except _WireError:
        pass
    return out


# -- spans ------------------------------------------------------------------------------------
def _read_resource_spans(data: bytes, builder: SpanBatchBuilder, record: int, index: int | None) -> None:
    rs, ctx = read_resource(ResourceSpans, data, builder, builder, record, index, "resource_spans")
    if rs is None:
        return
    service, instance, keys, add = ctx.service, ctx.instance, builder.attr_key, builder.add
    for sp, n_attrs in attributed(rs.scope_spans, "spans", builder, record):
        ctx.extend(builder, keys[n_attrs:])
        for ev in sp.events:
            builder.add_event(ev.time_unix_nano, ev.name, [(kv.key, proto_any_value(kv.value))
                                                           for kv in ev.attributes], record)
        for ln in sp.links:
            builder.add_link(_id_hex(ln.trace_id, 16), _id_hex(ln.span_id, 8),
                             [(kv.key, proto_any_value(kv.value)) for kv in ln.attributes], record)
        status = status_of(sp.status.code, builder, record) if sp.status.code else "unset"
        tid, pid = sp.trace_id, sp.parent_span_id
        add(record, _id_hex(tid, 16), _id_hex(sp.span_id, 8), (pid.hex() if len(pid) == 8 else "!") if pid else None,
            service, sp.name, instance, kind_of(sp.kind), sp.start_time_unix_nano, sp.end_time_unix_nano, status,
            status_message=sp.status.message)


def _id_hex(raw: bytes, n_bytes: int) -> str:
    """OTLP ids are exactly 16 (trace) and 8 (span) bytes: their hexadecimal text; any other
    length is no id (``""``, which the builder rejects or drops as such)."""
    return raw.hex() if len(raw) == n_bytes else ""
