"""Request-flow comparison: speed, memory and quality of RequestFlowComparison.

Prints (median of ``--runs`` runs, each in a fresh process so that its peak RSS is its own; the
time is ``fit`` alone, not the simulation or the trace tables):

* 100,000 simulated requests per period (a slowed handler; :mod:`tracesleuth.analyses.compare.synthetic`)
  compared: wall time of ``fit`` and peak RSS; also at 10,000 requests, to show memory grows
  linearly;
* the simulated scenarios' top-1 rate (estimator and anchor rule);
* the real-data evaluation (../shared/data/nezha): top-1 / top-3 of the injected service per
  fault type, the estimator beside the anchor rule
  (:func:`tracesleuth.evaluation.protocols.compare.evaluate_real`).

Targets (issue 16): 100,000 requests per period in <= 10 s, memory linear in requests; simulated
top-1 >= 95%; real latency faults top-1 >= 95% and top-3 100%, code faults top-3 >= 70%.

Usage::

    python benchmarks/bench_compare.py                 # 3 runs of each size
    python benchmarks/bench_compare.py --runs 1 --sizes 10000 --no-real
    python benchmarks/bench_compare.py --json > compare.json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

TARGETS = {"fit_100k_s": 10.0, "simulated_top1": 0.95}


def measure(n_requests: int, seed: int) -> dict:
    """One run in this process: simulate, build both tables, time ``fit``."""
    from tracesleuth.analyses.compare import RequestFlowComparison
    from tracesleuth.analyses.compare.synthetic import simulate_scenario

    sc = simulate_scenario("slowed-handler", n_requests=n_requests, baseline_ratio=1.0, random_state=seed)
    problem, baseline = sc.tables()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    res = RequestFlowComparison(random_state=seed).fit(problem, baseline).result_
    fit_s = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"n_requests": n_requests, "fit_s": fit_s, "peak_rss_mb": peak_kb / 1024,
            "rss_before_fit_mb": rss_before / 1024,
            "hit": bool(res.services) and res.services[0].service == sc.injected}


def _child(n_requests: int, seed: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(n_requests), str(seed)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="10000,100000", help="requests per period, comma-separated")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per simulated scenario kind")
    parser.add_argument("--no-real", action="store_true", help="skip the real-data evaluation")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*args.child)))
        return 0

    import polars as pl

    from tracesleuth.evaluation.protocols.compare import evaluate_real, evaluate_simulated, per_fault_type

    report: dict = {"sizes": []}
    for n in (int(s) for s in args.sizes.split(",")):
        runs = [_child(n, seed) for seed in range(args.runs)]
        report["sizes"].append({"n_requests": n, "runs": len(runs),
                                "fit_s_median": statistics.median(r["fit_s"] for r in runs),
                                "peak_rss_mb_median": statistics.median(r["peak_rss_mb"] for r in runs),
                                "rss_before_fit_mb_median": statistics.median(r["rss_before_fit_mb"] for r in runs),
                                "hits": sum(r["hit"] for r in runs)})
    sim = evaluate_simulated(seeds=args.seeds)
    report["simulated"] = {"scenarios": sim.height,
                           "estimator_top1": float(sim["estimator_hit"].fill_null(False).mean()),
                           "anchor_top1": float(sim["anchor_hit"].mean()),
                           "per_kind": sim.group_by("kind", maintain_order=True).agg(
                               pl.col("estimator_hit").sum(), pl.col("anchor_hit").sum(), pl.len()).to_dicts()}
    if not args.no_real:
        t0 = time.perf_counter()
        real = evaluate_real(args.data_dir)
        report["real_s"] = time.perf_counter() - t0
        report["real"] = per_fault_type(real).to_dicts()
        report["real_faults"] = real.to_dicts()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for s in report["sizes"]:
        print(f"{s['n_requests']:>7} requests/period: fit {s['fit_s_median']:.2f} s (median of {s['runs']}), "
              f"peak RSS {s['peak_rss_mb_median']:.0f} MB (before fit {s['rss_before_fit_mb_median']:.0f} MB), "
              f"injected service first in {s['hits']}/{s['runs']}")
    sm = report["simulated"]
    print(f"simulated: estimator top-1 {sm['estimator_top1']:.1%}, anchor top-1 {sm['anchor_top1']:.1%} "
          f"over {sm['scenarios']} scenarios")
    for row in sm["per_kind"]:
        print(f"  {row['kind']:<15} estimator {row['estimator_hit']}/{row['len']}  anchor {row['anchor_hit']}/{row['len']}")
    if "real" in report:
        print(f"real faults ({report['real_s']:.0f} s): top-1 / top-3 of the injected service")
        print(f"  {'system':<15}{'fault type':<16}{'faults':>7}{'estimator':>14}{'anchor':>12}")
        for r in report["real"]:
            print(f"  {r['system']:<15}{r['fault_type']:<16}{r['faults']:>7}"
                  f"{r['estimator_top1']:>8}/{r['estimator_top3']:<5}{r['anchor_top1']:>7}/{r['anchor_top3']:<4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
