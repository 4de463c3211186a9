"""Performance annotations: derivation speed (target, issue 19: 1,000 operations x 10,000 samples in <= 30 s).

A measurement frame of ``--operations`` operations with ``--samples`` calls each (three candidate
features per call, one of them related) is derived (:func:`~tracesleuth.analyses.annotate.derive.derive_annotations`
over :func:`~tracesleuth.analyses.annotate.measurements.operation_groups`: what
``PerformanceAnnotations.fit`` does once the calls are measured). A quarter of the operations
each follows one law, so every path of the derivation runs:

* linear in ``x`` plus normal noise (10 % of the mean): correlated, degree 1;
* quadratic in a log-uniform ``x`` plus noise: correlated, degree 2;
* two or three log-normal modes, unrelated to any feature: clustered (a normal mixture chosen by BIC);
* an exact constant: constant.

Prints the wall time (median of ``--runs``) and the process's CPU time (the machine may be shared:
the load average is printed too), the frame's build time apart, and the share of
operations whose kind was recovered. Also checks the annotations against a second frame drawn
the same way (the checking time).

Usage::

    python benchmarks/bench_annotate.py                       # 3 runs, 1,000 x 10,000
    python benchmarks/bench_annotate.py --operations 200 --samples 2000 --runs 1 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np


def make_frame(n_operations: int, n_samples: int, seed: int):
    import polars as pl

    from tracesleuth.analyses.annotate.measurements import feature_column

    rng = np.random.default_rng(seed)
    n = n_operations * n_samples
    op = np.repeat(np.arange(n_operations), n_samples)
    kind = op % 4
    x = rng.uniform(1, 100, n)
    x[kind == 1] = np.exp(rng.uniform(0, np.log(300), int((kind == 1).sum())))
    scale = 1e4 * (1 + op % 7)
    y = np.empty(n)
    m = kind == 0
    y[m] = scale[m] * (5 + x[m]) * (1 + rng.normal(0, 0.1, int(m.sum())))
    m = kind == 1
    y[m] = scale[m] * (20 + 0.5 * x[m] + 0.08 * x[m] ** 2) + rng.normal(0, 1e3, int(m.sum()))
    m = kind == 2
    modes = np.where(rng.random(int(m.sum())) < 0.6, 1.0, np.where(rng.random(int(m.sum())) < 0.7, 8.0, 40.0))
    y[m] = scale[m] * modes * rng.lognormal(0, 0.1, int(m.sum()))
    m = kind == 3
    y[m] = scale[m]
    names = np.array([f"svc{k % 50}:op{k}" for k in range(n_operations)])
    order = np.argsort(names, kind="stable")  # the frame is sorted by operation key
    rank = np.empty(n_operations, dtype=np.int64)
    rank[order] = np.arange(n_operations)
    rows = np.argsort(rank[op], kind="stable")
    frame = pl.DataFrame({"operation_key": names[op][rows], "time": np.maximum(y, 0).astype(np.int64)[rows],
                          feature_column("x"): x[rows], feature_column("noise_a"): rng.uniform(0, 1, n),
                          feature_column("noise_b"): rng.integers(0, 50, n).astype(np.float64)})
    expected = {names[k]: ("correlated", "correlated", "clustered", "constant")[k % 4] for k in range(n_operations)}
    return frame, expected


def one_run(n_operations: int, n_samples: int, seed: int) -> dict:
    from tracesleuth.analyses.annotate.check import check_annotation
    from tracesleuth.analyses.annotate.derive import derive_annotations
    from tracesleuth.analyses.annotate.measurements import feature_columns, operation_groups

    t0 = time.perf_counter()
    frame, expected = make_frame(n_operations, n_samples, seed)
    build_s = time.perf_counter() - t0
    import sklearn.cluster  # noqa: F401 - imported before the clock starts, as in a running program

    t0, c0 = time.perf_counter(), time.process_time()
    groups = operation_groups(frame)
    annotations, skipped, notes = derive_annotations(frame, groups, metrics=("time",),
                                                     feature_columns=feature_columns(frame), random_state=seed)
    derive_s, derive_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    new, _ = make_frame(n_operations, n_samples, seed + 1)
    t0 = time.perf_counter()
    rows = dict(operation_groups(new))
    checks = [check_annotation(a, new[rows[a.operation]]) for a in annotations]
    check_s = time.perf_counter() - t0
    kinds = {a.operation: a.kind for a in annotations}
    return {"operations": n_operations, "samples": n_samples, "build_s": build_s, "derive_s": derive_s,
            "derive_cpu_s": derive_cpu_s, "load_1min": os.getloadavg()[0],
            "check_s": check_s, "annotations": len(annotations), "skipped": len(skipped),
            "kind_recovered": float(np.mean([kinds.get(op) == k for op, k in expected.items()])),
            "pass_rate_same_law": sum(c.n_passed for c in checks) / max(sum(c.n_windows for c in checks), 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    runs = [one_run(args.operations, args.samples, args.seed + 10 * r) for r in range(args.runs)]
    summary = {k: statistics.median(r[k] for r in runs) for k in ("build_s", "derive_s", "derive_cpu_s", "check_s",
                                                                   "kind_recovered", "pass_rate_same_law", "load_1min")}
    if args.json:
        print(json.dumps({"runs": runs, "median": summary}))
        return 0
    print(f"{args.operations:,} operations x {args.samples:,} samples (median of {args.runs} runs):")
    each = ", ".join(f"{r['derive_s']:.1f}" for r in runs)
    print(f"  derivation {summary['derive_s']:.1f} s wall (runs: {each}), {summary['derive_cpu_s']:.1f} s of CPU; "
          f"target <= 30 s; load average {summary['load_1min']:.1f} on {os.cpu_count()} cores")
    print(f"  checking   {summary['check_s']:.1f} s; frame built in {summary['build_s']:.1f} s (not counted)")
    print(f"  kind recovered for {summary['kind_recovered']:.1%} of operations; assertions passed on a second draw "
          f"of the same laws: {summary['pass_rate_same_law']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
