"""What every command of the ``tracesleuth`` command line shares: the typer app's help rendering,
the consoles, the options common to commands, JSON output and reading trace input.

Analyses add their commands from their own ``command`` module (see :mod:`tracesleuth.analyses`)
with these pieces, so the CLI's look and its rules (``--json``, one-line errors) are the same
everywhere.
"""

from __future__ import annotations

import inspect
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.console import Console

from ..errors import ParameterError, TraceSleuthError

__all__ = ["BOOLEAN_WORDS", "Command", "EndpointOpt", "FormatOpt", "Group", "JsonOpt", "MappingOpt", "NezhaDataOpt",
           "PATHS", "PathsArg", "SeedOpt", "check_paths", "emit_json", "err", "out", "parse_time_range", "progress",
           "read_input", "run_evaluation", "select_period", "write_frame"]


class Command(typer.core.TyperCommand):
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


class Group(typer.core.TyperGroup):
    """The command groups: their flags (``--help``, ``--version``) show no ``<bool>``."""

    def get_params(self, ctx) -> list:
        params = super().get_params(ctx)
        for param in params:
            _tidy_help(param)
        return params


def _tidy_help(param) -> None:
    if getattr(param, "is_flag", False) and param.metavar is None:
        param.metavar = ""  # a flag takes no value: nothing to show after its name
    if param.param_type_name == "argument" and param.metavar and "display_type_rich" in dir(type(param)):
        param.display_type_rich = lambda ctx: None  # the metavar already says what goes there


out = Console(highlight=False, soft_wrap=False, width=200 if not sys.stdout.isatty() else None)
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
SeedOpt = Annotated[int, typer.Option("--seed", metavar="INT", help="Random seed (same seed, same result).")]
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


def parse_time_range(text: str, option: str) -> tuple[int, int]:
    """``"2023-01-29T08:40/2023-01-29T08:42"`` (ISO 8601, UTC unless an offset is given; or Unix
    seconds) -> ``(start_ns, end_ns)``, half-open.

    Raises
    ------
    ParameterError
        Naming ``option`` and what was given, when it is not ``START/END`` with START < END.
    """
    def instant(part: str) -> int:
        part = part.strip()
        try:
            return int(float(part) * 1e9)
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(part)
        except ValueError:
            raise ParameterError(f"{option} {text!r}: {part!r} is neither an ISO 8601 time "
                                 "(2023-01-29T08:40:00) nor Unix seconds") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return int(moment.timestamp() * 1e9)

    start, sep, end = text.partition("/")
    if not sep:
        raise ParameterError(f"{option} {text!r}: write START/END, e.g. 2023-01-29T08:40/2023-01-29T08:42")
    low, high = instant(start), instant(end)
    if low >= high:
        raise ParameterError(f"{option} {text!r}: the start must come before the end")
    return low, high


def select_period(spans, low_ns: int, high_ns: int):
    """The spans of the traces that start in ``[low_ns, high_ns)`` (a trace starts at its first span).

    Parameters
    ----------
    spans : SpanReadResult or pyarrow.Table
        Spans in :data:`tracesleuth.schema.SPAN_SCHEMA` (plain or dictionary-encoded strings).

    Returns
    -------
    pyarrow.Table
        The selected spans, every span of a selected trace included.
    """
    import polars as pl

    table = getattr(spans, "spans", spans)
    frame = pl.from_arrow(table.select(["trace_id", "start_ns"]))
    starts = frame.group_by("trace_id").agg(pl.col("start_ns").min())
    chosen = starts.filter(pl.col("start_ns").is_between(low_ns, high_ns, closed="left"))["trace_id"]
    keep = pl.from_arrow(table.column("trace_id")).is_in(chosen.implode() if hasattr(chosen, "implode") else chosen)
    return table.filter(keep.to_arrow())


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
