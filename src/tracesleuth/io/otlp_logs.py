"""OTLP log records: JSON (the collector file exporter's lines, or one OTLP/HTTP JSON body) and
protobuf (one ``ExportLogsServiceRequest``, or the file exporter's length-prefixed stream).

Reference: ``opentelemetry/proto/logs/v1/logs.proto`` and
``opentelemetry/proto/collector/logs/v1/logs_service.proto``
(https://github.com/open-telemetry/opentelemetry-proto); OTLP specification, "JSON Protobuf
Encoding" (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding); the logs data model
(https://opentelemetry.io/docs/specs/otel/logs/data-model/).

Field mapping (OTLP ``LogRecord`` -> canonical):

======================================= =======================================================
``timeUnixNano``                        ``time_ns``; when absent or 0, ``observedTimeUnixNano``
                                        (the data model: the time the collector saw it)
``traceId`` / ``spanId``                ids (hexadecimal; base64 of 16/8 bytes accepted, as for
                                        spans); empty: no trace context
``severityNumber`` / ``severityText``   ``severity_number`` (integer or ``SEVERITY_NUMBER_*``;
                                        when 0, the number of the text) / ``severity_text``
``body``                                ``body``: a ``stringValue`` as it is, a structured value
                                        (``kvlistValue``, ``arrayValue``, numbers) as its JSON text
``attributes``                          attributes, then the resource's (the record's value wins
                                        on a key clash); ``eventName`` -> attribute ``event.name``
resource ``service.name``               ``service``
resource instance attributes            ``instance``: the first of
                                        :data:`~tracesleuth.schema.INSTANCE_ATTRIBUTES`
======================================= =======================================================

Records are numbered as for spans: a line of the file exporter's output, an element of a body's
``resourceLogs``, a request of a length-prefixed protobuf stream. A record that cannot be read
(malformed JSON, a field of the wrong type) is rejected with the records it held (counted by
their ``timeUnixNano`` or ``observedTimeUnixNano`` members, or their protobuf messages).
"""

from __future__ import annotations

from typing import Any, BinaryIO, Iterator

import pyarrow as pa
from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs

from ._builder import _json_text, last_batch
from ._jsondoc import MAX_DEPTH, NESTED_TOO_DEEP, DocumentShapeError, count_keys, gc_paused, json_bytes, max_depth
from ._logs import LogBatchBuilder, severity_number
from ._otlp import OtlpValueError, ResourceContext, hex_id, json_any_value, json_key_value, proto_any_value
from ._source import chain
from .otlp_json import _camel, _sniff_lines, body_batches, request_resources, resource_parts
from .otlp_proto import attributed, read_requests, read_resource

__all__ = ["read_otlp_logs_json", "read_otlp_logs_proto"]

#: Member names that occur once per log record in OTLP JSON (every record the SDKs and the
#: collector write has an observed time; a record without one counts by its time): count the
#: records lost in bytes that cannot be parsed.
RECORD_KEYS = (b'"observedTimeUnixNano"', b'"observed_time_unix_nano"')
_TIME_KEYS = (b'"timeUnixNano"', b'"time_unix_nano"')
#: The attribute that keeps a record's ``eventName`` (OpenTelemetry semantic conventions).
ATTR_EVENT_NAME = "event.name"


def _records_in(data: bytes) -> int:
    """Log records in (possibly unparseable) OTLP JSON bytes."""
    return max(count_keys(data, RECORD_KEYS), count_keys(data, _TIME_KEYS))


