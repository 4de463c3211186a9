"""The ``tracesleuth paths`` and ``tracesleuth evaluate paths`` commands (registered in
:mod:`tracesleuth.analyses`); they only call the public API and render its result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from .._common import (WHOLE, Command, FormatOpt, JsonOpt, MappingOpt, NezhaDataOpt, PathsArg, SchedulerOpt, SeedOpt,
                       TimeOpt, choose_scheduler, emit_json, err, open_scheduler, out, progress, root_tables_of,
                       run_evaluation)
from ...errors import ParameterError, TraceFormatError

__all__ = ["read_messages", "register"]


def read_messages(paths: list[Path]):
    """A message log from CSV or JSON Lines files with the columns of
    :data:`~tracesleuth.analyses.paths.messages.MESSAGE_SCHEMA` (``kind`` and ``call_id`` may be empty for free-form
    messages), or from Envoy access logs (:mod:`tracesleuth.analyses.paths.envoy`, told from their first line).

    Raises
    ------
    TraceFormatError
        Naming the file, when it cannot be read or lacks a column.
    """
    import polars as pl

    from ...analyses.paths.messages import MESSAGE_SCHEMA

    schema = {"timestamp_ns": pl.Int64, "sender": pl.String, "receiver": pl.String, "kind": pl.String,
              "call_id": pl.String}
    from ...analyses.paths.envoy import looks_like_envoy, read_envoy_log

    frames = []
    for path in paths:
        try:
            head = path.open(encoding="utf-8", errors="replace").read(4096)
        except OSError as e:
            raise TraceFormatError(str(path), f"cannot read: {e.strerror or e}") from None
        if looks_like_envoy(head):
            frame, rejected = read_envoy_log(path)
            if rejected:
                err.print(f"warning: {path}: {rejected:,} lines not in Envoy's access-log format were left out",
                          markup=False)
            frames.append(frame)
            continue
        try:
            if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
                frame = pl.read_ndjson(path, schema=schema)
            else:
                frame = pl.read_csv(path, schema_overrides=schema)
        except (OSError, pl.exceptions.PolarsError) as e:
            raise TraceFormatError(str(path), f"not a message log: {str(e).splitlines()[0]}") from None
        missing = [c for c in MESSAGE_SCHEMA.names if c not in frame.columns]
        if missing:
            raise TraceFormatError(str(path), f"a message log needs the columns {', '.join(MESSAGE_SCHEMA.names)}; "
                                              f"missing {', '.join(missing)}")
        frames.append(frame.select(MESSAGE_SCHEMA.names).cast(schema))
    return pl.concat(frames)


def paths(paths: PathsArg,
          messages: Annotated[bool, typer.Option("--messages", help="The input is a message log (CSV or JSON Lines: "
                              "timestamp_ns, sender, receiver, kind, call_id; or Envoy access logs, one file per "
                              "proxy, named after its node), not traces.")] = False,
          endpoint: Annotated[Optional[list[str]], typer.Option(
              "--endpoint", "-e", metavar="SERVICE:OPERATION", show_default=False,
              help="Traces only: the requests of this endpoint (repeatable); default: every root endpoint.")] = None,
          algorithm: Annotated[str, typer.Option("--algorithm", metavar="nesting|convolution", help="nesting: "
                               "path patterns from RPC call/return messages; convolution: a causal graph from any "
                               "messages.")] = "nesting",
          top: Annotated[int, typer.Option("--top", metavar="N", help="Path patterns (or causal edges) shown.")] = 10,
          buckets_per_octave: Annotated[int, typer.Option("--buckets-per-octave", metavar="INT", help="Nesting: "
                                        "delay buckets per doubling on the scoreboard.")] = 4,
          quantum: Annotated[str, typer.Option("--quantum", metavar="DURATION", help="Convolution: the time step "
                             "of the edge signals.")] = "1ms",
          max_delay: Annotated[str, typer.Option("--max-delay", metavar="DURATION", help="Convolution: the longest "
                               "delay looked for.")] = "1s",
          time_range: TimeOpt = None, format: FormatOpt = None, mapping: MappingOpt = None,
          scheduler: SchedulerOpt = None, json: JsonOpt = False) -> None:
    """Black-box causal paths (Aguilera et al., SOSP 2003): the call paths of requests and where their
    time goes, from the messages between services alone (nesting algorithm), or the causal graph
    with its delays (convolution algorithm). Given traces, their trace ids are dropped first, and
    how much of the truth was recovered is printed."""
    from ...analyses._contract import check_settings
    from ...analyses.paths.analysis import CausalPaths

    from ...units import parse_duration

    est = CausalPaths(algorithm=algorithm, buckets_per_octave=buckets_per_octave, top_n=top,
                      quantum_ns=parse_duration(quantum), max_delay_ns=parse_duration(max_delay))
    check_settings(est)
    if messages:
        if endpoint or time_range or scheduler not in (None, WHOLE):
            given = '--endpoint' if endpoint else '--time' if time_range else '--scheduler'
            raise ParameterError(f"{given} selects or builds traces' requests; a message log has no endpoints or "
                                 "traces")
        data = read_messages(paths)
    else:
        data, _ = root_tables_of(paths, endpoint, format, mapping, time_range,
                                 open_scheduler(choose_scheduler(paths, scheduler, format, mapping)))
    t0 = time.perf_counter()
    with progress(algorithm) as bar:
        bar.add_task(algorithm, spans=0)
        res = est.fit(data).result_
    seconds = time.perf_counter() - t0
    if json:
        emit_json({"seconds": seconds, **res.to_dict()})
        return
    out.print(res.describe(), markup=False)
    t = Table(title="Node latencies of the most frequent path", title_justify="left")
    if res.patterns and algorithm == "nesting":
        for c in ("node", "latency (median)", "latency (p95)", "call delay (median)"):
            t.add_column(c, justify="left" if c == "node" else "right")
        from ...units import format_duration_ns as ns
        from ...analyses.paths.analysis import _preorder

        p = res.patterns[0]
        for name, n in zip(_preorder(p.tree), p.nodes):
            t.add_row(escape(name), ns(n["latency_median_ns"]), ns(n["latency_p95_ns"]), ns(n["delay_median_ns"]))
        out.print(t)
    out.print(f"{seconds:.2f} s.", markup=False)


def evaluate_paths(
        quick: Annotated[bool, typer.Option("--quick", help="500 requests per gap, 8 TrainTicket windows.")] = False,
        data: NezhaDataOpt = None, seed: SeedOpt = 0, json: JsonOpt = False) -> None:
    """Black-box causal paths: recovery of the true paths against parallelism (simulated requests)
    and on TrainTicket traces made black-box, per entry."""
    from ...evaluation.protocols.paths import evaluate

    run_evaluation(evaluate, quick=quick, seed=seed, data=data, json=json)


def register(app: typer.Typer, evaluate_app: typer.Typer) -> None:
    """Add ``paths`` to ``app`` and to ``evaluate_app`` (the registry's ``command``)."""
    app.command("paths", cls=Command)(paths)
    evaluate_app.command("paths", cls=Command)(evaluate_paths)
