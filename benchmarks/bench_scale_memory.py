"""Memory in one process (issue 32): a span store's trace table, root-cause localization and
derived performance annotations, the store read whole (``--scheduler whole``) against ``--scheduler
serial`` (partition by partition, no Dask) and, with ``--default``, the command as given (the default:
serial for a store of more spans than one partition).

Each measurement is one ``tracesleuth`` command in a fresh process; its wall time and its peak
resident memory (``ru_maxrss`` of that process, from ``os.wait4``) are printed, the median of
``--runs`` runs. The stores are written into ``--dir`` (a temporary directory by default) and
deleted afterwards:

* ``--spans`` synthetic spans (:mod:`tracesleuth.scale.synthetic`): ``tracesleuth table STORE
  -o TABLE`` (targets: 10^7 spans to a trace table in <= 4 GB);
* ``--requests`` requests of the localization scenario ``load-imbalance``
  (:mod:`tracesleuth.analyses.localize.synthetic`, about 11.6 spans each): ``tracesleuth localize
  STORE --json`` (target: 10^6 requests localized in <= 3 GB); both ways' JSON must be equal
  (the run fails otherwise);
* ``--annotate-requests`` requests of the planted file service
  (:mod:`tracesleuth.analyses.annotate.synthetic`, 4.5 spans each, numeric span attributes as
  features): ``tracesleuth annotate derive STORE -o FILE --json``; both ways' JSON must be equal;
* ``--compare-spans`` synthetic spans over two hours, each hour a period: ``tracesleuth compare STORE
  --baseline-time HOUR1 --problem-time HOUR2 --json`` on a 2-worker LocalCluster (``--scheduler
  local``) and ``--scheduler serial``: the command's process (the workers' memory is theirs);
  both ways' JSON must be equal. Off by default (2 x 10^7 spans: about 2 minutes a run).

Run it alone: the machine has 2 cores.

    python3 benchmarks/bench_scale_memory.py                       # 10^7 spans, 10^6 requests, 3 runs
    python3 benchmarks/bench_scale_memory.py --spans 1e6 --requests 1e5 --annotate-requests 1e5 --runs 1
    python3 benchmarks/bench_scale_memory.py --spans 0 --requests 0 --annotate-requests 0 --compare-spans 2e7
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WAYS = {"read whole": ["--scheduler", "whole"], "serial": ["--scheduler", "serial"]}
#: ``--default``: the command without ``--scheduler`` too (what the default rule chooses).
DEFAULT = {"default": []}


def measure(argv: list[str]) -> dict:
    """Run ``tracesleuth ARGV`` in a new process: its wall time (s), peak RSS (MB) and stdout."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "tracesleuth", *argv], stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - t0
        out.seek(0), err.seek(0)
        if os.waitstatus_to_exitcode(status):
            raise RuntimeError(f"tracesleuth {' '.join(argv)} failed: {err.read()[-2000:]}")
        return {"wall_s": wall, "peak_mb": usage.ru_maxrss / 1024, "stdout": out.read()}


