"""JSON-lines logs with trace context: one JSON object per line, as structured loggers write them.

Each line is one record. Nested objects are flattened to dotted keys first (ECS writes
``{"log": {"level": "info"}, "trace": {"id": ...}}``, others ``"log.level"``), so both spellings
read the same. Then the first member present of each row below gives the canonical field; every
other member is kept as a typed attribute (arrays as JSON text).

======================== =============================================================================
canonical                members, in order of preference
======================== =============================================================================
``time_ns``              ``timestamp`` (structlog, logstash), ``time`` (Bunyan, pino, slog, logrus,
                         Docker), ``@timestamp`` (Logback/logstash-logback-encoder, ECS), ``ts`` (zap),
                         ``asctime`` (python-json-logger), ``@t`` (Serilog CLEF), ``timeUnixNano``;
                         ISO-8601/RFC 3339 text (any offset; without one read as UTC and counted) or
                         an epoch number in s/ms/µs/ns, told by magnitude
                         (:func:`~tracesleuth.io._logs.epoch_ns`)
``severity_text``        ``level`` (most), ``severity`` (Google Cloud, OTel), ``levelname`` (Python),
                         ``log.level`` (ECS), ``lvl``, ``@l`` (Serilog), ``severity_text``,
                         ``loglevel``; ``levelno`` (Python's number). A number in ``level`` is
                         Bunyan's/pino's (10 trace ... 60 fatal), else an OpenTelemetry number
                         (:data:`~tracesleuth.io._logs.NUMERIC_LEVELS`)
``body``                 ``message`` (python-json-logger, Logback, ECS, winston), ``msg`` (zap, Bunyan,
                         pino, slog, logrus), ``body``, ``event`` (structlog), ``@m``/``@mt``
                         (Serilog: rendered, else template), ``log`` (Docker's json-file); strings only
``trace_id``             ``trace_id`` (OpenTelemetry Java/JS/Go log bridges, MDC), ``traceId``
                         (Spring/Micrometer), ``otelTraceID`` (OpenTelemetry Python logging
                         instrumentation), ``trace.id`` (ECS), ``dd.trace_id`` (Datadog: decimal),
                         ``@tr`` (Serilog), ``logging.googleapis.com/trace`` (Google Cloud:
                         ``projects/P/traces/ID``), ``traceID``
``span_id``              ``span_id``, ``spanId``, ``otelSpanID``, ``span.id``, ``dd.span_id``
                         (decimal), ``@sp``, ``logging.googleapis.com/spanId``, ``spanID``
``service``              ``service.name`` (ECS, OTel), ``service_name``, ``service``,
                         ``otelServiceName``, ``dd.service``, ``serviceName``
``instance``             ``service.instance.id``, ``k8s.pod.name``, ``host.name``, ``hostname``
                         (Bunyan, pino), ``host``
======================== =============================================================================

A ``log`` member that is itself a structured line (Docker's json-file driver around a program
that logs JSON; :func:`structured`) is opened: its members are read as the record's, before the
runtime's (so the time is the program's own, and ``stream`` stays an attribute).

A logger's name (``logger``, ``name``, ``logger_name``) is not taken as the service: it names a
class or module (``com.shop.CartService``), many per service; it stays an attribute. Ids given as
JSON numbers, and Datadog's ids (decimal text by definition), are converted to hexadecimal.

References: python-json-logger (https://nhairs.github.io/python-json-logger/), the
OpenTelemetry Python logging instrumentation (``otelTraceID``, ``otelSpanID``,
``otelServiceName``), structlog (``event``, ``level``, ``timestamp``), logstash-logback-encoder
("Standard Fields"), zap's production encoder, Bunyan and pino (numeric levels), Elastic Common
Schema, Datadog log correlation, Google Cloud structured logging, Serilog's compact JSON (CLEF).
"""

from __future__ import annotations

from typing import Any, BinaryIO, Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ._builder import batches
from ._jsondoc import byte_offset, loads_repairing, warn_replacements
from ._logs import NUMERIC_LEVELS, LogBatchBuilder, MAX_SEVERITY, time_ns

__all__ = ["FIELDS", "open_structured", "read_json_lines_logs", "structured"]

