"""Column accumulators shared by every reader, and the rejected-records log.

A reader parses its format and hands each span to :class:`SpanBatchBuilder.add` (plain Python
values, no per-span objects survive); the builder turns them into Arrow record batches in
:data:`~tracesleuth.schema.SPAN_SCHEMA`. Checks that apply to every format (ids present and
hexadecimal, timestamps integral, end not before start) run once per batch, vectorized, in
:meth:`SpanBatchBuilder.flush`, and every failing span goes to the :class:`RejectLog` with its
record number and the field at fault. So ``spans in = spans stored + spans rejected`` holds by
construction.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema as S

#: Longest attribute string value kept whole (bytes of UTF-8); longer values are cut and reported.
MAX_ATTRIBUTE_CHARS = 4096
#: Spans per Arrow record batch produced by a reader.
BATCH_SPANS = 131_072
_EXCERPT_CHARS = 160
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

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

    Notes
    -----
    Timestamps may be given as ``int`` or as decimal strings (OTLP JSON encodes 64-bit integers as
    strings); they are parsed in bulk at :meth:`flush`. Ids may be given in any case and without
    leading zeros; they are normalised to lower-case, zero-padded hexadecimal.
    """

    def __init__(self, source: str, log: RejectLog, *, batch_spans: int = BATCH_SPANS):
        self.source, self.log, self.batch_spans = source, log, batch_spans
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
        self.attr_offsets: list[int] = [0]
        self.attr_key: list[str] = []
        self.attr_str: list[str | None] = []
        self.attr_int: list[int | None] = []
        self.attr_float: list[float | None] = []
        self.attr_bool: list[bool | None] = []

    def __len__(self) -> int:
        return len(self.trace_id)

    def full(self) -> bool:
        """True when a batch's worth of spans is waiting for :meth:`flush`."""
        return len(self.trace_id) >= self.batch_spans

    def add_attribute(self, key: str, value: Any, record: int) -> None:
        """Append one typed attribute to the span being added (call before :meth:`add`)."""
        s = i = f = b = None
        if isinstance(value, bool):
            b = value
        elif isinstance(value, int):
            if _INT64_MIN <= value <= _INT64_MAX:
                i = value
            else:
                s = str(value)
        elif isinstance(value, float):
            f = value
        elif isinstance(value, str):
            s = value
        elif value is None:
            return
        else:
            s = _json_text(value) if not isinstance(value, (bytes, bytearray)) else value.hex()
        if s is not None and len(s) > MAX_ATTRIBUTE_CHARS:
            self.log.add(self.source, record, f"attribute value longer than {MAX_ATTRIBUTE_CHARS} "
                         f"characters ({len(s)}); kept its first {MAX_ATTRIBUTE_CHARS}",
                         field=f"attributes.{key}", spans=0, excerpt=s)
            s = s[:MAX_ATTRIBUTE_CHARS]
        self.attr_key.append(str(key))
        self.attr_str.append(s)
        self.attr_int.append(i)
        self.attr_float.append(f)
        self.attr_bool.append(b)

    def discard_pending_attributes(self) -> None:
        """Drop the attributes added since the last span (its span is being rejected)."""
        start = self.attr_offsets[-1]
        for col in (self.attr_key, self.attr_str, self.attr_int, self.attr_float, self.attr_bool):
            del col[start:]

    def add_attributes(self, items: Iterable[tuple[str, Any]], record: int) -> None:
        """Append several typed attributes to the span being added."""
        for k, v in items:
            self.add_attribute(k, v, record)

    def add(self, record: int, trace_id: Any, span_id: Any, parent_span_id: Any, service: Any,
            operation: Any, instance: Any, kind: str, start_ns: Any, end_ns: Any,
            status: str = "unset", follows_from: bool = False) -> None:
        """Append one span; attributes added since the previous span belong to it.

        ``kind`` must already be one of :data:`~tracesleuth.schema.SPAN_KINDS` (see
        :func:`normalize_kind`) and ``status`` one of :data:`~tracesleuth.schema.STATUS_CODES`.
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
        self.attr_offsets.append(len(self.attr_key))

    # -- flushing -------------------------------------------------------------------------
    def flush(self) -> pa.RecordBatch | None:
        """Validate the waiting spans, log the rejected ones, and return the rest as a batch
        (``None`` when nothing is waiting)."""
        n = len(self.trace_id)
        if n == 0:
            return None
        if len(self.attr_offsets) != n + 1:  # pragma: no cover - reader bug, not input
            raise AssertionError("attributes added after the last span")
        attrs = pa.ListArray.from_arrays(
            pa.array(self.attr_offsets, pa.int32()),
            pa.StructArray.from_arrays(
                [pa.array(self.attr_key, pa.string()), pa.array(self.attr_str, pa.string()),
                 pa.array(self.attr_int, pa.int64()), pa.array(self.attr_float, pa.float64()),
                 pa.array(self.attr_bool, pa.bool_())],
                fields=list(S.ATTRIBUTE_TYPE),
            ),
        )
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
            }
        )
        self._reset()
        return validate_spans(raw, attrs, self.source, self.log)


#: Columns of the raw frame :func:`validate_spans` takes (ids and times not yet normalised).
RAW_COLUMNS = ("_record", "_raw_trace", "_raw_span", "_raw_parent", S.SERVICE, S.OPERATION, S.INSTANCE,
               S.KIND, "_start", "_end", S.STATUS, S.FOLLOWS_FROM)


def validate_spans(raw: pl.DataFrame | pl.LazyFrame | pa.Table, attrs: pa.Array | None, source: str, log: RejectLog
                   ) -> pa.RecordBatch:
    """Normalise and check a raw span frame, log the failing spans, return the rest as a batch.

    Parameters
    ----------
    raw : polars.DataFrame or LazyFrame, or pyarrow.Table
        Columns :data:`RAW_COLUMNS`: ``_record`` (1-based record number), ids as text, times as
        integers or decimal text in nanoseconds, the other canonical columns as they are (an
        Arrow table's text columns may be dictionary-encoded).
    attrs : pyarrow.ListArray or None
        One attribute list per row (:data:`~tracesleuth.schema.ATTRIBUTE_TYPE`); None for none.
    source : str
        File named in the rejects.
    log : RejectLog
        Receives one entry per rejected span.

    Returns
    -------
    pyarrow.RecordBatch
        The accepted spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`.
    """
    if isinstance(raw, pa.Table):
        batch = _as_is(raw, attrs)
        if batch is not None:
            log.spans_read[source] += batch.num_rows
            return batch
        raw = pl.from_arrow(S.plain_spans(raw))
    # Columns already canonical (the common case: lower-case ids of full width, int64 or decimal-text
    # times) are taken as they are; the general normalisation runs only on a column that needs it.
    if isinstance(raw, pl.LazyFrame):
        raw = raw.collect()
    canonical = _canonical_columns(raw)
    lf = raw.lazy()
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
        attrs = pa.array([[]] * n, type=pa.list_(S.ATTRIBUTE_TYPE))
    ok = df["_reason"].is_null()
    if not ok.all():
        for rec, fld, why, tid, sid, st, en in df.filter(~ok).select(
            "_record", "_field", "_reason", "_raw_trace", "_raw_span", "_start", "_end"
        ).iter_rows():
            log.add(source, rec, why, field=fld, excerpt=f"trace_id={tid!r} span_id={sid!r} start={st!r} end={en!r}")
        df = df.filter(ok)
        attrs = attrs.filter(pa.array(ok.to_arrow()))
    log.spans_read[source] += df.height
    cols = df.select([c for c in S.SPAN_COLUMNS if c != S.ATTRIBUTES]).to_arrow()
    arrays = [cols.column(c).combine_chunks().cast(S.SPAN_SCHEMA.field(c).type) for c in cols.column_names]
    if isinstance(attrs, pa.ChunkedArray):
        attrs = attrs.combine_chunks()
    return pa.RecordBatch.from_arrays(arrays + [attrs.cast(S.SPAN_SCHEMA.field(S.ATTRIBUTES).type)], schema=S.SPAN_SCHEMA)


def _as_is(raw: pa.Table, attrs: pa.Array | None) -> pa.RecordBatch | None:
    """The batch :func:`validate_spans` returns when it would change and reject nothing, read
    straight from the Arrow columns; None when it would (it then runs in full).

    That is: every id in the canonical form (:func:`~tracesleuth.schema.hex_digits`) and not
    all zero, every time an int64 or ASCII decimal digits within int64, no end before its start,
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
    if start is None or end is None or (n and pc.any(pc.less(end, start)).as_py()):
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
    if attrs is None:
        attrs = pa.array([[]] * n, type=S.SPAN_SCHEMA.field(S.ATTRIBUTES).type)
    arrays = [columns[renamed.get(f.name, f.name)].cast(f.type).combine_chunks() if f.name != S.ATTRIBUTES
              else (attrs.combine_chunks() if isinstance(attrs, pa.ChunkedArray) else attrs).cast(f.type)
              for f in S.SPAN_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=S.SPAN_SCHEMA)


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
