"""``tracesleuth diagnose STORE`` and ``tracesleuth evaluate diagnose``; they only call the public API
and render its result."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from .._common import (Command, JsonOpt, NezhaDataOpt, emit_json, out, parse_instant, parse_time_range,
                            run_evaluation)
from ...errors import ParameterError

__all__ = ["register", "read_store"]


#: How much of a store's history before the moment ``diagnose`` reads, seconds: the onset search
#: looks back 15 minutes and the baseline gathers clean traffic before it, skipping earlier
#: incidents; six hours hold many of them, and the memory stays bounded on a store of weeks.
HISTORY_S = 6 * 3600
#: How much after the moment (or the problem period's end) it reads, seconds: the problem period
#: runs up to 5 minutes from the onset; a minute more keeps the traces that end later.
AFTER_S = 6 * 60


def read_store(path: Path, *, around_ns: tuple | None = None):
    """The spans and log records (None when there are none) of a span store.

    Parameters
    ----------
    path : Path
    around_ns : (int, int), optional
        Read only the spans and records from ``HISTORY_S`` before the first to ``AFTER_S`` after
        the second (Unix epoch ns); default: the whole store.

    Returns
    -------
    (polars.DataFrame or pyarrow.Table, pyarrow.Table or None)

    Raises
    ------
    ParameterError
        When ``path`` is not a span store (it says how to make one).
    """
    import polars as pl

    from ...io.store import SpanStore, is_store

    if not is_store(path):
        raise ParameterError(f"{path}: not a span store; make one with: tracesleuth ingest TRACES [LOGS] -o STORE")
    store = SpanStore(path, create=False)
    if around_ns is None:
        return store.read_spans(dictionary=False), (store.read_logs() if store.log_files() else None)
    low, high = around_ns[0] - HISTORY_S * 10**9, around_ns[1] + AFTER_S * 10**9
    spans = store.scan().filter(pl.col("start_ns").is_between(low, high, closed="left")).collect()
    return spans, (store.read_logs(start_ns=low, end_ns=high) if store.log_files() else None)


def _store_range(store: Path) -> tuple[int, int]:
    """The first and last span start of a store (Unix epoch ns), read from one column."""
    import polars as pl

    from ...io.store import SpanStore, is_store

    if not is_store(store):
        raise ParameterError(f"{store}: not a span store; make one with: tracesleuth ingest TRACES [LOGS] -o STORE")
    first, last = SpanStore(store, create=False).scan().select(
        pl.col("start_ns").min().alias("first"), pl.col("start_ns").max().alias("last")).collect().row(0)
    if first is None:
        raise ParameterError(f"{store}: the store holds no span")
    return int(first), int(last)


def diagnose(store: Annotated[Path, typer.Argument(metavar="STORE", help="A span store (tracesleuth ingest).")],
             at: Annotated[Optional[str], typer.Option("--at", metavar="TIME", show_default=False,
                           help="A moment inside the incident (ISO 8601, UTC unless an offset is given, or Unix "
                                "seconds); the onset is searched before it. Default: the store's last request.")] = None,
             time: Annotated[Optional[str], typer.Option("--time", metavar="START/END", show_default=False,
                             help="The problem period instead of an onset search.")] = None,
             baseline_time: Annotated[Optional[str], typer.Option("--baseline-time", metavar="START/END",
                                      show_default=False, help="The baseline instead of a search for a clean "
                                      "period before the onset.")] = None,
             min_confidence: Annotated[float, typer.Option("--min-confidence", metavar="P",
                                       help="Name the first suspect when its confidence reaches P.")] = 0.5,
             model: Annotated[Optional[Path], typer.Option("--model", metavar="FILE", show_default=False,
                              help="A ranking model (tracesleuth evaluate diagnose --fit FILE).")] = None,
             json: JsonOpt = False) -> None:
    """Which service, operation and instance, since when, and how sure: one answer from a store.

    Example: tracesleuth diagnose store/ --at 2023-01-29T08:44:30
    """
    from ...analyses.diagnose.analysis import Diagnosis

    if at is not None and time is not None:
        raise ParameterError("give --at (a moment inside the incident) or --time (the problem period), not both")
    settings = dict(at=None if at is None else parse_instant(at, "--at"),
                    time=None if time is None else parse_time_range(time, "--time"),
                    baseline_time=None if baseline_time is None else parse_time_range(baseline_time, "--baseline-time"),
                    min_confidence=min_confidence, model=None if model is None else str(model))
    first, last = _store_range(store)
    around = settings["time"] or (settings["at"] if settings["at"] is not None else last,) * 2
    if around[1] < first or around[0] > last:
        from ...analyses.diagnose.telemetry import utc_text

        raise ParameterError(f"{utc_text(around[0])} is outside the store, which holds spans from {utc_text(first)} "
                             f"to {utc_text(last)}.")
    spans, logs = read_store(store, around_ns=around)
    result = Diagnosis(**settings).fit(spans, logs).result_
    if json:
        emit_json(result.to_dict())
        return
    out.print(f"[bold]Diagnosis[/] of {escape(str(store))}: {result.verdict}")
    out.print(escape(result.describe()))
    if len(result.services) > 1:
        out.print("Other suspects: " + ", ".join(f"{escape(s.service)} ({s.confidence:.2f})"
                                                 for s in result.services[1:5]))


def evaluate_diagnose(data: NezhaDataOpt = None,
                      quick: Annotated[bool, typer.Option("--quick", help="OnlineBoutique only.")] = False,
                      model: Annotated[Optional[Path], typer.Option("--model", metavar="FILE", show_default=False,
                                       help="A ranking model instead of the shipped one.")] = None,
                      fit: Annotated[Optional[Path], typer.Option("--fit", metavar="FILE", show_default=False,
                                     help="Fit the ranking model on these cases and seeded incidents, write it "
                                          "to FILE, and give the held-out calibration.")] = None,
                      json: JsonOpt = False) -> None:
    """The diagnosis on every recorded fault of ../shared/data, told only the inject time + 90 s.

    Example: tracesleuth evaluate diagnose --quick --json
    """
    from ...evaluation.protocols.diagnose import evaluate

    def run(*, quick, random_state, data_dir):
        return evaluate(quick=quick, random_state=random_state, data_dir=data_dir,
                        model=None if model is None else str(model), fit=fit)
    run_evaluation(run, quick=quick, seed=0, data=data, json=json)


def register(app: typer.Typer, evaluate_app: typer.Typer) -> None:
    """Add ``diagnose`` to ``app`` and to ``evaluate_app``."""
    app.command("diagnose", cls=Command)(diagnose)
    evaluate_app.command("diagnose", cls=Command)(evaluate_diagnose)
