"""The ``tracesleuth patterns`` and ``tracesleuth evaluate patterns`` commands (registered in
:mod:`tracesleuth.analyses`); they only call the public API and render its result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ...units import format_duration_ns

from .._common import (Command, EndpointOpt, FormatOpt, JsonOpt, MappingOpt, PathsArg, SchedulerOpt, SeedOpt,
                       TimeOpt, choose_scheduler, emit_json, open_scheduler, out, parse_time_range, progress,
                       trace_table, write_frame)

__all__ = ["register", "show"]

SolverOpt = Annotated[str, typer.Option("--solver", metavar="SOLVER",
                                        help="ga, bnb, kmeans, hierarchical or meanshift.")]
GenerationsOpt = Annotated[int, typer.Option("--generations", metavar="INT", help="GA generations.")]
IntervalOpt = Annotated[Optional[str], typer.Option(
    "--interval", metavar="A:B", show_default=False,
    help="Degraded latency interval 'A:B' with units (e.g. 350ms:700ms); default: chosen automatically (above the "
         "main latency mode) and printed.")]


PaperOpt = Annotated[bool, typer.Option("--paper", help="The paper's method exactly: its interval rule, every pattern "
                                                         "and sub-interval admissible, no pruning, every operation "
                                                         "offered (the defaults add what is beyond the paper).")]
MinSupportOpt = Annotated[Optional[int], typer.Option("--min-support", metavar="INT", show_default=False,
                                                      help="Least requests of a sub-interval (default 15).")]


#: Notes of one kind printed at most (the rest counted; --json has them all).
MAX_NOTES_PER_KIND = 3


def show(result) -> None:
    """Print a :class:`DegradationPatternsResult` as a table (the command line's view of it)."""
    if not result.found:
        out.print(f"No degradation found, because {result.reason}", markup=False)
        return
    iv = result.interval
    out.print(f"Degraded interval ({result.interval_source}): {iv.describe()}, {result.n_positives:,} requests; "
              f"split points: {', '.join(f'{p / 1e6:.1f}' for p in result.split_points)} ms", markup=False)
    if result.interval_source == "automatic" and result.interval_reason:
        out.print(f"Chosen because {result.interval_reason}", markup=False)
    t = Table(title="Latency degradation patterns", title_justify="left", show_lines=True)
    for c in ("#", "latency", "pattern", "precision", "recall", "F-score", "support"):
        t.add_column(c, overflow="fold", justify="left" if c in ("latency", "pattern") else "right")

    def fmt(v):
        return "—" if v is None else f"{v:.3f}"

    by_index = {s.index: s for s in result.sub_intervals}
    for r in result.shown_by_range():
        for s in (by_index[i] for i in r.shown):
            t.add_row(str(s.index), escape(s.latency_words), escape(_words(s)), fmt(s.precision), fmt(s.recall),
                      fmt(s.f_score), f"{s.support:,}")
        if not r.explained:
            best = "" if r.best_f is None else f"; best F {r.best_f:.3f}"
            t.add_row("—", escape(f"[{format_duration_ns(r.low_ns)}, {format_duration_ns(r.high_ns)})"),
                      escape(f"no pattern explains it{best} (below min_f={result.min_f:g}); its requests mix causes"),
                      "—", "—", fmt(r.best_f), f"{r.n_requests:,} requests")
        if r.n_hidden:
            t.add_row("", "", escape(_hidden_words(r, result)), "", "", "", "")
    out.print(t)
    skipped = [f"{a} ({r.short()})" for a, r in result.skipped_attributes]
    if skipped:
        out.print(f"left out of the conditions: {', '.join(skipped[:8])}{' ...' if len(skipped) > 8 else ''}",
                  markup=False)
    said: dict[str, int] = {}
    for note in result.notes:  # at most MAX_NOTES_PER_KIND of a kind (nine split notes bury the answer)
        said[note.kind] = said.get(note.kind, 0) + 1
        if said[note.kind] <= MAX_NOTES_PER_KIND:
            out.print(f"note ({note.kind}): {note.describe()}", markup=False)
    for kind, n in said.items():
        if n > MAX_NOTES_PER_KIND:
            out.print(f"... and {n - MAX_NOTES_PER_KIND} more note(s) of kind {kind} (all in --json)", markup=False)


def _words(s) -> str:
    """A shown pattern's conditions with their effect; those that add no time marked as context."""
    if not s.effects:
        words = s.words
    else:
        words = "\n".join(e.describe() if e.adds_time else f"context, adds no time: {e.describe()}"
                          for e in s.effects)
    if s.context:
        words += "\nits requests also: " + "; ".join(e.describe() for e in s.context)
    return words


def _hidden_words(r, result) -> str:
    """How many patterns of a range are not shown, and why."""
    parts = []
    if r.below_floor:
        parts.append(f"{len(r.below_floor)} below F {result.min_f:g}")
    if r.beyond_most:
        parts.append(f"{len(r.beyond_most)} beyond the best {result.max_patterns_shown}")
    return f"{r.n_hidden} more pattern(s) not shown ({', '.join(parts)}; all in --json)"


def patterns(paths: PathsArg, endpoint: EndpointOpt = None, interval: IntervalOpt = None, solver: SolverOpt = "ga",
             seed: SeedOpt = 0, generations: GenerationsOpt = 400, paper: PaperOpt = False,
             min_support: MinSupportOpt = None, time_range: TimeOpt = None,
             output: Annotated[Optional[Path], typer.Option("-o", "--output", metavar="FILE", show_default=False,
                               help="Also write request -> cluster labels (.parquet or .csv).")] = None,
             format: FormatOpt = None, mapping: MappingOpt = None, scheduler: SchedulerOpt = None,
             sample: Annotated[Optional[int], typer.Option(
                 "--sample", metavar="INT", show_default=False,
                 help="With a table built by partitions (--scheduler, or by default from a store of more than one "
                      "partition): search a uniform sample of this many requests, then score the patterns and "
                      "label every request by partitions (exact scores; the sample's error bound in the notes). "
                      "Default: the whole table.")] = None,
             json: JsonOpt = False) -> None:
    """Latency degradation patterns (Cortellessa & Traini, ICPE 2020): which exclusive-time ranges and
    attributes explain each degraded latency sub-interval, with precision, recall and F-score."""
    import polars as pl

    from ...scale.analyses import fit_patterns
    from ...analyses.patterns.analysis import PAPER_SETTINGS
    from ...evaluation.protocols.patterns import ESTIMATORS, estimator

    if solver not in ESTIMATORS:
        from ...errors import ParameterError

        raise ParameterError(f"The '--solver' option must be one of {', '.join(ESTIMATORS)}. Got {solver!r} instead.")
    period = parse_time_range(time_range, "--time") if time_range else None
    dask = open_scheduler(choose_scheduler(paths, scheduler, format, mapping))
    tt = trace_table(paths, endpoint, format, mapping, dask, period=period, collect=False)
    t0 = time.perf_counter()
    settings = {**(PAPER_SETTINGS if paper else {}), **({} if min_support is None else {"min_support": min_support}),
                "generations": generations}
    est = estimator(solver, interval=interval, random_state=seed)
    est.set_params(**{k: v for k, v in settings.items() if k in est.get_params()})
    labels, requests, res = fit_patterns(est, tt, sample=sample, random_state=seed)
    seconds = time.perf_counter() - t0
    if output is not None:
        write_frame(requests.select("trace_id", "span_id", "latency_ns").with_columns(
            pl.Series("cluster", labels)), output)
    if json:
        emit_json({"endpoint": tt.endpoint, "requests": tt.n_requests, "seconds": seconds, **res.to_dict()})
        return
    out.print(f"Endpoint [bold]{escape(tt.endpoint)}[/]: {tt.n_requests:,} requests; solver {solver}, seed {seed}, "
              f"{seconds:.2f} s.")
    show(res)
    if output is not None:
        out.print(f"Wrote {output}", markup=False)


def evaluate_patterns(
        sessions: Annotated[int, typer.Option("--sessions", metavar="INT", help="Simulated load-test sessions.")] = 30,
        noised: Annotated[bool, typer.Option("--noised", help="Add the two noise types of Section 4.3.")] = False,
        requests: Annotated[int, typer.Option("--requests", metavar="INT",
                                              help="Homepage requests per session.")] = 1000,
        solvers: Annotated[str, typer.Option("--solvers", metavar="SOLVER,...", help="Comma-separated solvers.")] =
        "ga,bnb,kmeans,hierarchical,meanshift",
        interval: Annotated[str, typer.Option("--interval", metavar="affected|auto|both", help="'affected' (the paper: "
                                              "from Lmin to Lmax of the affected requests), 'auto' (the tool's own "
                                              "rule) or both.")] = "both",
        simulator: Annotated[str, typer.Option("--simulator", metavar="eshopper|bookshop|both", help="The paper's "
                                               "E-Shopper sessions, the harder bookshop sessions, or both.")] = "both",
        paper: PaperOpt = False,
        k_select: Annotated[str, typer.Option("--k-select", metavar="truth|silhouette",
                                              help="How K-means/hierarchical pick k: 'truth' (the paper: best "
                                              "against ground truth) or 'silhouette'.")] = "truth",
        seed: Annotated[int, typer.Option("--seed", metavar="INT", help="Random seed.")] = 0,
        sessions_table: Annotated[bool, typer.Option("--per-session", help="Also print Table 2 (every session).")] = False,
        json: JsonOpt = False) -> None:
    """Latency degradation patterns, Cortellessa & Traini Section 4: simulated sessions with injected
    degradations A1/A2 (the paper's E-Shopper, or the harder bookshop); F-score, precision, recall and
    time per solver (Tables 2 and 3)."""
    from ...analyses.patterns.analysis import PAPER_SETTINGS
    from ...evaluation.protocols.patterns import SIMULATORS, evaluate_patterns as run_eval, render

    from ...errors import ParameterError

    names = tuple(x.strip() for x in solvers.split(",") if x.strip())
    for option, value, allowed in (("--simulator", simulator, SIMULATORS), ("--interval", interval, ("affected", "auto"))):
        if value not in (*allowed, "both"):
            raise ParameterError(f"The {option!r} option must be one of {', '.join(allowed)} or both. Got {value!r} instead.")
    sims = SIMULATORS if simulator == "both" else (simulator,)
    intervals = ("affected", "auto") if interval == "both" else (interval,)
    params = dict(PAPER_SETTINGS) if paper else None
    evaluations = []
    with progress(f"evaluating {sessions} sessions x {len(sims) * len(intervals)}") as bar:
        bar.add_task("eval", spans=0)
        for sim in sims:
            for iv in intervals:
                evaluations.append(run_eval(sessions=sessions, noised=noised, solvers=names, random_state=seed,
                                            n_requests=requests, interval=iv, k_select=k_select, simulator=sim,
                                            estimator_params=params))
    if json:
        emit_json(evaluations[0].to_dict() if len(evaluations) == 1 else [ev.to_dict() for ev in evaluations])
        return
    out.print(render(*evaluations, table="summary") + "\n" + render(*evaluations, table="time"), markup=False)
    if sessions_table:
        out.print(render(*evaluations, table="sessions"), markup=False)


def register(app: typer.Typer, evaluate_app: typer.Typer) -> None:
    """Add ``patterns`` to ``app`` and ``patterns`` to ``evaluate_app`` (the registry's ``command``)."""
    app.command("patterns", cls=Command)(patterns)
    evaluate_app.command("patterns", cls=Command)(evaluate_patterns)
