"""Turning write-ahead-log segments into the store's Parquet parts, idempotently.

Segment ``seg-N`` becomes ``spans/date=D/hour=H/part-<k>-seg-N.parquet``, one part in each hour
partition its spans start in (``spans/part-<k>-seg-N.parquet`` in a flat store of version 1), and
``rejects/part-<k>-seg-N.parquet`` when it holds reject rows, written by :meth:`SpanStore.append_spans` /
:meth:`~SpanStore.append_rejects` (a part number reserved under the store lock, a temporary file,
fsynced, renamed into place; see :mod:`tracesleuth.io.store`); its log records likewise become
``logs/date=D/hour=H/part-<k>-seg-N.parquet`` (by the hour of their time), templated by the
store's log-template miner first (:meth:`SpanStore.template_logs`), and
``log_rejects/part-<k>-seg-N.parquet`` (:meth:`SpanStore.append_logs`). The segment
is deleted only after its parts are in place and their directory is fsynced. A crash at any point
leaves either the segment (converted again at start-up) or the segment and some or all of its
parts (then a partition holding a part under the segment's name is not written a second time:
the segment's split by hour is the same each time), never a lost or a doubled span or log record.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import schema as S
from ..io.store import LOG_REJECTS, SpanStore, fsync_dir
from ._wal import WriteAheadLog, read_segment, segment_seq

log = logging.getLogger("tracesleuth.collector")

#: ``part_spans`` given to :meth:`SpanStore.append_spans`: one part per segment.
_ONE_PART = 1 << 62
#: The store's tables a segment is converted into.
_KINDS = ("spans", "rejects", "logs", LOG_REJECTS.kind)


class SegmentPartStore(SpanStore):
    """A :class:`~tracesleuth.io.store.SpanStore` whose next part is named after the WAL segment
    being converted (``part-000007-seg-000000000042.parquet``), so that a converted segment
    can be recognised after a crash. The part number is reserved under the store lock like any
    other writer's (``tracesleuth ingest`` runs writing at the same time take other numbers and
    keep their plain ``part-<k>.parquet`` names).
    """

    segment: str | None = None
    #: The table being written from the segment (``spans`` or ``logs``): the one whose partitions
    #: already holding a part of the segment are skipped.
    table: str = "spans"

    def _part_name(self, number: int) -> str:
        name = super()._part_name(number)
        return name if self.segment is None else name.replace(".parquet", f"-{self.segment}.parquet")

    def part_of(self, kind: str, segment: str, partition: str | None = None) -> Path | None:
        """The ``kind`` (``spans``/``rejects``/``logs``/``log_rejects``) part already made from
        ``segment`` in ``partition`` (an hour partition, ``date=D/hour=H``), if any."""
        folder = self.path / kind if partition is None else self.path / kind / partition
        return next(iter(sorted(folder.glob(f"part-*-{segment}.parquet"))), None)

    def has_parts(self, kind: str, segment: str) -> bool:
        """Whether any ``kind`` part, in any partition, was made from ``segment``."""
        return any((self.path / kind).rglob(f"part-*-{segment}.parquet"))

    def _skip_partition(self, partition: str | None) -> bool:
        return self.segment is not None and self.part_of(self.table, self.segment, partition) is not None

    def highest_segment(self) -> int:
        """The highest segment number named by a part (-1 when none is)."""
        seqs = [segment_seq(p.stem) for kind in _KINDS for p in (self.path / kind).rglob("part-*-seg-*")]
        return max((s for s in seqs if s is not None), default=-1)


@dataclass(frozen=True)
class Conversion:
    """What converting one segment did: spans, reject rows, log records and their reject rows
    written now (0 when their parts already existed), whether the segment was damaged, bytes of a
    cut-short tail."""

    spans: int
    rejects: int
    already_done: bool
    damaged: bool
    tail_bytes: int
    logs: int = 0
    log_rejects: int = 0


def convert_segment(store: SegmentPartStore, path: Path) -> Conversion:
    """Write the parts of one segment (those not written yet), then delete the segment.

    A segment with a damaged record in its middle is moved to ``wal/damaged/`` after its whole
    records are stored, and logged as an error.
    """
    name = path.stem
    contents = read_segment(path)
    wrote_spans = wrote_rejects = wrote_logs = wrote_log_rejects = 0
    done_before = True
    store.segment = name
    try:
        # By time: each hour's rows in one run, so each partition gets one part.
        if contents.spans.num_rows:
            store.table = "spans"
            by_start = contents.spans.take(pc.sort_indices(contents.spans.column(S.START_NS)))
            parts = store.append_spans(by_start.to_batches(), part_spans=_ONE_PART)
            wrote_spans = sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
            done_before = not parts
        if contents.logs.num_rows:
            store.table = "logs"
            by_time = contents.logs.take(pc.sort_indices(contents.logs.column(S.TIME_NS)))
            # Templated as an ingest templates its records; a segment converted in part before a
            # crash was templated then (the state was saved first): matched again, not relearned.
            by_time = store.template_logs(by_time, learn=not store.has_parts("logs", name))
            parts = store.append_logs(by_time.to_batches(), part_records=_ONE_PART)
            wrote_logs = sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
            done_before = done_before and not parts
        if contents.rejects.num_rows and store.part_of("rejects", name) is None:
            store.append_rejects(contents.rejects)
            wrote_rejects, done_before = contents.rejects.num_rows, False
        if contents.log_rejects.num_rows and store.part_of(LOG_REJECTS.kind, name) is None:
            store.append_rejects(contents.log_rejects, table=LOG_REJECTS)
            wrote_log_rejects, done_before = contents.log_rejects.num_rows, False
    finally:
        store.segment, store.table = None, "spans"
    for kind, wrote in (("spans", wrote_spans), ("rejects", wrote_rejects), ("logs", wrote_logs),
                        (LOG_REJECTS.kind, wrote_log_rejects)):
        if wrote:  # (each part's own directory was fsynced when it was published)
            fsync_dir(store.path / kind)
    if contents.damaged:
        damaged = path.parent / "damaged"
        damaged.mkdir(exist_ok=True)
        shutil.move(str(path), damaged / path.name)
        log.error("write-ahead log segment %s has a corrupt record after %d whole record(s); those were stored, "
                  "the segment is kept in %s", path.name, contents.records, damaged)
    else:
        if contents.tail_bytes:
            log.warning("write-ahead log segment %s ends with %d bytes of a record cut short by a crash (never "
                        "acknowledged); dropped", path.name, contents.tail_bytes)
        path.unlink()
    fsync_dir(path.parent)
    held = contents.spans.num_rows or contents.rejects.num_rows or contents.logs.num_rows \
        or contents.log_rejects.num_rows
    return Conversion(spans=wrote_spans, rejects=wrote_rejects, already_done=done_before and bool(held),
                      damaged=contents.damaged, tail_bytes=contents.tail_bytes, logs=wrote_logs,
                      log_rejects=wrote_log_rejects)


class Flusher:
    """Background thread: every ``interval_seconds`` seal the current segment and convert every
    sealed one, oldest first. A segment that fails to convert (disk full, ...) is kept and tried
    again at the next interval.

    Parameters
    ----------
    store : SegmentPartStore
    wal : WriteAheadLog
    interval_seconds : float
    on_converted : callable
        ``on_converted(Conversion)`` after each segment (statistics).
    on_error : callable
        ``on_error(exception)`` when a conversion fails.
    """

    def __init__(self, store: SegmentPartStore, wal: WriteAheadLog, *, interval_seconds: float,
                 on_converted: Callable[[Conversion], None], on_error: Callable[[BaseException], None]):
        self.store, self.wal, self.interval_seconds = store, wal, interval_seconds
        self.on_converted, self.on_error = on_converted, on_error
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one conversion pass at a time (thread and final flush)
        self._thread = threading.Thread(target=self._run, name="tracesleuth-flusher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the thread (after its current pass); :meth:`flush` once more afterwards."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            self.flush()

    def flush(self) -> bool:
        """Seal the current segment and convert every sealed one. True when all were converted."""
        with self._lock:
            self.wal.seal()
            pending = self.wal.take_sealed()
            for i, (path, size) in enumerate(pending):
                t0 = time.perf_counter()
                try:
                    result = convert_segment(self.store, path)
                except Exception as e:  # noqa: BLE001 - keep the segment, retry later, keep serving
                    log.error("cannot turn write-ahead log segment %s into Parquet parts (kept, retried in %.3g s): "
                              "%s", path.name, self.interval_seconds, e)
                    self.wal.give_back(pending[i:])
                    self.on_error(e)
                    return False
                self.wal.released(size)
                self.on_converted(result)
                log.debug("segment %s -> %d spans, %d log records in %.1f ms", path.name, result.spans, result.logs,
                          (time.perf_counter() - t0) * 1e3)
            return True


def replay(store: SegmentPartStore, wal_dir: Path, on_converted: Callable[[Conversion], None]) -> int:
    """Convert the segments left by a previous run (at start-up, before any request is taken).

    Returns
    -------
    int
        Segments found.
    """
    segments = sorted(p for p in wal_dir.glob("seg-*.wal") if segment_seq(p.stem) is not None)
    for path in segments:
        result = convert_segment(store, path)
        on_converted(result)
        log.info("replayed write-ahead log segment %s: %d spans and %d log records stored%s", path.name,
                 result.spans, result.logs, " (its parts were already in place)" if result.already_done else "")
    return len(segments)