#: Canonical field -> the members that give it, in order of preference (module docstring).
FIELDS: dict[str, tuple[str, ...]] = {
    "time": ("timestamp", "time", "@timestamp", "ts", "asctime", "@t", "timeUnixNano"),
    "level": ("level", "severity", "levelname", "log.level", "lvl", "@l", "severity_text", "loglevel", "levelno"),
    "body": ("message", "msg", "body", "event", "@m", "@mt", "log"),
    "trace_id": ("trace_id", "traceId", "otelTraceID", "trace.id", "dd.trace_id", "@tr",
                 "logging.googleapis.com/trace", "traceID"),
    "span_id": ("span_id", "spanId", "otelSpanID", "span.id", "dd.span_id", "@sp", "logging.googleapis.com/spanId",
                "spanID"),
    "service": ("service.name", "service_name", "service", "otelServiceName", "dd.service", "serviceName"),
    "instance": ("service.instance.id", "k8s.pod.name", "host.name", "hostname", "host"),
}
#: Members whose value is a decimal id by definition (Datadog's 64-bit ids).
DECIMAL_ID_FIELDS = frozenset({"dd.trace_id", "dd.span_id"})
#: Python logging's numeric level member.
PYTHON_LEVEL_FIELD = "levelno"
#: Objects are flattened to dotted keys down to this depth; deeper values are kept as JSON text.
MAX_FLATTEN_DEPTH = 8
_STRING_ONLY = ("body", "service", "instance")


def read_json_lines_logs(stream: BinaryIO, builder: LogBatchBuilder) -> Iterator[pa.RecordBatch]:
    """Read JSON-lines log records (module docstring): a record is a line (1-based).

    Parameters
    ----------
    stream : binary file
        The decompressed file.
    builder : LogBatchBuilder
        Receives the records. A line that is not a JSON object is rejected (one record); a
        record without a time member, or whose time is no time, is rejected by the builder.

    Yields
    ------
    pyarrow.RecordBatch
        Records in :data:`~tracesleuth.schema.LOG_SCHEMA`.
    """
    yield from batches(builder, _read_lines(stream, builder))


def _read_lines(stream: BinaryIO, builder: LogBatchBuilder) -> Iterator[None]:
    """Add (or reject) every line's record; a step after each record added."""
    source, log = builder.source, builder.log
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            doc, bad = loads_repairing(line)
        except orjson.JSONDecodeError as e:
            log.add(source, lineno, f"malformed JSON at byte {byte_offset(line, e.pos)} of the line: {e.msg}",
                    excerpt=line)
            continue
        if not isinstance(doc, dict):
            log.add(source, lineno, f"a line must hold a JSON object, got {type(doc).__name__}", excerpt=line)
            continue
        if bad is not None:
            warn_replacements(builder, lineno, doc, bad)
        _add(flatten(doc), lineno, builder)
        yield


def flatten(obj: dict, prefix: str = "", depth: int = 0, out: dict | None = None) -> dict:
    """``obj`` with nested objects as dotted keys (``{"log": {"level": 1}}`` -> ``{"log.level": 1}``);
    a key written both ways keeps its first value."""
    out = {} if out is None else out
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if value.__class__ is dict and value and depth < MAX_FLATTEN_DEPTH:
            flatten(value, name + ".", depth + 1, out)
        elif name not in out:
            out[name] = value
    return out


def _pick(doc: dict, field: str) -> tuple[str | None, Any]:
    """``(member, value)`` of the first member of ``FIELDS[field]`` present with a usable value."""
    for name in FIELDS[field]:
        value = doc.get(name)
        if value is None:
            continue
        if field in _STRING_ONLY and value.__class__ is not str:
            continue
        return name, value
    return None, None


def _id(member: str | None, value: Any) -> Any:
    """An id as hexadecimal text: numbers and Datadog's decimal text converted, Google Cloud's
    ``projects/P/traces/ID`` cut to its id; anything else as given (the builder checks it)."""
    if value is None or value.__class__ is bool:
        return None if value is None else str(value)
    if value.__class__ is int:
        return format(value, "x") if value > 0 else str(value)
    if value.__class__ is not str:
        return str(value)
    value = value.strip()
    if member in DECIMAL_ID_FIELDS and value.isascii() and value.isdigit():
        return format(int(value), "016x")  # a 64-bit id, as Zipkin's and Jaeger's are read
    if "/traces/" in value:
        return value.rsplit("/", 1)[-1]
    return value


