"""The receiver's engine, independent of HTTP: the store, the write-ahead log, the flusher, the
decode threads, admission (backpressure) and the counters. Spans and log records take the same
path: decoded in a decode thread, one WAL record per request, durable before the answer,
converted into the store's span or log parts."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..io import LOG_FORMATS
from ._decode import DecodedRequest, decode
from ._errors import CollectorError
from ._flush import Conversion, Flusher, SegmentPartStore, replay
from ._settings import CollectorSettings
from ._stats import CollectorStats
from ._wal import WriteAheadLog, encode_log_record, encode_record, segment_seq

log = logging.getLogger("tracesleuth.collector")


class Collector:
    """Receives decoded requests, makes them durable and turns them into store parts.

    Parameters
    ----------
    store_path : str or Path
        The span store (created when absent).
    settings : CollectorSettings

    Attributes
    ----------
    stats : CollectorStats
    pending_requests, pending_bytes : int
        Requests admitted and not yet answered, and the request bytes they hold.
    """

    def __init__(self, store_path, settings: CollectorSettings):
        self.store_path = Path(store_path)
        self.settings = settings
        self.stats = CollectorStats()
        self.pending_requests = 0
        self.pending_bytes = 0
        self._state = "new"
        self._state_lock = threading.Lock()
        self._lock_fd: int | None = None
        self.store: SegmentPartStore | None = None
        self.wal: WriteAheadLog | None = None
        self.flusher: Flusher | None = None
        self._pool: ThreadPoolExecutor | None = None

    # -- life cycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Open (or create) the store, take its WAL lock, replay leftover segments, start the
        writer and flusher threads. Does nothing when already started.

        Raises
        ------
        TraceFormatError
            When the path exists and is not a span store.
        CollectorError
            When another receiver holds the store.
        """
        with self._state_lock:
            if self._state != "new":
                return
            self.store = SegmentPartStore(self.store_path)
            wal_dir = self.store.path / "wal"
            wal_dir.mkdir(exist_ok=True)
            self._lock_fd = _lock(wal_dir / "LOCK")
            try:
                leftover = [segment_seq(p.stem) for p in wal_dir.glob("seg-*.wal")]
                first_seq = max([s for s in leftover if s is not None] + [self.store.highest_segment()]) + 1
                try:
                    n = replay(self.store, wal_dir, self._replayed)
                except OSError as e:
                    raise CollectorError(f"{self.store.path}: cannot turn the write-ahead log left by the previous "
                                         f"run into parts ({e}); nothing was deleted") from e
                if n:
                    log.warning("replayed %d write-ahead log segment(s) left by the previous run: %d spans and "
                                "%d log records stored", n, self.stats.spans_replayed, self.stats.logs_replayed)
                self.wal = WriteAheadLog(wal_dir, first_seq=first_seq,
                                         max_segment_bytes=self.settings.max_segment_bytes, on_commit=self._committed)
                self.flusher = Flusher(self.store, self.wal, interval_seconds=self.settings.flush_interval_seconds,
                                       on_converted=self._converted, on_error=self._flush_failed)
                self._pool = ThreadPoolExecutor(self.settings.decode_threads, thread_name_prefix="tracesleuth-decode")
                self.wal.start()
                self.flusher.start()
            except BaseException:
                _unlock(self._lock_fd)
                self._lock_fd = None
                raise
            self._state = "running"

    def close(self) -> None:
        """Write what is queued, convert every segment into parts, stop the threads and release
        the store. Idempotent."""
        with self._state_lock:
            if self._state != "running":
                return
            self._state = "closed"
            self._pool.shutdown(wait=True)
            self.wal.close()
            self.flusher.stop()
            if not self.flusher.flush():
                log.error("some write-ahead log segments could not be turned into parts; they stay in %s and are "
                          "replayed at the next start", self.store.path / "wal")
            _unlock(self._lock_fd)
            self._lock_fd = None

    @property
    def running(self) -> bool:
        return self._state == "running"

    # -- admission ------------------------------------------------------------------------
    def admit(self, nbytes: int) -> str | None:
        """Reserve room for a request of ``nbytes``; None when admitted, else why not
        (``queue_full``, ``wal_backlog``). Called from the event loop only."""
        s = self.settings
        if self.wal is not None and self.wal.backlog_bytes >= s.max_wal_bytes:
            return "wal_backlog"
        if self.pending_requests and (self.pending_requests >= s.max_queue_requests
                                      or self.pending_bytes + nbytes > s.max_queue_bytes):
            return "queue_full"
        self.pending_requests += 1
        self.pending_bytes += nbytes
        return None

    def grow(self, nbytes: int) -> None:
        """Add ``nbytes`` to an admitted request's reservation (its decompressed body)."""
        self.pending_bytes += nbytes

    def release(self, nbytes: int) -> None:
        """Give back an admitted request's reservation."""
        self.pending_requests -= 1
        self.pending_bytes -= nbytes

    # -- work -----------------------------------------------------------------------------
    async def decode(self, fmt: str, body: bytes, source: str) -> tuple[DecodedRequest, bytes | None]:
        """Decode a body in a decode thread; also returns its WAL record (None when it holds
        neither spans (log records) nor rejects)."""
        limits = self.settings.log_limits if fmt in LOG_FORMATS else self.settings.span_limits
        return await asyncio.get_running_loop().run_in_executor(self._pool, _decode_and_encode, fmt, body, source,
                                                                limits)

    async def commit(self, record: bytes) -> None:
        """Append ``record`` to the WAL and wait until it is durable.

        Raises
        ------
        OSError
            When it could not be written (nothing was stored).
        TimeoutError
            When the writer did not confirm within ``commit_timeout_seconds``.
        """
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def done(error: BaseException | None) -> None:
            loop.call_soon_threadsafe(_resolve, fut, error)

        self.wal.submit(record, done)
        async with asyncio.timeout(self.settings.commit_timeout_seconds):
            await asyncio.shield(fut)

    def gauges(self) -> dict:
        """Current queue and WAL levels (for ``/stats``)."""
        s = self.settings
        return {"queue": {"pending_requests": self.pending_requests, "pending_bytes": self.pending_bytes,
                          "max_requests": s.max_queue_requests, "max_bytes": s.max_queue_bytes,
                          "wal_backlog_bytes": self.wal.backlog_bytes if self.wal else 0,
                          "max_wal_bytes": s.max_wal_bytes},
                "store": str(self.store_path)}

    # -- statistics callbacks -------------------------------------------------------------
    def _committed(self, records: int, nbytes: int) -> None:
        self.stats.add(wal_fsyncs=1, wal_records=records, wal_bytes=nbytes)

    def _converted(self, c: Conversion) -> None:
        self.stats.add(spans_stored=c.spans, reject_rows_stored=c.rejects, logs_stored=c.logs,
                       log_reject_rows_stored=c.log_rejects, segments_flushed=1, segments_damaged=int(c.damaged))

    def _replayed(self, c: Conversion) -> None:
        self._converted(c)
        self.stats.add(spans_replayed=c.spans, logs_replayed=c.logs, segments_replayed=1)

    def _flush_failed(self, e: BaseException) -> None:
        self.stats.add(flush_errors=1)


def _decode_and_encode(fmt: str, body: bytes, source: str, limits=None) -> tuple[DecodedRequest, bytes | None]:
    decoded = decode(fmt, body, source, limits=limits)
    if decoded.accepted == 0 and decoded.rejects.num_rows == 0:
        return decoded, None
    if decoded.logs is not None:
        return decoded, encode_log_record(decoded.logs, decoded.rejects)
    return decoded, encode_record(decoded.spans, decoded.rejects)


def _resolve(fut: asyncio.Future, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)


def _lock(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise CollectorError(f"{path.parent.parent}: the span store is already used by another receiver "
                             f"(pid {holder}); stop it or give another --store") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
