"""Instrumentation overhead per call of :mod:`tracesleuth.instrument` (target, issue 19: <= 20 µs per call).

A small function with three arguments (an int, a list and a string that names no file, so the
string is looked up with ``os.stat`` as the paper's heuristic asks) is called ``--calls`` times
in a loop, bare and measured in each configuration; the overhead per call is the difference of
the per-call times. Median of ``--runs`` runs; the configurations alternate within a run so
that a busy machine slows them alike.

Configurations:

* ``unrecorded``: decorated, no recorder set (what an application pays with measuring off);
* ``file``: :class:`~tracesleuth.instrument.FileRecorder` (spans buffered, written as OTLP JSON
  lines, the writing included);
* ``file+features(file)``: the same with the string naming an existing file (``os.stat`` finds it:
  file size and depth);
* ``file+memory``: with ``memory=True`` (tracemalloc started: every allocation of the program is
  slower too, which this loop does not show; see ``traced_loop`` below);
* ``otel``: :class:`~tracesleuth.instrument.OtelRecorder` on the OpenTelemetry SDK with a batch
  processor and an exporter that drops the spans (the SDK's own cost per span included);
* ``traced_loop``: the *bare* loop while tracemalloc traces, minus the bare loop untraced: what
  tracing costs code that is not measured at all.

Usage::

    python benchmarks/bench_instrument.py                 # 5 runs of 20,000 calls
    python benchmarks/bench_instrument.py --runs 3 --calls 5000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc


def work(n, items, name):
    return n + len(items) + len(name)


def per_call_us(func, calls: int, args) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        func(*args)
    return (time.perf_counter() - t0) / calls * 1e6


def one_run(calls: int, tmp: str) -> dict:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from tracesleuth.instrument import FileRecorder, OtelRecorder, measured

    class Drop(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop(), max_queue_size=1 << 16))
    existing = os.path.join(tmp, "data", "file.txt")
    os.makedirs(os.path.dirname(existing), exist_ok=True)
    with open(existing, "wb") as f:
        f.write(b"x" * 1000)
    args = (3, [1, 2, 3], "no/such/file.txt")
    file_rec = FileRecorder(os.path.join(tmp, "calls.jsonl"), buffer_spans=4096)
    configs = {
        "unrecorded": (measured(work), args),
        "file": (measured(work, recorder=file_rec), args),
        "file+features(file)": (measured(work, recorder=file_rec), (3, [1, 2, 3], existing)),
        "file+memory": (measured(work, recorder=file_rec, memory=True), args),
        "otel": (measured(work, recorder=OtelRecorder(tracer_provider=provider)), args),
    }
    bare = per_call_us(work, calls, args)
    out = {"bare_us": bare}
    for name, (func, a) in configs.items():
        out[name] = per_call_us(func, calls, a) - per_call_us(work, calls, a)
        if name == "file+memory":
            tracemalloc.stop()
    tracemalloc.start()
    traced = per_call_us(work, calls, args)
    tracemalloc.stop()
    out["traced_loop"] = traced - per_call_us(work, calls, args)
    file_rec.close()
    provider.shutdown()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            runs.append(one_run(args.calls, tmp))
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    if args.json:
        print(json.dumps({"runs": runs, "median_us": medians, "calls": args.calls}))
        return 0
    print(f"Overhead per call, µs (median of {args.runs} runs of {args.calls:,} calls; bare call "
          f"{medians['bare_us']:.3f} µs):")
    for k, v in medians.items():
        if k != "bare_us":
            print(f"  {k:22s} {v:8.2f}   runs: " + ", ".join(f"{r[k]:.2f}" for r in runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
