"""The trace table of a span store, partition by partition: the same table as
:func:`~tracesleuth.model.build_trace_table`, on Dask or (``serial``) in this process in bounded memory.

Three steps, each a task per partition (a Dask task, or one after another in this process for the
``serial`` scheduler), each writing its own files (a temporary name, then an atomic rename: a task
run again after its worker died writes the same file again):

1. **Split by trace id**, in two halves of tasks. Each task of the first reads consecutive row
   groups of the store's parts (Hive partitions by time, a trace's spans in any of them), about
   ``partition_spans`` spans, and writes them to one piece sorted by partition (``hash(trace_id)
   mod n``, ``n = ceil(n_spans / partition_spans)``), one record batch per partition
   (:func:`_split_piece`); each task of the second gathers one partition's batch from every
   piece into a partition of whole traces (:func:`_gather_partition`). Pieces and partitions are
   Arrow IPC files (:data:`BY_TRACE_IPC`): each is written once and read once or twice, and a
   piece's batch is read without reading the rest of the piece. No Dask shuffle: the nested
   columns (attributes, events, links) stay Arrow, the work directory (shared by every worker) is
   the exchange, and a rerun task rewrites its own file. Each
   partition also reports its root operations (the same
   :func:`~tracesleuth.model.table.root_endpoints` as in-process); their sum
   (:func:`~tracesleuth.model.table.merge_endpoints`) gives the most frequent one.
2. **Requests.** Each partition is encoded, assembled (duplicates, orphans, clock skew:
   :func:`~tracesleuth.model.assembly.assemble_codes`) and turned into its requests
   (:func:`~tracesleuth.model.table.partition_requests`), written with the entry spans'
   attributes; it reports its assembly counts, its operation columns and a summary of those
   attributes (:func:`~tracesleuth.model.attributes.attribute_summary`). The reductions of these
   give the table's operation columns and its ``attr[...]``/``num[...]`` columns, chosen over every
   request as in-process.
3. **Table.** Each partition's requests get the whole table's columns
   (:func:`~tracesleuth.model.table.with_table_columns`,
   :func:`~tracesleuth.model.attributes.attribute_frame`) and are written as one part of the
   table: a Parquet dataset of one part per partition, each part in table order (start, trace
   id, span id). The table's rows are those of the in-process table; collected
   (:meth:`DaskTraceTable.to_trace_table`) and sorted, it is equal to it.

A collected table's **call view** is built the same way, a task per partition from the spans split
by trace id (:meth:`DaskTraceTable.calls`), with, when an analysis asks, more columns of the calls'
spans computed in that task from the partition's spans (``span_columns``: performance annotations
read the attributes there), and read back here a column at a time
(:func:`in_request_order_from_files`).

Memory: a task holds one partition (``partition_spans`` spans, 500,000 by default: a few
hundred MB); the client holds only the reductions (and the collected tables and call views the
analyses read). Disk, measured on a synthetic store of 10^7 spans (311 MB of zstd Parquet parts):
the partitions (lz4-compressed Arrow) take 846 MB, 2.7 times the store; at the split's peak the
work directory also holds the pieces (uncompressed), 2,514 MB in all, 8.1 times the store.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import schema as S
from ..errors import EmptyDataError, ParameterError
from ..model.assembly import AssemblyReport, assemble_codes, attributes_of
from ..model.attributes import attribute_frame, attribute_summary, choose_columns, merge_attribute_summaries
from ..model._codes import SOURCE_ROW, encode_spans, narrow_spans, take_rows
from ..model.table import (EXCLUSIVE_PREFIX, INSTANCE_PREFIX, MAX_CATEGORIES, PARTITION_SPANS, TraceTable,
                           column_key, merge_endpoints, partition_requests, resolve_endpoint, root_endpoints,
                           traces_starting_between, with_table_columns)
from .cluster import Scheduler
from .spans import LIGHT_COLUMNS_LEFT_OUT, StoreParts, read_part, store_parts

__all__ = ["CollectedTraceTable", "DaskTraceTable", "StoreSpans", "TracePartitions", "dask_trace_table",
           "shuffle_by_trace"]

#: Row order of a trace table (as in-process).
ORDER = [S.START_NS, S.TRACE_ID, S.SPAN_ID]
#: The entry spans' attributes, carried from step 2 to step 3.
_ATTRIBUTES = "_entry_attributes"
#: How the spans split by trace id are written (pieces and partitions): Arrow IPC files, read once
#: or twice then deleted, so fast to write and read rather than small. Measured on 500,000 spans of
#: the synthetic store (CPU s): Parquet with lz4 0.25 to write and 0.10 to read, 25 MB; IPC with
#: lz4 0.10 and 0.07, 43 MB; uncompressed IPC 0.03 and 0.05 but 85 MB (twice the disk).
BY_TRACE_IPC = pa.ipc.IpcWriteOptions(compression="lz4")
#: The pieces, written and read once within the split then deleted: uncompressed (a piece's batch is
#: then read from the page cache without a copy); 0.13 task-seconds less per 500,000-span partition
#: on the 2-worker LocalCluster, for twice the pieces' disk at the split's peak.
PIECE_IPC = pa.ipc.IpcWriteOptions(compression=None)
#: Table-part number of each row, when a table is collected.
PART = "_part"


@dataclass
class DaskTraceTable:
    """The trace table of one endpoint, built on Dask: a Parquet dataset of one part per partition
    of whole traces.

    Attributes
    ----------
    path : Path
        The table's directory (``part-<k>.parquet`` files).
    parts : tuple of Path
        The table's parts, one per trace partition with requests.
    part_rows : tuple of int
        Requests in each part.
    slowest_ns : int
        The largest latency of the table, ns.
    endpoint, operations, assembly, endpoints, dropped_attributes
        As :class:`~tracesleuth.model.TraceTable`'s.
    n_requests : int
    n_spans : int
        Spans read from the store.
    by_trace : tuple of Path
        The spans shuffled by trace id, the partition of each part (read again by :meth:`calls`).
    scheduler : Scheduler
    workdir : Path
        The work directory of the partitions it was built from.
    owns_workdir : bool
        Whether :meth:`close` removes the work directory (else only the table's parts).
    """

    path: Path
    parts: tuple
    part_rows: tuple
    slowest_ns: int
    endpoint: str
    operations: tuple
    assembly: AssemblyReport
    endpoints: dict
    dropped_attributes: tuple
    n_requests: int
    n_spans: int
    by_trace: tuple = field(repr=False)
    scheduler: Scheduler = field(repr=False)
    workdir: Path = field(repr=False)
    partition_spans: int = field(default=PARTITION_SPANS, repr=False)
    owns_workdir: bool = field(default=False, repr=False)
    store: Path | None = field(default=None, repr=False)

    @property
    def columns(self) -> list[str]:
        """The table's column names, in order."""
        return pq.read_schema(self.parts[0]).names

    @property
    def frame(self):
        """The table as a Dask dataframe (one partition per part; read lazily)."""
        import dask.dataframe as dd

        return dd.read_parquet([str(p) for p in self.parts], dtype_backend="pyarrow")

    def to_trace_table(self, columns: Sequence[str] | None = None) -> "CollectedTraceTable":
        """The table in this process, in table order: equal to the in-process table's frame.

        Parameters
        ----------
        columns : sequence of str, optional
            Only these columns (and those of the row order), to collect less of a wide table.

        Returns
        -------
        CollectedTraceTable
            Its :meth:`~CollectedTraceTable.calls` are built on Dask when first asked for.
        """
        wanted = None if columns is None else list(dict.fromkeys([*ORDER, *columns]))
        frames = [pl.read_parquet(p, columns=wanted).with_columns(pl.lit(k, pl.Int32).alias(PART))
                  for k, p in enumerate(self.parts)]
        frame = pl.concat(frames).sort(ORDER)
        return CollectedTraceTable(
            frame=frame.drop(PART), endpoint=self.endpoint, operations=self.operations, assembly=self.assembly,
            endpoints=self.endpoints, dropped_attributes=self.dropped_attributes,
            partition_spans=self.partition_spans, source=self, part_of_row=frame[PART].to_numpy())

    def calls(self, part_of_row: np.ndarray, requests: pl.DataFrame, *, span_columns=None,
              columns: Sequence[str] | None = None) -> pl.DataFrame:
        """The call view (:meth:`TraceTable.calls <tracesleuth.model.TraceTable.calls>`) of collected
        requests, built on Dask from the spans shuffled by trace id.

        Parameters
        ----------
        part_of_row : ndarray of int, shape (n_requests,)
            The table part of each request.
        requests : polars.DataFrame
            ``trace_id``, ``span_id`` of each request, in collected-table order.
        span_columns : callable, optional
            ``span_columns(spans) -> polars.DataFrame``: more columns of the calls' spans, computed
            and joined per partition (:func:`~tracesleuth.model.flows.with_span_columns`) by the
            task that builds the partition's calls; it must be importable by the workers (a
            module-level function).
        columns : sequence of str, optional
            Only these columns, in this order, read from the partitions' calls (the others are
            never in this process).

        Returns
        -------
        polars.DataFrame
            Shape (n_calls, 19 + n_added): the added columns are those of any partition (null
            where a partition's spans have none), sorted by name; with ``columns``, those.
        """
        folder = Path(tempfile.mkdtemp(prefix="calls-", dir=self.workdir))
        try:
            tasks = [(self.by_trace[k], self.endpoint, rows, self.partition_spans,
                      folder / f"calls-{k:06d}.arrow", span_columns)
                     for k, rows in _request_files(folder, part_of_row, requests)]
            return in_request_order_from_files(self.scheduler.map(_calls_part, tasks, "building the call view"),
                                               columns)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def map_calls(self, part_of_row: np.ndarray, requests: pl.DataFrame, fn, *, columns: Sequence[str] | None = None,
                  request_columns: pl.DataFrame | None = None) -> list:
        """``fn`` applied to each partition's calls in the task that builds them
        (:meth:`TraceTable.map_calls <tracesleuth.model.TraceTable.map_calls>`).

        Parameters
        ----------
        part_of_row, requests
            As for :meth:`calls`.
        fn : callable
            ``fn(calls) -> object``, importable by the workers; its results come back.
        columns : sequence of str, optional
        request_columns : polars.DataFrame, optional
            Shape (n_requests, k), in collected-table order: each task is given its partition's
            rows.

        Returns
        -------
        list
            ``fn``'s results, one per partition with requests, in partition order.
        """
        folder = Path(tempfile.mkdtemp(prefix="calls-", dir=self.workdir))
        try:
            tasks = [(self.by_trace[k], self.endpoint, rows, self.partition_spans, fn, columns)
                     for k, rows in _request_files(folder, part_of_row, requests, request_columns)]
            return self.scheduler.map(_map_calls_part, tasks, "reducing the call view")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def to_parquet(self, path) -> Path:
        """Copy the table's parts into the directory ``path`` (made, whole or not at all; it must not
        exist): a Parquet dataset any reader takes (``polars.read_parquet(path)``)."""
        path = Path(path)
        if path.exists():
            raise ParameterError(f"--output {path}: exists; give a new directory for the table's parts")
        staging = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
        staging.mkdir(parents=True)
        try:
            for k, part in enumerate(self.parts):
                shutil.copyfile(part, staging / f"part-{k:06d}.parquet")
            os.replace(staging, path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return path

    def close(self) -> None:
        """Remove the table's parts, and the work directory when the table was made by
        :func:`dask_trace_table` (a table made by :meth:`TracePartitions.table` leaves the
        partitions to their own :meth:`~TracePartitions.close`)."""
        shutil.rmtree(self.workdir if self.owns_workdir else self.path, ignore_errors=True)

    def __enter__(self) -> "DaskTraceTable":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class StoreSpans:
    """What a report says of the input of a Dask-built table (as a
    :class:`~tracesleuth.io.SpanReadResult` would), without the spans in memory.

    Attributes
    ----------
    spans : pyarrow.dataset.Dataset
        The spans shuffled by trace id (a Gantt chart's few traces are read by a filter).
    rejects : pyarrow.Table
        The store's rejected records (REJECT_SCHEMA).
    n_spans : int
        Spans read from the store.
    spans_rejected : int
        Spans the store's ingests rejected (its manifest's counts).
    formats : dict
        Empty: the store's files were read when they were ingested.
    """

    spans: object
    rejects: pa.Table
    n_spans: int
    spans_rejected: int
    formats: dict = field(default_factory=dict)

    @classmethod
    def of(cls, table: "DaskTraceTable", store) -> "StoreSpans":
        """The input of ``table``, built from the span store ``store``."""
        import pyarrow.dataset as ds

        from ..io.store import SpanStore

        store = SpanStore(store, create=False)
        rejected = sum(e.get("spans_rejected", 0) for e in store.manifest().get("ingests", []))
        return cls(ds.dataset([str(p) for p in table.by_trace], format="ipc"), store.read_rejects(),
                   table.n_spans, rejected)


@dataclass(frozen=True)
class CollectedTraceTable(TraceTable):
    """A :class:`~tracesleuth.model.TraceTable` collected from a :class:`DaskTraceTable`: the same
    frame; its :meth:`calls` are built on Dask (while the Dask table is not closed)."""

    source: DaskTraceTable | None = field(default=None, repr=False, compare=False)
    part_of_row: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def input(self) -> StoreSpans:
        """The table's input, for a report (:class:`StoreSpans`)."""
        return StoreSpans.of(self.source, self.source.store)

    def calls(self, *, span_columns=None, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """The call view (as :meth:`TraceTable.calls <tracesleuth.model.TraceTable.calls>`), built on
        Dask from the spans shuffled by trace id when first asked for, and kept.

        Parameters
        ----------
        span_columns : callable, optional
            As for :meth:`TraceTable.calls <tracesleuth.model.TraceTable.calls>`: run on each
            partition's spans where the partition's calls are built (the spans stay there);
            such a view is built each time, not kept.
        columns : sequence of str, optional
            Only these columns, in this order. Unless the whole view is kept already, only they
            are read from the partitions' calls, and that view is not kept (an analysis that reads
            a few columns of a large view holds only those: localization, 13 of 19).
        """
        if span_columns is not None or (columns is not None and "calls" not in self._cache):
            return self.source.calls(self.part_of_row, self.frame.select(S.TRACE_ID, S.SPAN_ID),
                                     span_columns=span_columns, columns=columns)
        if "calls" not in self._cache:
            self._cache["calls"] = self.source.calls(self.part_of_row, self.frame.select(S.TRACE_ID, S.SPAN_ID))
        return self._cache["calls"] if columns is None else self._cache["calls"].select(columns)

    def spill_directory(self) -> Path:
        """A new directory in the Dask table's work directory (which every worker reaches), for
        what the tasks of :meth:`map_calls` leave on disk (:meth:`TraceTable.spill_directory
        <tracesleuth.model.TraceTable.spill_directory>`); the caller removes it."""
        return Path(tempfile.mkdtemp(prefix="spill-", dir=self.source.workdir))

    def map_calls(self, fn, *, columns: Sequence[str] | None = None,
                  request_columns: pl.DataFrame | None = None) -> list:
        """``fn`` applied to each partition's calls on the workers, in the task that builds them (as
        :meth:`TraceTable.map_calls <tracesleuth.model.TraceTable.map_calls>`; one piece, the
        kept view, when the whole view is here already)."""
        if "calls" in self._cache:
            return super().map_calls(fn, columns=columns, request_columns=request_columns)
        return self.source.map_calls(self.part_of_row, self.frame.select(S.TRACE_ID, S.SPAN_ID), fn, columns=columns,
                                     request_columns=request_columns)


@dataclass
class TracePartitions:
    """A store's spans shuffled by trace id (step 1), on disk: the trace tables of any endpoint are
    built from it (steps 2 and 3) without shuffling again.

    Attributes
    ----------
    files : tuple of Path
        One Arrow IPC file (lz4) per partition of whole traces (SPAN_SCHEMA).
    operations : dict of str to str
        ``{operation key: operation name}`` of every operation (empty when :attr:`light`).
    endpoints : dict of str to int
        ``{operation key: traces}`` of root operations, most frequent first (per-partition
        :func:`~tracesleuth.model.table.root_endpoints` summed; empty when :attr:`light`).
    n_spans : int
        Spans read from the store (before a period's selection).
    scheduler : Scheduler
    workdir : Path
        Removed by :meth:`close`.
    light : bool
        The spans' :data:`~tracesleuth.scale.spans.LIGHT_COLUMNS_LEFT_OUT` were not carried (they
        are null): no trace table is built from these partitions.
    """

    files: tuple
    operations: dict
    n_spans: int
    store: Path
    scheduler: Scheduler = field(repr=False)
    workdir: Path = field(repr=False)
    partition_spans: int = field(default=PARTITION_SPANS, repr=False)
    endpoints: dict = field(default_factory=dict)
    light: bool = False

    def table(self, endpoint: str | None = None, *, max_categories: int = MAX_CATEGORIES) -> "DaskTraceTable":
        """The trace table of ``endpoint`` (default the most frequent root operation): steps 2-3.

        Raises
        ------
        EmptyDataError
            No root span (and no endpoint given), or no request of the endpoint.
        ParameterError
            ``endpoint`` matches no operation; the partitions are light (no attributes).
        """
        if self.light:
            raise ParameterError("these partitions were split without the spans' attributes (light=True): split "
                                 "the store again to build a trace table")
        key = resolve_endpoint(endpoint, self.operations, self.endpoints)
        folder = Path(tempfile.mkdtemp(prefix="table-", dir=self.workdir))
        try:
            return self._table(key, folder, max_categories)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def _table(self, key: str, folder: Path, max_categories: int) -> "DaskTraceTable":
        built = self.scheduler.map(_requests_part, [(f, key, folder / f"requests-{k:06d}.arrow", max_categories)
                                                    for k, f in enumerate(self.files)], "building the requests")
        report = AssemblyReport()
        for b in built:
            report = report.merge(b["assembly"])
        built = [b for b in built if b["requests"]]
        if not built:
            raise EmptyDataError(f"no request of endpoint {key!r}")
        ops = sorted({op for b in built for op in b["operations"]})
        instanced = {op for b in built for op in b["instanced"]}
        chosen = choose_columns(merge_attribute_summaries([b["attributes"] for b in built], max_categories),
                                max_categories)
        tasks = [(b["path"], folder / f"part-{k:06d}.parquet", ops, instanced, chosen) for k, b in enumerate(built)]
        parts, rows, slowest = zip(*self.scheduler.map(_table_part, tasks, "writing the table"))
        for b in built:
            b["path"].unlink(missing_ok=True)
        return DaskTraceTable(
            path=folder, parts=parts, part_rows=rows, slowest_ns=max(slowest), endpoint=key, operations=tuple(ops), assembly=report, endpoints=self.endpoints,
            dropped_attributes=chosen.dropped, n_requests=sum(b["requests"] for b in built), n_spans=self.n_spans,
            by_trace=tuple(Path(b["spans_path"]) for b in built), scheduler=self.scheduler, workdir=self.workdir,
            partition_spans=self.partition_spans, store=self.store)

    def close(self) -> None:
        """Remove the work directory (the partitions and every table built from them)."""
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "TracePartitions":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def shuffle_by_trace(store, *, scheduler: Scheduler | None = None, workdir=None, period: tuple | None = None,
                     partition_spans: int = PARTITION_SPANS, light: bool = False) -> TracePartitions:
    """Step 1: a span store's spans shuffled by trace id into partitions of whole traces, on disk.

    Parameters
    ----------
    store : str, Path, SpanStore or StoreParts
        A span store; its parts are checked first (:func:`~tracesleuth.scale.spans.store_parts`).
    scheduler : Scheduler, optional
        From :func:`~tracesleuth.scale.connect`; default Dask's threads in this process
        (``serial``: no Dask, the partitions one after another in this process).
    workdir : str or Path, optional
        Where the partitions (and tables) are written (made; every worker must reach it at the
        same path). Default: a new directory beside the store (or the system's temporary
        directory when that cannot be written).
    period : (int, int) or sequence of (int, int), optional
        Only the traces that start in ``[low_ns, high_ns)`` (as
        :func:`~tracesleuth.model.table.traces_starting_between`), or in any of several such
        ranges (a period of stretches, as a diagnosis's baseline:
        :attr:`~tracesleuth.analyses.diagnose.telemetry.Period.parts`); only the store's hours
        that may hold them are read (:meth:`StoreParts.during`, from the first range's start to the
        last one's end).
    partition_spans : int, default=PARTITION_SPANS
        Spans per partition of whole traces (the memory of one task); tables do not depend on it.
    light : bool, default=False
        Leave out the spans' attributes, links and status messages
        (:data:`~tracesleuth.scale.spans.LIGHT_COLUMNS_LEFT_OUT`, the bulk of their bytes; written
        null): not read, split or written, for a reader that needs none of them (the diagnosis:
        :mod:`tracesleuth.scale.telemetry`). No trace table is built from such partitions (nor
        are their operations and root endpoints gathered).

    Returns
    -------
    TracePartitions
        Close it (or use a ``with`` block) to remove the work directory.

    Raises
    ------
    TraceFormatError
        The store, or one of its parts, named: not a store, a part missing, unreadable or of
        another schema (before any work).
    EmptyDataError
        No span (in the period).
    ParameterError
        ``partition_spans`` < 1.
    """
    if partition_spans < 1:
        raise ParameterError(f"partition_spans must be at least 1, got {partition_spans}")
    parts = store if isinstance(store, StoreParts) else store_parts(store)
    period = _ranges(period)
    if period is not None:
        parts = parts.during(min(low for low, _ in period), max(high for _, high in period))
    if not parts.files:
        raise EmptyDataError(f"{parts.store}: no span part holds spans of the period")
    scheduler = scheduler or Scheduler("threads")
    work = _workdir(workdir, parts.store)
    try:
        n_partitions = max(1, math.ceil(parts.n_spans / partition_spans))
        (work / "by-trace").mkdir()
        paths = [work / "by-trace" / f"part-{k:06d}.arrow" for k in range(n_partitions)]
        without = LIGHT_COLUMNS_LEFT_OUT if light else ()
        pieces = scheduler.map(_split_piece, [(group, n_partitions, work / "by-trace" / f"piece-{j:06d}.arrow",
                                               without)
                                              for j, group in enumerate(_row_group_batches(parts, partition_spans))],
                               "splitting the spans by trace id")
        found = scheduler.map(_gather_partition, [([(p["path"], p["groups"][k]) for p in pieces if k in p["groups"]],
                                                   path, period, light) for k, path in enumerate(paths)],
                              "gathering the traces")
        for p in pieces:
            p["path"].unlink(missing_ok=True)
        found = [f for f in found if f["spans"]]
        if not found:
            raise EmptyDataError(f"{parts.store}: no trace starts in the period" if period else
                                 f"{parts.store}: no span")
        return TracePartitions(files=tuple(f["path"] for f in found),
                               operations={k: n for f in found for k, n in f["operations"].items()},
                               endpoints=merge_endpoints(*(f["endpoints"] for f in found)),
                               n_spans=parts.n_spans, store=parts.store, scheduler=scheduler, workdir=work,
                               partition_spans=partition_spans, light=light)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _ranges(period) -> tuple | None:
    """``period`` as a tuple of ``(low_ns, high_ns)`` ranges (None: no period).

    Raises
    ------
    ParameterError
        No range, or a range that is not two times.
    """
    if period is None:
        return None
    ranges = (tuple(period),) if len(period) == 2 and all(isinstance(v, (int, np.integer)) for v in period) \
        else tuple(tuple(r) for r in period)
    if not ranges or any(len(r) != 2 for r in ranges):
        raise ParameterError(f"period must be (low_ns, high_ns) or a sequence of them, got {period!r}")
    return tuple((int(low), int(high)) for low, high in ranges)


def _row_group_batches(parts: StoreParts, partition_spans: int) -> list[list[tuple[str, int]]]:
    """The parts' row groups as consecutive batches of about ``partition_spans`` spans (at least one
    row group each): the input of one splitting task each."""
    batches, batch, held = [], [], 0
    for f, groups in zip(parts.files, parts.row_groups):
        sizes = pq.ParquetFile(f).metadata
        for g in range(groups):
            batch.append((str(f), g))
            held += sizes.row_group(g).num_rows
            if held >= partition_spans:
                batches.append(batch)
                batch, held = [], 0
    return batches + [batch] if batch else batches


def dask_trace_table(store, endpoint: str | None = None, *, scheduler: Scheduler | None = None,
                     workdir=None, period: tuple | None = None, max_categories: int = MAX_CATEGORIES,
                     partition_spans: int = PARTITION_SPANS) -> DaskTraceTable:
    """Build the trace table of an endpoint of a span store on Dask (the module docstring's steps):
    :func:`shuffle_by_trace`, then :meth:`TracePartitions.table`.

    Parameters
    ----------
    store, scheduler, workdir, period, partition_spans
        As for :func:`shuffle_by_trace`.
    endpoint : str, optional
        As for :func:`~tracesleuth.model.build_trace_table`; default the most frequent root
        operation.
    max_categories : int, default=50

    Returns
    -------
    DaskTraceTable
        Close it (or use it in a ``with`` block) to remove the work directory.

    Raises
    ------
    TraceFormatError, EmptyDataError, ParameterError
        As :func:`shuffle_by_trace` and :meth:`TracePartitions.table`.
    SchedulerError
        The scheduler went away.

    Examples
    --------
    >>> from tracesleuth.scale import connect, dask_trace_table          # doctest: +SKIP
    >>> with connect("local") as scheduler:                              # doctest: +SKIP
    ...     with dask_trace_table("store/", scheduler=scheduler) as table:
    ...         frame = table.frame                                      # a Dask dataframe
    ...         in_memory = table.to_trace_table()                       # as build_trace_table's
    """
    partitions = shuffle_by_trace(store, scheduler=scheduler, workdir=workdir, period=period,
                                  partition_spans=partition_spans)
    try:
        table = partitions.table(endpoint, max_categories=max_categories)
        table.owns_workdir = True
        return table
    except BaseException:
        partitions.close()
        raise


# -- the tasks (run on the workers) ---------------------------------------------------------------


def _split_piece(row_groups: list, n: int, out: Path, without: tuple = ()) -> dict:
    """Step 1, first half: some row groups of the store's parts (the columns ``without`` not read:
    null), each span given the partition of its trace (its trace id's hash modulo ``n``), written
    to ``out`` sorted by partition, one record batch per partition (Arrow IPC); which batches of
    ``out`` hold each partition."""
    spans = pa.concat_tables([read_part(path, g, without=without) for path, g in row_groups])
    # The ids as text: a row group's dictionary codes are not the same trace's everywhere.
    bucket = (pl.Series(spans.column(S.TRACE_ID).cast(pa.string())).hash(seed=0) % n).to_numpy().astype(np.int64)
    counts = np.bincount(bucket, minlength=n)
    spans = spans.take(np.argsort(bucket, kind="stable")).combine_chunks()
    ends = np.cumsum(counts)
    present = np.flatnonzero(counts).tolist()
    groups: dict = {}

    def write(tmp: Path) -> None:
        with pa.ipc.new_file(tmp, S.SPAN_SCHEMA, options=PIECE_IPC) as writer:
            for k in present:  # in partition order, each partition's batches noted
                first = writer.stats.num_record_batches
                writer.write_table(spans.slice(ends[k] - counts[k], counts[k]))
                groups[k] = list(range(first, writer.stats.num_record_batches))

    _atomic_write(out, write)
    return {"path": Path(out), "groups": groups}


def _gather_partition(sources: list, path: Path, period: tuple | None, light: bool = False) -> dict:
    """Step 1, second half: one partition of whole traces gathered from the pieces' record batches
    (``sources``: ``(piece, [batch, ...])``), the traces of the period only (its ranges', one range
    after another), written to ``path`` (Arrow IPC; no span: no file); its spans, operations and
    root endpoints (``light``: none, as no table is built from it)."""
    batches = []
    for piece, groups in sources:
        with pa.ipc.open_file(pa.memory_map(str(piece))) as reader:
            batches += [reader.get_batch(i) for i in groups]
    spans = pa.Table.from_batches(batches, schema=S.SPAN_SCHEMA)
    if period is not None:
        spans = pa.concat_tables([traces_starting_between(spans, low, high) for low, high in period])
    out = {"path": Path(path), "spans": spans.num_rows, "operations": {}, "endpoints": {}}
    if spans.num_rows == 0:
        return out
    spans = spans.combine_chunks()  # one batch: the steps that read it work on whole columns
    _atomic_write(path, lambda tmp: _write_ipc(spans, tmp))
    if light:
        return out
    codes = encode_spans(narrow_spans(spans))
    out["operations"] = dict(zip(codes.operation_keys, codes.operation_names))
    out["endpoints"] = root_endpoints(codes)
    return out


def _requests_part(path: Path, endpoint: str, out: Path, max_categories: int) -> dict:
    """Step 2: the requests of one partition of whole traces, with their entry spans' attributes."""
    spans = _read_by_trace(path)
    codes = encode_spans(narrow_spans(spans))
    attributes = attributes_of(spans)
    tree, report = assemble_codes(codes, attributes)
    result = {"path": Path(out), "spans_path": str(path), "assembly": report, "requests": 0, "operations": [],
              "instanced": [], "attributes": None}
    if endpoint not in codes.operation_keys:
        return result
    requests = partition_requests(codes, tree, codes.operation_keys.index(endpoint), spans)
    if requests.height == 0:
        return result
    entry = take_rows(attributes, requests[SOURCE_ROW].to_numpy())
    result.update(requests=requests.height, attributes=attribute_summary(entry, max_categories),
                  operations=[column_key(c) for c in requests.columns if c.startswith(EXCLUSIVE_PREFIX)],
                  instanced=[column_key(c) for c in requests.columns if c.startswith(INSTANCE_PREFIX)])
    requests = requests.drop(SOURCE_ROW).with_columns(pl.Series(_ATTRIBUTES, entry))
    _atomic_write(out, requests.write_ipc)  # read once, by step 3: Arrow IPC, fast both ways
    return result


def _table_part(path: Path, out: Path, operations: list, instanced: set, chosen) -> tuple[Path, int, int]:
    """Step 3: one partition's requests with the whole table's columns; the part, its requests
    and its slowest request's latency."""
    requests = pl.read_ipc(path)
    attributes = attribute_frame(requests[_ATTRIBUTES].to_arrow(), chosen)
    frame = with_table_columns(requests.drop(_ATTRIBUTES), operations, instanced)
    if attributes.width:
        frame = pl.concat([frame, attributes], how="horizontal")
    _atomic_write(out, frame.write_parquet)
    return Path(out), frame.height, int(frame[S.LATENCY_NS].max())


def _request_files(folder: Path, part_of_row: np.ndarray, requests: pl.DataFrame,
                   request_columns: pl.DataFrame | None = None) -> list[tuple[int, Path]]:
    """``(k, file)`` per table part ``k``, in order: its requests' ``trace_id``, ``span_id``,
    ``request`` (their rows in the collected table) and ``request_columns``, written to ``folder``
    (Arrow IPC) for the part's task to read (a task's arguments stay small)."""
    rows = requests.select(S.TRACE_ID, S.SPAN_ID).with_columns(
        pl.Series(S.REQUEST, np.arange(requests.height, dtype=np.int64)), pl.Series(PART, part_of_row))
    if request_columns is not None:
        rows = pl.concat([rows, request_columns], how="horizontal")
    files = []
    for (k,), group in sorted(rows.partition_by(PART, as_dict=True).items()):
        files.append((k, folder / f"requests-{k:06d}.arrow"))
        group.drop(PART).write_ipc(files[-1][1])
    return files


def _part_calls(path: str, endpoint: str, requests: Path, partition_spans: int, span_columns=None,
                columns: Sequence[str] | None = None) -> pl.DataFrame:
    """The calls of one partition's requests (the file :func:`_request_files` wrote), with
    ``span_columns`` of their spans (:func:`~tracesleuth.model.flows.call_frame`) and the file's
    request columns (:func:`~tracesleuth.model.flows.with_request_columns`, after ``columns``),
    numbered as the collected table's rows."""
    from ..model.flows import call_frame, with_request_columns

    rows = pl.read_ipc(requests)
    extra = rows.drop(S.TRACE_ID, S.SPAN_ID, S.REQUEST)
    calls = call_frame(_read_by_trace(path), endpoint, rows.select(S.TRACE_ID, S.SPAN_ID), partition_spans,
                       span_columns=span_columns)
    calls = with_request_columns(calls, extra)  # by the partition's request numbers, then renumbered
    calls = calls.with_columns(rows[S.REQUEST].gather(calls[S.REQUEST]).alias(S.REQUEST))
    return calls if columns is None else calls.select([*columns, *extra.columns])


def _calls_part(path: str, endpoint: str, requests: Path, partition_spans: int, out: Path,
                span_columns=None) -> Path:
    """The calls of one partition's requests (:func:`_part_calls`) written to ``out`` (Arrow
    IPC): the command's process reads them back a column at a time."""
    calls = _part_calls(path, endpoint, requests, partition_spans, span_columns)
    _atomic_write(out, calls.write_ipc)
    return Path(out)


def _map_calls_part(path: str, endpoint: str, requests: Path, partition_spans: int, fn,
                    columns: Sequence[str] | None):
    """``fn`` of one partition's calls (:func:`_part_calls`)."""
    return fn(_part_calls(path, endpoint, requests, partition_spans, None, columns))


def in_request_order_from_files(paths: list, columns: Sequence[str] | None = None) -> pl.DataFrame:
    """The call-view pieces written by :func:`_calls_part` as one frame in request order, built a
    column at a time from the files (Arrow IPC): the memory beside the result is one column's, the
    pieces are never all in memory at once (as the pieces given to
    :func:`~tracesleuth.model.flows.in_request_order` are).

    The call view's columns come first; the span columns some pieces have and others have not
    (a partition's spans without a given attribute) follow, sorted by name, null in the pieces
    without them. With ``columns``, only those, in that order (the others are not read).
    """
    from ..model.flows import CALL_COLUMNS, CALL_SCHEMA

    if not paths:
        empty = pl.DataFrame(schema=CALL_SCHEMA)
        return empty if columns is None else empty.select(columns)
    schemas = [pl.read_ipc_schema(p) for p in paths]
    dtypes = {name: dtype for schema in reversed(schemas) for name, dtype in schema.items()}
    names = list(CALL_COLUMNS) + sorted(set(dtypes) - set(CALL_COLUMNS))
    if columns is not None:
        missing = [c for c in columns if c not in dtypes]
        if missing:
            raise ValueError(f"not columns of the call view: {missing}")
        names = list(columns)

    def column(name: str) -> pl.Series:
        return pl.concat([pl.read_ipc(p, columns=[name])[name] if name in schema else
                          pl.repeat(None, pl.scan_ipc(p).select(pl.len()).collect().item(), dtype=dtypes[name],
                                    eager=True).alias(name)
                          for p, schema in zip(paths, schemas)], rechunk=False)

    requests = column(S.REQUEST)  # the order, and the view's column: read once
    order = pl.Series(np.argsort(requests.to_numpy(), kind="stable"))
    return pl.DataFrame([(requests if name == S.REQUEST else column(name)).gather(order) for name in names])


def _write_ipc(spans: pa.Table, path) -> None:
    with pa.ipc.new_file(path, S.SPAN_SCHEMA, options=BY_TRACE_IPC) as writer:
        writer.write_table(spans)


def _read_by_trace(path) -> pa.Table:
    """A partition of whole traces, the name columns dictionary-encoded (as a store is read), on
    the system allocator (whose freed memory goes back at once)."""
    from ..errors import TraceFormatError

    pool = pa.system_memory_pool()
    try:
        with pa.ipc.open_file(pa.memory_map(str(path)), memory_pool=pool) as reader:
            spans = reader.read_all()
        return pa.Table.from_arrays([pc.cast(c, t.type, memory_pool=pool) if c.type != t.type else c
                                     for c, t in zip(spans.columns, S.DICTIONARY_SPAN_SCHEMA)],
                                    schema=S.DICTIONARY_SPAN_SCHEMA)
    except (OSError, pa.ArrowException) as e:
        raise TraceFormatError(str(path), f"cannot be read: {e}") from None


def _atomic_write(path: Path, write) -> None:
    """``write(temporary path)``, then rename into ``path``: a retried task leaves one whole file."""
    tmp = Path(path).with_name(f".{Path(path).name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _workdir(workdir, store: Path) -> Path:
    """A new work directory (see :func:`dask_trace_table`)."""
    if workdir is not None:
        path = Path(workdir)
        path.mkdir(parents=True, exist_ok=False)
        return path
    try:
        return Path(tempfile.mkdtemp(prefix=f".{store.name}.tracesleuth-work-", dir=store.parent))
    except OSError:
        return Path(tempfile.mkdtemp(prefix="tracesleuth-work-"))
