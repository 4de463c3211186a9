"""Column accumulators shared by every reader, and the rejected-records log.

A reader parses its format and hands each span to :class:`SpanBatchBuilder.add` (plain Python
values, no per-span objects survive); the builder turns them into Arrow record batches in
:data:`~tracesleuth.schema.SPAN_SCHEMA`. Checks that apply to every format (ids present and
hexadecimal, timestamps integral, end not before start) run once per batch, vectorized, in
:meth:`SpanBatchBuilder.flush`, and every failing span goes to the :class:`RejectLog` with its
record number and the field at fault. So ``spans in = spans stored + spans rejected`` holds by
construction. The same pass applies OpenTelemetry's span limits (:class:`SpanLimits`): what it cuts
is kept, cut, and reported as a warning.

A span's events and links (:meth:`SpanBatchBuilder.add_event`, :meth:`SpanBatchBuilder.add_link`)
and its status message are accumulated the same way, as offsets and flat columns, and checked in
the same pass: an event whose time is not an integer timestamp, or a link whose ids are not ids,
is dropped with a warning naming the record and the field (its span is kept); link ids are
normalised like span ids. A batch without events or links pays only for two columns of empty
lists.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Iterable, Iterator, Mapping

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema as S
from ..errors import ParameterError


@dataclass(frozen=True)
class _OtelLimits:
    """What :class:`SpanLimits` and :class:`~tracesleuth.io.LogLimits` share: every bound is a
    positive int or None (:func:`check_limits`, at construction), and the OpenTelemetry SDK's
    environment variables can set some of them (:meth:`from_environment`)."""

    #: Bound -> the OpenTelemetry environment variables that set it, by precedence.
    _variables: ClassVar[Mapping[str, tuple]] = {}
    #: What the limits bound, as a bad variable's error names it (``"span"``).
    _what: ClassVar[str] = ""

    def __post_init__(self) -> None:
        check_limits(self)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None):
        """The limits the OpenTelemetry SDK's environment variables set, the defaults elsewhere.

        What an operator set for the SDK that produced the records applies to reading them. A
        bound takes the first of its variables that is set (the class's Notes list them, in the
        specification's precedence: the model-specific variable first); an empty variable is
        unset, and a bound without a variable keeps its default.

        Parameters
        ----------
        environ : mapping of str to str, optional
            Default :data:`os.environ`.

        Raises
        ------
        ParameterError
            A variable that is not a positive integer, named with its value.
        """
        return cls(**limits_from_environment(cls._variables, cls._what, environ))


@dataclass(frozen=True)
class SpanLimits(_OtelLimits):
    """Bounds on what one span may hold, after OpenTelemetry's span limits.

    A span over a bound is kept, cut to the bound, and reported as a warning (a
    :class:`RejectLog` entry with ``spans=0`` naming the file, the record, the field and what was
    kept). ``None`` means no bound. The defaults are the OpenTelemetry SDK's
    (``opentelemetry.sdk.trace.SpanLimits``: 128 attributes, 128 events, 128 links) where the
    SDK sets one, and otherwise bounds chosen so that no single span can blow up a store or a
    report (see Notes).

    Parameters
    ----------
    max_attributes : int or None, default=128
        Attributes kept per span, the first ones in the order the reader gives them (the span's
        own, then its resource's); the SDK's ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`` default.
    max_attribute_value_chars : int or None, default=4096
        Characters (Unicode code points, as Python's ``len``) kept of a string attribute value;
        structured values (arrays, maps, bytes) are stored as text and bounded alike. The SDK's
        ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` is unbounded by default; 4096 keeps a whole URL,
        SQL statement or short stack trace and bounds a pathological value.
    max_service_chars : int or None, default=256
        Characters kept of a service name (``service.name``). Service names are identifiers
        (Kubernetes derives them from DNS names of at most 253 characters); a longer one is
        input damage, and it would be repeated in every operation key and report cell.
    max_operation_chars : int or None, default=1024
        Characters kept of an operation (span) name. OpenTelemetry asks for low-cardinality
        names (``GET /users/{id}``), but Zipkin and Jaeger instrumentations often put a whole
        route or SQL statement there; 1024 keeps those whole and bounds a report cell.
    max_instance_chars : int or None, default=256
        Characters kept of an instance name (a pod, host or instance id: at most 253 in DNS).
    max_events : int or None, default=128
        Events kept per span, the first ones in the order the format lists them; the SDK's
        ``OTEL_SPAN_EVENT_COUNT_LIMIT`` default.
    max_links : int or None, default=128
        Links kept per span, the first ones; the SDK's ``OTEL_SPAN_LINK_COUNT_LIMIT`` default.
    max_event_attributes : int or None, default=128
        Attributes kept per event, the first ones; the SDK's
        ``OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT`` default. String values of event attributes are
        bounded by ``max_attribute_value_chars`` like the span's (an exception's stack trace
        longer than that is cut).
    max_link_attributes : int or None, default=128
        Attributes kept per link, the first ones; the SDK's ``OTEL_LINK_ATTRIBUTE_COUNT_LIMIT``
        default.

    Raises
    ------
    ParameterError
        When a bound is not a positive int or None.

    Notes
    -----
    The limits apply in :func:`validate_spans`, which every reader and the collector go through.
    Checking that a batch is within them costs a few passes over Arrow offsets (a string's byte
    length bounds its length in characters), so a clean batch pays almost nothing; the cut itself
    is vectorized (``pyarrow.compute.utf8_slice_codeunits`` and a list re-slice).

    :meth:`from_environment` reads ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`` (else
    ``OTEL_ATTRIBUTE_COUNT_LIMIT``) for ``max_attributes``, ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``
    (else ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``) for ``max_attribute_value_chars``,
    ``OTEL_SPAN_EVENT_COUNT_LIMIT`` for ``max_events``, ``OTEL_SPAN_LINK_COUNT_LIMIT`` for
    ``max_links``, ``OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT`` (else ``OTEL_ATTRIBUTE_COUNT_LIMIT``) for
    ``max_event_attributes`` and ``OTEL_LINK_ATTRIBUTE_COUNT_LIMIT`` (else
    ``OTEL_ATTRIBUTE_COUNT_LIMIT``) for ``max_link_attributes``. Name bounds have no
    OpenTelemetry variable and keep their defaults. :func:`tracesleuth.io.read_spans`,
    ``tracesleuth ingest`` and the collector use these limits unless given others.

    References
    ----------
    OpenTelemetry specification, "Span Limits" and "Attribute Limits",
    https://opentelemetry.io/docs/specs/otel/trace/sdk/#span-limits

    Examples
    --------
    >>> SpanLimits().max_attributes
    128
    >>> SpanLimits(max_operation_chars=None, max_attributes=32).max_operation_chars is None
    True
    >>> SpanLimits.from_environment({"OTEL_ATTRIBUTE_COUNT_LIMIT": "32"}).max_attributes
    32
    """

    max_attributes: int | None = 128
    max_attribute_value_chars: int | None = 4096
    max_service_chars: int | None = 256
    max_operation_chars: int | None = 1024
    max_instance_chars: int | None = 256
    max_events: int | None = 128
    max_links: int | None = 128
    max_event_attributes: int | None = 128
    max_link_attributes: int | None = 128

    _variables = {
        "max_attributes": ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
        "max_attribute_value_chars": ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
        "max_events": ("OTEL_SPAN_EVENT_COUNT_LIMIT",),
        "max_links": ("OTEL_SPAN_LINK_COUNT_LIMIT",),
        "max_event_attributes": ("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
        "max_link_attributes": ("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
    }
    _what = "span"


def check_limits(limits) -> None:
    """Raise :class:`ParameterError` unless every field of the limits dataclass ``limits`` is a
    positive int or None (shared by :class:`SpanLimits` and the log reader's ``LogLimits``)."""
    for f in fields(limits):
        value = getattr(limits, f.name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ParameterError(f"The {f.name!r} parameter of {type(limits).__name__} must be an int in the range "
                                 f"[1, inf) or None. Got {value!r} instead.")


def limits_from_environment(variables: Mapping[str, tuple], what: str,
                            environ: Mapping[str, str] | None = None) -> dict:
    """``{bound: value}`` set by OpenTelemetry environment variables: for each bound, the first
    of its ``variables`` (by precedence) that is set and not empty.

    Raises
    ------
    ParameterError
        A variable that is not a positive integer, named with its value and ``what`` limit it sets.
    """
    environ = os.environ if environ is None else environ
    values = {}
    for name, names in variables.items():
        variable = next((v for v in names if environ.get(v, "").strip()), None)
        if variable is None:
            continue
        text = environ[variable].strip()
        if not (text.isascii() and text.isdigit() and int(text) >= 1):
            raise ParameterError(f"The environment variable {variable} must be a positive integer "
                                 f"(the {name!r} {what} limit). Got {environ[variable]!r} instead.")
        values[name] = int(text)
    return values


#: The limits applied when none are given (:class:`SpanLimits`' defaults).
DEFAULT_SPAN_LIMITS = SpanLimits()
#: Longest attribute string value kept whole, in characters, by default; longer values are cut and
#: reported (:attr:`SpanLimits.max_attribute_value_chars`).
MAX_ATTRIBUTE_CHARS = DEFAULT_SPAN_LIMITS.max_attribute_value_chars
#: Spans per Arrow record batch produced by a reader.
BATCH_SPANS = 131_072
_EXCERPT_CHARS = 160
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def batches(builder, steps: Iterable) -> Iterator[pa.RecordBatch]:
    """A reader's batches: run ``steps``, each adding a record (or a few) to ``builder``; a batch
    whenever the builder is full, then what is left (:func:`last_batch`).

    Parameters
    ----------
    builder : SpanBatchBuilder or LogBatchBuilder
    steps : iterable
        Iterated for its side effects on ``builder`` (a generator that yields after each record
        it adds or rejects); its items are not used.

    Yields
    ------
    pyarrow.RecordBatch
        What ``builder.flush()`` returns: spans, or log records.
    """
    for _ in steps:
        if builder.full():
            yield builder.flush()
    yield from last_batch(builder)


def last_batch(builder) -> Iterator[pa.RecordBatch]:
    """The records still waiting in ``builder`` at the end of a file, as one batch (none when
    nothing waits)."""
    batch = builder.flush()
    if batch is not None:
        yield batch

_KIND_ALIASES = {
    "server": "server", "client": "client", "producer": "producer", "consumer": "consumer",
    "internal": "internal", "unspecified": "unspecified", "": "unspecified",
    "span_kind_server": "server", "span_kind_client": "client", "span_kind_producer": "producer",
    "span_kind_consumer": "consumer", "span_kind_internal": "internal",
    "span_kind_unspecified": "unspecified",
    "0": "unspecified", "1": "internal", "2": "server", "3": "client", "4": "producer", "5": "consumer",
}


def normalize_kind(value: Any) -> str:
    """Map a span kind as any format spells it (``"SERVER"``, ``2``, ``"SPAN_KIND_CLIENT"``,
    ``None``) to one of :data:`~tracesleuth.schema.SPAN_KINDS`; unknown spellings give
    ``"unspecified"``."""
    if value is None:
        return "unspecified"
    return _KIND_ALIASES.get(str(value).strip().lower(), "unspecified")


@dataclass
class RejectLog:
    """Rejected records and warnings, accumulated over a whole read.

    Each entry names the source file, the 1-based record number (line of an NDJSON or CSV file,
    element of a JSON array, message of a protobuf stream; 0 for the file as a whole), the field
    at fault, the reason, how many spans were lost with it (0 for a warning where the span was
    kept, for example a truncated attribute value) and an excerpt of the raw record.
    """

    rows: list[tuple] = field(default_factory=list)
    spans_rejected: int = 0
    #: Spans accepted by the readers, keyed by source.
    spans_read: Counter = field(default_factory=Counter)

    def add(self, source: str, record: int, reason: str, *, field: str | None = None,
            spans: int = 1, excerpt: Any = None) -> None:
        """Record one rejected record (``spans`` spans lost) or, with ``spans=0``, one warning."""
        if excerpt is not None and not isinstance(excerpt, str):
            if isinstance(excerpt, (bytes, bytearray, memoryview)):
                excerpt = bytes(excerpt[:_EXCERPT_CHARS * 4]).decode("utf-8", "replace")
            else:
                try:
                    excerpt = orjson.dumps(excerpt, default=str).decode()
                except TypeError:
                    excerpt = repr(excerpt)
        if excerpt is not None and len(excerpt) > _EXCERPT_CHARS:
            excerpt = excerpt[:_EXCERPT_CHARS] + "…"
        self.rows.append((source, int(record), field, reason, int(spans), excerpt))
        self.spans_rejected += int(spans)

    def merge(self, other: "RejectLog") -> None:
        """Append another log's entries and counts (a file read on its own)."""
        self.rows.extend(other.rows)
        self.spans_rejected += other.spans_rejected
        self.spans_read.update(other.spans_read)

    @property
    def n_rejected_records(self) -> int:
        """Records that lost at least one span."""
        return sum(1 for r in self.rows if r[4] > 0)

    @property
    def n_warnings(self) -> int:
        """Entries where nothing was lost (the span was kept, with the stated change)."""
        return sum(1 for r in self.rows if r[4] == 0)

    def to_arrow(self) -> pa.Table:
        """The log as a table in :data:`~tracesleuth.schema.REJECT_SCHEMA`."""
        cols = list(zip(*self.rows)) if self.rows else [[] for _ in S.REJECT_SCHEMA.names]
        return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, S.REJECT_SCHEMA)],
                                    schema=S.REJECT_SCHEMA)

    def reasons(self) -> list[tuple[str, int, int]]:
        """``(reason, records, spans)`` per distinct reason, in :func:`rejects_by_reason`'s order."""
        return [(r["reason"], r["records"], r["spans"]) for r in rejects_by_reason(self.to_arrow())]


def rejects_by_reason(rejects: pa.Table | None) -> list[dict]:
    """Rejected records and warnings grouped by reason: the one grouping every summary shows.

    Parameters
    ----------
    rejects : pyarrow.Table or None
        Rows in :data:`~tracesleuth.schema.REJECT_SCHEMA` (:meth:`RejectLog.to_arrow`, a span
        store's ``read_rejects()``, :attr:`~tracesleuth.io.SpanReadResult.rejects`).

    Returns
    -------
    list of dict
        One ``{"reason": str, "records": int, "spans": int}`` per distinct reason, where
        ``records`` counts the rows and ``spans`` the spans lost with them (0 for a warning);
        most spans lost first, then most records, then by reason. Empty for no rejects.

    Examples
    --------
    >>> log = RejectLog()
    >>> log.add("a.json", 3, "bad trace id", spans=2)
    >>> log.add("a.json", 9, "value cut", spans=0)
    >>> log.add("b.json", 1, "bad trace id")
    >>> rejects_by_reason(log.to_arrow())
    [{'reason': 'bad trace id', 'records': 2, 'spans': 3}, {'reason': 'value cut', 'records': 1, 'spans': 0}]
    """
    if rejects is None or rejects.num_rows == 0:
        return []
    grouped = rejects.group_by("reason").aggregate([("reason", "count"), ("spans", "sum")])
    rows = [{"reason": r, "records": int(n), "spans": int(s or 0)}
            for r, n, s in zip(grouped.column("reason").to_pylist(), grouped.column("reason_count").to_pylist(),
                               grouped.column("spans_sum").to_pylist())]
    return sorted(rows, key=lambda d: (-d["spans"], -d["records"], d["reason"]))


def _typed(value: Any) -> tuple | None:
    """``(str, int, float, bool)`` of an attribute value, exactly one of them set; None for None.

    Integers beyond int64 and structured values (lists, dicts: JSON text; bytes: hexadecimal)
    are kept as text.
    """
    if isinstance(value, bool):
        return None, None, None, value
    if isinstance(value, int):
        return (None, value, None, None) if _INT64_MIN <= value <= _INT64_MAX else (str(value), None, None, None)
    if isinstance(value, float):
        return None, None, value, None
    if isinstance(value, str):
        return value, None, None, None
    if value is None:
        return None
    return (_json_text(value) if not isinstance(value, (bytes, bytearray)) else value.hex()), None, None, None


def _items(attributes: Any) -> Iterable[tuple[str, Any]]:
    """``(key, value)`` pairs of a mapping or an iterable of pairs (None: none)."""
    if attributes is None:
        return ()
    return attributes.items() if isinstance(attributes, Mapping) else attributes


class _EntryAttributes:
    """Typed attributes of the events (or links) being accumulated: flat columns, and the offset
    where each entry's attributes end (as :class:`SpanBatchBuilder` keeps a span's)."""

    __slots__ = ("offsets", "key", "str", "int", "float", "bool")

    def __init__(self) -> None:
        self.offsets: list[int] = [0]
        self.key: list[str] = []
        self.str: list[str | None] = []
        self.int: list[int | None] = []
        self.float: list[float | None] = []
        self.bool: list[bool | None] = []

    def close(self, items: Iterable[tuple[str, Any]], builder: "SpanBatchBuilder", record: int, field: str,
              max_count: int | None) -> None:
        """Append one entry's attributes; a string value over the builder's value bound is cut
        here (reported with ``field``), before it is copied again, when the entry keeps it."""
        limit = builder._max_chars
        kept = 0
        for key, value in items:
            typed = _typed(value)
            if typed is None:
                continue
            s, i, f, b = typed
            if limit is not None and s is not None and len(s) > limit and (max_count is None or kept < max_count):
                builder.log.add(builder.source, record, _cut_reason("attribute value", limit), field=f"{field}.{key}",
                                spans=0, excerpt=_cut_excerpt(s))
                s = s[:limit]
            self.key.append(str(key))
            self.str.append(s)
            self.int.append(i)
            self.float.append(f)
            self.bool.append(b)
            kept += 1
        self.offsets.append(len(self.key))

    def truncate(self, entries: int) -> None:
        """Keep the attributes of the first ``entries`` entries only."""
        del self.offsets[entries + 1:]
        end = self.offsets[-1]
        for col in (self.key, self.str, self.int, self.float, self.bool):
            del col[end:]

    def to_arrow(self) -> pa.ListArray:
        """One attribute list per entry (:data:`~tracesleuth.schema.ATTRIBUTE_TYPE`)."""
        return _attribute_lists(self.offsets, self.key, self.str, self.int, self.float, self.bool)


def attribute_lists(rows: list[list[tuple[str, Any]]]) -> pa.ListArray:
    """One typed attribute list (:data:`~tracesleuth.schema.ATTRIBUTE_TYPE`) per row of
    ``(key, value)`` pairs (values as :func:`_typed` keeps them; a None value is left out)."""
    offsets, key, str_, int_, float_, bool_ = [0], [], [], [], [], []
    for row in rows:
        for k, value in row:
            typed = _typed(value)
            if typed is None:
                continue
            key.append(str(k))
            for column, v in zip((str_, int_, float_, bool_), typed):
                column.append(v)
        offsets.append(len(key))
    return _attribute_lists(offsets, key, str_, int_, float_, bool_)


def _attribute_lists(offsets, key, str_, int_, float_, bool_) -> pa.ListArray:
    return pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.StructArray.from_arrays(
            [pa.array(key, pa.string()), pa.array(str_, pa.string()), pa.array(int_, pa.int64()),
             pa.array(float_, pa.float64()), pa.array(bool_, pa.bool_())],
            fields=list(S.ATTRIBUTE_TYPE)))


class SpanBatchBuilder:
    """Accumulates spans of one source as columns and emits validated Arrow record batches.

    Parameters
    ----------
    source : str
        The file the spans come from (named in every reject).
    log : RejectLog
        Where rejected spans and warnings go.
    batch_spans : int, default=BATCH_SPANS
        :meth:`full` turns true at this many spans.
    limits : SpanLimits, optional
        Bounds applied to every span (default :data:`DEFAULT_SPAN_LIMITS`); an attribute value
        over the bound is cut as it is added, the rest in :func:`validate_spans`.

    Notes
    -----
    Timestamps (of spans and of events) may be given as ``int`` or as decimal strings (OTLP
    JSON encodes 64-bit integers as strings); they are parsed in bulk at :meth:`flush`. Ids (of
    spans and of links) may be given in any case and without leading zeros; they are normalised
    to lower-case, zero-padded hexadecimal (a padded id is reported, see :func:`validate_spans`).
    A span's attributes, events and links are added before the span itself (:meth:`add`), and
    kept as offsets into flat columns: no per-span Python object survives the call.
    """

    def __init__(self, source: str, log: RejectLog, *, batch_spans: int = BATCH_SPANS,
                 limits: SpanLimits | None = None):
        self.source, self.log, self.batch_spans = source, log, batch_spans
        self.limits = DEFAULT_SPAN_LIMITS if limits is None else limits
        self._max_chars = self.limits.max_attribute_value_chars
        self._max_attributes = self.limits.max_attributes
        self._reset()

    def _reset(self) -> None:
        self.record: list[int] = []
        self.trace_id: list[Any] = []
        self.span_id: list[Any] = []
        self.parent_span_id: list[Any] = []
        self.service: list[Any] = []
        self.operation: list[Any] = []
        self.instance: list[Any] = []
        self.kind: list[str] = []
        self.start_ns: list[Any] = []
        self.end_ns: list[Any] = []
        self.status: list[str] = []
        self.follows_from: list[bool] = []
        self.status_message: list[str | None] = []
        self.attr_offsets: list[int] = [0]
        self.attr_key: list[str] = []
        self.attr_str: list[str | None] = []
        self.attr_int: list[int | None] = []
        self.attr_float: list[float | None] = []
        self.attr_bool: list[bool | None] = []
        #: Where each span's events end in the event columns (as ``attr_offsets``).
        self.event_offsets: list[int] = [0]
        self.event_time: list[Any] = []
        self.event_name: list[Any] = []
        self.event_attributes = _EntryAttributes()
        #: Where each span's links end in the link columns.
        self.link_offsets: list[int] = [0]
        self.link_trace_id: list[Any] = []
        self.link_span_id: list[Any] = []
        self.link_attributes = _EntryAttributes()

    def __len__(self) -> int:
        return len(self.trace_id)

    def full(self) -> bool:
        """True when a batch's worth of spans is waiting for :meth:`flush`."""
        return len(self.trace_id) >= self.batch_spans

    def add_attribute(self, key: str, value: Any, record: int) -> None:
        """Append one typed attribute to the span being added (call before :meth:`add`)."""
        typed = _typed(value)
        if typed is None:
            return
        s, i, f, b = typed
        limit = self._max_chars
        # cut here, before the value is copied again (an attribute beyond the count limit is
        # dropped at flush: its value is not reported)
        if limit is not None and s is not None and len(s) > limit and (
                self._max_attributes is None or len(self.attr_key) - self.attr_offsets[-1] < self._max_attributes):
            self.log.add(self.source, record, _cut_reason("attribute value", limit), field=f"attributes.{key}",
                         spans=0, excerpt=_cut_excerpt(s))
            s = s[:limit]
        self.attr_key.append(str(key))
        self.attr_str.append(s)
        self.attr_int.append(i)
        self.attr_float.append(f)
        self.attr_bool.append(b)

    def add_event(self, time_ns: Any, name: Any, attributes: Any, record: int) -> None:
        """Append one event to the span being added (call before :meth:`add`, like
        :meth:`add_attribute`).

        Parameters
        ----------
        time_ns : int or str
            Unix epoch nanoseconds (decimal text accepted); checked at :meth:`flush`: an event
            whose time is not an integer timestamp is dropped and reported, its span kept.
        name : str
        attributes : mapping or iterable of (str, object), or None
            Typed as span attributes are (:meth:`add_attribute`).
        record : int
            The span's record (named in a warning).
        """
        self.event_time.append(time_ns)
        self.event_name.append(name)
        self.event_attributes.close(_items(attributes), self, record, f"{S.EVENTS}.{S.ATTRIBUTES}",
                                    self.limits.max_event_attributes)

    def add_link(self, trace_id: Any, span_id: Any, attributes: Any, record: int) -> None:
        """Append one link to the span being added (call before :meth:`add`).

        Parameters
        ----------
        trace_id, span_id : str
            Hexadecimal ids, normalised at :meth:`flush` like span ids; a link whose ids are not
            ids is dropped and reported, its span kept.
        attributes : mapping or iterable of (str, object), or None
        record : int
        """
        self.link_trace_id.append(trace_id)
        self.link_span_id.append(span_id)
        self.link_attributes.close(_items(attributes), self, record, f"{S.LINKS}.{S.ATTRIBUTES}",
                                   self.limits.max_link_attributes)

    def discard_pending_attributes(self) -> None:
        """Drop the attributes, events and links added since the last span (its span is being
        rejected)."""
        start = self.attr_offsets[-1]
        for col in (self.attr_key, self.attr_str, self.attr_int, self.attr_float, self.attr_bool):
            del col[start:]
        events, links = self.event_offsets[-1], self.link_offsets[-1]
        if len(self.event_time) > events:
            del self.event_time[events:], self.event_name[events:]
            self.event_attributes.truncate(events)
        if len(self.link_trace_id) > links:
            del self.link_trace_id[links:], self.link_span_id[links:]
            self.link_attributes.truncate(links)

    def add_attributes(self, items: Iterable[tuple[str, Any]], record: int) -> None:
        """Append several typed attributes to the span being added."""
        for k, v in items:
            self.add_attribute(k, v, record)

    def add(self, record: int, trace_id: Any, span_id: Any, parent_span_id: Any, service: Any,
            operation: Any, instance: Any, kind: str, start_ns: Any, end_ns: Any,
            status: str = "unset", follows_from: bool = False, status_message: str | None = None) -> None:
        """Append one span; attributes, events and links added since the previous span belong to it.

        ``kind`` must already be one of :data:`~tracesleuth.schema.SPAN_KINDS` (see
        :func:`normalize_kind`) and ``status`` one of :data:`~tracesleuth.schema.STATUS_CODES`;
        an empty ``status_message`` is none (null).
        """
        self.record.append(record)
        self.trace_id.append(trace_id)
        self.span_id.append(span_id)
        self.parent_span_id.append(parent_span_id or None)
        self.service.append(service)
        self.operation.append(operation)
        self.instance.append(instance or None)
        self.kind.append(kind)
        self.start_ns.append(start_ns)
        self.end_ns.append(end_ns)
        self.status.append(status)
        self.follows_from.append(follows_from)
        self.status_message.append(status_message or None)
        self.attr_offsets.append(len(self.attr_key))
        self.event_offsets.append(len(self.event_time))
        self.link_offsets.append(len(self.link_trace_id))

    # -- flushing -------------------------------------------------------------------------
    def flush(self) -> pa.RecordBatch | None:
        """Validate the waiting spans, log the rejected ones, and return the rest as a batch
        (``None`` when nothing is waiting)."""
        n = len(self.trace_id)
        if n == 0:
            return None
        if len(self.attr_offsets) != n + 1 or len(self.event_offsets) != n + 1 \
                or len(self.link_offsets) != n + 1:  # pragma: no cover - reader bug, not input
            raise AssertionError("attributes, events or links added after the last span")
        attrs = self.attributes_array()
        nested = {"events": self._events(), "links": self._links()}
        fast = self._arrow_raw()
        if fast is not None:  # every field of the plain type: the vectorized path of an Arrow table
            self._reset()
            return validate_spans(fast, attrs, self.source, self.log, limits=self.limits, **nested)
        raw = pl.DataFrame(
            {
                "_record": pl.Series(self.record, dtype=pl.Int64),
                "_raw_trace": _to_text(self.trace_id),
                "_raw_span": _to_text(self.span_id),
                "_raw_parent": _to_text(self.parent_span_id),
                S.SERVICE: _to_text(self.service),
                S.OPERATION: _to_text(self.operation),
                S.INSTANCE: _to_text(self.instance),
                S.KIND: pl.Series(self.kind, dtype=pl.String),
                "_start": _to_series(self.start_ns),
                "_end": _to_series(self.end_ns),
                S.STATUS: pl.Series(self.status, dtype=pl.String),
                S.FOLLOWS_FROM: pl.Series(self.follows_from, dtype=pl.Boolean),
                S.STATUS_MESSAGE: _to_text(self.status_message),
            }
        )
        self._reset()
        return validate_spans(raw, attrs, self.source, self.log, limits=self.limits, **nested)

    def _events(self) -> pa.ListArray | None:
        """The waiting spans' events in :data:`RAW_EVENT_TYPE` (None when no span has one)."""
        if not self.event_time:
            return None
        values = pa.StructArray.from_arrays(
            [_raw_values(self.event_time, pa.int64()), pa.array([_text(v) for v in self.event_name], pa.string()),
             self.event_attributes.to_arrow()], names=[f.name for f in S.EVENT_TYPE])
        return pa.ListArray.from_arrays(pa.array(self.event_offsets, pa.int32()), values)

    def _links(self) -> pa.ListArray | None:
        """The waiting spans' links in :data:`RAW_LINK_TYPE` (None when no span has one)."""
        if not self.link_trace_id:
            return None
        values = pa.StructArray.from_arrays(
            [_raw_values(self.link_trace_id, pa.string()), _raw_values(self.link_span_id, pa.string()),
             self.link_attributes.to_arrow()], names=[f.name for f in S.LINK_TYPE])
        return pa.ListArray.from_arrays(pa.array(self.link_offsets, pa.int32()), values)

    def attributes_array(self) -> pa.ListArray:
        """The attribute lists added so far, one per ``attr_offsets`` interval, as an Arrow list
        array of :data:`~tracesleuth.schema.ATTRIBUTE_TYPE`."""
        return pa.ListArray.from_arrays(
            pa.array(self.attr_offsets, pa.int32()),
            pa.StructArray.from_arrays(
                [pa.array(self.attr_key, pa.string()), pa.array(self.attr_str, pa.string()),
                 pa.array(self.attr_int, pa.int64()), pa.array(self.attr_float, pa.float64()),
                 pa.array(self.attr_bool, pa.bool_())],
                fields=list(S.ATTRIBUTE_TYPE),
            ),
        )

    def _arrow_raw(self) -> pa.Table | None:
        """The waiting spans as an Arrow table of :data:`RAW_COLUMNS` when every value has its
        plain Python type (``str`` ids and names, ``int`` times within int64), else None (then
        polars converts them, as it does any other input). Arrow infers the types, so that a
        float or a byte string is never coerced on the way."""
        columns = {"_record": self.record, "_raw_trace": self.trace_id, "_raw_span": self.span_id,
                   "_raw_parent": self.parent_span_id, S.SERVICE: self.service, S.OPERATION: self.operation,
                   S.INSTANCE: self.instance, S.KIND: self.kind, "_start": self.start_ns, "_end": self.end_ns,
                   S.STATUS: self.status, S.FOLLOWS_FROM: self.follows_from, S.STATUS_MESSAGE: self.status_message}
        arrays = {}
        for name, values in columns.items():
            try:
                array = pa.array(values)
            except (TypeError, ValueError, OverflowError, pa.ArrowException):
                return None
            expected = _ARROW_RAW_TYPES.get(name, pa.string())
            if array.type != expected and not (pa.types.is_null(array.type) and name in _NULLABLE_RAW):
                return None
            arrays[name] = array.cast(expected)
        return pa.table(arrays)


def _text(value: Any) -> str:
    """A name as text (None: ``""``)."""
    return "" if value is None else value if value.__class__ is str else str(value)


def _raw_values(values: list, plain: pa.DataType) -> pa.Array:
    """``values`` as an Arrow array of type ``plain`` when every one is of its plain Python type
    (``int`` within int64, ``str``), else as text (None stays null) for :func:`validate_spans` to
    parse by the rules of span times and ids."""
    kind = int if pa.types.is_integer(plain) else str
    if all(v.__class__ is kind for v in values):
        try:
            return pa.array(values, plain)
        except (OverflowError, pa.ArrowException):
            pass
    return pa.array([None if v is None else v if v.__class__ is str else
                     None if v.__class__ is bool else str(v) for v in values], pa.string())


_ARROW_RAW_TYPES = {"_record": pa.int64(), "_start": pa.int64(), "_end": pa.int64(), S.FOLLOWS_FROM: pa.bool_()}
_NULLABLE_RAW = ("_raw_parent", S.INSTANCE, S.STATUS_MESSAGE)

#: Columns of the raw frame :func:`validate_spans` takes (ids and times not yet normalised);
#: :data:`~tracesleuth.schema.STATUS_MESSAGE` may be there too (else it is null).
RAW_COLUMNS = ("_record", "_raw_trace", "_raw_span", "_raw_parent", S.SERVICE, S.OPERATION, S.INSTANCE,
               S.KIND, "_start", "_end", S.STATUS, S.FOLLOWS_FROM)
#: Raw events, as :func:`validate_spans` takes them: :data:`~tracesleuth.schema.EVENT_TYPE`
#: with ``time_ns`` as an integer or as text, not yet checked.
RAW_EVENT_TYPE = pa.struct([pa.field("time_ns", pa.string()), pa.field("name", pa.string()),
                            pa.field(S.ATTRIBUTES, pa.list_(S.ATTRIBUTE_TYPE))])
#: Raw links: :data:`~tracesleuth.schema.LINK_TYPE` with ids as text, not yet normalised.
RAW_LINK_TYPE = pa.struct([pa.field(S.TRACE_ID, pa.string()), pa.field(S.SPAN_ID, pa.string()),
                           pa.field(S.ATTRIBUTES, pa.list_(S.ATTRIBUTE_TYPE))])


def validate_spans(raw: pl.DataFrame | pl.LazyFrame | pa.Table, attrs: pa.Array | None, source: str, log: RejectLog,
                   *, limits: SpanLimits | None = None, events: pa.Array | None = None,
                   links: pa.Array | None = None) -> pa.RecordBatch:
    """Normalise and check a raw span frame, log the failing spans, return the rest as a batch.

    Parameters
    ----------
    raw : polars.DataFrame or LazyFrame, or pyarrow.Table
        Columns :data:`RAW_COLUMNS`: ``_record`` (1-based record number), ids as text, times as
        integers or decimal text in nanoseconds, the other canonical columns as they are (an
        Arrow table's text columns may be dictionary-encoded); a ``status_message`` column is
        optional (else null).
    attrs : pyarrow.ListArray or None
        One attribute list per row (:data:`~tracesleuth.schema.ATTRIBUTE_TYPE`); None for none.
    events : pyarrow.ListArray or None
        One event list per row: :data:`~tracesleuth.schema.EVENT_TYPE`, or :data:`RAW_EVENT_TYPE`
        (``time_ns`` as text, any integer type or its canonical int64); None for none.
    links : pyarrow.ListArray or None
        One link list per row: :data:`~tracesleuth.schema.LINK_TYPE` or :data:`RAW_LINK_TYPE`
        (ids not yet normalised); None for none.
    source : str
        File named in the rejects.
    log : RejectLog
        Receives one entry per rejected span, and the warnings (padded ids, cuts).
    limits : SpanLimits, optional
        Bounds on names, attributes, events and links (default :data:`DEFAULT_SPAN_LIMITS`).

    Returns
    -------
    pyarrow.RecordBatch
        The accepted spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`; a span without events
        or links has empty lists.

    Notes
    -----
    A span is rejected, with the first failing check as its reason, when its trace or span id is
    missing, all zero, not hexadecimal or longer than the schema's width (32 and 16 digits), its
    parent id is given but not such an id, a time is missing, not an integer or negative (OTLP
    times are unsigned 64-bit nanoseconds, Zipkin's and Jaeger's unsigned microseconds since the
    epoch), or it ends before it starts.

    Kept with a warning (``spans=0``):

    - ids shorter than the width, left-padded with zeros: one warning per batch and id field
      with the count (Zipkin allows this for 64-bit ids). A 16-digit trace id is a 64-bit
      (Zipkin, Jaeger) id, documented as padded to 128 bits, and is not reported;
    - names and attributes over ``limits``, cut (:class:`SpanLimits`): one warning per record
      and field, saying what was kept, with the original length in the excerpt; so are events
      and links beyond ``limits.max_events`` and ``limits.max_links``, and event and link
      attributes beyond their count and length bounds;
    - an event whose time is missing, not an integer or negative (the rules of span times), and
      a link whose trace or span id is not an id (the rules of span ids): dropped, one warning
      per record and field; link ids shorter than their width are padded as span ids are, with
      one warning per batch and field.
    """
    limits = DEFAULT_SPAN_LIMITS if limits is None else limits
    if isinstance(raw, pa.Table):
        columns = _as_is(raw, attrs)
        if columns is not None:
            records = raw.column("_record").to_numpy()
            return _finish(columns, events, links, records, source, log, limits)
        raw = pl.from_arrow(S.plain_spans(raw))
    # Columns already canonical (the common case: lower-case ids of full width, int64 or decimal-text
    # times) are taken as they are; the general normalisation runs only on a column that needs it.
    if isinstance(raw, pl.LazyFrame):
        raw = raw.collect()
    canonical = _canonical_columns(raw)
    lf = raw.lazy()
    # (raw column, canonical column, width, description) of the ids
    ids = (("_raw_trace", S.TRACE_ID, S.TRACE_ID_HEX_CHARS, "trace id"),
           ("_raw_span", S.SPAN_ID, S.SPAN_ID_HEX_CHARS, "span id"),
           ("_raw_parent", S.PARENT_SPAN_ID, S.SPAN_ID_HEX_CHARS, "parent span id"))
    lf = lf.with_columns(
        (pl.col("_raw_trace") if canonical["_raw_trace"] else _hex_id("_raw_trace", S.TRACE_ID_HEX_CHARS))
        .alias(S.TRACE_ID),
        (pl.col("_raw_span") if canonical["_raw_span"] else _hex_id("_raw_span", S.SPAN_ID_HEX_CHARS))
        .alias(S.SPAN_ID),
        # an all-zero parent id means "no parent" (Jaeger, W3C); all-zero trace/span ids are invalid
        (pl.col("_raw_parent") if canonical["_raw_parent"] else
         pl.when(pl.col("_raw_parent").str.contains("^0+$")).then(None)
         .otherwise(_hex_id("_raw_parent", S.SPAN_ID_HEX_CHARS))).alias(S.PARENT_SPAN_ID),
        _time(raw, "_start", canonical["_start"]).alias(S.START_NS),
        _time(raw, "_end", canonical["_end"]).alias(S.END_NS),
        pl.col(S.SERVICE).fill_null("").str.strip_chars().replace("", "unknown_service"),
        pl.col(S.OPERATION).fill_null(""),
    )
    # ids that were padded to their width: a canonical column has none
    padded = {raw_col: _padded(raw_col, id_field, width) for raw_col, id_field, width, _ in ids
              if not canonical[raw_col]}
    lf = lf.with_columns(**{f"_padded{raw_col}": expr for raw_col, expr in padded.items()})
    parent_given = (pl.col("_raw_parent").is_not_null() & (pl.col("_raw_parent").str.strip_chars() != "")
                    & ~pl.col("_raw_parent").str.contains("^0+$"))
    id_checks = [  # a canonical id column has nothing to fail
        ("_raw_trace", S.TRACE_ID, pl.col(S.TRACE_ID).is_null(),
         "missing, all zero, or not a hexadecimal id of at most 32 digits"),
        ("_raw_span", S.SPAN_ID, pl.col(S.SPAN_ID).is_null(),
         "missing, all zero, or not a hexadecimal id of at most 16 digits"),
        ("_raw_parent", S.PARENT_SPAN_ID, pl.col(S.PARENT_SPAN_ID).is_null() & parent_given,
         "not a hexadecimal id of at most 16 digits"),
    ]
    checks = [(field, cond, msg) for raw_col, field, cond, msg in id_checks if not canonical[raw_col]] + [
        (S.START_NS, pl.col(S.START_NS).is_null(), "missing or not an integer timestamp"),
        (S.END_NS, pl.col(S.END_NS).is_null(), "missing or not an integer timestamp"),
        (S.START_NS, pl.col(S.START_NS) < 0, _NEGATIVE_TIME),
        (S.END_NS, pl.col(S.END_NS) < 0, _NEGATIVE_TIME),
        (S.END_NS, pl.col(S.END_NS) < pl.col(S.START_NS), "negative duration (end before start)"),
    ]
    reason = pl.lit(None, dtype=pl.String)
    fieldname = pl.lit(None, dtype=pl.String)
    for fname, cond, msg in reversed(checks):  # the first failing check names the reason
        reason = pl.when(cond).then(pl.lit(msg)).otherwise(reason)
        fieldname = pl.when(cond).then(pl.lit(fname)).otherwise(fieldname)
    df = lf.with_columns(_reason=reason, _field=fieldname).collect()
    n = df.height
    if attrs is None:
        attrs = _empty_lists(n, S.ATTRIBUTE_TYPE)
    ok = df["_reason"].is_null()
    if not ok.all():
        for rec, fld, why, tid, sid, st, en in df.filter(~ok).select(
            "_record", "_field", "_reason", "_raw_trace", "_raw_span", "_start", "_end"
        ).iter_rows():
            log.add(source, rec, why, field=fld, excerpt=f"trace_id={tid!r} span_id={sid!r} start={st!r} end={en!r}")
        df = df.filter(ok)
        keep = pa.array(ok.to_arrow())
        attrs = attrs.filter(keep)
        events = None if events is None else events.filter(keep)
        links = None if links is None else links.filter(keep)
    for raw_col, id_field, width, what in ids:
        if raw_col in padded:
            _warn_padded(df, raw_col, id_field, width, what, source, log)
    if S.STATUS_MESSAGE not in df.columns:
        df = df.with_columns(pl.lit(None, pl.String).alias(S.STATUS_MESSAGE))
    cols = df.select([c for c in S.SPAN_COLUMNS if c not in S.NESTED_SPAN_COLUMNS]).to_arrow()
    columns = {c: cols.column(c).combine_chunks().cast(S.SPAN_SCHEMA.field(c).type) for c in cols.column_names}
    columns[S.ATTRIBUTES] = _combined(attrs).cast(S.SPAN_SCHEMA.field(S.ATTRIBUTES).type)
    return _finish(columns, events, links, df["_record"].to_numpy(), source, log, limits)


def _finish(columns: dict, events, links, records: np.ndarray, source: str, log: RejectLog,
            limits: SpanLimits) -> pa.RecordBatch:
    """The accepted spans' batch from their columns (every one but the events and links, in
    their schema types) and their raw events and links, checked and within ``limits``."""
    columns[S.EVENTS] = _entry_lists(events, records, source, log, S.EVENT_TYPE, _checked_events)
    columns[S.LINKS] = _entry_lists(links, records, source, log, S.LINK_TYPE, _checked_links)
    batch = pa.RecordBatch.from_arrays([columns[f.name] for f in S.SPAN_SCHEMA], schema=S.SPAN_SCHEMA)
    batch = _apply_limits(batch, records, source, log, limits)
    log.spans_read[source] += batch.num_rows
    return batch


def _combined(array):
    """A chunked array as one array (an array as it is)."""
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _empty_lists(n: int, value_type: pa.DataType, mask: pa.Array | None = None) -> pa.ListArray:
    """``n`` empty lists of ``value_type`` (null where ``mask`` is set): offsets only."""
    return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), pa.array([], value_type), mask=mask)


def _list_parts(lists: pa.ListArray) -> tuple[np.ndarray, pa.Array, pa.Array | None]:
    """``(offsets, values, validity mask)`` of a list array: int64 offsets from 0 into ``values``
    (the values of its lists only), and the mask of its null lists (None when none is)."""
    offsets = _offsets(lists).astype(np.int64)
    values = lists.values.slice(offsets[0], offsets[-1] - offsets[0])
    return offsets - offsets[0], values, (lists.is_null() if lists.null_count else None)


def _entry_records(offsets: np.ndarray, records: np.ndarray) -> np.ndarray:
    """The record of each entry (event, link) of lists with ``offsets``."""
    return np.repeat(records, np.diff(offsets))


def _drop_entries(offsets: np.ndarray, values: pa.Array, drop: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Lists without the entries where ``drop`` is set: new offsets and values."""
    owner = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    kept = np.bincount(owner[~drop], minlength=len(offsets) - 1)
    return np.concatenate([[0], np.cumsum(kept)]), values.filter(pa.array(~drop))


def _warn_dropped(log: RejectLog, source: str, records: np.ndarray, at: np.ndarray, field: str, reason: str,
                  excerpts: list) -> None:
    """One warning per record among the entries ``at`` (dropped, their spans kept)."""
    _warn_records(log, source, records, at, field, reason, [f"{field}={v!r}" for v in excerpts])


def _entry_lists(lists, records: np.ndarray, source: str, log: RejectLog, value_type: pa.DataType,
                 check) -> pa.ListArray:
    """Each span's events (or links) in ``value_type``, their entries checked by ``check``
    (:func:`_checked_events`, :func:`_checked_links`); empty lists for none."""
    n = len(records)
    if lists is None:
        return _empty_lists(n, value_type)
    offsets, values, mask = _list_parts(_combined(lists))
    if len(values) == 0:
        return _empty_lists(n, value_type, mask)
    offsets, children = check(offsets, values, records, source, log)
    entries = pa.StructArray.from_arrays(children, fields=list(value_type))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), entries, mask=mask)


