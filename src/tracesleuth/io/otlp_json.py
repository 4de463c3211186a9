"""OTLP JSON reader: the OpenTelemetry Collector file exporter's lines, or one OTLP/HTTP JSON body.

Reference: OTLP specification, "JSON Protobuf Encoding"
(https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding), message
``ExportTraceServiceRequest`` of ``opentelemetry/proto/collector/trace/v1/trace_service.proto``.
"""

from __future__ import annotations

import io
import re
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np
import orjson
import pyarrow as pa

from . import _jsondoc, _otlp_arrow
from ._builder import MAX_ATTRIBUTE_CHARS, SpanBatchBuilder, last_batch
from ._jsondoc import (MAX_DEPTH, NESTED_TOO_DEEP, DepthScanner, DocumentShapeError, TooDeep, byte_offset, count_keys, gc_paused,
                       iter_json_items, json_bytes, loads_repairing, max_depth, warn_replacements)
from ._otlp import (KIND_BY_CODE, STATUS_BY_CODE, OtlpValueError, ResourceContext, hex_id,
                    json_key_value, kind_of, status_of)
from ._source import chain

__all__ = ["read_otlp_json"]

#: Member names that occur once per span, and once per link (:func:`count_spans` tells them apart).
SPAN_KEYS = (b'"spanId"', b'"span_id"')
_LINKS_LIST = re.compile(rb'"links"\s*:\s*\[')
#: Lines looked at (at most) to tell the file exporter's layout from a pretty-printed body.
SNIFF_LINES = 1000
#: Bytes of whole lines handed to the native parser at once, and bytes per read (a read that
#: fails, on corrupt gzip data, loses what it had decompressed).
BLOCK_BYTES = 16 << 20
READ_BYTES = 1 << 20
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def read_otlp_json(stream: BinaryIO, builder: SpanBatchBuilder) -> Iterator[pa.RecordBatch]:
    """Read OTLP JSON spans.

    Two layouts are accepted, told apart by content:

    * the collector file exporter's output: one ``ExportTraceServiceRequest``
      (``{"resourceSpans": [...]}``) per line. A record is a line (1-based line number).
    * a single OTLP/HTTP JSON body, compact or pretty-printed over many lines. A record is an
      element of its ``resourceSpans`` array (1-based). A body larger than
      :data:`~tracesleuth.io._jsondoc.MAX_DOCUMENT_BYTES` is streamed one ``resourceSpans``
      element at a time; a truncated or malformed body is read up to the break.

    Parameters
    ----------
    stream : binary file
        The decompressed request body, or the exporter's lines.
    builder : SpanBatchBuilder
        Receives the spans; rejected records and warnings go to its log, with a ``field`` that
        is a JSON path inside the record (``resourceSpans[0].scopeSpans[1].spans[7].traceId``).

    Yields
    ------
    pyarrow.RecordBatch
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, line by line (or resource by resource in one body).

    Notes
    -----
    Field mapping (OTLP -> canonical): ``traceId``/``spanId``/``parentSpanId`` (hexadecimal; base64
    of 16/8 bytes accepted as a fallback) -> ids; ``name`` -> operation; ``kind`` (integer or
    ``SPAN_KIND_*``) -> kind; ``startTimeUnixNano``/``endTimeUnixNano`` (Unix epoch nanoseconds,
    JSON string or number) -> ``start_ns``/``end_ns``, unchanged; ``status.code`` (0/1/2 or
    ``STATUS_CODE_*``) -> unset/ok/error; resource ``service.name`` -> service; the first of
    :data:`~tracesleuth.schema.INSTANCE_ATTRIBUTES` -> instance. Attributes are the span's, then the
    resource's (the span's value wins when both set a key); ``arrayValue`` and ``kvlistValue`` are
    kept as JSON text, ``bytesValue`` as its base64 text. ``status.message`` -> status message
    (an empty one is none); ``events`` -> events (``timeUnixNano``, ``name``, typed ``attributes``)
    and ``links`` -> links (``traceId``, ``spanId`` as span ids are read, typed ``attributes``): a
    malformed event or link is dropped and reported, its span kept. Links never make a parent.
    Scopes are not read. ``snake_case`` member names (protobuf's own JSON names) and the
    pre-1.0 ``instrumentationLibrarySpans`` are accepted too.

    The file exporter's lines are read in blocks of :data:`BLOCK_BYTES`: a block in the plain
    OTLP JSON encoding is parsed natively (:mod:`._otlp_arrow`); a block with anything else (a
    malformed line, another spelling, a value to report) is read line by line as described
    above. Both give the same spans and rejects.
    """
    head, ndjson, error = _sniff_lines(stream)
    stream = chain(head, stream) if error is None else io.BytesIO(head)
    del head
    reader = _RequestReader(builder)
    if ndjson:
        lineno = 1
        for (block, block_error, cut_off), parse in _parsed_ahead(_line_blocks(stream, BLOCK_BYTES)):
            n_lines = _newlines(block)
            try:
                batch = _otlp_arrow.read_block(parse, n_lines, lineno, builder)
            except _otlp_arrow.NotClean:
                too_deep = _deep_lines(block)
                for k, line in enumerate(bytes(block).split(b"\n")[:-1]):
                    if k in too_deep:
                        depth, at = too_deep[k]
                        builder.log.add(builder.source, lineno + k, f"{NESTED_TOO_DEEP}: {depth} levels at byte {at} "
                                        f"of the line, beyond the limit of {MAX_DEPTH}; line rejected unread",
                                        spans=count_spans(line), excerpt=line[:120])
                    elif line and not line.isspace():
                        with gc_paused():
                            reader.read_line(line, lineno + k)
                    if builder.full():
                        yield builder.flush()
            else:
                if len(builder):  # keep the file's order
                    yield builder.flush()
                if batch is not None:
                    yield batch
            lineno += n_lines
            if block_error is not None:
                if cut_off.strip():  # the line the read error cut: its spans are lost, and counted
                    builder.log.add(builder.source, lineno, f"line cut short by a read error: {block_error}",
                                    spans=count_spans(cut_off), excerpt=cut_off)
                raise block_error
    else:
        yield from body_batches(stream, builder, reader.read_resource_spans, items_of=_resource_spans_of,
                                prefix_of=_prefix_of, keys=SPAN_KEYS, count=_spans_in,
                                byte_count=count_spans)
    if error is not None:  # the records before it were read; the caller reports the rest
        raise error
    yield from last_batch(builder)


