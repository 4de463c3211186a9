"""The embedded span store: a directory of Parquet files in the canonical span schema.

Layout::

    STORE/
      tracesleuth-store.json     manifest: format version and one entry per ingest
      spans/part-<n>.parquet     spans (SPAN_SCHEMA), append-only
      rejects/part-<n>.parquet   rejected records and warnings (REJECT_SCHEMA)

Parts are written to a temporary name and renamed into place, so a reader never sees a half
file and a crash loses at most the part being written (never one already listed). Any Parquet
reader (polars, DuckDB, Spark) can read ``spans/*.parquet`` directly.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from . import schema as S
from .errors import TraceFormatError

MANIFEST = "tracesleuth-store.json"
STORE_VERSION = 1
#: Spans per Parquet part written by an ingest.
PART_SPANS = 1_000_000
#: Spans per row group of a part (batches are gathered up to about this many).
ROW_GROUP_SPANS = 131_072
#: How span parts are encoded: zstd; dictionary pages only for the columns of few distinct values
#: (names, kinds, attribute keys), whose files they shrink, not for ids and times, where they
#: only cost time; min/max statistics for the columns a query filters on.
SPAN_PARQUET_OPTIONS = dict(
    compression="zstd",
    use_dictionary=[S.SERVICE, S.OPERATION, S.INSTANCE, S.KIND, S.STATUS,
                    f"{S.ATTRIBUTES}.list.element.key", f"{S.ATTRIBUTES}.list.element.str"],
    write_statistics=[S.TRACE_ID, S.SERVICE, S.OPERATION, S.START_NS, S.END_NS],
)


def is_store(path) -> bool:
    """Whether ``path`` is a span store directory."""
    return (Path(path) / MANIFEST).is_file()


@dataclass(frozen=True)
class IngestSummary:
    """Counts of one ingest: spans read, spans rejected, parts written, files by format.

    Attributes
    ----------
    spans_read, spans_rejected : int
        Spans stored and spans lost with rejected records (``spans in = read + rejected``).
    rejected_records, warnings : int
        Records that lost spans, and entries where the span was kept with a stated change.
    parts : tuple of str
        The span parts written, relative to the store directory.
    formats : dict of str to str
        The format read from each file.
    reasons : list of dict
        Rejects grouped by reason, as :func:`tracesleuth.io.rejects_by_reason` gives them.
    seconds : float
        Wall time of the ingest.
    """

    spans_read: int
    spans_rejected: int
    rejected_records: int
    warnings: int
    parts: tuple
    formats: dict
    reasons: list
    seconds: float

    def to_dict(self) -> dict:
        """JSON-safe dictionary."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"parts": list(self.parts)}


