"""Where measured calls go: OpenTelemetry spans, or a local file of OTLP JSON lines.

A recorder turns one measured call into one span: ``start(name)`` when the call begins (its
handle comes back to ``finish``), ``finish(handle, attributes, error)`` when it returns or raises.
Calls nested in a measured call become its child spans, so the call graph (which the what-if
prediction of :mod:`tracesleuth.analyses.annotate` composes annotations along) is kept.

* :class:`OtelRecorder` starts a span of the application's OpenTelemetry tracer and makes it
  current, so the measured calls nest within (and around) the spans of other instrumentation
  (HTTP servers and clients, database drivers) and go wherever the application exports spans,
  to ``tracesleuth collect`` for instance.
* :class:`FileRecorder` needs no OpenTelemetry: it keeps the spans in memory and appends them,
  ``buffer_spans`` at a time and when closed (at the latest when the interpreter exits), to a
  file in the layout of the OpenTelemetry Collector's file exporter: one OTLP JSON
  ``ExportTraceServiceRequest`` per line (OTLP specification, "JSON Protobuf Encoding"). Every
  tracesleuth command reads it (format ``otlp-json``).

Standard library only (OpenTelemetry's API is imported by :class:`OtelRecorder` alone).
"""

from __future__ import annotations

import atexit
import contextvars
import json
import math
import os
import threading
import time
from pathlib import Path
from random import getrandbits
from typing import Any, Protocol

import weakref

from ..errors import ParameterError

__all__ = ["FileRecorder", "OtelRecorder", "Recorder", "get_recorder", "set_recorder"]

#: The instrumentation scope of the spans written (OTLP ``scope.name``).
SCOPE_NAME = "tracesleuth.instrument"
#: OTLP span kind INTERNAL (an in-process call).
SPAN_KIND_INTERNAL = 1
#: OTLP status code ERROR (the call raised).
STATUS_CODE_ERROR = 2


class Recorder(Protocol):
    """What :func:`~tracesleuth.instrument.measured` calls around each call."""

    def start(self, name: str) -> Any:
        """A call of operation ``name`` begins; returns the handle given back to :meth:`finish`."""

    def finish(self, handle: Any, attributes: dict, error: BaseException | None) -> None:
        """The call ended (``error``: what it raised); ``attributes``: its features and memory."""


_default: Recorder | None = None


def set_recorder(recorder: Recorder | None) -> Recorder | None:
    """Make ``recorder`` the one every measured function without its own uses; returns the previous one.

    With none set (the default), a measured function without a recorder of its own runs as if
    it were not measured (one global lookup per call).
    """
    global _default
    previous, _default = _default, recorder
    return previous


def get_recorder() -> Recorder | None:
    """The recorder set by :func:`set_recorder` (None when none is)."""
    return _default


class OtelRecorder:
    """Each measured call as a span of an OpenTelemetry tracer, made current while the call runs.

    Parameters
    ----------
    tracer : opentelemetry.trace.Tracer, optional
        Default: ``opentelemetry.trace.get_tracer("tracesleuth.instrument", tracer_provider=...)``.
    tracer_provider : opentelemetry.trace.TracerProvider, optional
        Default: the global one (set by the application, e.g. with an OTLP exporter to
        ``tracesleuth collect``). With none set, OpenTelemetry records nothing.

    Notes
    -----
    The features are the span's attributes (``tracesleuth.arg.*``), the memory
    ``tracesleuth.memory.peak_bytes``; a call that raises gets status ERROR. The SDK's own cost
    per span (creating it, making it current, ending it) is the larger part of the overhead:
    ``python3 benchmarks/bench_instrument.py`` prints both.
    """

    def __init__(self, tracer=None, *, tracer_provider=None):
        from opentelemetry import context, trace

        self._context, self._trace = context, trace
        self._tracer = tracer or trace.get_tracer(SCOPE_NAME, tracer_provider=tracer_provider)
        from opentelemetry.trace import Status, StatusCode

        self._error = Status(StatusCode.ERROR)

    def start(self, name: str):
        span = self._tracer.start_span(name)
        return span, self._context.attach(self._trace.set_span_in_context(span))

    def finish(self, handle, attributes: dict, error: BaseException | None) -> None:
        span, token = handle
        try:
            if attributes:
                span.set_attributes(attributes)
            if error is not None:
                span.set_status(self._error)
        finally:
            span.end()
            self._context.detach(token)


