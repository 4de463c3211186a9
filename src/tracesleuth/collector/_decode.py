"""From an HTTP request body to spans: content coding, whole-message checks, then the readers.

A body is first decompressed (``Content-Encoding`` gzip or deflate, with the decompressed size
capped), then checked as a whole message (an OTLP ``ExportTraceServiceRequest`` in protobuf or
JSON, a Zipkin v2 JSON array): a body that is not one is malformed and rejected as a whole (HTTP
400, nothing stored). A well-formed body goes through the same reader as a file
(:func:`tracesleuth.io._reader`), so spans received over HTTP and read from files are mapped and
checked identically; the spans it rejects (bad ids, end before start, ...) are reported to the
client as a partial success and stored in the store's rejects.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from .. import schema as S
from ..io import RejectLog, SpanBatchBuilder, _reader
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
    """The spans of one request body.

    Attributes
    ----------
    spans : pyarrow.Table
        Accepted spans, :data:`~tracesleuth.schema.SPAN_SCHEMA`.
    rejects : pyarrow.Table
        Rejected records and warnings, :data:`~tracesleuth.schema.REJECT_SCHEMA`.
    spans_rejected : int
        Spans lost with rejected records (``spans received = spans.num_rows + spans_rejected``).
    reasons : list of (str, int, int)
        ``(reason, records, spans)`` of the rejects, as :meth:`RejectLog.reasons` gives them.
    """

    spans: pa.Table
    rejects: pa.Table
    spans_rejected: int
    reasons: list

    @property
    def spans_received(self) -> int:
        """Spans in the request, accepted or rejected."""
        return self.spans.num_rows + self.spans_rejected

    def message(self) -> str:
        """A developer-facing summary of the rejects ('' when there are none): the counts, then
        the first rejects with record, field and reason."""
        rows = self.rejects.to_pylist()
        if not rows:
            return ""
        warnings = sum(1 for r in rows if r["spans"] == 0)
        head = f"{self.spans_rejected} of {self.spans_received} span(s) rejected" if self.spans_rejected \
            else f"all {self.spans_received} span(s) accepted"
        if warnings:
            head += f", {warnings} warning(s)"
        parts = []
        for r in rows[:_MESSAGE_ROWS]:
            where = f"record {r['record']}" + (f" {r['field']}" if r["field"] else "")
            parts.append(f"{where}: {r['reason']}" + (" (kept)" if r["spans"] == 0 else ""))
        more = f"; and {len(rows) - _MESSAGE_ROWS} more" if len(rows) > _MESSAGE_ROWS else ""
        return f"{head}: " + "; ".join(parts) + more


def decode(fmt: str, body: bytes, source: str, *, limits=None) -> DecodedRequest:
    """Check a (decompressed) body as one whole message, then read its spans.

    Parameters
    ----------
    fmt : {"otlp-proto", "otlp-json", "zipkin-json"}
        The reader format.
    body : bytes
        The decompressed body.
    source : str
        Names the request in the rejects (their ``source`` column).
    limits : tracesleuth.io.SpanLimits, optional
        Bounds on names and attributes (default: the SDK's defaults).

    Returns
    -------
    DecodedRequest
        Always with ``spans received`` (accepted + rejected) at least the number of spans in
        the message: spans the reader neither accepted nor rejected are added to the rejects
        (record 0), so a client is never told that a span it sent was accepted when it was not
        stored.

    Raises
    ------
    HttpError
        400 when the body is not one well-formed message of the format, or holds a record
        nested beyond the readers' limit (kind :data:`TOO_DEEP`).
    """
    body, n_spans = _check_message(fmt, body)
    if n_spans is None:
        return DecodedRequest(spans=S.empty_spans(), rejects=S.REJECT_SCHEMA.empty_table(), spans_rejected=0,
                              reasons=[])
    log = RejectLog()
    builder = SpanBatchBuilder(source, log, limits=limits)
    batches = list(_reader(fmt)(io.BytesIO(body), builder))
    deep = next((r for r in log.rows if r[3].startswith(NESTED_TOO_DEEP)), None)
    if deep is not None:  # a body with such a record is refused whole, like any malformed body
        raise HttpError(400, TOO_DEEP, f"the body is {deep[3].split('; ')[0]} (record {deep[1]})")
    spans = pa.Table.from_batches(batches, schema=S.SPAN_SCHEMA) if batches else S.empty_spans()
    unaccounted = n_spans - spans.num_rows - log.spans_rejected
    if unaccounted > 0:
        log.add(source, 0, f"{unaccounted} span(s) of the request were neither read nor rejected by the "
                           f"{fmt} reader", spans=unaccounted)
    return DecodedRequest(spans=spans, rejects=log.to_arrow(), spans_rejected=log.spans_rejected,
                          reasons=log.reasons())


def _check_message(fmt: str, body: bytes) -> tuple[bytes, int | None]:
    """Raise :class:`HttpError` (400) unless ``body`` is one whole message of ``fmt``.

    Returns the body to read (a protobuf request re-serialized when its first field is not
    ``resource_spans``, as the reader tells a request from a length-prefixed stream by that
    byte) and the number of spans the message certainly holds (None: nothing to read at all,
    an empty request, which is valid).
    """
    if fmt == "otlp-proto":
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        from ..io.otlp_proto import decode_error_reason

        try:
            request = ExportTraceServiceRequest.FromString(body)
        except DecodeError as e:
            reason = decode_error_reason(e, "ExportTraceServiceRequest")
            if reason.startswith(NESTED_TOO_DEEP):
                raise HttpError(400, TOO_DEEP, f"the body is {reason.split('; ')[0]}") from None
            raise HttpError(400, "bad_request", f"the body is not a protobuf-encoded OTLP "
                                                f"ExportTraceServiceRequest: {e}") from None
        if not request.resource_spans:
            return body, None
        if body[:1] != b"\x0a":
            body = request.SerializeToString()  # known fields first, in field-number order
        return body, sum(len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans)
    doc = _json(body)
    if fmt == "otlp-json":
        if not isinstance(doc, dict):
            hint = " (Zipkin v2 span lists go to POST /api/v2/spans)" if isinstance(doc, list) else ""
            raise HttpError(400, "bad_request", f"an OTLP JSON body must be an ExportTraceServiceRequest "
                                                f"object, got a JSON {_json_type(doc)}{hint}")
        rs = doc.get("resourceSpans", doc.get("resource_spans"))
        if rs is not None and not isinstance(rs, list):
            raise HttpError(400, "bad_request", f"resourceSpans must be a list, got a JSON {_json_type(rs)}")
        if not rs:  # proto3 JSON: an omitted or empty list is an empty request
            return body, None
        return body, sum(_json_spans(r) for r in rs)
    if fmt == "zipkin-json":
        if not isinstance(doc, list):
            hint = " (OTLP JSON goes to POST /v1/traces)" if isinstance(doc, dict) and "resourceSpans" in doc else ""
            raise HttpError(400, "bad_request", f"a Zipkin v2 body must be a JSON array of spans, got a JSON "
                                                f"{_json_type(doc)}{hint}")
        return (body, len(doc)) if doc else (body, None)
    raise ValueError(f"unknown format {fmt!r}")  # pragma: no cover - routes pass the three formats


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
