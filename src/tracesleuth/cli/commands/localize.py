"""The ``tracesleuth localize`` and ``tracesleuth evaluate localize`` commands (registered in
:mod:`tracesleuth.analyses`); they only call the public API and render its result."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from .._common import (Command, EndpointsOpt, FormatOpt, JsonOpt, MappingOpt, NezhaDataOpt, PathsArg, SchedulerOpt,
                       SeedOpt, TimeOpt, choose_scheduler, dask_scheduler, emit_json, out, root_tables_of,
                       run_evaluation)

__all__ = ["register", "show"]

#: Rows of each table printed.
MAX_ROWS = 10


def _table(title: str, columns: tuple[str, ...], right: tuple[str, ...]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold", justify="right" if c in right else "left")
    return t


def show(result) -> None:
    """Print a :class:`LocalizationResult` (the command line's view of it)."""
    from ...units import format_duration_ns as ns

    out.print(result.describe(), markup=False)
    if result.services:
        t = _table("Services, most suspicious first", ("#", "service", "score", "evidence"), ("#", "score"))
        for k, s in enumerate(result.services[:MAX_ROWS]):
            t.add_row(str(k + 1), escape(s.service), f"{s.score:g}", escape("; ".join(s.evidence[:2])))
        out.print(t)
    found = result.anomalous_methods
    if found:
        t = _table("Anomalous methods (suspicious score = clusters where anomalous)",
                   ("#", "method", "score", "effect", "p", "normal", "anomalous"),
                   ("#", "score", "effect", "p", "normal", "anomalous"))
        for k, m in enumerate(found[:MAX_ROWS]):
            t.add_row(str(k + 1), escape(m.operation_key), f"{m.score}/{m.tested}", f"{m.effect:.2f}",
                      f"{m.p_value:.1e}", ns(m.normal_median_ns), ns(m.anomalous_median_ns))
        out.print(t)
    if result.instances:
        t = _table("Instances of the top methods (Jensen-Shannon dissimilarity ratio)",
                   ("method", "instance", "ratio", "stands out", "calls", "median"), ("ratio", "calls", "median"))
        for i in result.instances[: MAX_ROWS * 2]:
            t.add_row(escape(i.operation_key), escape(i.instance), f"{i.dissimilarity_ratio:.3f}",
                      "yes" if i.stands_out else "", f"{i.n_calls:,}", ns(i.median_ns))
        out.print(t)


def localize(paths: PathsArg,
             endpoint: EndpointsOpt = None,
             time_range: TimeOpt = None,
             alpha: Annotated[float, typer.Option("--major-share", metavar="FLOAT", help="Share of requests the "
                              "major clusters hold (the paper's alpha, Algorithm 1).")] = 0.75,
             variance: Annotated[float, typer.Option("--variance", metavar="FLOAT", help="Share of latency "
                                 "variance the principal components keep.")] = 0.95,
             spe_level: Annotated[float, typer.Option("--spe-level", metavar="FLOAT", help="Significance of the "
                                  "Q-statistic threshold on the SPE.")] = 0.05,
             test_level: Annotated[float, typer.Option("--test-level", metavar="FLOAT", help="Significance of the "
                                   "Mann-Whitney U tests.")] = 0.05,
             no_adjust: Annotated[bool, typer.Option("--no-adjust", help="Do not merge minor clusters into major "
                                  "ones.")] = False,
             latency: Annotated[str, typer.Option("--latency", metavar="exclusive|duration", help="A method's "
                                "latency: its self time or its span's duration.")] = "exclusive",
             top_k: Annotated[int, typer.Option("--top-k", metavar="INT", help="Methods whose instances are "
                              "compared.")] = 5,
             paper: Annotated[bool, typer.Option("--paper", help="The paper's method exactly: classical PCA on raw "
                              "latencies, SPE alone, any significant difference, no changes within the window.")] = False,
             seed: SeedOpt = 0, format: FormatOpt = None, mapping: MappingOpt = None, scheduler: SchedulerOpt = None,
             json: JsonOpt = False) -> None:
    """Root-cause localization (Mi et al., Sci China Inf Sci 2012) from one period's traces, no
    baseline: the anomalous methods (PCA split of each call sequence's requests, Mann-Whitney tests),
    the services they point to, the instances where they misbehave (Jensen-Shannon), and since when."""
    from ...analyses._contract import check_settings
    from ...analyses.localize.analysis import RootCauseLocalization
    from ...evaluation.protocols.localize import PAPER_SETTINGS

    settings = {"alpha": alpha, "variance": variance, "spe_level": spe_level, "test_level": test_level,
                "adjust_clusters": not no_adjust, "latency": latency, "top_k": top_k, "random_state": seed,
                **(PAPER_SETTINGS if paper else {})}
    est = RootCauseLocalization(**settings)
    check_settings(est)  # a wrong setting fails before the tables are built
    with dask_scheduler(choose_scheduler(paths, scheduler, format, mapping)) as dask:
        t0 = time.perf_counter()
        tables, skipped = root_tables_of(paths, endpoint, format, mapping, time_range, dask,
                                         columns=RootCauseLocalization.table_columns)
        if dask is None:
            est.fit(tables)
        else:
            from ...scale.analyses import on_workers

            with on_workers(dask):
                est.fit(tables)
    seconds = time.perf_counter() - t0
    res = est.result_
    if json:
        emit_json({"seconds": seconds, "skipped_endpoints": skipped, **res.to_dict()})
        return
    show(res)
    for name, why in skipped.items():
        out.print(f"endpoint {name} skipped: {why}", markup=False)
    out.print(f"{seconds:.2f} s.", markup=False)


def evaluate_localize(
        quick: Annotated[bool, typer.Option("--quick", help="One seed per scenario, small runs, one fault per "
                                            "type.")] = False,
        data: NezhaDataOpt = None, seed: SeedOpt = 0, json: JsonOpt = False) -> None:
    """Root-cause localization: the paper's four simulated scenarios (false-negative and
    false-positive rates with and without cluster adjustment, as its Table 2) and the recorded faults
    (top-1 / top-3 of the injected service per fault type, from each fault's windows alone)."""
    from ...evaluation.protocols.localize import evaluate

    run_evaluation(evaluate, quick=quick, seed=seed, data=data, json=json)


def register(app: typer.Typer, evaluate_app: typer.Typer) -> None:
    """Add ``localize`` to ``app`` and to ``evaluate_app`` (the registry's ``command``)."""
    app.command("localize", cls=Command)(localize)
    evaluate_app.command("localize", cls=Command)(evaluate_localize)
