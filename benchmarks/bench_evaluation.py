"""Benchmark: the evaluation of Cortellessa & Traini (ICPE 2020, Section 4) on simulated sessions.

Runs :func:`tracesleuth.evaluation.protocols.patterns.evaluate_patterns` for normal and noised E-Shopper
sessions (30 each by default, 1000 requests per session) with every solver, and prints the
paper's Table 2 (per-session F-score, precision, recall; noised), the mean ± standard deviation
per solver (Figures 6-8) and Table 3 (execution time), or all of it as JSON with ``--json``.

Targets: the genetic algorithm's mean F-score is at least 0.99 on normal sessions and at least
0.95 on noised ones. ``--check`` makes the exit status 1 when a target is missed.

Usage::

    python benchmarks/bench_evaluation.py                   # 30 + 30 sessions, all solvers
    python benchmarks/bench_evaluation.py --sessions 5 --solvers kmeans,hierarchical
    python benchmarks/bench_evaluation.py --json > evaluation.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time

#: Mean F-score the genetic algorithm must reach, per setting.
TARGETS = {"normal": 0.99, "noised": 0.95}


def _parse_params(items: list[str]) -> dict:
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--param expects KEY=VALUE, got {item!r}")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return params


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=30, help="sessions per setting (default 30)")
    parser.add_argument("--n-requests", type=int, default=1000, help="requests per session (default 1000)")
    parser.add_argument("--random-state", type=int, default=0, help="seed of the sessions (default 0)")
    parser.add_argument("--solvers", default="ga,bnb,kmeans,hierarchical,meanshift",
                        help="comma-separated solvers (default: all five)")
    parser.add_argument("--settings", default="normal,noised", help="normal, noised or both (default)")
    parser.add_argument("--interval", choices=("affected", "auto"), default="affected",
                        help="the paper's [L_min, L_max] of affected requests, or the automatic interval")
    parser.add_argument("--k-select", choices=("truth", "silhouette"), default="truth",
                        help="how K-means/hierarchical pick k: best against the truth (paper) or silhouette")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="estimator setting for the pattern solvers, e.g. generations=100 (repeatable)")
    parser.add_argument("--sessions-table", action="store_true", help="also print Table 2 for normal sessions")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a GA target is missed")
    args = parser.parse_args(argv)

    from tracesleuth.evaluation.protocols.patterns import evaluate_patterns, render

    solvers = tuple(s.strip() for s in args.solvers.split(",") if s.strip())
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    if not settings or any(s not in TARGETS for s in settings):
        parser.error(f"--settings must name normal and/or noised, got {args.settings!r}")
    params = _parse_params(args.param)

    results, wall = {}, {}
    for setting in settings:
        t0 = time.perf_counter()
        results[setting] = evaluate_patterns(
            sessions=args.sessions, noised=setting == "noised", solvers=solvers, random_state=args.random_state,
            n_requests=args.n_requests, interval=args.interval, k_select=args.k_select,
            estimator_params=params or None)
        wall[setting] = time.perf_counter() - t0

    checks = {}
    if "ga" in solvers:
        for setting, ev in results.items():
            mean = ev.mean("ga")
            checks[setting] = {"ga_f_score_mean": mean, "target": TARGETS[setting], "met": mean >= TARGETS[setting]}

    if args.json:
        out = {setting: {**ev.to_dict(), "wall_s": wall[setting]} for setting, ev in results.items()}
        out["targets"] = checks
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        evs = list(results.values())
        for setting, ev in results.items():
            if setting == "noised" or args.sessions_table:
                print(render(ev, table="sessions"), end="\n\n")
        print(render(*evs), end="\n\n")
        print(render(*evs, table="time"), end="\n\n")
        for setting, c in checks.items():
            print(f"target {setting}: GA mean F-score {c['ga_f_score_mean']:.4f} >= {c['target']}: "
                  f"{'met' if c['met'] else 'MISSED'}")
        print("wall time: " + ", ".join(f"{s} {w:.1f} s" for s, w in wall.items()))
    return 1 if args.check and not all(c["met"] for c in checks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