def read_otlp_logs_json(stream: BinaryIO, builder: LogBatchBuilder) -> Iterator[pa.RecordBatch]:
    """Read OTLP JSON log records (module docstring).

    Two layouts, told apart by content as for spans (:func:`~tracesleuth.io.otlp_json.read_otlp_json`):
    the file exporter's output, one ``ExportLogsServiceRequest`` (``{"resourceLogs": [...]}``) per
    line (a record is a line), or a single body, compact or pretty-printed (a record is an
    element of its ``resourceLogs``; a large body is streamed, a broken one read up to the break).

    Parameters
    ----------
    stream : binary file
        The decompressed file.
    builder : LogBatchBuilder
        Receives the records; problems go to its log with a JSON path inside the record
        (``resourceLogs[0].scopeLogs[1].logRecords[7].traceId``).

    Yields
    ------
    pyarrow.RecordBatch
        Records in :data:`~tracesleuth.schema.LOG_SCHEMA`.
    """
    head, ndjson, error = _sniff_lines(stream, ("resourceLogs", "resource_logs"))
    stream = chain(head, stream) if error is None else _bytes(head)
    del head
    reader = _JsonReader(builder)
    if ndjson:
        for lineno, line in enumerate(stream, 1):
            if not line.strip():
                continue
            depth, at = max_depth(line) if line.count(b"[") + line.count(b"{") > MAX_DEPTH else (0, 0)
            if depth > MAX_DEPTH:
                builder.log.add(builder.source, lineno, f"{NESTED_TOO_DEEP}: {depth} levels at byte {at} of the line, "
                                f"beyond the limit of {MAX_DEPTH}; line rejected unread", spans=_records_in(line),
                                excerpt=line[:120])
                continue
            with gc_paused():
                reader.read_line(line, lineno)
            if builder.full():
                yield builder.flush()
    else:
        yield from body_batches(stream, builder, reader.read_resource_logs, items_of=_resource_logs_of,
                                prefix_of=_prefix_of, keys=RECORD_KEYS,
                                count=lambda rl: _records_in(json_bytes(rl)) if rl else 0)
    if error is not None:  # the records before it were read; the caller reports the rest
        raise error
    yield from last_batch(builder)


def _bytes(data: bytes) -> BinaryIO:
    import io

    return io.BytesIO(data)


def _prefix_of(head: bytes) -> str:
    return "resource_logs.item" if b'"resource_logs"' in head and b'"resourceLogs"' not in head \
        else "resourceLogs.item"


def _resource_logs_of(doc: Any) -> list:
    if not isinstance(doc, dict):
        raise DocumentShapeError(None, f"an OTLP JSON body must be an object, got {type(doc).__name__}")
    rl = doc.get("resourceLogs", doc.get("resource_logs"))
    if not isinstance(rl, list):
        raise DocumentShapeError("resourceLogs", f"must be a list, got {type(rl).__name__}")
    return rl


class _JsonReader:
    """Turns parsed OTLP JSON log requests into builder columns."""

    def __init__(self, builder: LogBatchBuilder):
        self.builder = builder
        self.log, self.source = builder.log, builder.source

    def read_line(self, line: bytes, lineno: int) -> None:
        """One line of the file exporter's output."""
        rl_list = request_resources(self.builder, line, lineno, "resourceLogs", _records_in)
        for r, rl in enumerate(rl_list or ()):
            self.read_resource_logs(rl, lineno, f"resourceLogs[{r}].")

    def read_resource_logs(self, rl: Any, record: int, path: str) -> None:
        """One ``ResourceLogs`` object; ``path`` is its JSON path inside the record."""
        try:
            rl, items, scopes = resource_parts(rl, "scopeLogs", "instrumentationLibraryLogs")
        except OtlpValueError as e:
            self.log.add(self.source, record, str(e), field=path + e.field if e.field else path.rstrip(".") or None,
                         spans=_records_in(json_bytes(rl)) if isinstance(rl, (dict, list)) else 0, excerpt=rl)
            return
        ctx = ResourceContext(items, self.builder.attributes, record)
        for s, scope in enumerate(scopes):
            records = scope.get("logRecords") if isinstance(scope, dict) else None
            if not isinstance(records, list):
                if isinstance(scope, dict) and "logRecords" not in scope:
                    continue  # a scope without records
                self.log.add(self.source, record, "must be a list of log records",
                             field=f"{path}scopeLogs[{s}].logRecords",
                             spans=_records_in(json_bytes(scope)) if isinstance(scope, (dict, list)) else 0,
                             excerpt=scope)
                continue
            for j, lr in enumerate(records):
                where = f"{path}scopeLogs[{s}].logRecords[{j}]"
                try:
                    self._add(lr, ctx, record)
                except OtlpValueError as e:
                    self.builder.discard_pending_attributes()
                    self.log.add(self.source, record, str(e), field=where + (f".{e.field}" if e.field else ""),
                                 spans=1, excerpt=lr)

    def _add(self, lr: Any, ctx: ResourceContext, record: int) -> None:
        """Check one ``LogRecord`` object and add it; raises :class:`OtlpValueError` naming the
        first bad field (then nothing was added but attributes, which the caller drops)."""
        if not isinstance(lr, dict):
            raise OtlpValueError("", f"a log record must be an object, got {type(lr).__name__}")
        if "timeUnixNano" not in lr and any("_" in k for k in lr):
            lr = _camel(lr)
        time = lr.get("timeUnixNano")
        if time in (None, 0, "0", ""):
            time = lr.get("observedTimeUnixNano")
        if time is not None and time.__class__ not in (int, str):
            raise OtlpValueError("timeUnixNano", f"must be an integer or a decimal string, got {time!r:.40}")
        trace_id = lr.get("traceId") or None
        span_id = lr.get("spanId") or None
        if trace_id is not None:
            trace_id = hex_id(trace_id, 16, "traceId")
        if span_id is not None:
            span_id = hex_id(span_id, 8, "spanId")
        number = lr.get("severityNumber")
        if number is not None and number.__class__ is not int:
            if number.__class__ is str:
                number = severity_number(number) if not number.isdigit() else int(number)
                if number is None:
                    raise OtlpValueError("severityNumber",
                                         f"not a SEVERITY_NUMBER_* name: {lr['severityNumber']!r:.40}")
            else:
                raise OtlpValueError("severityNumber", f"must be an integer or a SEVERITY_NUMBER_* name, got "
                                                       f"{number!r:.40}")
        text = lr.get("severityText")
        if text is not None and text.__class__ is not str:
            raise OtlpValueError("severityText", f"must be a string, got {type(text).__name__}")
        body = lr.get("body")
        body = None if body is None else json_any_value(body, "body")
        attrs = lr.get("attributes") or []
        if not isinstance(attrs, list):
            raise OtlpValueError("attributes", f"must be a list, got {type(attrs).__name__}")
        converted = [json_key_value(kv, f"attributes[{i}]") for i, kv in enumerate(attrs)]
        event = lr.get("eventName")
        if event and event.__class__ is str:
            converted.append((ATTR_EVENT_NAME, event))
        b = self.builder
        n_attrs = len(b.attributes.attr_key)
        for key, value in converted:
            b.attributes.add_attribute(key, value, record)
        ctx.extend(b.attributes, b.attributes.attr_key[n_attrs:])
        b.add(record, time, trace_id, span_id, ctx.service, ctx.instance, number, text, body_text(body))


