"""What every command of the ``tracesleuth`` command line shares: the typer app's help rendering,
the consoles, the options common to commands, JSON output and reading trace input.

Each analysis's command is a module of :mod:`tracesleuth.cli.commands` (registered in
:mod:`tracesleuth.analyses`), built with these pieces, so the CLI's look and its rules (``--json``, one-line errors) are the same
everywhere.
"""

from __future__ import annotations

import inspect
import re
import signal
import sys
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Iterator, Optional

import orjson
import typer
from rich.console import Console

from ..errors import ParameterError, TraceSleuthError
from ..units import parse_instant, parse_time_range, utc_text
from ._examples import epilog

__all__ = ["BOOLEAN_WORDS", "Command", "CommandInterrupted", "EndpointOpt", "EndpointsOpt", "FormatOpt", "Group", "JsonOpt", "MappingOpt", "NezhaDataOpt",
           "PATHS", "PathsArg", "SchedulerOpt", "SeedOpt", "WHOLE", "check_paths", "choose_scheduler",
           "command_scope", "dask_scheduler", "emit_json", "err", "input_store", "keep_open", "open_scheduler", "out", "parse_instant", "parse_time_range", "progress", "read_period",
           "read_input", "root_tables_of", "run_evaluation", "select_period", "TimeOpt", "trace_table", "write_frame"]


class CommandInterrupted(BaseException):
    """A command stopped by SIGINT or SIGTERM, on its way to :func:`tracesleuth.cli.app.run`
    (which says so in one line and exits ``128 + signum``); ``starting``: before the command ran."""

    def __init__(self, signum: int, *, starting: bool = False):
        self.signum = signum
        self.starting = starting
        super().__init__(signum)


class _CarriesInterrupts:
    """Typer turns a KeyboardInterrupt into a silent exit 130 (SIGTERM's too, which
    :func:`tracesleuth.cli.main` raises as one): carried past it instead, as
    :class:`CommandInterrupted`, for :func:`tracesleuth.cli.app.run` to report. A group's (the
    command line's parsing, choosing the command) is one before any command ran."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt as e:
            raise CommandInterrupted(getattr(e, "signum", signal.SIGINT), starting=True) from e

    def invoke(self, ctx):
        group = isinstance(self, typer.core.TyperGroup)
        if not group and (scope := _OPEN.get()) is not None:
            scope.began = True
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            raise CommandInterrupted(getattr(e, "signum", signal.SIGINT), starting=group) from e


class _WithExamples:
    """Help that ends with the command's examples (:data:`._examples.EXAMPLES`)."""

    def format_help(self, ctx, formatter) -> None:
        self.epilog = self.epilog or epilog(_command_path(ctx))
        super().format_help(ctx, formatter)


