"""What every log-record reader shares: OpenTelemetry's log-record limits, the severity of a level
name, timestamps in the forms loggers write, and the builder that turns records into checked Arrow
batches in :data:`~tracesleuth.schema.LOG_SCHEMA`.

A reader parses its format and hands each record to :meth:`LogBatchBuilder.add` (or, columnar, a
whole frame to :meth:`LogBatchBuilder.validate`); the checks that apply to every format run there,
vectorized, once per batch, and every problem goes to the :class:`~tracesleuth.io.RejectLog` with
file, record and field. A log record is evidence even when parts of it are damaged, so only a
record without a usable time is rejected (it cannot be placed in any window); everything else is
kept and reported:

======================================= ==================================================================
what                                    what happens
======================================= ==================================================================
time missing, not an integer, negative  rejected (``spans=1``: one record lost), field ``time_ns``
trace or span id not a hexadecimal id   kept with that id null (no trace context), one warning per record
of at most 32 (16) digits
no trace id at all (or all zeros)       kept with null ids; one warning per file with the count (these
                                        records join no span)
id shorter than its width               left-padded with zeros, one warning per batch with the count
unknown severity text                   severity number 0 (unknown), text kept; one warning per file and
                                        value with its count
severity number outside 0-24            read from the severity text instead (else 0), one warning per record
body, attribute, service, instance      cut to :class:`LogLimits`, one warning per record and field
over the limits
invalid UTF-8                           replaced by U+FFFD, one warning per record (the readers)
a time without a time zone              read as UTC; one warning per file with the count
======================================= ==================================================================

In the reject table (:data:`~tracesleuth.schema.REJECT_SCHEMA`) the column ``spans`` counts the
*records* lost for logs (0 for a warning), so ``records in = records read + records rejected``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema as S
from ..units import NS_PER_MS, NS_PER_S, NS_PER_US
from ._builder import (BATCH_SPANS, RejectLog, SpanBatchBuilder, _hex_id, _int64, _limit_attributes, _padded,
                       _OtelLimits, _to_series, _to_text, _warn_padded, cut_strings)


__all__ = ["BATCH_RECORDS", "DEFAULT_LOG_LIMITS", "LEVEL_IN_TEXT", "LogBatchBuilder", "LogLimits",
           "NUMERIC_LEVELS", "SEVERITY_BY_NAME", "epoch_ns", "severity_from_text",
           "severity_number", "time_ns"]


@dataclass(frozen=True)
class LogLimits(_OtelLimits):
    """Bounds on what one log record may hold, after OpenTelemetry's log-record limits.

    A record over a bound is kept, cut to the bound, and reported as a warning (a reject entry
    with ``spans=0`` naming the file, the record, the field and the original length). ``None``
    means no bound.

    Parameters
    ----------
    max_attributes : int or None, default=128
        Attributes kept per record, the record's own first, then its resource's; the SDK's
        ``OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT`` default.
    max_attribute_value_chars : int or None, default=4096
        Characters kept of a string (or structured, stored as JSON text) attribute value. The
        SDK's ``OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT`` is unbounded by default; 4096 is the
        span readers' bound (:class:`~tracesleuth.io.SpanLimits`), for the same reason.
    max_body_chars : int or None, default=65536
        Characters kept of a body. OpenTelemetry sets no bound on bodies; a stack trace is a few
        kilobytes, and the container runtimes cut lines at 16 KiB (containerd) or 16 KiB pieces
        (Docker), so 64 Ki characters keeps every real message whole and bounds a pathological
        one (a megabyte body is kept cut, and counted).
    max_service_chars, max_instance_chars : int or None, default=256
        As for spans: identifiers of at most 253 characters in DNS; longer ones are damage.

    Raises
    ------
    ParameterError
        When a bound is not a positive int or None (the check of :class:`SpanLimits`).

    Notes
    -----
    :meth:`from_environment` reads ``OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT`` (else
    ``OTEL_ATTRIBUTE_COUNT_LIMIT``) for ``max_attributes`` and
    ``OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (else ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``)
    for ``max_attribute_value_chars``; the other bounds have no variable.

    References
    ----------
    OpenTelemetry specification, Logs SDK, "LogRecord Limits",
    https://opentelemetry.io/docs/specs/otel/logs/sdk/#logrecord-limits

    Examples
    --------
    >>> LogLimits().max_body_chars
    65536
    >>> LogLimits.from_environment({"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT": "16"}).max_attributes
    16
    """

    max_attributes: int | None = 128
    max_attribute_value_chars: int | None = 4096
    max_body_chars: int | None = 65_536
    max_service_chars: int | None = 256
    max_instance_chars: int | None = 256

    _variables = {
        "max_attributes": ("OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
        "max_attribute_value_chars": ("OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT",
                                      "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
    }
    _what = "log-record"


DEFAULT_LOG_LIMITS = LogLimits()
#: Log records per Arrow record batch produced by a reader (as many as spans per span batch).
BATCH_RECORDS = BATCH_SPANS


# -- severity -----------------------------------------------------------------------------------
def _otel_names() -> dict[str, int]:
    """OpenTelemetry's short names: TRACE, TRACE2..TRACE4, DEBUG, ..., FATAL4 -> 1..24."""
    out = {}
    for level, first in S.SEVERITY_LEVELS.items():
        out[level] = first
        for k in range(2, 5):
            out[f"{level}{k}"] = first + k - 1
    return out