class FileRecorder:
    """Each measured call as a span in a local file of OTLP JSON lines (read by every tracesleuth command).

    Parameters
    ----------
    path : str or os.PathLike
        The file; spans are appended (created when missing).
    service : str, default="python"
        ``service.name`` of the spans: the operation key of a measured function is
        ``<service>:<qualified name>``.
    instance : str, optional
        ``service.instance.id`` (the instance in tracesleuth's tables); default none.
    buffer_spans : int, default=4096
        Spans kept in memory before they are written (one line per write), when the next root
        call (a measured call inside no other) ends: writing inside a measured call would add
        to its time. More than 16 times as many are written at once.

    Notes
    -----
    A call's start is the wall clock (:func:`time.time_ns`) and its duration the monotonic clock
    (:func:`time.perf_counter_ns`); nesting is followed per thread and per asyncio task (a
    :class:`contextvars.ContextVar`). Trace and span ids are random (128 and 64 bits). Call
    :meth:`close` (or :meth:`flush`) to write what is buffered; it is called when the
    interpreter exits. Writing is serialized by a lock: several threads may share a recorder.

    Examples
    --------
    >>> import tempfile, os
    >>> from tracesleuth.instrument import FileRecorder, measured
    >>> path = os.path.join(tempfile.mkdtemp(), "calls.jsonl")
    >>> recorder = FileRecorder(path, service="shop")
    >>> @measured(recorder=recorder)
    ... def total(prices):
    ...     return sum(prices)
    >>> total([1.0, 2.5])
    3.5
    >>> recorder.close()
    >>> from tracesleuth.io import read_spans
    >>> read_spans(path).spans.num_rows
    1
    """

    def __init__(self, path, *, service: str = "python", instance: str | None = None, buffer_spans: int = 4096):
        if not isinstance(buffer_spans, int) or isinstance(buffer_spans, bool) or buffer_spans < 1:
            raise ParameterError(f"The 'buffer_spans' parameter of FileRecorder must be an int in the range [1, inf). "
                                 f"Got {buffer_spans!r} instead.")
        self.path = Path(os.fspath(path))
        self.service, self.instance, self.buffer_spans = service, instance, buffer_spans
        self._current: contextvars.ContextVar = contextvars.ContextVar(f"tracesleuth_span_{id(self)}", default=None)
        self._spans: list = []
        self._lock = threading.Lock()
        self.spans_written = 0
        self._quoted: dict[str, str] = {}
        resource = [{"key": "service.name", "value": {"stringValue": service}}]
        if instance is not None:
            resource.append({"key": "service.instance.id", "value": {"stringValue": instance}})
        # A line: {"resourceSpans":[{"resource":...,"scopeSpans":[{"scope":...,"spans":[SPANS]}]}]}
        self._head = ('{"resourceSpans":[' + json.dumps({"resource": {"attributes": resource}}, separators=(",", ":"))[:-1]
                      + f',"scopeSpans":[{{"scope":{{"name":"{SCOPE_NAME}"}},"spans":[')
        alive = weakref.ref(self)
        atexit.register(lambda: alive() is not None and alive().close())

    def start(self, name: str):
        parent = self._current.get()
        frame = (parent[0] if parent else (getrandbits(128) or 1), getrandbits(64) or 1,
                 parent[1] if parent else 0, name, time.time_ns(), time.perf_counter_ns())
        return frame, self._current.set(frame)

    def finish(self, handle, attributes: dict, error: BaseException | None) -> None:
        end = time.perf_counter_ns()
        frame, token = handle
        try:
            self._current.reset(token)
        except ValueError:  # finished in another context (a callback): the parent is restored by hand
            self._current.set(None)
        spans = self._spans
        spans.append((frame, end, attributes, error is not None))
        # Written when a root call ends, so that the writing never falls inside a measured call
        # (it would add to its time); a root that runs on and on is flushed past 16 buffers.
        if len(spans) >= self.buffer_spans and (not frame[2] or len(spans) >= 16 * self.buffer_spans):
            self.flush()

    def flush(self) -> None:
        """Write the buffered spans (one OTLP JSON line) now."""
        with self._lock:
            spans, self._spans = self._spans, []
            if not spans:
                return
            text = self._head + ",".join([self._encode(*s) for s in spans]) + _TAIL
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(text)
            self.spans_written += len(spans)

    def close(self) -> None:
        """Write what is buffered; the recorder stays usable (later spans are written by the next flush)."""
        self.flush()

    def _encode(self, frame: tuple, end_perf_ns: int, attributes: dict, error: bool) -> str:
        """One span in the OTLP JSON encoding (names and keys escaped once each, then cached)."""
        trace_id, span_id, parent_id, name, start_ns, start_perf_ns = frame
        quoted = self._quoted
        parts = [f'{{"traceId":"{trace_id:032x}","spanId":"{span_id:016x}",']
        if parent_id:
            parts.append(f'"parentSpanId":"{parent_id:016x}",')
        if name not in quoted:
            quoted[name] = json.dumps(name)
        parts.append(f'"name":{quoted[name]},"kind":{SPAN_KIND_INTERNAL},"startTimeUnixNano":"{start_ns}",'
                     f'"endTimeUnixNano":"{start_ns + end_perf_ns - start_perf_ns}"')
        if attributes:
            values = []
            for key, value in attributes.items():
                if key not in quoted:
                    quoted[key] = json.dumps(key)
                values.append(f'{{"key":{quoted[key]},"value":{_otlp_value(value)}}}')
            parts.append(',"attributes":[' + ",".join(values) + "]")
        if error:
            parts.append(f',"status":{{"code":{STATUS_CODE_ERROR}}}')
        parts.append("}")
        return "".join(parts)


#: The end of a line after the spans.
_TAIL = "]}]}]}\n"


def _otlp_value(value) -> str:
    kind = type(value)
    if kind is int:
        return f'{{"intValue":"{value}"}}'
    if kind is float:
        return f'{{"doubleValue":{value!r}}}' if math.isfinite(value) else f'{{"stringValue":"{value!r}"}}'
    if kind is bool:
        return f'{{"boolValue":{"true" if value else "false"}}}'
    return f'{{"stringValue":{json.dumps(str(value))}}}'