class Command(_CarriesInterrupts, _WithExamples, typer.core.TyperCommand):
    """A command whose help reads as a person would write it.

    Typer 0.29 writes a required argument ``{paths}...`` in the usage line, the annotation's
    type (``<list[Path]>``) beside an argument that has a metavar, and ``<bool>`` beside every
    flag, ``--help`` included (older Typer, on external Click, does not). There is no setting
    for it, so the usage line is built here (``PATH...``, optional ones in ``[]``)
    and a parameter that names itself by its metavar, or takes no value, shows no type.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.help:  # a docstring's line breaks are not the help's: keep only paragraph breaks
            self.help = re.sub(r"(?<!\n)\n(?!\n)", " ", inspect.cleandoc(self.help))

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                continue
            name = param.metavar or param.name.upper()
            if param.nargs != 1 and not name.endswith("..."):
                name += "..."
            pieces.append(name if param.required else f"[{name}]")
        return pieces

    def get_params(self, ctx) -> list:
        params = super().get_params(ctx)
        for param in params:
            _tidy_help(param)
        return params


class Group(_CarriesInterrupts, _WithExamples, typer.core.TyperGroup):
    """The command groups: their flags (``--help``, ``--version``) show no ``<bool>``."""

    def get_params(self, ctx) -> list:
        params = super().get_params(ctx)
        for param in params:
            _tidy_help(param)
        return params


def _command_path(ctx) -> str:
    """``"annotate derive"`` for ``tracesleuth annotate derive`` (``""`` for the top level)."""
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(reversed(names))


def _tidy_help(param) -> None:
    if getattr(param, "is_flag", False) and param.metavar is None:
        param.metavar = ""  # a flag takes no value: nothing to show after its name
    if param.param_type_name == "argument" and param.metavar and "display_type_rich" in dir(type(param)):
        param.display_type_rich = lambda ctx: None  # the metavar already says what goes there


#: Into a pipe or a file: tables 200 columns wide, and a line of text is never broken (a long path
#: in a message stays whole for grep and for a reader of the log); on a terminal, its width.
out = Console(highlight=False, soft_wrap=not sys.stdout.isatty(), width=200 if not sys.stdout.isatty() else None)
err = Console(stderr=True, highlight=False, soft_wrap=True)  # soft wrap: an error stays one line

#: The metavar of the trace-input argument of every reading command.
PATHS = "PATH..."
PathsArg = Annotated[list[Path], typer.Argument(help="Trace files, directories, glob patterns or a span store.",
                                                metavar=PATHS, show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one machine-readable JSON document instead.")]
FormatOpt = Annotated[Optional[str], typer.Option("--format", metavar="FORMAT", show_default=False,
                                                  help="Force an input format (otlp-json, otlp-proto, jaeger-json, "
                                                  "zipkin-json, csv, parquet, mi-log); default: from "
                                                  "content.")]
MappingOpt = Annotated[Optional[str], typer.Option("--mapping", metavar="PRESET", show_default=False,
                                                   help="CSV/Parquet column mapping preset (canonical, nezha); "
                                                   "default: the first that fits the header.")]
EndpointOpt = Annotated[Optional[str], typer.Option("--endpoint", "-e", metavar="SERVICE:OPERATION", show_default=False,
                                                    help="Operation key 'service:operation' (or a unique operation "
                                                    "name) requests enter by; default: the most frequent root "
                                                    "operation.")]
EndpointsOpt = Annotated[Optional[list[str]], typer.Option(
    "--endpoint", "-e", metavar="SERVICE:OPERATION", show_default=False,
    help="Only the requests entering by this operation (repeatable); default: every root endpoint.")]
TimeOpt = Annotated[Optional[str], typer.Option(
    "--time", metavar="START/END", show_default=False,
    help="Only the requests whose trace starts in this period (ISO 8601, UTC unless an offset is given, or Unix "
         "seconds), e.g. 2023-01-29T08:43/2023-01-29T08:46.")]
SeedOpt = Annotated[int, typer.Option("--seed", metavar="INT", help="Random seed (same seed, same result).")]
SchedulerOpt = Annotated[Optional[str], typer.Option(
    "--scheduler", metavar="serial|whole|local|threads|ADDRESS", show_default=False,
    help="Build the trace table (diagnose: its spans' and requests' rows) from a span store partition by "
         "partition: 'serial', in this process one "
         "partition after another (no Dask; memory of one partition, not of the store); on Dask: 'local', a "
         "cluster of this machine started for the command; 'threads', threads of this process; or a running "
         "scheduler's address (tcp://host:8786). Or 'whole': the input read whole in this process, faster "
         "(serial takes 1.2-1.6 times as long) but in the memory of the whole input; use it when that fits. "
         "Default: 'serial' for one span store of more spans than one partition (500,000), else 'whole'.")]
NezhaDataOpt = Annotated[Optional[Path], typer.Option("--data", metavar="DIR", show_default=False,
                                                      help="The Nezha data (TrainTicket, OnlineBoutique) for the "
                                                      "real-data part; default: ../shared/data/nezha when present.")]


def run_evaluation(evaluate, *, quick: bool, seed: int, data: Path | None, json: bool) -> None:
    """Run an analysis's evaluation protocol and print its result (``describe()`` or ``--json``)."""
    with progress("evaluating") as bar:
        bar.add_task("eval", spans=0)
        ev = evaluate(quick=quick, random_state=seed, data_dir=data)
    if json:
        emit_json(ev.to_dict())
        return
    out.print(ev.describe(), markup=False)


def emit_json(doc) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY,
                                  default=str).decode() + "\n")


def progress(label: str):
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn(label + " [bold]{task.fields[spans]:,}[/] spans"),
                    TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal)


def check_paths(paths: list[Path]) -> None:
    """Fail, before anything is read or created, on a path that names nothing."""
    from ..io import expand_paths

    # A 'true' after a flag first: the error then says that the flag takes no value.
    for path in sorted(paths, key=lambda p: str(p).lower() not in BOOLEAN_WORDS):
        expand_paths(path)  # raises TraceFormatError naming the path


def read_input(paths: list[Path], fmt: str | None, mapping: str | None):
    """:func:`tracesleuth.io.read_spans`, with a progress display on a terminal."""
    from ..io import read_spans

    check_paths(paths)
    with progress("reading") as bar:
        task = bar.add_task("read", spans=0)
        seen = [0]

        def tick(batch) -> None:
            seen[0] += batch.num_rows
            bar.update(task, spans=seen[0])

        return read_spans([str(p) for p in paths], format=fmt, mapping=mapping, on_batch=tick)