#: Severity number of each level name, upper case. OpenTelemetry's short names (logs data model,
#: "Field: SeverityNumber"), then the example mappings of the data model's Appendix B for syslog
#: (RFC 5424 names and keywords), Windows Event Log, Log4j/Logback, Zap, java.util.logging and
#: .NET, and the names of Python's logging, Serilog (also its 3-letter forms), Bunyan/pino and
#: Go's slog. Where two sources disagree the number of the more common spelling wins: ``CRITICAL``
#: is Python's and .NET's highest level (FATAL, 21, as the OpenTelemetry Python and .NET SDKs
#: map it), not syslog's Critical (ERROR2; syslog's own keyword ``CRIT`` keeps 18).
SEVERITY_BY_NAME: dict[str, int] = {
    **_otel_names(),
    # syslog (RFC 5424) names and keywords
    "EMERGENCY": 21, "EMERG": 21, "PANIC": 19, "ALERT": 19, "CRIT": 18, "ERR": 17, "NOTICE": 10,
    "INFORMATIONAL": 9, "WARNING": 13,
    # Windows Event Log, .NET, Serilog
    "VERBOSE": 5, "INFORMATION": 9, "CRITICAL": 21, "VRB": 5, "DBG": 5, "INF": 9, "WRN": 13, "FTL": 21,
    # Zap
    "DPANIC": 18,
    # java.util.logging
    "FINEST": 1, "FINER": 5, "FINE": 6, "CONFIG": 7, "SEVERE": 17,
    # Python logging
    "NOTSET": 0,
}
#: Numeric levels of loggers that write numbers, by convention: Python's ``levelno`` and
#: Bunyan/pino's ``level`` (10 trace ... 60 fatal), mapped as the OpenTelemetry Python SDK and the
#: pino/Bunyan OpenTelemetry instrumentations map them.
NUMERIC_LEVELS: dict[str, dict[int, int]] = {
    "python": {0: 0, 10: 5, 20: 9, 30: 13, 40: 17, 50: 21},
    "bunyan": {10: 1, 20: 5, 30: 9, 40: 13, 50: 17, 60: 21},
}
#: Highest OpenTelemetry severity number (FATAL4).
MAX_SEVERITY = 24


