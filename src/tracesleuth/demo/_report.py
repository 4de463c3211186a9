"""The "Live run" report section: whether the run is a result, the load it got, and (incident
mode) the latency of both phases over time with the moment the fault started."""

from __future__ import annotations

from ..report.document import Figure, KeyValues, Section, Strong, Text
from ..report.figures import latency_over_time_figure
from ..units import format_duration_ns
from ._health import DISTURBANCE_FACTOR, MAX_FAILED_SHARE, MAX_LOST_SHARE, MIN_RATE_SHARE, RunHealth
from ._result import DemoOutcome

__all__ = ["live_run_section"]

_STATUS_WORDS = {"recovered": "Result", "not recovered": "Not recovered", "broken": "Not a result"}


def live_run_section(health: RunHealth | None, outcome: DemoOutcome, *, tables: dict | None = None, fault=None,
                     fault_start_ns: int | None = None) -> Section:
    """The live run: its outcome, the load asked and achieved, failures, queueing, what became of
    the telemetry (and, process by process, where some was lost), CPU used.

    Parameters
    ----------
    health : RunHealth or None
    outcome : DemoOutcome
    tables : dict of str to TraceTable, optional
        The trace table of each phase (incident mode): drawn as one latency-over-time heatmap.
    fault : Fault, optional
    fault_start_ns : int, optional
        When the fault was switched on, ns since the epoch (a line on the heatmap).

    Returns
    -------
    Section
    """
    section = Section("Live run", key="live-run")
    section.add(Text([Strong(f"{_STATUS_WORDS.get(outcome.status, outcome.status)}: "), outcome.message]))
    items = []
    if fault is not None:
        items.append(("fault injected", fault.describe()))
    if health is not None:
        items += [
            ("requests sent", f"{health.requests_sent:,} of {health.requests_planned:,} planned"),
            ("rate", f"{health.achieved_rate_per_s:.2f}/s achieved, {health.rate_per_s:g}/s asked "
                     f"(a result needs at least {MIN_RATE_SHARE:.0%} of it)"),
            ("requests failed", f"{health.requests_failed:,} ({health.failed_share:.1%}; a result allows at most "
                                f"{MAX_FAILED_SHARE:.0%})"),
            ("requests traced", f"{health.requests_analysed:,} (a result misses at most {MAX_LOST_SHARE:.0%} of the "
                                "answered ones)"),
        ]
        if health.latency_words():
            items.append(("latency without a fault",
                          f"{format_duration_ns(health.latency_p50_ns)} median, "
                          f"{format_duration_ns(health.latency_p90_ns)} 90th percentile; modelled "
                          f"{format_duration_ns(health.modelled_p50_ns)} and "
                          f"{format_duration_ns(health.modelled_p90_ns)} (overloaded beyond {DISTURBANCE_FACTOR:g}x "
                          "the median plus one injected delay)"))
        if health.telemetry_words():
            items.append(("telemetry (every process)", health.telemetry_words()))
            items += [(f"telemetry lost by {p.instance}", p.describe().split(": ", 1)[1]) for p in health.telemetry
                      if p.spans.lost or (p.logs is not None and p.logs.lost)]
        if health.cpu_cores is not None:
            items.append(("CPU used by the run", f"{health.cpu_cores:.2f} of {health.n_cores} cores"))
        if health.load_average is not None:
            items.append(("machine load average", f"{health.load_average:.1f} (1 minute, at the end of the load; "
                                                  f"{health.n_cores} cores)"))
    section.add(KeyValues(items))
    if tables:
        import numpy as np

        start = np.concatenate([t.frame["start_ns"].to_numpy() for t in tables.values()])
        latency = np.concatenate([t.frame["latency_ns"].to_numpy() for t in tables.values()])
        events = [(fault_start_ns, "fault on")] if fault_start_ns else []
        section.add(Figure(latency_over_time_figure(start, latency, events=events),
                           caption="Request latency over time, both phases: the dashed line is when the fault "
                                   "was switched on."))
    return section