def read_period(paths: list[Path], fmt: str | None, mapping: str | None, time_range: str | None):
    """:func:`read_input`, then only the traces that start in ``--time`` when it is given
    (:func:`select_period`: an empty period is an error naming it)."""
    spans = read_input(paths, fmt, mapping)
    return select_period(spans, *parse_time_range(time_range, "--time"), "--time") if time_range else spans


@contextmanager
def dask_scheduler(scheduler: str | None) -> Iterator:
    """The Dask scheduler of ``--scheduler`` for a command (None when not given): its dashboard's
    link on stderr, a progress bar per step on a terminal; what the command keeps
    (:meth:`~tracesleuth.scale.cluster.Scheduler.keep`) closed at the end."""
    if scheduler is None:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..scale import connect

    bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err, transient=True, disable=not err.is_terminal)
    steps: dict = {}

    def on_progress(label: str, done: int, total: int) -> None:
        if label not in steps:
            steps[label] = bars.add_task(label, total=total)
        bars.update(steps[label], completed=done, total=total)

    with bars, connect(scheduler, on_progress=on_progress) as chosen:
        if chosen.dashboard:
            err.print(f"Dask dashboard: {chosen.dashboard}", markup=False)
        yield chosen


class CommandScope(ExitStack):
    """What the running command keeps open until it ends (:func:`keep_open`), and whether a
    command began (``began``: its invocation was entered; before, nothing was done)."""

    began = False


_OPEN: ContextVar[CommandScope | None] = ContextVar("tracesleuth_command_scope", default=None)


@contextmanager
def command_scope() -> Iterator[CommandScope]:
    """Close what a command opened with :func:`keep_open` when it ends, however it ends
    (:func:`tracesleuth.cli.app.run` runs every command in one)."""
    with CommandScope() as scope:
        token = _OPEN.set(scope)
        try:
            yield scope
        finally:
            _OPEN.reset(token)


def keep_open(context):
    """Enter a context manager for the rest of the running command; its value."""
    stack = _OPEN.get()
    if stack is None:
        raise RuntimeError("keep_open is for commands run by tracesleuth.cli.app.run (in a command_scope)")
    return stack.enter_context(context)


#: ``--scheduler whole``: the input read whole, in this process.
WHOLE = "whole"


def choose_scheduler(paths: list[Path], scheduler: str | None, fmt: str | None = None,
                     mapping: str | None = None, period: tuple[int, int] | None = None) -> str | None:
    """The scheduler a command builds its input's tables with (for :func:`dask_scheduler`), or
    None to read the input whole in this process. The one rule of every command that takes
    ``--scheduler``.

    Parameters
    ----------
    paths : list of Path
        The input (one of a command's inputs: ``compare`` and ``analyze --baseline`` choose for
        each).
    scheduler : str or None
        ``--scheduler`` as given: ``"whole"`` reads whole; any other value is kept (checked by
        :func:`tracesleuth.scale.connect`); None chooses by the input.
    fmt, mapping : str or None
        ``--format`` and ``--mapping``: given, the input is read whole (a store's spans are in the
        canonical schema already; ``--scheduler`` refuses them).
    period : (int, int), optional
        Only the spans of the store's hours that may hold traces starting in ``[low_ns, high_ns)``
        are counted (a command that reads only those: ``diagnose``).

    Returns
    -------
    str or None
        By default ``"serial"`` when the input is one span store holding more spans than one
        partition (:data:`~tracesleuth.model.table.PARTITION_SPANS`, counted from the parts'
        footers): partition by partition in this process, in the memory of one partition instead
        of the whole store (localizing 10^6 requests, 11.6 million spans: 2.95 GB against 4.8 GB
        peak, 1.2-1.6 times as long; docs/scale-out.md). Else None: trace files, and a store within
        one partition (one partition would only add the split's work), are read whole.

    Raises
    ------
    ParameterError
        ``scheduler`` is empty: the message names the values it takes.
    """
    if scheduler == WHOLE:
        return None
    if scheduler is not None and not scheduler.strip():
        raise ParameterError(f"--scheduler: give '{WHOLE}', 'serial', 'local', 'threads' or a Dask scheduler's "
                             f"address (tcp://host:8786); got {scheduler!r}")
    if scheduler is not None:
        return scheduler
    from ..io.store import SpanStore, is_store
    from ..model import table

    if fmt or mapping or len(paths) != 1 or not is_store(paths[0]):
        return None
    if period is None:
        n_spans = SpanStore(paths[0], create=False).count_spans()
    else:
        from ..scale.spans import store_parts

        n_spans = store_parts(paths[0]).during(*period).n_spans
    return "serial" if n_spans > table.PARTITION_SPANS else None


def open_scheduler(scheduler: str | None):
    """:func:`dask_scheduler` for the rest of the running command (None when ``scheduler`` is None)."""
    return None if scheduler is None else keep_open(dask_scheduler(scheduler))


