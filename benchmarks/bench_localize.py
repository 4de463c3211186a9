"""Root-cause localization: speed, memory and quality of RootCauseLocalization.

Prints (median of ``--runs`` runs, each in a fresh process so that its peak RSS is its own):

* ``--sizes`` simulated requests (the paper's load-imbalance scenario,
  :mod:`tracesleuth.analyses.localize.synthetic`): wall time of the trace tables (spans to
  tables and their call views) and of ``fit`` alone, and peak RSS;
* the paper's Table 2 on the simulated scenarios (false-negative and false-positive rates with
  and without cluster adjustment, the estimator's settings beside the paper's);
* the real-data evaluation (../shared/data/nezha): top-1 / top-3 of the injected service per
  fault type (:func:`tracesleuth.evaluation.protocols.localize.evaluate_real`).

Targets (issue 17): 1,000,000 requests in <= 60 s; simulated FN <= 6% and FP <= 3% after
adjustment in every scenario; real latency faults top-3 >= 90%.

Usage::

    python benchmarks/bench_localize.py                          # 3 runs of 100k and 1M requests
    python benchmarks/bench_localize.py --runs 1 --sizes 100000 --no-real --seeds 1
    python benchmarks/bench_localize.py --json > localize.json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time


def measure(n_requests: int, seed: int) -> dict:
    """One run in this process: simulate, build the tables and their call views, time ``fit``."""
    from tracesleuth.analyses.localize import RootCauseLocalization
    from tracesleuth.analyses.localize.synthetic import simulate_scenario

    sc = simulate_scenario("load-imbalance", n_requests=n_requests, random_state=seed)
    t0 = time.perf_counter()
    tables = sc.tables()
    for t in tables:
        t.calls()
    tables_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = RootCauseLocalization(random_state=seed).fit(tables).result_
    fit_s = time.perf_counter() - t0
    return {"n_requests": n_requests, "tables_s": tables_s, "fit_s": fit_s,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "hit": bool(res.anomalous_methods) and res.anomalous_methods[0].operation_key in sc.anomalous_methods}


def _child(n_requests: int, seed: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(n_requests), str(seed)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="100000,1000000", help="simulated requests, comma-separated")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per simulated scenario (Table 2)")
    parser.add_argument("--no-real", action="store_true", help="skip the real-data evaluation")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*args.child)))
        return 0

    import polars as pl

    from tracesleuth.evaluation.protocols.localize import evaluate_real, evaluate_simulated, per_fault_type, table_2

    report: dict = {"sizes": []}
    for n in (int(s) for s in args.sizes.split(",")):
        runs = [_child(n, seed) for seed in range(args.runs)]
        report["sizes"].append({"n_requests": n, "runs": len(runs),
                                "tables_s_median": statistics.median(r["tables_s"] for r in runs),
                                "fit_s_median": statistics.median(r["fit_s"] for r in runs),
                                "peak_rss_mb_median": statistics.median(r["peak_rss_mb"] for r in runs),
                                "hits": sum(r["hit"] for r in runs)})
    t0 = time.perf_counter()
    sim = evaluate_simulated(seeds=args.seeds)
    report["simulated_s"] = time.perf_counter() - t0
    report["table_2"] = table_2(sim).to_dicts()
    if not args.no_real:
        t0 = time.perf_counter()
        real = evaluate_real(args.data_dir)
        report["real_s"] = time.perf_counter() - t0
        report["real"] = per_fault_type(real).to_dicts()
        report["real_faults"] = real.to_dicts()
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    for s in report["sizes"]:
        print(f"{s['n_requests']:>9,} requests: tables + call views {s['tables_s_median']:.1f} s, fit "
              f"{s['fit_s_median']:.1f} s (median of {s['runs']}), peak RSS {s['peak_rss_mb_median']:,.0f} MB, "
              f"top method anomalous in {s['hits']}/{s['runs']}")
    with pl.Config(tbl_rows=100, tbl_cols=20, tbl_hide_dataframe_shape=True, tbl_width_chars=200):
        print(f"simulated scenarios ({report['simulated_s']:.0f} s), the paper's Table 2:")
        print(pl.DataFrame(report["table_2"]))
        if "real" in report:
            print(f"real faults ({report['real_s']:.0f} s): top-1 / top-3 of the injected service")
            print(pl.DataFrame(report["real"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
