"""Throughput of ``tracesleuth collect`` under N concurrent OTLP/HTTP protobuf exporters.

Each run starts a receiver (``tracesleuth.collector.serve``) in its own process on a free
loopback port with a fresh store, then N exporter processes send batches of ``--batch`` spans
for ``--seconds``:

* ``--client sdk`` (default): the official ``OTLPSpanExporter`` (opentelemetry-exporter-otlp-proto-
  http) exports batches of spans recorded by the SDK's ``TracerProvider`` (8 distinct batches per
  exporter, cycled), encoding each request as an application would; its own retry on 429/503
  (with ``Retry-After``) is in force.
* ``--client raw``: the same requests, encoded once by the SDK's encoder, posted with
  ``http.client`` on a keep-alive connection (takes the client's encoding cost off the machine).

With ``--log-exporters M``, M more processes send log records beside the spans (``POST
/v1/logs``), each at ``--log-rate`` records per second in requests of ``--log-batch`` records
(paced, as a BatchLogRecordProcessor exports a service's logs), with the official
``OTLPLogExporter`` (``--client sdk``) or pre-encoded bodies (``raw``): the spans' throughput
beside a log stream, against the same command without it.

Measured per run: spans acknowledged per second over the sending window (spans of requests
answered 2xx / seconds), spans acknowledged vs spans in the store's Parquet parts after a graceful
stop (must be equal: zero loss), likewise for log records, how long after the last
acknowledgement every span was readable from the parts, and the receiver's peak RSS
(``VmHWM``). The median of ``--runs`` runs is reported. Loopback only; every wait is bounded.

Usage::

    python benchmarks/bench_collector.py [--exporters 4] [--seconds 10] [--runs 3] [--json]
    python benchmarks/bench_collector.py --log-exporters 1 --log-rate 2000     # spans beside logs
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SERVE = """
import json, sys
from tracesleuth.collector import serve
serve(sys.argv[1], on_ready=lambda url: print("READY", url, flush=True), **json.loads(sys.argv[2]))
"""
START_SECONDS = 60
STOP_SECONDS = 120


# -- exporters (child processes) ------------------------------------------------------------------
def _record_batches(seed: int, batch: int, n_batches: int) -> list:
    """``n_batches`` lists of ``batch`` finished SDK spans: traces of one server span and 7
    client children, with attributes, from a resource with service and host names."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"shop-{seed % 4}",
                                                        "host.name": f"node-{seed}"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for _ in range(n_batches * batch // 8):
        with tracer.start_as_current_span("GET /cart", kind=SpanKind.SERVER) as root:
            root.set_attribute("http.request.method", "GET")
            root.set_attribute("http.response.status_code", 200)
            for j in range(7):
                with tracer.start_as_current_span(f"SELECT cart_items {j}", kind=SpanKind.CLIENT) as child:
                    child.set_attribute("db.system", "postgresql")
                    child.set_attribute("db.response.returned_rows", j)
    spans = memory.get_finished_spans()
    return [list(spans[i * batch:(i + 1) * batch]) for i in range(n_batches)]


def _exporter(index: int, url: str, client: str, batch: int, ready, go, seconds: float, results) -> None:
    import logging

    logging.disable(logging.WARNING)  # the SDK logs each retried 429
    batches = _record_batches(index, batch, 8)
    acked = failed = requests = 0
    if client == "sdk":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult

        exporter = OTLPSpanExporter(endpoint=url + "/v1/traces", timeout=30)
        start, cpu0 = _wait_for_go(ready, go)
        deadline = start + seconds
        while time.time() < deadline:
            spans = batches[requests % len(batches)]
            requests += 1
            if exporter.export(spans) is SpanExportResult.SUCCESS:
                acked += len(spans)
            else:
                failed += len(spans)
        exporter.shutdown()
    else:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        bodies = [encode_spans(b).SerializeToString() for b in batches]
        host, port = url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        start, cpu0 = _wait_for_go(ready, go)
        deadline = start + seconds
        i = 0
        while time.time() < deadline:
            body = bodies[i % len(bodies)]
            conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
            resp = conn.getresponse()
            resp.read()
            requests += 1
            if resp.status == 200:
                acked += batch
                i += 1
            elif resp.status in (429, 503):
                time.sleep(float(resp.getheader("Retry-After") or 1))
            else:
                failed += batch
                i += 1
        conn.close()
    results.put({"exporter": index, "acked": acked, "failed": failed, "requests": requests,
                 "seconds": time.time() - start, "cpu_seconds": time.process_time() - cpu0})


def _log_batches(seed: int, batch: int, n_batches: int) -> list:
    """``n_batches`` lists of ``batch`` SDK log records written through Python's logging and
    OpenTelemetry's logging handler inside spans (trace context, code location, INFO and ERROR)."""
    import logging
    import warnings

    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    memory = InMemoryLogRecordExporter()
    resource = Resource.create({"service.name": f"service-{seed % 5}", "service.instance.id": f"pod-{seed}"})
    provider = LoggerProvider(resource=resource)
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        handler = LoggingHandler(level=logging.INFO, logger_provider=provider)
    logger = logging.getLogger(f"bench.shop.{seed}")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    tracer = TracerProvider(resource=resource).get_tracer("bench")
    for i in range(batch * n_batches):
        with tracer.start_as_current_span("handle"):
            if i % 10:
                logger.info("getcart: fetched %d rows for user %d", i % 7, i)
            else:
                logger.error("call to account-service getprofile failed: HTTP %d", 500)
    records = list(memory.get_finished_logs())
    return [records[k * batch:(k + 1) * batch] for k in range(n_batches)]


def _log_exporter(index: int, url: str, client: str, batch: int, rate: float, ready, go, seconds: float,
                  results) -> None:
    """Send log records at ``rate`` per second, ``batch`` per request, for ``seconds``."""
    import logging

    batches = _log_batches(1000 + index, batch, 8)  # (before logging is switched off)
    logging.disable(logging.WARNING)  # the SDK logs each retried 429
    acked = failed = requests = 0
    period = batch / rate
    if client == "sdk":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        exporter = OTLPLogExporter(endpoint=url + "/v1/logs", timeout=30)

        def send(k: int) -> bool:
            return exporter.export(batches[k % len(batches)]) is LogRecordExportResult.SUCCESS
    else:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

        bodies = [encode_logs(b).SerializeToString() for b in batches]
        host, port = url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)

        def send(k: int) -> bool:
            conn.request("POST", "/v1/logs", body=bodies[k % len(bodies)],
                         headers={"Content-Type": "application/x-protobuf"})
            resp = conn.getresponse()
            resp.read()
            return resp.status == 200
    start, cpu0 = _wait_for_go(ready, go)
    deadline = start + seconds
    while time.time() < deadline:
        n = len(batches[requests % len(batches)])
        if send(requests):
            acked += n
        else:
            failed += n
        requests += 1
        pause = start + requests * period - time.time()
        if pause > 0:
            time.sleep(min(pause, max(0.0, deadline - time.time())))
    if client == "sdk":
        exporter.shutdown()
    else:
        conn.close()
    results.put({"exporter": f"logs-{index}", "logs_acked": acked, "logs_failed": failed, "requests": requests,
                 "seconds": time.time() - start, "cpu_seconds": time.process_time() - cpu0})