def _parsed_ahead(blocks: Iterator[tuple[bytearray, OSError | None, bytes]]
                  ) -> Iterator[tuple[tuple[bytearray, OSError | None, bytes], Callable[[], pa.Table]]]:
    """Each block with its native parse, started one block ahead of the caller's layout."""
    ahead = None
    for item in blocks:
        started = (item, _otlp_arrow.start_parse(item[0]))
        if ahead is not None:
            yield ahead
        ahead = started
    if ahead is not None:
        yield ahead


def _deep_lines(block: bytearray) -> dict[int, tuple[int, int]]:
    """``{line index: (depth, byte offset in the line)}`` of the lines of ``block`` nested deeper
    than :data:`~tracesleuth.io._jsondoc.MAX_DEPTH`: one vectorized scan of the block, then, only
    when it goes too deep somewhere, one scan per line (a malformed line can leave brackets open
    and make the lines after it look deeper than they are)."""
    _, depths = DepthScanner().feed(block)
    if not len(depths) or int(depths.max()) <= MAX_DEPTH:
        return {}
    out = {}
    for k, line in enumerate(bytes(block).split(b"\n")[:-1]):
        depth, at = max_depth(line)
        if depth > MAX_DEPTH:
            out[k] = (depth, at)
    return out


def _newlines(block: bytearray) -> int:
    """Newlines in ``block``: numpy compares a slice at a time into one small buffer, three
    times faster than ``bytearray.count`` and without a temporary the size of the block."""
    data = np.frombuffer(block, np.uint8)
    found = np.empty(min(len(data), READ_BYTES), dtype=bool)
    count = 0
    for at in range(0, len(data), len(found)):
        piece = data[at:at + len(found)]
        count += int(np.count_nonzero(np.equal(piece, ord("\n"), out=found[:len(piece)])))
    return count