def body_text(value: Any) -> str | None:
    """A body as text: a string as it is, any other value as its compact JSON text."""
    if value is None or value.__class__ is str:
        return value
    return _json_text(value)


# -- protobuf -----------------------------------------------------------------------------------
def read_otlp_logs_proto(stream: BinaryIO, builder: LogBatchBuilder) -> Iterator[pa.RecordBatch]:
    """Read OTLP protobuf log records: a raw ``ExportLogsServiceRequest`` (a record is an element
    of ``resource_logs``, cut from the stream and decoded on its own) or the file exporter's
    length-prefixed stream (a record is a request); the framing of
    :func:`~tracesleuth.io.otlp_proto.read_otlp_proto`, shared.

    Parameters
    ----------
    stream : binary file
        The decompressed file.
    builder : LogBatchBuilder
        Receives the records; a corrupt ``ResourceLogs`` is rejected with the records it held.

    Yields
    ------
    pyarrow.RecordBatch
        Records in :data:`~tracesleuth.schema.LOG_SCHEMA`.

    Notes
    -----
    Times are ``fixed64`` nanoseconds, unchanged; ids are the bytes as hexadecimal (ids of
    another length than 16/8 bytes are reported and the record is kept without them);
    ``bytes_value`` bodies and attributes are kept as base64 text, as OTLP JSON writes them.
    """
    yield from read_requests(stream, builder, _read_resource_logs, field="resource_logs",
                             message="ExportLogsServiceRequest")


def _read_resource_logs(data: bytes, builder: LogBatchBuilder, record: int, index: int | None) -> None:
    attributes = builder.attributes
    rl, ctx = read_resource(ResourceLogs, data, builder, attributes, record, index, "resource_logs")
    if rl is None:
        return
    service, instance, keys, add = ctx.service, ctx.instance, attributes.attr_key, builder.add
    for lr, n_attrs in attributed(rl.scope_logs, "log_records", attributes, record):
        if lr.event_name:
            attributes.add_attribute(ATTR_EVENT_NAME, lr.event_name, record)
        ctx.extend(attributes, keys[n_attrs:])
        tid, sid = lr.trace_id, lr.span_id
        body = body_text(proto_any_value(lr.body)) if lr.HasField("body") else None
        # an id of the wrong length is kept as text that is no id: the builder reports it
        add(record, lr.time_unix_nano or lr.observed_time_unix_nano or None,
            (tid.hex() if len(tid) == 16 else f"{len(tid)} bytes") if tid else None,
            (sid.hex() if len(sid) == 8 else f"{len(sid)} bytes") if sid else None,
            service, instance, lr.severity_number or None, lr.severity_text or None, body)
