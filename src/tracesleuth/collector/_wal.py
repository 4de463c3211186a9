"""The write-ahead log: every accepted request's spans or log records on disk, fsynced, before it is
acknowledged.

Layout::

    STORE/wal/
      LOCK                        held (flock) by the running receiver; holds its pid
      seg-<seq>.wal               segments: records appended, fsynced, in order
      damaged/seg-<seq>.wal       a segment with a corrupt record in its middle, kept for inspection

A segment is a sequence of records, each framed as::

    magic | payload length (u32 LE) | CRC-32 of the payload (u32 LE) | payload
    payload = rows (u64) | reject rows (u64) | rows IPC length (u64)
              | rows as an Arrow IPC stream | rejects as an Arrow IPC stream    (LZ4-compressed buffers)

where the magic says what the rows are: ``"TSW1"`` a request's spans
(:data:`~tracesleuth.schema.SPAN_SCHEMA`), ``"TSL1"`` a request's log records
(:data:`~tracesleuth.schema.LOG_SCHEMA`); the rejects are those of the request, in
:data:`~tracesleuth.schema.REJECT_SCHEMA` (for log records, their ``spans`` column counts records).
One segment holds records of both kinds in arrival order; segments written before log records
were received hold ``TSW1`` records only and read as before.

Records are appended by one writer thread that takes every request waiting, writes them with one
``write`` and makes them durable with one ``fdatasync`` (group commit); each waiting request is
told after the sync that covers it, and only then answered. A new segment's directory entry is
fsynced before its first record is acknowledged. A record cut short by a crash can only be one
that was never acknowledged: reading stops there (:func:`read_segment`).

Segments are sealed when they reach ``max_segment_bytes`` or when the flusher asks
(:meth:`WriteAheadLog.seal`), and handed to the flusher (:mod:`._flush`) which turns each into
Parquet parts named after it and only then deletes it. Segment numbers are never reused (they
continue after the highest number found in the WAL and in the parts' names).
"""

from __future__ import annotations

import logging
import os
import queue
import re
import struct
import threading
import zlib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.ipc  # noqa: F401  (pa.ipc)

from .. import schema as S
from ..io.store import fsync_dir

log = logging.getLogger("tracesleuth.collector")

SEGMENT_RE = re.compile(r"seg-(\d{12})")
#: Record magics: a request's spans, a request's log records.
_MAGIC, _MAGIC_LOGS = b"TSW1", b"TSL1"
_FRAME = struct.Struct("<4sII")
_COUNTS = struct.Struct("<QQQ")
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4") if pa.Codec.is_available("lz4") \
    else pa.ipc.IpcWriteOptions()
#: Longest a writer-thread wait lasts before it looks at its stop flag again (seconds).
_POLL_SECONDS = 0.2


def segment_name(seq: int) -> str:
    """``seg-000000000042``: the file stem of segment ``seq`` (parts made from it end with it)."""
    return f"seg-{seq:012d}"


def segment_seq(name: str) -> int | None:
    """The number in a segment or part name (``part-000003-seg-000000000042`` -> 42), else None."""
    m = SEGMENT_RE.search(name)
    return int(m.group(1)) if m else None