class SpanStore:
    """A span store directory (created on first use).

    Parameters
    ----------
    path : str or Path
        The store directory.

    Raises
    ------
    TraceFormatError
        When ``path`` exists, is not empty and is not a store (nothing is overwritten).
    """

    def __init__(self, path, *, create: bool = True):
        self.path = Path(path)
        if is_store(self.path):
            meta = json.loads((self.path / MANIFEST).read_text())
            if meta.get("version") != STORE_VERSION:
                raise TraceFormatError(str(self.path), f"store version {meta.get('version')!r} is not "
                                                       f"{STORE_VERSION}")
            return
        if not create:
            raise TraceFormatError(str(self.path), "not a tracesleuth span store (no manifest)")
        if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise TraceFormatError(str(self.path), "exists and is not a span store; refusing to write into it")
        (self.path / "spans").mkdir(parents=True, exist_ok=True)
        (self.path / "rejects").mkdir(parents=True, exist_ok=True)
        self._write_manifest({"version": STORE_VERSION, "created": time.time(), "ingests": []})

    # -- manifest -----------------------------------------------------------------------
    def _write_manifest(self, meta: dict) -> None:
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, self.path / MANIFEST)

    def manifest(self) -> dict:
        """The manifest: version, creation time, one entry per ingest."""
        return json.loads((self.path / MANIFEST).read_text())

    # -- writing -----------------------------------------------------------------------
    def _next_part(self, kind: str) -> Path:
        existing = [int(p.stem.split("-")[1]) for p in (self.path / kind).glob("part-*.parquet")]
        return self.path / kind / f"part-{max(existing, default=-1) + 1:06d}.parquet"

    def _write_part(self, kind: str, table: pa.Table) -> Path:
        final = self._next_part(kind)
        tmp = _tmp_name(final)
        pq.write_table(table, tmp, compression="zstd")
        _publish(tmp, final)
        return final

    def append_spans(self, batches: Iterable[pa.RecordBatch], *, part_spans: int = PART_SPANS) -> list[Path]:
        """Append spans, writing a new part each ``part_spans`` spans. Returns the parts written.

        Batches are gathered into row groups of about :data:`ROW_GROUP_SPANS` spans, each encoded
        and compressed by a background thread while the next ones are read (at most one row
        group waits), so reading and writing overlap. A part appears under its final name only
        once complete; on an error the part being written is removed.
        """
        parts: list[Path] = []
        part: _PartWriter | None = None
        pending: list[pa.RecordBatch] = []
        held = 0
        with ThreadPoolExecutor(1, thread_name_prefix="tracesleuth-store") as pool:
            try:
                for batch in batches:
                    if batch.num_rows == 0:
                        continue
                    pending.append(batch)
                    held += batch.num_rows
                    if held < ROW_GROUP_SPANS and (part.spans if part else 0) + held < part_spans:
                        continue
                    if part is None:
                        part = _PartWriter(self._next_part("spans") if not parts else _following(parts[-1]), pool)
                    part.write(pending)
                    pending, held = [], 0
                    if part.spans >= part_spans:
                        parts.append(part.publish())
                        part = None
                if pending:
                    if part is None:
                        part = _PartWriter(self._next_part("spans") if not parts else _following(parts[-1]), pool)
                    part.write(pending)
                if part is not None:
                    parts.append(part.publish())
                    part = None
            finally:
                if part is not None:  # an error: drop the unfinished part
                    part.discard()
        return parts

    def append_rejects(self, rejects: pa.Table) -> Path | None:
        """Append rejected-record rows (REJECT_SCHEMA)."""
        return self._write_part("rejects", rejects) if rejects.num_rows else None

    def record_ingest(self, entry: dict) -> None:
        """Add an ingest entry to the manifest."""
        meta = self.manifest()
        meta["ingests"].append(entry)
        self._write_manifest(meta)

    # -- reading -----------------------------------------------------------------------
    def span_files(self) -> list[Path]:
        """The span parts, in order."""
        return sorted((self.path / "spans").glob("part-*.parquet"))

    def scan(self) -> pl.LazyFrame:
        """All spans as a polars LazyFrame (nothing read until collected)."""
        files = self.span_files()
        if not files:
            return pl.from_arrow(S.empty_spans()).lazy()  # type: ignore[union-attr]
        return pl.scan_parquet([str(f) for f in files])

    def read_spans(self, *, dictionary: bool = True, on_batch=None) -> pa.Table:
        """All spans as one Arrow table, in part order.

        Parameters
        ----------
        dictionary : bool, default=True
            Read :data:`~tracesleuth.schema.DICTIONARY_COLUMNS` dictionary-encoded
            (:data:`~tracesleuth.schema.DICTIONARY_SPAN_SCHEMA`), else as plain strings
            (:data:`~tracesleuth.schema.SPAN_SCHEMA`).
        on_batch : callable, optional
            Called with each record batch as it is read (progress reporting).

        Notes
        -----
        The spans are allocated by the system allocator, not Arrow's default (mimalloc), which
        keeps the Parquet decoder's freed buffers. Reading the TrainTicket day (65 MB of Arrow
        as plain strings, 26.5 MB dictionary-encoded) then peaks 52 MB above where it started,
        instead of 85 MB with ``pyarrow.parquet.read_table`` on Arrow's default allocator.
        """
        files = self.span_files()
        if not files:
            return (S.DICTIONARY_SPAN_SCHEMA if dictionary else S.SPAN_SCHEMA).empty_table()
        columns = S.DICTIONARY_COLUMNS if dictionary else ()
        schema = S.DICTIONARY_SPAN_SCHEMA if dictionary else S.SPAN_SCHEMA
        parts = ds.dataset([str(f) for f in files], schema=schema,
                           format=ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=columns)))
        if on_batch is None:
            return parts.to_table(memory_pool=pa.system_memory_pool())
        batches = []
        for batch in parts.to_batches(memory_pool=pa.system_memory_pool()):
            batches.append(batch)
            on_batch(batch)
        return pa.Table.from_batches(batches, schema=schema)

    def read_rejects(self) -> pa.Table:
        """Every rejected-record row of every ingest."""
        files = sorted((self.path / "rejects").glob("part-*.parquet"))
        if not files:
            return S.REJECT_SCHEMA.empty_table()
        return pa.concat_tables([pq.read_table(f, schema=S.REJECT_SCHEMA) for f in files])


