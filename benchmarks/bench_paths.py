"""Black-box causal paths (Aguilera et al. 2003): speed and accuracy of the nesting algorithm.

Prints, for the localize simulator's requests turned into a message log
(:func:`tracesleuth.analyses.paths.messages_from_tables`), with requests starting ``--gaps``
seconds apart (the parallelism; equal gaps of 1 s, Poisson arrivals for shorter mean gaps):
messages, time to convert, time of
``CausalPaths.fit`` (median of ``--runs``), and the request-weighted recovery rate of the true
path patterns. Then the same on TrainTicket windows of ../shared/data when present.

Then the convolution algorithm over one hour of Poisson arrivals (``--hour-requests`` requests)
at a 1 ms quantum: time and the recall / precision of the true call pairs.

Targets (issue 18): nesting on 1,000,000 messages in <= 30 s; convolution over one hour of
messages at a 1 ms quantum in <= 60 s.

Usage::

    python benchmarks/bench_paths.py                     # 95k requests (~1M messages), gaps 1 s .. 2 ms
    python benchmarks/bench_paths.py --requests 10000 --runs 1
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from tracesleuth.analyses.paths.synthetic import spaced_requests


def run(tables, runs: int) -> dict:
    from tracesleuth.analyses.paths import CausalPaths, messages_from_tables, recovery_rate

    t0 = time.perf_counter()
    messages, truth = messages_from_tables(tables)
    convert_s = time.perf_counter() - t0
    times, res = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        res = CausalPaths().fit(messages).result_
        times.append(time.perf_counter() - t0)
    return {"messages": messages.height, "requests": sum(truth.values()), "convert_s": convert_s,
            "fit_s": statistics.median(times), "recovery": recovery_rate(truth, res.pattern_counts())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=95_000)
    parser.add_argument("--gaps", default="1,0.02,0.01,0.002", help="Seconds between request starts.")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hour-requests", type=int, default=36_000, help="Requests in the convolution's hour.")
    args = parser.parse_args(argv)
    for gap in (float(g) for g in args.gaps.split(",")):
        r = run(spaced_requests(args.requests, gap, poisson=gap < 1.0), args.runs)
        print(f"simulated, gap {gap * 1000:g} ms: {r['messages']:,} messages ({r['requests']:,} requests), convert "
              f"{r['convert_s']:.1f} s, nesting {r['fit_s']:.1f} s (median of {args.runs}), recovery "
              f"{r['recovery']:.3f}", flush=True)
    from tracesleuth.analyses.paths import CausalPaths

    tables = spaced_requests(args.hour_requests, 3600 / args.hour_requests, poisson=True)
    times, res = [], None
    for _ in range(args.runs):
        t0 = time.perf_counter()
        res = CausalPaths(algorithm="convolution", quantum_ns=1_000_000, max_delay_ns=100_000_000).fit(tables).result_
        times.append(time.perf_counter() - t0)
    print(f"convolution, one hour ({res.n_messages:,} messages, 1 ms quantum): {statistics.median(times):.1f} s "
          f"(median of {args.runs}, conversion included), {len(res.graph)} causal edges, recall "
          f"{res.graph_recall:.3f}, precision {res.graph_precision:.3f}", flush=True)
    tt = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "nezha" / "trainticket" / "2023-01-29" / "trace"
    if tt.is_dir():
        from tracesleuth.io import read_spans
        from tracesleuth.model import build_trace_table

        files = sorted(tt.glob("*_trace.csv.gz"))
        r = run([build_trace_table(read_spans([str(f) for f in files]))], args.runs)
        print(f"TrainTicket, {len(files)} one-minute windows: {r['messages']:,} messages ({r['requests']:,} requests), "
              f"nesting {r['fit_s']:.1f} s, recovery {r['recovery']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
