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
worker that builds them, so the view itself never reaches the command's process. Every result is the same
whatever the pieces: the series are ranked per stratum (order-free, integer sums), the counts are
sums, and the explained calls are put back in request order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import ParameterError
from ...model.flows import in_request_order
from .pooled import call_counts_of, series_of, with_children
from .services import error_origins

__all__ = ["PeriodCalls", "read_period"]

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
    series : polars.DataFrame
        :func:`~.pooled.series_of`, shape (n_series_calls, 6).
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


def read_period(table, categories: np.ndarray, explained: set) -> PeriodCalls | None:
    """What the comparison reads of ``table``'s call view (module docstring).

    Parameters
    ----------
    table : TraceTable
        Built in this process or collected from a Dask-built table (then read on the workers).
    categories : ndarray of int, shape (n_requests,)
        Each request's category code, in table order.
    explained : set of int
        The categories whose requests' calls are kept (:attr:`PeriodCalls.explained`).

    Returns
    -------
    PeriodCalls or None
        None when the table has no call view (it holds no spans).
    """
    try:
        pieces = table.map_calls(partial(_piece, explained=sorted(explained)), columns=COLUMNS,
                                 request_columns=pl.DataFrame({CATEGORY: categories}, schema={CATEGORY: pl.Int64}))
    except ParameterError:
        return None
    return _merge(pieces)


def _piece(calls: pl.DataFrame, explained: list) -> PeriodCalls:
    """:class:`PeriodCalls` of one piece of whole requests (runs where the piece is built)."""
    kept = calls.filter(pl.col(CATEGORY).is_in(explained)).select(S.REQUEST, CATEGORY, *EXPLAINED)
    linked = with_children(calls)
    return PeriodCalls(
        series=series_of(linked), call_counts=call_counts_of(linked), errors=error_origins(calls),
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
        series=pl.concat([p.series for p in pieces], rechunk=False),
        call_counts=summed("call_counts", [S.SERVICE, "key", "value"], "count"),
        errors=summed("errors", [S.SERVICE], "requests"),
        kinds=summed("kinds", [S.OPERATION_KEY, S.SERVICE, S.KIND], "count"),
        service_calls=summed("service_calls", [S.SERVICE], "len"), explained=explained)