def _write_store(path: Path, imports: str, spans: str) -> int:
    """A new store at ``path`` holding the spans the Python expression ``spans`` makes (after
    ``imports``), written by a fresh process (whose memory is not this one's); its spans."""
    code = (f"{imports}\nfrom tracesleuth.io.store import SpanStore\nspans = {spans}\n"
            f"SpanStore({str(path)!r}).append_spans(spans.to_batches(131072))\nprint(spans.num_rows)")
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def _runs(argv_of, runs: int, check_equal: bool, ways: dict) -> dict:
    """Median wall time and peak of each way (runs alternate the ways)."""
    found: dict = {way: [] for way in ways}
    for _ in range(runs):
        for way, extra in ways.items():
            found[way].append(measure(argv_of(way) + extra))
    row = {}
    for way, ms in found.items():
        row[way] = {"wall_s": round(statistics.median(m["wall_s"] for m in ms), 1),
                    "peak_mb": round(statistics.median(m["peak_mb"] for m in ms))}
    if check_equal:
        docs = [json.loads(found[way][0]["stdout"]) for way in ways]
        for d in docs:
            d.pop("seconds", None)
        row["same_json"] = all(d == docs[0] for d in docs)
        if not row["same_json"]:
            raise RuntimeError(f"the JSON differs between the ways ({', '.join(ways)})")
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spans", type=float, default=1e7, help="Synthetic spans for the table (0: skip).")
    p.add_argument("--requests", type=float, default=1e6, help="Requests localized (0: skip).")
    p.add_argument("--annotate-requests", type=float, default=6e5, help="Requests annotations are derived from "
                   "(0: skip).")
    p.add_argument("--compare-spans", type=float, default=0, help="Synthetic spans over two hours compared hour "
                   "against hour, on a LocalCluster and serial (default 0: skip).")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default=None, help="Where the stores are written (default: a temporary directory).")
    p.add_argument("--default", action="store_true", help="Also run each command without --scheduler (the "
                   "default rule's choice).")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    ways = {**WAYS, **(DEFAULT if args.default else {})}
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bench-scale-memory-", dir=args.dir))
    report: dict = {"runs": args.runs}
    try:
        if args.spans:
            from tracesleuth.scale.synthetic import write_synthetic_store

            made = write_synthetic_store(base / "spans", int(args.spans), seed=0, hours=3)
            report["table"] = {"spans": made.spans, **_runs(  # each run's table in a new directory
                lambda way: ["table", str(made.path), "-o", tempfile.mkdtemp(dir=base) + "/table.parquet"],
                args.runs, check_equal=False, ways=ways)}
        if args.requests:
            n_spans = _write_store(base / "localize", "from tracesleuth.analyses.localize.synthetic import "
                                   "simulate_scenario", f"simulate_scenario('load-imbalance', "
                                   f"n_requests={int(args.requests)}, random_state=0).spans")
            report["localize"] = {"requests": int(args.requests), "spans": n_spans, **_runs(
                lambda way: ["localize", str(base / "localize"), "--json"], args.runs, check_equal=True, ways=ways)}
        if args.annotate_requests:
            n_spans = _write_store(base / "annotate", "from tracesleuth.analyses.annotate.synthetic import "
                                   "planted_spans", f"planted_spans({int(args.annotate_requests)}, random_state=0)")
            report["annotate derive"] = {"requests": int(args.annotate_requests), "spans": n_spans, **_runs(
                lambda way: ["annotate", "derive", str(base / "annotate"), "-o", str(base / "annotations.yaml"),
                             "--json"], args.runs, check_equal=True, ways=ways)}
        if args.compare_spans:
            from tracesleuth.scale.synthetic import START_NS, write_synthetic_store
            from tracesleuth.units import utc_text

            made = write_synthetic_store(base / "compare", int(args.compare_spans), seed=0, hours=2)
            hour = [utc_text(START_NS + k * 3600 * 10**9) for k in range(3)]
            report["compare"] = {"spans": made.spans, **_runs(
                lambda way: ["compare", str(made.path), "--baseline-time", f"{hour[0]}/{hour[1]}", "--problem-time",
                             f"{hour[1]}/{hour[2]}", "--json"], args.runs, check_equal=True,
                ways={"local": ["--scheduler", "local"], "serial": ["--scheduler", "serial"]})}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, row in report.items():
        if name == "runs":
            continue
        size = f"{row['spans']:,} spans" + (f", {row['requests']:,} requests" if "requests" in row else "")
        print(f"{name} ({size}), median of {args.runs}:")
        for way in (w for w in row if isinstance(row[w], dict)):
            print(f"  {way:>10}: {row[way]['wall_s']:.1f} s, peak {row[way]['peak_mb']:,} MB")
        if "same_json" in row:
            print(f"  same JSON every way: {row['same_json']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
