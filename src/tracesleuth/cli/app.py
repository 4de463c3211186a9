"""Commands of the ``tracesleuth`` command line (typer). Each only calls the public API and renders."""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from .._signals import signal_name
from ..errors import NothingStoredError, TraceSleuthError
from ._common import (BOOLEAN_WORDS, PATHS, Command, CommandInterrupted, EndpointOpt, FormatOpt, Group, JsonOpt,
                      MappingOpt, PathsArg, SchedulerOpt, SeedOpt, TimeOpt, check_paths, choose_scheduler,
                      command_scope, dask_scheduler, emit_json, err, input_store, keep_open, open_scheduler, out,
                      parse_instant, parse_time_range, progress, read_input, read_period, select_period, trace_table,
                      write_frame)


app = typer.Typer(name="tracesleuth", cls=Group, no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, context_settings={"help_option_names": ["-h", "--help"]},
                  help="Why are requests slow? Latency analyses of distributed traces "
                       "(OpenTelemetry, Jaeger, Zipkin).")
def _version(value: bool) -> None:
    if value:
        from .. import __version__

        out.print(f"tracesleuth {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", help="Print the version and exit.",
                                                callback=_version, is_eager=True)] = False) -> None:
    # The options of `tracesleuth` itself; the help text is the app's.
    return None


def _reject_rows(rejects, limit: int = 10) -> list[dict]:
    return rejects.slice(0, limit).to_pylist()


def _print_rejects(reasons: list[dict], examples: list[dict], total_spans: int) -> None:
    if not reasons:
        return
    t = Table(title=f"Rejected records and warnings ({total_spans:,} spans rejected)", title_justify="left")
    for c in ("reason", "records", "spans lost"):
        t.add_column(c, justify="right" if c != "reason" else "left")
    for r in reasons:
        t.add_row(escape(r["reason"]), f"{r['records']:,}", f"{r['spans']:,}")
    out.print(t)
    for e in examples:
        where = f"{e['source']}:{e['record']}" + (f" [{e['field']}]" if e.get("field") else "")
        out.print(f"  {where}: {e['reason']}", markup=False)


