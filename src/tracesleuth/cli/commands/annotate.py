"""The ``tracesleuth annotate derive|check|predict`` and ``tracesleuth evaluate annotate`` commands
(registered in :mod:`tracesleuth.analyses`); they only call the public API and render its result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from .._common import (Command, EndpointsOpt, FormatOpt, Group, JsonOpt, MappingOpt, PathsArg, SchedulerOpt, SeedOpt,
                       TimeOpt, choose_scheduler, emit_json, open_scheduler, out, progress, root_tables_of)

__all__ = ["register"]

#: Rows of each table printed.
MAX_ROWS = 25

WindowOpt = Annotated[int, typer.Option("--window", metavar="INT", help="Calls per assertion (and per window of "
                                        "the derivation's calibration).")]
PeriodOpt = Annotated[str, typer.Option("--period", metavar="DURATION", help="Windows never straddle a period "
                                        "(aligned on the clock): derivation learns how windows vary from one to "
                                        "the next; a check shows per period when an annotation began to fail. "
                                        "'none': one period.")]
AnnotationsArg = Annotated[Path, typer.Argument(help="An annotation file (YAML or JSON, as written by 'tracesleuth "
                                                     "annotate derive').", metavar="FILE", show_default=False)]


def _tables(paths, endpoint, format, mapping, time_range, scheduler):
    """The root tables of the input (:func:`~tracesleuth.cli._common.root_tables_of`): read whole, or,
    with ``--scheduler``, built from a span store's partitions; the calls' span attributes (the
    annotations' features) are then read partition by partition when the analysis measures the
    calls (:func:`~tracesleuth.analyses.annotate.measurements.span_measures`)."""
    return root_tables_of(paths, endpoint, format, mapping, time_range,
                          open_scheduler(choose_scheduler(paths, scheduler, format, mapping)))


def _period_ns(text: str) -> int | None:
    from ...errors import ParameterError
    from ...units import parse_duration

    if text.strip().lower() == "none":
        return None
    try:
        value = parse_duration(text)
    except ParameterError as exc:
        raise ParameterError(f"--period {text!r}: {exc}") from None
    if not value or value <= 0:
        raise ParameterError(f"--period {text!r}: give a positive duration (e.g. 60s, 300s) or 'none'")
    return int(value)


def derive(paths: PathsArg,
           output: Annotated[Path, typer.Option("-o", "--output", metavar="FILE", help="The annotation file to "
                             "write (YAML; JSON when it ends in .json).")] = Path("annotations.yaml"),
           metric: Annotated[Optional[list[str]], typer.Option("--metric", metavar="time|self_time|memory",
                             show_default=False, help="A target metric (repeatable); default: time and memory "
                             "(memory where recorded).")] = None,
           feature: Annotated[Optional[list[str]], typer.Option("--feature", metavar="PATTERN", show_default=False,
                              help="Only these features (names or patterns like 'size(*)'; repeatable); default: "
                              "every numeric span attribute.")] = None,
           min_correlation: Annotated[float, typer.Option("--min-correlation", metavar="FLOAT", help="Least absolute "
                                      "Pearson correlation of a feature.")] = 0.5,
           max_relative_error: Annotated[float, typer.Option("--max-relative-error", metavar="FLOAT", help="Greatest "
                                         "RMS error of a polynomial over the metric's mean.")] = 0.5,
           elbow_ratio: Annotated[float, typer.Option("--elbow-ratio", metavar="FLOAT", help="k-means adds clusters "
                                  "while SSE(k-1)/SSE(k) is at least this.")] = 4.0,
           min_samples: Annotated[int, typer.Option("--min-samples", metavar="INT", help="Fewer calls: no "
                                  "annotation.")] = 10,
           min_cluster_calls: Annotated[int, typer.Option("--min-cluster-calls", metavar="INT", help="Fewest calls "
                                        "per cluster of a mixture (chosen by BIC).")] = 20,
           paper: Annotated[bool, typer.Option("--paper", help="The paper's method exactly: no outlier fences, "
                            "k-means clusters by the first elbow.")] = False,
           window: WindowOpt = 30, period: PeriodOpt = "60s", time_range: TimeOpt = None,
           endpoint: EndpointsOpt = None, seed: SeedOpt = 0, format: FormatOpt = None, mapping: MappingOpt = None,
           scheduler: SchedulerOpt = None, json: JsonOpt = False) -> None:
    """Derive performance annotations (Rogora et al., HotCloud 2017) from traces: per operation and
    metric, a polynomial of the most correlated input feature (correlated), a mixture of clusters
    (clustered, chosen by BIC) or a constant, with how much its windows of calls vary from period to
    period (derive from several minutes: a store's --time range), in words and in a file that
    'annotate check' and 'annotate predict' read."""
    from ...analyses._contract import check_settings
    from ...analyses.annotate.analysis import PerformanceAnnotations
    from ...analyses.annotate.fileformat import save_annotations

    est = PerformanceAnnotations(metrics=tuple(metric or ("time", "memory")), features=feature,
                                 min_correlation=min_correlation, max_relative_error=max_relative_error,
                                 elbow_ratio=elbow_ratio, min_samples=min_samples, min_cluster_calls=min_cluster_calls,
                                 outlier_fence=None if paper else 3.0, elbow_lookahead=0 if paper else 1,
                                 clustering="elbow" if paper else "bic", window=window, period_ns=_period_ns(period),
                                 random_state=seed)
    check_settings(est)
    tables, skipped = _tables(paths, endpoint, format, mapping, time_range, scheduler)
    t0 = time.perf_counter()
    est.fit(tables)
    seconds = time.perf_counter() - t0
    from dataclasses import replace

    annotations = replace(est.annotations_, source=", ".join(str(p) for p in paths))
    save_annotations(annotations, output)
    res = est.result_
    if json:
        emit_json({"output": str(output), "seconds": seconds, "skipped_endpoints": skipped, **res.to_dict()})
        return
    out.print(res.describe(), markup=False)
    for name, why in skipped.items():
        out.print(f"endpoint {name} skipped: {why}", markup=False)
    out.print(f"Annotations: {output} ({seconds:.2f} s).", markup=False)


def check(annotations: AnnotationsArg, paths: PathsArg,
          window: WindowOpt = 30,
          alpha: Annotated[float, typer.Option("--alpha", metavar="FLOAT", help="False discovery rate of the "
                           "check's assertions (Benjamini-Hochberg over all of them: on healthy traffic, the chance "
                           "that any fails).")] = 0.01,
          two_sided: Annotated[bool, typer.Option("--two-sided", help="Fail windows faster than annotated too "
                               "(default: slower fails, faster is reported).")] = False,
          min_calls: Annotated[int, typer.Option("--min-calls", metavar="INT", help="Fewer calls in a window: the "
                               "assertion is not tested (counted).")] = 5,
          period: PeriodOpt = "60s", time_range: TimeOpt = None,
          fail_under: Annotated[Optional[float], typer.Option("--fail-under", metavar="RATE", show_default=False,
                                help="Exit with code 1 when the share of assertions passed is below RATE (a "
                                "performance test).")] = None,
          endpoint: EndpointsOpt = None, format: FormatOpt = None, mapping: MappingOpt = None,
          scheduler: SchedulerOpt = None, json: JsonOpt = False) -> None:
    """Check annotations against new traces, as assertions: per annotation and window of calls, a
    one-sided test of its mean normal score against the variation the annotation was derived with,
    all assertions adjusted together (Benjamini-Hochberg); the share passed, which annotations fail
    and since when, and the services they point to (a client span's failure names the service it calls)."""
    from ...analyses._contract import check_settings
    from ...analyses.annotate.analysis import PerformanceAnnotations
    from ...analyses.annotate.fileformat import load_annotations
    from ...analyses.annotate.model import format_instant, format_metric

    est = PerformanceAnnotations(window=window, alpha=alpha, alternative="two-sided" if two_sided else "greater",
                                 min_calls=min_calls, period_ns=_period_ns(period))
    check_settings(est)
    given = load_annotations(annotations)  # a bad file fails before the traces are read
    tables, skipped = _tables(paths, endpoint, format, mapping, time_range, scheduler)
    res = est.set_params(annotations=given).fit(tables).result_
    failed = fail_under is not None and (res.pass_rate is None or res.pass_rate < fail_under)
    if json:
        emit_json({"annotations_file": str(annotations), "skipped_endpoints": skipped, **res.to_dict()})
    else:
        out.print(res.describe(), markup=False)
        t = Table(title="Annotations as assertions, failing first", title_justify="left")
        for c in ("operation", "calls", "metric", "holds", "passed", "observed", "expected", "distance"):
            t.add_column(c, overflow="fold", justify="left" if c in ("operation", "calls", "metric") else "right")
        for c in res.checks[:MAX_ROWS]:
            t.add_row(escape(c.operation), escape(c.calls_service or ""), c.metric,
                      "—" if c.holds is None else ("yes" if c.holds else "NO"),
                      f"{c.n_passed}/{c.n_windows}" if c.checked else escape(str(c.note or "")),
                      format_metric(c.observed_median, c.metric), format_metric(c.expected_median, c.metric),
                      "—" if c.distance is None else f"{c.distance:.2f}")
        out.print(t)
        if res.services:
            t = Table(title="Services the failing annotations point to, most suspicious first", title_justify="left")
            for c in ("service", "score", "evidence"):
                t.add_column(c, overflow="fold", justify="right" if c == "score" else "left")
            for s in res.services[:MAX_ROWS]:
                t.add_row(escape(s.service), f"{s.score:.2f}", escape("; ".join(s.evidence[:3])))
            out.print(t)
        drifting = [c for c in res.checks if c.checked and not c.holds and len(c.periods) > 1]
        if drifting:
            t = Table(title="Drift: failed/tested assertions per period of the failing annotations",
                      title_justify="left")
            t.add_column("operation", overflow="fold")
            t.add_column("metric")
            t.add_column("failing since")
            t.add_column("per period (oldest first)", overflow="fold")
            for c in drifting[:MAX_ROWS]:
                t.add_row(escape(c.operation), c.metric, format_instant(c.since_ns),
                          " ".join(f"{f}/{n}" for _, n, f in c.periods))
            out.print(t)
    if failed:
        raise typer.Exit(1)


def predict(annotations: AnnotationsArg, paths: PathsArg,
            change: Annotated[Optional[list[str]], typer.Option("--change", "-c", metavar="OP+5ms|OP*0.5|OP<=50ms",
                              show_default=False, help="A change of the time of the operations matching OP (a key "
                              "or a pattern like 'sqlite:*'; repeatable).")] = None,
            replace: Annotated[Optional[list[str]], typer.Option("--replace", metavar="PATTERN=FILE",
                               show_default=False, help="The time annotations of the operations matching PATTERN "
                               "replaced by those of FILE (e.g. derived on a new version; repeatable).")] = None,
            target: Annotated[Optional[str], typer.Option("--target", "-t", metavar="SERVICE:OPERATION",
                              show_default=False, help="The operation whose time is predicted; default: the most "
                              "frequent root operation.")] = None,
            under: Annotated[Optional[str], typer.Option("--under", metavar="DURATION", show_default=False,
                             help="Also predict the share of the target's calls under this duration (e.g. "
                             "100ms).")] = None,
            method: Annotated[str, typer.Option("--method", metavar="sample|residual", help="How a replaced "
                              "annotation gives new times: drawn from it, or each call keeping its "
                              "quantile.")] = "sample",
            draws: Annotated[int, typer.Option("--draws", metavar="INT", help="Monte Carlo draws at least.")] = 2000,
            endpoint: EndpointsOpt = None, time_range: TimeOpt = None, seed: SeedOpt = 0, format: FormatOpt = None,
            mapping: MappingOpt = None, scheduler: SchedulerOpt = None, json: JsonOpt = False) -> None:
    """What if some operations were slower, faster or capped? The target's time predicted by
    replaying the recorded requests (the call graph learned from the traces) with the changed
    operations' times (Monte Carlo draws from replaced annotations), against its measured time."""
    from ...errors import ParameterError
    from ...units import parse_duration
    from ...analyses.annotate.fileformat import load_annotations
    from ...analyses.annotate.measurements import measurements_from_tables
    from ...analyses.annotate.predict import parse_change
    from ...analyses.annotate.predict import predict as run_predict
    from ...analyses.annotate.predict import replacements

    changes = [parse_change(c) for c in change or ()]
    given = load_annotations(annotations)
    for item in replace or ():
        pattern, sep, file = item.rpartition("=")
        if not sep or not pattern or not file:
            raise ParameterError(f"--replace {item!r}: write PATTERN=FILE, e.g. 'sqlite:*=new.yaml'")
        found = replacements(load_annotations(file), pattern)
        if not found:
            raise ParameterError(f"--replace {item!r}: {file} has no time annotation of an operation matching "
                                 f"{pattern!r}")
        changes += found
    if not changes:
        raise ParameterError("Give a change: --change 'OPERATION+5ms' (or *0.5, <=50ms), or --replace PATTERN=FILE.")
    limit = parse_duration(under) if under is not None else None
    tables, _ = _tables(paths, endpoint, format, mapping, time_range, scheduler)
    with progress("replaying") as bar:
        bar.add_task("replay", spans=0)
        res = run_predict(given, measurements_from_tables(tables), changes, target=target, method=method,
                          n_draws=draws, threshold_ns=limit, random_state=seed)
    if json:
        emit_json(res.to_dict())
        return
    out.print(res.describe(), markup=False)


def evaluate_annotate(
        quick: Annotated[bool, typer.Option("--quick", help="Fewer requests and delays (0, 5, 10 ms).")] = False,
        output: Annotated[Optional[Path], typer.Option("-o", "--output", metavar="FILE", show_default=False,
                          help="Also write an HTML report with the pass-share CDF per delay.")] = None,
        workdir: Annotated[Optional[Path], typer.Option("--workdir", metavar="DIR", show_default=False,
                           help="Where the runs go (database, files, spans); default: a temporary "
                           "directory.")] = None,
        data: Annotated[Optional[Path], typer.Option("--data", metavar="DIR", show_default=False,
                        help="The Nezha data for the recorded-traces part; default: ../shared/data/nezha when "
                        "present.")] = None,
        seed: SeedOpt = 0, json: JsonOpt = False) -> None:
    """Performance annotations, the paper's Section 5 on a file-hosting workload over a real SQLite
    database: annotations derived on a clean run, checked on runs with 0 to 10 ms of delay before
    every database statement (pass rate and its CDF over annotations per delay); the what-if
    prediction of the request latency against the delayed runs; on recorded TrainTicket and
    OnlineBoutique traffic, annotations of six normal minutes checked on six others (false alarms) and
    on the minutes of latency faults (pass rate, the injected service's rank in 'services')."""
    from ...evaluation.protocols.annotate import evaluate, evaluation_report

    with progress("evaluating") as bar:
        bar.add_task("eval", spans=0)
        ev = evaluate(quick=quick, random_state=seed, data_dir=data, workdir=workdir)
    if output is not None:
        evaluation_report(ev).write(output)
    if json:
        emit_json({**ev.to_dict(), "report": None if output is None else str(output)})
        return
    out.print(ev.describe(), markup=False)
    if output is not None:
        out.print(f"Report: {output}", markup=False)


def register(app: typer.Typer, evaluate_app: typer.Typer) -> None:
    """Add ``annotate derive|check|predict`` to ``app`` and ``annotate`` to ``evaluate_app`` (the registry's
    ``command``)."""
    sub = typer.Typer(cls=Group, no_args_is_help=True, help="Performance annotations (Rogora et al., HotCloud "
                      "2017): derive per-operation performance models from traces, check new traces against "
                      "them, predict what-if changes. A span store is also read partition by partition (by default when it "
                      "holds more than one partition; --scheduler: serial, or Dask), with the same annotations, "
                      "checks and predictions.")
    sub.command("derive", cls=Command)(derive)
    sub.command("check", cls=Command)(check)
    sub.command("predict", cls=Command)(predict)
    app.add_typer(sub, name="annotate")
    evaluate_app.command("annotate", cls=Command)(evaluate_annotate)
