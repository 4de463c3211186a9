"""The ``tracesleuth compare`` and ``tracesleuth evaluate compare`` commands (registered in
:mod:`tracesleuth.analyses`); they only call the public API and render its result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from .._common import (WHOLE, Command, EndpointOpt, FormatOpt, JsonOpt, MappingOpt, NezhaDataOpt, SchedulerOpt,
                       SeedOpt, choose_scheduler, dask_scheduler, emit_json, out, parse_time_range, read_input,
                       run_evaluation, select_period, trace_table)
from ...errors import ParameterError

__all__ = ["register", "show"]



def show(result) -> None:
    """Print a :class:`ComparisonResult` (the command line's view of it)."""
    if not result.significant:
        out.print(_sentence(str(result.reason or "no significant change")), markup=False)
    if result.services:
        from ...units import format_duration_ns as ns

        t = Table(title="Services, most suspicious first (score: how far each departs from the baseline; "
                        "contribution: the slowdown it accounts for)", title_justify="left", show_lines=True)
        for c in ("#", "service", "score", "contribution", "evidence"):
            t.add_column(c, overflow="fold", justify="left" if c in ("service", "evidence") else "right")
        for k, s in enumerate(result.services[:10]):
            t.add_row(str(k + 1), escape(s.service), f"{s.score:.3f}", ns(s.contribution_ns) if s.contribution_ns else "—",
                      escape("; ".join(s.evidence)))
        out.print(t)
    if result.mutations:
        t = Table(title="Mutations ranked by contribution", title_justify="left", show_lines=True)
        for c in ("#", "kind", "category", "requests", "mean", "contribution"):
            t.add_column(c, overflow="fold", justify="left" if c in ("kind", "category") else "right")
        from ...units import format_duration_ns as ns

        for m in result.mutations[:10]:
            mean = " -> ".join(ns(v) if v is not None else "—" for v in (m.baseline_mean_ns, m.problem_mean_ns))
            t.add_row(str(m.rank), m.kind, escape(m.category[:120]), f"{m.baseline_count:,} -> {m.problem_count:,}",
                      mean, ns(m.contribution_ns))
        out.print(t)
    for note in result.notes:
        out.print(f"note: {note}", markup=False)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _sources(paths, baseline, problem, baseline_time, problem_time):
    """``((baseline paths, period), (problem paths, period))``: two inputs, or time ranges
    (``(low_ns, high_ns)``) over one."""
    if baseline_time or problem_time:
        if not (baseline_time and problem_time):
            raise ParameterError("--baseline-time and --problem-time go together (time ranges over one input)")
        if baseline:
            raise ParameterError("--baseline PATH and --baseline-time exclude each other")
        source = list(problem or []) + list(paths or [])
        if not source:
            raise ParameterError("give the input the time ranges select from (PATH... or --problem PATH)")
        return ((source, parse_time_range(baseline_time, "--baseline-time")),
                (source, parse_time_range(problem_time, "--problem-time")))
    problem = list(problem or []) + list(paths or [])
    if not baseline or not problem:
        raise ParameterError("give two periods: --baseline PATH and --problem PATH (or PATH...), or "
                             "--baseline-time START/END and --problem-time START/END over one input")
    return (list(baseline), None), (problem, None)


def _periods(sources, fmt, mapping):
    """The baseline's and the problem's spans (an input read once for both time ranges)."""
    (base, base_period), (prob, prob_period) = sources
    if base_period is not None:
        spans = read_input(base, fmt, mapping)
        return (select_period(spans, *base_period, "--baseline-time"),
                select_period(spans, *prob_period, "--problem-time"))
    return read_input(base, fmt, mapping), read_input(prob, fmt, mapping)


def compare(paths: Annotated[Optional[list[Path]], typer.Argument(
                metavar="PATH...", show_default=False, help="The problem period's input (as --problem).")] = None,
            baseline: Annotated[Optional[list[Path]], typer.Option("--baseline", "-b", metavar="PATH", show_default=False, help="The baseline (non-problem) "
                                "period's trace files, directories or store (repeatable).")] = None,
            problem: Annotated[Optional[list[Path]], typer.Option("--problem", "-p", metavar="PATH", show_default=False, help="The problem period's trace files, "
                               "directories or store (repeatable).")] = None,
            baseline_time: Annotated[Optional[str], typer.Option("--baseline-time", metavar="START/END", show_default=False, help="The baseline as a time range "
                                     "over one input (ISO 8601 START/END, UTC; or Unix seconds).")] = None,
            problem_time: Annotated[Optional[str], typer.Option("--problem-time", metavar="START/END", show_default=False, help="The problem period as a time "
                                    "range over the same input.")] = None,
            endpoint: EndpointOpt = None,
            all_endpoints: Annotated[bool, typer.Option("--all-endpoints", help="Compare every endpoint (the root "
                                     "and the APIs its service calls) and merge their service rankings.")] = False,
            alpha: Annotated[float, typer.Option("--alpha", metavar="FLOAT", help="Significance of the "
                             "Kolmogorov-Smirnov tests.")] = 0.05,
            min_requests: Annotated[int, typer.Option("--min-requests", metavar="INT", help="Requests a category "
                                    "needs in each period for a response-time test.")] = 10,
            seed: SeedOpt = 0, format: FormatOpt = None, mapping: MappingOpt = None, scheduler: SchedulerOpt = None,
            json: JsonOpt = False) -> None:
    """Request-flow comparison (Spectroscope, Sambasivan et al., NSDI 2011): what changed between a
    baseline period and a problem period, ranked by contribution to the slowdown, and which service
    it points to."""
    from ...model import build_trace_table
    from ...analyses.compare.analysis import RequestFlowComparison

    sources = _sources(paths, baseline, problem, baseline_time, problem_time)
    settings = {"alpha": alpha, "min_requests": min_requests, "random_state": seed}
    if all_endpoints:
        if endpoint is not None:
            raise ParameterError("--endpoint and --all-endpoints exclude each other")
        if scheduler not in (None, WHOLE):
            raise ParameterError("--all-endpoints runs in this process only: compare one endpoint (--endpoint) with "
                                 "--scheduler")
        large = scheduler is None and any(choose_scheduler(p, None, format, mapping) for p, _ in sources)
        notes = ["--all-endpoints runs in this process only: the store was read whole, not partition by partition "
                 "(memory of the whole store); compare one endpoint (--endpoint) to read it in the memory of one "
                 "partition"] if large else []
        base_spans, problem_spans = _periods(sources, format, mapping)
        _compare_all(problem_spans, base_spans, settings, json, notes)
        return
    # Each input built its own way (choose_scheduler): a large store partition by partition, trace
    # files read whole; a scheduler given is used for both.
    (base, base_period), (prob, prob_period) = sources
    chosen = [choose_scheduler(p, scheduler, format, mapping) for p in (prob, base)]
    with dask_scheduler(chosen[0] or chosen[1]) as dask:
        if dask is None:
            base_spans, problem_spans = _periods(sources, format, mapping)
            problem_table = build_trace_table(problem_spans, endpoint)
            baseline_table = build_trace_table(base_spans, problem_table.endpoint)
        else:
            problem_table = trace_table(prob, endpoint, format, mapping, dask if chosen[0] else None,
                                        period=prob_period, option="--problem-time")
            baseline_table = trace_table(base, problem_table.endpoint, format, mapping, dask if chosen[1] else None,
                                         period=base_period, option="--baseline-time")
        t0 = time.perf_counter()
        est = RequestFlowComparison(**settings).fit(problem_table, baseline_table)  # call views built on Dask
    seconds = time.perf_counter() - t0
    res = est.result_
    if json:
        emit_json({"seconds": seconds, **res.to_dict()})
        return
    out.print(f"Endpoint [bold]{escape(res.endpoint)}[/]: {res.n_baseline:,} baseline and {res.n_problem:,} problem "
              f"requests; {seconds:.2f} s.")
    show(res)


def _compare_all(problem_spans, baseline_spans, settings: dict, json: bool, notes: list[str]) -> None:
    """``compare --all-endpoints``; ``notes``: how the input was read, when the default would have
    read it otherwise (printed last, or a ``notes`` list in the JSON)."""
    from ...analyses.compare.endpoints import compare_endpoints

    t0 = time.perf_counter()
    found = compare_endpoints(problem_spans, baseline_spans, **settings)
    seconds = time.perf_counter() - t0
    if json:
        emit_json({"seconds": seconds, **found.to_dict(), **({"notes": notes} if notes else {})})
        return
    out.print(f"{len(found.results)} endpoints compared ({len(found.skipped)} skipped); {seconds:.2f} s.",
              markup=False)
    t = Table(title="Services, most suspicious first (scores summed over the endpoints)", title_justify="left")
    for c in ("#", "service", "score", "endpoints"):
        t.add_column(c, overflow="fold", justify="right" if c in ("#", "score") else "left")
    doc = found.to_dict()["services"]
    for k, s in enumerate(doc[:10]):
        t.add_row(str(k + 1), escape(s["service"]), f"{s['score']:.3f}", escape(", ".join(s["endpoints"][:3])))
    out.print(t)
    for endpoint, result in found.results.items():
        if result.services:
            top = ", ".join(f"{s.service} ({s.score:.2f})" for s in result.services[:3])
            out.print(f"  {endpoint}: {top}", markup=False)
    for note in notes:
        out.print(f"note: {note}", markup=False)


def evaluate_compare(
        quick: Annotated[bool, typer.Option("--quick", help="One seed per scenario, small periods.")] = False,
        data: NezhaDataOpt = None, seed: SeedOpt = 0, json: JsonOpt = False) -> None:
    """Request-flow comparison: simulated scenarios with a known change (is the injected service ranked
    first?) and recorded faults (TrainTicket, OnlineBoutique: top-1 / top-3 of the injected service
    per fault type, beside the anchor rule)."""
    from ...evaluation.protocols.compare import evaluate

    run_evaluation(evaluate, quick=quick, seed=seed, data=data, json=json)


def register(app: typer.Typer, evaluate_app: typer.Typer) -> None:
    """Add ``compare`` to ``app`` and ``compare`` to ``evaluate_app`` (the registry's ``command``)."""
    app.command("compare", cls=Command)(compare)
    evaluate_app.command("compare", cls=Command)(evaluate_compare)
