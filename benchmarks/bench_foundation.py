"""Foundation figures: ingest speed, trace-table build speed, peak memory.

Prints (median and range of ``--runs`` rounds; each round runs every measurement once, each in a
fresh process so that peak RSS is its own):

* ingest spans/s of the TrainTicket CSV windows (``../shared/data``, 84 gzip files, 328,848
  spans) into a Parquet span store, and of reading them alone; and the ingest of the TrainTicket
  and OnlineBoutique windows together (731,583 spans), to show how peak memory scales: a fixed
  part (library code pages, allocator arenas of the reader threads) plus a part proportional
  to the spans;
* ingest spans/s of a synthetic OTLP JSON file-exporter file (``--otlp-spans`` spans), as the
  collector writes it (integers as strings), and with some integers as JSON numbers; reading it
  alone, and reading it with an ``exception`` event (and an error status with its message) on 10%
  of the spans and a link on 5% (what keeping events and links costs);
* trace-table build spans/s on spans already loaded (TrainTicket, and synthetic E-Shopper-like
  sets of ``--table-traces`` and ``--large-traces`` traces of 14 spans; more than 500,000
  spans are built in partitions of whole traces);
* peak memory of each step as a multiple of the Arrow size of its spans in ``SPAN_SCHEMA`` (plain
  strings, as the readers give them): (peak RSS - RSS before the step, the spans themselves
  included) / Arrow size; the same for anonymous memory only (the data, without the pages of
  library code the process touches for the first time); for the table build also the loaded
  spans plus the build's own peak, without what the Parquet reader leaves allocated. The table
  build reads its spans from a span store (``SpanStore.read_spans``, as ``tracesleuth table
  STORE`` does), whose name columns come dictionary-encoded (``loaded_arrow_mb``).

Each measurement runs as the ``tracesleuth`` command does, with Arrow on the system allocator
(:func:`tracesleuth.use_system_allocator`; ``--arrow-allocator default`` keeps Arrow's own).

Targets (issue 2): ingest >= 300,000 spans/s (OTLP JSON and TrainTicket CSV), table build
>= 1,000,000 spans/s, peak memory <= 3x the Arrow size.

Usage: ``python benchmarks/bench_foundation.py [--runs 5] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NEZHA = HERE.parent.parent / "shared" / "data" / "nezha"
TRAINTICKET = NEZHA / "trainticket" / "2023-01-29" / "trace"


def status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (``VmRSS``, ``VmHWM``, ``RssAnon``), MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_mb() -> float:
    return status_mb("VmRSS")


def peak_mb() -> float:
    """Peak RSS of this process's memory (VmHWM). Not ``ru_maxrss``: Linux carries that over
    from the parent across fork and exec, so a large parent would inflate it."""
    return status_mb("VmHWM")


class AnonPeak:
    """Peak anonymous memory (RssAnon: the data, without the pages of loaded libraries' code,
    which the kernel's peak RSS counts), sampled every 2 ms on a thread."""

    def __init__(self):
        import threading

        self.peak = self.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def now() -> float:
        return status_mb("RssAnon")

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self.now())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self.now())