def _checked_events(offsets: np.ndarray, values: pa.StructArray, records: np.ndarray, source: str, log: RejectLog
                    ) -> tuple[np.ndarray, list]:
    """Raw events (``offsets`` from 0 into ``values``) with their times parsed by the rules of
    span times; an event whose time fails them dropped and reported (its span kept). Returns the
    offsets and the children of :data:`~tracesleuth.schema.EVENT_TYPE`."""
    raw_times = values.field("time_ns")
    times = _times_ns(raw_times)
    bad = np.asarray(times.is_null().to_numpy(zero_copy_only=False))
    negative = np.asarray(pc.fill_null(pc.less(times, 0), False).to_numpy(zero_copy_only=False))
    if bad.any() or negative.any():
        owners = _entry_records(offsets, records)
        for drop, reason in ((bad, "missing or not an integer timestamp"), (negative, _NEGATIVE_TIME)):
            at = np.flatnonzero(drop)
            if len(at):
                _warn_dropped(log, source, owners, at, f"{S.EVENTS}.time_ns", f"event dropped: its time is {reason}"
                              if drop is bad else f"event dropped: {reason}", raw_times.take(pa.array(at)).to_pylist())
        offsets, values = _drop_entries(offsets, values, bad | negative)
        times = times.filter(pa.array(~(bad | negative)))
    names = values.field("name")
    names = names.cast(pa.string()) if names.null_count == 0 else pc.fill_null(names.cast(pa.string()), "")
    return offsets, [times.cast(pa.int64()), names, values.field(S.ATTRIBUTES).cast(pa.list_(S.ATTRIBUTE_TYPE))]


