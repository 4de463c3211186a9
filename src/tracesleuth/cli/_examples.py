"""The examples every command's ``--help`` ends with: one home, read by the help and by the test
that runs them (``tests/test_readme.py``).

Each runs as written from the repository's root with the recorded data beside it
(``../shared/data``) after the README's quick start made ``store/`` (the TrainTicket day with its
logs) and ``annotations.yaml``; ``examples/`` holds the other input formats.
"""

from __future__ import annotations

__all__ = ["EXAMPLES", "epilog"]

_TT = "../shared/data/nezha/trainticket/2023-01-29"
_OB = "../shared/data/nezha/onlineboutique/2022-08-22/trace"
_TRIPS = "'ts-travel-service:/api/v1/travelservice/trips/left'"

#: Command path (``""`` the top level, ``"annotate derive"``) -> its examples, 1 to 3.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (f"tracesleuth ingest {_TT}/trace {_TT}/log -o store/",
         "tracesleuth diagnose store/ --at 2023-01-29T08:44:30",
         "tracesleuth analyze store/ --at 2023-01-29T08:44:30 -o report.html"),
    "ingest": (f"tracesleuth ingest {_TT}/trace {_TT}/log -o store/",
               "tracesleuth ingest ../shared/data/zipkin-lens -o zipkin-store/"),
    "info": ("tracesleuth info store/",
             f"tracesleuth info {_OB}/05_29_trace.csv.gz --json"),
    "table": (f"tracesleuth table store/ --endpoint {_TRIPS} -o trips.csv",
              f"tracesleuth table {_OB}/05_29_trace.csv.gz -o boutique.parquet"),
    "collect": ("tracesleuth collect --store live-store/ --port 4318",),
    "demo": ("tracesleuth demo -o report.html",
             "tracesleuth demo --incident cart-service --fault exception --fault-share 0.5 -o incident.html"),
    "analyze": ("tracesleuth analyze store/ --at 2023-01-29T08:44:30 -o report.html",
                f"tracesleuth analyze store/ -e {_TRIPS} --only patterns --only localize -o trips.html",
                f"tracesleuth analyze {_OB}/05_29_trace.csv.gz --baseline {_OB}/05_27_trace.csv.gz -o boutique.html"),
    "diagnose": ("tracesleuth diagnose store/ --at 2023-01-29T08:44:30",
                 "tracesleuth diagnose store/ --time 2023-01-29T08:43:30/2023-01-29T08:45 --json"),
    "compare": ("tracesleuth compare store/ --baseline-time 2023-01-29T08:42/2023-01-29T08:43 "
                "--problem-time 2023-01-29T08:43:30/2023-01-29T08:45",
                f"tracesleuth compare --baseline {_OB}/05_27_trace.csv.gz --problem {_OB}/05_29_trace.csv.gz --json"),
    "patterns": (f"tracesleuth patterns store/ -e {_TRIPS} --time 2023-01-29T09:03/2023-01-29T09:12",
                 "tracesleuth patterns store/ --interval 350ms:700ms --solver bnb --seed 7 -o labels.parquet"),
    "localize": ("tracesleuth localize store/ --time 2023-01-29T08:43/2023-01-29T08:46",
                 "tracesleuth localize examples/mi-trace.log.gz --paper --json"),
    "paths": (f"tracesleuth paths {_TT}/trace/08_45_trace.csv.gz",
              "tracesleuth paths examples/messages.csv --messages",
              "tracesleuth paths examples/envoy/*.log --messages --json"),
    "evaluate": ("tracesleuth evaluate diagnose --quick",
                 "tracesleuth evaluate patterns --sessions 30 --noised"),
    "evaluate diagnose": ("tracesleuth evaluate diagnose --quick --json",),
    "evaluate compare": ("tracesleuth evaluate compare --quick",),
    "evaluate patterns": ("tracesleuth evaluate patterns --simulator eshopper --interval affected --paper",),
    "evaluate localize": ("tracesleuth evaluate localize --quick",),
    "evaluate paths": ("tracesleuth evaluate paths --quick",),
    "evaluate annotate": ("tracesleuth evaluate annotate --quick -o annotate-eval.html",),
    "annotate": (f"tracesleuth annotate derive {_TT}/fault_free -o annotations.yaml",
                 f"tracesleuth annotate check annotations.yaml {_TT}/trace/08_45_trace.csv.gz"),
    "annotate derive": (f"tracesleuth annotate derive {_TT}/fault_free -o annotations.yaml",
                        "tracesleuth annotate derive store/ --time 2023-01-29T09:00/2023-01-29T10:30 -o tt.yaml"),
    "annotate check": (f"tracesleuth annotate check annotations.yaml {_TT}/trace/08_45_trace.csv.gz",
                       "tracesleuth annotate check annotations.yaml store/ --time 2023-01-29T13:25/2023-01-29T15:45 "
                       "--json",
                       "tracesleuth annotate check annotations.yaml store/ --scheduler serial "
                       "--time 2023-01-29T13:25/2023-01-29T15:45"),
    "annotate predict": (f"tracesleuth annotate predict annotations.yaml {_TT}/fault_free "
                         "--change 'ts-basic-service:*+5ms' --under 100ms",),
}


def epilog(path: str) -> str | None:
    """The help's closing "Examples" block of the command at ``path`` (None when it has none).

    ``\\b`` keeps the block's line breaks (Click's rule for a paragraph not to be rewrapped).
    """
    examples = EXAMPLES.get(path)
    if not examples:
        return None
    return "Examples (from the repository's root, with ../shared/data beside it):\n\b\n" + "\n".join(
        f"  {example}" for example in examples)
