"""Latency degradation patterns: speed, memory and quality of LatencyDegradationPatterns.

Prints (median of ``--runs`` runs, each in a fresh process so that its peak RSS is its own; the
time is ``fit`` alone, not building the table, as wall-clock and as the process's CPU time, which
other work on a shared machine disturbs less; and the time of the pattern search inside it, the GA
or branch and bound, the part that :mod:`~tracesleuth.analyses.patterns.ga` and
:mod:`~tracesleuth.analyses.patterns.bnb` own):

* one session as in the paper (1,000 requests, 13 calls of 8 operations, two injected 50 ms
  degradations on ~10% of the requests each): the genetic algorithm with the full dynamic
  program, and branch and bound;
* the curve of the genetic algorithm on 10^3, 10^4, 10^5 and 10^6 requests of 20 operations;
* for each, the best-matching F-score of the found sub-intervals against the injected
  degradations (the paper's Section 4.3 metric), as a sanity check.

Targets (issue 29): the session's fit <= 0.1 s with the GA and <= 0.05 s with branch and bound;
10^6 requests x 20 operations <= 4 s and <= 4 GB peak RSS (wall-clock medians). ``--check`` makes
the exit status 1 when a target is missed.

Measured on this project's 2-core machine while other jobs loaded it (load average 5-10, so the
wall-clock figures are 2-4x the CPU ones; medians), before -> after the search rework of issue 29:

=====================================  ==============  ==============
                                       before          after
=====================================  ==============  ==============
session, GA: fit CPU s                 0.385-0.408     0.136-0.201
session, GA: search (wall) s           1.03-1.07       0.23-0.27
session, B&B: fit CPU s                0.094-0.174     0.058-0.093
session, B&B: search CPU s             0.096           0.032-0.039
10^6 requests: fit CPU s               5.92            5.70
10^6 requests: search (wall) s         0.88            0.26
=====================================  ==============  ==============

On the idle machine (load average under 1.3; 2026-11-27, three runs of ``--runs 7``, medians):
session GA fit 0.057-0.058 s, branch and bound 0.027 s, 10^6 requests 2.61-2.80 s at 0.98 GB peak RSS.

Same patterns, same F-scores (branch and bound: identical results; the GA draws another random
stream of the same law: bookshop evaluation, 30 noised sessions, GA mean F 0.9775 -> 0.9777
automatic interval, 0.9787 -> 0.9789 affected; the paper's protocol 0.9984 / min 0.9726 both). At
10^6 requests the search is 5% of the fit: encoding the attributes (mean shift per column), the
effects' medians, the left-out columns and split causes take the rest (``analysis.py``,
``split_points.py``, ``candidates.py``).

Then the rest of the 10^6-request fit (issue 29 item 7, branch ``patterns-speed2``; same machine,
load average 6-8, median of 3): 5.45 s wall / 5.13 s CPU -> 3.63 s wall / 3.34 s CPU, identical
results. The effects' medians are selected within the middle ranks' bins (``_data.split_medians``),
pass-through columns decided by counting, bin codes column-major and by comparisons, categorical
codes by lookup instead of a rank over the column.

Then the paper's session (issue 29 item 7, branch ``patterns-speed3``): identical results for both
solvers (the GA draws the same random stream; labels and ``to_dict()`` equal on 32 fits, golden
files unchanged). Medians of 7 fresh-process runs each (``--runs 7``), "before" the branch's base
``41ad4b3`` and "after" run back to back; the machine's 2 cores were shared with other jobs all
along (their ``uptime`` load averages in the rows), so wall and CPU time swing by up to 1.5x
between runs of the same code (the 08:01 "after" ran one commit before the branch's last, which
removed another 2% of the GA's instructions; callgrind: ``valgrind --tool=callgrind`` of two GA searches on
the session's encoded requests, imports subtracted):

===================================================  ===============  ===============
                                                     before           after
===================================================  ===============  ===============
session, GA: fit wall s (08:01, load 4.7-5.6)        0.199            0.102
session, GA: fit CPU s (08:01)                       0.195            0.092
session, GA: search wall s (08:01)                   0.163            0.081
session, B&B: fit wall s (08:01)                     0.060            0.038
session, B&B: search wall s (08:01)                  0.030            0.018
session, GA: fit wall s (08:05-08:10, load 3.3-4.2)  0.183-0.228      0.143-0.181
session, B&B: fit wall s (08:05-08:10)               0.064-0.089      0.048-0.081
session, GA / B&B: fit wall s (07:05, load 0.6-0.8)  0.126 / 0.055    -
10^6 requests: fit wall s (08:01, median of 3)       3.64             3.32
2 GA searches of the session: instructions           1231 M           813 M
===================================================  ===============  ===============

The instruction counts (deterministic, unlike the times here) put the GA search at 0.66 of
before; the rest of the fit lost most of its mean shift (10 mean shifts of a 1,000-request fit:
12.8 -> 3.3 ms). On the least loaded machine of the day (07:05, load 0.6) the base fitted in
0.126 s (GA) and 0.055 s (B&B); scaled by the ratios above that is about 0.08 s and 0.04 s, both
within the targets; under the load of the table's 08:01 runs the GA met its target at 0.102 s only
in part. What went, all with the same results:

* GA (``ga.py``): fair coins unpacked from the raw words' bytes; crossover's rare conflicts and
  the reproduced offspring copied by index, not by masked copies; *modify* read from a table of
  outcomes per (attribute, condition, draw); the fitness cache dedups new genomes through its
  dense index (no sort) and computes mixed-radix keys by a float dot product when exact; the
  tournament finds the group at a winner's rank by one binary search; fitness, decoding and
  mutation read and write by flat indices; the hall of fame returns early when no offspring
  ties or beats it.
* Branch and bound (``bnb.py``): children pushed from lists, "every attribute conditioned" kept
  in the heap entry, one repeat per step, its bound and the searches' F-scores
  (``_bitsets.admissible_f_score``) written out instead of the general metrics function (whose
  ``errstate`` context cost a fifth of the search).
* Mean shift (``split_points.py``): the k-th neighbour distance by one binary search in the
  window sums (was a vectorised bisection), and each seed moved in Python floats up to
  ``CLIMB_LISTS`` values (was a dozen array calls a step over all seeds).

Quality (``tracesleuth evaluate patterns --noised``, 30 sessions, ``random_state=0``): bookshop,
automatic interval, GA mean F 0.9777 -> 0.9803, min 0.9318 -> 0.9467 (``CompoundLabels``: a slow
mode of an operation the faster cause delays too counts as the slower cause, and a condition both
patterns share stays in the fit); bookshop, affected interval, GA 0.9789 -> 0.9812 (min 0.9467);
bookshop, automatic interval, branch and bound 0.9577 -> 0.9582 (min 0.8329 both); E-Shopper
with the defaults 0.9998 / min 0.9947 (affected), 0.9995 / 0.9946 (automatic); the paper's
protocol (E-Shopper, ``--paper``) 0.9984 / min 0.9726 both intervals, unchanged.

Then the GA once more (issue 29, branch ``ga-speed``), with identical results and random stream
(histories, patterns and labels equal; golden files unchanged): a new genome is counted as the
AND of its conditions' tabled bit strings (``PatternEvaluator.condition_bits`` / ``count_bits``)
instead of the general ``class_counts``; the tournament finds the group at a winner's rank by a
cumulative sum instead of a binary search and hands back flat indices; mutation reads its
per-attribute draw counts by ``take``. One GA search of the paper's session (seed 0, callgrind,
imports subtracted): 424 M -> 391 M instructions. In-process CPU time of the search, paired
median of 8 x 3 searches: 0.90 of before. The fit in fresh processes (``--measure``, seeds 0-4,
3 rounds, old and new alternating; load average 7-9 on the 2 cores, so wall-clock was 5x the CPU
time and meaningless): CPU median 0.129 -> 0.127 s, paired ratio 0.95. The whole benchmark
(``--runs 5 --curve 1000000 --curve-runs 3``, before then after, load average 4-7) only showed the
load: GA session 0.217 / 0.245 s wall, 0.096 / 0.132 s CPU; B&B 0.253 / 0.091 s wall, 0.037 /
0.045 s CPU; 10^6 requests 5.45 / 4.49 s wall, 3.05 / 2.82 s CPU. The 0.1 s target stays
missed on this evidence: the search's remaining cost is the random stream itself (about 12,000
doubles, an argsort of the 15 x 200 pool and a power per generation), which cannot change
without changing the stream, and the rest of the fit (about 18 ms: encoding, medians,
refinements) is spread over many small steps.

Tried and not kept: a variant of the same law with another random stream (coins as the sign bits
of random bytes; one mutation table per kind, attribute, condition and draw, with
``n_attributes + 3`` draws a mutation instead of ``+ 6``; pools sorted by a value sort of packed
integer keys instead of an argsort) made the search about 7% faster again (paired in-process
ratio 0.93), but on 30 noised bookshop sessions (automatic interval) its GA mean F was 0.9798,
below the 0.98 target (min 0.9467, as before): the target lies within stream-to-stream noise of
the current stream's 0.9803, so the stream was kept. Coins by a table of the 256 bytes (same
stream): more instructions (406 M vs 397 M). ``np.choose`` for the kind of a mutation: slower
than two ``np.where``.

Usage::

    python benchmarks/bench_patterns.py                 # 5 runs of the session, 3 per curve point
    python benchmarks/bench_patterns.py --runs 3 --curve 1000,10000
    python benchmarks/bench_patterns.py --json > patterns.json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

TARGETS = {"session_ga_s": 0.1, "session_bnb_s": 0.05, "million_s": 4.0, "million_peak_rss_gb": 4.0}


def _best_match(labels, truth) -> list[float]:
    import numpy as np

    out = []
    for label in (1, 2):
        best = 0.0
        for c in np.unique(labels[labels >= 0]):
            tp = int(np.sum((labels == c) & (truth == label)))
            if tp:
                p, r = tp / np.sum(labels == c), tp / np.sum(truth == label)
                best = max(best, 2 * p * r / (p + r))
        out.append(round(float(best), 4))
    return out


def measure(solver: str, n_requests: int, n_operations: int, seed: int) -> dict:
    """One run in this process: build a session, time ``fit``."""
    from tracesleuth.analyses.patterns import LatencyDegradationPatterns
    from tracesleuth.analyses.patterns.synthetic import make_degraded_session

    from tracesleuth.analyses.patterns import stages  # the search protocol calls the GA and B&B from here

    session = make_degraded_session(n_requests, n_operations=n_operations, random_state=seed)
    search_s = _time_search(stages, "genetic_search" if solver == "ga" else "branch_and_bound")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model = LatencyDegradationPatterns(solver=solver, random_state=seed)
    t0, c0 = time.perf_counter(), time.process_time()
    model.fit(session.frame)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    res = model.result_
    return {
        "solver": solver,
        "n_requests": n_requests,
        "n_operations": n_operations,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "search_seconds": sum(search_s) if search_s else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_fit_mb": rss_before / 1024,
        "n_sub_intervals": len(res.sub_intervals),
        "pattern_f_scores": [round(s.f_score, 4) for s in res.sub_intervals],
        "best_match_f": _best_match(model.labels_, session.truth),
    }


def _time_search(module, name: str) -> list[float]:
    """Wrap the search function ``name`` as ``module`` calls it; the returned list collects its times."""
    times: list[float] = []
    search = getattr(module, name, None)
    if search is None:  # the analysis no longer calls it by this name: no search time
        return times

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return search(*args, **kwargs)
        finally:
            times.append(time.perf_counter() - t0)

    setattr(module, name, timed)
    return times


def run_isolated(solver: str, n_requests: int, n_operations: int, seed: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--measure", solver, str(n_requests), str(n_operations), str(seed)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_of(solver: str, n_requests: int, n_operations: int, runs: int) -> dict:
    results = [run_isolated(solver, n_requests, n_operations, seed) for seed in range(runs)]
    return {
        "solver": solver,
        "n_requests": n_requests,
        "n_operations": n_operations,
        "runs": runs,
        "seconds_median": statistics.median(r["seconds"] for r in results),
        "seconds_max": max(r["seconds"] for r in results),
        "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in results),
        "search_seconds_median": (statistics.median(r["search_seconds"] for r in results)
                                  if all(r["search_seconds"] is not None for r in results) else None),
        "peak_rss_mb_median": statistics.median(r["peak_rss_mb"] for r in results),
        "min_best_match_f": min(min(r["best_match_f"]) for r in results),
        "sub_intervals": [r["n_sub_intervals"] for r in results],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of the 1,000-request session (default 5)")
    parser.add_argument("--curve-runs", type=int, default=3, help="runs per curve point (default 3)")
    parser.add_argument("--curve", default="1000,10000,100000,1000000",
                        help="comma-separated request counts of the curve (20 operations)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a target is missed")
    parser.add_argument("--measure", nargs=4, metavar=("SOLVER", "N", "OPS", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        solver, n, ops, seed = args.measure
        print(json.dumps(measure(solver, int(n), int(ops), int(seed))))
        return 0

    session = [median_of(solver, 1000, 8, args.runs) for solver in ("ga", "bnb")]
    curve = [median_of("ga", int(n), 20, args.curve_runs) for n in args.curve.split(",") if n]
    million = next((c for c in curve if c["n_requests"] == 1_000_000), None)
    checks = {"session_ga_s": session[0]["seconds_median"] <= TARGETS["session_ga_s"],
              "session_bnb_s": session[1]["seconds_median"] <= TARGETS["session_bnb_s"]}
    if million is not None:
        checks["million_s"] = million["seconds_median"] <= TARGETS["million_s"]
        checks["million_peak_rss_gb"] = million["peak_rss_mb_median"] / 1024 <= TARGETS["million_peak_rss_gb"]
    report = {"session": session, "curve": curve, "targets": TARGETS, "met": checks}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("One session: 1,000 requests, 8 operations (13 calls), two injected 50 ms degradations")
        head = (f"{'fit s (median)':>16}{'max s':>9}{'CPU s':>8}{'search s':>10}{'peak RSS MB':>13}"
                f"{'min best-match F':>18}")

        def line(r) -> str:
            search = "-" if r["search_seconds_median"] is None else f"{r['search_seconds_median']:.3f}"
            return (f"{r['seconds_median']:>16.3f}{r['seconds_max']:>9.3f}{r['cpu_seconds_median']:>8.3f}{search:>10}"
                    f"{r['peak_rss_mb_median']:>13.0f}{r['min_best_match_f']:>18.3f}")

        print(f"{'solver':<8}{head}")
        for r in session:
            print(f"{r['solver']:<8}{line(r)}")
        print("\nGenetic algorithm, 20 operations")
        print(f"{'requests':>10}{head}")
        for r in curve:
            print(f"{r['n_requests']:>10,}{line(r)}")
        verdict = {k: "met" if checks.get(k) else "MISSED" if k in checks else "not run" for k in TARGETS}
        print("\nTargets: " + ", ".join(f"{k} <= {v}: {verdict[k]}"
                                        for k, v in TARGETS.items()))
    return 0 if (not args.check or all(checks.values())) else 1


if __name__ == "__main__":
    sys.exit(main())
