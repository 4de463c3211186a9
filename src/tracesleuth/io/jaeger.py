"""Jaeger JSON reader: the Jaeger UI's trace download and the query service's HTTP API
(``{"data": [trace, ...]}``), or a single trace object.

Reference: Jaeger's JSON model, ``model/json/model.go`` of jaegertracing/jaeger (``Trace``,
``Span``, ``Reference``, ``Process``, ``KeyValue``, ``Log``), as served by ``GET /api/traces``.
Logs, references and status tags are mapped as OpenTelemetry's Jaeger translator maps them
(opentelemetry-collector-contrib, ``pkg/translator/jaeger``: ``jaegerproto_to_traces.go``,
``jLogsToSpanEvents``, ``jReferencesToSpanLinks``, ``setInternalSpanStatus``; its README,
"Events" and "Links"; OpenTelemetry specification, "OpenTelemetry to Jaeger Transformation").
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO, Iterator

import pyarrow as pa

from .. import schema as S
from ._builder import SpanBatchBuilder, batches, normalize_kind
from ._jsondoc import DocumentShapeError, TooDeep, count_keys, iter_json_items, json_bytes

__all__ = ["read_jaeger_json", "INSTANCE_TAGS"]

#: Process tags that name the instance, in order of preference: the OpenTelemetry resource
#: attributes (:data:`~tracesleuth.schema.INSTANCE_ATTRIBUTES`), then the Jaeger clients' own.
INSTANCE_TAGS = (S.ATTR_K8S_POD_NAME, S.ATTR_SERVICE_INSTANCE_ID, S.ATTR_HOST_NAME, "hostname",
                 S.ATTR_NET_HOST_IP, "ip")
#: Span tags that carry what the canonical columns hold (kind, status, scope); not kept as attributes.
CONSUMED_TAGS = frozenset({"span.kind", "error", "otel.status_code", "otel.status_description",
                           "otel.scope.name", "otel.scope.version", "otel.library.name",
                           "otel.library.version", "internal.span.format"})
#: Log field holding the event's name (OpenTelemetry's Jaeger mapping: an event's name is written
#: as this field, and read back from it); a log without it is named by its :data:`MESSAGE_FIELD`
#: (OpenTracing's log field for a human-readable message), else :data:`DEFAULT_EVENT_NAME`.
EVENT_FIELD = "event"
MESSAGE_FIELD = "message"
DEFAULT_EVENT_NAME = "log"
#: ``opentracing.ref_type`` values of references kept as links, by ``refType``.
_REF_TYPES = {"CHILD_OF": "child_of", "FOLLOWS_FROM": "follows_from"}
#: Member name that occurs once per span: counts spans in bytes that cannot be parsed.
SPAN_KEYS = (b'"operationName"',)
_NS_PER_US = 1_000
_OTEL_STATUS = {"ERROR": "error", "OK": "ok", "UNSET": "unset"}
_DATA_FIRST = re.compile(rb'^\s*\{\s*(?:"(?:total|limit|offset|errors)"\s*:\s*[^,{\[]*,\s*)*"data"\s*:')


class _BadRecord(ValueError):
    def __init__(self, field: str | None, message: str):
        self.field = field
        super().__init__(message)


def read_jaeger_json(stream: BinaryIO, builder: SpanBatchBuilder) -> Iterator[pa.RecordBatch]:
    """Read Jaeger JSON traces.

    Accepted documents: ``{"data": [trace, ...]}`` (Jaeger UI download, query API response), a
    bare list of traces, or one trace object ``{"traceID", "spans", "processes"}``.

    A record is a span, numbered 1, 2, ... in document order across all traces (Jaeger JSON
    has no lines to count and a trace can hold thousands of spans); a problem with a whole trace
    is logged at the number of its first span with the number of spans it held. A ``data`` list
    larger than :data:`~tracesleuth.io._jsondoc.MAX_DOCUMENT_BYTES` is streamed trace by trace
    (a single trace is always read whole: its ``processes`` come after its spans); a truncated
    or malformed document is read up to the break.

    Parameters
    ----------
    stream : binary file
        The decompressed JSON document.
    builder : SpanBatchBuilder
        Receives the spans; rejected records and warnings go to its log with the Jaeger field
        name at fault (``startTime``, ``references[0].spanID``, ...).

    Yields
    ------
    pyarrow.RecordBatch
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, trace by trace in document order.

    Notes
    -----
    Field mapping (Jaeger -> canonical): ``traceID``, ``spanID`` -> ids (64-bit trace ids get a
    zero high half); the first ``CHILD_OF`` reference within the same trace -> parent, else the
    first ``FOLLOWS_FROM`` one, with ``follows_from=True`` (references to other traces are links,
    not parents; a legacy ``parentSpanID`` is used when there are no references);
    ``operationName`` -> operation; ``startTime`` and ``duration`` are MICROseconds (Unix epoch)
    -> ``start_ns = startTime * 1000``, ``end_ns = start_ns + duration * 1000``; the span's process
    (``processes[processID]``, or an inline ``process``) -> ``serviceName`` as service and the
    first of :data:`INSTANCE_TAGS` as instance. Tags are typed by their ``type`` (``string``,
    ``bool``, ``int64``, ``float64``; ``binary`` kept as text); span tags then process tags become
    the attributes (the span's wins on a key clash), except :data:`CONSUMED_TAGS`:
    ``span.kind`` -> kind, ``otel.status_code`` (else ``error=true``) -> status,
    ``otel.status_description`` -> status message.

    ``logs`` -> events: ``timestamp`` MICROseconds -> ``time_ns = timestamp * 1000``; the name is
    the :data:`EVENT_FIELD` field (not kept as an attribute), else the :data:`MESSAGE_FIELD`
    field's text (kept as an attribute too), else :data:`DEFAULT_EVENT_NAME`; the other fields,
    typed as tags, are the attributes. ``references`` other than the one that makes the parent
    (references into other traces, further ``CHILD_OF`` and ``FOLLOWS_FROM`` references) ->
    links, with the attribute ``opentracing.ref_type`` (``child_of`` or ``follows_from``) as the
    translator sets it. A malformed log is dropped with a warning, its span kept.
    """
    items = iter_json_items(stream, builder, items_of=_traces_of, prefix_of=_prefix_of,
                            span_keys=SPAN_KEYS, spans_in=_spans_in)
    yield from batches(builder, _read_traces(builder, items))


def _read_traces(builder: SpanBatchBuilder, items) -> Iterator[None]:
    """Add every trace's spans, numbering them on; a step after each trace read."""
    next_record = 1
    for _, trace in items:
        if trace.__class__ is TooDeep:  # a trace: its spans' records are numbered on
            trace.report(builder, next_record)
            next_record += max(trace.spans, 1)
            continue
        next_record = _read_trace(builder, trace, next_record)
        yield


def _prefix_of(head: bytes) -> str:
    text = head.lstrip()
    if text[:1] == b"[":
        return "item"
    return "data.item" if _DATA_FIRST.match(text) else ""


def _traces_of(doc: Any) -> list:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        if "data" in doc:
            data = doc["data"]
            if data is None:
                return []
            if not isinstance(data, list):
                raise DocumentShapeError("data", f"must be a list of traces, got {type(data).__name__}")
            return data
        if "spans" in doc:
            return [doc]
    raise DocumentShapeError(None, "a Jaeger JSON document must be {\"data\": [trace, ...]}, a list of "
                                   "traces or one trace object with \"spans\"")


def _spans_in(trace: Any) -> int:
    if isinstance(trace, dict) and isinstance(trace.get("spans"), list):
        return len(trace["spans"])  # each element is a record (a span, or a bad one rejected alone)
    return count_keys(json_bytes(trace), SPAN_KEYS)


def _tag_value(tag: dict, field: str) -> Any:
    """A Jaeger ``KeyValue``'s value, converted by its ``type``."""
    value = tag.get("value")
    typ = str(tag.get("type", "string")).lower()
    if value is None:
        return None
    try:
        if typ == "bool":
            if isinstance(value, str):
                if value.lower() not in ("true", "false"):
                    raise ValueError
                return value.lower() == "true"
            if not isinstance(value, bool):
                raise ValueError
            return value
        if typ == "int64":
            if isinstance(value, bool) or not isinstance(value, (int, str, float)):
                raise ValueError
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if typ == "float64":
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ValueError
            return float(value)
    except ValueError:
        raise _BadRecord(f"{field}.value", f"not a {typ} value: {value!r:.40}") from None
    return value if isinstance(value, str) else json_bytes(value).decode()


def _tags(tags: Any, field: str) -> list[tuple[str, Any]]:
    if tags is None:
        return []
    if not isinstance(tags, list):
        raise _BadRecord(field, f"must be a list of tags, got {type(tags).__name__}")
    out = []
    for i, tag in enumerate(tags):
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            raise _BadRecord(f"{field}[{i}]", "a tag must be an object with a string \"key\"")
        out.append((tag["key"], _tag_value(tag, f"{field}[{i}]")))
    return out


class _Process:
    __slots__ = ("service", "instance", "tags")

    def __init__(self, process: Any, field: str):
        if not isinstance(process, dict):
            raise _BadRecord(field, f"must be an object, got {type(process).__name__}")
        service = process.get("serviceName")
        if service is not None and not isinstance(service, str):
            raise _BadRecord(f"{field}.serviceName", f"must be a string, got {type(service).__name__}")
        self.service = service
        self.tags = _tags(process.get("tags"), f"{field}.tags")
        values = dict(reversed(self.tags))  # the first of a repeated key wins
        self.instance = next((str(values[k]) for k in INSTANCE_TAGS if values.get(k) not in (None, "")), None)


def _read_trace(builder: SpanBatchBuilder, trace: Any, first_record: int) -> int:
    """Add the spans of one trace; returns the record number of the next span."""
    log, source = builder.log, builder.source
    n_spans = _spans_in(trace)
    try:
        if not isinstance(trace, dict):
            raise _BadRecord(None, f"a trace must be an object, got {type(trace).__name__}")
        spans = trace.get("spans")
        if not isinstance(spans, list):
            raise _BadRecord("spans", "missing or not a list")
        raw_processes = trace.get("processes")
        raw_processes = {} if raw_processes is None else raw_processes
        if not isinstance(raw_processes, dict):
            raise _BadRecord("processes", f"must be an object, got {type(raw_processes).__name__}")
    except _BadRecord as e:
        log.add(source, first_record, f"trace rejected: {e}", field=e.field, spans=n_spans, excerpt=trace)
        return first_record + max(n_spans, 1)
    processes: dict[str, _Process | _BadRecord] = {}
    for pid, process in raw_processes.items():
        try:
            processes[pid] = _Process(process, f"processes.{pid}")
        except _BadRecord as e:
            processes[pid] = e
    record = first_record
    for span in spans:
        try:
            _add_span(builder, record, span, processes)
        except _BadRecord as e:
            builder.discard_pending_attributes()
            log.add(source, record, str(e), field=e.field, spans=1, excerpt=span)
        record += 1
    return record


def _add_span(builder: SpanBatchBuilder, record: int, span: Any, processes: dict) -> None:
    if not isinstance(span, dict):
        raise _BadRecord(None, f"a span must be an object, got {type(span).__name__}")
    for f in ("traceID", "spanID"):
        v = span.get(f)
        if v is None or v == "":
            raise _BadRecord(f, "missing")
        if not isinstance(v, str):
            raise _BadRecord(f, f"must be a string, got {type(v).__name__}")
    trace_id, span_id = span["traceID"], span["spanID"]
    name = span.get("operationName", "")
    if not isinstance(name, str):
        raise _BadRecord("operationName", f"must be a string, got {type(name).__name__}")
    times = []
    for f in ("startTime", "duration"):
        v = span.get(f)
        if v is None:
            raise _BadRecord(f, "missing")
        if v.__class__ is float and v.is_integer():
            v = int(v)
        if v.__class__ is not int:
            raise _BadRecord(f, f"must be an integer number of microseconds, got {v!r:.40}")
        times.append(v)
    parent, follows_from, links = _parent(span, trace_id)
    process = span.get("process")
    if process is not None:
        process = _Process(process, "process")
    else:
        pid = span.get("processID")
        process = processes.get(pid) if isinstance(pid, str) else None
        if process is None:
            raise _BadRecord("processID", f"{pid!r:.40} is not among the trace's processes")
        if isinstance(process, _BadRecord):
            raise process
    tags = _tags(span.get("tags"), "tags")
    kind, status, error = "unspecified", "unset", False
    otel_status = message = None
    add_attribute = builder.add_attribute
    span_keys = set()
    for key, value in tags:
        if key in CONSUMED_TAGS:
            if key == "span.kind":
                kind = normalize_kind(value)
            elif key == "error":
                error = value is True or (isinstance(value, str) and value.lower() == "true")
            elif key == "otel.status_code":
                otel_status = _OTEL_STATUS.get(str(value).upper())
            elif key == "otel.status_description" and value not in (None, ""):
                message = str(value)
            continue
        if value is not None and key not in span_keys:
            span_keys.add(key)
            add_attribute(key, value, record)
    if otel_status is not None:
        status = otel_status
    elif error:
        status = "error"
    if process.tags:
        for key, value in process.tags:
            if key not in span_keys and value is not None:
                span_keys.add(key)
                add_attribute(key, value, record)
    # Nothing below rejects the span: warnings are logged only for spans that are kept.
    for ref_trace, ref_span, ref_type in links:
        builder.add_link(ref_trace, ref_span, ((S.ATTR_OPENTRACING_REF_TYPE, ref_type),), record)
    logs = span.get("logs")
    if logs:
        _add_events(builder, record, logs)
    start = times[0] * _NS_PER_US
    builder.add(record, trace_id, span_id, parent, process.service, name, process.instance, kind,
                start, start + times[1] * _NS_PER_US, status, follows_from, message)


def _add_events(builder: SpanBatchBuilder, record: int, logs: Any) -> None:
    """The span's ``logs`` as events; a malformed log is dropped with a warning."""
    if not isinstance(logs, list):
        builder.log.add(builder.source, record, f"must be a list of logs, got {type(logs).__name__}; not read",
                        field="logs", spans=0, excerpt=logs)
        return
    for i, entry in enumerate(logs):
        try:
            if not isinstance(entry, dict):
                raise _BadRecord(None, f"a log must be an object, got {type(entry).__name__}")
            timestamp = entry.get("timestamp")
            if timestamp.__class__ is float and timestamp.is_integer():
                timestamp = int(timestamp)
            if timestamp.__class__ is not int:
                raise _BadRecord("timestamp", "missing" if timestamp is None else
                                 f"must be an integer number of microseconds, got {timestamp!r:.40}")
            fields = _tags(entry.get("fields"), "fields")
        except _BadRecord as e:
            builder.log.add(builder.source, record, f"event dropped: {e}", field=f"logs[{i}]" + (
                f".{e.field}" if e.field else ""), spans=0, excerpt=entry)
            continue
        values = dict(reversed(fields))  # the first of a repeated key wins
        if EVENT_FIELD in values:
            name = values[EVENT_FIELD]
            fields = [(k, v) for k, v in fields if k != EVENT_FIELD]
        else:
            name = values.get(MESSAGE_FIELD)
            name = DEFAULT_EVENT_NAME if name in (None, "") else name
        builder.add_event(timestamp * _NS_PER_US, "" if name is None else str(name), fields, record)


def _parent(span: dict, trace_id: str) -> tuple[str | None, bool, list[tuple[str, str, str]]]:
    """The span's parent, whether it follows from it, and its other references as links
    ``(trace id, span id, opentracing.ref_type)``."""
    refs = span.get("references")
    if refs is None or refs == []:
        legacy = span.get("parentSpanID")
        if legacy in (None, "", "0", "0000000000000000"):
            return None, False, []
        if not isinstance(legacy, str):
            raise _BadRecord("parentSpanID", f"must be a string, got {type(legacy).__name__}")
        return legacy, False, []
    if not isinstance(refs, list):
        raise _BadRecord("references", f"must be a list, got {type(refs).__name__}")
    parsed, child_of, follows = [], None, None
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict):
            raise _BadRecord(f"references[{i}]", f"must be an object, got {type(ref).__name__}")
        ref_span, ref_trace = ref.get("spanID"), ref.get("traceID", trace_id)
        if not isinstance(ref_span, str) or not ref_span:
            raise _BadRecord(f"references[{i}].spanID", "missing or not a string")
        ref_type = str(ref.get("refType", "CHILD_OF")).upper()
        parsed.append((ref_trace if isinstance(ref_trace, str) else str(ref_trace), ref_span,
                       _REF_TYPES.get(ref_type, _REF_TYPES["FOLLOWS_FROM"])))
        if isinstance(ref_trace, str) and ref_trace.lstrip("0").lower() != trace_id.lstrip("0").lower():
            continue  # a reference into another trace is a link
        if ref_type == "CHILD_OF" and child_of is None:
            child_of = i
        elif ref_type == "FOLLOWS_FROM" and follows is None:
            follows = i
    chosen = child_of if child_of is not None else follows
    links = [p for i, p in enumerate(parsed) if i != chosen]
    if chosen is None:
        return None, False, links
    return parsed[chosen][1], chosen != child_of, links
