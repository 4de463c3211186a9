"""Which trace-table columns a pattern may use: conditions that can explain a slow request.

The paper builds conditions on every RPC's execution time (Cortellessa & Traini 2020, Section 3).
On recorded traces three kinds of column give patterns that are true and useless; each is left
out here and reported with its reason (``skipped_attributes``). All three are beyond the paper
and switchable.

* **Identifiers** (``client.port = 43154``, ``session.id``): a value per request or nearly, never
  a category. The trace table already leaves out what :func:`tracesleuth.model.attributes.is_identifier`
  names; a plain DataFrame's ``attr[...]`` columns get the same test here, and any category with
  more distinct values than half its requests is left out too.
* **Pass-through operations**: an operation whose exclusive time *is* the request latency, e.g. a
  gateway's ``FilteringWebHandler.handle`` whose downstream call is not traced, so it has no
  child and its exclusive time is the whole request. "``handle`` exclusive >= 1 s" then explains
  every slow request by restating it. Flagged when, in the requests that call it (at least half
  of them), its exclusive time is at least ``pass_through_share`` of the latency (median).
* **Asynchronous operations** that cannot delay the request: every span of the operation hangs
  below an asynchronous link (producer/consumer, ``FOLLOWS_FROM``; the rule of
  :func:`tracesleuth.model._calls.synchronous_children`) on its way to the request's entry span,
  so its time is never waited for. Its exclusive time may still differ in slow requests (the
  paper's second noise delays one in half of the degraded requests), which makes a condition on
  it a coincidence that costs recall.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import ParameterError
from ...model._calls import synchronous_children
from ...model.attributes import is_identifier
from ._model import ATTR_PREFIX, CONTINUOUS_PREFIX, INSTANCE_PREFIX
from .notes import IdentifierLeftOut, PassThroughLeftOut

__all__ = ["asynchronous_operations", "identifier_columns", "pass_through_columns"]


def identifier_columns(frame: pl.DataFrame, columns: list[str], rows: np.ndarray
                       ) -> list[tuple[str, IdentifierLeftOut]]:
    """``attr[KEY]`` columns that are identifiers, with the reason (a record), among ``columns``."""
    out = []
    for name in columns:
        if not name.startswith(ATTR_PREFIX):
            continue
        series = frame.get_column(name)
        if series.len() != rows.size:
            series = series.gather(rows)
        series = series.cast(pl.Utf8).drop_nulls()
        key = name[len(ATTR_PREFIX):-1]
        if is_identifier(key, series):
            out.append((name, IdentifierLeftOut()))
        elif series.len() >= 20 and series.n_unique() > series.len() / 2:
            out.append((name, IdentifierLeftOut(series.n_unique(), series.len())))
    return out


def _median_at_least(values: np.ndarray, share: float) -> bool:
    """``np.median(values) >= share`` for finite values, by counting: a median is selected only when
    its two middle values fall on either side of ``share``."""
    n = values.size
    at_least = int(np.count_nonzero(values >= share))
    low_rank, high_rank = (n - 1) // 2, n // 2  # the middle ranks (equal when n is odd)
    if at_least >= n - low_rank:  # both middle values >= share, so is their mean
        return True
    if at_least < n - high_rank:  # both below
        return False
    return float(np.median(values)) >= share


def pass_through_columns(frame: pl.DataFrame, columns: list[str], rows: np.ndarray, latency: np.ndarray,
                         share: float) -> list[tuple[str, PassThroughLeftOut]]:
    """``exclusive_ns[K]`` columns whose exclusive time is the request latency, with the reason (a record).

    Parameters
    ----------
    frame : polars.DataFrame
    columns : list of str
    rows : ndarray of int, shape (n_analysed,)
        Rows of ``frame`` analysed, aligned with ``latency``.
    latency : ndarray of int64, shape (n_analysed,)
    share : float
        Least median ratio of exclusive time to latency.
    """
    out = []
    full = rows.size == frame.height
    for name in columns:
        if not name.startswith(CONTINUOUS_PREFIX):
            continue
        series = frame.get_column(name)
        if not series.dtype.is_numeric():
            continue
        if not full:
            series = series.gather(rows)
        values = series.cast(pl.Float64).to_numpy()
        present = np.isfinite(values) & (latency > 0)
        if present.sum() < max(1, rows.size / 2):
            continue
        ratios = values / latency if present.all() else values[present] / latency[present]
        if _median_at_least(ratios, share):
            out.append((name, PassThroughLeftOut(float(np.median(ratios)))))
    return out


def asynchronous_operations(table: Any) -> dict[str, int]:
    """Operations of a trace table none of whose calls the request waits for.

    Parameters
    ----------
    table : TraceTable
        Its call view (:meth:`~tracesleuth.model.TraceTable.calls`) is read, whether the table was
        built in this process or on Dask; a table without one (a plain DataFrame) gives an empty
        dict.

    Returns
    -------
    dict of str to int
        Operation key -> its calls in the table's requests, for the operations every call of
        which is below an asynchronous link (declared: producer/consumer kind or
        ``FOLLOWS_FROM``) on the way to the entry span.
    """
    try:
        calls = table.calls()
    except (AttributeError, ParameterError):
        return {}
    if calls.height == 0:
        return {}
    calls = calls.select(S.REQUEST, S.SPAN_ID, S.PARENT_SPAN_ID, S.OPERATION_KEY, S.DEPTH, S.KIND,
                         S.FOLLOWS_FROM).sort(S.DEPTH, maintain_order=True)
    link = synchronous_children(calls[S.KIND].to_numpy(), calls[S.FOLLOWS_FROM].fill_null(False).to_numpy())
    depth = calls[S.DEPTH].to_numpy()
    # a span is waited for when its link and every link above it up to the entry span are synchronous
    row = calls.with_row_index("_row").select("_row", S.REQUEST, S.SPAN_ID)
    parent = calls.select(S.REQUEST, pl.col(S.PARENT_SPAN_ID).alias(S.SPAN_ID)).join(
        row, on=[S.REQUEST, S.SPAN_ID], how="left", maintain_order="left")["_row"].fill_null(-1).to_numpy()
    waited = depth == 0
    for d in range(1, int(depth.max()) + 1):  # rows are sorted by depth: parents are done first
        at = np.flatnonzero(depth == d)
        waited[at] = link[at] & (parent[at] >= 0) & waited[np.maximum(parent[at], 0)]
    per_key = (calls.select(S.OPERATION_KEY).with_columns(pl.Series("_waited", waited))
               .group_by(S.OPERATION_KEY).agg(pl.col("_waited").any(), pl.len()))
    return {k: int(n) for k, w, n in per_key.iter_rows() if not w}


def operation_of(column: str) -> str | None:
    """The operation key of an ``exclusive_ns[K]`` or ``instance[K]`` column, else None."""
    for prefix in (CONTINUOUS_PREFIX, INSTANCE_PREFIX):
        if column.startswith(prefix) and column.endswith("]"):
            return column[len(prefix):-1]
    return None