def _wait_for_go(ready, go) -> tuple[float, float]:
    ready.release()
    if not go.wait(120):
        raise RuntimeError("no start signal")
    return time.time(), time.process_time()


# -- the receiver -------------------------------------------------------------------------------------
def _start_receiver(store: Path, settings: dict) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", _SERVE, str(store), json.dumps({"port": 0, **settings})],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    line = b""
    deadline = time.monotonic() + START_SECONDS
    while b"\n" not in line and time.monotonic() < deadline:
        if sel.select(max(0.0, deadline - time.monotonic())):
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
    sel.close()
    if not line.startswith(b"READY "):
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        raise RuntimeError(f"receiver did not start: {proc.communicate(timeout=30)[1].decode()[-2000:]}")
    return proc, line.split()[1].decode()


def _peak_rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _machine_busy_seconds() -> float:
    """CPU seconds spent busy by the whole machine so far, all CPUs (Linux ``/proc/stat``)."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _get_json(url: str) -> dict:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/stats")
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def _stored_rows(store: Path, kind: str = "spans") -> int:
    """Rows of the store's ``spans`` or ``logs`` parts."""
    import pyarrow.parquet as pq

    from tracesleuth.io.store import SpanStore

    store = SpanStore(store, create=False)
    files = store.span_files() if kind == "spans" else getattr(store, "log_files", list)()
    return sum(pq.ParquetFile(p).metadata.num_rows for p in files)