def _line_blocks(stream: BinaryIO, size: int) -> Iterator[tuple[bytearray, OSError | None, bytes]]:
    """``(block, error, cut_off)``: blocks of about ``size`` bytes of whole lines, each ending with
    a newline (one is added to a last line without). Each block is read straight into a buffer of
    its own (no copies of the file's bytes); a line longer than ``size`` makes its block longer.
    A read error (corrupt gzip data) ends the blocks: the whole lines read before it come with
    the error, and the bytes of the line it cut as ``cut_off``, for the caller to read, report
    and then raise."""
    tail = b""
    while True:
        block = bytearray(len(tail) + size)
        block[:len(tail)] = tail
        filled, eof, error = _fill(stream, block, len(tail))
        while filled == len(block) and block.find(b"\n", len(tail)) < 0:  # a line longer than the block
            longer = bytearray(2 * len(block))
            longer[:filled] = block
            block = longer
            filled, eof, error = _fill(stream, block, filled)
        del block[filled:]
        if error is not None:
            cut = block.rfind(b"\n") + 1
            yield block[:cut], error, bytes(block[cut:])
            return
        if eof:
            if block:
                if not block.endswith(b"\n"):
                    block += b"\n"
                yield block, None, b""
            return
        cut = block.rfind(b"\n") + 1
        tail = bytes(block[cut:])
        del block[cut:]
        yield block, None, b""


def _fill(stream: BinaryIO, buffer: bytearray, filled: int) -> tuple[int, bool, OSError | None]:
    """Read into ``buffer`` from ``filled`` until it is full: ``(filled, end of stream, error)``."""
    view = memoryview(buffer)
    try:
        while filled < len(buffer):
            n = stream.readinto(view[filled:filled + READ_BYTES])
            if not n:
                return filled, True, None
            filled += n
        return filled, False, None
    except OSError as e:
        return filled, False, e
    finally:
        view.release()


def _sniff_lines(stream: BinaryIO, members: tuple[str, ...] = ("resourceSpans", "resource_spans")
                 ) -> tuple[bytes, bool, OSError | None]:
    """Read lines until one is a whole request object (the file exporter's layout; a single
    compact body is then one such line: an object with one of ``members``), or until :data:`SNIFF_LINES` lines or
    :data:`~tracesleuth.io._jsondoc.MAX_DOCUMENT_BYTES` went by without one (a pretty-printed
    body never has one).

    Returns
    -------
    head : bytes
        The bytes read.
    ndjson : bool
        The verdict.
    error : OSError or None
        What stopped the read early (corrupt or truncated gzip data).
    """
    limit = _jsondoc.MAX_DOCUMENT_BYTES
    lines: list[bytes] = []
    size = 0
    while size <= limit and len(lines) < SNIFF_LINES:
        room = limit + 1 - size
        try:
            line = stream.readline(room)
        except (OSError, EOFError) as e:
            return b"".join(lines), False, e if isinstance(e, OSError) else OSError(str(e))
        if not line:
            break
        lines.append(line)
        size += len(line)
        complete = line.endswith(b"\n") or len(line) < room  # else cut short at the limit
        if complete and b"esource" in line:  # resourceSpans / resource_spans
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and any(m in obj for m in members):
                return b"".join(lines), True, None
    return b"".join(lines), False, None


def _prefix_of(head: bytes) -> str:
    return "resource_spans.item" if b'"resource_spans"' in head and b'"resourceSpans"' not in head \
        else "resourceSpans.item"


def _resource_spans_of(doc: Any) -> list:
    if not isinstance(doc, dict):
        raise DocumentShapeError(None, f"an OTLP JSON body must be an object, got {type(doc).__name__}")
    rs = doc.get("resourceSpans", doc.get("resource_spans"))
    if not isinstance(rs, list):
        raise DocumentShapeError("resourceSpans", f"must be a list, got {type(rs).__name__}")
    return rs


