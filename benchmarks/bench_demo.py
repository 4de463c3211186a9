"""The live demo as a measurement: CPU it needs per request rate, and how often it recovers.

Runs ``tracesleuth.demo.run_demo`` (or ``run_incident`` with ``--incident SERVICE``) ``--runs``
times at each ``--rate`` for ``--duration`` seconds, seeds ``--seed``, ``--seed + 1``..., and prints
per run: the CPU the shop, collector and load generator used during the load (in cores), the
rate achieved, failures, the undegraded requests' median / 90th percentile latency against the
modelled ones, the F-scores of A1 and A2 (or the injected service's rank), the outcome and the
machine's 1-minute load average at the end; then per rate the medians and how many runs were
recovered (both degradations at F >= 0.95). ``--busy`` runs a CPU-bound process
(``while True: pass``) beside the demo, as the issue's busy-machine case.

Usage::

    python benchmarks/bench_demo.py --rate 4 8 12 --duration 30            # CPU per rate
    python benchmarks/bench_demo.py --runs 10                               # the idle target
    python benchmarks/bench_demo.py --runs 3 --busy                         # beside a CPU hog
    python benchmarks/bench_demo.py --runs 3 --incident cart-service
    python benchmarks/bench_demo.py --incident account-service --fault exception --fault-share 0.5
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


def _one(rate: float, duration: float, seed: int, incident: str | None, fault: str, share: float | None,
         workdir: Path) -> dict:
    from tracesleuth.demo import DEFAULT_FAULT_SHARE, run_demo, run_incident

    t = time.perf_counter()
    if incident:
        r = run_incident(incident, fault=fault, share=DEFAULT_FAULT_SHARE if share is None else share,
                         duration_s=duration, rate_per_s=rate, seed=seed, workdir=workdir)
        quality = {"rank": r.injected_rank, "top": r.top_service}
    else:
        r = run_demo(duration_s=duration, rate_per_s=rate, seed=seed, workdir=workdir)
        quality = {k: round(v, 3) for k, v in r.match_f_scores.items()}
    h, o = r.health, r.outcome()
    return {"rate": rate, "seed": seed, "cpu_cores": h.cpu_cores, "achieved": h.achieved_rate_per_s,
            "failed": h.requests_failed, "p50_ms": (h.latency_p50_ns or 0) / 1e6, "p90_ms": (h.latency_p90_ns or 0) / 1e6,
            "modelled_p50_ms": (h.modelled_p50_ns or 0) / 1e6, "quality": quality, "status": o.status,
            "exit_code": o.exit_code, "report_bytes": r.report_path.stat().st_size,
            "seconds": round(time.perf_counter() - t, 1), "load1": os.getloadavg()[0]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, nargs="+", default=[8.0])
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--busy", action="store_true", help="run a CPU-bound process beside the demo")
    parser.add_argument("--incident", metavar="SERVICE")
    parser.add_argument("--fault", default="slow-handler",
                        help="slow-handler, network-delay, exception, early-return or cpu-burn")
    parser.add_argument("--fault-share", type=float, default=None,
                        help="share of the requests (exception, early-return) or of a core (cpu-burn)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
            for rate in args.rate:
                for k in range(args.runs):
                    row = _one(rate, args.duration, args.seed + k, args.incident, args.fault, args.fault_share,
                               Path(tmp) / f"r{rate:g}-{k}")
                    rows.append(row)
                    if not args.json:
                        print(f"rate {rate:g}/s seed {row['seed']}: {row['cpu_cores']:.2f} cores, "
                              f"{row['achieved']:.2f}/s achieved, {row['failed']} failed, undegraded p50/p90 "
                              f"{row['p50_ms']:.1f}/{row['p90_ms']:.1f} ms (modelled p50 {row['modelled_p50_ms']:.1f}), "
                              f"{row['quality']}, {row['status']} (exit {row['exit_code']}), report "
                              f"{row['report_bytes'] / 1e6:.2f} MB, {row['seconds']:.0f} s, load1 {row['load1']:.1f}",
                              flush=True)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    summary = []
    for rate in args.rate:
        rs = [r for r in rows if r["rate"] == rate]
        summary.append({"rate": rate, "runs": len(rs), "cpu_cores_median": statistics.median(r["cpu_cores"] or 0
                                                                                            for r in rs),
                        "recovered": sum(r["status"] == "recovered" for r in rs),
                        "broken": sum(r["status"] == "broken" for r in rs),
                        "not_recovered": sum(r["status"] == "not recovered" for r in rs),
                        "report_mb_median": statistics.median(r["report_bytes"] for r in rs) / 1e6})
    if args.json:
        print(json.dumps({"runs": rows, "summary": summary, "busy": args.busy}, indent=1))
    else:
        for s in summary:
            print(f"rate {s['rate']:g}/s: {s['runs']} runs, median {s['cpu_cores_median']:.2f} cores, "
                  f"recovered {s['recovered']}, not recovered {s['not_recovered']}, broken {s['broken']}; "
                  f"report {s['report_mb_median']:.2f} MB (median){' - beside a CPU-bound process' if args.busy else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
