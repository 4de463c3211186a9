"""The canonical span schema: column names, their types and their units.

Every reader produces spans in this schema; every analysis consumes it. Units are part of the
column names (``start_ns``); times are integer nanoseconds since the Unix epoch end to end, and a
reader converts whatever its format carries (Zipkin microseconds, Jaeger microseconds, CSV
columns in any unit) exactly once, when it reads.

Span columns
------------
trace_id : string
    Lower-case hexadecimal, left-padded with zeros to 32 characters (64-bit Zipkin/Jaeger ids
    become 128-bit ids with a zero high half, so one trace read from two formats has one id).
span_id : string
    Lower-case hexadecimal, left-padded to 16 characters. Unique within a trace after assembly.
parent_span_id : string, nullable
    ``null`` for a root span.
service : string
    ``service.name`` of the process that recorded the span.
operation : string
    The span name (OpenTelemetry), operation name (Jaeger) or name (Zipkin).
instance : string, nullable
    The host, pod or process instance that served the span (``k8s.pod.name``, ``host.name``,
    ``service.instance.id``, Zipkin endpoint address), ``null`` when the format gives none.
kind : string
    One of :data:`SPAN_KINDS`. ``unspecified`` when the format does not say (plain CSV).
start_ns, end_ns : int64
    Unix epoch nanoseconds.
status : string
    One of :data:`STATUS_CODES`.
follows_from : bool
    True when the span's relation to its parent is asynchronous by declaration (a Jaeger/OpenTracing
    ``FOLLOWS_FROM`` reference); its time is then never subtracted from the parent's.
attributes : list<struct<key, str, int, float, bool>>
    Typed span (and resource) attributes. Exactly one of the value fields is set per entry; arrays
    and byte strings are kept as their JSON text in ``str``.
status_message : string, nullable
    The status description (OTLP ``status.message``, Zipkin ``error`` tag text, Jaeger
    ``otel.status_description``); ``null`` when the format gives none.
events : list<struct<time_ns, name, attributes>>, nullable
    Span events in time order as the format lists them (OTLP ``events``, Jaeger ``logs``, Zipkin
    ``annotations``): ``time_ns`` Unix epoch nanoseconds, ``name``, typed ``attributes``
    (:data:`ATTRIBUTE_TYPE`). An exception is an event named :data:`EXCEPTION_EVENT` with
    :data:`ATTR_EXCEPTION_TYPE`, :data:`ATTR_EXCEPTION_MESSAGE` and
    :data:`ATTR_EXCEPTION_STACKTRACE`. ``null`` or empty: none (stores written before events
    were kept read as ``null``).
links : list<struct<trace_id, span_id, attributes>>, nullable
    Links to spans of this or other traces (OTLP ``links``, Jaeger references other than the
    parent's, with :data:`ATTR_OPENTRACING_REF_TYPE`), ids in the canonical form of ``trace_id``
    and ``span_id``, typed ``attributes``. ``null`` or empty: none.

Log-record columns
------------------
:data:`LOG_SCHEMA`, after OpenTelemetry's log data model: ``time_ns`` (int64, Unix epoch ns),
``trace_id`` and ``span_id`` (the span the record was written in, canonical ids; null when the
record carries no trace context), ``service``, ``instance``, ``severity_number`` (int32, 1-24, 0
unknown; :data:`SEVERITY_LEVELS`), ``severity_text``, ``body`` (string), ``attributes`` (as for
spans) and ``template_id`` (int64, the log template of the body; null until templated).

Trace-table columns
-------------------
The per-request trace table (:mod:`tracesleuth.model.table`) and its per-call view name their
columns here too, so that every table column name is written once. ``K`` is an operation key
``"service:operation"``, ``KEY`` an attribute key; a per-operation or per-attribute column is
``PREFIX[K]`` (:func:`exclusive_column`, :func:`calls_column`, :func:`instance_column`,
:func:`attribute_column`, :func:`numeric_attribute_column`; :func:`column_key` reads the key
back). Per request: :data:`LATENCY_NS`, :data:`SIGNATURE`, :data:`ERROR`, :data:`INCOMPLETE`,
``exclusive_ns[K]`` (Int64 ns), ``calls[K]`` (Int32), ``instance[K]`` (String), ``attr[KEY]``
(String, a categorical entry-span attribute) and ``num[KEY]`` (Int64 or Float64, a numeric
entry-span attribute, in the attribute's own unit). Per call (one row per span of a request):
:data:`REQUEST`, :data:`OPERATION_KEY`, :data:`DEPTH`, :data:`START_OFFSET_NS`,
:data:`DURATION_NS`, :data:`EXCLUSIVE_NS`, :data:`ERROR`, :data:`EXCEPTION_TYPE`,
:data:`CALLER_KEY`, :data:`SERVER_SERVICE`, :data:`GAP_NS`, beside span columns of the span
schema. A span counts as failed (:data:`ERROR`) when its status is ``error`` or it has an
:data:`EXCEPTION_EVENT` event.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TRACE_ID = "trace_id"
SPAN_ID = "span_id"
PARENT_SPAN_ID = "parent_span_id"
SERVICE = "service"
OPERATION = "operation"
INSTANCE = "instance"
KIND = "kind"
START_NS = "start_ns"
END_NS = "end_ns"
STATUS = "status"
FOLLOWS_FROM = "follows_from"
ATTRIBUTES = "attributes"
STATUS_MESSAGE = "status_message"
EVENTS = "events"
LINKS = "links"
#: Columns a span store written before events, links and status messages were kept lacks; they
#: read as null there.
LATER_SPAN_COLUMNS = (STATUS_MESSAGE, EVENTS, LINKS)

#: Derived column (``end_ns - start_ns``), computed where needed, never stored.
DURATION_NS = "duration_ns"

SPAN_KINDS = ("server", "client", "producer", "consumer", "internal", "unspecified")
#: Kinds whose children are asynchronous messages: never subtracted from the parent's time.
ASYNC_KINDS = ("producer", "consumer")
STATUS_CODES = ("unset", "ok", "error")

ATTRIBUTE_TYPE = pa.struct(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("str", pa.string()),
        pa.field("int", pa.int64()),
        pa.field("float", pa.float64()),
        pa.field("bool", pa.bool_()),
    ]
)

#: A span event (:data:`EVENTS`): when, what, and its typed attributes.
EVENT_TYPE = pa.struct(
    [
        pa.field("time_ns", pa.int64(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("attributes", pa.list_(ATTRIBUTE_TYPE)),
    ]
)
#: A link to another span (:data:`LINKS`), ids in canonical form, typed attributes.
LINK_TYPE = pa.struct(
    [
        pa.field("trace_id", pa.string(), nullable=False),
        pa.field("span_id", pa.string(), nullable=False),
        pa.field("attributes", pa.list_(ATTRIBUTE_TYPE)),
    ]
)

SPAN_SCHEMA = pa.schema(
    [
        pa.field(TRACE_ID, pa.string(), nullable=False),
        pa.field(SPAN_ID, pa.string(), nullable=False),
        pa.field(PARENT_SPAN_ID, pa.string()),
        pa.field(SERVICE, pa.string(), nullable=False),
        pa.field(OPERATION, pa.string(), nullable=False),
        pa.field(INSTANCE, pa.string()),
        pa.field(KIND, pa.string(), nullable=False),
        pa.field(START_NS, pa.int64(), nullable=False),
        pa.field(END_NS, pa.int64(), nullable=False),
        pa.field(STATUS, pa.string(), nullable=False),
        pa.field(FOLLOWS_FROM, pa.bool_(), nullable=False),
        pa.field(ATTRIBUTES, pa.list_(ATTRIBUTE_TYPE)),
        pa.field(STATUS_MESSAGE, pa.string()),
        pa.field(EVENTS, pa.list_(EVENT_TYPE)),
        pa.field(LINKS, pa.list_(LINK_TYPE)),
    ]
)
SPAN_COLUMNS = tuple(SPAN_SCHEMA.names)
#: :data:`SPAN_SCHEMA` without :data:`LATER_SPAN_COLUMNS`: the columns of a store part written
#: before events, links and status messages were kept, and of span generators that make none
#: (:func:`with_later_columns` completes such a table).
PRE_EVENTS_SPAN_SCHEMA = pa.schema([f for f in SPAN_SCHEMA if f.name not in LATER_SPAN_COLUMNS])
#: Columns holding nested values (lists of structs): never dictionary-encoded, carried as JSON
#: text where a step cannot carry nested Arrow columns (the Dask shuffle).
NESTED_SPAN_COLUMNS = (ATTRIBUTES, EVENTS, LINKS)

#: String columns whose values repeat across many spans. A span store reads them
#: dictionary-encoded (:data:`DICTIONARY_SPAN_SCHEMA`): the same values in a fraction of the
#: memory (the TrainTicket day: 26.5 instead of 65 MB of Arrow). The trace assembly and the
#: trace table accept both forms; :func:`plain_spans` turns one into the other.
DICTIONARY_COLUMNS = (TRACE_ID, SERVICE, OPERATION, INSTANCE, KIND, STATUS)
DICTIONARY_SPAN_SCHEMA = pa.schema(
    [pa.field(f.name, pa.dictionary(pa.int32(), f.type), f.nullable) if f.name in DICTIONARY_COLUMNS else f
     for f in SPAN_SCHEMA]
)

# Log records (OpenTelemetry's log data model), beside the spans: readers of log formats produce
# them in LOG_SCHEMA, the span store keeps them in a second table partitioned like the spans.
#: Log record: when the event happened, Unix epoch ns (OTLP ``timeUnixNano``, else its
#: ``observedTimeUnixNano``).
TIME_NS = "time_ns"
#: Log record: OpenTelemetry severity number, 1-24 (TRACE 1-4, DEBUG 5-8, INFO 9-12, WARN 13-16,
#: ERROR 17-20, FATAL 21-24); 0 when unknown (Int32).
SEVERITY_NUMBER = "severity_number"
#: Log record: the severity as the source wrote it (``"ERROR"``, ``"warning"``), null when none.
SEVERITY_TEXT = "severity_text"
#: Log record: the message text (a structured body as its JSON text).
BODY = "body"
#: Log record: the id of its log template (the body's constant text, variables masked; Int64, null
#: until templated; :mod:`tracesleuth.io.log_templates`).
TEMPLATE_ID = "template_id"
#: Severity numbers at which each level begins (OpenTelemetry logs data model, "Field:
#: SeverityNumber"); a record is an error from :data:`SEVERITY_ERROR` on.
SEVERITY_LEVELS = {"TRACE": 1, "DEBUG": 5, "INFO": 9, "WARN": 13, "ERROR": 17, "FATAL": 21}
SEVERITY_ERROR = SEVERITY_LEVELS["ERROR"]

LOG_SCHEMA = pa.schema(
    [
        pa.field(TIME_NS, pa.int64(), nullable=False),
        pa.field(TRACE_ID, pa.string()),
        pa.field(SPAN_ID, pa.string()),
        pa.field(SERVICE, pa.string(), nullable=False),
        pa.field(INSTANCE, pa.string()),
        pa.field(SEVERITY_NUMBER, pa.int32(), nullable=False),
        pa.field(SEVERITY_TEXT, pa.string()),
        pa.field(BODY, pa.string()),
        pa.field(ATTRIBUTES, pa.list_(ATTRIBUTE_TYPE)),
        pa.field(TEMPLATE_ID, pa.int64()),
    ]
)
LOG_COLUMNS = tuple(LOG_SCHEMA.names)


def empty_logs() -> pa.Table:
    """Return an empty log-record table in :data:`LOG_SCHEMA`."""
    return LOG_SCHEMA.empty_table()


#: Columns of the rejected-records report (one row per rejected record).
REJECT_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("record", pa.int64(), nullable=False),
        pa.field("field", pa.string()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("spans", pa.int64(), nullable=False),
        pa.field("excerpt", pa.string()),
    ]
)

# Semantic-convention attribute keys the readers look at.
ATTR_SERVICE_NAME = "service.name"
ATTR_SERVICE_VERSION = "service.version"
ATTR_SERVICE_INSTANCE_ID = "service.instance.id"
ATTR_HOST_NAME = "host.name"
ATTR_K8S_POD_NAME = "k8s.pod.name"
ATTR_NET_HOST_IP = "net.host.ip"
#: The span event that records an exception, and its attributes (OpenTelemetry semantic
#: conventions, "Semantic Conventions for Exceptions on Spans").
EXCEPTION_EVENT = "exception"
ATTR_EXCEPTION_TYPE = "exception.type"
ATTR_EXCEPTION_MESSAGE = "exception.message"
ATTR_EXCEPTION_STACKTRACE = "exception.stacktrace"
ATTR_EXCEPTION_ESCAPED = "exception.escaped"
#: Link attribute naming the OpenTracing reference a link was made from (``child_of`` or
#: ``follows_from``), as OpenTelemetry's Jaeger translator sets it.
ATTR_OPENTRACING_REF_TYPE = "opentracing.ref_type"
#: Resource attributes that name the instance, in order of preference.
INSTANCE_ATTRIBUTES = (ATTR_K8S_POD_NAME, ATTR_SERVICE_INSTANCE_ID, ATTR_HOST_NAME, ATTR_NET_HOST_IP)

# Trace-table columns (see "Trace-table columns" above).
#: Operation key ``"service:operation"`` of a span (call view; :func:`tracesleuth.model.table.operation_keys`).
OPERATION_KEY = "operation_key"
#: Request latency: the entry span's duration, ns (Int64).
LATENCY_NS = "latency_ns"
#: Canonical call-structure string of a request (no timing).
SIGNATURE = "signature"
#: Some span of the request (table) or the span itself (call view) failed: its status is
#: ``error``, or it has an :data:`EXCEPTION_EVENT` event (an exception recorded on a span whose
#: status was left unset or ok is a failure all the same: OpenTelemetry's instrumentations record
#: the exception and set the status separately, and a handled exception may leave it unset).
ERROR = "error"
#: Call view: the ``exception.type`` (:data:`ATTR_EXCEPTION_TYPE`) of the span's first
#: :data:`EXCEPTION_EVENT` event (String; null when the span has none, or its first one names no
#: type).
EXCEPTION_TYPE = "exception_type"
#: The request's trace has orphan spans or several roots.
INCOMPLETE = "incomplete"
#: Exclusive (self) time, ns: per call in the call view, ``exclusive_ns[K]`` summed per request.
EXCLUSIVE_NS = "exclusive_ns"
#: Number of calls of an operation in a request (``calls[K]``).
CALLS = "calls"
#: Prefixes of the per-operation and per-attribute columns of the trace table.
EXCLUSIVE_PREFIX = EXCLUSIVE_NS + "["
CALLS_PREFIX = CALLS + "["
INSTANCE_PREFIX = INSTANCE + "["
ATTRIBUTE_PREFIX = "attr["
NUMERIC_ATTRIBUTE_PREFIX = "num["
#: Call view: row of the call's request in the trace table (Int64).
REQUEST = "request"
#: Call view: depth below the request's entry span (0 for the entry span; Int32).
DEPTH = "depth"
#: Call view: span start minus the request's entry span start, ns (Int64).
START_OFFSET_NS = "start_offset_ns"
#: Call view: operation key of the span's parent in the request (null for the entry span).
CALLER_KEY = "caller_key"
#: Call view: service of the server span a client span calls (null when not a call to a server).
SERVER_SERVICE = "server_service"
#: Call view: client span duration not covered by the server span it calls, ns (network and
#: queueing time; null when not a call to a server).
GAP_NS = "gap_ns"


def exclusive_column(key: str) -> str:
    """Trace-table column of the summed exclusive time (Int64 ns) of operation ``key``."""
    return f"{EXCLUSIVE_PREFIX}{key}]"


def calls_column(key: str) -> str:
    """Trace-table column of the number of calls (Int32) of operation ``key``."""
    return f"{CALLS_PREFIX}{key}]"


def instance_column(key: str) -> str:
    """Trace-table column of the instance (String) that served operation ``key``'s first call."""
    return f"{INSTANCE_PREFIX}{key}]"