def _spans_in(resource_spans: Any) -> int:
    """Spans in one ``resourceSpans`` element, counted as :data:`SPAN_KEYS` would count them."""
    return count_spans(json_bytes(resource_spans)) if resource_spans else 0


def count_spans(data: bytes) -> int:
    """Spans in OTLP JSON bytes, parseable or not: the :data:`SPAN_KEYS` member names outside
    ``links`` lists (a link has a ``spanId`` too). A ``links`` list cut short counts to the end."""
    n = count_keys(data, SPAN_KEYS)
    if not n or b'"links"' not in data:
        return n
    positions, depths = DepthScanner().feed(data)
    for m in _LINKS_LIST.finditer(data):
        at = np.searchsorted(positions, m.end() - 1)  # the list's opening bracket
        if at >= len(positions) or positions[at] != m.end() - 1:
            continue  # inside a string
        closing = np.flatnonzero(depths[at + 1:] < depths[at])
        end = int(positions[at + 1 + closing[0]]) if len(closing) else len(data)
        n -= count_keys(data[m.end():end], SPAN_KEYS)
    return max(n, 0)


class _Fallback(Exception):
    """The fast path met something it does not handle; the careful path decides."""


_CAMEL: dict[str, str] = {}


def _camel(obj: Any) -> Any:
    """Rename ``snake_case`` member names to OTLP JSON's ``lowerCamelCase``, recursively."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            name = _CAMEL.get(k)
            if name is None:
                head, *rest = k.split("_")
                name = _CAMEL[k] = head + "".join(p[:1].upper() + p[1:] for p in rest)
            out[name] = _camel(v)
        return out
    if isinstance(obj, list):
        return [_camel(v) for v in obj]
    return obj


def body_batches(stream: BinaryIO, builder, read: Callable[[Any, int, str], None], *, items_of: Callable,
                 prefix_of: Callable, keys: tuple[bytes, ...], count: Callable[[Any], int],
                 byte_count: Callable[[bytes], int] | None = None) -> Iterator[pa.RecordBatch]:
    """The full batches of one OTLP JSON body (spans or logs): each element of its resource list
    (``items_of``; streamed, salvaged: :func:`~tracesleuth.io._jsondoc.iter_json_items`) given to
    ``read(element, record, "")``; an element nested too deep is rejected. The caller flushes the
    last batch."""
    items = iter_json_items(stream, builder, items_of=items_of, prefix_of=prefix_of, span_keys=keys, spans_in=count,
                            count=byte_count)
    for record, item in items:
        if item.__class__ is TooDeep:
            item.report(builder, record)
            continue
        with gc_paused():
            read(item, record, "")
        if builder.full():
            yield builder.flush()


def _snake(name: str) -> str:
    """``resourceSpans`` -> ``resource_spans`` (protobuf's own JSON names)."""
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def request_resources(builder, line: bytes, lineno: int, member: str, count: Callable[[bytes], int]) -> list | None:
    """The ``member`` list (``"resourceSpans"``, ``"resourceLogs"``) of one line of the collector
    file exporter's output, its ``snake_case`` spelling accepted; None when the line is not such a
    request (then rejected into ``builder.log`` with the ``count(line)`` records it held). Shared
    by the span and log readers."""
    source, log = builder.source, builder.log
    try:
        doc, bad = loads_repairing(line)
    except orjson.JSONDecodeError as e:
        log.add(source, lineno, f"malformed JSON at byte {byte_offset(line, e.pos)} of the line: {e.msg}",
                spans=count(line), excerpt=line)
        return None
    if bad is not None:
        warn_replacements(builder, lineno, doc, bad)
    if not isinstance(doc, dict):
        log.add(source, lineno, f"a line must hold a JSON object, got {type(doc).__name__}", spans=count(line),
                excerpt=line)
        return None
    if member not in doc and _snake(member) in doc:
        doc = _camel(doc)
    items = doc.get(member)
    if not isinstance(items, list):
        log.add(source, lineno, "missing or not a list" if items is None else
                f"must be a list, got {type(items).__name__}", field=member, spans=count(line), excerpt=line)
        return None
    return items


def resource_parts(obj: Any, scopes: str, legacy: str) -> tuple[dict, list, list]:
    """``(object, resource attributes as (key, value), scope list)`` of one ``ResourceSpans`` or
    ``ResourceLogs`` object (``scopes``: ``"scopeSpans"``/``"scopeLogs"``, ``legacy``: the pre-1.0
    ``instrumentationLibrary*`` name; ``snake_case`` spellings renamed). Shared by the span and
    log readers.

    Raises
    ------
    OtlpValueError
        Naming the first field of the wrong type.
    """
    if isinstance(obj, dict) and scopes not in obj and (_snake(scopes) in obj or _snake(legacy) in obj):
        obj = _camel(obj)
    if not isinstance(obj, dict):
        raise OtlpValueError("", f"must be an object, got {type(obj).__name__}")
    resource = obj.get("resource") or {}
    if not isinstance(resource, dict):
        raise OtlpValueError("resource", f"must be an object, got {type(resource).__name__}")
    rattrs = resource.get("attributes") or []
    if not isinstance(rattrs, list):
        raise OtlpValueError("resource.attributes", f"must be a list, got {type(rattrs).__name__}")
    items = [json_key_value(kv, f"resource.attributes[{i}]") for i, kv in enumerate(rattrs)]
    found = obj.get(scopes)
    if found is None:
        found = obj.get(legacy, [])
    if not isinstance(found, list):
        raise OtlpValueError(scopes, f"must be a list, got {type(found).__name__}")
    return obj, items, found


class _RequestReader:
    """Turns parsed OTLP JSON requests into builder columns."""

    def __init__(self, builder: SpanBatchBuilder):
        self.builder = builder
        self.log, self.source = builder.log, builder.source

    # -- records ------------------------------------------------------------------------------
    def read_line(self, line: bytes, lineno: int) -> None:
        """One line of the file exporter's output."""
        rs_list = request_resources(self.builder, line, lineno, "resourceSpans", count_spans)
        for r, rs in enumerate(rs_list or ()):
            self.read_resource_spans(rs, lineno, f"resourceSpans[{r}].")

    def read_resource_spans(self, rs: Any, record: int, path: str) -> None:
        """One ``ResourceSpans`` object; ``path`` is its JSON path inside the record."""
        try:
            rs, items, scopes = resource_parts(rs, "scopeSpans", "instrumentationLibrarySpans")
        except OtlpValueError as e:
            self.log.add(self.source, record, str(e), field=path + e.field if e.field else path.rstrip(".") or None,
                         spans=_spans_in(rs) if isinstance(rs, (dict, list)) else 0, excerpt=rs)
            return
        ctx = ResourceContext(items, self.builder, record)
        for s, scope in enumerate(scopes):
            spans = scope.get("spans") if isinstance(scope, dict) else None
            if not isinstance(spans, list):
                if isinstance(scope, dict) and "spans" not in scope:
                    continue  # a scope without spans
                self.log.add(self.source, record, "must be a list of spans", field=f"{path}scopeSpans[{s}].spans",
                             spans=_spans_in(scope) if isinstance(scope, (dict, list)) else 0, excerpt=scope)
                continue
            self._read_spans(spans, ctx, record, f"{path}scopeSpans[{s}].spans")

    # -- spans: the hot loop ------------------------------------------------------------------
    def _read_spans(self, spans: list, ctx: ResourceContext, record: int, path: str) -> None:
        b = self.builder
        rec_a, tid_a, sid_a, pid_a = b.record.append, b.trace_id.append, b.span_id.append, b.parent_span_id.append
        svc_a, op_a, inst_a, kind_a = b.service.append, b.operation.append, b.instance.append, b.kind.append
        start_a, end_a, status_a, ff_a = b.start_ns.append, b.end_ns.append, b.status.append, b.follows_from.append
        msg_a, off_a, ev_off_a, ln_off_a = (b.status_message.append, b.attr_offsets.append, b.event_offsets.append,
                                            b.link_offsets.append)
        keys, ev_time, ln_trace = b.attr_key, b.event_time, b.link_trace_id
        span_columns = (keys, b.attr_str, b.attr_int, b.attr_float, b.attr_bool)
        key_x, str_x, int_x, flt_x, bool_x = keys.extend, b.attr_str.extend, b.attr_int.extend, \
            b.attr_float.extend, b.attr_bool.extend
        service, instance = ctx.service, ctx.instance
        res_keys = ctx.keys
        r_keys, r_str, r_int, r_flt, r_bool = ctx.columns
        kinds, statuses = KIND_BY_CODE, STATUS_BY_CODE
        for j, sp in enumerate(spans):
            n_attrs = len(keys)
            try:
                tid = sp["traceId"]
                sid = sp["spanId"]
                pid = sp.get("parentSpanId")
                name = sp["name"]
                kind = kinds[sp.get("kind")]
                start = sp["startTimeUnixNano"]
                end = sp["endTimeUnixNano"]
                st = sp.get("status")
                if st:
                    status = statuses[st.get("code")]
                    message = st.get("message")
                    if message is not None and message.__class__ is not str:
                        raise _Fallback
                else:
                    status, message = "unset", None
                if tid.__class__ is not str or len(tid) != 32 or sid.__class__ is not str or len(sid) != 16 \
                        or name.__class__ is not str or (pid and (pid.__class__ is not str or len(pid) != 16)):
                    raise _Fallback
                attrs = sp.get("attributes")
                if attrs:
                    _fast_attributes(attrs, span_columns)
                events = sp.get("events")
                if events:
                    _fast_nested(events, b.event_attributes, b.event_time, b.event_name, _plain_event)
                links = sp.get("links")
                if links:
                    _fast_nested(links, b.link_attributes, b.link_trace_id, b.link_span_id, _plain_link)
                if res_keys:
                    if len(keys) == n_attrs or res_keys.isdisjoint(keys[n_attrs:]):
                        key_x(r_keys); str_x(r_str); int_x(r_int); flt_x(r_flt); bool_x(r_bool)  # noqa: E702
                    else:
                        ctx.extend(b, keys[n_attrs:])
            except (_Fallback, KeyError, TypeError, AttributeError, ValueError):
                b.discard_pending_attributes()
                try:
                    tid, sid, pid, name, kind, start, end, status, message = self._careful_span(
                        sp, ctx, record, f"{path}[{j}]")
                except OtlpValueError as e:
                    b.discard_pending_attributes()
                    self.log.add(self.source, record, str(e), field=f"{path}[{j}]" + (f".{e.field}" if e.field else ""),
                                 spans=1, excerpt=sp)
                    continue
            rec_a(record); tid_a(tid); sid_a(sid); pid_a(pid or None); svc_a(service); op_a(name)  # noqa: E702
            inst_a(instance); kind_a(kind); start_a(start); end_a(end); status_a(status); ff_a(False)  # noqa: E702
            msg_a(message or None); off_a(len(keys)); ev_off_a(len(ev_time)); ln_off_a(len(ln_trace))  # noqa: E702

    def _careful_span(self, sp: Any, ctx: ResourceContext, record: int, where: str) -> tuple:
        """The span's fields, checked one by one (any spelling the spec allows); attributes,
        events and links are added to the builder. Raises :class:`OtlpValueError` naming the
        first bad field; an event or link that is malformed is dropped with a warning naming it
        (``where``: the span's JSON path), the span kept."""
        if not isinstance(sp, dict):
            raise OtlpValueError("", f"a span must be an object, got {type(sp).__name__}")
        if "traceId" not in sp and "trace_id" in sp:
            sp = _camel(sp)
        for f in ("traceId", "spanId"):
            if sp.get(f) in (None, ""):
                raise OtlpValueError(f, "missing")
        tid = hex_id(sp["traceId"], 16, "traceId")
        sid = hex_id(sp["spanId"], 8, "spanId")
        pid = sp.get("parentSpanId") or None
        if pid is not None:
            pid = hex_id(pid, 8, "parentSpanId")
        name = sp.get("name", "")
        if not isinstance(name, str):
            raise OtlpValueError("name", f"must be a string, got {type(name).__name__}")
        raw_kind = sp.get("kind")
        if raw_kind is not None and (raw_kind.__class__ not in (int, str)):
            raise OtlpValueError("kind", f"must be an integer or a SPAN_KIND_* name, got {raw_kind!r:.40}")
        kind = kind_of(raw_kind)
        st = sp.get("status") or {}
        if not isinstance(st, dict):
            raise OtlpValueError("status", f"must be an object, got {type(st).__name__}")
        code = st.get("code")
        if code.__class__ not in (int, str, type(None)):
            raise OtlpValueError("status.code", f"must be 0, 1, 2 or a STATUS_CODE_* name, got {code!r:.40}")
        for f in ("startTimeUnixNano", "endTimeUnixNano"):
            t = sp.get(f)
            if t is not None and t.__class__ not in (int, str):
                raise OtlpValueError(f, f"must be an integer or a decimal string, got {t!r:.40}")
        attrs = sp.get("attributes") or []
        if not isinstance(attrs, list):
            raise OtlpValueError("attributes", f"must be a list, got {type(attrs).__name__}")
        converted = [json_key_value(kv, f"attributes[{i}]") for i, kv in enumerate(attrs)]
        # Nothing below rejects the span: warnings are logged only for spans that are kept.
        status = status_of(code, self.builder, record)
        message = st.get("message")
        if message is not None and not isinstance(message, str):
            self.log.add(self.source, record, f"must be a string, got {type(message).__name__}; not read",
                         field=f"{where}.status.message", spans=0, excerpt=message)
            message = None
        b = self.builder
        n_attrs = len(b.attr_key)
        for key, value in converted:
            b.add_attribute(key, value, record)
        ctx.extend(b, b.attr_key[n_attrs:])
        for member, what, careful, add in (("events", "event", _careful_event, b.add_event),
                                           ("links", "link", _careful_link, b.add_link)):
            for i, entry in enumerate(self._entries(sp, member, record, where)):
                try:
                    fields = careful(entry)
                except OtlpValueError as e:
                    self.log.add(self.source, record, f"{what} dropped: {e}", spans=0, excerpt=entry,
                                 field=f"{where}.{member}[{i}]" + (f".{e.field}" if e.field else ""))
                    continue
                add(*fields, record)
        return tid, sid, pid, name, kind, sp.get("startTimeUnixNano"), sp.get("endTimeUnixNano"), status, message

    def _entries(self, sp: dict, member: str, record: int, where: str) -> list:
        """The span's ``events`` or ``links`` list; another value is reported and read as none."""
        entries = sp.get(member)
        if entries is None:
            return []
        if not isinstance(entries, list):
            self.log.add(self.source, record, f"must be a list, got {type(entries).__name__}; not read",
                         field=f"{where}.{member}", spans=0, excerpt=entries)
            return []
        return entries


def _fast_attributes(attrs: list, columns: tuple) -> None:
    """Append OTLP JSON ``KeyValue`` objects of the plain encoding (one of string, int, bool,
    double; strings within the value bound) to ``(keys, strs, ints, floats, bools)``; raise
    :class:`_Fallback` at anything else (the careful path then reads the span)."""
    keys, strs, ints, floats, bools = columns
    key_a, str_a, int_a, flt_a, bool_a = keys.append, strs.append, ints.append, floats.append, bools.append
    max_chars, imin, imax = MAX_ATTRIBUTE_CHARS, _INT64_MIN, _INT64_MAX
    for a in attrs:
        k = a["key"]
        v = a["value"]
        if k.__class__ is not str:
            raise _Fallback
        x = v.get("stringValue")
        if x is not None:
            if x.__class__ is not str or len(x) > max_chars:
                raise _Fallback
            key_a(k); str_a(x); int_a(None); flt_a(None); bool_a(None)  # noqa: E702
        elif (x := v.get("intValue")) is not None:
            x = int(x) if x.__class__ is str else x
            if x.__class__ is not int or not imin <= x <= imax:
                raise _Fallback
            key_a(k); str_a(None); int_a(x); flt_a(None); bool_a(None)  # noqa: E702
        elif (x := v.get("boolValue")) is not None:
            if x.__class__ is not bool:
                raise _Fallback
            key_a(k); str_a(None); int_a(None); flt_a(None); bool_a(x)  # noqa: E702
        elif (x := v.get("doubleValue")) is not None:
            if x.__class__ is not float:
                raise _Fallback
            key_a(k); str_a(None); int_a(None); flt_a(x); bool_a(None)  # noqa: E702
        else:
            raise _Fallback


def _fast_nested(items: list, entry, first: list, second: list, plain) -> None:
    """Append a span's events or links in the plain encoding to the builder: each item's two fields
    (``plain(item)`` gives them, or raises :class:`_Fallback`) to ``first`` and ``second``, its
    attributes to ``entry`` (:func:`_fast_attributes`)."""
    columns = (entry.key, entry.str, entry.int, entry.float, entry.bool)
    for item in items:
        a, c = plain(item)
        attrs = item.get("attributes")
        if attrs:
            _fast_attributes(attrs, columns)
        first.append(a)
        second.append(c)
        entry.offsets.append(len(entry.key))


def _plain_event(ev: dict) -> tuple:
    """An event's time and name in the plain encoding (integer or decimal string, text)."""
    t, name = ev["timeUnixNano"], ev.get("name", "")
    if (t.__class__ is not str and t.__class__ is not int) or name.__class__ is not str:
        raise _Fallback
    return t, name


def _plain_link(ln: dict) -> tuple:
    """A link's trace and span id in the plain encoding (hexadecimal, of full width)."""
    tid, sid = ln["traceId"], ln["spanId"]
    if tid.__class__ is not str or len(tid) != 32 or sid.__class__ is not str or len(sid) != 16:
        raise _Fallback
    return tid, sid


def _careful_attributes(entry: dict) -> list:
    attrs = entry.get("attributes") or []
    if not isinstance(attrs, list):
        raise OtlpValueError("attributes", f"must be a list, got {type(attrs).__name__}")
    return [json_key_value(kv, f"attributes[{i}]") for i, kv in enumerate(attrs)]


def _careful_event(event: Any) -> tuple:
    """``(time, name, attributes)`` of an OTLP JSON ``Span.Event``, checked; raises
    :class:`OtlpValueError` naming the bad field."""
    if not isinstance(event, dict):
        raise OtlpValueError("", f"an event must be an object, got {type(event).__name__}")
    t = event.get("timeUnixNano")
    if t.__class__ not in (int, str):
        raise OtlpValueError("timeUnixNano", "missing" if t is None else
                             f"must be an integer or a decimal string, got {t!r:.40}")
    name = event.get("name")
    if name is None:  # absent, or null (protobuf's JSON mapping: the default)
        name = ""
    if not isinstance(name, str):
        raise OtlpValueError("name", f"must be a string, got {type(name).__name__}")
    return t, name, _careful_attributes(event)


def _careful_link(link: Any) -> tuple:
    """``(trace id, span id, attributes)`` of an OTLP JSON ``Span.Link``, checked (ids as for a
    span: hexadecimal, base64 accepted); raises :class:`OtlpValueError` naming the bad field."""
    if not isinstance(link, dict):
        raise OtlpValueError("", f"a link must be an object, got {type(link).__name__}")
    for f in ("traceId", "spanId"):
        if link.get(f) in (None, ""):
            raise OtlpValueError(f, "missing")
    return hex_id(link["traceId"], 16, "traceId"), hex_id(link["spanId"], 8, "spanId"), _careful_attributes(link)