def _times_ns(times: pa.Array) -> pa.Array:
    """Int64 nanoseconds of raw times (null where missing or not an integer timestamp); the rules
    of span times (:func:`_int64`): int64 and decimal text as is, integral floats, the rest null."""
    if times.type == pa.int64():
        return times
    if pa.types.is_signed_integer(times.type):
        return times.cast(pa.int64())
    if (pa.types.is_string(times.type) or pa.types.is_large_string(times.type)) and not times.null_count \
            and pc.all(pc.ascii_is_decimal(times)).as_py():
        try:
            return pc.cast(times, pa.int64())
        except pa.ArrowInvalid:  # beyond int64: the general rule says so
            pass
    frame = pl.DataFrame({"t": pl.from_arrow(times) if len(times) else pl.Series("t", [], pl.String)})
    return frame.select(_int64("t")).to_series().to_arrow()


def _checked_links(offsets: np.ndarray, values: pa.StructArray, records: np.ndarray, source: str, log: RejectLog
                   ) -> tuple[np.ndarray, list]:
    """Raw links with their ids normalised by the rules of span ids; a link whose ids fail them
    dropped and reported (its span kept). Returns the offsets and the children of
    :data:`~tracesleuth.schema.LINK_TYPE`."""
    raw_trace, raw_span = values.field(S.TRACE_ID).cast(pa.string()), values.field(S.SPAN_ID).cast(pa.string())
    canonical = all(not ids.null_count and S.hex_digits(ids, width) is not None
                    and not pc.any(pc.equal(ids, "0" * width)).as_py()
                    for ids, width in ((raw_trace, S.TRACE_ID_HEX_CHARS), (raw_span, S.SPAN_ID_HEX_CHARS)))
    trace, span = raw_trace, raw_span
    if not canonical:
        owners = _entry_records(offsets, records)
        fields = ((f"{S.LINKS}.{S.TRACE_ID}", "_raw_trace", S.TRACE_ID_HEX_CHARS, "link trace id"),
                  (f"{S.LINKS}.{S.SPAN_ID}", "_raw_span", S.SPAN_ID_HEX_CHARS, "link span id"))
        df = pl.DataFrame({"_record": owners, "_raw_trace": pl.from_arrow(raw_trace),
                           "_raw_span": pl.from_arrow(raw_span)}).with_columns(
            *[_hex_id(raw_col, width).alias(field) for field, raw_col, width, _ in fields])
        df = df.with_columns(**{f"_padded{raw_col}": _padded(raw_col, field, width)
                                for field, raw_col, width, _ in fields})
        drop = np.zeros(len(values), dtype=bool)
        for field, raw_col, width, what in fields:
            bad = df[field].is_null().to_numpy()
            at = np.flatnonzero(bad & ~drop)  # one reason per link: the first failing id
            if len(at):
                _warn_dropped(log, source, owners, at, field, f"link dropped: its {what[5:]} is missing, all zero, or "
                              f"not a hexadecimal id of at most {width} digits", df[raw_col].gather(at).to_list())
            drop |= bad
        kept = df.filter(pl.Series(~drop)) if drop.any() else df
        for field, raw_col, width, what in fields:
            _warn_padded(kept, raw_col, field, width, what, source, log)
        trace, span = (df[field].to_arrow().cast(pa.string()) for field, *_ in fields)
        if drop.any():
            keep = pa.array(~drop)
            offsets, values = _drop_entries(offsets, values, drop)
            trace, span = trace.filter(keep), span.filter(keep)
    return offsets, [trace, span, values.field(S.ATTRIBUTES).cast(pa.list_(S.ATTRIBUTE_TYPE))]


