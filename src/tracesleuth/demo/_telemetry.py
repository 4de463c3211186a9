"""What each demo process counts of its own telemetry: the spans and log records it recorded, and
what became of them on their way to the collector.

The OpenTelemetry SDK drops telemetry without telling its caller: a BatchSpanProcessor or
BatchLogRecordProcessor whose queue is full (``max_queue_size``) drops the new item with a
warning in its own log; a record that ends after the processor's shutdown is ignored; a
shutdown that times out leaves what is still queued unexported; and a batch whose export fails
(after the OTLP exporter's retries) is gone. The SDK can count the first two as metrics
(``otel.sdk.processor.span.processed`` with ``error.type``), but only through a MeterProvider,
and never the last two. So every process counts for itself, with two small plug-ins around the
batch processor:

* :class:`CountingSpanProcessor` / :class:`CountingLogRecordProcessor`, added to the provider
  *beside* (before) the batch processor: every span that ends and every log record that is
  emitted passes them (``on_end``, ``on_emit``), whatever the batch processor then does;
* :class:`CountingExporter`, around the OTLP exporter: the items of each batch the collector
  accepted, and of each batch it refused or never got.

Both write into one :class:`TelemetryCounter` per signal; once the provider is shut down
(its last batch exported or abandoned), :meth:`TelemetryCounter.account` gives the
:class:`~._account.SignalAccount`, whose ``dropped`` - recorded, neither exported nor failed -
is what the batch processor dropped before export. The process writes its
:class:`~._account.ProcessAccount` for the run (:meth:`~._account.ProcessAccount.write`).
"""

from __future__ import annotations

import threading

from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.trace import SpanProcessor

from ._account import SignalAccount

__all__ = ["CountingExporter", "CountingLogRecordProcessor", "CountingSpanProcessor", "TelemetryCounter"]


class TelemetryCounter:
    """Running counts of one signal (spans, or log records) of one process; thread-safe.

    Spans end, and log records are emitted, on any thread of the process; batches are exported
    from the batch processor's worker thread (or the thread that flushes it).

    Examples
    --------
    >>> counter = TelemetryCounter()
    >>> for _ in range(5):
    ...     counter.record()
    >>> counter.exported(3); counter.failed(1)
    >>> counter.account()
    SignalAccount(recorded=5, exported=3, export_failed=1)
    >>> counter.account().dropped
    1
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._recorded = self._exported = self._failed = 0

    def record(self) -> None:
        """One span ended, or one log record emitted: handed to the SDK's pipeline."""
        with self._lock:
            self._recorded += 1

    def exported(self, n: int) -> None:
        """``n`` items in a batch the collector accepted."""
        with self._lock:
            self._exported += n

    def failed(self, n: int) -> None:
        """``n`` items in a batch whose export failed (refused, or never received)."""
        with self._lock:
            self._failed += n

    def account(self) -> SignalAccount:
        """The counts so far; final once the provider is shut down."""
        with self._lock:
            return SignalAccount(recorded=self._recorded, exported=self._exported, export_failed=self._failed)


class CountingExporter:
    """A span or log-record exporter around another that counts the items it exported and failed to.

    Parameters
    ----------
    exporter : SpanExporter or LogRecordExporter
        What exports (the OTLP/HTTP exporter).
    counter : TelemetryCounter
        Where the counts go.
    success : SpanExportResult or LogRecordExportResult
        The result member meaning "exported" (``SpanExportResult.SUCCESS``,
        ``LogRecordExportResult.SUCCESS``); anything else counts as failed, as does an exception
        (which the exporter should not raise: it is returned as the same enum's ``FAILURE``).
    """

    def __init__(self, exporter, counter: TelemetryCounter, *, success):
        self.exporter, self.counter, self.success = exporter, counter, success

    def export(self, batch):
        try:
            result = self.exporter.export(batch)
        except Exception:                       # an exporter must not raise; count it if it does
            result = type(self.success).FAILURE
        if result is self.success:
            self.counter.exported(len(batch))
        else:
            self.counter.failed(len(batch))
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.exporter.shutdown()


class CountingSpanProcessor(SpanProcessor):
    """Counts every span that ends (:meth:`TelemetryCounter.record`); add it beside the batch processor.

    Parameters
    ----------
    counter : TelemetryCounter
    """

    def __init__(self, counter: TelemetryCounter):
        self.counter = counter

    def on_end(self, span) -> None:
        self.counter.record()


class CountingLogRecordProcessor(LogRecordProcessor):
    """Counts every log record emitted (:meth:`TelemetryCounter.record`); add it beside the batch processor.

    Parameters
    ----------
    counter : TelemetryCounter
    """

    def __init__(self, counter: TelemetryCounter):
        self.counter = counter

    def on_emit(self, log_record) -> None:
        self.counter.record()

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
