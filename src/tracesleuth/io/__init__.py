"""Readers: trace files in, spans in the canonical schema out (:mod:`tracesleuth.schema`).

One entry point, :func:`read_spans` (or :func:`iter_span_batches` to stream), for every format.
The format of each file is told from its content, not its name (:func:`detect_format`); gzip is
decompressed transparently; a path may be a file, a directory or a glob pattern, and
:func:`read_spans` also reads a span store directory (:mod:`tracesleuth.store`). Formats:

=============== ==========================================================================
``otlp-json``    OTLP JSON: the collector file exporter's lines, or an OTLP/HTTP JSON body
``otlp-proto``   OTLP protobuf: an ``ExportTraceServiceRequest``, or length-prefixed messages
``jaeger-json``  Jaeger JSON: UI download or query API ``{"data": [...]}`` with ``processes``
``zipkin-json``  Zipkin v2 JSON span list
``csv``          span CSV with a column mapping (:class:`TabularMapping`; presets built in)
``parquet``      span Parquet, canonical columns or a column mapping
``mi-log``       request trace log of Mi et al. 2012 (``T_ID:``, ``FUNC:<method>_start|_end``)
=============== ==========================================================================

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
from ..errors import NoSpansError, TraceFormatError
from ._builder import RejectLog, SpanBatchBuilder, SpanLimits, normalize_kind, rejects_by_reason
from ._jsondoc import MAX_DEPTH, REST_NOT_READ
from ._source import FORMATS, detect_format, expand_paths, is_compressed, open_binary, peek, stream_damage
from .tabular import PRESETS, TabularMapping

__all__ = [
    "FORMATS", "MAX_DEPTH", "PRESETS", "REST_NOT_READ", "RejectLog", "SpanBatchBuilder", "SpanLimits", "SpanReadResult",
    "TabularMapping",
    "detect_format", "expand_paths", "iter_span_batches", "normalize_kind", "read_spans", "rejects_by_reason",
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
    else:
        raise TraceFormatError("<format>", f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
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
    files = list(expand_paths(paths))
    if len(files) <= 1:
        for path in files:
            yield from _read_file(path, format, mapping, log, formats, batch_spans, limits, damaged)
        return

    def read_whole(path):
        file_log, file_formats, file_damaged = RejectLog(), {}, []
        batches = list(_read_file(path, format, mapping, file_log, file_formats, batch_spans, limits, file_damaged))
        return batches, file_log, file_formats, file_damaged

    # Small files are read ahead on worker threads (their parsing and checks release the GIL),
    # each with its own log, merged in file order: output and log are those of a serial read.
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
                    yield from _read_file(path, format, mapping, log, formats, batch_spans, limits, damaged)
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


def _read_file(path, format, mapping, log: RejectLog, formats: dict | None, batch_spans: int | None,
               limits: SpanLimits, damaged: list | None = None) -> Iterator[pa.RecordBatch]:
    """The spans of one file (problems go to ``log``; the file goes to ``damaged`` when it could
    not be read to its end)."""
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
        if formats is not None:
            formats[source] = fmt
        builder = SpanBatchBuilder(source, log, limits=limits, **({"batch_spans": batch_spans} if batch_spans else {}))
        kwargs = {"mapping": mapping} if fmt in ("csv", "parquet") else {}
        if fmt == "csv" and compressed:
            kwargs["damaged"] = lambda: stream_damage(opened)
        if fmt == "parquet":  # needs random access: the file itself, or its decompressed bytes
            if compressed:
                stream = io.BytesIO(stream.read())
            else:
                kwargs["source_path"] = path
        n_spans = 0
        try:
            for batch in _reader(fmt)(stream, builder, **kwargs):
                n_spans += batch.num_rows
                yield batch
        except (OSError, EOFError, TraceFormatError, pa.ArrowInvalid) as e:  # keep what was read so far
            if isinstance(e, TraceFormatError):
                log.add(source, e.record or 0, str(e).split(": ", 1)[-1], field=e.field, spans=0)
            else:
                log.add(source, 0, f"read stopped early: {e}; {REST_NOT_READ}", spans=0)
                stopped = True
            batch = builder.flush()
            if batch is not None:
                n_spans += batch.num_rows
                yield batch
        damage = stream_damage(opened)
        if damage is not None and not stopped:
            log.add(source, 0, f"read stopped early: {damage}; {REST_NOT_READ}", spans=0)
            stopped = True
        if stopped or any(REST_NOT_READ in row[3] for row in log.rows[first_row:]):
            _mark_damaged(damaged, source)
        elif n_spans == 0 and len(log.rows) == first_row:  # say what the file is, not "no input"
            log.add(source, 0, _nothing_in(fmt, head), spans=0)


#: The reason logged for a file that holds no span and nothing to reject, by format.
_EMPTY = {"zipkin-json": "an empty JSON array: no spans", "jaeger-json": "a Jaeger document without traces: no spans",
          "otlp-json": "OTLP requests without spans: no spans", "otlp-proto": "OTLP requests without spans: no spans",
          "csv": "a CSV header without rows: no spans", "parquet": "a Parquet file without rows: no spans"}


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
        or a single span store directory (:func:`tracesleuth.store.is_store`), whose spans and
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
    tracesleuth.store.ingest : read trace files into a span store.

    Examples
    --------
    >>> from tracesleuth.io import read_spans
    >>> result = read_spans("traces/")                      # doctest: +SKIP
    >>> result.spans.num_rows, result.spans_rejected        # doctest: +SKIP
    (328931, 0)
    >>> read_spans("store/").formats                        # doctest: +SKIP
    {'store/': 'store'}
    """
    from ..store import is_store  # imported here: the store imports this package

    listed = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    stores = [p for p in listed if is_store(p)]
    if stores:
        if len(listed) > 1:
            raise TraceFormatError(str(stores[0]), "a span store is read on its own; give it without other paths "
                                                   f"(got {len(listed)} paths: {_describe(listed)})")
        return _read_store(stores[0], on_batch)
    log = RejectLog()
    formats: dict = {}
    damaged: list = []
    batches = []
    for batch in iter_span_batches(paths, format=format, mapping=mapping, log=log, formats=formats,
                                   damaged=damaged, limits=limits):
        batches.append(batch)
        if on_batch is not None:
            on_batch(batch)
    spans = pa.Table.from_batches(batches, schema=S.SPAN_SCHEMA) if batches else S.empty_spans()
    result = SpanReadResult(spans=spans, rejects=log.to_arrow(), formats=formats, spans_rejected=log.spans_rejected,
                            damaged_files=tuple(damaged))
    if spans.num_rows == 0:
        problems = "; ".join(f"{r[0]} (record {r[1]}): {r[3]}" for r in log.rows[:10]) or "no input files"
        raise NoSpansError(f"no spans could be read from {_describe(paths)}: {problems}")
    return result


def _read_store(path, on_batch) -> SpanReadResult:
    """The spans and recorded rejects of the span store at ``path``."""
    import pyarrow.compute as pc

    from ..store import SpanStore

    store = SpanStore(path, create=False)
    spans, rejects = store.read_spans(on_batch=on_batch), store.read_rejects()
    if spans.num_rows == 0:
        raise NoSpansError(f"no spans could be read from {path}: the span store holds no spans")
    return SpanReadResult(spans=spans, rejects=rejects, formats={str(path): "store"},
                          spans_rejected=int(pc.sum(rejects.column("spans")).as_py() or 0))


def _describe(paths) -> str:
    if isinstance(paths, (str, Path)):
        return str(paths)
    return ", ".join(map(str, paths))