_NEGATIVE_TIME = "negative timestamp (times are unsigned nanoseconds since the Unix epoch)"


def _padded(raw_col: str, id_field: str, width: int) -> pl.Expr:
    """True where the id was accepted and left-padded with zeros to ``width`` digits (a 16-digit,
    64-bit trace id is not counted: the schema documents that widening)."""
    digits = pl.col(raw_col).str.strip_chars().str.len_bytes()
    short = digits < width
    if width == S.TRACE_ID_HEX_CHARS:
        short = short & (digits != S.SPAN_ID_HEX_CHARS)
    return (pl.col(id_field).is_not_null() & short).fill_null(False)


def _warn_padded(df: pl.DataFrame, raw_col: str, field: str, width: int, what: str, source: str,
                 log: RejectLog) -> None:
    """One warning for the accepted ids of ``raw_col`` that were padded: their count, the first
    record, the first few ids as given."""
    flag = df[f"_padded{raw_col}"]
    count = int(flag.sum())
    if not count:
        return
    first = df.filter(flag).select("_record", raw_col).head(3).rows()
    log.add(source, first[0][0], f"{count} {what}(s) shorter than {width} hexadecimal digits"
            + (" (and not a 64-bit id of 16)" if width == S.TRACE_ID_HEX_CHARS else "")
            + " left-padded with zeros", field=field, spans=0,
            excerpt="; ".join(f"record {r}: {v!r}" for r, v in first) + ("; …" if count > len(first) else ""))


