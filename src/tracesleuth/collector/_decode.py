"""From an HTTP request body to spans or log records: content coding, whole-message checks, then
the readers.

A body is first decompressed (``Content-Encoding`` gzip or deflate, with the decompressed size
capped), then checked as a whole message (an OTLP ``ExportTraceServiceRequest`` or
``ExportLogsServiceRequest`` in protobuf or JSON, a Zipkin v2 JSON array): a body that is not one
is malformed and rejected as a whole (HTTP 400, nothing stored). A well-formed body goes through
the same reader as a file (:func:`tracesleuth.io._reader`), so spans and log records received
over HTTP and read from files are mapped and checked identically, under the same limits
(:class:`~tracesleuth.io.SpanLimits`, :class:`~tracesleuth.io.LogLimits`); what it rejects (bad
ids, end before start, a log record without a time, ...) is reported to the client as a partial
success and stored in the store's rejects (log records': its ``log_rejects``).
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from .. import schema as S
from ..io import LOG_FORMATS, LogBatchBuilder, RejectLog, SpanBatchBuilder, _reader
from ..io._jsondoc import MAX_DEPTH, NESTED_TOO_DEEP, max_depth

#: Media types, as the OTLP/HTTP specification names them.
PROTOBUF = "application/x-protobuf"
JSON = "application/json"

#: ``/stats`` error kind of a body refused for nesting beyond the readers' limit
#: (:data:`~tracesleuth.io._jsondoc.MAX_DEPTH`, or protobuf's own).
TOO_DEEP = "nesting_too_deep"
#: Reject rows listed one by one in a partial-success message; the rest are summed up.
_MESSAGE_ROWS = 5


class HttpError(Exception):
    """A request refused as a whole.

    Parameters
    ----------
    status : int
        The HTTP status code.
    kind : str
        Counter name in ``/stats`` (``bad_request``, ``payload_too_large``, ...).
    message : str
        What is wrong, for the client (developer-facing).
    headers : dict, optional
        Extra response headers (``Retry-After``, ``WWW-Authenticate``).
    """

    def __init__(self, status: int, kind: str, message: str, headers: dict | None = None):
        self.status, self.kind, self.message, self.headers = status, kind, message, headers or {}
        super().__init__(message)


def media_type(content_type: str | None) -> str:
    """``"application/json"`` from ``"application/json; charset=utf-8"`` (lower case, no parameters)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def decompress(body: bytes, content_encoding: str | None, limit: int) -> bytes:
    """Undo the ``Content-Encoding`` of a request body.

    Parameters
    ----------
    body : bytes
        The body as received.
    content_encoding : str or None
        The header; codings listed in the order they were applied (RFC 9110, section 8.4).
        ``gzip`` (also concatenated members), ``deflate`` (zlib format, or raw deflate as some
        clients send it) and ``identity`` are understood.
    limit : int
        Largest decompressed size accepted, in bytes.

    Returns
    -------
    bytes

    Raises
    ------
    HttpError
        415 for an unknown coding, 413 when the decompressed body exceeds ``limit``, 400 when
        the compressed data is corrupt or cut short.
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    for coding in reversed(codings):
        if coding == "identity":
            continue
        if coding in ("gzip", "x-gzip"):
            body = _inflate(body, 16 + zlib.MAX_WBITS, limit, coding, members=True)
        elif coding == "deflate":
            try:
                body = _inflate(body, zlib.MAX_WBITS, limit, coding)
            except HttpError as e:
                if e.status != 400:
                    raise
                body = _inflate(body, -zlib.MAX_WBITS, limit, coding)
        else:
            raise HttpError(415, "unsupported_media_type", f"Content-Encoding {coding!r} is not supported; "
                                                           f"send gzip, deflate or an uncompressed body")
    if len(body) > limit:
        raise HttpError(413, "payload_too_large", f"request body of {len(body):,} bytes exceeds the limit of "
                                                  f"{limit:,} bytes")
    return body


def _inflate(data: bytes, wbits: int, limit: int, coding: str, *, members: bool = False) -> bytes:
    out, size = [], 0
    while True:
        d = zlib.decompressobj(wbits)
        try:
            chunk = d.decompress(data, limit + 1 - size)
        except zlib.error as e:
            raise HttpError(400, "bad_request", f"corrupt {coding} data: {e}") from None
        size += len(chunk)
        out.append(chunk)
        if size > limit or d.unconsumed_tail:
            raise HttpError(413, "payload_too_large", f"request body decompresses to more than the limit of "
                                                      f"{limit:,} bytes")
        if not d.eof:
            raise HttpError(400, "bad_request", f"{coding} data cut short")
        data = d.unused_data
        if not (members and data.strip(b"\0")):
            return b"".join(out)


@dataclass(frozen=True)
class DecodedRequest:
    """The spans, or the log records, of one request body.

    Attributes
    ----------
    spans : pyarrow.Table
        Accepted spans, :data:`~tracesleuth.schema.SPAN_SCHEMA` (empty for a logs request).
    rejects : pyarrow.Table
        Rejected records and warnings, :data:`~tracesleuth.schema.REJECT_SCHEMA` (of log records
        for a logs request: its ``spans`` column counts log records).
    spans_rejected : int
        Spans (log records, for a logs request) lost with rejected records
        (``received = accepted + spans_rejected``).
    reasons : list of (str, int, int)
        ``(reason, records, spans)`` of the rejects, as :meth:`RejectLog.reasons` gives them.
    logs : pyarrow.Table or None, default=None
        Accepted log records, :data:`~tracesleuth.schema.LOG_SCHEMA`, for a logs request; None for
        a spans request.
    """

    spans: pa.Table
    rejects: pa.Table
    spans_rejected: int
    reasons: list
    logs: pa.Table | None = None

    @property
    def signal(self) -> str:
        """``"logs"`` for a logs request, else ``"spans"``."""
        return "spans" if self.logs is None else "logs"

    @property
    def accepted(self) -> int:
        """Spans, or log records, accepted."""
        return self.spans.num_rows if self.logs is None else self.logs.num_rows

    @property
    def spans_received(self) -> int:
        """Spans (log records) in the request, accepted or rejected."""
        return self.accepted + self.spans_rejected

    def message(self) -> str:
        """A developer-facing summary of the rejects ('' when there are none): the counts, then
        the first rejects with record, field and reason."""
        rows = self.rejects.to_pylist()
        if not rows:
            return ""
        what = _NOUN[self.signal]
        warnings = sum(1 for r in rows if r["spans"] == 0)
        head = f"{self.spans_rejected} of {self.spans_received} {what} rejected" if self.spans_rejected \
            else f"all {self.spans_received} {what} accepted"
        if warnings:
            head += f", {warnings} warning(s)"
        parts = []
        for r in rows[:_MESSAGE_ROWS]:
            where = f"record {r['record']}" + (f" {r['field']}" if r["field"] else "")
            parts.append(f"{where}: {r['reason']}" + (" (kept)" if r["spans"] == 0 else ""))
        more = f"; and {len(rows) - _MESSAGE_ROWS} more" if len(rows) > _MESSAGE_ROWS else ""
        return f"{head}: " + "; ".join(parts) + more


#: What a request's items are called in messages.
_NOUN = {"spans": "span(s)", "logs": "log record(s)"}


def decode(fmt: str, body: bytes, source: str, *, limits=None) -> DecodedRequest:
    """Check a (decompressed) body as one whole message, then read its spans or log records.

    Parameters
    ----------
    fmt : {"otlp-proto", "otlp-json", "zipkin-json", "otlp-logs-proto", "otlp-logs-json"}
        The reader format.
    body : bytes
        The decompressed body.
    source : str
        Names the request in the rejects (their ``source`` column).
    limits : tracesleuth.io.SpanLimits or tracesleuth.io.LogLimits, optional
        Bounds on names and attributes of spans, or on bodies and attributes of log records
        (default: the SDK's defaults).

    Returns
    -------
    DecodedRequest
        Always with ``received`` (accepted + rejected) at least the number of spans (log
        records) in the message: those the reader neither accepted nor rejected are added to the
        rejects (record 0), so a client is never told that something it sent was accepted when it
        was not stored.

    Raises
    ------
    HttpError
        400 when the body is not one well-formed message of the format, or holds a record
        nested beyond the readers' limit (kind :data:`TOO_DEEP`).
    """
    logs = fmt in LOG_FORMATS
    body, n_items = _check_message(fmt, body)
    if n_items is None:
        return DecodedRequest(spans=S.empty_spans(), rejects=S.REJECT_SCHEMA.empty_table(), spans_rejected=0,
                              reasons=[], logs=S.empty_logs() if logs else None)
    log = RejectLog()
    builder = (LogBatchBuilder if logs else SpanBatchBuilder)(source, log, limits=limits)
    batches = list(_reader(fmt)(io.BytesIO(body), builder))
    if logs:
        builder.finish()  # the request's summaries: records without trace context, unknown severities
    deep = next((r for r in log.rows if r[3].startswith(NESTED_TOO_DEEP)), None)
    if deep is not None:  # a body with such a record is refused whole, like any malformed body
        raise HttpError(400, TOO_DEEP, f"the body is {deep[3].split('; ')[0]} (record {deep[1]})")
    schema = S.LOG_SCHEMA if logs else S.SPAN_SCHEMA
    table = pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()
    unaccounted = n_items - table.num_rows - log.spans_rejected
    if unaccounted > 0:
        log.add(source, 0, f"{unaccounted} {_NOUN['logs' if logs else 'spans']} of the request were neither read "
                           f"nor rejected by the {fmt} reader", spans=unaccounted)
    return DecodedRequest(spans=S.empty_spans() if logs else table, rejects=log.to_arrow(),
                          spans_rejected=log.spans_rejected, reasons=log.reasons(), logs=table if logs else None)


def _check_message(fmt: str, body: bytes) -> tuple[bytes, int | None]:
    """Raise :class:`HttpError` (400) unless ``body`` is one whole message of ``fmt``.

    Returns the body to read (a protobuf request re-serialized when its first field is not
    ``resource_spans``/``resource_logs``, as the reader tells a request from a length-prefixed
    stream by that byte) and the number of spans (log records) the message certainly holds
    (None: nothing to read at all, an empty request, which is valid).
    """
    if fmt in ("otlp-proto", "otlp-logs-proto"):
        from google.protobuf.message import DecodeError

        from ..io.otlp_proto import decode_error_reason

        request_type = _proto_request(fmt)
        name = request_type.DESCRIPTOR.name
        try:
            request = request_type.FromString(body)
        except DecodeError as e:
            reason = decode_error_reason(e, name)
            if reason.startswith(NESTED_TOO_DEEP):
                raise HttpError(400, TOO_DEEP, f"the body is {reason.split('; ')[0]}") from None
            raise HttpError(400, "bad_request", f"the body is not a protobuf-encoded OTLP {name}: {e}") from None
        if fmt == "otlp-proto":
            resources, n = request.resource_spans, sum(len(sc.spans) for rs in request.resource_spans
                                                       for sc in rs.scope_spans)
        else:
            resources, n = request.resource_logs, sum(len(sc.log_records) for rl in request.resource_logs
                                                      for sc in rl.scope_logs)
        if not resources:
            return body, None
        if body[:1] != b"\x0a":
            body = request.SerializeToString()  # known fields first, in field-number order
        return body, n
    doc = _json(body)
    if fmt in ("otlp-json", "otlp-logs-json"):
        member, items = ("resourceSpans", _json_spans) if fmt == "otlp-json" else ("resourceLogs", _json_logs)
        request = "ExportTraceServiceRequest" if fmt == "otlp-json" else "ExportLogsServiceRequest"
        if not isinstance(doc, dict):
            hint = " (Zipkin v2 span lists go to POST /api/v2/spans)" if isinstance(doc, list) else ""
            raise HttpError(400, "bad_request", f"an OTLP JSON body must be an {request} "
                                                f"object, got a JSON {_json_type(doc)}{hint}")
        snake = "resource_spans" if fmt == "otlp-json" else "resource_logs"
        rs = doc.get(member, doc.get(snake))
        if rs is not None and not isinstance(rs, list):
            raise HttpError(400, "bad_request", f"{member} must be a list, got a JSON {_json_type(rs)}")
        if not rs:  # proto3 JSON: an omitted or empty list is an empty request
            other = "resourceLogs" if fmt == "otlp-json" else "resourceSpans"
            if other in doc:
                route = "/v1/logs" if fmt == "otlp-json" else "/v1/traces"
                raise HttpError(400, "bad_request", f"the body holds {other}, not {member}: "
                                                    f"it goes to POST {route}")
            return body, None
        return body, sum(items(r) for r in rs)
    if fmt == "zipkin-json":
        if not isinstance(doc, list):
            hint = " (OTLP JSON goes to POST /v1/traces)" if isinstance(doc, dict) and "resourceSpans" in doc else ""
            raise HttpError(400, "bad_request", f"a Zipkin v2 body must be a JSON array of spans, got a JSON "
                                                f"{_json_type(doc)}{hint}")
        return (body, len(doc)) if doc else (body, None)
    raise ValueError(f"unknown format {fmt!r}")  # pragma: no cover - routes pass the five formats


def _proto_request(fmt: str):
    """The protobuf request message of an OTLP/HTTP route's format."""
    if fmt == "otlp-proto":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        return ExportTraceServiceRequest
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    return ExportLogsServiceRequest


def _json_spans(resource_spans: Any) -> int:
    """Spans in the well-formed ``scopeSpans[*].spans`` lists of one OTLP JSON ``resourceSpans``
    element (either member-name spelling, as the reader takes them)."""
    if not isinstance(resource_spans, dict):
        return 0
    scopes = next((resource_spans[k] for k in ("scopeSpans", "scope_spans", "instrumentationLibrarySpans",
                                               "instrumentation_library_spans") if k in resource_spans), None)
    if not isinstance(scopes, list):
        return 0
    return sum(len(sc["spans"]) for sc in scopes if isinstance(sc, dict) and isinstance(sc.get("spans"), list))


def _json_logs(resource_logs: Any) -> int:
    """Log records in the well-formed ``scopeLogs[*].logRecords`` lists of one OTLP JSON
    ``resourceLogs`` element (either member-name spelling, as the reader takes them)."""
    if not isinstance(resource_logs, dict):
        return 0
    scopes = next((resource_logs[k] for k in ("scopeLogs", "scope_logs") if k in resource_logs), None)
    if not isinstance(scopes, list):
        return 0
    return sum(len(records) for sc in scopes if isinstance(sc, dict)
               for records in [sc.get("logRecords", sc.get("log_records"))] if isinstance(records, list))


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        depth, at = max_depth(body)
        if depth > MAX_DEPTH:
            raise HttpError(400, TOO_DEEP, f"the body is {NESTED_TOO_DEEP}: {depth} levels at byte {at}, "
                                           f"beyond the limit of {MAX_DEPTH}") from None
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            try:  # invalid UTF-8 inside strings: the readers keep such text with U+FFFD and warn
                return orjson.loads(body.decode("utf-8", "replace"))
            except orjson.JSONDecodeError:
                pass
        raise HttpError(400, "bad_request", f"malformed JSON at character {e.pos}: {e.msg}") from None


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")