def severity_number(value: Any) -> int | None:
    """The OpenTelemetry severity number (1-24, 0 unspecified) of a severity as a source wrote it.

    Parameters
    ----------
    value : str or int
        A level name in any case (``"WARN"``, ``"warning"``, ``"Information"``, ``"SEVERE"``,
        ``"FINE"``, ``"DPANIC"``; :data:`SEVERITY_BY_NAME`), an OpenTelemetry enum name
        (``"SEVERITY_NUMBER_ERROR"``), or an OpenTelemetry severity number (``17``, ``"17"``).

    Returns
    -------
    int or None
        None when the value is not a severity this function knows (the caller reads it as 0,
        unknown, and reports it).

    Examples
    --------
    >>> severity_number("warning"), severity_number("SEVERE"), severity_number("17"), severity_number("loud")
    (13, 17, 17, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= MAX_SEVERITY else None
    if not isinstance(value, str):
        return None
    text = value.strip().upper()
    if text.startswith("SEVERITY_NUMBER_"):
        text = text[len("SEVERITY_NUMBER_"):]
        if text == "UNSPECIFIED":
            return 0
    number = SEVERITY_BY_NAME.get(text)
    if number is not None:
        return number
    if text.isascii() and text.isdigit() and int(text) <= MAX_SEVERITY:
        return int(text)
    return None


#: A clock time at the start of a message, after a date when there is one, and the blanks after it
#: (RE2 and Python syntax).
CLOCK_AT_START = r"^\s*(?:\d{4}-\d{2}-\d{2}[ T])?\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+"
#: A level written after a leading clock time at the start of a message, as Logback's and Log4j's
#: default layouts and Python's ``%(asctime)s %(levelname)s`` write it
#: (``16:43:25.207 INFO  t.s.TravelServiceImpl#457 ...``, ``2023-01-29 08:42:22,383 WARNING ...``),
#: optionally in brackets. Only a word that :func:`severity_number` knows is taken as the level.
LEVEL_IN_TEXT = CLOCK_AT_START + r"\[?([A-Za-z]{3,13})\]?(?:\s|$)"


#: Characters of a message's start searched for its level (:data:`LEVEL_IN_TEXT`): a date, a clock
#: time with nanoseconds and an offset, blanks and the longest level name fit in 64.
LEVEL_SEARCH_CHARS = 64
_LEVEL_GROUP = LEVEL_IN_TEXT.replace("([A-Za-z]{3,13})", "(?P<level>[A-Za-z]{3,13})")


def severity_from_text(bodies: pa.Array) -> pa.Array:
    """The level written at the start of each message (:data:`LEVEL_IN_TEXT`), null where none is.

    Parameters
    ----------
    bodies : pyarrow.Array of str, shape (n_records,)

    Returns
    -------
    pyarrow.Array of str, shape (n_records,)
        The level as written (``"INFO"``), for :func:`severity_number`.

    Examples
    --------
    >>> severity_from_text(pa.array(["16:43:25.207 INFO  t.s.TravelServiceImpl#457 ...", "plain text"])).to_pylist()
    ['INFO', None]
    """
    starts = pc.utf8_slice_codeunits(bodies, 0, LEVEL_SEARCH_CHARS)
    words = pc.struct_field(pc.extract_regex(starts, _LEVEL_GROUP), [0])
    known = [w for w in pc.unique(words).drop_null().to_pylist() if severity_number(w) is not None]
    return pc.if_else(pc.is_in(words, pa.array(known, pa.string())), words, pa.scalar(None, pa.string()))


# -- time ---------------------------------------------------------------------------------------
#: Epoch numbers are told apart by magnitude: below 1e11 they are seconds (up to the year 5138),
#: below 1e14 milliseconds, below 1e17 microseconds, else nanoseconds. Each unit's range of
#: plausible dates (1973 onwards) starts above the previous unit's end, so no date is ambiguous.
EPOCH_SECONDS_BELOW = 1e11
EPOCH_MILLISECONDS_BELOW = 1e14
EPOCH_MICROSECONDS_BELOW = 1e17
_ISO = re.compile(r"^\s*(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(?:[.,](\d{1,9}))?\d*\s*"
                  r"(Z|z|[+-]\d{2}(?::?\d{2})?)?\s*$")


def epoch_ns(value: float | int) -> int | None:
    """Nanoseconds of an epoch number in seconds, milliseconds, microseconds or nanoseconds, told
    by its magnitude (:data:`EPOCH_SECONDS_BELOW`); None when negative or not finite.

    Examples
    --------
    >>> epoch_ns(1674981742.383), epoch_ns(1674981742383), epoch_ns(1674981742383150913)
    (1674981742383000000, 1674981742383000000, 1674981742383150913)
    """
    if not math.isfinite(value) or value < 0:
        return None
    if value < EPOCH_SECONDS_BELOW:
        scale = NS_PER_S
    elif value < EPOCH_MILLISECONDS_BELOW:
        scale = NS_PER_MS
    elif value < EPOCH_MICROSECONDS_BELOW:
        scale = NS_PER_US
    else:
        scale = 1
    if isinstance(value, int):
        return value * scale
    return int(Decimal(repr(value)) * scale)  # the decimal digits written, not the binary float's


def time_ns(value: Any) -> tuple[int | None, bool]:
    """Unix epoch nanoseconds of a timestamp as loggers write it.

    Parameters
    ----------
    value : str, int or float
        ISO-8601 / RFC 3339 text (``2023-01-29T08:42:22.383150913Z``, ``2023-01-29 08:42:22,383``,
        up to nanoseconds, any offset), or an epoch number (or its decimal text) in seconds,
        milliseconds, microseconds or nanoseconds (:func:`epoch_ns`).

    Returns
    -------
    ns : int or None
        None when the value is not a time.
    naive : bool
        True when the text had no time zone: it was read as UTC.
    """
    if isinstance(value, bool):
        return None, False
    if isinstance(value, (int, float)):
        return epoch_ns(value), False
    if not isinstance(value, str):
        return None, False
    text = value.strip()
    if text and (text[0].isdigit() or text[0] == ".") and text.replace(".", "", 1).isdigit():
        return epoch_ns(int(text) if text.isdigit() else float(text)), False
    m = _ISO.match(text)
    if m is None:
        return None, False
    date, clock, fraction, zone = m.groups()
    if len(clock) == 5:
        clock += ":00"
    naive = zone is None
    if naive or zone in ("Z", "z"):
        zone = "+00:00"
    elif len(zone) == 3:
        zone += ":00"
    elif ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    try:
        moment = datetime.fromisoformat(f"{date}T{clock}{zone}")
    except ValueError:
        return None, False
    seconds = int(moment.astimezone(timezone.utc).timestamp())
    return seconds * NS_PER_S + (int(fraction.ljust(9, "0")) if fraction else 0), naive


# -- the builder --------------------------------------------------------------------------------
#: Columns of the raw frame :meth:`LogBatchBuilder.validate` takes: ``_record`` (1-based record
#: number), ``_time`` (ns, int or decimal text), ``_raw_trace``/``_raw_span`` (ids as text),
#: ``service``, ``instance``, ``_severity`` (an OpenTelemetry severity number, null when the
#: source gave none), ``severity_text`` and ``body``.
RAW_LOG_COLUMNS = ("_record", "_time", "_raw_trace", "_raw_span", S.SERVICE, S.INSTANCE, "_severity",
                   S.SEVERITY_TEXT, S.BODY)
_NEGATIVE_TIME = "negative timestamp (times are unsigned nanoseconds since the Unix epoch)"
#: How a record without trace context is reported (one warning per file, with the count).
NO_TRACE_CONTEXT = "without trace context (no trace id): kept; they join no span"


class LogBatchBuilder:
    """Accumulates the log records of one source and emits checked Arrow record batches.

    Parameters
    ----------
    source : str
        The file read: every reject names it.
    log : RejectLog
        Where rejected records and warnings go (``spans`` counts records for logs).
    batch_records : int, default=BATCH_RECORDS
        :meth:`full` turns true at this many records.
    limits : LogLimits, optional
        Default :data:`DEFAULT_LOG_LIMITS`.

    Attributes
    ----------
    attributes : SpanBatchBuilder
        The typed attribute columns of the records being added (the span builder's: one
        implementation of typed values and of the value cut). A reader adds a record's attributes
        there (``add_attribute``, or :class:`~tracesleuth.io._otlp.ResourceContext.extend`) before
        calling :meth:`add`.

    Notes
    -----
    Per-file summaries (records without trace context, unknown severity texts) are counted over
    every batch and logged by :meth:`finish`, which the caller runs once at the end of the file.
    """

    def __init__(self, source: str, log: RejectLog, *, batch_records: int = BATCH_RECORDS,
                 limits: LogLimits | None = None):
        self.source, self.log, self.batch_records = source, log, batch_records
        self.limits = DEFAULT_LOG_LIMITS if limits is None else limits
        self.attributes = SpanBatchBuilder(source, log, limits=self.limits)
        self._no_trace = [0, 0]  # records without trace context, first such record
        self._unknown: dict[str, list[int]] = {}  # severity text -> [records, first record]
        self._naive_times = [0, 0]  # records whose time had no time zone, first such record
        self._reset()

    def _reset(self) -> None:
        self.record: list[int] = []
        self.time: list[Any] = []
        self.trace_id: list[Any] = []
        self.span_id: list[Any] = []
        self.service: list[Any] = []
        self.instance: list[Any] = []
        self.severity: list[int | None] = []
        self.severity_text: list[Any] = []
        self.body: list[Any] = []
        self.attributes._reset()

    @property
    def batch_spans(self) -> int:
        """Same as ``batch_records`` (the name the shared CSV reader asks for)."""
        return self.batch_records

    def __len__(self) -> int:
        return len(self.record)

    def full(self) -> bool:
        """True when a batch's worth of records is waiting for :meth:`flush`."""
        return len(self.record) >= self.batch_records

    def add(self, record: int, time_ns: Any, trace_id: Any, span_id: Any, service: Any, instance: Any,
            severity: int | None, severity_text: Any, body: Any) -> None:
        """Append one record; the attributes added since the previous record belong to it.

        ``time_ns`` is integer nanoseconds (or its decimal text; None when the record has no time),
        ``severity`` an OpenTelemetry severity number or None (then ``severity_text`` decides).
        """
        self.record.append(record)
        self.time.append(time_ns)
        self.trace_id.append(trace_id or None)
        self.span_id.append(span_id or None)
        self.service.append(service)
        self.instance.append(instance or None)
        self.severity.append(severity)
        self.severity_text.append(severity_text)
        self.body.append(body)
        self.attributes.attr_offsets.append(len(self.attributes.attr_key))

    def discard_pending_attributes(self) -> None:
        """Drop the attributes added since the last record (its record is being rejected)."""
        self.attributes.discard_pending_attributes()

    def naive_time(self, record: int) -> None:
        """Count a record whose time had no time zone (read as UTC; reported by :meth:`finish`)."""
        if not self._naive_times[0]:
            self._naive_times[1] = record
        self._naive_times[0] += 1

    def flush(self) -> pa.RecordBatch | None:
        """Check the waiting records, log the problems, return the kept ones as a batch (``None``
        when nothing is waiting)."""
        if not self.record:
            return None
        attrs = self.attributes.attributes_array()
        severity = [s if s.__class__ is int and -2**31 <= s < 2**31 else None for s in self.severity]
        raw = pl.DataFrame({
            "_record": pl.Series(self.record, dtype=pl.Int64),
            "_time": _to_series(self.time),
            "_raw_trace": _to_text(self.trace_id),
            "_raw_span": _to_text(self.span_id),
            S.SERVICE: _to_text(self.service),
            S.INSTANCE: _to_text(self.instance),
            "_severity": pl.Series(severity, dtype=pl.Int32),
            S.SEVERITY_TEXT: _to_text(self.severity_text),
            S.BODY: _to_text(self.body),
        })
        self._reset()
        return self.validate(raw, attrs)

    def validate(self, raw: pa.Table | pl.DataFrame, attrs: pa.Array | None) -> pa.RecordBatch:
        """Normalise and check a raw table of records, log the problems, return the kept records.

        Parameters
        ----------
        raw : pyarrow.Table or polars.DataFrame
            Columns :data:`RAW_LOG_COLUMNS`, one row per record.
        attrs : pyarrow.ListArray or None
            One attribute list per row (:data:`~tracesleuth.schema.ATTRIBUTE_TYPE`); None for none.

        Returns
        -------
        pyarrow.RecordBatch
            The kept records in :data:`~tracesleuth.schema.LOG_SCHEMA` (``template_id`` null).

        Notes
        -----
        The work is done in Arrow; polars runs only on a column that needs normalising (times as
        text, ids not in the canonical form), so that a clean batch's bodies are never copied.
        """
        source, log, limits = self.source, self.log, self.limits
        if isinstance(raw, pl.DataFrame):
            raw = raw.to_arrow()
        col = {name: _plain(raw.column(name)) for name in RAW_LOG_COLUMNS}
        n = raw.num_rows
        if attrs is None:
            attrs = pa.array([[]] * n, type=pa.list_(S.ATTRIBUTE_TYPE))
        attrs = _plain(attrs).cast(pa.list_(S.ATTRIBUTE_TYPE))
        time = col["_time"]
        if not pa.types.is_int64(time.type):  # decimal text, floats, nulls: the span readers' rule
            times = pl.from_arrow(time) if not pa.types.is_null(time.type) else pl.Series([None] * n, dtype=pl.String)
            time = pl.DataFrame({"_time": times}).select(_int64("_time")).to_series().to_arrow().cast(pa.int64())
        missing = pc.is_null(time)
        negative = pc.fill_null(pc.less(time, 0), False)
        rejected = pc.or_(missing, negative)
        if pc.any(rejected).as_py():
            bad_rows = np.flatnonzero(rejected.to_numpy(zero_copy_only=False))
            for i in bad_rows.tolist():
                why = "missing or not an integer timestamp" if missing[i].as_py() else _NEGATIVE_TIME
                log.add(source, int(col["_record"][i].as_py()), why, field=S.TIME_NS,
                        excerpt=f"time={raw.column('_time')[i].as_py()!r} body={col[S.BODY][i].as_py()!r:.100}")
            keep = pc.invert(rejected)
            col = {name: values.filter(keep) for name, values in col.items()}
            time, attrs = time.filter(keep), attrs.filter(keep)
        records = col["_record"].to_numpy(zero_copy_only=False)
        ids = {}
        for raw_col, field, width, what in _IDS:
            ids[field] = self._ids(col[raw_col], col["_record"], raw_col, field, width, what)
        no_trace = ids[S.TRACE_ID].null_count
        if no_trace:
            if not self._no_trace[0]:
                self._no_trace[1] = int(records[np.flatnonzero(pc.is_null(ids[S.TRACE_ID]).to_numpy(
                    zero_copy_only=False))[0]])
            self._no_trace[0] += no_trace
        service = pc.utf8_trim_whitespace(pc.fill_null(col[S.SERVICE], ""))
        service = pc.if_else(pc.equal(service, ""), pa.scalar("unknown_service"), service)
        columns = {
            S.TIME_NS: time,
            **ids,
            S.SERVICE: service,
            S.INSTANCE: col[S.INSTANCE],
            S.SEVERITY_NUMBER: self._severity(col["_severity"], col[S.SEVERITY_TEXT], col["_record"]),
            S.SEVERITY_TEXT: col[S.SEVERITY_TEXT],
            S.BODY: col[S.BODY],
        }
        columns = {name: values.cast(S.LOG_SCHEMA.field(name).type) for name, values in columns.items()}
        for name, limit, what in ((S.BODY, limits.max_body_chars, "body"),
                                  (S.SERVICE, limits.max_service_chars, "service name"),
                                  (S.INSTANCE, limits.max_instance_chars, "instance name")):
            cut = cut_strings(columns[name], limit, what, name, records, source, log)
            if cut is not None:
                columns[name] = cut
        cut_attrs = _limit_attributes(attrs, records, source, log, limits.max_attributes,
                                      limits.max_attribute_value_chars, S.ATTRIBUTES)
        columns[S.ATTRIBUTES] = attrs if cut_attrs is None else cut_attrs
        columns[S.TEMPLATE_ID] = pa.nulls(len(time), pa.int64())
        log.spans_read[source] += len(time)
        return pa.RecordBatch.from_arrays([columns[name] for name in S.LOG_COLUMNS], schema=S.LOG_SCHEMA)

    def _ids(self, raw: pa.Array, records: pa.Array, raw_col: str, field: str, width: int, what: str) -> pa.Array:
        """Canonical ids from raw ones: as they are when canonical (the common case, decided from
        the Arrow buffers), else normalised (:func:`~tracesleuth.io._builder._hex_id`); an id that
        is given but invalid is null, with a warning per record, a padded one is counted."""
        if _canonical(raw, width):
            return raw
        df = pl.DataFrame({"_record": pl.from_arrow(records), raw_col: pl.from_arrow(raw.cast(pa.string()))})
        df = df.with_columns(_hex_id(raw_col, width).alias(field)).with_columns(
            _padded(raw_col, field, width).alias(f"_padded{raw_col}"),
            (pl.col(raw_col).str.strip_chars().str.contains("^0*$").not_() & pl.col(field).is_null())
            .fill_null(False).alias("_bad"))
        _warn_padded(df, raw_col, field, width, what, self.source, self.log)
        if df["_bad"].any():
            for rec, value in df.filter(pl.col("_bad")).select("_record", raw_col).iter_rows():
                self.log.add(self.source, rec, f"not a hexadecimal {what} of at most {width} digits: the record is "
                             f"kept without it", field=field, spans=0, excerpt=value)
        return df[field].to_arrow()

    def _severity(self, number: pa.Array, text: pa.Array, records: pa.Array) -> pa.Array:
        """The severity numbers: the source's number when it is one (1-24), else the number of its
        text (:func:`severity_number`), else 0; unknown texts and numbers out of range counted."""
        number = number.cast(pa.int32())
        given = pc.fill_null(pc.not_equal(number, 0), False)
        valid = pc.and_(given, pc.fill_null(pc.less_equal(number, MAX_SEVERITY), False))
        valid = pc.and_(valid, pc.fill_null(pc.greater_equal(number, 1), False))
        out_of_range = pc.and_not(given, valid)
        if pc.any(out_of_range).as_py():
            for i in np.flatnonzero(out_of_range.to_numpy(zero_copy_only=False)).tolist():
                value, written = number[i].as_py(), text[i].as_py()
                then = f"; read from its text {written!r}" if written else "; read as 0 (unknown)"
                self.log.add(self.source, records[i].as_py(), f"severity number {value} outside 0-{MAX_SEVERITY}{then}",
                             field=S.SEVERITY_NUMBER, spans=0)
        if text.null_count == len(text):
            return pc.if_else(valid, number, pa.scalar(0, pa.int32()))
        distinct = pc.unique(text.filter(pc.invert(valid))).drop_null().to_pylist()
        mapping = {t: severity_number(t) for t in distinct if t.strip()}
        for value in (t for t, k in mapping.items() if k is None):
            hits = np.flatnonzero(pc.and_not(pc.fill_null(pc.equal(text, value), False), valid)
                                  .to_numpy(zero_copy_only=False))
            entry = self._unknown.setdefault(value, [0, records[int(hits[0])].as_py()])
            entry[0] += len(hits)
        known = {t: k for t, k in mapping.items() if k is not None}
        from_text = pc.take(pa.array(list(known.values()) + [0], pa.int32()),
                            pc.fill_null(pc.index_in(text, pa.array(list(known), pa.string())), len(known)))
        return pc.if_else(valid, number, from_text)

    def finish(self) -> None:
        """Log the per-file summaries: records without trace context, unknown severity texts, times
        without a time zone. Call once, after the last :meth:`flush` of the file."""
        source, log = self.source, self.log
        n, first = self._no_trace
        if n:
            log.add(source, first, f"{n} record(s) {NO_TRACE_CONTEXT}", field=S.TRACE_ID, spans=0)
        for value, (count, first) in self._unknown.items():
            log.add(source, first, f"unknown severity text {value!r}: severity number 0 (unknown) for its "
                    f"{count} record(s)", field=S.SEVERITY_TEXT, spans=0, excerpt=value)
        n, first = self._naive_times
        if n:
            log.add(source, first, f"{n} record(s) with a time without a time zone: read as UTC", field=S.TIME_NS,
                    spans=0)
        self._no_trace, self._unknown, self._naive_times = [0, 0], {}, [0, 0]


#: The id columns: (raw column, canonical column, width in hexadecimal digits, name in messages).
_IDS = (("_raw_trace", S.TRACE_ID, S.TRACE_ID_HEX_CHARS, "trace id"),
        ("_raw_span", S.SPAN_ID, S.SPAN_ID_HEX_CHARS, "span id"))


def _canonical(ids: pa.Array, width: int) -> bool:
    """Whether every id given is already canonical (``width`` lower-case hexadecimal digits, not
    all zero): read from the Arrow buffers (:func:`~tracesleuth.schema.hex_digits`), the common
    case, which then needs no normalising."""
    values = _plain(ids)
    if pa.types.is_null(values.type):
        return False
    return S.hex_digits(values, width) is not None and not pc.any(pc.equal(values, "0" * width)).as_py()


def _plain(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One Arrow array (chunks combined), ``large_string`` and views as plain ``string``."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if pa.types.is_large_string(values.type) or pa.types.is_string_view(values.type):
        return values.cast(pa.string())
    if pa.types.is_large_list(values.type) or pa.types.is_list_view(values.type):
        return values.cast(pa.list_(values.type.value_type))
    return values