def _cut_reason(what: str, limit: int) -> str:
    return f"{what} cut to its first {limit} characters"


def _cut_excerpt(value: str) -> str:
    return f"{len(value)} characters: {value[:_EXCERPT_CHARS]}"


def _offsets(values: pa.Array) -> np.ndarray:
    """The offsets of a string or list array (``len(values) + 1`` of them), read in place."""
    dtype = np.dtype(np.int64 if pa.types.is_large_string(values.type) or pa.types.is_large_list(values.type)
                     else np.int32)
    return np.frombuffer(values.buffers()[1], dtype, count=len(values) + 1, offset=values.offset * dtype.itemsize)


def _longer_than(values: pa.Array, limit: int | None) -> np.ndarray | None:
    """Mask of the strings of ``values`` longer than ``limit`` characters, None when there is none.

    The common answer, none, comes from the offsets alone: a string holds at most as many
    characters as bytes, so nothing is over when no string is longer than ``limit`` bytes.
    """
    if limit is None or len(values) == 0:
        return None
    offsets = _offsets(values)
    if offsets[-1] - offsets[0] <= limit or (offsets[1:] - offsets[:-1]).max() <= limit:
        return None
    over = pc.fill_null(pc.greater(pc.utf8_length(values), limit), False).to_numpy(zero_copy_only=False)
    return over if over.any() else None


