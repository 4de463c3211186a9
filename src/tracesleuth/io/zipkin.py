"""Zipkin v2 JSON reader: a JSON array of spans, as ``POST /api/v2/spans`` takes and
``GET /api/v2/trace/{traceId}`` returns.

Reference: Zipkin v2 API, ``zipkin2-api.yaml`` (https://zipkin.io/zipkin-api/, definitions ``Span``
and ``Annotation``). Annotations and the ``error`` tag are mapped as OpenTelemetry maps them
(OpenTelemetry specification, "OpenTelemetry to Zipkin Transformation": events are annotations;
"Mapping to non-OTLP formats", "Span Status": ``otel.status_code``, ``otel.status_description``;
opentelemetry-collector-contrib, ``pkg/translator/zipkin``: an annotation is an event named by its
value, the ``error`` tag an error status).
"""

from __future__ import annotations

from typing import Any, BinaryIO, Iterator

import pyarrow as pa

from ._builder import SpanBatchBuilder, batches, normalize_kind
from ._jsondoc import DocumentShapeError, TooDeep, iter_json_items, json_bytes

__all__ = ["read_zipkin_json", "PEER_SERVICE", "ZIPKIN_SHARED"]

#: Attribute recording Zipkin's ``shared: true`` (a server span that reuses its client's id).
ZIPKIN_SHARED = "zipkin.shared"
#: Attribute recording the remote endpoint's service name (``remoteEndpoint.serviceName``).
PEER_SERVICE = "peer.service"
#: Member name that occurs once per span: counts spans in bytes that cannot be parsed.
SPAN_KEYS = (b'"traceId"',)
_NS_PER_US = 1_000
_KINDS = {"CLIENT": "client", "SERVER": "server", "PRODUCER": "producer", "CONSUMER": "consumer", None: "internal"}
_OTEL_STATUS = {"ERROR": "error", "OK": "ok", "UNSET": "unset"}
#: ``error`` tag values that say only that the span failed (Zipkin's instrumentations write the
#: error's message there; some write a flag): no status message.
_ERROR_FLAGS = frozenset({"", "true", "1"})


class _BadSpan(ValueError):
    def __init__(self, field: str | None, message: str):
        self.field = field
        super().__init__(message)


def read_zipkin_json(stream: BinaryIO, builder: SpanBatchBuilder) -> Iterator[pa.RecordBatch]:
    """Read a Zipkin v2 JSON span list.

    A record is an element of the array (1-based). Arrays larger than
    :data:`~tracesleuth.io._jsondoc.MAX_DOCUMENT_BYTES` are streamed element by element; a
    truncated or malformed array is read up to the break.

    Parameters
    ----------
    stream : binary file
        The decompressed JSON array of spans.
    builder : SpanBatchBuilder
        Receives the spans; rejected records and warnings go to its log with the Zipkin field
        name at fault (``timestamp``, ``localEndpoint.serviceName``, ...).

    Yields
    ------
    pyarrow.RecordBatch
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, as the array lists them.

    Notes
    -----
    Field mapping (Zipkin -> canonical): ``traceId`` (16 or 32 hex digits; 64-bit ids get a zero
    high half), ``id``, ``parentId`` -> ids, kept as they are: a server span that shares its
    client's id (``shared: true``, recorded as attribute ``zipkin.shared=True``) keeps that id,
    trace assembly tells the two apart. ``name`` -> operation; ``kind`` -> kind, a span without
    ``kind`` is a local span (``internal``); ``timestamp`` and ``duration`` are MICROseconds
    (Unix epoch) -> ``start_ns = timestamp * 1000``, ``end_ns = start_ns + duration * 1000``.
    A span without ``duration`` is read as a 0-length span and logged as a warning; a span
    without ``timestamp`` (a fragment that Zipkin merges into the span with the same id) is
    rejected. ``localEndpoint.serviceName`` -> service; ``localEndpoint`` ``ipv4`` (else
    ``ipv6``) and ``port`` -> instance (``10.0.0.1:8080``, ``[::1]:8080``).
    ``remoteEndpoint.serviceName`` -> attribute ``peer.service`` unless a tag sets it. Tags ->
    string attributes, except ``error`` (-> status ``error``; its text, when it is one, -> status
    message), ``otel.status_code`` (-> status) and ``otel.status_description`` (-> status message,
    before the ``error`` text), which are consumed. ``annotations`` -> events: ``timestamp``
    MICROseconds -> ``time_ns``, ``value`` -> name, no attributes (Zipkin has none; the value
    OpenTelemetry's exporter writes for an event with attributes, ``"name": {...}``, is kept whole
    as the name). A malformed annotation is dropped with a warning, its span kept. Zipkin has no
    links.
    """
    items = iter_json_items(stream, builder, items_of=_spans_of, prefix_of=lambda head: "item",
                            span_keys=SPAN_KEYS, spans_in=lambda span: 1)
    yield from batches(builder, _read_spans(builder, items))


def _read_spans(builder: SpanBatchBuilder, items) -> Iterator[None]:
    """Add (or reject) every span of the array; a step after each."""
    log, source = builder.log, builder.source
    for record, span in items:
        if span.__class__ is TooDeep:
            span.report(builder, record)
            continue
        try:
            _add_span(builder, record, span)
        except _BadSpan as e:
            builder.discard_pending_attributes()
            log.add(source, record, str(e), field=e.field, spans=1, excerpt=span)
        yield


