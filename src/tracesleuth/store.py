"""The embedded span store: a directory of Parquet files in the canonical span schema.

Layout (version 2)::

    STORE/
      tracesleuth-store.json     manifest: format version (2) and one entry per ingest
      tracesleuth-store.lock     the writers' lock (``flock``); empty
      spans/date=<YYYY-MM-DD>/hour=<HH>/part-<n>.parquet
                                 spans (SPAN_SCHEMA) that start in that hour (UTC), append-only
      rejects/part-<n>.parquet   rejected records and warnings (REJECT_SCHEMA)

The span parts are partitioned Hive-style by the hour their spans start in (``start_ns``, UTC):
every span of ``spans/date=2023-01-29/hour=08/`` starts in ``[08:00, 09:00)`` of 2023-01-29. Any
Parquet reader that knows Hive partitions reads them directly and can skip hours by the two
partition columns (strings), e.g. ``dask.dataframe.read_parquet("STORE/spans", filters=[("date",
"==", "2023-01-29"), ("hour", ">=", "08")])``, polars ``scan_parquet("STORE/spans/**/*.parquet",
hive_partitioning=True)``, DuckDB ``read_parquet('STORE/spans/*/*/*.parquet',
hive_partitioning=true)``, Spark. The columns of a part are exactly :data:`SPAN_SCHEMA` (the
partition columns are in the path only). A trace whose spans start in several hours has spans in
several partitions: partitions are by time, not by trace (:mod:`tracesleuth.scale` shuffles them
by trace id). Stores of version 1 (written before partitions) keep their flat layout,
``spans/part-<n>.parquet``; they are read, and appended to, as before.

Many writers may share a store at once (several ``tracesleuth ingest`` runs and a
``tracesleuth collect``, in any number of processes):

- A part number is *reserved* under the store lock (an exclusive ``fcntl.flock`` on
  ``tracesleuth-store.lock``, held for the few microseconds of a directory listing and a file
  creation): the writer takes one more than the highest number named by a part or a part being
  written, and creates that part's temporary file, ``.part-<n>.parquet.tmp``, with ``O_EXCL``.
  Only that writer ever writes this temporary file or the part it becomes.
- A part is *published* atomically: written under its temporary name, fsynced, renamed to its
  final name (under the lock, so that a reservation's listing never misses a part being
  renamed), and its directory fsynced. A reader lists ``part-*.parquet`` only, which a temporary
  name never matches, so it never sees a half-written part; a crash loses at most the parts
  being written (their temporary files stay behind, never read).
- The manifest is read, changed and replaced (temporary file, fsync, rename) under the lock, so
  no ingest's entry is lost; each entry names the parts that ingest wrote and the spans it read.
- A new store is created under the lock too, so simultaneous first writers agree on one store.

Part numbers are unique across a store and give the order of the parts (the order of their
reservation); a reservation lists every partition of its kind.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from . import schema as S
from .errors import TraceFormatError

MANIFEST = "tracesleuth-store.json"
#: The writers' lock file (see the module docstring).
LOCK = "tracesleuth-store.lock"
#: The version new stores are written in (2: span parts partitioned by hour).
STORE_VERSION = 2
#: Versions read (and appended to, each in its own layout): 1, flat; 2, partitioned by hour.
READABLE_VERSIONS = (1, 2)
#: The span parts' layout of each store version.
LAYOUTS = {1: "flat", 2: "hour"}
#: Nanoseconds per partition (an hour).
PARTITION_NS = 3_600_000_000_000
#: Partitions a writer keeps a part open in at once (spans of more hours close the least recent).
MAX_OPEN_PARTITIONS = 8
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


#: Rejected records an ingest summary shows as examples at most.
MAX_EXAMPLES = 10


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
    damaged_files : tuple of str
        Files not read to their end (truncated or corrupt compressed data, a document broken
        before its end): the records after the damage are lost, and a reject says where.
    examples : list of dict
        This ingest's first rejected records and warnings (rows of
        :data:`~tracesleuth.schema.REJECT_SCHEMA`); other writers' rejects in the same store are
        not among them.
    """

    spans_read: int
    spans_rejected: int
    rejected_records: int
    warnings: int
    parts: tuple
    formats: dict
    reasons: list
    seconds: float
    damaged_files: tuple = ()
    examples: list = ()

    def to_dict(self) -> dict:
        """JSON-safe dictionary."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {
            "parts": list(self.parts), "damaged_files": list(self.damaged_files), "examples": list(self.examples)}


class SpanStore:
    """A span store directory (created on first use).

    Parameters
    ----------
    path : str or Path
        The store directory.

    create : bool, default=True
        Create the store when ``path`` is absent or an empty directory; else it must be a store.

    Raises
    ------
    TraceFormatError
        When ``path`` exists, is not empty and is not a store (nothing is overwritten), or is
        not a store and ``create`` is false.

    Notes
    -----
    Any number of writers, in any number of processes, may append to one store at the same
    time, and may create it at the same time: part names are reserved and parts published under
    the store lock, and the manifest is changed under it (see :mod:`tracesleuth.store`).
    Readers take no lock and see only whole parts.
    """

    def __init__(self, path, *, create: bool = True):
        self.path = Path(path)
        self._layout: str | None = None
        if is_store(self.path):
            self._check_version()
            return
        if not create:
            raise TraceFormatError(str(self.path), "not a tracesleuth span store (no manifest)")
        self._refuse_foreign()
        self.path.mkdir(parents=True, exist_ok=True)
        with self._locked():  # another writer may be creating it at the same moment
            if is_store(self.path):
                self._check_version()
                return
            self._refuse_foreign()
            (self.path / "spans").mkdir(exist_ok=True)
            (self.path / "rejects").mkdir(exist_ok=True)
            self._write_manifest({"version": STORE_VERSION, "created": time.time(), "ingests": []})

    def _check_version(self) -> None:
        version = self.manifest().get("version")
        if version not in READABLE_VERSIONS:
            raise TraceFormatError(str(self.path), f"store version {version!r} is not one of "
                                   f"{', '.join(map(str, READABLE_VERSIONS))} (written by a newer tracesleuth?)")

    @property
    def layout(self) -> str:
        """How the span parts are laid out: ``"hour"`` (Hive partitions by start hour) or ``"flat"``."""
        if self._layout is None:
            self._layout = LAYOUTS[self.manifest()["version"]]
        return self._layout

    def _refuse_foreign(self) -> None:
        """Raise unless ``path`` is absent, empty, holds only what creating a store makes, or has
        meanwhile become a store (created by another writer)."""
        if not self.path.exists():
            return
        foreign = not self.path.is_dir() or any(
            e.name not in _CREATION_NAMES or (e.is_dir() and any(e.iterdir())) for e in self.path.iterdir())
        if foreign and not is_store(self.path):
            raise TraceFormatError(str(self.path), "exists and is not a span store; refusing to write into it")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store lock (exclusive ``flock`` on :data:`LOCK`; blocks while another writer holds it)."""
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # -- manifest -----------------------------------------------------------------------
    def _write_manifest(self, meta: dict) -> None:
        """Replace the manifest atomically and durably (call with the store lock held)."""
        tmp = self.path / (MANIFEST + ".tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(meta, indent=1))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / MANIFEST)
        fsync_dir(self.path)

    def manifest(self) -> dict:
        """The manifest: version, creation time, one entry per ingest."""
        return json.loads((self.path / MANIFEST).read_text())

    # -- writing -----------------------------------------------------------------------
    def _part_name(self, number: int) -> str:
        """The file name of part ``number`` (subclasses add to it; it must start ``part-<number>``)."""
        return f"part-{number:06d}.parquet"

    def _next_part(self, kind: str, partition: str | None = None) -> Path:
        """Reserve the next part of ``kind`` (``spans``/``rejects``) for this writer alone.

        Under the store lock: one more than the highest number named by a part or a part being
        written in any partition of ``kind``, whose temporary file (:func:`_tmp_name`) is created
        empty with ``O_EXCL`` in ``kind/partition``. The caller writes that temporary file, then
        publishes it (:meth:`_publish`) or removes it.

        Returns
        -------
        Path
            The part's final name (not yet existing).
        """
        top = self.path / kind
        folder = top if partition is None else top / partition
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            for made in (folder.parent, top):  # the new directories' entries made durable
                fsync_dir(made)
        with self._locked():
            numbers = [int(m.group(1)) for _, _, names in os.walk(top) for m in map(_PART_NUMBER.match, names) if m]
            number = max(numbers, default=-1) + 1
            while True:  # O_EXCL: even a writer that ignores the lock cannot share the file
                final = folder / self._part_name(number)
                try:
                    os.close(os.open(_tmp_name(final), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                    return final
                except FileExistsError:
                    number += 1

    def _publish(self, final: Path) -> Path:
        """Make a reserved part durable and visible under its final name (see the module docstring)."""
        tmp = _tmp_name(final)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        with self._locked():
            os.replace(tmp, final)
        fsync_dir(final.parent)
        return final

    def _write_part(self, kind: str, table: pa.Table) -> Path:
        final = self._next_part(kind)
        try:
            pq.write_table(table, _tmp_name(final), compression="zstd")
        except BaseException:
            _tmp_name(final).unlink(missing_ok=True)
            raise
        return self._publish(final)

    def append_spans(self, batches: Iterable[pa.RecordBatch], *, part_spans: int = PART_SPANS) -> list[Path]:
        """Append spans, writing a new part each ``part_spans`` spans. Returns the parts written.

        Batches are gathered into row groups of about :data:`ROW_GROUP_SPANS` spans, each encoded
        and compressed by a background thread while the next ones are read (at most one row
        group waits), so reading and writing overlap. A part appears under its final name only
        once complete; on an error the parts being written are removed. Each part's name is
        reserved when it is begun, so other writers of the store may append at the same time.

        In a store partitioned by hour (:attr:`layout` ``"hour"``) each batch is split by the
        hour its spans start in, and each hour gets parts of its own. At most
        :data:`MAX_OPEN_PARTITIONS` parts are open at once (spans of one more hour publish the
        least recently written part first), and the spans waiting for a row group over all
        hours are at most about ``2 * ROW_GROUP_SPANS``.
        """
        parts: list[Path] = []
        open_parts: dict[str | None, _Partition] = {}  # least recently written first
        with ThreadPoolExecutor(1, thread_name_prefix="tracesleuth-store") as pool:
            try:
                for batch in batches:
                    if batch.num_rows == 0:
                        continue
                    for name, piece in self._by_partition(batch):
                        partition = open_parts.pop(name, None) or _Partition(self, name, pool, part_spans)
                        open_parts[name] = partition
                        parts += partition.add(piece)
                    while sum(p.held for p in open_parts.values()) > 2 * ROW_GROUP_SPANS:
                        parts += max(open_parts.values(), key=lambda p: p.held).write()
                    while sum(p.part is not None for p in open_parts.values()) > MAX_OPEN_PARTITIONS:
                        parts += open_parts.pop(next(n for n, p in open_parts.items() if p.part is not None)).close()
                while open_parts:
                    parts += open_parts.pop(next(iter(open_parts))).close()
            finally:
                for partition in open_parts.values():  # an error: drop the unfinished parts
                    partition.discard()
        return parts

    def _by_partition(self, batch: pa.RecordBatch) -> Iterator[tuple[str | None, pa.RecordBatch]]:
        """``(partition, spans)`` of a batch: one piece per hour its spans start in (``None``, the
        whole batch, in a flat store)."""
        if self.layout == "flat":
            yield None, batch
            return
        hours = batch.column(S.START_NS).to_numpy(zero_copy_only=False) // PARTITION_NS
        if hours.min() == hours.max():
            yield partition_name(int(hours[0])), batch
            return
        order = np.argsort(hours, kind="stable")
        cuts = np.flatnonzero(np.diff(hours[order])) + 1
        for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(order)]):
            yield partition_name(int(hours[order[a]])), batch.take(pa.array(order[a:b]))

    def _skip_partition(self, partition: str | None) -> bool:
        """Whether spans of ``partition`` are not to be written by this append (a subclass's hook)."""
        return False

    def append_rejects(self, rejects: pa.Table) -> Path | None:
        """Append rejected-record rows (REJECT_SCHEMA)."""
        return self._write_part("rejects", rejects) if rejects.num_rows else None

    def record_ingest(self, entry: dict) -> None:
        """Add an ingest entry to the manifest (read, changed and replaced under the store lock,
        so entries added by simultaneous writers are all kept)."""
        with self._locked():
            meta = self.manifest()
            meta["ingests"].append(entry)
            self._write_manifest(meta)

    # -- reading -----------------------------------------------------------------------
    def span_files(self) -> list[Path]:
        """The span parts, in order (by hour, then by number)."""
        top = self.path / "spans"
        return sorted(top.glob("part-*.parquet")) + sorted(top.glob("date=*/hour=*/part-*.parquet"))

    def scan(self) -> pl.LazyFrame:
        """All spans as a polars LazyFrame (nothing read until collected); the columns a part
        written before events and links were kept lacks (:data:`~tracesleuth.schema.LATER_SPAN_COLUMNS`)
        read as null."""
        empty = pl.from_arrow(S.empty_spans())
        files = self.span_files()
        if not files:
            return empty.lazy()  # type: ignore[union-attr]
        return pl.scan_parquet([str(f) for f in files], schema=empty.schema, missing_columns="insert")

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
        A part written before events, links and status messages were kept lacks those columns
        (:data:`~tracesleuth.schema.LATER_SPAN_COLUMNS`): its spans read with them null.

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
    """One span part of ``store`` (reserved on creation) being written row group by row group on
    ``pool`` (one group in flight)."""

    def __init__(self, store: SpanStore, pool: ThreadPoolExecutor, partition: str | None = None):
        self.store, self.pool = store, pool
        self.final = store._next_part("spans", partition)
        self.tmp = _tmp_name(self.final)
        try:
            self.writer = pq.ParquetWriter(self.tmp, S.SPAN_SCHEMA, **SPAN_PARQUET_OPTIONS)
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise
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
        return self.store._publish(self.final)

    def discard(self) -> None:
        if self.in_flight is not None:
            self.in_flight.exception()  # wait, whatever happened
        self.writer.close()
        self.tmp.unlink(missing_ok=True)


class _Partition:
    """The spans of one partition of an :meth:`SpanStore.append_spans` call: those waiting for a row
    group, and the part being written (reserved when its first row group is written)."""

    def __init__(self, store: SpanStore, name: str | None, pool: ThreadPoolExecutor, part_spans: int):
        self.store, self.name, self.pool, self.part_spans = store, name, pool, part_spans
        self.skip = store._skip_partition(name)
        self.pending: list[pa.RecordBatch] = []
        self.held = 0
        self.part: _PartWriter | None = None

    def add(self, batch: pa.RecordBatch) -> list[Path]:
        """Take a batch; write a row group when enough spans wait. Returns the parts published."""
        if self.skip:
            return []
        self.pending.append(batch)
        self.held += batch.num_rows
        if self.held < ROW_GROUP_SPANS and (self.part.spans if self.part else 0) + self.held < self.part_spans:
            return []
        return self.write()

    def write(self) -> list[Path]:
        """Write the waiting spans as a row group; publish the part once it is full."""
        if not self.pending:
            return []
        if self.part is None:
            self.part = _PartWriter(self.store, self.pool, self.name)
        self.part.write(self.pending)
        self.pending, self.held = [], 0
        if self.part.spans < self.part_spans:
            return []
        part, self.part = self.part, None
        return [part.publish()]

    def close(self) -> list[Path]:
        """Write what waits and publish the part."""
        parts = self.write()
        if self.part is not None:
            part, self.part = self.part, None
            parts.append(part.publish())
        return parts

    def discard(self) -> None:
        if self.part is not None:
            self.part.discard()


def partition_name(hour: int) -> str:
    """The Hive partition (``date=YYYY-MM-DD/hour=HH``, UTC) of the hour ``hour`` since the epoch
    (``start_ns // PARTITION_NS``)."""
    moment = datetime.fromtimestamp(hour * 3600, tz=timezone.utc)
    return f"date={moment:%Y-%m-%d}/hour={moment:%H}"


#: The number of a part or of a part being written: ``part-000007.parquet``,
#: ``part-000007-seg-000000000042.parquet``, ``.part-000007.parquet.tmp``.
_PART_NUMBER = re.compile(r"\.?part-(\d+)")
#: What creating a store makes in its directory before the manifest (a crash may leave these).
_CREATION_NAMES = frozenset({LOCK, MANIFEST + ".tmp", "spans", "rejects"})


def _tmp_name(final: Path) -> Path:
    """The temporary name of a part being written (never matched by ``part-*.parquet``)."""
    return final.with_name("." + final.name + ".tmp")


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (created, renamed, deleted files) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    log, formats, damaged = RejectLog(), {}, []
    t0 = time.perf_counter()

    def batches():
        for b in iter_span_batches(files, format=format, mapping=mapping, log=log, formats=formats,
                                   damaged=damaged):
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
        seconds=time.perf_counter() - t0, damaged_files=tuple(str(f) for f in damaged),
        examples=rejects.slice(0, MAX_EXAMPLES).to_pylist(),
    )
    store.record_ingest({"id": uuid.uuid4().hex, "pid": os.getpid(), "time": time.time(), "paths": [str(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])],
                         "spans_read": summary.spans_read, "spans_rejected": summary.spans_rejected,
                         "parts": list(summary.parts)})
    return summary
