"""Span CSV and Parquet files with a column mapping.

A :class:`TabularMapping` says which column holds each canonical field and in which unit its
times are. Files whose header already uses the canonical names (:mod:`tracesleuth.schema`) need
no mapping; the built-in :data:`PRESETS` cover known public data sets:

``nezha``
    TrainTicket and OnlineBoutique spans recorded by the Nezha authors (FSE 2023):
    ``TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration``;
    ``ParentID`` is ``root`` for roots, the service is the pod name without its Kubernetes
    ``-<replicaset hash>-<pod id>`` suffix, the instance is the pod, ``Duration`` is in
    microseconds (end and start are in nanoseconds and are used; ``Duration`` is kept as a check).

Both readers stream: CSV through :func:`pyarrow.csv.open_csv` (batches, malformed rows reported
with their line number), Parquet row group by row group.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .. import schema as S
from ..errors import TraceFormatError
from ..units import NS_PER_UNIT
from ._builder import SpanBatchBuilder, normalize_kind, validate_spans

_KUBERNETES_POD = r"^(?P<service>.+?)(?:-[0-9a-z]{5,10})?-[0-9a-z]{5}$"


@dataclass(frozen=True)
class TabularMapping:
    """Which column of a span CSV/Parquet file holds which canonical field.

    Parameters
    ----------
    trace_id, span_id, operation : str
        Required columns.
    start : str
        Column with the span's start time, in ``start_unit`` since the Unix epoch.
    end, duration : str, optional
        The end time (in ``start_unit``) or the duration (in ``duration_unit``); one is required.
    parent_span_id, service, instance, kind, status, status_message : str, optional
        Columns; a missing service column gives ``unknown_service``, an empty status message
        is none.
    root_parent_values : tuple of str, default=("", "root", "0", "null", "None")
        Parent values that mean "this span is a root".
    service_pattern : str, optional
        Regular expression applied to the service column; its group ``service`` (or its first
        group) is the service. Used to strip Kubernetes pod suffixes.
    start_unit, duration_unit : {"ns", "us", "ms", "s"}, default="ns"
    attribute_columns : tuple of str, default=()
        Further columns kept as (string) span attributes.
    name : str, default="custom"
    """

    trace_id: str = S.TRACE_ID
    span_id: str = S.SPAN_ID
    operation: str = S.OPERATION
    start: str = S.START_NS
    end: str | None = S.END_NS
    duration: str | None = None
    parent_span_id: str | None = S.PARENT_SPAN_ID
    service: str | None = S.SERVICE
    instance: str | None = S.INSTANCE
    kind: str | None = S.KIND
    status: str | None = S.STATUS
    follows_from: str | None = S.FOLLOWS_FROM
    status_message: str | None = S.STATUS_MESSAGE
    root_parent_values: tuple = ("", "root", "0", "null", "None")
    service_pattern: str | None = None
    start_unit: str = "ns"
    duration_unit: str = "ns"
    attribute_columns: tuple = ()
    name: str = "custom"

    def __post_init__(self):
        for unit_field in ("start_unit", "duration_unit"):
            if getattr(self, unit_field) not in NS_PER_UNIT:
                raise TraceFormatError("<mapping>", f"{unit_field} must be one of {sorted(NS_PER_UNIT)}, "
                                                    f"got {getattr(self, unit_field)!r}")
        if self.end is None and self.duration is None:
            raise TraceFormatError("<mapping>", "a mapping needs an end or a duration column")

    @property
    def required(self) -> tuple[str, ...]:
        """Columns that must be present for the mapping to apply."""
        return tuple(c for c in (self.trace_id, self.span_id, self.operation, self.start,
                                 self.end if self.end is not None else self.duration) if c)

    def matches(self, columns) -> bool:
        """Whether a header holds every required column."""
        return set(self.required) <= set(columns)


CANONICAL = TabularMapping(name="canonical")
PRESETS: dict[str, TabularMapping] = {
    "canonical": CANONICAL,
    "nezha": TabularMapping(
        name="nezha", trace_id="TraceID", span_id="SpanID", parent_span_id="ParentID",
        operation="OperationName", service="PodName", instance="PodName", service_pattern=_KUBERNETES_POD,
        start="StartTimeUnixNano", end="EndTimeUnixNano", kind=None, status=None, follows_from=None,
        status_message=None,
    ),
}


def resolve_mapping(mapping: TabularMapping | str | None, columns, source: str) -> TabularMapping:
    """The mapping to use for a file with header ``columns``.

    Raises
    ------
    TraceFormatError
        When a named preset does not exist, or no mapping fits the header.
    """
    if isinstance(mapping, str):
        if mapping not in PRESETS:
            raise TraceFormatError(source, f"unknown column mapping {mapping!r}; presets: {', '.join(PRESETS)}")
        mapping = PRESETS[mapping]
    candidates = [mapping] if mapping is not None else list(PRESETS.values())
    for m in candidates:
        if m.matches(columns):
            return m
    want = " or ".join(f"{m.name} ({', '.join(m.required)})" for m in candidates)
    raise TraceFormatError(source, f"the header ({', '.join(map(str, columns))}) lacks the columns of {want}",
                           record=1)


def read_csv(stream: BinaryIO, builder: SpanBatchBuilder, *, mapping: TabularMapping | str | None = None,
             block_bytes: int = 1 << 24, damaged: Callable[[], str | None] | None = None
             ) -> Iterator[pa.RecordBatch]:
    """Read a span CSV file (header line first), streaming block by block.

    Every column is read as bytes and decoded here, so that a row with non-UTF-8 bytes or the
    wrong number of fields is rejected alone, with its line number, while the rest is read.
    Record numbers are physical line numbers (the header is line 1); fields with embedded
    newlines are not supported (span exports do not produce them).

    Parameters
    ----------
    stream : binary file object
    builder : SpanBatchBuilder
        Names the source and holds the reject log.
    mapping : TabularMapping or str, optional
        Column mapping or preset name; by default the first of :data:`PRESETS` that fits.
    block_bytes : int, default=16 MiB
        CSV bytes parsed at a time (memory is bounded by a few times this).
    damaged : callable, optional
        Called at the end of the stream: what cut it short (a damaged gzip stream), or ``None``.
        A last line without its newline in a stream cut short is a record cut in two: it is
        rejected whole (one span lost), never read as a row with a shortened value.

    Yields
    ------
    pyarrow.RecordBatch
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, a block of rows at a time.

    Raises
    ------
    TraceFormatError
        When the header is not UTF-8 or matches no mapping.
    """
    names = read_csv_header(stream, builder.source)
    m = resolve_mapping(mapping, names, builder.source)
    for batch, records in iter_csv_batches(stream, builder, names, block_bytes=block_bytes, damaged=damaged):
        yield from _convert(batch, m, builder, records)


def read_csv_header(stream: BinaryIO, source: str) -> list[str]:
    """The column names of a CSV file's header line (stripped), read from ``stream``.

    Raises
    ------
    TraceFormatError
        When the header is not UTF-8 CSV.
    """
    header = stream.readline()
    try:
        names = next(csv.reader([header.decode("utf-8-sig")]))
    except (UnicodeDecodeError, StopIteration, csv.Error) as e:
        raise TraceFormatError(source, f"unreadable CSV header: {e}", record=1) from None
    return [n.strip() for n in names]


def iter_csv_batches(stream: BinaryIO, builder, names: list[str], *, block_bytes: int = 1 << 24,
                     damaged: Callable[[], str | None] | None = None
                     ) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """The rows after the header, block by block: ``(batch, records)`` with every column as bytes
    (:class:`pyarrow.BinaryArray`) and each row's physical line number (the header is line 1).

    Malformed rows (wrong number of fields) and a last line cut by a damaged stream are rejected
    into ``builder.log`` (one record each) with their line numbers; see :func:`read_csv`.
    ``builder`` is any reader's builder (``source``, ``log``, ``batch_spans``).
    """
    read_opts = pacsv.ReadOptions(column_names=names, use_threads=True)
    convert = pacsv.ConvertOptions(column_types={n: pa.binary() for n in names})
    line = 2  # physical line number of the next chunk's first line
    carry = b""
    while True:
        block = stream.read(block_bytes)
        data = carry + block
        if not block:
            chunk, carry = data, b""
            damage = damaged() if damaged is not None and chunk and not chunk.endswith(b"\n") else None
            if damage is not None:
                cut = chunk.rfind(b"\n") + 1
                at = line + chunk.count(b"\n")
                builder.log.add(builder.source, at, f"line cut short by the damaged stream ({damage})",
                                spans=1, excerpt=chunk[cut:])
                chunk = chunk[:cut]
        else:
            cut = data.rfind(b"\n") + 1
            chunk, carry = data[:cut], data[cut:]
        if chunk:
            yield from _read_csv_chunk(chunk, line, builder, read_opts, convert)
            line += chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
        if not block:
            return


def _read_csv_chunk(chunk: bytes, first_line: int, builder, read_opts, convert
                    ) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    bad: list[tuple[int, str, int, int]] = []

    def on_bad_row(row) -> str:
        bad.append((row.number, row.text, row.expected_columns, row.actual_columns))
        return "skip"

    parse = pacsv.ParseOptions(invalid_row_handler=on_bad_row)
    table = pacsv.read_csv(pa.BufferReader(chunk), read_options=read_opts, convert_options=convert,
                           parse_options=parse)
    if bad and any(b[0] is None for b in bad):  # multi-threaded parsing does not number rows: redo serially
        bad.clear()
        serial = pacsv.ReadOptions(column_names=read_opts.column_names, use_threads=False)
        table = pacsv.read_csv(pa.BufferReader(chunk), read_options=serial, convert_options=convert,
                               parse_options=parse)
    # Physical line numbers of the non-empty lines (pyarrow numbers rows skipping empty lines).
    buf = np.frombuffer(chunk, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    if len(ends) == 0 or ends[-1] != len(buf) - 1:
        ends = np.append(ends, len(buf))
    starts = np.concatenate(([0], ends[:-1] + 1))
    length = ends - starts
    cr_only = (length == 1) & (buf[np.minimum(starts, len(buf) - 1)] == 13)
    lines = first_line + np.flatnonzero((length > 0) & ~cr_only)
    if bad:
        idx = np.array([b[0] for b in bad if b[0] is not None], dtype=np.int64) - 1
        for (num, text, want, got) in bad:
            rec = int(lines[num - 1]) if num is not None and 0 < num <= len(lines) else 0
            builder.log.add(builder.source, rec, f"malformed CSV row: expected {want} fields, got {got}", excerpt=text)
        lines = np.delete(lines, idx[(idx >= 0) & (idx < len(lines))])
    if table.num_rows:
        records = lines[: table.num_rows] if len(lines) >= table.num_rows else np.arange(table.num_rows) + first_line
        for batch in table.combine_chunks().to_batches(max_chunksize=builder.batch_spans):
            yield batch, records[: batch.num_rows]
            records = records[batch.num_rows:]


def read_parquet(stream: BinaryIO, builder: SpanBatchBuilder, *, mapping: TabularMapping | str | None = None,
                 source_path=None) -> Iterator[pa.RecordBatch]:
    """Read a span Parquet file row group by row group (canonical columns or a mapping).

    A file written by tracesleuth (its span store) carries the canonical schema, attributes,
    events and links included, and is passed through the same checks as every other input (a
    part written before events and links were kept has none). Parquet needs random
    access: ``source_path`` (the file itself) is read when given, else ``stream`` must be seekable.
    """
    pf = pq.ParquetFile(source_path if source_path is not None else stream)
    m = resolve_mapping(mapping, pf.schema_arrow.names, builder.source)
    row = 1
    for batch in pf.iter_batches(batch_size=builder.batch_spans):
        yield from _convert(batch, m, builder, np.arange(row, row + batch.num_rows))
        row += batch.num_rows


def _convert(batch: pa.RecordBatch, m: TabularMapping, builder: SpanBatchBuilder, records: np.ndarray
             ) -> Iterator[pa.RecordBatch]:
    source, log = builder.source, builder.log
    nested = {}  # the canonical nested columns, passed through when of their canonical type
    if m.name == "canonical":
        for name in S.NESTED_SPAN_COLUMNS:
            if name in batch.schema.names:
                a = batch.column(name)
                if a.type == S.SPAN_SCHEMA.field(name).type:
                    nested[name] = a
                batch = batch.drop_columns([name])
    attrs = nested.get(S.ATTRIBUTES)
    used = [c for c in dict.fromkeys(
        (m.trace_id, m.span_id, m.parent_span_id, m.service, m.operation, m.instance, m.kind, m.status,
         m.follows_from, m.status_message, m.start, m.end, m.duration, *m.attribute_columns))
        if c and c in batch.schema.names]
    df, keep = utf8_frame(batch, used, records, builder)
    if keep is not None:
        nested = {name: a.filter(pa.array(keep.to_arrow())) for name, a in nested.items()}
        attrs = nested.get(S.ATTRIBUTES)

    def col(name: str | None, default=None) -> pl.Expr:
        if name and name in df.columns:
            return pl.col(name)
        return pl.lit(default, dtype=pl.String)

    start_scale = NS_PER_UNIT[m.start_unit]
    start = _scaled(col(m.start), start_scale)
    if m.end and m.end in df.columns:
        end = _scaled(col(m.end), start_scale)
    else:
        end = start + _scaled(col(m.duration), NS_PER_UNIT[m.duration_unit])
    parent = col(m.parent_span_id)
    parent = pl.when(parent.str.strip_chars().is_in(list(m.root_parent_values))).then(None).otherwise(parent)
    service = col(m.service)
    # Few distinct values (pods, kinds): map each once; both sets in one pass over the chunk.
    has_kind = bool(m.kind and m.kind in df.columns)
    distinct = df.select(
        (service.unique().drop_nulls() if m.service_pattern else pl.lit(None, pl.String)).implode().alias("s"),
        (pl.col(m.kind).unique() if has_kind else pl.lit(None, pl.String)).implode().alias("k"),
    ).row(0)
    if m.service_pattern:
        service = service.replace_strict(_extract_all(m.service_pattern, distinct[0]), default=service)
    kind = col(m.kind, "unspecified").fill_null("unspecified")
    status = col(m.status, "unset").fill_null("unset").str.to_lowercase()
    follows = col(m.follows_from, "false").fill_null("false").str.to_lowercase().is_in(["true", "1", "yes"])
    message = col(m.status_message)
    raw = df.lazy().select(
        pl.col("_record"),
        col(m.trace_id).alias("_raw_trace"),
        col(m.span_id).alias("_raw_span"),
        parent.alias("_raw_parent"),
        service.alias(S.SERVICE),
        col(m.operation).alias(S.OPERATION),
        col(m.instance).alias(S.INSTANCE),
        kind.alias(S.KIND),
        start.alias("_start"),
        end.alias("_end"),
        pl.when(status.is_in(list(S.STATUS_CODES))).then(status)
          .when(status.is_in(["2", "error", "status_code_error"])).then(pl.lit("error"))
          .when(status.is_in(["1", "status_code_ok"])).then(pl.lit("ok")).otherwise(pl.lit("unset")).alias(S.STATUS),
        follows.alias(S.FOLLOWS_FROM),
        pl.when(message != "").then(message).alias(S.STATUS_MESSAGE),
    )
    if has_kind:
        raw = raw.with_columns(pl.col(S.KIND).replace_strict({k: normalize_kind(k) for k in distinct[1]},
                                                              default="unspecified", return_dtype=pl.String))
    if attrs is None and m.attribute_columns:
        present = [c for c in m.attribute_columns if c in df.columns]
        if present:
            attrs = df.select(pl.concat_list([pl.struct(key=pl.lit(c), str=pl.col(c), int=pl.lit(None, pl.Int64),
                                                         float=pl.lit(None, pl.Float64), bool=pl.lit(None, pl.Boolean))
                                               for c in present]).alias("a")).to_arrow().column("a").combine_chunks()
    yield validate_spans(raw, attrs, source, log, limits=builder.limits, events=nested.get(S.EVENTS),
                         links=nested.get(S.LINKS))


def utf8_frame(batch: pa.RecordBatch, used: list[str], records: np.ndarray, builder, *, repair: bool = False
               ) -> tuple[pl.DataFrame, pl.Series | None]:
    """Columns ``used`` of ``batch`` as a polars frame with ``_record`` first, bytes decoded as
    UTF-8 in one pass; a row with invalid bytes in any of them is rejected (one record, into
    ``builder.log``) and left out, or with ``repair`` kept with the bytes replaced by U+FFFD and
    a warning naming the column.

    Returns
    -------
    frame : polars.DataFrame
    keep : polars.Series of bool or None
        The rows kept, None when every row was.
    """
    source, log = builder.source, builder.log
    df = pl.from_arrow(batch.select(used))
    assert isinstance(df, pl.DataFrame)
    binary = [c for c in used if df.schema[c] == pl.Binary]
    try:
        return df.select(pl.Series("_record", records, dtype=pl.Int64),
                         *[pl.col(c).cast(pl.String) if c in binary else pl.col(c) for c in used]), None
    except pl.exceptions.ComputeError:  # some bytes are not UTF-8: find the rows, one column at a time
        if repair:
            return _repaired(df, used, binary, records, builder), None
        invalid = np.zeros(df.height, dtype=bool)
        for c in binary:
            invalid |= np.array([v is not None and not _is_utf8(v) for v in df[c].to_list()], dtype=bool)
        keep = pl.Series(~invalid)
        df = pl.DataFrame({c: (df[c].zip_with(keep, pl.Series([b""] * df.height, dtype=pl.Binary))
                               if c in binary else df[c]) for c in used})
        df = df.select(pl.Series("_record", records, dtype=pl.Int64),
                       *[pl.col(c).cast(pl.String) if c in binary else pl.col(c) for c in used])
    for rec in df.filter(~keep)["_record"]:
        log.add(source, rec, "bytes that are not valid UTF-8", excerpt=None)
    return df.filter(keep), keep


def _repaired(df: pl.DataFrame, used: list[str], binary: list[str], records: np.ndarray, builder) -> pl.DataFrame:
    """``df`` decoded with invalid UTF-8 replaced by U+FFFD, a warning per record and column."""
    columns = {"_record": pl.Series("_record", records, dtype=pl.Int64)}
    for c in used:
        if c not in binary:
            columns[c] = df[c]
            continue
        values = df[c].to_list()
        decoded = []
        for rec, v in zip(records.tolist(), values):
            if v is not None and not _is_utf8(v):
                builder.log.add(builder.source, rec, "invalid UTF-8 replaced by U+FFFD", field=c, spans=0, excerpt=v)
                v = v.decode("utf-8", "replace")
            elif v is not None:
                v = v.decode("utf-8")
            decoded.append(v)
        columns[c] = pl.Series(c, decoded, dtype=pl.String)
    return pl.DataFrame(columns)


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _extract_all(pattern: str, values: list[str]) -> dict[str, str]:
    rx = re.compile(pattern)
    group = rx.groupindex.get("service", 1)
    out = {}
    for v in values:
        hit = rx.match(v)
        out[v] = hit.group(group) if hit and hit.group(group) else v
    return out


def _scaled(e: pl.Expr, scale: int) -> pl.Expr:
    """Text or number in some unit -> int64 nanoseconds (null when not a number)."""
    as_int = e.cast(pl.String).str.strip_chars().str.to_integer(strict=False)
    as_float = e.cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
    return pl.coalesce(as_int * scale, (as_float * scale).round().cast(pl.Int64, strict=False))
