"""Measurements for annotations: one row per call (span), its metrics and the features of its input.

From the call views of trace tables (:meth:`tracesleuth.model.TraceTable.calls`, one row per span
of each request) with the measures of each call's span (:func:`span_measures`, given to the call
view as its ``span_columns``: it runs where the spans are, on the spans read in this process or
on each partition of a store's spans with ``--scheduler``, so both give the same frame):

* metrics (:data:`~.model.METRICS`): ``time`` (the span's duration, ns), ``self_time`` (its
  exclusive time, ns) and ``memory`` (the span attribute
  :data:`~tracesleuth.instrument.MEMORY_ATTRIBUTE`, bytes; null when not recorded);
* features: every numeric span attribute (typed numbers, and text that reads as a finite
  number, as Zipkin tags carry them) becomes a column ``feature[NAME]`` (Float64, null where
  the span has no such attribute). ``NAME`` is the paper's name of an argument feature written
  by :mod:`tracesleuth.instrument` (``depth(path)``, ``size(items)``) and the attribute key
  otherwise (``db.response.returned_rows``, ``http.request.body.size``). Left out: identifiers
  (:func:`tracesleuth.model.attributes.is_identifier`: ports, ids), source locations
  (``code.*``), status codes (``*status_code``: an outcome, not an input) and the memory
  attribute (a metric).

Columns: ``operation_key``, ``trace_id``, ``span_id``, ``parent_span_id`` (null for a root),
``kind``, ``follows_from``, ``start_ns`` (Unix epoch ns), ``time``, ``self_time`` (Int64 ns),
``memory`` (Int64 bytes, nullable), ``server_service`` (the service a client span calls, from the
call view's own rule: :meth:`tracesleuth.model.TraceTable.calls`; null for other spans), then the
``feature[...]`` columns sorted by name. A span
that two tables share (an endpoint inside another's requests) is kept once.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from ... import schema as S
from ...errors import EmptyDataError, ParameterError
from ...instrument import MEMORY_ATTRIBUTE, feature_of_attribute
from ...model.attributes import is_identifier

__all__ = ["FEATURE_PREFIX", "feature_column", "feature_columns", "feature_of_column", "is_feature_key",
           "measurements_from_tables", "operation_groups", "span_measures"]

#: Prefix of the feature columns: ``feature[depth(path)]``.
FEATURE_PREFIX = "feature["
#: Attribute keys that are never features (besides identifiers): source locations.
EXCLUDED_PREFIXES = ("code.",)
#: Attribute keys ending so are outcomes, not inputs.
EXCLUDED_SUFFIXES = ("status_code",)

_BASE = {S.OPERATION_KEY: pl.String, S.TRACE_ID: pl.String, S.SPAN_ID: pl.String, S.PARENT_SPAN_ID: pl.String,
         S.KIND: pl.String, S.FOLLOWS_FROM: pl.Boolean, S.START_NS: pl.Int64, "time": pl.Int64, "self_time": pl.Int64,
         "memory": pl.Int64, S.SERVER_SERVICE: pl.String}


def feature_column(name: str) -> str:
    """The column of feature ``name``: ``feature[name]``."""
    return f"{FEATURE_PREFIX}{name}]"


def feature_of_column(column: str) -> str:
    """The feature of a column ``feature[name]``."""
    return column[len(FEATURE_PREFIX):-1]


def feature_columns(frame: pl.DataFrame) -> list[str]:
    """The feature columns of a measurement frame."""
    return [c for c in frame.columns if c.startswith(FEATURE_PREFIX)]


def is_feature_key(key: str) -> bool:
    """Whether a numeric span attribute ``key`` is a feature (rules in the module docstring).

    Examples
    --------
    >>> [is_feature_key(k) for k in ("tracesleuth.arg.path.depth", "db.response.returned_rows", "server.port",
    ...                              "code.lineno", "http.response.status_code", "tracesleuth.memory.peak_bytes")]
    [True, True, False, False, False, False]
    """
    return not (key == MEMORY_ATTRIBUTE or key.startswith(EXCLUDED_PREFIXES) or key.endswith(EXCLUDED_SUFFIXES)
                or is_identifier(key))


def span_measures(spans: pa.Table) -> pl.DataFrame:
    """``trace_id``, ``span_id``, ``memory`` and the feature columns (Float64) of the spans that have
    any, one row per span id (a repeated id: each column's first value), from the spans' attributes
    (rules in the module docstring).

    The call view's span columns (:meth:`tracesleuth.model.TraceTable.calls`): it runs on the
    spans a table was built from, or on each partition of a store's spans split by trace id
    (``--scheduler``), where the attributes are; a span's row depends on its trace's spans only.

    Parameters
    ----------
    spans : pyarrow.Table
        :data:`~tracesleuth.schema.SPAN_SCHEMA` (plain or dictionary-encoded strings; without an
        ``attributes`` column, no measure).

    Returns
    -------
    polars.DataFrame
        Shape (n_spans_measured, 2 + n_measures): ``memory`` in bytes, features in their own units.
    """
    keys = pl.DataFrame(schema={S.TRACE_ID: pl.String, S.SPAN_ID: pl.String})
    if S.ATTRIBUTES not in spans.column_names:
        return keys
    frame = pl.from_arrow(S.plain_spans(spans.select([S.TRACE_ID, S.SPAN_ID, S.ATTRIBUTES])))
    if frame[S.ATTRIBUTES].list.len().fill_null(0).sum() == 0:
        return keys
    long = (frame.select(S.TRACE_ID, S.SPAN_ID, S.ATTRIBUTES).explode(S.ATTRIBUTES).drop_nulls(S.ATTRIBUTES)
            .unnest(S.ATTRIBUTES)
            .select(S.TRACE_ID, S.SPAN_ID, "key",
                    value=pl.coalesce(pl.col("int").cast(pl.Float64), pl.col("float"),
                                      pl.col("str").cast(pl.Float64, strict=False)))
            .filter(pl.col("value").is_finite()))
    if long.height == 0:
        return keys
    names_of = {k: ("memory" if k == MEMORY_ATTRIBUTE else feature_column(feature_of_attribute(k) or k))
                for k in long["key"].unique().to_list() if k == MEMORY_ATTRIBUTE or is_feature_key(k)}
    long = long.filter(pl.col("key").is_in(list(names_of))).with_columns(
        pl.col("key").replace_strict(names_of, return_dtype=pl.String))
    if long.height == 0:
        return keys
    return long.pivot(on="key", index=[S.TRACE_ID, S.SPAN_ID], values="value", aggregate_function="first")


def measurements_from_tables(tables: Sequence) -> pl.DataFrame:
    """The measurement frame of the calls of trace tables (columns in the module docstring).

    Parameters
    ----------
    tables : TraceTable or sequence of TraceTable
        Built by :func:`tracesleuth.model.build_trace_table` (they keep their spans);
        :func:`tracesleuth.model.root_tables` gives one per root endpoint.

    Returns
    -------
    polars.DataFrame
        Shape (n_calls, 11 + n_features), sorted by operation key, then start.

    Raises
    ------
    EmptyDataError
        No table, or a table with no request.
    ParameterError
        An object that is no trace table.
    """
    if hasattr(tables, "calls"):
        tables = [tables]
    tables = list(tables)
    if not tables:
        raise EmptyDataError("no trace table to take measurements from")
    pieces = []
    for t in tables:
        if not hasattr(t, "calls") or not hasattr(t, "frame"):
            raise ParameterError(f"Annotations are derived from trace tables (tracesleuth.model.build_trace_table); "
                                 f"got {type(t).__name__}.")
        if t.n_requests == 0:
            raise EmptyDataError(f"the trace table of {t.endpoint} has no request: nothing to measure")
        calls = t.calls(span_columns=span_measures)
        starts = t.frame[S.START_NS].gather(calls[S.REQUEST]) + calls[S.START_OFFSET_NS]
        calls = calls.select(S.OPERATION_KEY, S.TRACE_ID, S.SPAN_ID, S.PARENT_SPAN_ID, S.KIND, S.FOLLOWS_FROM,
                             starts.alias(S.START_NS), pl.col(S.DURATION_NS).alias("time"),
                             pl.col(S.EXCLUSIVE_NS).alias("self_time"), S.SERVER_SERVICE,
                             *(c for c in calls.columns if c == "memory" or c.startswith(FEATURE_PREFIX)))
        # The entry span's parent lies outside the request: a root of the measured call graph.
        calls = calls.with_columns(pl.when(pl.col(S.PARENT_SPAN_ID).is_in(calls[S.SPAN_ID].implode()))
                                   .then(pl.col(S.PARENT_SPAN_ID)).alias(S.PARENT_SPAN_ID))
        pieces.append(calls)
    frame = pl.concat(pieces, how="diagonal_relaxed") if len(pieces) > 1 else pieces[0]
    frame = frame.unique([S.TRACE_ID, S.SPAN_ID], keep="first", maintain_order=True)
    for name, dtype in _BASE.items():
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=dtype).alias(name))
    features = sorted(feature_columns(frame))
    frame = frame.select([pl.col(n).cast(d) for n, d in _BASE.items()]
                         + [pl.col(c).cast(pl.Float64) for c in features])
    frame = frame.with_columns(pl.col(S.FOLLOWS_FROM).fill_null(False))
    return frame.sort(S.OPERATION_KEY, S.START_NS, maintain_order=True)


def operation_groups(frame: pl.DataFrame) -> list[tuple[str, np.ndarray]]:
    """``(operation, rows)`` of a measurement frame sorted by operation: each operation's rows, in order."""
    keys = frame[S.OPERATION_KEY]
    if keys.len() == 0:
        return []
    codes = keys.rle_id().to_numpy()
    bounds = np.r_[0, np.flatnonzero(np.diff(codes)) + 1, len(codes)]
    names = keys.gather(bounds[:-1]).to_list()
    return [(names[i], np.arange(bounds[i], bounds[i + 1])) for i in range(len(names))]
