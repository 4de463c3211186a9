"""``tracesleuth diagnose STORE`` and ``tracesleuth evaluate diagnose``; they only call the public API
and render its result."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from .._common import (Command, JsonOpt, NezhaDataOpt, SchedulerOpt, choose_scheduler, dask_scheduler, emit_json, out,
                       parse_instant, parse_time_range, run_evaluation)
from ...errors import ParameterError

__all__ = ["register"]


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
             scheduler: SchedulerOpt = None, json: JsonOpt = False) -> None:
    """Which service, operation and instance, since when, and how sure: one answer from a store.
    With --scheduler, the spans read are split by trace id and turned into the diagnosis's
    per-span and per-request rows partition by partition (the same answer, the memory of one
    partition and of those rows, not of the spans)."""
    from ...analyses.diagnose.analysis import Diagnosis
    from ...analyses.diagnose.telemetry import moments_in_store, read_range, read_store

    if at is not None and time is not None:
        raise ParameterError("give --at (a moment inside the incident) or --time (the problem period), not both")
    settings = dict(at=None if at is None else parse_instant(at, "--at"),
                    time=None if time is None else parse_time_range(time, "--time"),
                    baseline_time=None if baseline_time is None else parse_time_range(baseline_time, "--baseline-time"),
                    min_confidence=min_confidence, model=None if model is None else str(model))
    around = moments_in_store(store, settings["time"] or (None if settings["at"] is None else (settings["at"],) * 2))
    scheduler = choose_scheduler([store], scheduler, period=read_range(around))
    if scheduler is None:
        result = Diagnosis(**settings).fit(*read_store(store, around_ns=around)).result_
    else:
        from ...scale.telemetry import partitioned_telemetry

        with dask_scheduler(scheduler) as chosen:
            telemetry = partitioned_telemetry(store, scheduler=chosen, around_ns=around)
        result = Diagnosis(**settings).fit(telemetry).result_
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
    """The diagnosis on every recorded fault of ../shared/data, told only the inject time + 90 s."""
    from ...evaluation.protocols.diagnose import evaluate

    def run(*, quick, random_state, data_dir):
        return evaluate(quick=quick, random_state=random_state, data_dir=data_dir,
                        model=None if model is None else str(model), fit=fit)
    run_evaluation(run, quick=quick, seed=0, data=data, json=json)


def register(app: typer.Typer, evaluate_app: typer.Typer) -> None:
    """Add ``diagnose`` to ``app`` and to ``evaluate_app``."""
    app.command("diagnose", cls=Command)(diagnose)
    evaluate_app.command("diagnose", cls=Command)(evaluate_diagnose)