def one_run(*, exporters: int, seconds: float, batch: int, client: str, settings: dict, log_exporters: int = 0,
            log_batch: int = 512, log_rate: float = 1000.0) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-collector-") as tmp:
        store = Path(tmp) / "store"
        proc, url = _start_receiver(store, settings)
        try:
            ctx = mp.get_context("spawn")
            results, ready, go = ctx.Queue(), ctx.Semaphore(0), ctx.Event()
            workers = [ctx.Process(target=_exporter, args=(i, url, client, batch, ready, go, seconds, results))
                       for i in range(exporters)]
            workers += [ctx.Process(target=_log_exporter, args=(i, url, client, log_batch, log_rate, ready, go, seconds,
                                                                results)) for i in range(log_exporters)]
            for w in workers:
                w.start()
            for _ in workers:  # each has recorded and encoded its spans
                if not ready.acquire(timeout=120):
                    raise RuntimeError("an exporter did not get ready")
            cpu0, busy0 = _cpu_seconds(proc.pid), _machine_busy_seconds()
            go.set()
            everyone = [results.get(timeout=seconds + 120) for _ in workers]
            per_exporter = [r for r in everyone if "acked" in r]
            per_log_exporter = [r for r in everyone if "logs_acked" in r]
            for w in workers:
                w.join(timeout=30)
            sent_end = time.time()
            receiver_cpu = _cpu_seconds(proc.pid) - cpu0
            machine_busy = _machine_busy_seconds() - busy0
            acked = sum(r["acked"] for r in per_exporter)
            logs_acked = sum(r["logs_acked"] for r in per_log_exporter)
            window = max(r["seconds"] for r in everyone)
            lag = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # readable from the parts, receiver still running
                now = _get_json(url)
                if now["spans"]["stored"] >= acked and now.get("logs", {}).get("stored", 0) >= logs_acked:
                    lag = time.time() - sent_end
                    break
                time.sleep(0.05)
            stats = _get_json(url)
            rss = _peak_rss_bytes(proc.pid)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=30)
        stored = _stored_rows(store)
        logs_stored = _stored_rows(store, "logs") if log_exporters else 0
    return {
        "spans_per_second": acked / window,
        "spans_acknowledged": acked,
        "spans_failed": sum(r["failed"] for r in per_exporter),
        "spans_stored": stored,
        "lost": acked - stored,
        "logs_per_second": logs_acked / window,
        "logs_acknowledged": logs_acked,
        "logs_failed": sum(r["logs_failed"] for r in per_log_exporter),
        "logs_stored": logs_stored,
        "logs_lost": logs_acked - logs_stored,
        "requests": sum(r["requests"] for r in per_exporter),
        "responses": stats["responses"],
        "stored_after_seconds": lag,
        "peak_rss_bytes": rss,
        "window_seconds": window,
        "receiver_cpu_cores": receiver_cpu / window,
        "exporters_cpu_cores": sum(r["cpu_seconds"] for r in everyone) / window,
        # CPU the rest of the machine took meanwhile (other jobs): the figures are only
        # comparable between runs where this is near 0
        "other_cpu_cores": max(0.0, (machine_busy - receiver_cpu - sum(r["cpu_seconds"] for r in everyone))
                               / window),
        "wal_fsyncs": stats["wal"]["fsyncs"],
        "wal_records": stats["wal"]["records"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exporters", type=int, default=4, help="concurrent exporter processes (default 4)")
    parser.add_argument("--seconds", type=float, default=10.0, help="sending time per run (default 10)")
    parser.add_argument("--runs", type=int, default=3, help="runs; the median is reported (default 3)")
    parser.add_argument("--batch", type=int, default=512, help="spans per request (default 512, the SDK's "
                                                                "BatchSpanProcessor default)")
    parser.add_argument("--client", choices=("sdk", "raw"), default="sdk",
                        help="sdk: OTLPSpanExporter.export; raw: pre-encoded bodies over http.client")
    parser.add_argument("--flush-interval", type=float, default=1.0, help="receiver flush interval, s")
    parser.add_argument("--log-exporters", type=int, default=0, help="processes sending log records beside the "
                                                                      "spans (default 0)")
    parser.add_argument("--log-rate", type=float, default=1000.0, help="log records per second per log exporter")
    parser.add_argument("--log-batch", type=int, default=512, help="log records per request (default 512, the "
                                                                   "BatchLogRecordProcessor default)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    settings = {"flush_interval_seconds": args.flush_interval}
    runs = []
    for i in range(args.runs):
        r = one_run(exporters=args.exporters, seconds=args.seconds, batch=args.batch, client=args.client,
                    settings=settings, log_exporters=args.log_exporters, log_batch=args.log_batch,
                    log_rate=args.log_rate)
        runs.append(r)
        if not args.json:
            print(f"run {i + 1}: {r['spans_per_second']:,.0f} spans/s, acknowledged {r['spans_acknowledged']:,}, "
                  f"stored {r['spans_stored']:,}, failed {r['spans_failed']:,}, "
                  + (f"log records {r['logs_per_second']:,.0f}/s (acknowledged {r['logs_acknowledged']:,}, stored "
                     f"{r['logs_stored']:,}), " if args.log_exporters else "") + f"peak RSS "
                  f"{r['peak_rss_bytes'] / 2**20:,.0f} MiB, CPU cores used: receiver {r['receiver_cpu_cores']:.2f}, exporters {r['exporters_cpu_cores']:.2f}, other processes {r['other_cpu_cores']:.2f}; all stored {r['stored_after_seconds']:.2f} s after the "
                  f"last ack, {r['requests']:,} requests, {r['wal_records']:,} WAL records in "
                  f"{r['wal_fsyncs']:,} fsyncs", flush=True)
    summary = {
        "exporters": args.exporters, "batch_spans": args.batch, "seconds": args.seconds, "client": args.client,
        "cpus": os.cpu_count(),
        "spans_per_second_median": statistics.median(r["spans_per_second"] for r in runs),
        "lost_total": sum(r["lost"] for r in runs),
        "log_exporters": args.log_exporters, "log_rate": args.log_rate,
        "logs_per_second_median": statistics.median(r["logs_per_second"] for r in runs),
        "logs_lost_total": sum(r["logs_lost"] for r in runs),
        "peak_rss_bytes_max": max(r["peak_rss_bytes"] for r in runs),
        "runs": runs,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"median {summary['spans_per_second_median']:,.0f} spans/s over {args.runs} runs "
              f"({args.exporters} {args.client} exporters x {args.batch} spans/request, {os.cpu_count()} CPUs); "
              f"acknowledged - stored = {summary['lost_total']} spans; receiver peak RSS "
              f"{summary['peak_rss_bytes_max'] / 2**20:,.0f} MiB")
        if args.log_exporters:
            print(f"beside {args.log_exporters} log exporter(s) at {args.log_rate:g} records/s: median "
                  f"{summary['logs_per_second_median']:,.0f} log records/s acknowledged; acknowledged - stored = "
                  f"{summary['logs_lost_total']} log records")
    return 0 if summary["lost_total"] == 0 and summary["logs_lost_total"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