def trace_table(paths: list[Path], endpoint: str | None, fmt: str | None, mapping: str | None, scheduler=None,
                *, period: tuple[int, int] | None = None, option: str = "--time", collect: bool = True):
    """The trace table of an input: read and built in this process, or, with a scheduler
    (:func:`dask_scheduler`), built on Dask from a span store and collected (its call view built
    on Dask too, while the scheduler is open).

    Parameters
    ----------
    period : (int, int), optional
        Only the traces that start in ``[low_ns, high_ns)``; with a scheduler also a sequence of
        such ranges (:func:`~tracesleuth.scale.table.shuffle_by_trace`).
    option : str, default="--time"
        The option that gave ``period``, named when no trace starts in it (in this process).
    collect : bool, default=True
        With a scheduler: collect the table (False: the :class:`~tracesleuth.scale.DaskTraceTable`).

    Raises
    ------
    ParameterError
        With a scheduler: the input is not one span store, or ``--format``/``--mapping`` is given.
    """
    from ..model import build_trace_table

    if scheduler is None:
        spans = read_input(paths, fmt, mapping)
        return build_trace_table(select_period(spans, *period, option) if period else spans, endpoint)
    from ..scale import dask_trace_table

    table = scheduler.keep(dask_trace_table(input_store(paths, fmt, mapping), endpoint, scheduler=scheduler,
                                            period=period))
    return table.to_trace_table() if collect else table


def root_tables_of(paths: list[Path], endpoint, fmt: str | None, mapping: str | None, time_range: str | None,
                   scheduler=None, columns=None) -> tuple[list, dict]:
    """One trace table per root endpoint of an input (:func:`tracesleuth.model.root_tables`): read
    whole in this process, or, with a scheduler (:func:`dask_scheduler`), built partition by
    partition from one span store and collected (only ``columns`` of them, when given, besides the
    row order's), their call views built from the partitions while the scheduler is open.
    ``--time`` selects the traces that start in it either way.

    Raises
    ------
    ParameterError
        As :func:`read_period`; with a scheduler, as :func:`input_store`.
    """
    from ..model import root_tables

    if scheduler is None:
        return root_tables(read_period(paths, fmt, mapping, time_range), endpoint)
    from ..scale.table import shuffle_by_trace

    period = parse_time_range(time_range, "--time") if time_range else None
    partitions = scheduler.keep(shuffle_by_trace(input_store(paths, fmt, mapping), scheduler=scheduler, period=period))
    return root_tables(partitions, endpoint, build=lambda p, e: p.table(e).to_trace_table(columns))


def input_store(paths: list[Path], fmt: str | None = None, mapping: str | None = None) -> Path:
    """The one span store ``--scheduler`` reads (trace files are ingested first)."""
    from ..io.store import is_store

    check_paths(paths)
    if fmt or mapping:
        raise ParameterError("--scheduler reads a span store, whose spans are in the canonical schema already: "
                             "leave out --format and --mapping")
    if len(paths) != 1 or not is_store(paths[0]):
        raise ParameterError(f"--scheduler reads one span store; got {', '.join(map(str, paths))} (make one with: "
                             "tracesleuth ingest FILES -o STORE)")
    return paths[0]


def select_period(spans, low_ns: int, high_ns: int, option: str | None = None):
    """The spans of the traces that start in ``[low_ns, high_ns)``
    (:func:`tracesleuth.model.table.traces_starting_between`).

    Raises
    ------
    ParameterError
        When ``option`` (the option that gave the period, e.g. ``"--time"``) is given and no trace
        starts in the period: naming the period asked and the period the input covers.
    """
    import pyarrow.compute as pc

    from ..model.table import traces_starting_between

    spans = getattr(spans, "spans", spans)
    chosen = traces_starting_between(spans, low_ns, high_ns)
    if option is not None and chosen.num_rows == 0:
        covered = ("it holds no span" if spans.num_rows == 0 else "it holds spans from "
                   f"{utc_text(pc.min(spans['start_ns']).as_py())} to {utc_text(pc.max(spans['start_ns']).as_py())}")
        raise ParameterError(f"{option} {utc_text(low_ns)}/{utc_text(high_ns)}: no trace of the input starts then; "
                             f"{covered}")
    return chosen


BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0"})




def write_frame(frame, path: Path) -> Path:
    """Write a polars DataFrame as ``.csv`` or ``.parquet`` (by the file name).

    Raises
    ------
    TraceSleuthError
        When the file name ends in neither.
    """
    suffix = path.suffix.lower()
    if suffix == ".csv":
        frame.write_csv(path)
    elif suffix in (".parquet", ".pq"):
        frame.write_parquet(path)
    else:
        raise TraceSleuthError(f"--output {path}: the file name must end in .parquet or .csv")
    return path