def _warn_records(log: RejectLog, source: str, records: np.ndarray, rows: np.ndarray, field: str, reason: str,
                  excerpts: list[str]) -> None:
    """One warning per record among ``rows`` (the first row of each record gives the excerpt)."""
    _, first = np.unique(records[rows], return_index=True)
    for i in first:
        log.add(source, int(records[rows[i]]), reason, field=field, spans=0, excerpt=excerpts[i])


def _apply_limits(batch: pa.RecordBatch, records: np.ndarray, source: str, log: RejectLog,
                  limits: SpanLimits) -> pa.RecordBatch:
    """``batch`` with the names and attributes over ``limits`` cut, each cut reported.

    Parameters
    ----------
    batch : pyarrow.RecordBatch
        Accepted spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`.
    records : ndarray of int64, shape (batch.num_rows,)
        Each span's record number.
    source : str
        File named in the warnings.
    log : RejectLog
        Receives the warnings (``spans=0``).
    limits : SpanLimits

    Returns
    -------
    pyarrow.RecordBatch
        ``batch`` itself when nothing is over a limit (decided from Arrow offsets).
    """
    columns = {}
    for name, limit, what in ((S.SERVICE, limits.max_service_chars, "service name"),
                              (S.OPERATION, limits.max_operation_chars, "operation name"),
                              (S.INSTANCE, limits.max_instance_chars, "instance name")):
        cut = cut_strings(batch.column(name), limit, what, name, records, source, log)
        if cut is not None:
            columns[name] = cut
    attrs = _limit_attributes(batch.column(S.ATTRIBUTES), records, source, log, limits.max_attributes,
                              limits.max_attribute_value_chars, S.ATTRIBUTES)
    if attrs is not None:
        columns[S.ATTRIBUTES] = attrs
    for name, max_n, max_attributes, what in ((S.EVENTS, limits.max_events, limits.max_event_attributes, "event"),
                                              (S.LINKS, limits.max_links, limits.max_link_attributes, "link")):
        entries = _limit_entries(batch.column(name), records, source, log, max_n, max_attributes,
                                 limits.max_attribute_value_chars, name, what)
        if entries is not None:
            columns[name] = entries
    if not columns:
        return batch
    return pa.RecordBatch.from_arrays([columns.get(f.name, batch.column(f.name)) for f in batch.schema],
                                      schema=batch.schema)