def synthetic_spans(n_traces: int, seed: int = 0):
    """E-Shopper-like traces, vectorized: a root with 8 children, 5 of which call a grandchild."""
    import numpy as np
    import pyarrow as pa

    from tracesleuth import schema as S
    from tracesleuth.scale.synthetic import SHAPES

    rng = np.random.default_rng(seed)
    shape = SHAPES["GET /home"]  # (parent index, service, operation, kind, offset_ms, duration_ms)
    k = len(shape)
    n = n_traces * k
    t0 = 1_700_000_000_000_000_000 + np.arange(n_traces, dtype=np.int64) * 50_000_000
    jitter = rng.lognormal(0, 0.2, size=(n_traces, k))
    off = np.array([s[4] for s in shape]) * 1_000_000
    dur = (np.array([s[5] for s in shape]) * 1_000_000 * jitter).astype(np.int64)
    start = (t0[:, None] + off[None, :]).ravel()
    end = start + dur.ravel()
    trace_ids = np.char.mod("%032x", np.arange(1, n_traces + 1, dtype=np.int64))
    tid = np.repeat(trace_ids, k)
    span_num = np.arange(1, n + 1, dtype=np.int64)
    sid = np.char.mod("%016x", span_num)
    parent_local = np.array([s[0] for s in shape])
    parent_num = np.where(parent_local[None, :] >= 0,
                          (np.arange(n_traces)[:, None] * k + parent_local[None, :] + 1), 0).ravel()
    psid = np.char.mod("%016x", parent_num).astype(object)
    psid[parent_num == 0] = None
    tile = lambda i: pa.array(np.tile(np.array([s[i] for s in shape], dtype=object), n_traces), pa.string())
    cols = {
        S.TRACE_ID: pa.array(tid, pa.string()), S.SPAN_ID: pa.array(sid, pa.string()),
        S.PARENT_SPAN_ID: pa.array(psid, pa.string()), S.SERVICE: tile(1), S.OPERATION: tile(2),
        S.INSTANCE: pa.array(np.char.add(np.repeat(np.array([s[1] for s in shape]), 1).astype(str)[
            np.tile(np.arange(k), n_traces)], np.char.mod("-%d", rng.integers(0, 3, n))), pa.string()),
        S.KIND: tile(3), S.START_NS: pa.array(start), S.END_NS: pa.array(end),
        S.STATUS: pa.array(["unset"] * n, pa.string()), S.FOLLOWS_FROM: pa.array(np.zeros(n, bool)),
        S.ATTRIBUTES: pa.array([[]] * n, pa.list_(S.ATTRIBUTE_TYPE)),
    }
    return S.with_later_columns(pa.table(cols, schema=S.PRE_EVENTS_SPAN_SCHEMA))


#: Share of the spans with an exception event, and with a link, in the events variant of the file.
EXCEPTION_SHARE, LINK_SHARE = 0.10, 0.05


