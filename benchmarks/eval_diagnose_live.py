"""The diagnosis on the live shop's generated incidents (issue 28, Build 5: services x fault types x
magnitudes), told only ``--at`` = a moment inside the problem phase, as a user who noticed it.

Each case runs the live demo shop (:func:`tracesleuth.demo.run_incident`: instrumented services,
OpenTelemetry spans and log records into tracesleuth's collector and store) through a baseline
phase and one fault in one service, then diagnoses the whole store with ``Diagnosis(at=...)``: no
periods are given, the onset and the baseline are found. Printed per fault type: top-1 and top-3
of the injected service, how often a service is named, and the onset's error (s) against the
moment the fault was switched on; ``--json`` gives every case.

    python benchmarks/eval_diagnose_live.py --quick          # 5 cases: one per fault type
    python benchmarks/eval_diagnose_live.py --quick --magnitude small
    python benchmarks/eval_diagnose_live.py                  # 5 services x 5 faults x 2 magnitudes
    python benchmarks/eval_diagnose_live.py --json > live.json
    python benchmarks/eval_diagnose_live.py --fault network-delay --seed 100   # one row of the grid
    python benchmarks/eval_diagnose_live.py --fault cpu-burn --keep-misses misses/  # keep misses' stores

A case whose run is no result (the shop could not keep up with its load on a busy machine: the
demo's own health check) is counted apart, not scored. This lives beside the benchmarks, not in
``tracesleuth evaluate``: it runs the demo, the top layer, which the evaluation layer does not import.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

#: Magnitudes per fault type: (small, large). Delays are ns per request; the code faults' and
#: cpu-burn's share of the requests / of a core.
MAGNITUDES = {"slow-handler": (10_000_000, 40_000_000), "network-delay": (10_000_000, 40_000_000),
              "exception": (0.2, 0.6), "early-return": (0.2, 0.6), "cpu-burn": (0.5, 1.0)}
#: Where the user says the incident is: this far into the problem phase.
AT_INTO_PROBLEM = 0.5


def run_case(service: str, fault: str, magnitude, *, duration_s: float, seed: int, workdir: Path) -> dict:
    """One incident: run the shop, diagnose its store; a row of the printed table."""
    from tracesleuth.analyses.diagnose import Diagnosis
    from tracesleuth.demo import run_incident
    from tracesleuth.errors import TraceSleuthError
    from tracesleuth.io.store import SpanStore

    size = {"delay_ns": int(magnitude)} if fault in ("slow-handler", "network-delay") else {"share": float(magnitude)}
    result = run_incident(service, fault=fault, duration_s=duration_s, seed=seed, workdir=workdir, **size)
    row = {"service": service, "fault": fault, "magnitude": magnitude, "seed": seed,
           "run": result.outcome().status, "rank": None, "verdict": "error", "first": None, "confidence": None,
           "onset_error_s": None, "message": ""}
    if result.outcome().status == "broken":
        row["message"] = result.outcome().message
        return row
    store = SpanStore(result.store_path, create=False)
    at = result.fault_start_ns + int(AT_INTO_PROBLEM * duration_s / 2 * 1e9)
    try:
        fitted = Diagnosis(at=at).fit(store.read_spans(dictionary=False),
                                      store.read_logs() if store.log_files() else None)
    except TraceSleuthError as exc:
        row["message"] = str(exc)
        return row
    names = [s.service for s in fitted.result_.services]
    onset = fitted.result_.onset
    row.update(rank=names.index(service) + 1 if service in names else None, verdict=fitted.result_.verdict,
               first=names[0] if names else None, confidence=fitted.result_.services[0].confidence if names else None,
               onset_error_s=None if onset is None else (onset.time_ns - result.fault_start_ns) / 1e9)
    return row


def summary(rows: list) -> dict:
    """Per fault type: cases scored, top-1, top-3, named share, median |onset error| (s)."""
    out = {}
    for fault in MAGNITUDES:
        scored = [r for r in rows if r["fault"] == fault and r["run"] != "broken"]
        if not scored:
            continue
        errors = [abs(r["onset_error_s"]) for r in scored if r["onset_error_s"] is not None]
        out[fault] = {"cases": len(scored), "broken_runs": sum(r["fault"] == fault and r["run"] == "broken" for r in rows),
                      "top1": sum(r["rank"] == 1 for r in scored) / len(scored),
                      "top3": sum(r["rank"] is not None and r["rank"] <= 3 for r in scored) / len(scored),
                      "named": sum(r["verdict"] == "named" for r in scored) / len(scored),
                      "onset_abs_error_s_median": statistics.median(errors) if errors else None}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one case per fault type (one magnitude)")
    parser.add_argument("--magnitude", choices=("small", "large"), default="large",
                        help="with --quick: which of MAGNITUDES' two sizes (default large)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load per case (half baseline)")
    parser.add_argument("--fault", action="append", choices=tuple(MAGNITUDES),
                        help="only this fault type (repeatable); each case keeps its seed in the full grid")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-misses", type=Path, metavar="DIR",
                        help="keep the work directory (store, logs) of each case whose injected service is "
                             "not ranked first in DIR/<service>-<fault>-<magnitude>-<seed>, to look into")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    from tracesleuth.demo._protocol import LIVE_SERVICES

    services = [s for s in LIVE_SERVICES if s != "web-service"]
    size = 0 if args.magnitude == "small" else 1
    cases = ([(services[i % len(services)], fault, sizes[size]) for i, (fault, sizes) in enumerate(MAGNITUDES.items())]
             if args.quick else [(s, f, m) for f, sizes in MAGNITUDES.items() for s in services for m in sizes])
    rows = []
    for i, (service, fault, magnitude) in enumerate(cases):
        if args.fault and fault not in args.fault:
            continue
        with tempfile.TemporaryDirectory(prefix="tracesleuth-live-") as tmp:
            rows.append(run_case(service, fault, magnitude, duration_s=args.duration, seed=args.seed + i,
                                 workdir=Path(tmp)))
            if args.keep_misses is not None and rows[-1]["rank"] != 1:
                shutil.copytree(tmp, args.keep_misses / f"{service}-{fault}-{magnitude}-{args.seed + i}")
        if not args.json:
            r = rows[-1]
            print(f"{service:<24}{fault:<15}{magnitude!s:<10} run={r['run']:<13} rank={r['rank']} "
                  f"first={r['first']} verdict={r['verdict']} onset_error_s={r['onset_error_s']} {r['message'][:80]}",
                  file=sys.stderr, flush=True)
    report = {"cases": rows, "per_fault": summary(rows), "duration_s": args.duration}
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print(f"{'fault':<15}{'cases':>6}{'broken':>7}{'top1':>6}{'top3':>6}{'named':>7}{'|onset err| s':>15}")
        for fault, s in report["per_fault"].items():
            err = "-" if s["onset_abs_error_s_median"] is None else f"{s['onset_abs_error_s_median']:.1f}"
            print(f"{fault:<15}{s['cases']:>6}{s['broken_runs']:>7}{s['top1']:>6.2f}{s['top3']:>6.2f}"
                  f"{s['named']:>7.2f}{err:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