class _IngestCommand(Command):
    """``ingest``: an interrupt anywhere in the command (while Typer hands it the arguments, in
    the ingest, while it prints) ends with one line that says whether the ingest committed, and
    exit ``128 + signal``: the line reports the store's state, not where the signal fell."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CommandInterrupted as e:
            cause = e.__cause__  # (an IngestInterrupted says what it left)
            committed = bool(getattr(cause, "committed", False) or ctx.meta.get(_COMMITTED))
            message = getattr(cause, "message", None) or f"interrupted by {signal_name(e.signum)} " + (
                "after the ingest committed" if committed else "before the ingest began: nothing committed")
            if ctx.params.get("json"):
                emit_json({"error": message, "type": "IngestInterrupted", "committed": committed})
            else:
                err.print(message, markup=False, soft_wrap=True)
            raise typer.Exit(128 + e.signum) from None


#: ``ctx.meta`` key set once an ingest has committed (read by :class:`_IngestCommand`).
_COMMITTED = "tracesleuth.ingest.committed"


@app.command(cls=_IngestCommand)
def ingest(ctx: typer.Context,
           paths: Annotated[list[Path], typer.Argument(help="Trace and log files, directories or glob patterns.",
                                                       metavar=PATHS, show_default=False)],
           output: Annotated[Path, typer.Option("-o", "--output", metavar="DIR",
                                                help="Span store directory (created).")],
           allow_partial: Annotated[bool, typer.Option("--allow-partial", help="Exit 0 even when a file could "
                                       "not be read to its end (the damage is still reported).")] = False,
           force: Annotated[bool, typer.Option("--force", help="Read files whose content is in the store already "
                                               "(by default they are skipped, and said so).")] = False,
           format: FormatOpt = None, mapping: MappingOpt = None, json: JsonOpt = False) -> None:
    """Read trace and log files into a Parquet span store, reporting what was read, rejected and why.

    An ingest is one transaction: all its parts appear in the store at once, or none (Ctrl-C,
    SIGTERM, kill -9: the store is as before). A file whose content the store already holds is
    skipped (--force reads it again). Exit code 2 when nothing was stored (every file skipped,
    empty or rejected: no store is created); 1 when a file could not be read to its end
    (truncated or corrupt: the records after the damage are lost) unless --allow-partial;
    130/143 when interrupted by SIGINT/SIGTERM."""
    from ..ingest import ingest as do_ingest

    check_paths(paths)  # before the store is created: a mistyped path leaves nothing behind
    try:
        with progress("ingesting") as bar:
            task = bar.add_task("ingest", spans=0)
            seen = [0]

            def tick(batch):
                seen[0] += batch.num_rows
                bar.update(task, spans=seen[0])

            summary = do_ingest([str(p) for p in paths], output, format=format, mapping=mapping, on_batch=tick,
                                force=force)
            ctx.meta[_COMMITTED] = True
    except NothingStoredError as e:
        if json:
            emit_json(_ingest_doc(e.summary, output) | {"error": str(e), "type": type(e).__name__})
        else:
            _print_ingest(e.summary, output)
            err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    failed = bool(summary.damaged_files) and not allow_partial
    if json:
        emit_json(_ingest_doc(summary, output))
    else:
        _print_ingest(summary, output)
    if failed:
        raise typer.Exit(1)


#: Reasons of log rejects and warnings an ingest prints at most (all are in --json).
MAX_LOG_REASONS = 5


def _ingest_doc(summary, output: Path) -> dict:
    return summary.to_dict() | {"store": str(output), "spans_in": summary.spans_read + summary.spans_rejected}


def _print_ingest(summary, output: Path) -> None:
    """The text report of an ingest (stored or not)."""
    read = len(summary.formats)
    if read or not (summary.skipped_files or summary.log_formats):
        out.print(f"Read [bold]{summary.spans_read + summary.spans_rejected:,}[/] spans from "
                  f"{read} file(s) in {summary.seconds:.2f} s: "
                  f"[green]{summary.spans_read:,} stored[/], [red]{summary.spans_rejected:,} rejected[/] "
                  f"({summary.rejected_records:,} records), {summary.warnings:,} warnings.")
    fmts: dict = {}
    for f in [*summary.formats.values(), *summary.log_formats.values()]:
        fmts[f] = fmts.get(f, 0) + 1
    if fmts:
        out.print("Formats: " + ", ".join(f"{k} ({v} files)" for k, v in sorted(fmts.items())))
    if summary.skipped_files:
        first = summary.skipped_files[0]
        out.print(f"Skipped {len(summary.skipped_files)} file(s) whose content is in the store already or being "
                  f"ingested (--force reads them), e.g. {first['path']}: {first['reason']}", markup=False)
    if summary.log_formats:
        out.print(f"Read [bold]{summary.logs_read + summary.logs_rejected:,}[/] log records from "
                  f"{len(summary.log_formats)} file(s): [green]{summary.logs_read:,} stored[/], "
                  f"[red]{summary.logs_rejected:,} rejected[/], {summary.log_warnings:,} warnings"
                  + (f"; {summary.templates:,} log templates in the store" if summary.templates else "") + ".")
        for r in summary.log_reasons[:MAX_LOG_REASONS]:
            out.print(f"  {r['reason']}: {r['entries']:,} entries, {r['records_lost']:,} records lost", markup=False)
    if summary.ingest_id:
        out.print(f"Store: {output} ({len(summary.parts) + len(summary.log_parts)} new part(s), committed as "
                  f"ingest {summary.ingest_id[:12]})", markup=False)
    _print_rejects(summary.reasons, summary.examples, summary.spans_rejected)
    if summary.damaged_files:
        out.print(f"{len(summary.damaged_files)} file(s) not read to their end (records after the damage lost): "
                  + ", ".join(summary.damaged_files), markup=False)


@app.command(cls=Command)
def info(paths: PathsArg, format: FormatOpt = None, mapping: MappingOpt = None, json: JsonOpt = False) -> None:
    """Traces, spans, services, operations, endpoints and their latency percentiles and error rates;
    and the log records: how many, how many were written in a span of the input, rejected, templates."""
    from ..io import rejects_by_reason
    from ..model.summary import summarize, summarize_logs

    result = read_input(paths, format, mapping)
    s = summarize(result)
    logs = summarize_logs([str(p) for p in paths], result.spans, format=format)
    reasons = rejects_by_reason(result.rejects)
    if json:
        emit_json(s.to_dict() | {"spans_rejected": result.spans_rejected, "rejects": reasons,
                                 "files": len(result.formats), "logs": logs.to_dict()})
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
            t.add_column(escape(c), justify="left" if c == "endpoint" else "right", overflow="fold")
        for row in frame.iter_rows(named=True):
            t.add_row(*[_cell(c, v) for c, v in row.items()])
        out.print(t)
    if s.endpoints.height and s.endpoints["error_rate"].null_count() == s.endpoints.height:
        out.print("Error rates unknown: no span of the input has a status set.", markup=False)
    out.print(logs.describe(), markup=False)
    _print_rejects(reasons, _reject_rows(result.rejects), result.spans_rejected)


@app.command(cls=Command)
def table(paths: PathsArg,
          output: Annotated[Optional[Path], typer.Option("-o", "--output", metavar="FILE", show_default=False,
                                                         help="Write the table (.parquet or .csv; with --scheduler "
                                                         "given, other than whole, FILE.parquet is a new directory "
                                                         "of one part per partition).")] = None,
          endpoint: EndpointOpt = None, time_range: TimeOpt = None, format: FormatOpt = None,
          mapping: MappingOpt = None, scheduler: SchedulerOpt = None, json: JsonOpt = False) -> None:
    """The per-request trace table of an endpoint: latency and exclusive time per operation."""
    from ..model.table import ATTRIBUTE_PREFIX, EXCLUSIVE_PREFIX, INSTANCE_PREFIX, build_trace_table

    with dask_scheduler(choose_scheduler(paths, scheduler, format, mapping)) as dask:
        if dask is None:
            tt = build_trace_table(read_period(paths, format, mapping, time_range), endpoint)
            if output is not None:
                write_frame(tt.frame, output)
            columns = tt.frame.columns
        else:
            from ..scale import dask_trace_table

            period = parse_time_range(time_range, "--time") if time_range else None
            dt = dask.keep(dask_trace_table(input_store(paths, format, mapping), endpoint, scheduler=dask,
                                            period=period))
            columns = dt.columns
            if output is not None and scheduler is not None and output.suffix.lower() in (".parquet", ".pq"):
                dt.to_parquet(output)  # serial chosen by default (a large store): one file, as read whole
            elif output is not None:
                write_frame(dt.to_trace_table().frame, output)
            first = [c for c in columns if c.startswith(EXCLUSIVE_PREFIX)][:4]
            tt = dt.to_trace_table(columns=["latency_ns", "signature", *first])  # what is printed only
    lat = tt.frame["latency_ns"] / 1e6
    doc = {"endpoint": tt.endpoint, "requests": tt.n_requests, "columns": len(columns),
           "operations": list(tt.operations),
           "categorical_columns": [c for c in columns if c.startswith((INSTANCE_PREFIX, ATTRIBUTE_PREFIX))],
           "structures": tt.frame["signature"].n_unique(),
           "latency_ms": {"p50": lat.quantile(0.5), "p95": lat.quantile(0.95), "max": lat.max()},
           "output": str(output) if output else None, "assembly": tt.assembly.to_dict(),
           "scheduler": None if dask is None else {"name": dask.name, "dashboard": dask.dashboard}}
    if json:
        emit_json(doc)
        return
    out.print(f"Endpoint [bold]{escape(tt.endpoint)}[/]: {tt.n_requests:,} requests, {len(tt.operations)} operations, "
              f"{doc['structures']} call structures, {len(columns)} columns.")
    out.print(f"Latency p50 {doc['latency_ms']['p50']:.2f} ms, p95 {doc['latency_ms']['p95']:.2f} ms, "
              f"max {doc['latency_ms']['max']:.2f} ms.")
    shown = tt.frame.select(["trace_id", "latency_ns", *tt.continuous_columns[:4]]).head(5)
    t = Table(title="First requests (latency and exclusive times in ms)", title_justify="left")
    for c in shown.columns:
        t.add_column(escape(_ms_header(c)), overflow="fold")
    for row in shown.iter_rows():
        t.add_row(*[("—" if v is None else f"{v / 1e6:.3f}" if isinstance(v, int) else str(v)) for v in row])
    out.print(t)
    if output is not None:
        out.print(f"Wrote {output}")


@app.command(cls=Command)
def collect(store: Annotated[Path, typer.Option("--store", metavar="DIR",
                                                help="Span store directory (created).")] = Path("store"),
            port: Annotated[int, typer.Option("--port", metavar="INT", help="TCP port (0: a free one).")] = 4318,
            host: Annotated[str, typer.Option("--host", metavar="ADDRESS",
                                              help="Address to bind; loopback by default.")] = "127.0.0.1",
            token: Annotated[Optional[str], typer.Option("--token", envvar="TRACESLEUTH_TOKEN", metavar="TOKEN",
                                                          show_default=False,
                                                          help="Require 'Authorization: Bearer TOKEN'.")] = None,
            json: JsonOpt = False) -> None:
    """Receive spans over OTLP/HTTP (POST /v1/traces, protobuf or JSON) and Zipkin v2
    (POST /api/v2/spans), and log records over OTLP/HTTP (POST /v1/logs), into a span store;
    acknowledged spans and log records survive a crash. Ctrl-C stops."""
    from ..collector import serve
    from ..io.store import SpanStore

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
        lg = stats.get("logs", {})
        if lg.get("received"):
            out.print(f"{lg['received']:,} log records received, {lg.get('stored', 0):,} stored, "
                      f"{lg.get('rejected', 0):,} rejected.", markup=False)


evaluate_app = typer.Typer(cls=Group, no_args_is_help=True,
                           help="Reproduce the papers' experiments and report their metrics.")
app.add_typer(evaluate_app, name="evaluate")


def run(argv: list[str] | None = None) -> int:
    """Run the command line; every mistake in the input or the settings is one line and exit code 2.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 on success, 1 when ``ingest`` could not read a file to its end
        (without ``--allow-partial``), 2 for a usage or input mistake, or an ``ingest`` that
        stored nothing (one ``error:`` line on stderr, or with ``--json`` one JSON document
        ``{"error", "type"}`` on stdout), ``128 + signal`` when interrupted by SIGINT (130) or
        SIGTERM (143), with one line on stderr.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    scope = None
    try:
        with command_scope() as scope:  # what a command keeps open (a Dask cluster) is closed when it ends
            rv = app(args=argv, prog_name="tracesleuth", standalone_mode=False)
        if isinstance(rv, int) and rv:
            return rv
    except TraceSleuthError as e:
        return _fail(_input_message(e, argv), type(e).__name__, argv)
    except typer.Exit as e:
        return e.exit_code
    except CommandInterrupted as e:  # SIGINT or SIGTERM (see _common._CarriesInterrupts)
        err.print(f"interrupted by {signal_name(e.signum)}" + (" while starting: nothing done" if e.starting else ""),
                  markup=False)
        return 128 + e.signum
    except typer.Abort:
        err.print("aborted", markup=False)
        return 130
    except KeyboardInterrupt as e:  # outside a command: while Typer builds the commands, or after one ended
        signum = getattr(e, "signum", signal.SIGINT)
        starting = scope is None or not scope.began
        err.print(f"interrupted by {signal_name(signum)}" + (" while starting: nothing done" if starting else ""),
                  markup=False)
        return 128 + signum
    except Exception as e:
        # Click's usage errors. Typer >= 0.22 raises those of the Click it vendors (typer._click),
        # older Typer those of the installed Click: told apart by their class, not by one import.
        if not _is_click_error(e):
            raise
        if _kind(e, "NoArgsIsHelpError"):  # a bare command: its help, which is no mistake
            text = e.format_message()  # empty when Typer's rich help printed itself already
            if text.strip():
                sys.stdout.write(text.rstrip("\n") + "\n")
            return 0
        return _fail(_usage_message(e, argv), _click_kind(e), argv)
    return 0