class _PartWriter:
    """One span part being written row group by row group on ``pool`` (one group in flight)."""

    def __init__(self, final: Path, pool: ThreadPoolExecutor):
        self.final, self.tmp, self.pool = final, _tmp_name(final), pool
        self.writer = pq.ParquetWriter(self.tmp, S.SPAN_SCHEMA, **SPAN_PARQUET_OPTIONS)
        self.in_flight = None
        self.spans = 0

    def write(self, batches: list[pa.RecordBatch]) -> None:
        table = pa.Table.from_batches(batches, schema=S.SPAN_SCHEMA)
        self.wait()
        self.in_flight = self.pool.submit(self.writer.write_table, table, row_group_size=table.num_rows)
        self.spans += table.num_rows

    def wait(self) -> None:
        if self.in_flight is not None:
            in_flight, self.in_flight = self.in_flight, None
            in_flight.result()

    def publish(self) -> Path:
        self.wait()
        self.writer.close()
        _publish(self.tmp, self.final)
        return self.final

    def discard(self) -> None:
        if self.in_flight is not None:
            self.in_flight.exception()  # wait, whatever happened
        self.writer.close()
        self.tmp.unlink(missing_ok=True)


def _tmp_name(final: Path) -> Path:
    return final.with_name("." + final.name + ".tmp")


def _following(part: Path) -> Path:
    """The part name after ``part``."""
    return part.with_name(f"part-{int(part.stem.split('-')[1]) + 1:06d}.parquet")


def _publish(tmp: Path, final: Path) -> None:
    """Make a written part durable and visible under its final name."""
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)


def ingest(paths, store: SpanStore | str | os.PathLike, *, format: str | None = None, mapping=None,
           on_batch=None) -> IngestSummary:
    """Read trace files and append their spans to a span store, streaming.

    Parameters
    ----------
    paths : str, path or list
        Files, directories or glob patterns (see :func:`tracesleuth.io.iter_span_batches`).
    store : SpanStore or path
        Destination, created when absent, once every path is known to name something (a
        mistyped path leaves no store behind).
    format, mapping
        As for :func:`tracesleuth.io.read_spans`.
    on_batch : callable, optional
        Called with each record batch (progress reporting).

    Returns
    -------
    IngestSummary

    Raises
    ------
    TraceFormatError
        When a path names nothing that exists (before the store is created), or ``store``
        exists and is not a span store.
    """
    from .io import RejectLog, expand_paths, iter_span_batches, rejects_by_reason

    files = expand_paths(paths)
    store = store if isinstance(store, SpanStore) else SpanStore(store)
    log, formats = RejectLog(), {}
    t0 = time.perf_counter()

    def batches():
        for b in iter_span_batches(files, format=format, mapping=mapping, log=log, formats=formats):
            if on_batch is not None:
                on_batch(b)
            yield b

    parts = store.append_spans(batches())
    rejects = log.to_arrow()
    store.append_rejects(rejects)
    summary = IngestSummary(
        spans_read=sum(log.spans_read.values()), spans_rejected=log.spans_rejected,
        rejected_records=log.n_rejected_records, warnings=log.n_warnings,
        parts=tuple(str(p.relative_to(store.path)) for p in parts), formats=formats,
        reasons=rejects_by_reason(rejects),
        seconds=time.perf_counter() - t0,
    )
    store.record_ingest({"time": time.time(), "paths": [str(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])],
                         "spans_read": summary.spans_read, "spans_rejected": summary.spans_rejected,
                         "parts": list(summary.parts)})
    return summary
