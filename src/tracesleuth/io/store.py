"""The embedded span store: a directory of Parquet files in the canonical schemas, written in
transactions.

Layout (version 2)::

    STORE/
      tracesleuth-store.json     manifest: format version (2) and one entry per ingest
      tracesleuth-store.lock     the writers' lock (``flock``); empty
      spans/date=<YYYY-MM-DD>/hour=<HH>/part-<n>.parquet
                                 spans (SPAN_SCHEMA) that start in that hour (UTC), append-only
      logs/date=<YYYY-MM-DD>/hour=<HH>/part-<n>.parquet
                                 log records (LOG_SCHEMA) written in that hour (UTC), append-only
      rejects/part-<n>.parquet   rejected span records and warnings (REJECT_SCHEMA)
      log_rejects/part-<n>.parquet
                                 rejected log records and warnings (REJECT_SCHEMA, ``spans``
                                 counting the log records lost)
      tracesleuth-templates.json the log-template miner's state (the stored logs' templates)
      tracesleuth-templates.lock the templating ingests' lock (``flock``); empty
      .staging/<ingest-id>/      the parts of an ingest not committed yet (never read)

The span and log parts are partitioned Hive-style by the hour their records start in (spans by
``start_ns``, logs by ``time_ns``, UTC): every span of ``spans/date=2023-01-29/hour=08/`` starts
in ``[08:00, 09:00)`` of 2023-01-29. Any Parquet reader that knows Hive partitions reads them
directly and can skip hours by the two partition columns (strings), e.g.
``dask.dataframe.read_parquet("STORE/spans", filters=[("date", "==", "2023-01-29"), ("hour",
">=", "08")])``, polars ``scan_parquet("STORE/spans/**/*.parquet", hive_partitioning=True)``,
DuckDB ``read_parquet('STORE/spans/*/*/*.parquet', hive_partitioning=true)``, Spark. The
columns of a part are exactly its schema's (the partition columns are in the path only). A
trace whose spans start in several hours has spans in several partitions: partitions are by
time, not by trace (:mod:`tracesleuth.scale` shuffles them by trace id). Stores of version 1
(written before partitions) keep their flat layout, ``spans/part-<n>.parquet`` (and
``logs/part-<n>.parquet``); they are read, and appended to, as before.

Ingests are transactions
------------------------
An ingest (:func:`tracesleuth.ingest.ingest`, a :class:`Transaction`) commits all its parts at once or none:

1. *Staging.* Under the store lock it makes ``.staging/<id>/`` and takes an exclusive
   ``flock`` on ``.staging/<id>/owner.lock``, held for its whole life (the kernel releases it
   when the process dies, however it dies). Its parts are written there (``spans/...``,
   ``logs/...``, ``rejects/...``, each under a temporary name, fsynced, renamed); no reader
   lists ``.staging`` (its name starts with a dot: ``spans/**/part-*.parquet`` never matches
   it), so they are invisible.
2. *Commit*, all under the store lock: the staged directories are fsynced; each part gets its
   final name (the next free part number of its table: numbers stay unique and in commit
   order); the manifest gets the ingest's entry in state ``"committing"`` with the list of
   ``moves`` (staged name, final name), replaced atomically (temporary file, fsync, rename,
   fsync of the store directory). **That replacement is the commit point.** Then every part
   is renamed into place, the directories it entered are fsynced, and the entry is rewritten in
   state ``"committed"`` (the moves dropped); the staging directory is removed.
3. *Recovery*, under the store lock, by every writer before it reserves a part or commits, and
   by every reader before it lists parts when a staging directory exists: an entry left
   ``"committing"`` (its writer died between the commit point and the end) is rolled forward
   (its staged files still exist: they are renamed into place, the entry marked committed); a
   staging directory whose ``owner.lock`` can be locked has lost its writer before the commit
   point and is removed.

So SIGINT, SIGTERM or kill -9 at any moment leaves the store as it was, or with the whole
ingest once the commit point is passed. A reader lists parts under a shared lock (the commit
holds the exclusive one), so it never sees part of an ingest; an external reader globbing the
directories may see a commit's renames half done for the milliseconds they take (or, after a
crash in them, until a tracesleuth reader or writer next opens the store).

Manifest entries written before transactions have no ``state``: they are committed. An entry
names its span parts (``parts``), log parts (``log_parts``), reject parts (``reject_parts``),
the records it read and rejected, and each file it read with its SHA-256 (``files``).

Logs
----
Log records are the store's second table, partitioned like the spans and written in the same
transaction (:func:`tracesleuth.ingest.ingest` takes span and log files together, telling each file's kind from its
content). Each record gets its template id from the store's
:class:`~tracesleuth.io.log_templates.LogTemplateMiner`, whose state (``tracesleuth-templates.json``)
is committed with the parts: staged beside them and renamed over the old state at the commit
(rolled forward with them). Templating is *serialised*: an ingest with log files takes
``tracesleuth-templates.lock`` before it loads the state and keeps it until its commit or abort,
so two ingests never template from the same state (each continues from the templates the previous
one committed; a template id means one template in every part). Re-assigning at the commit from
the latest state was the alternative; it would rewrite the staged log parts under the store lock,
blocking every writer for as long, and Drain's templates change as they learn, so a merge of two
miners' templates would not be exact. The lock is taken after the store lock is released and
never while holding it, so the two cannot deadlock. :meth:`SpanStore.read_logs` reads the logs
of a set of spans, or of services and a period (hour partitions pruned, row groups skipped by
their statistics); :meth:`SpanStore.log_summary` counts them for ``tracesleuth info``.

Idempotence
-----------
Each input file's content hash (SHA-256 of its bytes as on disk, streamed) is recorded in its
ingest's entry. A file whose hash a committed entry records is skipped, and so is a file a live
ingest is reading at the same moment (each claims its hashes under the lock, in
``.staging/<id>/claim.json``) and a second file of the same content in one ingest; ``force=True``
reads them all. Ingesting the same input twice leaves the store unchanged.

Other writers
-------------
Many writers may share a store at once (several ``tracesleuth ingest`` runs and a
``tracesleuth collect``, in any number of processes). The receiver (:mod:`tracesleuth.collector`)
keeps its own durability (a write-ahead log, converted idempotently) and publishes its parts one
by one, directly, with :meth:`SpanStore.append_spans`:

- A part number is *reserved* under the store lock (an exclusive ``fcntl.flock`` on
  ``tracesleuth-store.lock``, held for the few microseconds of a directory listing and a file
  creation): the writer takes one more than the highest number named by a part or a part being
  written, and creates that part's temporary file, ``.part-<n>.parquet.tmp``, with ``O_EXCL``.
  Only that writer ever writes this temporary file or the part it becomes.
- A part is *published* atomically: written under its temporary name, fsynced, renamed to its
  final name (under the lock, so that a reservation's listing never misses a part being
  renamed), and its directory fsynced. A crash loses at most the parts being written (their
  temporary files stay behind, never read).
- The manifest is read, changed and replaced (temporary file, fsync, rename) under the lock, so
  no ingest's entry is lost.
- A new store is created under the lock too, so simultaneous first writers agree on one store.
  An ingest creates its store only at its commit: an ingest that stores nothing leaves no store.

Part numbers are unique across a table and give the order of its parts; a reservation lists
every partition of its table.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import re
import shutil
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
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from .. import schema as S
from ..errors import ParameterError, TraceFormatError

MANIFEST = "tracesleuth-store.json"
#: The writers' lock file (see the module docstring).
LOCK = "tracesleuth-store.lock"
#: Where ingests stage their parts until they commit (see the module docstring).
STAGING = ".staging"
#: The lock file a staging ingest holds for its life (a cleaner that can take it knows the owner died).
OWNER_LOCK = "owner.lock"
#: The content hashes a staging ingest is reading (so that a simultaneous ingest skips them).
CLAIM = "claim.json"
#: The log-template miner's state (:class:`tracesleuth.io.log_templates.LogTemplateMiner` as JSON).
TEMPLATES = "tracesleuth-templates.json"
#: The lock an ingest holds from loading the templates' state to committing it (templating is serial).
TEMPLATES_LOCK = "tracesleuth-templates.lock"
#: Span ids held in memory at once by the count of joined log records (the semi-join runs in
#: buckets of span-id hashes, each of about this many spans: ~50 bytes each in the hash table).
JOIN_BUCKET_SPANS = 4_000_000
#: Manifest entry states (entries written before transactions have none: committed).
COMMITTING, COMMITTED = "committing", "committed"
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
#: ``part_rows`` that writes everything given in one part (a reject table).
ONE_PART = 1 << 62
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
#: How log parts are encoded, on the same rule: dictionary pages for services, instances,
#: severities and attribute keys; statistics for what :meth:`SpanStore.read_logs` filters on.
LOG_PARQUET_OPTIONS = dict(
    compression="zstd",
    use_dictionary=[S.SERVICE, S.INSTANCE, S.SEVERITY_TEXT, f"{S.ATTRIBUTES}.list.element.key"],
    write_statistics=[S.TIME_NS, S.TRACE_ID, S.SPAN_ID, S.SERVICE, S.SEVERITY_NUMBER, S.TEMPLATE_ID],
)


@dataclass(frozen=True)
class _Table:
    """One table of the store: its directory, schema, the time column its partitions go by
    (None: one flat directory) and its Parquet encoding."""

    kind: str
    schema: pa.Schema
    time_column: str | None
    options: dict


SPANS = _Table("spans", S.SPAN_SCHEMA, S.START_NS, SPAN_PARQUET_OPTIONS)
LOGS = _Table("logs", S.LOG_SCHEMA, S.TIME_NS, LOG_PARQUET_OPTIONS)
REJECTS = _Table("rejects", S.REJECT_SCHEMA, None, dict(compression="zstd"))
#: Rejected log records and warnings (REJECT_SCHEMA, its ``spans`` column counting the *records* lost).
LOG_REJECTS = _Table("log_rejects", S.REJECT_SCHEMA, None, dict(compression="zstd"))
#: The store's tables, in commit order.
TABLES = {t.kind: t for t in (SPANS, LOGS, REJECTS, LOG_REJECTS)}


def is_store(path) -> bool:
    """Whether ``path`` is a span store directory."""
    return (Path(path) / MANIFEST).is_file()


def open_store(path) -> "SpanStore":
    """An existing span store, to read (``read_spans``, ``read_logs``, ``scan``).

    Raises
    ------
    ParameterError
        ``path`` is not a span store (the message says how to make one).
    """
    if not is_store(path):
        raise ParameterError(f"{path}: not a span store; make one with: tracesleuth ingest TRACES [LOGS] -o STORE")
    return SpanStore(path, create=False)


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
    the store lock, and the manifest is changed under it (see :mod:`tracesleuth.io.store`).
    Readers list parts under a shared lock and see only whole parts and whole ingests.
    """

    def __init__(self, path, *, create: bool = True):
        self.path = Path(path)
        self._layout: str | None = None
        if is_store(self.path):
            self._check_version()
            return
        if not create:
            raise TraceFormatError(str(self.path), "not a tracesleuth span store (no manifest)")
        _refuse_foreign(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        with self._locked():  # another writer may be creating it at the same moment
            if is_store(self.path):
                self._check_version()
                return
            _refuse_foreign(self.path)
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

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store lock (exclusive ``flock`` on :data:`LOCK`; blocks while another writer holds it)."""
        with _store_lock(self.path):
            yield

    @contextmanager
    def _shared(self) -> Iterator[None]:
        """Hold the store lock shared (readers listing parts: no commit is half done meanwhile)."""
        try:
            fd = os.open(self.path / LOCK, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # no lock file: nothing ever wrote here with a lock (or it cannot be read)
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    # -- manifest -----------------------------------------------------------------------
    def _write_manifest(self, meta: dict) -> None:
        """Replace the manifest atomically and durably (call with the store lock held)."""
        _replace_json(self.path / MANIFEST, meta, indent=1)

    def manifest(self) -> dict:
        """The manifest: version, creation time, one entry per ingest."""
        return json.loads((self.path / MANIFEST).read_text())

    def ingests(self) -> list[dict]:
        """The committed ingests' manifest entries, oldest first (an entry still being committed
        is rolled forward first)."""
        self._settle()
        return [e for e in self.manifest()["ingests"] if e.get("state", COMMITTED) == COMMITTED]

    # -- transactions: recovery -----------------------------------------------------------
    def _recover(self) -> None:
        """Finish or drop what dead ingests left (call with the store lock held; :func:`_recover`)."""
        _recover(self.path)

    def _settle(self) -> None:
        """Before reading: roll forward a commit left half done, if any (cheap when no ingest
        is staging: one directory listing)."""
        staging = self.path / STAGING
        try:
            with os.scandir(staging) as entries:
                if not any(entries):
                    return
        except FileNotFoundError:
            return
        if any(e.get("state") == COMMITTING for e in self.manifest()["ingests"]):
            try:
                with self._locked():
                    self._recover()
            except PermissionError as e:
                raise TraceFormatError(str(self.path), "an ingest's commit was left half done and the store "
                                       f"cannot be written to finish it ({e}); open it once with write access") from e

    # -- writing -----------------------------------------------------------------------
    def _part_name(self, number: int) -> str:
        """The file name of part ``number`` (subclasses add to it; it must start ``part-<number>``)."""
        return f"part-{number:06d}.parquet"

    def _next_part(self, kind: str, partition: str | None = None) -> Path:
        """Reserve the next part of ``kind`` (``spans``/``logs``/``rejects``) for this writer alone.

        Under the store lock (after :meth:`_recover`): one more than the highest number named by
        a part or a part being written in any partition of ``kind``, whose temporary file
        (:func:`_tmp_name`) is created empty with ``O_EXCL`` in ``kind/partition``. The caller
        writes that temporary file, then publishes it (:meth:`_publish`) or removes it.

        Returns
        -------
        Path
            The part's final name (not yet existing).
        """
        top = self.path / kind
        folder = top if partition is None else top / partition
        _make_dirs(folder, self.path)
        with self._locked():
            self._recover()  # a commit left half done holds numbers not yet in place
            number = _highest_number(top) + 1
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

    def _skip_partition(self, partition: str | None) -> bool:
        """Whether spans of ``partition`` are not to be written by this append (a subclass's hook)."""
        return False

    def append_spans(self, batches: Iterable[pa.RecordBatch], *, part_spans: int = PART_SPANS) -> list[Path]:
        """Append spans, writing a new part each ``part_spans`` spans. Returns the parts written.

        Each part is published as soon as it is complete, on its own (the receiver's way, whose
        write-ahead log makes it durable and idempotent); an ingest of files uses a
        :class:`Transaction` instead, whose parts appear all at once.

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
        return _append(self, SPANS, batches, part_spans)

    def append_logs(self, batches: Iterable[pa.RecordBatch], *, part_records: int = PART_SPANS) -> list[Path]:
        """Append log records (:data:`~tracesleuth.schema.LOG_SCHEMA`), part by part, as
        :meth:`append_spans` appends spans (partitioned by the hour of ``time_ns``)."""
        return _append(self, LOGS, batches, part_records)

    def append_rejects(self, rejects: pa.Table, *, table: _Table = REJECTS) -> Path | None:
        """Append rejected-record rows (REJECT_SCHEMA) of spans, or with ``table=LOG_REJECTS``
        of log records."""
        if not rejects.num_rows:
            return None
        (part,) = _append(self, table, rejects.to_batches(), ONE_PART)
        return part

    # -- reading -----------------------------------------------------------------------
    def _parts(self, kind: str) -> list[Path]:
        """The committed parts of table ``kind``, in order (by hour, then by number)."""
        self._settle()
        top = self.path / kind
        with self._shared():
            return sorted(top.glob("part-*.parquet")) + sorted(top.glob("date=*/hour=*/part-*.parquet"))

    def span_files(self) -> list[Path]:
        """The span parts, in order (by hour, then by number)."""
        return self._parts(SPANS.kind)

    def log_files(self) -> list[Path]:
        """The log parts, in order (by hour, then by number)."""
        return self._parts(LOGS.kind)

    def count_spans(self) -> int:
        """The spans stored, from the parts' Parquet footers (no span is read)."""
        return sum(pq.ParquetFile(f).metadata.num_rows for f in self.span_files())

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
        """Every rejected-record row of every ingest (the spans')."""
        return self._read_reject_parts(REJECTS)

    def read_log_rejects(self) -> pa.Table:
        """Every rejected log record and warning of every ingest (REJECT_SCHEMA, whose ``spans``
        column counts the log records lost)."""
        return self._read_reject_parts(LOG_REJECTS)

    def _read_reject_parts(self, table: _Table) -> pa.Table:
        files = self._parts(table.kind)
        if not files:
            return S.REJECT_SCHEMA.empty_table()
        return pa.concat_tables([pq.read_table(f, schema=S.REJECT_SCHEMA) for f in files])

    def read_logs(self, *, start_ns: int | None = None, end_ns: int | None = None, services=None, trace_ids=None,
                  span_ids=None, columns=None, on_batch=None) -> pa.Table:
        """The stored log records that match every filter given, in part order.

        Parameters
        ----------
        start_ns, end_ns : int, optional
            Records with ``start_ns <= time_ns < end_ns`` (Unix epoch ns); only the hour
            partitions that overlap the period are opened.
        services : iterable of str, optional
            Records of these services.
        trace_ids, span_ids : iterable of str, optional
            Records written in these traces / spans (canonical ids, as in the span table): the
            logs of a set of spans are ``read_logs(span_ids=spans["span_id"])``.
        columns : list of str, optional
            The columns to read (default: all of :data:`~tracesleuth.schema.LOG_SCHEMA`).
        on_batch : callable, optional
            Called with each record batch as it is read (progress reporting).

        Returns
        -------
        pyarrow.Table
            Shape (n_records, len(columns)), in :data:`~tracesleuth.schema.LOG_SCHEMA` (or the
            columns asked for). Row groups whose statistics exclude the filters are skipped.

        Raises
        ------
        TraceFormatError
            When a column asked for is not one of the log schema's.

        Examples
        --------
        >>> store = SpanStore("store/", create=False)                       # doctest: +SKIP
        >>> slow = store.read_spans().filter(...)                            # doctest: +SKIP
        >>> store.read_logs(span_ids=slow["span_id"], columns=["span_id", "body"])  # doctest: +SKIP
        """
        unknown = [c for c in (columns or ()) if c not in S.LOG_COLUMNS]
        if unknown:
            raise TraceFormatError(str(self.path), f"no such log column; the log columns are "
                                   f"{', '.join(S.LOG_COLUMNS)}", field=unknown[0])
        schema = S.LOG_SCHEMA if columns is None else pa.schema([S.LOG_SCHEMA.field(c) for c in columns])
        files = [f for f in self.log_files() if _may_hold(f, start_ns, end_ns)]
        if not files:
            return schema.empty_table()
        conditions = []
        if start_ns is not None:
            conditions.append(ds.field(S.TIME_NS) >= start_ns)
        if end_ns is not None:
            conditions.append(ds.field(S.TIME_NS) < end_ns)
        for column, values in ((S.SERVICE, services), (S.TRACE_ID, trace_ids), (S.SPAN_ID, span_ids)):
            if values is not None:  # (an Arrow column, dictionary-encoded as the store reads ids, or any iterable)
                values = values.cast(pa.string()) if isinstance(values, (pa.Array, pa.ChunkedArray)) else \
                    pa.array(list(values), pa.string())
                conditions.append(ds.field(column).isin(pc.unique(values)))
        condition = None
        for c in conditions:
            condition = c if condition is None else condition & c
        scanner = ds.dataset([str(f) for f in files], schema=S.LOG_SCHEMA, format="parquet").scanner(
            columns=list(schema.names), filter=condition, memory_pool=pa.system_memory_pool())
        if on_batch is None:
            return scanner.to_table()
        batches = []
        for batch in scanner.to_batches():
            batches.append(batch)
            on_batch(batch)
        return pa.Table.from_batches(batches, schema=schema)

    def log_templates(self) -> pa.Table:
        """The templates of the stored log records: ``template_id``, ``service``, ``template``
        (the constant text, variables masked) and ``records`` (how many were assigned it), as
        :meth:`tracesleuth.io.log_templates.LogTemplateMiner.templates` gives them (empty when
        no log was stored)."""
        return _load_miner(self.path).templates()

    def template_logs(self, logs: pa.Table, *, learn: bool = True) -> pa.Table:
        """``logs`` with each record's template id from the store's log-template miner, for a
        writer that appends log parts itself (the collector's flusher: :meth:`append_logs`).

        Takes the templates lock (:data:`TEMPLATES_LOCK`; it waits while an ingest holds it),
        loads the miner's state, assigns, and, when ``learn``, saves the new state (durably)
        before returning, so that parts written afterwards never carry an id the saved state
        lacks: a writer that crashes before writing them and templates the same records again
        with ``learn=False`` (they are known) gets the same ids without counting them twice.

        Parameters
        ----------
        logs : pyarrow.Table, shape (n_records, 10)
            Log records in :data:`~tracesleuth.schema.LOG_SCHEMA`.
        learn : bool, default=True
            False: match the known templates only, and change nothing
            (:meth:`tracesleuth.io.log_templates.LogTemplateMiner.assign`).

        Returns
        -------
        pyarrow.Table
            ``logs`` with ``template_id`` set (null only for an unknown record with ``learn=False``).
        """
        if logs.num_rows == 0:
            return logs
        fd = _lock_fd(self.path / TEMPLATES_LOCK)
        try:
            miner = _load_miner(self.path)
            ids = miner.assign(logs, learn=learn)
            if learn:
                _replace_json(self.path / TEMPLATES, miner.to_json(), durable=True)
        finally:
            os.close(fd)
        return _set_template_ids(logs, ids)

    def log_summary(self) -> dict:
        """What the store holds of logs: ``{"records", "joined", "rejected", "templates"}``.

        ``records``: log records stored (from the parts' footers); ``joined``: those whose
        ``(trace_id, span_id)`` is a span of the store (:func:`count_joined`, memory bounded);
        ``rejected``: log records the ingests rejected; ``templates``: log templates.
        """
        logs, spans = self.log_files(), self.span_files()
        records = sum(pq.ParquetFile(f).metadata.num_rows for f in logs)
        n_spans = sum(pq.ParquetFile(f).metadata.num_rows for f in spans)
        joined = 0
        if records and n_spans:
            ids = [S.TRACE_ID, S.SPAN_ID]
            joined = count_joined(pl.scan_parquet([str(f) for f in logs]).select(ids),
                                  pl.scan_parquet([str(f) for f in spans]).select(ids), n_spans)
        rejected = self.read_log_rejects().column("spans")
        return {"records": records, "joined": joined, "rejected": int(pc.sum(rejected).as_py() or 0),
                "templates": _load_miner(self.path).n_templates_ if (self.path / TEMPLATES).exists() else 0}


class Transaction:
    """One ingest's writes to a store: staged where no reader looks, committed all at once or
    not at all (the protocol is in the module docstring).

    Parameters
    ----------
    path : str or Path
        The store directory; it need not be a store yet (the store is created at the commit,
        so a transaction that commits nothing leaves none behind).

    Attributes
    ----------
    id : str
        The transaction's id: its staging directory's name and its manifest entry's ``id``.
    state : str
        ``"new"``, ``"staging"`` (after :meth:`begin`), ``"committing"`` (past the commit point:
        an error now leaves the end of the commit to recovery), ``"committed"`` or ``"aborted"``.

    Raises
    ------
    TraceFormatError
        When ``path`` exists and is neither a store nor an empty directory.

    Examples
    --------
    >>> txn = Transaction("store/")                          # doctest: +SKIP
    >>> txn.begin()                                          # doctest: +SKIP
    >>> txn.append(SPANS, batches)                           # doctest: +SKIP
    >>> txn.commit({"paths": ["traces/"]})                   # doctest: +SKIP
    """

    def __init__(self, path):
        self.path = Path(path)
        _refuse_foreign(self.path)
        self.id = uuid.uuid4().hex
        self.dir = self.path / STAGING / self.id
        self.layout = SpanStore(self.path, create=False).layout if is_store(self.path) else LAYOUTS[STORE_VERSION]
        self.state = "new"
        self.staged: dict[str, list[Path]] = {kind: [] for kind in TABLES}
        self._numbers = itertools.count()
        self._owner: int | None = None
        self._templates_lock: int | None = None
        self._miner = None
        self._made = False

    # -- the writer interface _append uses ----------------------------------------------------
    def _next_part(self, kind: str, partition: str | None = None) -> Path:
        folder = self.dir / kind if partition is None else self.dir / kind / partition
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"part-{next(self._numbers):06d}.parquet"

    def _publish(self, final: Path) -> Path:
        tmp = _tmp_name(final)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)  # (the staging directories are fsynced once, at the commit)
        self.staged[final.relative_to(self.dir).parts[0]].append(final)
        return final

    def _skip_partition(self, partition: str | None) -> bool:
        return False

    # -- life cycle ------------------------------------------------------------------------------
    def begin(self) -> None:
        """Make the staging directory and take its owner lock (under the store lock, so that no
        cleaner sees the directory without its lock held)."""
        if self.state != "new":
            raise RuntimeError(f"transaction {self.id} is {self.state}")
        self._made = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        with _store_lock(self.path):
            (self.path / STAGING).mkdir(exist_ok=True)
            self.dir.mkdir()
            fd = os.open(self.dir / OWNER_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._owner = fd
        self.state = "staging"

    def claim(self, hashes: dict[str, str], *, force: bool = False) -> dict[str, str]:
        """Claim the content of the files to be read; say which to skip.

        Under the store lock: a file whose hash a committed ingest records, or that a live
        ingest has claimed, or that another file of this transaction has, is to be skipped
        (unless ``force``); the others' hashes are written to this transaction's claim.

        Parameters
        ----------
        hashes : dict of str to str
            ``{file: sha256}``, in reading order; a file of no bytes has the hash ``""`` and
            is never skipped (it adds nothing).
        force : bool, default=False
            Skip nothing.

        Returns
        -------
        dict of str to str
            ``{file: reason}`` of the files to skip.
        """
        skip: dict[str, str] = {}
        with _store_lock(self.path):
            _recover(self.path)
            committed: dict[str, str] = {}
            if is_store(self.path) and not force:
                for entry in SpanStore(self.path, create=False).manifest()["ingests"]:
                    for f in entry.get("files", ()):
                        committed.setdefault(f["sha256"], f"ingest {entry['id'][:12]} of {f['path']}")
            claimed = {} if force else _live_claims(self.path, self.id)
            mine: dict[str, str] = {}
            for path, digest in hashes.items():
                if not digest:
                    continue
                if force:
                    mine.setdefault(digest, path)
                elif digest in committed:
                    skip[path] = f"already in the store (same content: {committed[digest]})"
                elif digest in claimed:
                    skip[path] = f"being ingested by another ingest (pid {claimed[digest]})"
                elif digest in mine:
                    skip[path] = f"same content as {mine[digest]}, read by this ingest"
                else:
                    mine[digest] = path
            _replace_json(self.dir / CLAIM, {"pid": os.getpid(), "sha256": sorted(mine)}, durable=False)
        return skip

    def templates(self):
        """The store's log-template miner, for this transaction to template its log records.

        The first call takes the templates lock (:data:`TEMPLATES_LOCK`; it waits while another
        ingest holds it), rolls forward a commit left half done (whose templates may not be in
        place yet) and loads the state the last commit left; the lock is held until this
        transaction commits the miner's new state (with its parts) or aborts. So ingests with
        logs template one after another, each continuing from the templates of the previous:
        a template id means the same template in every part, whatever ran at the same time.

        Returns
        -------
        tracesleuth.io.log_templates.LogTemplateMiner
        """
        if self.state != "staging":
            raise RuntimeError(f"transaction {self.id} is {self.state}, not staging")
        if self._miner is None:
            self._templates_lock = _lock_fd(self.path / TEMPLATES_LOCK)
            with _store_lock(self.path):
                _recover(self.path)
            self._miner = _load_miner(self.path)
        return self._miner

    @property
    def n_templates(self) -> int:
        """Templates of the miner after this transaction (0 when it templated nothing)."""
        return 0 if self._miner is None else self._miner.n_templates_

    def append(self, table: _Table, batches: Iterable[pa.RecordBatch], part_rows: int = PART_SPANS) -> list[Path]:
        """Stage records of ``table`` (:data:`SPANS`, :data:`LOGS`, :data:`REJECTS` or
        :data:`LOG_REJECTS`) as :meth:`SpanStore.append_spans` writes them. Returns the staged
        parts."""
        if self.state != "staging":
            raise RuntimeError(f"transaction {self.id} is {self.state}, not staging")
        return _append(self, table, batches, part_rows)

    def commit(self, entry: dict) -> dict[str, list[str]]:
        """Commit every staged part at once, and the log templates' new state (when
        :meth:`templates` was called), with the manifest entry ``entry`` (given ``id``,
        ``state``, ``time``, ``parts``, ``log_parts``, ``reject_parts`` and
        ``log_reject_parts`` here). The store is created when absent. Run it with signals held
        (an interruption in its middle is rolled forward by the next reader or writer, but is
        better not had).

        Returns
        -------
        dict of str to list of str
            The final names of the parts of each table, relative to the store.
        """
        if self.state != "staging":
            raise RuntimeError(f"transaction {self.id} is {self.state}, not staging")
        store = SpanStore(self.path)  # created now when absent
        with store._locked():
            store._recover()
            for folder in {p.parent for parts in self.staged.values() for p in parts}:
                fsync_dir(folder)
            moves, finals = [], {kind: [] for kind in TABLES}
            for kind, staged in self.staged.items():
                number = _highest_number(self.path / kind) + 1
                for part in staged:
                    final = self.path / kind / part.parent.relative_to(self.dir / kind) / store._part_name(number)
                    number += 1
                    moves.append([_rel(part, self.path), _rel(final, self.path)])
                    finals[kind].append(_rel(final, self.path))
            if self._miner is not None:  # the templates' state replaces the store's with the parts
                staged = self.dir / TEMPLATES
                _replace_json(staged, self._miner.to_json(), durable=True)
                moves.append([_rel(staged, self.path), TEMPLATES])
            entry = {"id": self.id, "pid": os.getpid(), "time": time.time(), **entry, "state": COMMITTING,
                     "parts": finals[SPANS.kind], "log_parts": finals[LOGS.kind],
                     "reject_parts": finals[REJECTS.kind], "log_reject_parts": finals[LOG_REJECTS.kind],
                     **({"templates": self.n_templates} if self._miner is not None else {}), "moves": moves}
            meta = store.manifest()
            meta["ingests"].append(entry)
            store._write_manifest(meta)  # the commit point
            self.state = COMMITTING  # from here on, an error leaves the rest to recovery (abort drops nothing)
            _roll_forward(self.path, entry)
            store._write_manifest(meta)
            self.state = "committed"
            self._release()
            shutil.rmtree(self.dir, ignore_errors=True)
            _remove_if_empty(self.path / STAGING)
        return finals

    def abort(self) -> None:
        """Drop every staged part (nothing after a commit); remove the directory the
        transaction made when nothing else is in it."""
        if self.state in ("committed", "aborted"):
            return
        if self.state in ("new", COMMITTING):  # nothing staged yet / the commit point passed: not ours to drop
            self._release()
            return
        shutil.rmtree(self.dir, ignore_errors=True)
        self.state = "aborted"
        self._release()
        if not self.path.is_dir():
            return
        with _store_lock(self.path):
            _remove_if_empty(self.path / STAGING)
            if is_store(self.path):
                return
            left = {e.name for e in self.path.iterdir()}
            if left <= {LOCK, TEMPLATES_LOCK}:
                for name in left:  # (a writer waiting on one re-opens it: see _lock_fd)
                    (self.path / name).unlink()
                if self._made:
                    self.path.rmdir()

    def _release(self) -> None:
        for name in ("_owner", "_templates_lock"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)


def _recover(store_path: Path) -> None:
    """Roll forward the commits their writers left half done, and remove the staging
    directories of writers that died before their commit point (call with the store lock held;
    see the module docstring). ``store_path`` need not be a store yet (an ingest into a new
    store killed before its commit leaves a staging directory and no manifest)."""
    staging = store_path / STAGING
    try:
        names = os.listdir(staging)
    except FileNotFoundError:
        return
    if not names:
        return
    done: set[str] = set()
    if is_store(store_path):
        meta = json.loads((store_path / MANIFEST).read_text())
        unfinished = [e for e in meta["ingests"] if e.get("state") == COMMITTING]
        for entry in unfinished:
            _roll_forward(store_path, entry)
            done.add(entry["id"])
        if unfinished:
            _replace_json(store_path / MANIFEST, meta, indent=1)
    for name in names:
        folder = staging / name
        if name in done or not _owner_alive(folder):
            shutil.rmtree(folder, ignore_errors=True)
    _remove_if_empty(staging)


def _roll_forward(store_path: Path, entry: dict) -> None:
    """Rename the staged parts of a ``committing`` entry into place, durably, and mark it
    committed (the caller then writes the manifest, and only then removes the staging
    directory: until the entry is committed its staging directory is what recovery looks for)."""
    folders = set()
    for staged, final in entry.get("moves", ()):
        source, target = store_path / staged, store_path / final
        if source.exists():
            _make_dirs(target.parent, store_path)
            os.replace(source, target)
            folders.add(target.parent)
        elif not target.exists():  # (only if someone removed staged files by hand)
            entry.setdefault("missing", []).append(final)
    for folder in folders:
        fsync_dir(folder)
    entry["state"] = COMMITTED
    entry.pop("moves", None)


def count_joined(logs: pl.LazyFrame, spans: pl.LazyFrame, n_spans: int, *,
                 bucket_spans: int = JOIN_BUCKET_SPANS) -> int:
    """How many log records are written in a span of ``spans``: a semi-join on ``(trace_id,
    span_id)`` (a record without trace context joins nothing).

    The join runs in buckets of the span-id hash, each holding about ``bucket_spans`` span ids
    in memory (both inputs are scanned once per bucket), so memory does not grow with the store.

    Parameters
    ----------
    logs, spans : polars.LazyFrame
        Frames with the columns ``trace_id`` and ``span_id`` (strings).
    n_spans : int
        Rows of ``spans`` (sizes the buckets).
    bucket_spans : int, default=JOIN_BUCKET_SPANS

    Returns
    -------
    int
    """
    ids = [S.TRACE_ID, S.SPAN_ID]
    buckets = max(1, -(-n_spans // bucket_spans))
    key = [pl.col(c).cast(pl.String) for c in ids]
    logs, spans = logs.select(key).drop_nulls(), spans.select(key)
    joined = 0
    for k in range(buckets):
        if buckets > 1:
            mine = pl.col(S.SPAN_ID).hash(seed=0) % buckets == k
            bucket_logs, bucket_spans_ = logs.filter(mine), spans.filter(mine)
        else:
            bucket_logs, bucket_spans_ = logs, spans
        joined += bucket_logs.join(bucket_spans_.unique(), on=ids, how="semi").select(pl.len()).collect().item()
    return joined


def _may_hold(part: Path, start_ns: int | None, end_ns: int | None) -> bool:
    """Whether a part may hold records of ``[start_ns, end_ns)`` (by its hour partition; a flat
    part always may)."""
    hour = partition_hour(part)
    if hour is None:
        return True
    return (start_ns is None or (hour + 1) * PARTITION_NS > start_ns) and (end_ns is None or hour * PARTITION_NS < end_ns)


def _load_miner(store_path: Path):
    """The store's log-template miner (its saved state, or a new one)."""
    from .log_templates import LogTemplateMiner

    path = store_path / TEMPLATES
    return LogTemplateMiner.from_json(path.read_text()) if path.exists() else LogTemplateMiner()


def _owner_alive(folder: Path) -> bool:
    """Whether the ingest staging in ``folder`` is alive (holds its owner lock)."""
    try:
        fd = os.open(folder / OWNER_LOCK, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return False  # (begin() makes the directory and its lock under the store lock)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _live_claims(store_path: Path, own: str) -> dict[str, int]:
    """``{sha256: pid}`` claimed by the live ingests of the store other than ``own``."""
    claims: dict[str, int] = {}
    try:
        names = os.listdir(store_path / STAGING)
    except FileNotFoundError:
        return claims
    for name in names:
        folder = store_path / STAGING / name
        if name == own or not _owner_alive(folder):
            continue
        try:
            claim = json.loads((folder / CLAIM).read_text())
        except (OSError, ValueError):
            continue
        claims.update(dict.fromkeys(claim.get("sha256", ()), claim.get("pid")))
    return claims


@contextmanager
def _store_lock(path: Path) -> Iterator[None]:
    """Hold the store lock of the directory ``path`` (exclusive ``flock`` on :data:`LOCK`)."""
    fd = _lock_fd(path / LOCK)
    try:
        yield
    finally:
        os.close(fd)  # releases the lock


def _lock_fd(lock: Path) -> int:
    """Take an exclusive ``flock`` on the file ``lock`` (created when absent; waits while another
    holds it); returns the descriptor, whose closing releases it. The lock files of a directory
    that never became a store may be removed (:meth:`Transaction.abort`): a writer that locked a
    removed file opens the new one and locks again."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _refuse_foreign(path: Path) -> None:
    """Raise unless ``path`` is absent, empty, holds only what creating a store (or staging an
    ingest into a new one) makes, or has meanwhile become a store."""
    if not path.exists():
        return
    foreign = not path.is_dir() or any(
        e.name not in _CREATION_NAMES or (e.is_dir() and e.name != STAGING and any(e.iterdir()))
        for e in path.iterdir())
    if foreign and not is_store(path):
        raise TraceFormatError(str(path), "exists and is not a span store; refusing to write into it")


def _replace_json(path: Path, doc: dict | str, *, indent: int | None = None, durable: bool = True) -> None:
    """Replace a JSON file (``doc``, or JSON text) atomically (temporary file, rename); durably
    (fsyncs) unless told not."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc, indent=indent))
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def _remove_if_empty(folder: Path) -> None:
    """Remove a directory when it is empty (with the store lock held: no writer adds to it meanwhile)."""
    try:
        folder.rmdir()
    except OSError:  # not empty, or absent
        pass


def _make_dirs(folder: Path, root: Path) -> None:
    """Make ``folder`` (below ``root``) with its parents, their new entries made durable."""
    if folder.is_dir():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for made in [folder.parent, *folder.parent.parents]:
        fsync_dir(made)
        if made == root:
            break


def _highest_number(top: Path) -> int:
    """The highest part number named by a part, or a part being written, below ``top`` (-1 when none)."""
    return max((int(m.group(1)) for _, _, names in os.walk(top) for m in map(_PART_NUMBER.match, names) if m),
               default=-1)


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


# -- writing parts ---------------------------------------------------------------------------------
def _append(target, table: _Table, batches: Iterable[pa.RecordBatch], part_rows: int) -> list[Path]:
    """Write ``batches`` of ``table`` as parts of ``target`` (a :class:`SpanStore`: published
    one by one; a :class:`Transaction`: staged), as :meth:`SpanStore.append_spans` describes."""
    parts: list[Path] = []
    open_parts: dict[str | None, _Partition] = {}  # least recently written first
    with ThreadPoolExecutor(1, thread_name_prefix="tracesleuth-store") as pool:
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                for name, piece in _by_partition(target.layout, table, batch):
                    partition = open_parts.pop(name, None) or _Partition(target, table, name, pool, part_rows)
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


def _by_partition(layout: str, table: _Table, batch: pa.RecordBatch) -> Iterator[tuple[str | None, pa.RecordBatch]]:
    """``(partition, records)`` of a batch: one piece per hour its records start in (``None``,
    the whole batch, in a flat store or a table without partitions)."""
    if layout == "flat" or table.time_column is None:
        yield None, batch
        return
    hours = batch.column(table.time_column).to_numpy(zero_copy_only=False) // PARTITION_NS
    if hours.min() == hours.max():
        yield partition_name(int(hours[0])), batch
        return
    order = np.argsort(hours, kind="stable")
    cuts = np.flatnonzero(np.diff(hours[order])) + 1
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(order)]):
        yield partition_name(int(hours[order[a]])), batch.take(pa.array(order[a:b]))


class _PartWriter:
    """One part of ``target`` (reserved on creation) being written row group by row group on
    ``pool`` (one group in flight)."""

    def __init__(self, target, table: _Table, pool: ThreadPoolExecutor, partition: str | None = None):
        self.target, self.table, self.pool = target, table, pool
        self.final = target._next_part(table.kind, partition)
        self.tmp = _tmp_name(self.final)
        try:
            self.writer = pq.ParquetWriter(self.tmp, table.schema, **table.options)
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise
        self.in_flight = None
        self.rows = 0

    def write(self, batches: list[pa.RecordBatch]) -> None:
        data = pa.Table.from_batches(batches, schema=self.table.schema)
        self.wait()
        self.in_flight = self.pool.submit(self.writer.write_table, data, row_group_size=data.num_rows)
        self.rows += data.num_rows

    def wait(self) -> None:
        """Wait for the row group in flight; one interrupted here is still in flight (and
        :meth:`discard` waits for it: closing the writer under a write crashes the process)."""
        if self.in_flight is not None:
            self.in_flight.result()
            self.in_flight = None

    def publish(self) -> Path:
        self.wait()
        self.writer.close()
        return self.target._publish(self.final)

    def discard(self) -> None:
        """Drop the part: wait for the row group in flight, whatever happened to it (a signal
        while waiting is raised once it is done), close the writer, remove the file."""
        interrupted = None
        while self.in_flight is not None:
            try:
                self.in_flight.exception()
                self.in_flight = None
            except KeyboardInterrupt as e:  # a second Ctrl-C: the write still ends first
                interrupted = e
        self.writer.close()
        self.tmp.unlink(missing_ok=True)
        if interrupted is not None:
            raise interrupted


class _Partition:
    """The records of one partition of an :func:`_append` call: those waiting for a row group,
    and the part being written (reserved when its first row group is written)."""

    def __init__(self, target, table: _Table, name: str | None, pool: ThreadPoolExecutor, part_rows: int):
        self.target, self.table, self.name, self.pool, self.part_rows = target, table, name, pool, part_rows
        self.skip = target._skip_partition(name)
        self.pending: list[pa.RecordBatch] = []
        self.held = 0
        self.part: _PartWriter | None = None

    def add(self, batch: pa.RecordBatch) -> list[Path]:
        """Take a batch; write a row group when enough records wait. Returns the parts published."""
        if self.skip:
            return []
        self.pending.append(batch)
        self.held += batch.num_rows
        if self.held < ROW_GROUP_SPANS and (self.part.rows if self.part else 0) + self.held < self.part_rows:
            return []
        return self.write()

    def write(self) -> list[Path]:
        """Write the waiting records as a row group; publish the part once it is full."""
        if not self.pending:
            return []
        if self.part is None:
            self.part = _PartWriter(self.target, self.table, self.pool, self.name)
        self.part.write(self.pending)
        self.pending, self.held = [], 0
        if self.part.rows < self.part_rows:
            return []
        return [self._publish()]

    def close(self) -> list[Path]:
        """Write what waits and publish the part."""
        parts = self.write()
        if self.part is not None:
            parts.append(self._publish())
        return parts

    def _publish(self) -> Path:
        published = self.part.publish()  # (interrupted: the part stays ours, for discard)
        self.part = None
        return published

    def discard(self) -> None:
        if self.part is not None:
            self.part.discard()


def partition_name(hour: int) -> str:
    """The Hive partition (``date=YYYY-MM-DD/hour=HH``, UTC) of the hour ``hour`` since the epoch
    (``start_ns // PARTITION_NS``)."""
    moment = datetime.fromtimestamp(hour * 3600, tz=timezone.utc)
    return f"date={moment:%Y-%m-%d}/hour={moment:%H}"


def partition_hour(path: Path) -> int | None:
    """The hour (since the epoch) of a part in a Hive partition ``date=D/hour=H`` (the inverse of
    :func:`partition_name`); None for a part of a flat layout."""
    hour, date = path.parent.name, path.parent.parent.name
    if not (hour.startswith("hour=") and date.startswith("date=")):
        return None
    moment = datetime.strptime(f"{date[5:]} {hour[5:]}", "%Y-%m-%d %H").replace(tzinfo=timezone.utc)
    return int(moment.timestamp()) // 3600


#: The number of a part or of a part being written: ``part-000007.parquet``,
#: ``part-000007-seg-000000000042.parquet``, ``.part-000007.parquet.tmp``.
_PART_NUMBER = re.compile(r"\.?part-(\d+)")
#: What creating a store makes in its directory before the manifest (a crash may leave these),
#: and the staging directory of an ingest into a new store.
_CREATION_NAMES = frozenset({LOCK, TEMPLATES_LOCK, MANIFEST + ".tmp", "spans", "rejects", STAGING})


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


def file_sha256(path) -> str:
    """The SHA-256 of a file's bytes as they are on disk (compressed files are not inflated),
    hex, read in a stream (memory does not grow with the file); ``""`` for an empty file."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return ""
        return hashlib.file_digest(f, "sha256").hexdigest()


def with_templates(batch: pa.RecordBatch, miner) -> pa.RecordBatch:
    """A log batch with each record's template id (``miner.assign``)."""
    return _set_template_ids(batch, miner.assign(batch))


def _set_template_ids(logs, ids):
    """``logs`` (a log table or batch) with ``ids`` as its ``template_id`` column."""
    ids = ids.cast(pa.int64()) if isinstance(ids, pa.Array) else pa.array(np.asarray(ids, dtype=np.int64))
    return logs.set_column(logs.schema.get_field_index(S.TEMPLATE_ID), S.LOG_SCHEMA.field(S.TEMPLATE_ID), ids)
