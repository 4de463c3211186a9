"""Readers: trace and log files in, spans and log records in the canonical schemas out
(:mod:`tracesleuth.schema`).

One entry point per signal, for every format: :func:`read_spans` (or :func:`iter_span_batches`
to stream) for spans, :func:`read_logs` (or :func:`iter_log_batches`) for log records. The
format of each file is told from its content, not its name (:func:`detect_format`, which also
tells span formats from log formats: :func:`is_log_format`); gzip is decompressed transparently;
a path may be a file, a directory or a glob pattern, and both also read a span store directory
(:mod:`tracesleuth.io.store`, the one format written here too: :mod:`tracesleuth.ingest` fills it
from the others). A directory may hold spans and logs together: each reader reads its
own files and notes the others' with one warning (:data:`LOG_FILE_NOTE`, :data:`SPAN_FILE_NOTE`),
never as rejects. Span formats (:data:`FORMATS`):

=============== ==========================================================================
``otlp-json``    OTLP JSON: the collector file exporter's lines, or an OTLP/HTTP JSON body
``otlp-proto``   OTLP protobuf: an ``ExportTraceServiceRequest``, or length-prefixed messages
``jaeger-json``  Jaeger JSON: UI download or query API ``{"data": [...]}`` with ``processes``
``zipkin-json``  Zipkin v2 JSON span list
``csv``          span CSV with a column mapping (:class:`TabularMapping`; presets built in)
``parquet``      span Parquet, canonical columns or a column mapping
``mi-log``       request trace log of Mi et al. 2012 (``T_ID:``, ``FUNC:<method>_start|_end``)
=============== ==========================================================================

Log-record formats (:data:`LOG_FORMATS`; records in :data:`~tracesleuth.schema.LOG_SCHEMA`,
bounded by :class:`LogLimits`, templated by :class:`tracesleuth.io.log_templates.LogTemplateMiner`):

=================== ===============================================================``otlp-logs-json``   OTLP JSON logs: the collector file exporter's ``{"resourceLogs": ...}``
                     lines, or an OTLP/HTTP JSON body (:mod:`.otlp_logs`)
``otlp-logs-proto``  OTLP protobuf: an ``ExportLogsServiceRequest``, or length-prefixed messages
``json-lines-logs``  one JSON object per line with trace context, as structured loggers write
                     them (python-json-logger, structlog, Logback, zap, Bunyan/pino, ECS, ...;
                     the field names in :mod:`.json_lines_logs`)
``nezha-log-csv``    the Nezha log CSV (``Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,
                     SpanID,Log``; :mod:`.nezha_log`)
=================== ======================================================================

Bad records never stop a read: each is logged in a :class:`RejectLog` with file, record number,
field and reason, and ``spans in = spans read + spans rejected`` (for logs, the reject log's
``spans`` column counts log records: ``records in = records read + records rejected``).
=======
Every format keeps what it has of a span's events, links and status message (OTLP all of them;
Jaeger logs, references beyond the parent's and ``otel.status_description``; Zipkin annotations and
the ``error`` tag's text; canonical Parquet all of them, CSV the status message): the reader
contract test, ``tests/io/test_contract.py``, lists what each keeps.

Bad records never stop a read: each is logged in a :class:`RejectLog` with file, record number,
field and reason, and ``spans in = spans read + spans rejected``; a malformed event or link is
dropped with a warning, its span kept.

Damaged input is salvaged: a truncated or corrupt gzip file yields every record before the damage
and is reported (file and byte offset) and listed in ``damaged_files``; JSON nested deeper than
:data:`MAX_DEPTH` is rejected record by record before it is parsed, so memory stays linear in
the input and no recursion limit is reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import io
import os
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from .. import schema as S
from ..errors import NoLogsError, NoSpansError, TraceFormatError
from ._builder import RejectLog, SpanBatchBuilder, SpanLimits, normalize_kind, rejects_by_reason
from ._jsondoc import MAX_DEPTH, REST_NOT_READ
from ._logs import LogBatchBuilder, LogLimits, severity_number
from ._source import (FORMATS, LOG_FORMATS, detect_format, expand_paths, is_compressed, is_log_format, open_binary,
                      peek, stream_damage)
from .tabular import PRESETS, TabularMapping

__all__ = [
    "FORMATS", "LOG_FILE_NOTE", "LOG_FORMATS", "LogBatchBuilder", "LogLimits", "LogReadResult", "MAX_DEPTH",
    "PRESETS", "REST_NOT_READ",
    "RejectLog", "SPAN_FILE_NOTE", "SpanBatchBuilder", "SpanLimits", "SpanReadResult", "TabularMapping",
    "detect_format", "expand_paths", "is_log_format", "iter_log_batches", "iter_span_batches", "normalize_kind",
    "read_logs", "read_spans", "rejects_by_reason", "severity_number",
]

Reader = Callable[..., Iterator[pa.RecordBatch]]


def _reader(fmt: str) -> Reader:
    # Imported on use: each format pulls its own dependencies (protobuf, ijson).
    if fmt == "otlp-json":
        from .otlp_json import read_otlp_json as r
    elif fmt == "otlp-proto":
        from .otlp_proto import read_otlp_proto as r
    elif fmt == "jaeger-json":
        from .jaeger import read_jaeger_json as r
    elif fmt == "zipkin-json":
        from .zipkin import read_zipkin_json as r
    elif fmt == "csv":
        from .tabular import read_csv as r
    elif fmt == "parquet":
        from .tabular import read_parquet as r
    elif fmt == "mi-log":
        from .mi_log import read_mi_log as r
    elif fmt == "otlp-logs-json":
        from .otlp_logs import read_otlp_logs_json as r
    elif fmt == "otlp-logs-proto":
        from .otlp_logs import read_otlp_logs_proto as r
    elif fmt == "json-lines-logs":
        from .json_lines_logs import read_json_lines_logs as r
    elif fmt == "nezha-log-csv":
        from .nezha_log import read_nezha_log_csv as r
    else:
        raise TraceFormatError("<format>", f"unknown format {fmt!r}; expected one of "
                                           f"{', '.join(FORMATS + LOG_FORMATS)}")
    return r


@dataclass(frozen=True)
class SpanReadResult:
    """What a read produced.

    Attributes
    ----------
    spans : pyarrow.Table
        The accepted spans, shape (n_spans, 15): in :data:`~tracesleuth.schema.SPAN_SCHEMA` when
        read from files, in :data:`~tracesleuth.schema.DICTIONARY_SPAN_SCHEMA` (the same values,
        names dictionary-encoded) when read from a span store.
    rejects : pyarrow.Table
        One row per rejected record or warning, in :data:`~tracesleuth.schema.REJECT_SCHEMA`
        (for a span store: those recorded by its ingests).
    formats : dict of str to str
        The format read from each file (``"store"`` for a span store).
    spans_rejected : int
        Spans lost with rejected records (``spans in = spans.num_rows + spans_rejected``).
    damaged_files : tuple of str, default=()
        Files that could not be read to their end (truncated or corrupt compressed data, a
        document broken before its end): the spans before the damage are in ``spans``, what
        followed it is unknown. See :func:`iter_span_batches` (its ``damaged``).
    """

    spans: pa.Table
    rejects: pa.Table
    formats: dict
    spans_rejected: int
    damaged_files: tuple = ()

    @property
    def n_spans(self) -> int:
        """Number of spans accepted."""
        return self.spans.num_rows


def iter_span_batches(paths, *, format: str | None = None, mapping: TabularMapping | str | None = None,
                      log: RejectLog | None = None, formats: dict | None = None,
                      batch_spans: int | None = None, damaged: list | None = None,
                      limits: SpanLimits | None = None) -> Iterator[pa.RecordBatch]:
    """Stream spans from ``paths`` as Arrow record batches, file by file.

    Parameters
    ----------
    paths : str, path or list of them
        Files, directories (read recursively) or glob patterns.
    format : str, optional
        Force one of :data:`FORMATS` instead of telling each file's format from its content.
    mapping : TabularMapping or str, optional
        Column mapping (or the name of a preset in :data:`PRESETS`) for CSV/Parquet input;
        by default canonical column names, then each preset, are tried against the header.
    log : RejectLog, optional
        Receives rejected records and file-level problems (unknown format, empty or unreadable
        file: record 0); a new log is used when not given.
    formats : dict, optional
        Filled with ``{file: format}`` as files are opened.
    batch_spans : int, optional
        Spans per batch (default :data:`~tracesleuth.io._builder.BATCH_SPANS`).
    damaged : list, optional
        Filled with the files that could not be read to their end (a truncated or corrupt gzip
        stream, a JSON document or protobuf stream broken before its end, a read error): their
        records before the damage are read, the damage is in ``log`` (record 0 for a
        compressed stream: ``"read stopped early: truncated gzip stream at byte N: ..."``).
    limits : SpanLimits, optional
        Bounds on names and attributes, cut and reported as warnings (default: the OpenTelemetry
        SDK's environment variables, else the SDK's defaults; :meth:`SpanLimits.from_environment`).

    Yields
    ------
    pyarrow.RecordBatch
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`.

    Raises
    ------
    TraceFormatError
        When a path names nothing that exists, or ``format`` is unknown.
    """
    log = RejectLog() if log is None else log
    if format is not None and format not in FORMATS:
        raise TraceFormatError("<format>", f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    if isinstance(mapping, str) and mapping not in PRESETS:
        raise TraceFormatError("<mapping>", f"unknown column mapping {mapping!r}; presets: {', '.join(PRESETS)}")
    limits = SpanLimits.from_environment() if limits is None else limits

    def read_one(path, file_log, file_formats, file_damaged):
        return _read_file(path, format, file_log, file_formats, file_damaged, limits=limits, mapping=mapping,
                          batch_size=batch_spans)

    yield from _iter_files(expand_paths(paths), read_one, log, formats, damaged)


def _iter_files(files: list, read_one: Callable, log: RejectLog, formats: dict | None,
                damaged: list | None) -> Iterator[pa.RecordBatch]:
    """The batches of ``read_one(path, log, formats, damaged)`` over ``files``, in file order:
    small files read ahead on worker threads (their parsing and checks release the GIL), each
    with its own log, merged in file order, so that output and log are those of a serial read."""
    if len(files) <= 1:
        for path in files:
            yield from read_one(path, log, formats, damaged)
        return

    def read_whole(path):
        file_log, file_formats, file_damaged = RejectLog(), {}, []
        batches = list(read_one(path, file_log, file_formats, file_damaged))
        return batches, file_log, file_formats, file_damaged

    ahead: dict = {}
    small = [_small(f) for f in files]
    with ThreadPoolExecutor(PREFETCH_WORKERS, thread_name_prefix="tracesleuth-read") as pool:
        try:
            for i, path in enumerate(files):
                for j in range(i, min(len(files), i + PREFETCH_FILES + 1)):
                    if j not in ahead and small[j]:
                        ahead[j] = pool.submit(read_whole, files[j])
                future = ahead.pop(i, None)
                if future is None:  # a large file streams in this thread
                    yield from read_one(path, log, formats, damaged)
                    continue
                batches, file_log, file_formats, file_damaged = future.result()
                log.merge(file_log)
                if damaged is not None:
                    damaged.extend(file_damaged)
                if formats is not None:
                    formats.update(file_formats)
                yield from batches
        finally:
            for future in ahead.values():
                future.cancel()


#: Small files (at most PREFETCH_MAX_BYTES on disk) are read up to PREFETCH_FILES ahead, on
#: PREFETCH_WORKERS threads (on 2 cores, 4 threads keep both busy: measured with
#: benchmarks/bench_foundation.py on the TrainTicket CSV, 84 files).
PREFETCH_FILES = 4
PREFETCH_WORKERS = 4
PREFETCH_MAX_BYTES = 32 << 20


def _small(path) -> bool:
    try:
        return Path(path).stat().st_size <= PREFETCH_MAX_BYTES
    except OSError:
        return False


def _read_file(path, format, log: RejectLog, formats: dict | None, damaged: list | None, *,
               limits: SpanLimits | LogLimits, mapping=None, batch_size: int | None = None
               ) -> Iterator[pa.RecordBatch]:
    """The spans (``limits`` a :class:`SpanLimits`) or log records (a :class:`LogLimits`) of one
    file. Problems go to ``log``; the file goes to ``damaged`` when it could not be read to its
    end; a file of the other kind is noted (:data:`LOG_FILE_NOTE`, :data:`SPAN_FILE_NOTE`) and
    skipped."""
    logs = isinstance(limits, LogLimits)
    source = str(path)
    first_row = len(log.rows)
    try:
        stream = open_binary(path)
    except OSError as e:
        log.add(source, 0, f"cannot open: {e.strerror or e}", spans=0)
        return
    compressed = is_compressed(stream)
    opened = stream
    stopped = False
    with stream:
        try:
            head, stream = peek(stream)
        except (OSError, EOFError) as e:
            log.add(source, 0, f"cannot read (corrupt compressed data?): {e}", spans=0)
            _mark_damaged(damaged, source)
            return
        if not head.strip():
            damage = stream_damage(opened)
            if damage is not None:
                log.add(source, 0, f"cannot read: {damage}", spans=0)
                _mark_damaged(damaged, source)
            else:
                log.add(source, 0, "empty file", spans=0)
            return
        try:
            fmt = format or detect_format(head, source)
        except TraceFormatError as e:
            log.add(source, 0, str(e).split(": ", 1)[-1], spans=0, excerpt=head[:80])
            damage = stream_damage(opened)
            if damage is not None:  # perhaps too little was left to tell the format
                log.add(source, 0, f"read stopped early: {damage}; {REST_NOT_READ}", spans=0)
                _mark_damaged(damaged, source)
            return
        if is_log_format(fmt) != logs:  # a file of the other kind: the other reader's
            log.add(source, 0, (SPAN_FILE_NOTE if logs else LOG_FILE_NOTE).format(format=fmt), spans=0)
            return
        if formats is not None:
            formats[source] = fmt
        sized = {"batch_records" if logs else "batch_spans": batch_size} if batch_size else {}
        builder = (LogBatchBuilder if logs else SpanBatchBuilder)(source, log, limits=limits, **sized)
        kwargs = {"mapping": mapping} if fmt in ("csv", "parquet") else {}
        if fmt in ("csv", "nezha-log-csv") and compressed:
            kwargs["damaged"] = lambda: stream_damage(opened)
        if fmt == "parquet":  # needs random access: the file itself, or its decompressed bytes
            if compressed:
                stream = io.BytesIO(stream.read())
            else:
                kwargs["source_path"] = path
        n_read = 0
        try:
            for batch in _reader(fmt)(stream, builder, **kwargs):
                n_read += batch.num_rows
                yield batch
        except (OSError, EOFError, TraceFormatError, pa.ArrowInvalid) as e:  # keep what was read so far
            if isinstance(e, TraceFormatError):
                log.add(source, e.record or 0, str(e).split(": ", 1)[-1], field=e.field, spans=0)
            else:
                log.add(source, 0, f"read stopped early: {e}; {REST_NOT_READ}", spans=0)
                stopped = True
            batch = builder.flush()
            if batch is not None:
                n_read += batch.num_rows
                yield batch
        if logs:
            builder.finish()
        damage = stream_damage(opened)
        if damage is not None and not stopped:
            log.add(source, 0, f"read stopped early: {damage}; {REST_NOT_READ}", spans=0)
            stopped = True
        if stopped or any(REST_NOT_READ in row[3] for row in log.rows[first_row:]):
            _mark_damaged(damaged, source)
        elif n_read == 0 and len(log.rows) == first_row:  # say what the file is, not "no input"
            log.add(source, 0, _nothing_in(fmt, head), spans=0)


#: The warning (``spans=0``) for a log file met by the span readers, and for a span file met by
#: the log readers (``{format}`` is its format): the file is the other reader's, nothing is lost.
LOG_FILE_NOTE = "a log file (format {format}): read with read_logs"
SPAN_FILE_NOTE = "a span file (format {format}): read with read_spans"


#: The reason logged for a file that holds no span and nothing to reject, by format.
_EMPTY = {"zipkin-json": "an empty JSON array: no spans", "jaeger-json": "a Jaeger document without traces: no spans",
          "otlp-json": "OTLP requests without spans: no spans", "otlp-proto": "OTLP requests without spans: no spans",
          "csv": "a CSV header without rows: no spans", "parquet": "a Parquet file without rows: no spans",
          "otlp-logs-json": "OTLP requests without log records: no log records",
          "otlp-logs-proto": "OTLP requests without log records: no log records",
          "json-lines-logs": "no log records", "nezha-log-csv": "a CSV header without rows: no log records"}


def _nothing_in(fmt: str, head: bytes) -> str:
    if fmt in ("zipkin-json", "jaeger-json") and b"".join(head.split()) == b"[]":
        return "an empty JSON array: no spans"
    return _EMPTY.get(fmt, "no spans")


def _mark_damaged(damaged: list | None, source: str) -> None:
    if damaged is not None and source not in damaged:
        damaged.append(source)


def read_spans(paths, *, format: str | None = None, mapping: TabularMapping | str | None = None,
               on_batch: Callable[[pa.RecordBatch], None] | None = None,
               limits: SpanLimits | None = None) -> SpanReadResult:
    """Read every span in ``paths`` (trace files or a span store) into one table.

    Parameters
    ----------
    paths : str, path or list of them
        Files, directories (read recursively) or glob patterns, as for :func:`iter_span_batches`;
        or a single span store directory (:func:`tracesleuth.io.store.is_store`), whose spans and
        recorded rejects are read as they are (``format`` and ``mapping`` do not apply).
    format : str, optional
        Force one of :data:`FORMATS` instead of telling each file's format from its content.
    mapping : TabularMapping or str, optional
        Column mapping (or the name of a preset in :data:`PRESETS`) for CSV/Parquet input.
    on_batch : callable, optional
        Called with each :class:`pyarrow.RecordBatch` as it is read (progress reporting); it
        must not modify the batch.
    limits : SpanLimits, optional
        Bounds on names and attributes for trace files, as for :func:`iter_span_batches` (a
        span store's spans were bounded when they were stored).

    Returns
    -------
    SpanReadResult

    Raises
    ------
    NoSpansError
        When not a single span could be read; the message lists the first files' problems
        (or says that the store holds no spans).
    TraceFormatError
        When a path names nothing that exists, a span store is given with other paths, or
        ``format``/``mapping`` is unknown.

    See Also
    --------
    iter_span_batches : the same spans, streamed batch by batch.
    tracesleuth.ingest.ingest : read trace files into a span store.

    Examples
    --------
    >>> from tracesleuth.io import read_spans
    >>> result = read_spans("traces/")                      # doctest: +SKIP
    >>> result.spans.num_rows, result.spans_rejected        # doctest: +SKIP
    (328931, 0)
    >>> read_spans("store/").formats                        # doctest: +SKIP
    {'store/': 'store'}
    """
    store = _store_of(paths)
    if store is not None:
        return _read_store(store, on_batch)
    log = RejectLog()
    formats: dict = {}
    damaged: list = []
    batches = _gathered(iter_span_batches(paths, format=format, mapping=mapping, log=log, formats=formats,
                                          damaged=damaged, limits=limits), on_batch)
    spans = pa.Table.from_batches(batches, schema=S.SPAN_SCHEMA) if batches else S.empty_spans()
    result = SpanReadResult(spans=spans, rejects=log.to_arrow(), formats=formats, spans_rejected=log.spans_rejected,
                            damaged_files=tuple(damaged))
    if spans.num_rows == 0:
        raise NoSpansError(f"no spans could be read from {_describe(paths)}: {_problems(log)}")
    return result


def _store_of(paths):
    """The span store ``paths`` names (a single store directory), None when it names none.

    Raises
    ------
    TraceFormatError
        When a span store is given with other paths.
    """
    from .store import is_store  # imported on first use, like the store's other parts

    listed = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    stores = [p for p in listed if is_store(p)]
    if stores and len(listed) > 1:
        raise TraceFormatError(str(stores[0]), "a span store is read on its own; give it without other paths "
                                               f"(got {len(listed)} paths: {_describe(listed)})")
    return stores[0] if stores else None


def _gathered(batches: Iterator[pa.RecordBatch], on_batch: Callable | None) -> list[pa.RecordBatch]:
    """The batches in a list, each shown to ``on_batch`` as it comes."""
    out = []
    for batch in batches:
        out.append(batch)
        if on_batch is not None:
            on_batch(batch)
    return out


def _problems(log: RejectLog) -> str:
    """The first entries of ``log``, for the message of a read that found nothing."""
    return "; ".join(f"{r[0]} (record {r[1]}): {r[3]}" for r in log.rows[:10]) or "no input files"


def _read_store(path, on_batch) -> SpanReadResult:
    """The spans and recorded rejects of the span store at ``path``."""
    import pyarrow.compute as pc

    from .store import SpanStore

    store = SpanStore(path, create=False)
    spans, rejects = store.read_spans(on_batch=on_batch), store.read_rejects()
    if spans.num_rows == 0:
        raise NoSpansError(f"no spans could be read from {path}: the span store holds no spans")
    return SpanReadResult(spans=spans, rejects=rejects, formats={str(path): "store"},
                          spans_rejected=int(pc.sum(rejects.column("spans")).as_py() or 0))


@dataclass(frozen=True)
class LogReadResult:
    """What a read of log records produced.

    Attributes
    ----------
    logs : pyarrow.Table
        The kept records, shape (n_records, 10), in :data:`~tracesleuth.schema.LOG_SCHEMA`
        (``template_id`` null: :mod:`tracesleuth.io.log_templates` assigns it).
    rejects : pyarrow.Table
        One row per rejected record or warning, in :data:`~tracesleuth.schema.REJECT_SCHEMA`.
        For logs its column ``spans`` counts the *log records* lost with the entry (0 for a
        warning: the record was kept, with the stated change), so
        ``records in = logs.num_rows + records_rejected``.
    formats : dict of str to str
        The format read from each file (one of :data:`LOG_FORMATS`; ``"store"`` for a span store).
    records_rejected : int
        Records lost with rejected entries.
    damaged_files : tuple of str, default=()
        Files that could not be read to their end; their records before the damage are in ``logs``.
    """

    logs: pa.Table
    rejects: pa.Table
    formats: dict
    records_rejected: int
    damaged_files: tuple = ()

    @property
    def n_records(self) -> int:
        """Number of log records kept."""
        return self.logs.num_rows


def iter_log_batches(paths, *, format: str | None = None, log: RejectLog | None = None,
                     formats: dict | None = None, damaged: list | None = None,
                     limits: LogLimits | None = None) -> Iterator[pa.RecordBatch]:
    """Stream log records from ``paths`` as Arrow record batches, file by file.

    The log-record twin of :func:`iter_span_batches`: the same files (directories, globs, gzip
    told by content), the same salvage of damaged files, the same reject log. A span file among
    ``paths`` is not read and not rejected: it gets one warning (:data:`SPAN_FILE_NOTE`,
    ``spans=0``), as :func:`iter_span_batches` notes a log file.

    Parameters
    ----------
    paths : str, path or list of them
        Files, directories (read recursively) or glob patterns.
    format : str, optional
        Force one of :data:`LOG_FORMATS` instead of telling each file's format from its content.
    log : RejectLog, optional
        Receives rejected records (``spans`` = records lost) and warnings; a new log when not given.
    formats : dict, optional
        Filled with ``{file: format}`` for the log files read.
    damaged : list, optional
        Filled with the files that could not be read to their end.
    limits : LogLimits, optional
        Bounds on bodies, names and attributes, cut and reported as warnings (default:
        :meth:`LogLimits.from_environment`).

    Yields
    ------
    pyarrow.RecordBatch
        Records in :data:`~tracesleuth.schema.LOG_SCHEMA`.

    Raises
    ------
    TraceFormatError
        When a path names nothing that exists, or ``format`` is not a log format.
    """
    log = RejectLog() if log is None else log
    if format is not None and format not in LOG_FORMATS:
        raise TraceFormatError("<format>", f"unknown log format {format!r}; expected one of {', '.join(LOG_FORMATS)}")
    limits = LogLimits.from_environment() if limits is None else limits

    def read_one(path, file_log, file_formats, file_damaged):
        return _read_file(path, format, file_log, file_formats, file_damaged, limits=limits)

    yield from _iter_files(expand_paths(paths), read_one, log, formats, damaged)


def read_logs(paths, *, format: str | None = None, limits: LogLimits | None = None,
              on_batch: Callable[[pa.RecordBatch], None] | None = None) -> LogReadResult:
    """Read every log record in ``paths`` (log files, or a span store's logs) into one table.

    Parameters
    ----------
    paths : str, path or list of them
        Files, directories (read recursively) or glob patterns, as for :func:`iter_log_batches`;
        or a single span store directory (:func:`tracesleuth.io.store.is_store`), whose log records
        and recorded rejects are read as stored (``SpanStore.read_logs``).
    format : str, optional
        Force one of :data:`LOG_FORMATS`.
    limits : LogLimits, optional
        Bounds for log files, as for :func:`iter_log_batches`.
    on_batch : callable, optional
        Called with each :class:`pyarrow.RecordBatch` as it is read; it must not modify it.

    Returns
    -------
    LogReadResult

    Raises
    ------
    NoLogsError
        When not a single log record could be read; the message lists the first files' problems.
    TraceFormatError
        When a path names nothing that exists, a span store is given with other paths, the store
        cannot read logs, or ``format`` is not a log format.

    See Also
    --------
    read_spans : the spans of the same files.
    tracesleuth.io.log_templates.LogTemplateMiner : the template of each record's body.

    Examples
    --------
    >>> from tracesleuth.io import read_logs
    >>> result = read_logs("nezha/trainticket/2023-01-29/log/")   # doctest: +SKIP
    >>> result.n_records, result.records_rejected                  # doctest: +SKIP
    (104200, 0)
    """
    store = _store_of(paths)
    if store is not None:
        return _read_store_logs(store, on_batch)
    log = RejectLog()
    formats: dict = {}
    damaged: list = []
    batches = _gathered(iter_log_batches(paths, format=format, log=log, formats=formats, damaged=damaged,
                                         limits=limits), on_batch)
    logs = pa.Table.from_batches(batches, schema=S.LOG_SCHEMA) if batches else S.empty_logs()
    if logs.num_rows == 0:
        raise NoLogsError(f"no log records could be read from {_describe(paths)}: {_problems(log)}")
    return LogReadResult(logs=logs, rejects=log.to_arrow(), formats=formats, records_rejected=log.spans_rejected,
                         damaged_files=tuple(damaged))


def _read_store_logs(path, on_batch) -> LogReadResult:
    """The log records of the span store at ``path``: ``SpanStore.read_logs(on_batch=...)`` (a
    table in :data:`~tracesleuth.schema.LOG_SCHEMA`), and the log rejects its ingests recorded
    (``SpanStore.read_log_rejects()`` when the store has it, in
    :data:`~tracesleuth.schema.REJECT_SCHEMA`, ``spans`` counting records)."""
    import pyarrow.compute as pc

    from .store import SpanStore

    store = SpanStore(path, create=False)
    read = getattr(store, "read_logs", None)
    if read is None:
        raise TraceFormatError(str(path), "this span store keeps no log records (SpanStore.read_logs is missing)")
    logs = read(on_batch=on_batch) if on_batch is not None else read()
    if logs.num_rows == 0:
        raise NoLogsError(f"no log records could be read from {path}: the span store holds no log records")
    read_rejects = getattr(store, "read_log_rejects", None)
    rejects = read_rejects() if read_rejects is not None else S.REJECT_SCHEMA.empty_table()
    return LogReadResult(logs=logs, rejects=rejects, formats={str(path): "store"},
                         records_rejected=int(pc.sum(rejects.column("spans")).as_py() or 0))


def _describe(paths) -> str:
    if isinstance(paths, (str, Path)):
        return str(paths)
    return ", ".join(map(str, paths))
