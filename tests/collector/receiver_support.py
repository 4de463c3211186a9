"""Helpers of the receiver tests: request bodies with known span ids (log records with known
bodies), and a receiver run in a subprocess on a free loopback port (bounded in time everywhere)."""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

#: Seconds a receiver subprocess may take to answer, to start, to stop.
START_SECONDS = 30
STOP_SECONDS = 30

_SERVE = """
import json, sys
from tracesleuth.collector import serve
kwargs = json.loads(sys.argv[2])
stats = serve(sys.argv[1], on_ready=lambda url: print("READY", url, flush=True), **kwargs)
print("STATS", json.dumps(stats), flush=True)
"""


def proto_request(n_spans: int, seed: int, *, service: str = "checkout", bad: dict | None = None) -> tuple[bytes, list]:
    """An OTLP protobuf ``ExportTraceServiceRequest`` of ``n_spans`` spans in traces of 8 spans
    (root + children), with ids drawn from ``seed``.

    ``bad`` maps a span index to a defect: ``"short_trace_id"`` (empty trace id),
    ``"end_before_start"``. Returns the body and the ``(trace_id, span_id)`` hex pairs of the
    spans that are valid.
    """
    rng = random.Random(seed)
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    for key, value in (("service.name", service), ("host.name", f"host-{seed % 3}")):
        kv = rs.resource.attributes.add()
        kv.key, kv.value.string_value = key, value
    scope = rs.scope_spans.add()
    scope.scope.name = "tests"
    valid, root, trace = [], b"", b""
    t0 = 1_700_000_000_000_000_000 + seed * 1_000_000_000
    for i in range(n_spans):
        sp = scope.spans.add()
        if i % 8 == 0:
            trace, root = rng.randbytes(16), b""
        sp.trace_id, sp.span_id = trace, rng.randbytes(8)
        if root:
            sp.parent_span_id = root
        else:
            root = sp.span_id
        sp.name = "GET /cart" if sp.span_id == root else f"SELECT {i % 5}"
        sp.kind = 2 if sp.span_id == root else 3
        sp.start_time_unix_nano = t0 + i * 1000
        sp.end_time_unix_nano = sp.start_time_unix_nano + 50_000 + i
        a = sp.attributes.add()
        a.key, a.value.int_value = "seq", i
        defect = (bad or {}).get(i)
        if defect == "short_trace_id":
            sp.trace_id = b""
        elif defect == "end_before_start":
            sp.end_time_unix_nano = sp.start_time_unix_nano - 1
        elif defect is None:
            valid.append((sp.trace_id.hex(), sp.span_id.hex()))
        else:  # pragma: no cover
            raise ValueError(defect)
    return req.SerializeToString(), valid


def proto_logs_request(n_records: int, seed: int, *, service: str = "checkout",
                       bad: dict | None = None) -> tuple[bytes, list]:
    """An OTLP protobuf ``ExportLogsServiceRequest`` of ``n_records`` log records, each with a
    unique body ``"record <seed>-<i>: ..."``, trace context drawn from ``seed``, a severity and an
    attribute.

    ``bad`` maps a record index to a defect: ``"no_time"`` (neither time nor observed time: the
    record is rejected), ``"short_trace_id"`` (a 3-byte trace id: kept without it, a warning).
    Returns the body and the bodies of the records that are kept.
    """
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    rng = random.Random(seed)
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    for key, value in (("service.name", service), ("service.instance.id", f"{service}-{seed % 3}")):
        kv = rl.resource.attributes.add()
        kv.key, kv.value.string_value = key, value
    scope = rl.scope_logs.add()
    scope.scope.name = "tests"
    kept = []
    t0 = 1_700_000_000_000_000_000 + seed * 1_000_000_000
    for i in range(n_records):
        lr = scope.log_records.add()
        lr.time_unix_nano = lr.observed_time_unix_nano = t0 + i * 1000
        lr.trace_id, lr.span_id = rng.randbytes(16), rng.randbytes(8)
        lr.severity_number, lr.severity_text = (17, "ERROR") if i % 5 == 0 else (9, "INFO")
        lr.body.string_value = f"record {seed}-{i}: fetched {rng.randrange(100)} rows"
        a = lr.attributes.add()
        a.key, a.value.int_value = "code.line.number", 100 + i % 7
        defect = (bad or {}).get(i)
        if defect == "no_time":
            lr.time_unix_nano = lr.observed_time_unix_nano = 0
            continue
        if defect == "short_trace_id":
            lr.trace_id = b"abc"
        elif defect is not None:  # pragma: no cover
            raise ValueError(defect)
        kept.append(lr.body.string_value)
    return req.SerializeToString(), kept