def _fail(message: str, kind: str, argv: list[str]) -> int:
    """Report one mistake: one ``error:`` line on stderr, or one JSON document with ``--json``."""
    message = " ".join(message.split())
    if "--json" in argv:
        emit_json({"error": message, "type": kind})
    else:
        err.print(f"[red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    return 2


def _kind(e: BaseException, name: str) -> bool:
    return any(c.__name__ == name for c in type(e).__mro__)


def _is_click_error(e: BaseException) -> bool:
    return _kind(e, "ClickException") and callable(getattr(e, "format_message", None))


def _click_kind(e: BaseException) -> str:
    return "UsageError" if _kind(e, "UsageError") else type(e).__name__


def _help_hint(e) -> str:
    ctx = getattr(e, "ctx", None)
    path = getattr(ctx, "command_path", None) or "tracesleuth"
    return f"See '{path} --help'."


def _usage_message(e, argv: list[str]) -> str:
    """One line: the mistake, what is allowed or the fix, and where the help is."""
    message = e.format_message().strip()
    if _kind(e, "NoSuchOption"):
        option = getattr(e, "option_name", "")
        message = f"No such option: {option}"
        close = _close_options(e, option)
        owners = [] if close else _commands_with_option(option)
        if close:
            message += f" (did you mean {' or '.join(close)}?)"
        elif owners:
            ctx = getattr(e, "ctx", None)
            where = f"'{ctx.command_path}' has no such option" if ctx is not None else "no such option here"
            message += (f" ({where}; {owners[0][1]} is an option of the command"
                        f"{'s' if len(owners) > 1 else ''} {', '.join(repr(c) for c, _ in owners)})")
    elif message.startswith("No such command") and "did you mean" not in message.lower():
        close = _close_commands(e, message)
        if close:
            message = f"{message.rstrip('.')}. Did you mean {' or '.join(repr(c) for c in close)}?"
    elif _kind(e, "BadParameter") and not _kind(e, "MissingParameter"):
        given = _given_value(getattr(e, "param", None), argv)
        if given is not None and repr(given) not in message:
            message = f"{message.rstrip('.')} (got {given!r})"
    return f"{message if message.endswith(('.', '?', '!')) else message + '.'} {_help_hint(e)}"


def _close_options(e, option: str) -> list[str]:
    """The options of the failing command spelled like ``option``."""
    from difflib import get_close_matches

    close = list(getattr(e, "possibilities", None) or ())
    ctx = getattr(e, "ctx", None)
    if not close and ctx is not None and option.startswith("-"):
        names = [o for p in ctx.command.get_params(ctx) for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
        close = get_close_matches(option, names, n=2, cutoff=0.7)
    return sorted(close)


def _close_commands(e, message: str) -> list[str]:
    """The commands of the failing group spelled like the unknown one (older Click suggests none)."""
    from difflib import get_close_matches

    ctx = getattr(e, "ctx", None)
    typo = re.search(r"'([^']*)'", message)
    commands = getattr(getattr(ctx, "command", None), "commands", None)
    if not typo or not commands:
        return []
    return get_close_matches(typo.group(1), list(commands), n=2)


def _commands_with_option(option: str) -> list[tuple[str, str]]:
    """``(command, option)`` for each command that has an option spelled like ``option``."""
    from difflib import get_close_matches

    import typer.main

    group = typer.main.get_command(app)
    found = []
    for name, command in getattr(group, "commands", {}).items():
        names = [o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
        match = get_close_matches(option, names, n=1, cutoff=0.8)
        if match:
            found.append((name, match[0]))
    return found


def _given_value(param, argv: list[str]) -> str | None:
    """The value given on the command line for ``param`` (None when not found)."""
    for opt in getattr(param, "opts", ()):
        if not opt.startswith("-"):
            continue
        for k, token in enumerate(argv):
            if token == opt and k + 1 < len(argv):
                return argv[k + 1]
            if token.startswith(opt + "="):
                return token[len(opt) + 1:]
    return None


def _input_message(e: TraceSleuthError, argv: list[str]) -> str:
    """The message of ``e``; a missing path that is a flag's would-be value says so."""
    from ..errors import TraceFormatError

    source = getattr(e, "source", None)
    if isinstance(e, TraceFormatError) and source in argv and source.lower() in BOOLEAN_WORDS:
        k = argv.index(source)
        if k > 0 and argv[k - 1] in _flags():
            flag = argv[k - 1]
            return (f"{flag} takes no value: '{source}' was read as a path, and there is no such file. "
                    f"Give {flag} alone (or leave it out).")
    return str(e)


def _flags() -> set[str]:
    """Every option of every command that takes no value."""
    import typer.main

    def walk(command):
        for p in command.params:
            if getattr(p, "is_flag", False):
                yield from (*p.opts, *p.secondary_opts)
        for sub in getattr(command, "commands", {}).values():
            yield from walk(sub)

    return set(walk(typer.main.get_command(app)))


def _cell(column: str, value) -> str:
    """A value of the ``info`` tables as text (an error rate the input cannot tell: unknown)."""
    if value is None:
        return "unknown" if column == "error_rate" else "—"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.3f}"
    return escape(str(value))


def _ms_header(column: str) -> str:
    """A trace-table column named for the milliseconds shown: ``exclusive_ns[a:b]`` -> ``exclusive ms: a:b``."""
    from ..model.table import EXCLUSIVE_NS, LATENCY_NS, column_key

    if column == LATENCY_NS:
        return "latency ms"
    if column.startswith(EXCLUSIVE_NS + "["):
        return f"exclusive ms: {column_key(column)}"
    return column


@app.command(cls=Command)
def demo(duration: Annotated[float, typer.Option("--duration", metavar="SECONDS", help="Seconds of load.")] = 120.0,
         rate: Annotated[float, typer.Option("--rate", metavar="PER_SECOND", help="Homepage requests per second "
                                             "(the default fits a 2-core machine with headroom).")] = 8.0,
         seed: Annotated[int, typer.Option("--seed", metavar="INT", help="Seed of the degradations, the marking, the "
                                           "execution times and the analysis.")] = 0,
         noised: Annotated[bool, typer.Option("--noised", help="Add the two noise types of Section 4.3.")] = False,
         interval: Annotated[str, typer.Option("--interval", metavar="affected|auto", help="'affected' (the paper: "
                             "from Lmin to Lmax of the affected requests) or 'auto' (the tool's own rule, no ground "
                             "truth).")] = "affected",
         incident: Annotated[Optional[str], typer.Option("--incident", metavar="SERVICE", show_default=False,
                             help="Incident mode: a baseline phase, then a fault in SERVICE (e.g. cart-service) for "
                             "the second half; the report opens with What changed.")] = None,
         fault: Annotated[str, typer.Option("--fault", metavar="slow-handler|network-delay|exception|early-return|"
                          "cpu-burn", help="Incident mode: the fault injected.")] = "slow-handler",
         fault_delay: Annotated[str, typer.Option("--fault-delay", metavar="DURATION",
                                help="Incident mode, slow-handler and network-delay: what the fault adds per "
                                "request, e.g. 20ms.")] = "20ms",
         fault_share: Annotated[Optional[float], typer.Option("--fault-share", metavar="SHARE", show_default=False,
                                help="Incident mode, exception and early-return: the share of the service's "
                                "requests hit; cpu-burn: the share of a core burnt. In (0, 1]; default 0.5.")] = None,
         output: Annotated[Optional[Path], typer.Option("-o", "--output", metavar="FILE", show_default=False,
                           help="The HTML report to write; default: report.html in the run's directory.")] = None,
         workdir: Annotated[Optional[Path], typer.Option("--workdir", metavar="DIR", show_default=False,
                            help="Directory of the run (store, ground truth, logs); default: a new temporary "
                            "directory.")] = None,
         json: JsonOpt = False) -> None:
    """Live demo: an E-Shopper-like shop of instrumented services (OpenTelemetry SDK, one process each,
    on 127.0.0.1) under load, with degradations A1/A2 injected through W3C baggage as in Cortellessa &
    Traini Section 4.3; its spans go to tracesleuth's collector, then the latency degradation patterns
    are found and scored against the injected ground truth. With --incident SERVICE: a baseline phase,
    then one fault in SERVICE, compared (Spectroscope); the report opens with What changed.
    Ctrl-C stops every process.

    Exit code 0 when what was injected was recovered (each degradation's best-matching pattern at
    F-score >= 0.95; in incident mode, the injected service ranked first), 1 when a run that kept
    up with its load missed it, 3 when the run is no result (requests failed, the rate fell short,
    or the machine was too busy to tell the injected delays apart: the message names the cause)."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .._signals import signal_name
    from ..demo import DEFAULT_FAULT_SHARE, DELAY_FAULTS, SHARE_FAULTS, run_demo, run_incident
    from ..errors import ParameterError
    from ..units import parse_duration

    if incident and (noised or interval != "affected"):
        raise ParameterError("--noised and --interval set the degradations of the patterns demo; --incident "
                             "injects one fault instead: give one or the other")
    if not incident and (fault != "slow-handler" or fault_delay != "20ms" or fault_share is not None):
        raise ParameterError("--fault, --fault-delay and --fault-share set the fault of the incident mode: "
                             "add --incident SERVICE")
    if fault in DELAY_FAULTS and fault_share is not None:
        raise ParameterError(f"--fault-share sets the share of the {', '.join(SHARE_FAULTS)} faults; {fault} "
                             "delays every request by --fault-delay")
    if fault in SHARE_FAULTS and fault_delay != "20ms":
        raise ParameterError(f"--fault-delay sets the delay of the {', '.join(DELAY_FAULTS)} faults; {fault} "
                             "hits a share of the requests (--fault-share)")
    delay_ns = parse_duration(fault_delay) if incident else 0
    share = DEFAULT_FAULT_SHARE if fault_share is None else fault_share
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                  transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("starting")

        def show(p) -> None:
            counts = f" ({p.requests_sent:,}/{p.requests_planned:,})" if p.phase == "load" else ""
            bar.update(task, description=f"{p.phase}: {p.message}{counts}")

        try:
            if incident:
                result = run_incident(incident, fault=fault, delay_ns=delay_ns, share=share, duration_s=duration,
                                      rate_per_s=rate, seed=seed, workdir=workdir, report_path=output,
                                      on_progress=show)
            else:
                result = run_demo(duration_s=duration, rate_per_s=rate, seed=seed, noised=noised, workdir=workdir,
                                  report_path=output, interval=interval, on_progress=show)
        except KeyboardInterrupt as e:  # SIGINT, or the SIGTERM/SIGHUP the demo and the CLI raise as one
            signum = getattr(e, "signum", signal.SIGINT)
            err.print(f"demo interrupted ({signal_name(signum)}): every process of the run was stopped.", markup=False)
            raise typer.Exit(128 + signum) from None
    verdict = result.outcome()
    if json:
        emit_json(result.to_dict())
    elif incident:
        _show_incident(result)
    else:
        _show_demo(result)
    if verdict.exit_code:
        err.print(f"error: {verdict.message}", markup=False)
        raise typer.Exit(verdict.exit_code)
    if not json:
        out.print(f"Recovered: {verdict.message}.", markup=False)


def _show_run(result) -> None:
    """The lines common to both demo modes: the load, the timings, where things are."""
    h, tm = result.health, result.timings
    if h is not None:
        out.print(f"Load: {h.load_words()}.", markup=False)
        if h.latency_words():
            out.print(f"Latency: {h.latency_words()}.", markup=False)
        if h.telemetry_words():
            out.print(f"Telemetry: {h.telemetry_words()}.", markup=False)
            for p in h.telemetry:
                if p.spans.lost or (p.logs is not None and p.logs.lost):
                    out.print(f"  lost: {p.describe()}", markup=False)
    out.print(f"{tm.get('total_s', 0):.0f} s (start {tm.get('startup_s', 0):.1f} s, load {tm.get('load_s', 0):.1f} s, "
              f"flush {tm.get('flush_s', 0):.1f} s, analysis {tm.get('analysis_s', 0):.1f} s, "
              f"report {tm.get('report_s', 0):.1f} s).", markup=False)
    out.print(f"Store: {result.store_path}  (tracesleuth analyze {result.store_path} -e {result.endpoint})", markup=False)
    out.print(f"Report: {result.report_path}", markup=False)


def _show_demo(result) -> None:
    thr = result.recovery_f_score
    t = Table(title="Injected degradations and recovered patterns", title_justify="left", show_lines=True,
              caption=f"recovered: the best-matching pattern scores F >= {thr:g}", caption_justify="left")
    for c in ("degradation", "injected", "requests", "best-matching pattern", "F-score", "recovered"):
        t.add_column(c, overflow="fold", justify="right" if c in ("requests", "F-score") else "left")
    for d in result.degradations:
        f = result.match_f_scores.get(d.name, 0.0)
        k = result.matched.get(d.name, -1)
        words = result.recovered_patterns.get(d.name)
        t.add_row(d.name, d.describe().split(": ", 1)[-1], f"{result.affected.get(d.name, 0):,}",
                  f"#{k}: {words}" if k >= 0 else "none", f"{f:.3f}", "yes" if f >= thr else "no")
    out.print(t)
    out.print(f"Overall: precision {result.precision:.3f}, recall {result.recall:.3f}, F-score {result.f_score:.3f}; "
              f"degraded interval {result.interval or '(none found)'}.", markup=False)
    _show_run(result)
    out.print(f"Ground truth: {result.labels_path}", markup=False)


def _show_incident(result) -> None:
    from ..demo import CODE_FAULTS

    out.print(f"Fault: {result.fault.describe()}; baseline {result.requests.get('baseline', 0):,} requests, "
              f"problem {result.requests.get('problem', 0):,}.", markup=False)
    t = Table(title="What changed: services, most suspicious first", title_justify="left", show_lines=True,
              caption="recovered: the injected service ranks first", caption_justify="left")
    for c in ("rank", "service", "score", "evidence"):
        t.add_column(c, overflow="fold", justify="right" if c in ("rank", "score") else "left")
    for k, s in enumerate(result.services[:5]):
        injected = " (injected)" if s["service"] == result.fault.service else ""
        t.add_row(str(k + 1), escape(s["service"] + injected), f"{s['score']:.3f}", escape("; ".join(s["evidence"][:2])))
    out.print(t)
    if not result.services:
        out.print("No service is suspected.", markup=False)
    _show_run(result)
    if result.fault_hits_path is not None and result.fault.kind in CODE_FAULTS:
        out.print(f"Ground truth: {result.fault_hits_path} (the requests the fault hit)", markup=False)


def _diagnosed_periods(store: Path, at_ns: int, scheduler=None):
    """(fitted Diagnosis, problem spans, baseline spans) of ``analyze STORE --at TIME``, from the part
    of the store ``tracesleuth diagnose --at`` reads (:func:`~tracesleuth.analyses.diagnose.telemetry.read_range`);
    with a scheduler (:func:`dask_scheduler`), the diagnosis built partition by partition and, instead
    of the spans, the periods' ranges (:attr:`Period.parts <tracesleuth.analyses.diagnose.telemetry.Period.parts>`),
    whose tables are built from the store by the scheduler too."""
    from ..analyses.diagnose import Diagnosis
    from ..analyses.diagnose.telemetry import read_store

    if scheduler is not None:
        from ..scale.telemetry import partitioned_telemetry

        telemetry = partitioned_telemetry(store, scheduler=scheduler, around_ns=(at_ns, at_ns))
        diagnosis = Diagnosis(at=at_ns).fit(telemetry)
        return diagnosis, diagnosis.result_.problem.parts, diagnosis.result_.baseline.parts
    spans, logs = read_store(store, around_ns=(at_ns, at_ns))
    spans = spans.to_arrow()   # read around a moment: a polars frame; the tables are built from Arrow
    diagnosis = Diagnosis(at=at_ns).fit(spans, logs)
    result = diagnosis.result_

    def during(period):
        import pyarrow as pa

        return pa.concat_tables([select_period(spans, a, b) for a, b in period.parts])
    return diagnosis, during(result.problem), during(result.baseline)


def _settings(assignments: list[str], names: list[str]) -> dict[str, dict]:
    """``["patterns.solver=bnb", ...]`` -> ``{"patterns": {"solver": "bnb"}}``; values read as Python
    literals (``60``, ``0.5``, ``None``, ``True``) or else kept as text (``350ms:700ms``)."""
    import ast

    settings: dict[str, dict] = {}
    for item in assignments:
        key, sep, text = item.partition("=")
        name, dot, setting = key.strip().partition(".")
        if not (sep and dot and name and setting):
            raise TraceSleuthError(f"--set {item!r}: write ANALYSIS.SETTING=VALUE, e.g. patterns.solver=bnb")
        if name not in names:
            raise TraceSleuthError(f"--set {item!r}: no analysis is called {name!r}; the analyses are: "
                                   f"{', '.join(names)}")
        word = {"true": "True", "false": "False", "none": "None"}.get(text.strip().lower(), text.strip())
        try:
            value = ast.literal_eval(word)
        except (ValueError, SyntaxError):
            value = text.strip()
        settings.setdefault(name, {})[setting] = value
    return settings


@app.command(cls=Command)
def analyze(paths: PathsArg,
            output: Annotated[Path, typer.Option("-o", "--output", metavar="FILE", help="The HTML report to write (one "
                              "self-contained file that opens offline).")] = Path("report.html"),
            endpoint: EndpointOpt = None,
            baseline: Annotated[Optional[list[Path]], typer.Option("--baseline", "-b", metavar="PATH",
                                show_default=False, help="A baseline (non-problem) period's input (repeatable): "
                                "adds the analyses that compare two periods ('What changed' first).")] = None,
            annotations: Annotated[Optional[Path], typer.Option("--annotations", metavar="FILE", show_default=False,
                                   help="Performance annotations ('tracesleuth annotate derive'): adds their "
                                   "assertions on these requests.")] = None,
            at: Annotated[Optional[str], typer.Option("--at", metavar="TIME", show_default=False,
                          help="A moment inside an incident (one span store): the report opens with the diagnosis "
                               "(tracesleuth diagnose), the analyses read its problem period and compare it with "
                               "its baseline unless --baseline is given; with --scheduler, the diagnosis and the "
                               "periods' tables are built from the store partition by partition.")] = None,
            time_range: TimeOpt = None,
            seed: SeedOpt = 0,
            only: Annotated[Optional[list[str]], typer.Option("--only", metavar="ANALYSIS", show_default=False,
                            help="Run only this analysis (repeatable); default: every registered one.")] = None,
            set_: Annotated[Optional[list[str]], typer.Option("--set", metavar="ANALYSIS.SETTING=VALUE",
                            show_default=False, help="A setting of one analysis (repeatable), e.g. "
                            "patterns.solver=bnb, patterns.interval=350ms:700ms, patterns.generations=100.")] = None,
            title: Annotated[Optional[str], typer.Option("--title", metavar="TEXT", show_default=False,
                                                         help="Report title.")] = None,
            format: FormatOpt = None, mapping: MappingOpt = None, scheduler: SchedulerOpt = None,
            json: JsonOpt = False) -> None:
    """Every analysis on the same requests, in one HTML report: a section per analysis (latency
    degradation patterns: the latency distribution with the degraded interval, each pattern with
    precision, recall and F-score, example requests as Gantt charts; root-cause localization: the
    anomalous methods, their services and instances; black-box causal paths; with --baseline,
    what changed), then what was read, rejected and repaired."""
    import time

    from .. import __version__
    from ..analyses import ANALYSES, ReportContext, get_analysis
    from ..errors import ParameterError
    from ..model import build_trace_table
    from ..report import Report, input_section

    # The diagnosis reads the store over time: it runs first, given --at (below), not on a table.
    chosen = [get_analysis(name) for name in only] if only else list(ANALYSES)
    if at is None and only and any(s.reads_store for s in chosen):
        raise ParameterError(f"--only {next(s.name for s in chosen if s.reads_store)}: it reads a store over time; "
                             "give --at TIME")
    specs = [s for s in chosen if not s.reads_store]
    two_periods = bool(baseline) or at is not None
    # What each analysis left out needs: (the option, its value, why), for the message and the JSON.
    needs = {s.name: ("--baseline", "PATH", "it compares two periods") if s.needs_baseline and not two_periods
             else ("--annotations", "FILE", "it checks annotations") for s in specs
             if (s.needs_baseline and not two_periods) or (s.needs_annotations and annotations is None)}
    skipped = list(needs)
    if only and skipped:
        option, value, why = needs[skipped[0]]
        raise ParameterError(f"--only {skipped[0]}: {why}; give {option} {value}")
    specs = [s for s in specs if s.name not in skipped]
    settings = _settings(set_ or [], [s.name for s in ANALYSES])
    diagnosis = baseline_spans = None
    period = parse_time_range(time_range, "--time") if time_range else None
    if at is not None and period is not None:
        raise ParameterError("give --at (a moment inside an incident) or --time (the period to analyse), not both")
    # Each input built its own way (choose_scheduler): a large store partition by partition, a
    # baseline of trace files read whole; a scheduler given is used for both.
    at_ns = store = None
    if at is not None:
        from ..analyses.diagnose.telemetry import moments_in_store, read_range

        at_ns, store = parse_instant(at, "--at"), input_store(paths, format, mapping)
        moments_in_store(store, (at_ns, at_ns))
    chosen = choose_scheduler(paths, scheduler, format, mapping,
                              period=read_range((at_ns, at_ns)) if at_ns is not None else period)
    chosen_baseline = choose_scheduler(baseline, scheduler, format, mapping) if baseline else None
    opened = open_scheduler(chosen or chosen_baseline)
    dask, baseline_dask = (opened if chosen else None), (opened if chosen_baseline else None)
    baseline_period = None
    if at is not None and dask is None:
        diagnosis, spans, baseline_spans = _diagnosed_periods(store, at_ns)
    elif at is not None:  # the problem period's table and the baseline's built from the store below
        diagnosis, period, baseline_period = _diagnosed_periods(store, at_ns, dask)
    if diagnosis is not None and dask is None:
        read = spans
        tt = build_trace_table(spans, endpoint)
    elif dask is None:
        spans = read = read_input(paths, format, mapping)
        if period is not None:
            spans = select_period(read, *period, "--time")
        tt = build_trace_table(spans, endpoint)
    else:  # built on Dask; the analyses' parallel loops on its workers; the report's examples read from disk
        from ..scale.analyses import on_workers

        tt = trace_table(paths, endpoint, format, mapping, dask, period=period)
        read = tt.input
        spans = read.spans
        keep_open(on_workers(dask))
    if baseline:
        baseline_table = trace_table(baseline, tt.endpoint, format, mapping, baseline_dask)
    elif baseline_spans is not None:
        baseline_table = build_trace_table(baseline_spans, tt.endpoint)
    elif baseline_period is not None:
        baseline_table = trace_table(paths, tt.endpoint, format, mapping, dask, period=baseline_period)
    else:
        baseline_table = None
    report = Report(title or f"Why are requests to {tt.endpoint} slow?",
                    subtitle=f"{tt.n_requests:,} requests to {tt.endpoint}; seed {seed}.",
                    footer=f"tracesleuth {__version__} - " + "; ".join(s.paper for s in specs))
    done: dict[str, dict] = {}
    results: dict = {}
    if diagnosis is not None:
        from ..report.sections.diagnose import build_sections as diagnosis_sections

        for section in diagnosis_sections(diagnosis):
            report.add(section)
        if not json:
            out.print("[bold]Diagnosis[/]")
            out.print(diagnosis.result_.describe(), markup=False)
    for spec in specs:
        est = spec.load("estimator")(random_state=seed)
        given = settings.get(spec.name, {})
        unknown = sorted(set(given) - set(est.get_params()))
        if unknown:
            raise ParameterError(f"--set {spec.name}.{unknown[0]}: {spec.name} has no such setting; its settings "
                                 f"are: {', '.join(sorted(est.get_params()))}")
        est.set_params(**given, **({"annotations": str(annotations)} if spec.needs_annotations else {}))
        t0 = time.perf_counter()
        est.fit(tt, baseline_table) if spec.needs_baseline else est.fit(tt)
        seconds = time.perf_counter() - t0
        context = ReportContext(spans, tt, settings={"seed": seed, **given})
        for section in spec.load("section")(est, context):
            report.add(section)
        done[spec.name] = {"seconds": seconds, **est.result_.to_dict()}
        results[spec.name] = est.result_
        if not json:
            out.print(f"[bold]{escape(spec.title)}[/] ({seconds:.2f} s)")
            out.print(est.result_.describe(), markup=False)
    agreement = ()
    if diagnosis is not None:  # the other sections agree with the diagnosis or say why they differ
        from ..report.sections.diagnose import agreement as diagnosis_agreement
        from ..report.sections.diagnose import agreement_section

        agreement = diagnosis_agreement(diagnosis.result_, results)
        section = agreement_section(diagnosis.result_, results)
        if section is not None:
            report.insert(1, section)
        if not json:
            for row in agreement:
                out.print(row["why"], markup=False)
    report.add(input_section(read, tt))
    path = report.write(output)
    if json:
        emit_json({"report": str(path), "endpoint": tt.endpoint, "requests": tt.n_requests, "analyses": done,
                   **({"diagnosis": diagnosis.result_.to_dict(), "agreement": list(agreement)}
                      if diagnosis is not None else {}),
                   "skipped": {name: f"needs {option}" for name, (option, _, _) in needs.items()}})
        return
    for name, (option, value, why) in needs.items():
        out.print(f"{name}: not run ({why}; give {option} {value})", markup=False)
    out.print(f"Report: {path}", markup=False)


def _register_analyses() -> None:
    """Each registered analysis adds its command and its evaluation command."""
    from ..analyses import ANALYSES

    for spec in ANALYSES:
        spec.load("command")(app, evaluate_app)


_register_analyses()
