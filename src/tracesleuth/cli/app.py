"""Commands of the ``tracesleuth`` command line (typer). Each only calls the public API and renders."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.console import Console
from rich.table import Table

from ..errors import TraceSleuthError

app = typer.Typer(name="tracesleuth", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Why are requests slow? Latency analyses of distributed traces "
                       "(OpenTelemetry, Jaeger, Zipkin).")
out = Console(highlight=False, soft_wrap=False, width=200 if not sys.stdout.isatty() else None)
err = Console(stderr=True, highlight=False)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one machine-readable JSON document instead.")]
FormatOpt = Annotated[Optional[str], typer.Option("--format", help="Force an input format (otlp-json, otlp-proto, "
                                                  "jaeger-json, zipkin-json, csv, parquet); default: from content.")]
MappingOpt = Annotated[Optional[str], typer.Option("--mapping", help="CSV/Parquet column mapping preset "
                                                   "(canonical, nezha); default: the first that fits the header.")]
EndpointOpt = Annotated[Optional[str], typer.Option("--endpoint", "-e", help="Operation key 'service:operation' "
                                                    "(or a unique operation name) requests enter by; default: the "
                                                    "most frequent root operation.")]


def emit_json(doc) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY,
                                  default=str).decode() + "\n")


def _progress(label: str):
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn(label + " [bold]{task.fields[spans]:,}[/] spans"),
                    TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal)


def load(paths: list[Path], fmt: str | None, mapping: str | None):
    """Spans from files or a store, with a progress display on a terminal."""
    from ..io import RejectLog, SpanReadResult, iter_span_batches
    from ..errors import NoSpansError
    from ..store import is_store, load_spans
    import pyarrow as pa
    from .. import schema as S

    if len(paths) == 1 and is_store(paths[0]):
        return load_spans(paths)
    log, formats, batches = RejectLog(), {}, []
    with _progress("reading") as progress:
        task = progress.add_task("read", spans=0)
        for b in iter_span_batches([str(p) for p in paths], format=fmt, mapping=mapping, log=log, formats=formats):
            batches.append(b)
            progress.update(task, spans=sum(x.num_rows for x in batches))
    if not batches:
        problems = "; ".join(f"{r[0]} (record {r[1]}): {r[3]}" for r in log.rows[:10]) or "no input files"
        raise NoSpansError(f"no spans could be read: {problems}")
    return SpanReadResult(spans=pa.Table.from_batches(batches, schema=S.SPAN_SCHEMA), rejects=log.to_arrow(),
                          formats=formats, spans_rejected=log.spans_rejected)


def fit_patterns(paths, fmt, mapping, endpoint, interval, solver, seed, generations):
    """Load spans, build the endpoint's trace table and fit the pattern analysis.

    Returns ``(read result, TraceTable, fitted LatencyDegradationPatterns, fit seconds)``.
    """
    import time

    from ..model import build_trace_table
    from ..analyses.patterns import LatencyDegradationPatterns, parse_interval

    result = load(paths, fmt, mapping)
    tt = build_trace_table(result, endpoint)
    bounds = None
    if interval is not None:
        iv = parse_interval(interval, latency_ns=tt.latencies_ns())
        bounds = (iv.low_ns, iv.high_ns)
    t0 = time.perf_counter()
    est = LatencyDegradationPatterns(solver=solver, interval=bounds, random_state=seed,
                                     generations=generations).fit(tt)
    return result, tt, est, time.perf_counter() - t0


def _reject_rows(rejects, limit: int = 10) -> list[dict]:
    return rejects.slice(0, limit).to_pylist()


def _print_rejects(reasons: list[dict], examples: list[dict], total_spans: int) -> None:
    if not reasons:
        return
    t = Table(title=f"Rejected records and warnings ({total_spans:,} spans rejected)", title_justify="left")
    for c in ("reason", "records", "spans lost"):
        t.add_column(c, justify="right" if c != "reason" else "left")
    for r in reasons:
        t.add_row(r["reason"], f"{r['records']:,}", f"{r['spans']:,}")
    out.print(t)
    for e in examples:
        where = f"{e['source']}:{e['record']}" + (f" [{e['field']}]" if e.get("field") else "")
        out.print(f"  {where}: {e['reason']}", markup=False)


def _reasons(rejects) -> list[dict]:
    import polars as pl

    if rejects.num_rows == 0:
        return []
    df = pl.from_arrow(rejects)
    return (df.group_by("reason").agg(records=pl.len(), spans=pl.col("spans").sum())
            .sort(["spans", "records"], descending=True).to_dicts())


@app.command()
def ingest(paths: Annotated[list[Path], typer.Argument(help="Trace files, directories or glob patterns.")],
           output: Annotated[Path, typer.Option("-o", "--output", help="Span store directory (created).")],
           format: FormatOpt = None, mapping: MappingOpt = None, json: JsonOpt = False) -> None:
    """Read trace files into a Parquet span store, reporting what was read, rejected and why."""
    from ..store import SpanStore, ingest as do_ingest

    store = SpanStore(output)
    with _progress("ingesting") as progress:
        task = progress.add_task("ingest", spans=0)
        seen = [0]

        def tick(batch):
            seen[0] += batch.num_rows
            progress.update(task, spans=seen[0])

        summary = do_ingest([str(p) for p in paths], store, format=format, mapping=mapping, on_batch=tick)
    rejects = store.read_rejects()
    doc = summary.to_dict() | {"store": str(output), "spans_in": summary.spans_read + summary.spans_rejected,
                               "examples": _reject_rows(rejects)}
    if json:
        emit_json(doc)
        return
    out.print(f"Read [bold]{summary.spans_read + summary.spans_rejected:,}[/] spans from "
              f"{len(summary.formats)} file(s) in {summary.seconds:.2f} s: "
              f"[green]{summary.spans_read:,} stored[/], [red]{summary.spans_rejected:,} rejected[/] "
              f"({summary.rejected_records:,} records), {summary.warnings:,} warnings.")
    fmts: dict = {}
    for f in summary.formats.values():
        fmts[f] = fmts.get(f, 0) + 1
    out.print("Formats: " + ", ".join(f"{k} ({v} files)" for k, v in sorted(fmts.items())))
    out.print(f"Store: {output} ({len(summary.parts)} new part(s))")
    _print_rejects(summary.reasons, _reject_rows(rejects), summary.spans_rejected)


@app.command()
def info(paths: Annotated[list[Path], typer.Argument(help="Trace files, directories, glob patterns or a store.")],
         format: FormatOpt = None, mapping: MappingOpt = None, json: JsonOpt = False) -> None:
    """Traces, spans, services, operations, endpoints and their latency percentiles."""
    from ..model.summary import summarize

    result = load(paths, format, mapping)
    s = summarize(result)
    reasons = _reasons(result.rejects)
    if json:
        emit_json(s.to_dict() | {"spans_rejected": result.spans_rejected, "rejects": reasons,
                                 "files": len(result.formats)})
        return
    a = s.assembly
    out.print(f"[bold]{s.traces:,}[/] traces, [bold]{s.spans:,}[/] spans, {s.services} services, "
              f"{s.operations} operations, from {len(result.formats)} file(s); "
              f"{result.spans_rejected:,} spans rejected.")
    out.print(f"Assembly: {a.exact_duplicates:,} duplicate spans removed, {a.shared_spans_split:,} shared "
              f"client/server spans split, {a.orphan_spans:,} orphan spans, {a.traces_with_several_roots:,} "
              f"traces with several roots, {a.skew_corrected_spans:,} clock-skew corrections "
              f"(max {a.max_abs_skew_ns / 1e6:.3f} ms, {a.skew_shifted_spans:,} spans shifted).")
    for title, frame in (("Endpoints (root operations)", s.endpoints),
                         ("Operations behind the main endpoint (candidates for --endpoint)", s.entry_operations)):
        if frame.height == 0:
            continue
        t = Table(title=title, title_justify="left")
        for c in frame.columns:
            t.add_column(c, justify="left" if c == "endpoint" else "right", overflow="fold")
        for row in frame.iter_rows():
            t.add_row(*[f"{v:,}" if isinstance(v, int) else f"{v:.3f}" if isinstance(v, float) else str(v)
                        for v in row])
        out.print(t)
    _print_rejects(reasons, _reject_rows(result.rejects), result.spans_rejected)


@app.command()
def table(paths: Annotated[list[Path], typer.Argument(help="Trace files, directories, glob patterns or a store.")],
          output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write the table (.parquet or .csv).")] = None,
          endpoint: EndpointOpt = None, format: FormatOpt = None, mapping: MappingOpt = None,
          json: JsonOpt = False) -> None:
    """The per-request trace table of an endpoint: latency and exclusive time per operation."""
    from ..model import build_trace_table

    result = load(paths, format, mapping)
    tt = build_trace_table(result, endpoint)
    if output is not None:
        suffix = output.suffix.lower()
        if suffix == ".csv":
            tt.frame.write_csv(output)
        elif suffix in (".parquet", ".pq"):
            tt.frame.write_parquet(output)
        else:
            raise TraceSleuthError(f"--output {output}: the file name must end in .parquet or .csv")
    lat = tt.frame["latency_ns"] / 1e6
    doc = {"endpoint": tt.endpoint, "requests": tt.n_requests, "columns": tt.frame.width,
           "operations": list(tt.operations), "categorical_columns": list(tt.categorical_columns),
           "structures": tt.frame["signature"].n_unique(),
           "latency_ms": {"p50": lat.quantile(0.5), "p95": lat.quantile(0.95), "max": lat.max()},
           "output": str(output) if output else None, "assembly": tt.assembly.to_dict()}
    if json:
        emit_json(doc)
        return
    out.print(f"Endpoint [bold]{tt.endpoint}[/]: {tt.n_requests:,} requests, {len(tt.operations)} operations, "
              f"{doc['structures']} call structures, {tt.frame.width} columns.")
    out.print(f"Latency p50 {doc['latency_ms']['p50']:.2f} ms, p95 {doc['latency_ms']['p95']:.2f} ms, "
              f"max {doc['latency_ms']['max']:.2f} ms.")
    shown = tt.frame.select(["trace_id", "latency_ns", *tt.continuous_columns[:4]]).head(5)
    t = Table(title="First requests (exclusive times in ms)", title_justify="left")
    for c in shown.columns:
        t.add_column(c, overflow="fold")
    for row in shown.iter_rows():
        t.add_row(*[("—" if v is None else f"{v / 1e6:.3f}" if isinstance(v, int) else str(v)) for v in row])
    out.print(t)
    if output is not None:
        out.print(f"Wrote {output}")


@app.command()
def patterns(paths: Annotated[list[Path], typer.Argument(help="Trace files, directories, glob patterns or a store.")],
             endpoint: EndpointOpt = None,
             interval: Annotated[Optional[str], typer.Option("--interval", help="Degraded latency interval "
                                 "'A:B' with units (e.g. 350ms:700ms); default: chosen automatically "
                                 "(above the main latency mode) and printed.")] = None,
             solver: Annotated[str, typer.Option("--solver", help="ga, bnb, kmeans, hierarchical or meanshift.")] = "ga",
             seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same patterns).")] = 0,
             generations: Annotated[int, typer.Option("--generations", help="GA generations.")] = 400,
             output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Also write request -> "
                               "cluster labels (.parquet or .csv).")] = None,
             format: FormatOpt = None, mapping: MappingOpt = None, json: JsonOpt = False) -> None:
    """Latency degradation patterns (Cortellessa & Traini, ICPE 2020): which exclusive-time ranges and
    attributes explain each degraded latency sub-interval, with precision, recall and F-score."""
    import polars as pl

    result, tt, est, seconds = fit_patterns(paths, format, mapping, endpoint, interval, solver, seed, generations)
    res = est.result_
    if output is not None:
        labels = tt.frame.select("trace_id", "span_id", "latency_ns").with_columns(
            pl.Series("cluster", est.labels_))
        if output.suffix.lower() == ".csv":
            labels.write_csv(output)
        elif output.suffix.lower() in (".parquet", ".pq"):
            labels.write_parquet(output)
        else:
            raise TraceSleuthError(f"--output {output}: the file name must end in .parquet or .csv")
    if json:
        emit_json({"endpoint": tt.endpoint, "requests": tt.n_requests, "seconds": seconds, **res.to_dict()})
        return
    out.print(f"Endpoint [bold]{tt.endpoint}[/]: {tt.n_requests:,} requests; solver {solver}, seed {seed}, "
              f"{seconds:.2f} s.")
    if not res.found:
        out.print(f"No degradation found: {res.reason}", markup=False)
        return
    iv = res.interval
    out.print(f"Degraded interval ({res.interval_source}): {iv.describe()}, {res.n_positives:,} requests; "
              f"split points: {', '.join(f'{p / 1e6:.1f}' for p in res.split_points)} ms", markup=False)
    t = Table(title="Latency degradation patterns", title_justify="left", show_lines=True)
    for c in ("latency", "pattern", "precision", "recall", "F-score", "support"):
        t.add_column(c, overflow="fold", justify="left" if c in ("latency", "pattern") else "right")
    for s in res.sub_intervals:
        fmt = lambda v: "—" if v is None else f"{v:.3f}"
        t.add_row(s.latency_words, s.words, fmt(s.precision), fmt(s.recall), fmt(s.f_score), f"{s.support:,}")
    out.print(t)
    for note in res.notes:
        out.print(f"note: {note}", markup=False)
    if output is not None:
        out.print(f"Wrote {output}")


@app.command()
def collect(store: Annotated[Path, typer.Option("--store", help="Span store directory (created).")] = Path("store"),
            port: Annotated[int, typer.Option("--port", help="TCP port (0: a free one).")] = 4318,
            host: Annotated[str, typer.Option("--host", help="Address to bind; loopback by default.")] = "127.0.0.1",
            token: Annotated[Optional[str], typer.Option("--token", envvar="TRACESLEUTH_TOKEN",
                                                          help="Require 'Authorization: Bearer TOKEN'.")] = None,
            json: JsonOpt = False) -> None:
    """Receive spans over OTLP/HTTP (POST /v1/traces, protobuf or JSON) and Zipkin v2
    (POST /api/v2/spans) into a span store; acknowledged spans survive a crash. Ctrl-C stops."""
    from ..collector import serve
    from ..store import SpanStore

    SpanStore(store)  # create it, or check that it is one
    stats = serve(store, host=host, port=port, token=token,
                  on_ready=lambda url: err.print(f"tracesleuth collect: listening on {url}, store {store}")
                  if not json else None)
    if json:
        emit_json(stats)
    else:
        sp = stats.get("spans", {})
        out.print(f"Stopped after {stats.get('uptime_seconds', 0):.0f} s: {stats.get('requests', {}).get('total', 0):,} "
                  f"requests, {sp.get('received', 0):,} spans received, {sp.get('stored', 0):,} stored, "
                  f"{sp.get('rejected', 0):,} rejected.", markup=False)


evaluate_app = typer.Typer(no_args_is_help=True, help="Reproduce the papers' experiments and report their metrics.")
app.add_typer(evaluate_app, name="evaluate")


@evaluate_app.command("patterns")
def evaluate_patterns(
        sessions: Annotated[int, typer.Option("--sessions", help="Simulated load-test sessions.")] = 30,
        noised: Annotated[bool, typer.Option("--noised", help="Add the two noise types of Section 4.3.")] = False,
        requests: Annotated[int, typer.Option("--requests", help="Homepage requests per session.")] = 1000,
        solvers: Annotated[str, typer.Option("--solvers", help="Comma-separated solvers.")] =
        "ga,bnb,kmeans,hierarchical,meanshift",
        interval: Annotated[str, typer.Option("--interval", help="'affected' (the paper: [Lmin, Lmax] of the "
                                              "affected requests) or 'auto' (the tool's own rule).")] = "affected",
        k_select: Annotated[str, typer.Option("--k-select", help="How K-means/hierarchical pick k: 'truth' "
                                              "(the paper: best against ground truth) or 'silhouette'.")] = "truth",
        seed: Annotated[int, typer.Option("--seed")] = 0,
        sessions_table: Annotated[bool, typer.Option("--per-session", help="Also print Table 2 (every session).")] = False,
        json: JsonOpt = False) -> None:
    """Latency degradation patterns, Cortellessa & Traini Section 4: simulated E-Shopper sessions with
    injected degradations A1/A2; F-score, precision, recall and time per solver (Tables 2 and 3)."""
    from ..analyses.patterns.evaluation import evaluate_patterns as run_eval, render

    names = tuple(x.strip() for x in solvers.split(",") if x.strip())
    with _progress(f"evaluating {sessions} sessions") as progress:
        progress.add_task("eval", spans=0)
        ev = run_eval(sessions=sessions, noised=noised, solvers=names, random_state=seed, n_requests=requests,
                      interval=interval, k_select=k_select)
    if json:
        emit_json(ev.to_dict())
        return
    out.print(render(ev, table="summary"), markup=False)
    out.print(render(ev, table="time"), markup=False)
    if sessions_table:
        out.print(render(ev, table="sessions"), markup=False)


def run(argv: list[str] | None = None) -> int:
    """Run the app; errors on input or settings print one line and give exit code 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = app(args=argv, prog_name="tracesleuth", standalone_mode=False)
        if isinstance(rv, int) and rv:
            return rv
    except TraceSleuthError as e:
        if "--json" in argv:
            emit_json({"error": str(e), "type": type(e).__name__})
        else:
            err.print(f"[red]error:[/] {e}", markup=True, highlight=False)
        return 2
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        err.print("aborted")
        return 130
    except Exception as e:  # click usage errors
        import click

        if isinstance(e, click.ClickException):
            e.show()
            return e.exit_code
        raise
    return 0