# -- records ----------------------------------------------------------------------------------
def _ipc(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _encode(magic: bytes, rows: pa.Table, rejects: pa.Table) -> bytes:
    a, b = _ipc(rows), _ipc(rejects)
    payload = b"".join((_COUNTS.pack(rows.num_rows, rejects.num_rows, a.size), memoryview(a), memoryview(b)))
    return _FRAME.pack(magic, len(payload), zlib.crc32(payload)) + payload


def encode_record(spans: pa.Table, rejects: pa.Table) -> bytes:
    """One framed WAL record holding a request's accepted spans and its reject rows."""
    return _encode(_MAGIC, spans, rejects)


def encode_log_record(logs: pa.Table, rejects: pa.Table) -> bytes:
    """One framed WAL record holding a request's accepted log records and its reject rows."""
    return _encode(_MAGIC_LOGS, logs, rejects)


@dataclass(frozen=True)
class SegmentContents:
    """What :func:`read_segment` found.

    Attributes
    ----------
    spans, rejects : pyarrow.Table
        All span records' spans and reject rows, in order.
    records : int
        Whole records read (of both kinds).
    tail_bytes : int
        Bytes after the last whole record that were not read (a record cut short by a crash:
        never acknowledged), 0 normally.
    damaged : bool
        True when a record with a wrong checksum or magic is followed by more data (corruption,
        not a cut-short write); the records before it are in ``spans``/``rejects`` and
        ``logs``/``log_rejects``.
    logs, log_rejects : pyarrow.Table
        All log records' records and reject rows, in order (empty in a segment without any).
    """

    spans: pa.Table
    rejects: pa.Table
    records: int
    tail_bytes: int
    damaged: bool
    logs: pa.Table = field(default_factory=S.empty_logs)
    log_rejects: pa.Table = field(default_factory=S.REJECT_SCHEMA.empty_table)


def read_segment(path: Path) -> SegmentContents:
    """Read every whole record of a segment, stopping at the first bad one (a record written
    before events, links and status messages were kept reads with them null)."""
    data = memoryview(path.read_bytes())
    found = {_MAGIC: ([], []), _MAGIC_LOGS: ([], [])}
    pos, records, damaged = 0, 0, False
    while pos < len(data):
        if len(data) - pos < _FRAME.size:
            break
        magic, length, crc = _FRAME.unpack_from(data, pos)
        n_rows = n_rejects = 0
        start, end = pos + _FRAME.size, pos + _FRAME.size + length
        if magic not in found:
            damaged = True
            break
        if end > len(data):
            break  # cut short: the crash came during this (unacknowledged) write
        payload = data[start:end]
        if zlib.crc32(payload) != crc:
            damaged = end < len(data)
            break
        try:
            n_rows, n_rejects, a_len = _COUNTS.unpack_from(payload, 0)
            off = _COUNTS.size
            a = pa.ipc.open_stream(pa.py_buffer(payload[off:off + a_len])).read_all()
            b = pa.ipc.open_stream(pa.py_buffer(payload[off + a_len:])).read_all()
        except (struct.error, pa.ArrowException):
            a = b = None
        if a is None or a.num_rows != n_rows or b.num_rows != n_rejects:
            damaged = True
            break
        rows, rejects = found[magic]
        # (a span record written before events and links were kept reads with them null)
        rows.append(S.with_later_columns(a) if magic == _MAGIC else a)
        rejects.append(b)
        records += 1
        pos = end
    (spans, rejects), (logs, log_rejects) = found[_MAGIC], found[_MAGIC_LOGS]
    return SegmentContents(
        spans=pa.concat_tables(spans).cast(S.SPAN_SCHEMA) if spans else S.empty_spans(),
        rejects=_rejects(rejects), records=records, tail_bytes=len(data) - pos, damaged=damaged,
        logs=pa.concat_tables(logs).cast(S.LOG_SCHEMA) if logs else S.empty_logs(), log_rejects=_rejects(log_rejects),
    )


def _rejects(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables).cast(S.REJECT_SCHEMA) if tables else S.REJECT_SCHEMA.empty_table()


# -- the log ----------------------------------------------------------------------------------
Done = Callable[[BaseException | None], None]


def _call(done: Done, error: BaseException | None) -> None:
    try:
        done(error)
    except Exception:  # noqa: BLE001 - a waiter that went away (closed event loop) must not stop the writer
        log.debug("write-ahead log: a commit waiter could not be told", exc_info=True)


class WriteAheadLog:
    """Segments under ``directory`` and the writer thread that appends to them (group commit).

    Parameters
    ----------
    directory : Path
        ``STORE/wal``.
    first_seq : int
        Number of the first segment this log creates.
    max_segment_bytes : int
        A segment is sealed once it reaches this size.
    on_commit : callable, optional
        ``on_commit(records, nbytes)`` after each fsync (statistics).

    Attributes
    ----------
    backlog_bytes : int
        Bytes in segments not yet turned into Parquet parts (sealed or current).
    """

    def __init__(self, directory: Path, *, first_seq: int, max_segment_bytes: int,
                 on_commit: Callable[[int, int], None] | None = None):
        self.directory = directory
        self.max_segment_bytes = max_segment_bytes
        self.on_commit = on_commit
        self.backlog_bytes = 0
        self._seq = first_seq
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0
        self._sealed: deque[tuple[Path, int]] = deque()
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracesleuth-wal", daemon=True)

    # -- public ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def submit(self, record: bytes, done: Done) -> None:
        """Queue ``record``; ``done(None)`` is called from the writer thread once it is durable,
        ``done(error)`` when it could not be written (then it is not in the log)."""
        if self._stop.is_set():
            done(RuntimeError("the write-ahead log is closed"))
            return
        self._queue.put((record, done))

    def seal(self) -> None:
        """Close the current segment (when it holds anything) and queue it for the flusher."""
        with self._lock:
            self._seal_locked()

    def take_sealed(self) -> list[tuple[Path, int]]:
        """The sealed segments not yet handed out, oldest first, as ``(path, size)``."""
        with self._lock:
            out = list(self._sealed)
            self._sealed.clear()
        return out

    def give_back(self, segments: list[tuple[Path, int]]) -> None:
        """Return segments the flusher could not convert (kept first in line for the next try)."""
        with self._lock:
            self._sealed.extendleft(reversed(segments))

    def released(self, size: int) -> None:
        """A segment of ``size`` bytes was turned into parts and deleted."""
        with self._lock:
            self.backlog_bytes -= size

    def close(self, timeout: float = 30.0) -> None:
        """Write whatever is queued, stop the writer thread and seal the current segment."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._drain_after_stop()
        self.seal()

    # -- writer thread --------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if self._stop.is_set():
                    return
                continue
            batch = [first]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._commit(batch)
            except Exception as e:  # noqa: BLE001 - never let the writer die: fail these requests (503)
                log.exception("write-ahead log: unexpected error")
                for _, done in batch:
                    _call(done, e)

    def _drain_after_stop(self) -> None:
        batch = []
        while True:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        if batch:
            self._commit(batch)

    def _commit(self, batch: list[tuple[bytes, Done]]) -> None:
        data = b"".join(r for r, _ in batch)
        error: BaseException | None = None
        with self._lock:
            start = self._size
            try:
                if self._fd is None:
                    self._open_segment()
                    start = 0
                view, fd = memoryview(data), self._fd
                while view:
                    view = view[os.write(fd, view):]
                (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(fd)
            except OSError as e:
                error = e
                log.error("write-ahead log: cannot write %d request(s) to %s: %s", len(batch), self._path, e)
                if self._fd is not None:
                    try:  # cut the partial write off, so the segment ends with whole records
                        os.ftruncate(self._fd, start)
                        os.fsync(self._fd)
                    except OSError:
                        pass
                    self._size = start
                    self._seal_locked()
            else:
                self._size += len(data)
                self.backlog_bytes += len(data)
                if self._size >= self.max_segment_bytes:
                    self._seal_locked()
        if error is None and self.on_commit is not None:
            self.on_commit(len(batch), len(data))
        for _, done in batch:
            _call(done, error)

    def _open_segment(self) -> None:
        path = self.directory / f"{segment_name(self._seq)}.wal"
        self._seq += 1
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0),
                           0o644)
        self._path, self._size = path, 0
        fsync_dir(self.directory)

    def _seal_locked(self) -> None:
        if self._fd is None:
            return
        os.close(self._fd)
        if self._size:
            self._sealed.append((self._path, self._size))
        else:
            self._path.unlink(missing_ok=True)
        self._fd, self._path, self._size = None, None, 0
