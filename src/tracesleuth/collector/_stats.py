"""Counters of a running receiver, served as JSON by ``GET /stats``."""

from __future__ import annotations

import threading
import time
from collections import Counter

#: Distinct rejection reasons counted one by one; any further ones are summed under ``other``.
MAX_REASONS = 64
#: The scalar counters of :class:`CollectorStats` (attributes, from 0; :meth:`CollectorStats.add`).
SCALARS = ("bytes_received", "bytes_decoded",
           "spans_received", "spans_acknowledged", "spans_rejected", "spans_stored", "spans_replayed",
           "reject_rows_stored",
           "logs_received", "logs_acknowledged", "logs_rejected", "logs_stored", "logs_replayed",
           "log_reject_rows_stored",
           "wal_fsyncs", "wal_records", "wal_bytes", "segments_flushed", "segments_replayed", "segments_damaged",
           "flush_errors")


class CollectorStats:
    """Thread-safe counters (the event loop, the decode threads, the WAL writer and the flusher
    all update them).

    Counted: requests by route, responses by status, 4xx and 5xx by kind (``errors``: bad_request,
    unauthorized, not_found, method_not_allowed, request_timeout, payload_too_large,
    unsupported_media_type, too_many_requests, wal_unavailable, wal_timeout, nesting_too_deep), 429s by cause (``throttled``:
    queue_full, wal_backlog), bytes as received and
    decompressed, spans and log records received / acknowledged (durable in the WAL) / rejected /
    stored (in Parquet parts), rejected spans and log records by reason, WAL commits and fsyncs,
    segments and parts.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.time()
        self.requests: Counter = Counter()
        self.responses: Counter = Counter()
        self.errors: Counter = Counter()
        self.throttled: Counter = Counter()
        for name in SCALARS:
            setattr(self, name, 0)
        self.reasons: dict[str, list[int]] = {}
        self.log_reasons: dict[str, list[int]] = {}

    def add(self, **counts: int) -> None:
        """Add to scalar counters: ``add(bytes_received=n, spans_received=m)``."""
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def count(self, counter: str, key: str, n: int = 1) -> None:
        """Add to one key of a keyed counter (``requests``, ``responses``, ``errors``, ``throttled``)."""
        with self._lock:
            getattr(self, counter)[key] += n

    def rejected(self, reasons: list[tuple[str, int, int]], *, logs: bool = False) -> None:
        """Count rejects by reason, ``(reason, records, spans)`` as :meth:`RejectLog.reasons` gives
        (of log records when ``logs``: ``spans`` then counts log records)."""
        counter = self.log_reasons if logs else self.reasons
        with self._lock:
            for reason, records, spans in reasons:
                if reason not in counter and len(counter) >= MAX_REASONS:
                    reason = "other"
                r = counter.setdefault(reason, [0, 0])
                r[0] += records
                r[1] += spans

    def to_dict(self, **live) -> dict:
        """JSON-safe snapshot; ``live`` adds current gauges (queue, WAL backlog)."""
        with self._lock:
            return {
                "uptime_seconds": round(time.time() - self.started, 3),
                "requests": {"total": sum(self.requests.values()), **dict(self.requests)},
                "responses": {str(k): v for k, v in sorted(self.responses.items())},
                "errors": dict(self.errors),
                "throttled": dict(self.throttled),
                "bytes": {"received": self.bytes_received, "decompressed": self.bytes_decoded},
                "spans": {"received": self.spans_received, "acknowledged": self.spans_acknowledged,
                          "rejected": self.spans_rejected, "stored": self.spans_stored,
                          "replayed": self.spans_replayed},
                "rejections": [{"reason": k, "records": v[0], "spans": v[1]}
                               for k, v in sorted(self.reasons.items(), key=lambda kv: -kv[1][1])],
                "logs": {"received": self.logs_received, "acknowledged": self.logs_acknowledged,
                         "rejected": self.logs_rejected, "stored": self.logs_stored, "replayed": self.logs_replayed,
                         "reject_rows_stored": self.log_reject_rows_stored,
                         "rejections": [{"reason": k, "entries": v[0], "records": v[1]}
                                        for k, v in sorted(self.log_reasons.items(), key=lambda kv: -kv[1][1])]},
                "wal": {"fsyncs": self.wal_fsyncs, "records": self.wal_records, "bytes": self.wal_bytes,
                        "segments_flushed": self.segments_flushed, "segments_replayed": self.segments_replayed,
                        "segments_damaged": self.segments_damaged, "flush_errors": self.flush_errors,
                        "reject_rows_stored": self.reject_rows_stored},
                **live,
            }