@app.command()
def analyze(paths: Annotated[list[Path], typer.Argument(help="Trace files, directories, glob patterns or a store.")],
            output: Annotated[Path, typer.Option("-o", "--output", help="The HTML report to write (one "
                              "self-contained file that opens offline).")] = Path("report.html"),
            endpoint: EndpointOpt = None,
            interval: Annotated[Optional[str], typer.Option("--interval", help="Degraded latency interval "
                                "'A:B' with units (e.g. 350ms:700ms); default: chosen automatically.")] = None,
            solver: Annotated[str, typer.Option("--solver", help="ga, bnb, kmeans, hierarchical or meanshift.")] = "ga",
            seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same patterns).")] = 0,
            generations: Annotated[int, typer.Option("--generations", help="GA generations.")] = 400,
            title: Annotated[Optional[str], typer.Option("--title", help="Report title.")] = None,
            format: FormatOpt = None, mapping: MappingOpt = None, json: JsonOpt = False) -> None:
    """Latency degradation patterns as an HTML report: the latency distribution with the degraded
    interval and its sub-intervals, each pattern with precision, recall and F-score, an example
    request of each pattern as a Gantt chart, and what was read, rejected and repaired."""

    from ..analyses.patterns.section import build_patterns_report

    result, tt, est, seconds = fit_patterns(paths, format, mapping, endpoint, interval, solver, seed, generations)
    settings = {"seed": seed} | ({"generations": generations} if solver == "ga" else {})
    report = build_patterns_report(result, tt, est, title=title, solver_settings=settings)
    path = report.write(output)
    res = est.result_
    if json:
        emit_json({"report": str(path), "endpoint": tt.endpoint, "requests": tt.n_requests, "seconds": seconds,
                   **res.to_dict()})
        return
    out.print(f"Endpoint [bold]{tt.endpoint}[/]: {tt.n_requests:,} requests; solver {solver}, seed {seed}, "
              f"{seconds:.2f} s.")
    if res.found:
        out.print(f"Degraded interval ({res.interval_source}): {res.interval.describe()}, "
                  f"{res.n_positives:,} requests.", markup=False)
        t = Table(title="Latency degradation patterns", title_justify="left", show_lines=True)
        for c in ("#", "latency", "pattern", "precision", "recall", "F-score", "support"):
            t.add_column(c, overflow="fold", justify="left" if c in ("latency", "pattern") else "right")
        for s in res.sub_intervals:
            fmt = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
            t.add_row(str(s.index), s.latency_words, s.words, fmt(s.precision), fmt(s.recall), fmt(s.f_score),
                      f"{s.support:,}")
        out.print(t)
    else:
        out.print(f"No degradation found: {res.reason}", markup=False)
    out.print(f"Report: {path}", markup=False)