def cut_strings(values: pa.Array, limit: int | None, what: str, field: str, records: np.ndarray, source: str,
                log: RejectLog) -> pa.Array | None:
    """``values`` with the strings longer than ``limit`` characters cut to it, one warning per
    record naming ``field`` (``what`` in the reason, the original length in the excerpt); None
    when none is over (decided from the Arrow offsets)."""
    over = _longer_than(values, limit)
    if over is None:
        return None
    rows = np.flatnonzero(over)
    _warn_records(log, source, records, rows, field, _cut_reason(what, limit),
                  [_cut_excerpt(v) for v in values.take(pa.array(rows)).to_pylist()])
    return pc.if_else(pa.array(over), pc.utf8_slice_codeunits(values, 0, limit), values)


def _limit_attributes(attrs: pa.ListArray, records: np.ndarray, source: str, log: RejectLog,
                      max_n: int | None, max_chars: int | None, field: str, what: str = "attribute"
                      ) -> pa.ListArray | None:
    """The attribute lists cut to ``max_n`` entries and their string values to ``max_chars``
    characters, each cut reported (``field``: the column, ``what``: whose attribute lists they
    are, for the message); None when none is over."""
    counted = _counted(attrs, records, source, log, max_n, field, what)
    if counted is None:
        return None
    offsets, values, mask, changed = counted
    text = values.field("str")
    over = _longer_than(text, max_chars)
    if over is not None:
        limit = max_chars
        at = np.flatnonzero(over)
        span = np.searchsorted(offsets, at, side="right") - 1
        keys = values.field("key").take(pa.array(at)).to_pylist()
        originals = text.take(pa.array(at)).to_pylist()
        seen = set()
        for j, i in enumerate(span):  # one warning per record and key, as the builder gives
            if (records[i], keys[j]) not in seen:
                seen.add((records[i], keys[j]))
                log.add(source, int(records[i]), _cut_reason("attribute value", limit), field=f"{field}.{keys[j]}",
                        spans=0, excerpt=_cut_excerpt(originals[j]))
        children = [pc.if_else(pa.array(over), pc.utf8_slice_codeunits(text, 0, limit), text) if f.name == "str"
                    else values.field(f.name) for f in S.ATTRIBUTE_TYPE]
        values = pa.StructArray.from_arrays(children, fields=list(S.ATTRIBUTE_TYPE),
                                            mask=values.is_null() if values.null_count else None)
        changed = True
    if not changed:
        return None
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, mask=mask)


def _counted(lists: pa.ListArray, records: np.ndarray, source: str, log: RejectLog, max_n: int | None, field: str,
             what: str) -> tuple | None:
    """``(offsets, values, mask, cut)`` of lists cut to ``max_n`` entries (:func:`_cut_lists`;
    ``cut``: whether one was), or None when no list has an entry."""
    if len(lists) == 0:
        return None
    offsets, values, mask = _list_parts(lists)
    if len(values) == 0:
        return None
    cut = _cut_lists(offsets, values, records, source, log, max_n, field, what)
    return (offsets, values, mask, False) if cut is None else (*cut, mask, True)