def json_logs_request(records: list[dict], *, service: str = "frontend") -> bytes:
    """An OTLP JSON ``ExportLogsServiceRequest`` body holding ``records`` (OTLP JSON log records)."""
    return json.dumps({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeLogs": [{"scope": {"name": "tests"}, "logRecords": records}],
    }]}).encode()


def json_request(spans: list[dict], *, service: str = "frontend") -> bytes:
    """An OTLP JSON body (the specification's JSON encoding: hex ids, 64-bit integers as decimal
    strings, enums as integers) holding ``spans`` (OTLP JSON span objects)."""
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "tests", "version": "1.0"}, "spans": spans}],
    }]}).encode()


def json_span(trace_id: str, span_id: str, name: str, start_ns: int, end_ns: int, *, parent: str | None = None,
              attributes: dict | None = None) -> dict:
    """One OTLP JSON span object."""
    sp = {"traceId": trace_id, "spanId": span_id, "name": name, "kind": 2,
          "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(end_ns),
          "attributes": [{"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"intValue": str(v)}}
                         for k, v in (attributes or {}).items()],
          "status": {}}
    if parent:
        sp["parentSpanId"] = parent
    return sp


class Receiver:
    """``tracesleuth.collector.serve`` in a subprocess on a free loopback port.

    Parameters
    ----------
    store : Path
        The span store.
    **settings
        Keyword arguments of :func:`serve` (``port`` defaults to 0: a free port).
    """

    def __init__(self, store: Path, **settings):
        self.store = Path(store)
        self.settings = {"port": 0, **settings}
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.final_stats: dict | None = None
        self.stderr = ""

    def start(self) -> "Receiver":
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVE, str(self.store), json.dumps(self.settings)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        line = _read_line(self.proc, START_SECONDS)
        if not line.startswith("READY "):
            self.kill()
            raise RuntimeError(f"receiver did not start: {line!r}; stderr: {self.stderr}")
        self.url = line.split()[1]
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stats(self, token: str | None = None) -> dict:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(self.url + "/stats", headers=headers, timeout=10).json()

    def stop(self) -> dict:
        """SIGTERM (graceful: everything acknowledged is converted into parts) and wait."""
        if self.proc is None or self.proc.poll() is not None:
            return self.final_stats or {}
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError("receiver did not stop within its time limit")
        self.stderr += err.decode(errors="replace")
        for line in out.decode().splitlines():
            if line.startswith("STATS "):
                self.final_stats = json.loads(line[6:])
        if self.proc.returncode != 0:
            raise RuntimeError(f"receiver exited with {self.proc.returncode}: {self.stderr}")
        return self.final_stats or {}

    def kill(self) -> None:
        """SIGKILL (a crash) and reap; stderr is kept in :attr:`stderr`."""
        if self.proc is None or self.proc.stderr.closed:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        try:
            _, err = self.proc.communicate(timeout=STOP_SECONDS)
            self.stderr += err.decode(errors="replace")
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass

    def __enter__(self) -> "Receiver":
        return self.start()

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.stop()
        else:
            self.kill()


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buf = b""
    try:
        while b"\n" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                return buf.decode(errors="replace")
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
    finally:
        sel.close()
    return buf.split(b"\n", 1)[0].decode(errors="replace")


def wait_until(predicate, timeout: float, interval: float = 0.05):
    """Poll ``predicate`` until it returns something truthy (returned) or ``timeout`` passes
    (then its last value is returned)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