@app.command()
def demo(duration: Annotated[float, typer.Option("--duration", help="Seconds of load.")] = 120.0,
         rate: Annotated[float, typer.Option("--rate", help="Homepage requests per second.")] = 12.0,
         seed: Annotated[int, typer.Option("--seed", help="Seed of the degradations, the marking, the "
                                           "execution times and the analysis.")] = 0,
         noised: Annotated[bool, typer.Option("--noised", help="Add the two noise types of Section 4.3.")] = False,
         interval: Annotated[str, typer.Option("--interval", help="'affected' (the paper: [Lmin, Lmax] of the "
                             "affected requests) or 'auto' (the tool's own rule, no ground truth).")] = "affected",
         output: Annotated[Optional[Path], typer.Option("-o", "--output", help="The HTML report to write; "
                           "default: report.html in the run's directory.")] = None,
         workdir: Annotated[Optional[Path], typer.Option("--workdir", help="Directory of the run (store, ground "
                            "truth, logs); default: a new temporary directory.")] = None,
         json: JsonOpt = False) -> None:
    """Live demo: an E-Shopper-like shop of instrumented services (OpenTelemetry SDK, one process each,
    on 127.0.0.1) under load, with degradations A1/A2 injected through W3C baggage as in Cortellessa &
    Traini Section 4.3; its spans go to tracesleuth's collector, then the latency degradation patterns
    are found and scored against the injected ground truth. Ctrl-C stops every process."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from ..demo import run_demo

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                  transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("starting")

        def show(p) -> None:
            counts = f" ({p.requests_sent:,}/{p.requests_planned:,})" if p.phase == "load" else ""
            bar.update(task, description=f"{p.phase}: {p.message}{counts}")

        try:
            result = run_demo(duration_s=duration, rate_per_s=rate, seed=seed, noised=noised, workdir=workdir,
                              report_path=output, interval=interval, on_progress=show)
        except KeyboardInterrupt as e:
            err.print(f"demo interrupted ({str(e) or 'SIGINT'}): every process of the run was stopped.", markup=False)
            raise typer.Exit(130) from None
    if json:
        emit_json(result.to_dict())
        return
    t = Table(title="Injected degradations and recovered patterns", title_justify="left", show_lines=True)
    for c in ("degradation", "injected", "requests", "best-matching pattern", "F-score", "recovered"):
        t.add_column(c, overflow="fold", justify="right" if c in ("requests", "F-score") else "left")
    for d in result.degradations:
        f = result.match_f_scores.get(d.name, 0.0)
        k = result.matched.get(d.name, -1)
        words = result.recovered_patterns.get(d.name)
        t.add_row(d.name, d.describe().split(": ", 1)[-1], f"{result.affected.get(d.name, 0):,}",
                  f"#{k}: {words}" if k >= 0 else "none", f"{f:.3f}", "yes" if f >= 0.9 else "no")
    out.print(t)
    tm = result.timings
    out.print(f"Overall: precision {result.precision:.3f}, recall {result.recall:.3f}, F-score {result.f_score:.3f}; "
              f"degraded interval {result.interval or '(none found)'}.", markup=False)
    out.print(f"{result.requests_sent:,} requests sent ({result.requests_failed:,} failed), "
              f"{result.requests_analysed:,} analysed, {result.spans_stored:,} spans stored; "
              f"{tm.get('total_s', 0):.0f} s (start {tm.get('startup_s', 0):.1f} s, load {tm.get('load_s', 0):.1f} s, "
              f"flush {tm.get('flush_s', 0):.1f} s, analysis {tm.get('analysis_s', 0):.1f} s, "
              f"report {tm.get('report_s', 0):.1f} s).", markup=False)
    out.print(f"Store: {result.store_path}  (tracesleuth analyze {result.store_path} -e {result.endpoint})", markup=False)
    out.print(f"Ground truth: {result.labels_path}", markup=False)
    out.print(f"Report: {result.report_path}", markup=False)
