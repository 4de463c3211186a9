"""What a demo process counts of its telemetry (:mod:`tracesleuth.demo._telemetry`), without live
processes: a fake exporter and a tiny queue that forces the batch processor to drop.

The invariant, for spans and log records alike: ``recorded = exported + export_failed + dropped``
exactly, each item in one of the three, once the provider is shut down.
"""

from __future__ import annotations

import threading

import pytest
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from tracesleuth.demo._account import ProcessAccount, SignalAccount
from tracesleuth.demo._protocol import DemoConfig, ExportSettings, make_logger_provider, make_tracer_provider
from tracesleuth.demo._telemetry import CountingExporter, TelemetryCounter

#: The batch processor's queue holds this many items; the fake exporter blocks until released,
#: so that everything recorded meanwhile beyond the queue is dropped.
QUEUE = 4


class _GatedExporter:
    """Exports nothing until ``gate`` is set; then accepts every ``fail_every``-th batch as failed
    (``fail_every=0``: none), the others as exported. Raises on the batch number ``raise_on``."""

    def __init__(self, success, *, fail_every: int = 0, raise_on: int = -1):
        self.success, self.fail_every, self.raise_on = success, fail_every, raise_on
        self.gate, self.entered = threading.Event(), threading.Event()
        self.batches: list[int] = []

    def export(self, batch):
        self.entered.set()
        self.gate.wait(10)
        k = len(self.batches)
        self.batches.append(len(batch))
        if k == self.raise_on:
            raise RuntimeError("the exporter broke its contract")
        if self.fail_every and k % self.fail_every == 0:
            return type(self.success).FAILURE
        return self.success

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        pass


def _config() -> DemoConfig:
    return DemoConfig(seed=0, collector_url="http://127.0.0.1:9", instances={}, degradations=(), n_requests=1,
                      rate_per_s=1.0, export=ExportSettings(schedule_delay_millis=10, max_queue_size=QUEUE,
                                                            max_export_batch_size=2, export_timeout_millis=1000))


def _spans(exporter, n: int) -> SignalAccount:
    provider = make_tracer_provider("cart-service", "cart-service-0", _config(), exporter=exporter)
    tracer = provider.get_tracer(__name__)
    with tracer.start_as_current_span("first"):
        pass
    assert exporter.entered.wait(10)           # the worker holds the first batch: the queue fills
    for k in range(n - 1):
        with tracer.start_as_current_span(f"span {k}"):
            pass
    exporter.gate.set()
    provider.shutdown()
    return provider.counter.account()


def _logs(exporter, n: int) -> SignalAccount:
    provider = make_logger_provider("cart-service", "cart-service-0", _config(), exporter=exporter)
    logger = provider.get_logger(__name__)
    logger.emit(body="first")
    assert exporter.entered.wait(10)
    for k in range(n - 1):
        logger.emit(body=f"record {k}")
    exporter.gate.set()
    provider.shutdown()
    return provider.counter.account()


@pytest.mark.parametrize("pipeline, success", [(_spans, SpanExportResult.SUCCESS),
                                               (_logs, LogRecordExportResult.SUCCESS)], ids=["spans", "logs"])
@pytest.mark.parametrize("fail_every, raise_on", [(0, -1), (2, -1), (0, 1)], ids=["ok", "some-fail", "raises"])
def test_every_recorded_item_is_exported_failed_or_dropped(pipeline, success, fail_every, raise_on):
    exporter = _GatedExporter(success, fail_every=fail_every, raise_on=raise_on)
    account = pipeline(exporter, 50)
    assert account.recorded == 50
    assert account.exported + account.export_failed == sum(exporter.batches)
    assert account.export_failed == sum(n for k, n in enumerate(exporter.batches)
                                        if k == raise_on or (fail_every and k % fail_every == 0))
    # The queue held QUEUE items while the first batch was held: the rest of the 49 were dropped.
    assert account.dropped == 49 - QUEUE > 0
    assert account.recorded == account.exported + account.export_failed + account.dropped


def test_nothing_dropped_when_the_queue_keeps_up():
    exporter = _GatedExporter(SpanExportResult.SUCCESS)
    exporter.gate.set()
    provider = make_tracer_provider("cart-service", "cart-service-0", _config(), exporter=exporter)
    for k in range(3):
        with provider.get_tracer(__name__).start_as_current_span(f"span {k}"):
            pass
    provider.shutdown()
    assert provider.counter.account() == SignalAccount(recorded=3, exported=3, export_failed=0)


def test_a_span_ending_after_shutdown_is_counted_as_dropped():
    exporter = _GatedExporter(SpanExportResult.SUCCESS)
    exporter.gate.set()
    provider = make_tracer_provider("cart-service", "cart-service-0", _config(), exporter=exporter)
    span = provider.get_tracer(__name__).start_span("late")
    provider.shutdown()
    span.end()
    assert provider.counter.account() == SignalAccount(recorded=1, exported=0, export_failed=0)
    assert provider.counter.account().dropped == 1


def test_the_counting_exporter_counts_by_the_result():
    counter = TelemetryCounter()
    ok, bad = _GatedExporter(SpanExportResult.SUCCESS), _GatedExporter(SpanExportResult.SUCCESS, fail_every=1)
    ok.gate.set(); bad.gate.set()
    assert CountingExporter(ok, counter, success=SpanExportResult.SUCCESS).export([1, 2, 3]) is SpanExportResult.SUCCESS
    assert CountingExporter(bad, counter, success=SpanExportResult.SUCCESS).export([1, 2]) is SpanExportResult.FAILURE
    assert counter.account() == SignalAccount(recorded=0, exported=3, export_failed=2)


def test_a_process_account_round_trips(tmp_path):
    service = ProcessAccount("cart-service", "cart-service-0", SignalAccount(10, 7, 1), SignalAccount(5, 5, 0))
    loadgen = ProcessAccount("load-generator", "load-generator-0", SignalAccount(3, 3, 0))
    service.write(tmp_path)
    loadgen.write(tmp_path / "other")
    assert ProcessAccount.read_all(tmp_path) == (service,)
    assert ProcessAccount.read_all(tmp_path / "other") == (loadgen,)
    assert ProcessAccount.read_all(tmp_path / "missing") == ()
    assert service.to_dict()["spans"] == {"recorded": 10, "exported": 7, "export_failed": 1, "dropped": 2}
    assert service.describe() == ("cart-service-0: spans: 10 recorded, 7 exported, 1 export failed, 2 dropped before "
                                  "export; log records: 5 recorded, 5 exported, 0 export failed, 0 dropped before "
                                  "export")