def write_otlp_json(path: Path, n_spans: int, seed: int = 0, int_numbers: bool = False, events: bool = False) -> None:
    """A collector file-exporter file: one ExportTraceServiceRequest JSON per line, 512 spans each.

    64-bit integers are decimal strings, as the collector writes them; with ``int_numbers`` one
    of the two integer attributes of each span is a JSON number instead (some SDKs write
    numbers; a file mixing both is the reader's slowest case). With ``events``, a share
    :data:`EXCEPTION_SHARE` of the spans failed with an exception event (type, message, a
    5-line stack trace) and :data:`LINK_SHARE` have a link."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(seed)
    per_line, per_trace = 512, 16
    with open(path, "wb") as f:
        made = 0
        while made < n_spans:
            spans = []
            for i in range(min(per_line, n_spans - made)):
                t = (made + i) // per_trace
                s = made + i
                start = 1_700_000_000_000_000_000 + t * 10_000_000 + (s % per_trace) * 100_000
                spans.append({
                    "traceId": f"{t + 1:032x}", "spanId": f"{s + 1:016x}",
                    "parentSpanId": "" if s % per_trace == 0 else f"{t * per_trace + 1:016x}",
                    "name": f"op-{s % 7}", "kind": 2 if s % per_trace == 0 else 3,
                    "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + int(rng.integers(1, 9)) * 50_000),
                    "attributes": [{"key": "http.request.method", "value": {"stringValue": "GET"}},
                                   {"key": "http.response.status_code", "value": {"intValue": "200"}},
                                   {"key": "url.path", "value": {"stringValue": f"/api/items/{s % 100}"}},
                                   {"key": "server.port", "value": {"intValue": 8080 if int_numbers else "8080"}},
                                   {"key": "retry", "value": {"boolValue": False}}],
                    "status": {"code": 0},
                })
                draw = rng.random() if events else 1.0
                if draw < EXCEPTION_SHARE:
                    spans[-1]["status"] = {"code": 2, "message": "invalid argument"}
                    spans[-1]["events"] = [{"timeUnixNano": str(start + 10_000), "name": "exception", "attributes": [
                        {"key": "exception.type", "value": {"stringValue": "ValueError"}},
                        {"key": "exception.message", "value": {"stringValue": f"bad item {s % 100}"}},
                        {"key": "exception.stacktrace",
                         "value": {"stringValue": "Traceback (most recent call last):\n  File \"app.py\", line 7\n" * 5}}]}]
                elif draw < EXCEPTION_SHARE + LINK_SHARE:
                    spans[-1]["links"] = [{"traceId": f"{t + 1:032x}"[::-1], "spanId": f"{s + 1:016x}"[::-1]}]
            made += len(spans)
            doc = {"resourceSpans": [{"resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": f"svc-{made % 5}"}},
                {"key": "k8s.pod.name", "value": {"stringValue": f"svc-{made % 5}-abc12"}}]},
                "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}]}
            f.write(orjson.dumps(doc) + b"\n")


# ---------------------------------------------------------------------------------------------
# one measurement per process

def measure(kind: str, arg: str) -> dict:
    from tracesleuth import use_system_allocator
    from tracesleuth.io import read_spans
    from tracesleuth.model import build_trace_table
    from tracesleuth.ingest import ingest
    from tracesleuth.io.store import SpanStore

    use_system_allocator()  # as the tracesleuth command does
    if kind in ("ingest", "read"):
        base, anon = rss_mb(), AnonPeak()
        base_anon = anon.peak
        t = time.perf_counter()
        if kind == "ingest":
            with tempfile.TemporaryDirectory() as d:
                s = ingest(arg, SpanStore(Path(d) / "store"))
                seconds = time.perf_counter() - t
                anon_peak, peak = anon.stop(), peak_mb()
                n = s.spans_read
                # read after the peak is taken (this read's own memory is not the ingest's)
                nbytes = SpanStore(Path(d) / "store").read_spans(dictionary=False).nbytes
        else:
            r = read_spans(arg)
            seconds = time.perf_counter() - t
            anon_peak, peak = anon.stop(), peak_mb()
            n, nbytes = r.n_spans, r.spans.nbytes
        return {"spans": n, "seconds": seconds, "spans_per_s": n / seconds,
                "peak_over_arrow": (peak - base) * 2**20 / nbytes,
                "anon_peak_over_arrow": (anon_peak - base_anon) * 2**20 / nbytes, "arrow_mb": nbytes / 2**20}
    if kind == "table":
        base, anon = rss_mb(), AnonPeak()  # before the spans are loaded: the figure counts them and the work
        base_anon = anon.peak
        spans = SpanStore(arg).read_spans()  # names dictionary-encoded, as `tracesleuth table STORE` reads them
        loaded = rss_mb()
        t = time.perf_counter()
        tt = build_trace_table(spans)
        seconds = time.perf_counter() - t
        anon_peak, peak = anon.stop(), peak_mb()
        # the yardstick: the spans' Arrow size in SPAN_SCHEMA (plain strings), as the readers give them
        nbytes = SpanStore(arg).read_spans(dictionary=False).nbytes
        return {"spans": spans.num_rows, "requests": tt.n_requests, "seconds": seconds,
                "spans_per_s": spans.num_rows / seconds, "arrow_mb": nbytes / 2**20,
                "loaded_arrow_mb": spans.nbytes / 2**20,
                "peak_over_arrow": (peak - base) * 2**20 / nbytes,
                "anon_peak_over_arrow": (anon_peak - base_anon) * 2**20 / nbytes,
                # the loaded spans plus the build's own peak (what the Parquet reader leaves
                # allocated is not counted)
                "build_peak_over_arrow": (spans.nbytes + (peak - loaded) * 2**20) / nbytes}
    raise ValueError(kind)


def run_isolated(kind: str, arg: str, allocator: str = "system") -> dict:
    env = dict(os.environ)
    if allocator == "default":  # Arrow's own (mimalloc): use_system_allocator() then leaves it
        env["ARROW_DEFAULT_MEMORY_POOL"] = "mimalloc"
    out = subprocess.run([sys.executable, __file__, "--measure", kind, arg], capture_output=True, text=True,
                         check=True, env=env)
    return json.loads(out.stdout)


def summary(results: list[dict]) -> dict:
    """Medians (and the range of spans/s) of one measurement's runs."""
    med = {k: statistics.median(r[k] for r in results)
           for k in ("spans_per_s", "seconds", "peak_over_arrow", "anon_peak_over_arrow", "build_peak_over_arrow")
           if k in results[0]}
    return {"runs": len(results), "spans": results[0]["spans"], "arrow_mb": results[0]["arrow_mb"],
            **{f"{k}_median": v for k, v in med.items()},
            "spans_per_s_min": min(r["spans_per_s"] for r in results),
            "spans_per_s_max": max(r["spans_per_s"] for r in results)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--otlp-spans", type=int, default=500_000)
    ap.add_argument("--table-traces", type=int, default=200_000)
    ap.add_argument("--large-traces", type=int, default=1_000_000, help="0: skip the large table build")
    ap.add_argument("--arrow-allocator", choices=("system", "default"), default="system",
                    help="Arrow's allocator: the system's, as the tracesleuth command uses, or Arrow's default")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure:
        print(json.dumps(measure(*a.measure)))
        return 0
    from tracesleuth.io import read_spans
    from tracesleuth.io.store import SpanStore  # the table build reads its spans from a span store

    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        plan = []  # (name, kind, arg): every input is made first
        if TRAINTICKET.is_dir():
            SpanStore(d / "tt-store").append_spans(read_spans(TRAINTICKET).spans.to_batches())
            plan += [("ingest_trainticket_csv", "ingest", str(TRAINTICKET)),
                     ("read_trainticket_csv", "read", str(TRAINTICKET)),
                     ("ingest_nezha_csv_both", "ingest", str(NEZHA / "*" / "*" / "trace")),
                     ("table_trainticket", "table", str(d / "tt-store"))]
        for name, int_numbers in (("ingest_otlp_json", False), ("ingest_otlp_json_mixed_ints", True)):
            write_otlp_json(d / f"{name}.json", a.otlp_spans, int_numbers=int_numbers)
            plan.append((name, "ingest", str(d / f"{name}.json")))
        write_otlp_json(d / "events.json", a.otlp_spans, events=True)
        plan += [("read_otlp_json", "read", str(d / "ingest_otlp_json.json")),
                 ("read_otlp_json_events", "read", str(d / "events.json"))]
        for name, traces in (("table_synthetic", a.table_traces), ("table_synthetic_large", a.large_traces)):
            if traces:
                SpanStore(d / name).append_spans(synthetic_spans(traces).to_batches())
                plan.append((name, "table", str(d / name)))
        # Round after round, each measurement once per round: a slow spell of the machine then
        # touches every measurement a little rather than one of them a lot.
        results: dict[str, list[dict]] = {name: [] for name, _, _ in plan}
        for _ in range(a.runs):
            for name, kind, arg in plan:
                results[name].append(run_isolated(kind, arg, a.arrow_allocator))
    figures: dict = {"cpu_count": os.cpu_count(), "arrow_allocator": a.arrow_allocator,
                     **{name: summary(r) for name, r in results.items()}}
    if a.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{'measurement':28} {'spans':>10} {'spans/s (median)':>17} {'(min - max)':>23} {'s':>7} "
          f"{'peak/Arrow':>10} {'data peak':>9} {'build only':>10}")
    for k, v in figures.items():
        if isinstance(v, dict):
            build = f"{v['build_peak_over_arrow_median']:>9.2f}x" if "build_peak_over_arrow_median" in v else ""
            spread = f"({v['spans_per_s_min']:,.0f} - {v['spans_per_s_max']:,.0f})"
            print(f"{k:28} {v['spans']:>10,} {v['spans_per_s_median']:>17,.0f} {spread:>23} {v['seconds_median']:>7.3f} "
                  f"{v['peak_over_arrow_median']:>9.2f}x {v['anon_peak_over_arrow_median']:>8.2f}x {build:>10}")
    print("peak/Arrow: (peak RSS - RSS before loading) / Arrow size; data peak: the same with anonymous memory "
          "only (RssAnon, sampled), without the pages of library code; build only: 1 + (peak RSS - RSS once "
          "the spans are loaded) / Arrow size")
    print("targets: ingest >= 300,000 spans/s; table >= 1,000,000 spans/s; peak <= 3x Arrow size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