def attribute_column(key: str) -> str:
    """Trace-table column of the categorical entry-span attribute ``key`` (String)."""
    return f"{ATTRIBUTE_PREFIX}{key}]"


def numeric_attribute_column(key: str) -> str:
    """Trace-table column of the numeric entry-span attribute ``key`` (Int64 or Float64)."""
    return f"{NUMERIC_ATTRIBUTE_PREFIX}{key}]"


def column_key(column: str) -> str:
    """The operation or attribute key inside a column name: ``"exclusive_ns[a:b]"`` -> ``"a:b"``."""
    return column[column.index("[") + 1:-1] if column.endswith("]") and "[" in column else column


TRACE_ID_HEX_CHARS = 32
SPAN_ID_HEX_CHARS = 16


def hex_digits(ids: pa.Array, width: int) -> np.ndarray | None:
    """The digits of ids written in the canonical form: exactly ``width`` lower-case hexadecimal
    digits (:data:`TRACE_ID_HEX_CHARS`, :data:`SPAN_ID_HEX_CHARS`), read from the Arrow buffers.

    Parameters
    ----------
    ids : pyarrow.Array of string or large_string, shape (n,)
    width : int

    Returns
    -------
    ndarray of uint8, shape (n * width,), or None
        Each id's digit values (0-15), most significant first; a null id gives ``width`` zeros.
        None when some non-null value is not in the canonical form (or ``ids`` is not text).
    """
    if not (pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
        return None
    n = len(ids)
    if n == 0:
        return np.zeros(0, np.uint8)
    if ids.null_count:
        ids = pc.fill_null(ids, "0" * width)
    offset_type = np.int64 if pa.types.is_large_string(ids.type) else np.int32
    offsets = np.frombuffer(ids.buffers()[1], offset_type)[ids.offset:ids.offset + n + 1]
    if offsets[-1] - offsets[0] != width * n or (np.diff(offsets) != width).any():
        return None
    digits = np.subtract(np.frombuffer(ids.buffers()[2], np.uint8)[offsets[0]:offsets[-1]], 48,
                         dtype=np.uint8)  # '0' -> 0
    letters = np.subtract(digits, 49, dtype=np.uint8)  # 'a' -> 0 (uint8 arithmetic wraps around)
    if np.count_nonzero(digits <= 9) + np.count_nonzero(letters <= 5) != len(digits):
        return None
    letters += np.uint8(10)
    return np.minimum(digits, letters, out=digits)


def empty_spans() -> pa.Table:
    """Return an empty span table in :data:`SPAN_SCHEMA`."""
    return SPAN_SCHEMA.empty_table()


def with_later_columns(spans: pa.Table) -> pa.Table:
    """``spans`` with the :data:`LATER_SPAN_COLUMNS` it lacks added as nulls, in schema order.

    A span store part (or a collector WAL record) written before events, links and status
    messages were kept has every other column of :data:`SPAN_SCHEMA`; read with this, it reads
    as if written now, its spans without events, links or status message. A table that has
    them all is returned as it is.

    Examples
    --------
    >>> old = empty_spans().drop_columns(list(LATER_SPAN_COLUMNS))
    >>> with_later_columns(old).schema.equals(SPAN_SCHEMA)
    True
    """
    missing = [c for c in LATER_SPAN_COLUMNS if c not in spans.column_names]
    if not missing:
        return spans
    for name in missing:
        spans = spans.append_column(SPAN_SCHEMA.field(name), pa.nulls(spans.num_rows, SPAN_SCHEMA.field(name).type))
    order = [c for c in SPAN_COLUMNS if c in spans.column_names]
    return spans.select(order + [c for c in spans.column_names if c not in SPAN_COLUMNS])


def plain_spans(spans: pa.Table) -> pa.Table:
    """``spans`` with its dictionary-encoded columns (:data:`DICTIONARY_COLUMNS`) as plain strings."""
    if all(not pa.types.is_dictionary(t) for t in spans.schema.types):
        return spans
    return spans.cast(pa.schema([pa.field(f.name, f.type.value_type, f.nullable) if pa.types.is_dictionary(f.type)
                                 else f for f in spans.schema], metadata=spans.schema.metadata))
