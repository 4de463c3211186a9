"""Diagnosis speed and memory: N requests in the problem period (issue 28's target: 100,000 in <= 15 s,
memory linear), on seeded incidents (:mod:`tracesleuth.analyses.diagnose.synthetic`), and on the
recorded TrainTicket day when ../shared/data is beside the repository.

    python benchmarks/bench_diagnose.py [--requests 10000 100000] [--runs 3] [--json]

Prints, per size, the median wall time of ``Diagnosis(at=...).fit`` over the runs and the peak RSS
of a fresh process per size (the generator's rows included).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time


def _one(requests: int, runs: int) -> dict:
    from tracesleuth.analyses.diagnose import Diagnosis
    from tracesleuth.analyses.diagnose.synthetic import incident_spans

    # The problem period (the onset at 100 s to the end at 600 s) holds 5/6 of the requests.
    spans = incident_spans(fault="delay", service="db", n_requests=int(1.2 * requests), duration_s=600.0,
                           onset_s=100.0, random_state=0)
    at = int(spans["start_ns"][0].as_py()) + 300 * 10**9
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fitted = Diagnosis(at=at, max_problem_s=600.0).fit(spans)
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"problem_requests": fitted.result_.problem.n_requests, "spans": spans.num_rows,
            "seconds_median": statistics.median(times), "seconds": times,
            "peak_rss_mb": peak / 1024, "first": fitted.result_.services[0].service}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_one(args.child, args.runs)))
        return
    rows = []
    for n in args.requests:
        done = subprocess.run([sys.executable, __file__, "--child", str(n), "--runs", str(args.runs)],
                              capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout))
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(f"{r['problem_requests']:>8,} requests in the problem period ({r['spans']:,} spans): "
              f"{r['seconds_median']:.2f} s median of {len(r['seconds'])}, peak RSS {r['peak_rss_mb']:.0f} MB "
              f"(the generator's Python rows included); first suspect {r['first']}")


if __name__ == "__main__":
    main()