def _severity(member: str | None, value: Any) -> tuple[int | None, str | None]:
    """``(number or None, text)`` of a level member's value (numbers by their logger's convention)."""
    if value is None:
        return None, None
    if value.__class__ is int:
        table = NUMERIC_LEVELS["python" if member == PYTHON_LEVEL_FIELD else "bunyan"]
        number = table.get(value)
        if number is None and member != PYTHON_LEVEL_FIELD and 1 <= value <= MAX_SEVERITY:
            number = value  # an OpenTelemetry severity number
        return number, str(value)
    return None, value if value.__class__ is str else str(value)


def structured(text: Any) -> dict | None:
    """The members of a structured log line written as a message (a JSON object), flattened
    (:func:`flatten`); None when ``text`` is not a JSON object with a message member
    (``FIELDS["body"]``).

    A container runtime keeps what a program writes as the message of its own record: Docker's
    json-file driver writes ``{"log": "{\"severity\": \"info\", \"message\": ...}\\n", ...}``,
    and so do the Nezha log CSVs of OnlineBoutique (logrus, pino and python-json-logger lines).
    Opening it gives the program's message as the body and its level as the severity.
    """
    if text.__class__ is not str or not text.startswith("{"):
        return None
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if doc.__class__ is not dict:
        return None
    doc = flatten(doc)
    return doc if _pick(doc, "body")[0] is not None else None


def open_structured(bodies: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, list[list[tuple[str, Any]]]] | None:
    """Open the bodies that are structured log lines (:func:`structured`), vectorized around them.

    Parameters
    ----------
    bodies : pyarrow.Array of str, shape (n_records,)
        Messages as a container runtime kept them.

    Returns
    -------
    (body, severity_number, severity_text, attributes) or None
        ``body`` (str, shape (n_records,)): the program's message where the body was a structured
        line, else the body unchanged; ``severity_number`` (int32, null unless the level was a
        number: Bunyan's/pino's or OpenTelemetry's) and ``severity_text`` (str, null where no
        level was written); ``attributes``: per record, the line's other members as
        ``(key, value)`` pairs (its time too: the record keeps the runtime's). None when no body
        is a structured line, which costs one scan of the bodies' first characters.
    """
    candidates = pc.starts_with(pc.utf8_ltrim_whitespace(bodies), "{")
    if not pc.any(candidates).as_py():
        return None
    texts = bodies.to_pylist()
    numbers: list[int | None] = [None] * len(texts)
    levels: list[str | None] = [None] * len(texts)
    extra: list[list[tuple[str, Any]]] = [[] for _ in texts]
    opened = 0
    for i in np.flatnonzero(candidates.to_numpy(zero_copy_only=False)).tolist():
        doc = structured(texts[i].strip())
        if doc is None:
            continue
        body_member, texts[i] = _pick(doc, "body")
        level_member, level = _pick(doc, "level")
        numbers[i], levels[i] = _severity(level_member, level)
        extra[i] = [(k, v) for k, v in doc.items() if k != body_member and k != level_member]
        opened += 1
    if not opened:
        return None
    return (pa.array(texts, pa.string()), pa.array(numbers, pa.int32()), pa.array(levels, pa.string()), extra)


def _add(doc: dict, record: int, builder: LogBatchBuilder) -> None:
    body_member, body = _pick(doc, "body")
    inner = structured(body.strip()) if body_member == "log" else None
    if inner is not None:  # a container runtime's record around a structured line: the line's members first
        doc = {**inner, **{k: v for k, v in doc.items() if k != "log" and k not in inner}}
    picked = {field: _pick(doc, field) for field in FIELDS}
    used = {member for member, _ in picked.values() if member is not None}
    time_member, raw_time = picked["time"]
    time, naive = time_ns(raw_time) if raw_time is not None else (None, False)
    if naive:
        builder.naive_time(record)
    number, text = _severity(*picked["level"])
    add_attribute = builder.attributes.add_attribute
    for key, value in doc.items():
        if key not in used:
            add_attribute(key, value, record)
    builder.add(record, time if time is not None else raw_time, _id(*picked["trace_id"]), _id(*picked["span_id"]),
                picked["service"][1], picked["instance"][1], number, text, picked["body"][1])