def _cut_lists(offsets: np.ndarray, values: pa.Array, records: np.ndarray, source: str, log: RejectLog,
               max_n: int | None, field: str, what: str) -> tuple[np.ndarray, pa.Array] | None:
    """Lists (``offsets`` from 0 into ``values``) cut to their first ``max_n`` entries, one
    warning per record ("``what`` list cut to its first ``max_n``"); None when none is longer."""
    lengths = offsets[1:] - offsets[:-1]
    if max_n is None or len(values) <= max_n or lengths.max() <= max_n:
        return None
    rows = np.flatnonzero(lengths > max_n)
    _warn_records(log, source, records, rows, field, f"{what} list cut to its first {max_n} {what}s",
                  [f"{k} {what}s" for k in lengths[rows]])
    position = np.arange(len(values)) - np.repeat(offsets[:-1], lengths)
    return np.concatenate([[0], np.cumsum(np.minimum(lengths, max_n))]), values.filter(pa.array(position < max_n))


def _limit_entries(lists: pa.ListArray, records: np.ndarray, source: str, log: RejectLog, max_n: int | None,
                   max_attributes: int | None, max_chars: int | None, field: str, what: str) -> pa.ListArray | None:
    """Event (or link) lists cut to ``max_n`` entries, each entry's attributes to
    ``max_attributes`` and their string values to ``max_chars`` characters, each cut reported
    (``field``: the column); None when nothing is over (decided from the offsets when a batch
    has no entries)."""
    counted = _counted(lists, records, source, log, max_n, field, what)
    if counted is None:
        return None
    offsets, values, mask, changed = counted
    attributes = _limit_attributes(values.field(S.ATTRIBUTES), _entry_records(offsets, records), source, log,
                                   max_attributes, max_chars, f"{field}.{S.ATTRIBUTES}", f"{what} attribute")
    if attributes is not None:
        values = pa.StructArray.from_arrays([attributes if f.name == S.ATTRIBUTES else values.field(f.name)
                                             for f in values.type], fields=list(values.type))
        changed = True
    if not changed:
        return None
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, mask=mask)


def _as_is(raw: pa.Table, attrs: pa.Array | None) -> dict | None:
    """The columns (all but the events and links) :func:`validate_spans` returns when it would
    change and reject nothing, read straight from the Arrow columns; None when it would (it then
    runs in full).

    That is: every id in the canonical form (:func:`~tracesleuth.schema.hex_digits`) and not
    all zero, every time a non-negative int64 or ASCII decimal digits within int64, no end before its start,
    every service name non-empty without surrounding whitespace, no operation missing. It is the
    common case for a reader that parses natively, and costs a few vectorized passes instead of a
    round trip through polars.
    """
    def canonical(ids: pa.ChunkedArray, width: int, nullable: bool) -> bool:
        return (nullable or not ids.null_count) and all(
            S.hex_digits(chunk, width) is not None for chunk in ids.chunks) and not pc.any(pc.equal(ids, "0" * width)).as_py()

    def int64(times: pa.ChunkedArray) -> pa.ChunkedArray | None:
        if times.null_count:
            return None
        if pa.types.is_signed_integer(times.type):
            return times.cast(pa.int64())
        if not (pa.types.is_string(times.type) or pa.types.is_large_string(times.type)) \
                or not pc.all(pc.ascii_is_decimal(times)).as_py():
            return None
        try:
            return pc.cast(times, pa.int64())
        except pa.ArrowInvalid:  # beyond int64
            return None

    n = raw.num_rows
    col = raw.column
    if not (canonical(col("_raw_trace"), S.TRACE_ID_HEX_CHARS, False)
            and canonical(col("_raw_span"), S.SPAN_ID_HEX_CHARS, False)
            and canonical(col("_raw_parent"), S.SPAN_ID_HEX_CHARS, True)):
        return None
    start, end = int64(col("_start")), int64(col("_end"))
    # decimal text is never negative; with no end before its start, neither is an end
    if start is None or end is None or (n and (pc.min(start).as_py() < 0 or pc.any(pc.less(end, start)).as_py())):
        return None
    service = col(S.SERVICE)
    names = (pa.chunked_array([c.dictionary for c in service.chunks], service.type.value_type)
             if pa.types.is_dictionary(service.type) else pc.unique(service))
    # str.strip removes every character polars' strip_chars removes (and a few more)
    if service.null_count or not all(v and v == v.strip() for v in names.to_pylist()):
        return None
    if col(S.OPERATION).null_count:
        return None
    columns = {**{c: col(c) for c in raw.column_names}, "_start": start, "_end": end}
    renamed = {S.TRACE_ID: "_raw_trace", S.SPAN_ID: "_raw_span", S.PARENT_SPAN_ID: "_raw_parent",
               S.START_NS: "_start", S.END_NS: "_end"}
    if S.STATUS_MESSAGE not in columns:
        columns[S.STATUS_MESSAGE] = pa.chunked_array([pa.nulls(n, pa.string())])
    out = {f.name: columns[renamed.get(f.name, f.name)].cast(f.type).combine_chunks()
           for f in S.SPAN_SCHEMA if f.name not in S.NESTED_SPAN_COLUMNS}
    out[S.ATTRIBUTES] = _empty_lists(n, S.ATTRIBUTE_TYPE) if attrs is None else \
        _combined(attrs).cast(S.SPAN_SCHEMA.field(S.ATTRIBUTES).type)
    return out


def _json_text(value: Any) -> str:
    """Compact JSON text of a structured attribute value; ``orjson`` refuses integers beyond 64
    bits (an OTLP ``intValue`` string can hold one), the standard library does not."""
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))


def _to_text(values: list) -> pl.Series:
    return pl.Series(values, dtype=pl.String, strict=False)


def _to_series(values: list) -> pl.Series:
    try:
        return pl.Series(values, strict=True)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series([None if v is None else str(v) for v in values], dtype=pl.String)


def _int64(col: str) -> pl.Expr:
    """Integer nanoseconds from an integer, integral float or decimal-text column (else null)."""
    c = pl.col(col)
    as_text = c.cast(pl.String).str.strip_chars()
    as_float = as_text.cast(pl.Float64, strict=False)
    return pl.coalesce(
        as_text.str.to_integer(strict=False),
        pl.when(as_float.is_finite() & (as_float.round() == as_float) & (as_float.abs() < 9.2e18))
        .then(as_float).otherwise(None).cast(pl.Int64, strict=False),
    )


def _canonical_columns(raw: pl.DataFrame) -> dict[str, bool]:
    """Which raw id and time columns need no normalisation: ids all lower-case hexadecimal of
    full width and not all zero (the parent may be null), times int64 or all decimal text that
    parses as int64. One cheap pass; :func:`validate_spans` then skips the general path for those."""
    def is_text(c: str) -> bool:
        return raw.schema[c] == pl.String

    def full_hex(c: str, width: int, nullable: bool) -> pl.Expr:
        col = pl.col(c)
        ok = col.str.contains(f"^[0-9a-f]{{{width}}}$") & (col != "0" * width)
        return (ok | col.is_null()).all() if nullable else (ok.fill_null(False)).all()

    checks = {
        "_raw_trace": full_hex("_raw_trace", S.TRACE_ID_HEX_CHARS, False),
        "_raw_span": full_hex("_raw_span", S.SPAN_ID_HEX_CHARS, False),
        "_raw_parent": full_hex("_raw_parent", S.SPAN_ID_HEX_CHARS, True),
        **{c: (pl.col(c).str.to_integer(strict=False).null_count() == pl.col(c).null_count()) for c in ("_start", "_end")},
    }
    usable = {c: e for c, e in checks.items() if is_text(c)}
    row = raw.select(**usable).row(0, named=True) if raw.height and usable else {}
    out = {c: bool(row.get(c, False)) for c in checks}
    out.update({c: True for c in ("_start", "_end") if raw.schema[c] == pl.Int64})
    return out


def _time(raw: pl.DataFrame, col: str, canonical: bool) -> pl.Expr:
    """Nanoseconds from a raw time column: as is (int64), parsed (decimal text), or in general."""
    if not canonical:
        return _int64(col)
    return pl.col(col) if raw.schema[col] == pl.Int64 else pl.col(col).str.to_integer(strict=False)


def _hex_id(col: str, width: int) -> pl.Expr:
    c = pl.col(col).str.strip_chars().str.to_lowercase()
    n = c.str.len_bytes()
    ok = (n > 0) & (n <= width) & ~c.str.contains("[^0-9a-f]") & c.str.contains("[1-9a-f]")
    return pl.when(ok).then(c.str.zfill(width)).otherwise(None)
