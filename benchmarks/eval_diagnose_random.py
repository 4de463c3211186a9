"""The diagnosis on random shops (:func:`tracesleuth.analyses.diagnose.synthetic.random_incident`, scored by
:func:`~tracesleuth.analyses.diagnose.synthetic.score_random_incidents`): per
fault, how often the culprit comes first, how often a wrong service is named, how often there is no
answer ("no change in the store"), the slowed instance's place, and the median onset error.

    python benchmarks/eval_diagnose_random.py [--seeds 30] [--at 50] [--requests 1500] [--faults ...] [--logs] [--parallel] [--skew MS] [--json]

``--at`` is the moment given to the diagnosis, seconds after the onset; ``--requests`` the requests
in the shop's 600 s (the onset at 400 s); ``--logs`` gives the diagnosis the shop's log records too
(the log-only faults always have them); ``--parallel`` makes every span's calls at once (a fan-out, the
same draws otherwise); ``--skew`` puts each service but the entry on a clock off by a constant up to
that many ms. Each seed is one shop and one fault; the figures are
deterministic (every draw is seeded).
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    from tracesleuth.analyses.diagnose.synthetic import RANDOM_FAULTS, score_random_incidents

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--at", type=float, default=50.0, help="the moment given, seconds after the onset")
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--faults", nargs="+", default=list(RANDOM_FAULTS), choices=RANDOM_FAULTS)
    parser.add_argument("--logs", action="store_true", help="with the shops' log records")
    parser.add_argument("--parallel", action="store_true", help="each span makes its calls all at once (a fan-out)")
    parser.add_argument("--skew", type=float, default=0.0, metavar="MS",
                        help="each service's clock off by up to this many ms")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [score_random_incidents(f, seeds=args.seeds, at_s=args.at, n_requests=args.requests, logs=args.logs,
                                   parallel=args.parallel, skew_ms=args.skew)
            for f in args.faults]
    if args.json:
        print(json.dumps({"seeds": args.seeds, "at_s": args.at, "requests": args.requests, "logs": args.logs,
                          "parallel": args.parallel, "skew_ms": args.skew,
                          "faults": rows}, indent=1))
        return
    for r in rows:
        extra = f", slowed instance first {r['instance_first']}" if r["instance_first"] is not None else ""
        onset = r["median_abs_onset_error_s"]
        print(f"{r['fault']:>15}: culprit first {r['first']}/{r['seeds']} ({r['top1']:.2f}), wrong named "
              f"{r['wrong_named']}, no answer {r['no_answer']}{extra}, median |onset error| "
              f"{'-' if onset is None else f'{onset:.1f} s'}")


if __name__ == "__main__":
    main()