def _spans_of(doc: Any) -> list:
    if not isinstance(doc, list):
        raise DocumentShapeError(None, f"a Zipkin v2 document must be a JSON array of spans, got "
                                       f"{type(doc).__name__}")
    return doc


def _text(span: dict, field: str, *, required: bool = False) -> str | None:
    value = span.get(field)
    if value is None or value == "":
        if required:
            raise _BadSpan(field, "missing")
        return None
    if not isinstance(value, str):
        raise _BadSpan(field, f"must be a string, got {type(value).__name__}")
    return value


def _micros(span: dict, field: str) -> int | None:
    value = span.get(field)
    if value is None:
        return None
    if value.__class__ is float and value.is_integer():
        value = int(value)
    if value.__class__ is not int:
        raise _BadSpan(field, f"must be an integer number of microseconds, got {value!r:.40}")
    return value


def _add_span(builder: SpanBatchBuilder, record: int, span: Any) -> None:
    if not isinstance(span, dict):
        raise _BadSpan(None, f"a span must be a JSON object, got {type(span).__name__}")
    trace_id = _text(span, "traceId", required=True)
    span_id = _text(span, "id", required=True)
    parent_id = _text(span, "parentId")
    name = _text(span, "name") or ""
    raw_kind = span.get("kind")
    kind = _KINDS.get(raw_kind) if raw_kind is None or isinstance(raw_kind, str) else None
    if kind is None:
        kind = normalize_kind(raw_kind)
    timestamp = _micros(span, "timestamp")
    if timestamp is None:
        raise _BadSpan("timestamp", "missing: a span fragment without timing cannot be placed (Zipkin "
                                    "merges such fragments into the span with the same id)")
    duration = _micros(span, "duration")
    if duration is None:
        builder.log.add(builder.source, record, "missing; read as a 0-length span", field="duration", spans=0)
        duration = 0
    local = span.get("localEndpoint") or {}
    if not isinstance(local, dict):
        raise _BadSpan("localEndpoint", f"must be an object, got {type(local).__name__}")
    service = _text(local, "serviceName")
    instance = _endpoint_address(local)
    tags = span.get("tags") or {}
    if not isinstance(tags, dict):
        raise _BadSpan("tags", f"must be an object, got {type(tags).__name__}")
    status = "unset"
    error_text = description = None
    add_attribute = builder.add_attribute
    for key, value in tags.items():
        if key == "error":
            status = "error"
            text = value if value.__class__ is str else "" if value is None else json_bytes(value).decode()
            error_text = None if text.strip().lower() in _ERROR_FLAGS else text
            continue
        if value.__class__ is not str:
            value = json_bytes(value).decode()
        if key == "otel.status_code":
            status = _OTEL_STATUS.get(value.upper(), status)
            continue
        if key == "otel.status_description":
            description = value or None
            continue
        add_attribute(key, value, record)
    remote = span.get("remoteEndpoint")
    if isinstance(remote, dict) and PEER_SERVICE not in tags:
        peer = remote.get("serviceName")
        if isinstance(peer, str) and peer:
            add_attribute(PEER_SERVICE, peer, record)
    if span.get("shared") is True:
        add_attribute(ZIPKIN_SHARED, True, record)
    annotations = span.get("annotations")
    if annotations:
        _add_events(builder, record, annotations)
    start = timestamp * _NS_PER_US
    builder.add(record, trace_id, span_id, parent_id, service, name, instance, kind,
                start, start + duration * _NS_PER_US, status,
                status_message=description or (error_text if status == "error" else None))


def _add_events(builder: SpanBatchBuilder, record: int, annotations: Any) -> None:
    """The span's ``annotations`` as events; a malformed one is dropped with a warning."""
    if not isinstance(annotations, list):
        builder.log.add(builder.source, record, f"must be a list of annotations, got {type(annotations).__name__}; "
                        "not read", field="annotations", spans=0, excerpt=annotations)
        return
    for i, annotation in enumerate(annotations):
        try:
            if not isinstance(annotation, dict):
                raise _BadSpan(None, f"an annotation must be an object, got {type(annotation).__name__}")
            timestamp = _micros(annotation, "timestamp")
            if timestamp is None:
                raise _BadSpan("timestamp", "missing")
            value = annotation.get("value")
            if not isinstance(value, str):
                raise _BadSpan("value", "missing" if value is None else f"must be a string, got {type(value).__name__}")
        except _BadSpan as e:
            builder.log.add(builder.source, record, f"event dropped: {e}", field=f"annotations[{i}]" + (
                f".{e.field}" if e.field else ""), spans=0, excerpt=annotation)
            continue
        builder.add_event(timestamp * _NS_PER_US, value, None, record)


def _endpoint_address(endpoint: dict) -> str | None:
    ipv4, ipv6, port = endpoint.get("ipv4"), endpoint.get("ipv6"), endpoint.get("port")
    if isinstance(ipv4, str) and ipv4:
        host = ipv4
    elif isinstance(ipv6, str) and ipv6:
        host = f"[{ipv6}]" if port else ipv6
    else:
        return None
    return f"{host}:{port}" if isinstance(port, int) and not isinstance(port, bool) and port > 0 else host
