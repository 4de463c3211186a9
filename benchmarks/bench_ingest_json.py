"""Ingest speed of the JSON readers: spans per second and peak memory.

Generates, in a temporary directory, an OpenTelemetry Collector file-exporter file (OTLP JSON, one
``ExportTraceServiceRequest`` per line, 512 spans per line over 3 resources, 10 span attributes of
mixed types and 6 resource attributes per span, ids in hex and times as decimal strings, as the
collector writes them) and a Zipkin v2 span array (6 string tags per span), then reads each with
:func:`tracesleuth.io.iter_span_batches` in a fresh process per run, ``--runs`` times.

Prints the median spans/s and the peak resident memory (max over runs) of each reading process.

Usage::

    python benchmarks/bench_ingest_json.py                 # 500k OTLP spans, 200k Zipkin spans
    python benchmarks/bench_ingest_json.py --spans 100000 --zipkin-spans 50000 --runs 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

T0_NS = 1_700_000_000_000_000_000
SERVICES = [f"svc-{i:02d}" for i in range(12)]
OPERATIONS = ["GET /api/cart", "SELECT orders", "POST /checkout", "grpc.Payment/Charge", "kafka.send orders"]


def _span_attributes(rng: random.Random) -> list[dict]:
    return [
        {"key": "http.request.method", "value": {"stringValue": rng.choice(["GET", "POST", "PUT"])}},
        {"key": "url.path", "value": {"stringValue": f"/api/cart/{rng.getrandbits(16)}"}},
        {"key": "http.response.status_code", "value": {"intValue": str(rng.choice([200, 200, 200, 404, 500]))}},
        {"key": "server.address", "value": {"stringValue": "cart.internal"}},
        {"key": "server.port", "value": {"intValue": "8080"}},
        {"key": "network.protocol.version", "value": {"stringValue": "1.1"}},
        {"key": "thread.id", "value": {"intValue": str(rng.getrandbits(10))}},
        {"key": "user_agent.original", "value": {"stringValue": "Mozilla/5.0 (X11; Linux x86_64)"}},
        {"key": "app.cache_hit", "value": {"boolValue": rng.random() < 0.5}},
        {"key": "app.items", "value": {"doubleValue": round(rng.random() * 10, 3)}},
    ]


def write_otlp_json(path: Path, n_spans: int, *, spans_per_line: int = 512, seed: int = 0) -> int:
    """Write a collector file-exporter file of about ``n_spans`` spans; returns the span count."""
    rng = random.Random(seed)
    written = 0
    with open(path, "wb") as f:
        while written < n_spans:
            resource_spans = []
            for service in rng.sample(SERVICES, 3):
                spans = []
                for _ in range(min(spans_per_line // 3, n_spans - written)):
                    start = T0_NS + rng.getrandbits(40)
                    span = {
                        "traceId": f"{rng.getrandbits(128):032x}", "spanId": f"{rng.getrandbits(64):016x}",
                        "parentSpanId": f"{rng.getrandbits(64):016x}" if rng.random() < 0.9 else "",
                        "flags": 257, "name": rng.choice(OPERATIONS), "kind": rng.randint(1, 5),
                        "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + rng.getrandbits(24)),
                        "attributes": _span_attributes(rng),
                        "status": {"code": 2, "message": "boom"} if rng.random() < 0.02 else {},
                    }
                    spans.append(span)
                written += len(spans)
                resource_spans.append({
                    "resource": {"attributes": [
                        {"key": "service.name", "value": {"stringValue": service}},
                        {"key": "service.instance.id", "value": {"stringValue": f"{service}-7d9f8-x2k4q"}},
                        {"key": "host.name", "value": {"stringValue": f"node-{rng.randint(1, 8)}"}},
                        {"key": "telemetry.sdk.language", "value": {"stringValue": "java"}},
                        {"key": "telemetry.sdk.name", "value": {"stringValue": "opentelemetry"}},
                        {"key": "telemetry.sdk.version", "value": {"stringValue": "1.32.0"}},
                    ]},
                    "scopeSpans": [{"scope": {"name": "io.opentelemetry.tomcat-10.0", "version": "1.32.0"},
                                    "spans": spans}],
                    "schemaUrl": "https://opentelemetry.io/schemas/1.21.0",
                })
                if written >= n_spans:
                    break
            f.write(orjson.dumps({"resourceSpans": resource_spans}) + b"\n")
    return written


def write_zipkin_json(path: Path, n_spans: int, *, seed: int = 1) -> int:
    """Write a Zipkin v2 span array of ``n_spans`` spans; returns the span count."""
    rng = random.Random(seed)
    kinds = ["SERVER", "CLIENT", "PRODUCER", "CONSUMER", None]
    with open(path, "wb") as f:
        f.write(b"[")
        for i in range(n_spans):
            ts = T0_NS // 1000 + rng.getrandbits(34)
            span = {"traceId": f"{rng.getrandbits(64):016x}", "id": f"{rng.getrandbits(64):016x}",
                    "parentId": f"{rng.getrandbits(64):016x}", "name": rng.choice(OPERATIONS).lower(),
                    "timestamp": ts, "duration": rng.getrandbits(16) + 1,
                    "localEndpoint": {"serviceName": rng.choice(SERVICES), "ipv4": f"10.1.{rng.randint(0, 9)}.7",
                                      "port": 8080},
                    "remoteEndpoint": {"serviceName": rng.choice(SERVICES)},
                    "tags": {"http.method": "GET", "http.path": f"/api/cart/{rng.getrandbits(16)}",
                             "http.status_code": "200", "mvc.controller.class": "CartController",
                             "mvc.controller.method": "get", "clientVersion": "2.4.1"}}
            kind = rng.choice(kinds)
            if kind:
                span["kind"] = kind
            f.write((b"," if i else b"") + orjson.dumps(span))
        f.write(b"]")
    return n_spans


def _child(fmt: str, path: str) -> None:
    """Read one file in this process and print what it took (JSON on stdout)."""
    from tracesleuth.io import RejectLog, iter_span_batches
    from tracesleuth.io import otlp_json, zipkin  # noqa: F401 - imported before timing

    log = RejectLog()
    start = time.perf_counter()
    n = sum(b.num_rows for b in iter_span_batches(path, format=fmt, log=log))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"spans": n, "rejected": log.spans_rejected, "seconds": seconds, "peak_rss_mib": peak}))


def _measure(fmt: str, path: Path, runs: int) -> dict:
    results = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, __file__, "--child", fmt, str(path)], check=True,
                             capture_output=True, text=True)
        results.append(json.loads(out.stdout))
    rates = [r["spans"] / r["seconds"] for r in results]
    return {"format": fmt, "file_mib": round(path.stat().st_size / 2**20, 1), "spans": results[0]["spans"],
            "rejected": results[0]["rejected"], "runs": runs,
            "spans_per_s_median": round(statistics.median(rates)),
            "spans_per_s_runs": [round(r) for r in rates],
            "seconds_median": round(statistics.median(r["seconds"] for r in results), 3),
            "peak_rss_mib": round(max(r["peak_rss_mib"] for r in results), 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spans", type=int, default=500_000, help="OTLP JSON spans to generate (default 500000)")
    p.add_argument("--zipkin-spans", type=int, default=200_000, help="Zipkin spans to generate (default 200000)")
    p.add_argument("--runs", type=int, default=5, help="reads per file; the median is reported (default 5)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--child", nargs=2, metavar=("FORMAT", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="tracesleuth-bench-") as tmp:
        otlp, zipkin = Path(tmp) / "otlp.jsonl", Path(tmp) / "zipkin.json"
        write_otlp_json(otlp, args.spans)
        write_zipkin_json(zipkin, args.zipkin_spans)
        results = [_measure("otlp-json", otlp, args.runs), _measure("zipkin-json", zipkin, args.runs)]
    machine = {"cpus": os.cpu_count(), "python": sys.version.split()[0],
               "load_average_1min": round(os.getloadavg()[0], 2)}
    if args.json:
        print(json.dumps({"machine": machine, "results": results}, indent=2))
    else:
        print(f"{'format':<12} {'file MiB':>9} {'spans':>9} {'spans/s (median)':>17} {'peak RSS MiB':>13}")
        for r in results:
            print(f"{r['format']:<12} {r['file_mib']:>9} {r['spans']:>9} {r['spans_per_s_median']:>17,} "
                  f"{r['peak_rss_mib']:>13}")
        print(f"({args.runs} runs each, one process per run; {machine['cpus']} CPUs, load average "
              f"{machine['load_average_1min']} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
