"""What the comparison reads of each period's call view, reduced piece by piece.

The comparison's tests of categories read the trace tables (one row per request). What it reads
of the call view (one row per span, ten or more per request) is, per period:

* the pooled series (:func:`~.pooled.series_of`): one row per call and series, its names
  Categorical, about 32 bytes a call against some 200 for the view's row;
* the calls-made counts (:func:`~.pooled.call_counts_of`), the spans of each service where an
  error began (:func:`~.services.error_origins`), each operation's kinds and each service's
  spans: counts, which add up over pieces of whole requests;
* the calls of the requests of the categories whose mutations are explained (Section 3.2's edges
  and operations, :func:`~.mutations.localize`): the columns that needs, names Categorical.

:meth:`TraceTable.map_calls <tracesleuth.model.TraceTable.map_calls>` gives it the view in pieces
of whole requests: in this process the partitions of whole traces the view is built from, one at a
time (one piece for a table within one partition); on Dask, each partition's calls reduced on the
worker that builds them, so the view itself never reaches the command's process. There the series
(the bulk of what is left: 32 bytes a call) do not either: each task writes its piece's series to
the table's spill directory (:meth:`TraceTable.spill_directory
<tracesleuth.model.TraceTable.spill_directory>`), by bucket of strata
(:func:`~.pooled.spill_series`), and the command's process ranks one bucket of both periods at a
time. Every result is the same whatever the pieces: the series are ranked per stratum (order-free,
integer sums), the counts are sums, and the explained calls are put back in request order.
"""

from __future__ import annotations

import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import ParameterError
from ...model.flows import in_request_order
from .pooled import SpilledSeries, call_counts_of, series_of, spill_series, with_children
from .services import error_origins

__all__ = ["PeriodCalls", "read_period", "spill_directories"]

#: The request column :func:`read_period` joins to the calls: the request's category (its row in
#: the comparison's category table).
CATEGORY = "_category"
#: The call-view columns the comparison reads.
COLUMNS = [S.REQUEST, S.SPAN_ID, S.PARENT_SPAN_ID, S.OPERATION_KEY, S.SERVICE, S.KIND, S.ERROR, S.CALLER_KEY,
           S.SERVER_SERVICE, S.DURATION_NS, S.EXCLUSIVE_NS, S.GAP_NS]
#: The columns of the explained categories' calls (what :func:`~.mutations.localize` reads).
EXPLAINED = [S.CALLER_KEY, S.OPERATION_KEY, S.SERVICE, S.SERVER_SERVICE, S.DURATION_NS, S.EXCLUSIVE_NS, S.GAP_NS]
_NAMES = [S.CALLER_KEY, S.OPERATION_KEY, S.SERVICE, S.SERVER_SERVICE]


@dataclass(frozen=True)
class PeriodCalls:
    """What the comparison reads of one period's call view (module docstring).

    Attributes
    ----------
    series : polars.DataFrame or SpilledSeries
        :func:`~.pooled.series_of`, shape (n_series_calls, 6), or where it was written.
    call_counts : polars.DataFrame
        :func:`~.pooled.call_counts_of`: ``service``, ``key``, ``value``, ``count``.
    errors : polars.DataFrame
        :func:`~.services.error_origins`: ``service``, ``requests``.
    kinds : polars.DataFrame
        ``operation_key``, ``service``, ``kind``, ``count``: the spans of each operation by kind.
    service_calls : polars.DataFrame
        ``service``, ``len``: spans of each service.
    explained : polars.DataFrame
        The calls of the requests of the categories asked for, in request order: ``request``,
        ``_category`` and :data:`EXPLAINED` (names Categorical).
    """

    series: pl.DataFrame
    call_counts: pl.DataFrame
    errors: pl.DataFrame
    kinds: pl.DataFrame
    service_calls: pl.DataFrame
    explained: pl.DataFrame

    def calls_of(self, categories) -> pl.DataFrame:
        """The explained calls of the requests of ``categories`` (codes), as call-view columns
        :data:`EXPLAINED` (names Categorical), in request order."""
        return self.explained.filter(pl.col(CATEGORY).is_in(list(categories))).select(EXPLAINED)


def read_period(table, categories: np.ndarray, explained: set, spill: Path | None = None) -> PeriodCalls | None:
    """What the comparison reads of ``table``'s call view (module docstring).

    Parameters
    ----------
    table : TraceTable
        Built in this process or collected from a Dask-built table (then read on the workers).
    categories : ndarray of int, shape (n_requests,)
        Each request's category code, in table order.
    explained : set of int
        The categories whose requests' calls are kept (:attr:`PeriodCalls.explained`).
    spill : Path, optional
        Where each piece writes its series (:func:`spill_directories`); None: they come back.

    Returns
    -------
    PeriodCalls or None
        None when the table has no call view (it holds no spans).
    """
    try:
        pieces = table.map_calls(partial(_piece, explained=sorted(explained), spill=spill), columns=COLUMNS,
                                 request_columns=pl.DataFrame({CATEGORY: categories}, schema={CATEGORY: pl.Int64}))
    except ParameterError:
        return None
    return _merge(pieces)


@contextmanager
def spill_directories(*tables):
    """Each table's :meth:`~tracesleuth.model.TraceTable.spill_directory` (None for a table built
    here), removed on leaving."""
    made = [t.spill_directory() for t in tables]
    try:
        yield made
    finally:
        for path in made:
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)


def _piece(calls: pl.DataFrame, explained: list, spill: Path | None = None) -> PeriodCalls:
    """:class:`PeriodCalls` of one piece of whole requests (runs where the piece is built); its
    series written into ``spill`` when given."""
    kept = calls.filter(pl.col(CATEGORY).is_in(explained)).select(S.REQUEST, CATEGORY, *EXPLAINED)
    linked = with_children(calls)
    series = series_of(linked)
    if spill is not None:
        series = SpilledSeries((spill_series(series, Path(spill) / f"series-{uuid.uuid4().hex}.arrow"),))
    return PeriodCalls(
        series=series, call_counts=call_counts_of(linked), errors=error_origins(calls),
        kinds=calls.group_by(S.OPERATION_KEY, S.SERVICE, S.KIND).agg(pl.len().cast(pl.Int64).alias("count")),
        service_calls=calls.group_by(S.SERVICE).agg(pl.len().cast(pl.Int64)),
        explained=kept.with_columns(pl.col(_NAMES).cast(pl.Categorical)))


def _merge(pieces: list) -> PeriodCalls:
    """The pieces' :class:`PeriodCalls` as the period's: series concatenated, explained calls in
    request order (:func:`~tracesleuth.model.flows.in_request_order`), counts summed."""
    def summed(name: str, keys: list, value: str) -> pl.DataFrame:
        frame = pl.concat([getattr(p, name) for p in pieces])
        return frame.group_by(keys).agg(pl.col(value).sum()).sort(keys)

    explained = in_request_order([p.explained for p in pieces])
    return PeriodCalls(
        series=(SpilledSeries(tuple(f for p in pieces for f in p.series.files))
                if isinstance(pieces[0].series, SpilledSeries) else pl.concat([p.series for p in pieces], rechunk=False)),
        call_counts=summed("call_counts", [S.SERVICE, "key", "value"], "count"),
        errors=summed("errors", [S.SERVICE], "requests"),
        kinds=summed("kinds", [S.OPERATION_KEY, S.SERVICE, S.KIND], "count"),
        service_calls=summed("service_calls", [S.SERVICE], "len"), explained=explained)
