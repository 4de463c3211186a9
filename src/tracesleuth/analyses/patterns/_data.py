"""The requests as the search sees them: the table read once (:func:`read_table`), every usable
attribute binned (:func:`encode`), and what an attribute means inside vs outside a pattern
(:func:`effect`, :func:`context`). Shared by the stages and the refinements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import polars as pl

from ...errors import EmptyDataError, ParameterError
from ._bitsets import AttributeEncoding
from ._model import ATTR_PREFIX, CONTINUOUS_PREFIX, INSTANCE_PREFIX, Condition
from .notes import AllMissing, AttributeLeftOut, MissingLatency, Note, NotNumeric, TooManyCategories
from .results import ConditionEffect
from .split_points import attribute_thresholds

LATENCY_COLUMN = "latency_ns"
#: ``SubIntervalPattern.context``: an operation is named when it takes at least this much more time
#: (median, ns) inside the pattern than outside: below 1 ms a difference is noise at the tracers'
#: resolution and the size of a scheduling hiccup.
CONTEXT_MIN_ADDED_NS = 1e6
#: ... and at least this share of the latency difference between the pattern's requests and the
#: others: an operation adding a tenth of the slowdown is part of the story, less is detail.
CONTEXT_GAP_SHARE = 0.1
#: A category is named when its share among the pattern's requests exceeds its share among the
#: others by at least this many points (a majority more: it sets them apart, not chance).
CONTEXT_MIN_SHARE_GAIN = 0.5
#: At most this many operations and this many categories are named (a reader's attention).
CONTEXT_MOST = 3

@dataclass
class Inputs:
    """The analysed requests: the table, the rows with a latency and the candidate columns."""

    frame: pl.DataFrame
    rows: np.ndarray  # indices of the analysed rows in the table
    latency: np.ndarray
    continuous: list[str]
    categorical: list[str]
    notes: list[Note]


def column_key(name: str) -> str | None:
    for prefix in (CONTINUOUS_PREFIX, INSTANCE_PREFIX, ATTR_PREFIX):
        if name.startswith(prefix) and name.endswith("]"):
            return name[len(prefix):-1]
    return None


def read_table(table: Any, *, attributes: Sequence[str] | None, categorical: bool) -> Inputs:
    if isinstance(table, pl.DataFrame):
        frame = table
        continuous = [c for c in frame.columns if c.startswith(CONTINUOUS_PREFIX)]
        categ = [c for c in frame.columns if c.startswith((INSTANCE_PREFIX, ATTR_PREFIX))]
    elif all(hasattr(table, a) for a in ("frame", "continuous_columns", "categorical_columns")):
        frame = table.frame
        if not isinstance(frame, pl.DataFrame):
            raise ParameterError(f"The table's 'frame' must be a polars DataFrame. Got {type(frame).__name__} instead.")
        continuous = list(table.continuous_columns)
        categ = list(table.categorical_columns)
    else:
        raise ParameterError(
            "The 'table' argument of LatencyDegradationPatterns.fit must be a TraceTable (with .frame, "
            f".continuous_columns, .categorical_columns) or a polars DataFrame. Got {type(table).__name__} instead."
        )
    if LATENCY_COLUMN not in frame.columns:
        raise ParameterError(f"The table has no {LATENCY_COLUMN!r} column (columns: {frame.columns[:8]}...).")
    if not categorical:
        categ = []
    if attributes is not None:
        wanted = list(attributes)
        keep: list[str] = []
        for name in wanted:
            matches = [c for c in continuous + categ if c == name or column_key(c) == name]
            if not matches:
                available = sorted({column_key(c) or c for c in continuous + categ})
                raise ParameterError(
                    f"The 'attributes' parameter names {name!r}, which is neither a column nor an operation/attribute "
                    f"key of the table. Available keys: {available[:20]}{'...' if len(available) > 20 else ''}."
                )
            keep.extend(m for m in matches if m not in keep)
        continuous = [c for c in continuous if c in keep]
        categ = [c for c in categ if c in keep]
    if frame.height == 0:
        raise EmptyDataError("The table holds no request: nothing to analyse.")
    latency_series = frame.get_column(LATENCY_COLUMN)
    if latency_series.null_count() == frame.height:
        raise EmptyDataError(f"No request of the table has a {LATENCY_COLUMN}: nothing to analyse.")
    notes: list[Note] = []
    has_latency = latency_series.is_not_null().to_numpy()
    rows = np.flatnonzero(has_latency)
    if rows.size < frame.height:
        notes.append(MissingLatency(int(frame.height - rows.size), LATENCY_COLUMN))
    latency = latency_series.cast(pl.Int64).to_numpy()[rows] if rows.size else np.empty(0, np.int64)
    return Inputs(frame, rows, latency.astype(np.int64), continuous, categ, notes)


def encode(data: Inputs, ms: dict, max_categories: int, excluded: dict[str, AttributeLeftOut] | None = None):
    """Bin codes of every usable attribute over the analysed rows (``excluded``: left out, with the
    reason); the attributes skipped come back as ``(name, AttributeLeftOut)``."""
    frame = data.frame
    rows = data.rows
    full = rows.size == frame.height
    encodings: list[AttributeEncoding] = []
    columns: list[np.ndarray] = []
    excluded = excluded or {}
    skipped: list[tuple[str, AttributeLeftOut]] = [(name, excluded[name]) for name in data.continuous + data.categorical
                                      if name in excluded]

    def analysed(names):
        """``(name, its column over the analysed rows)`` of each attribute not excluded."""
        for name in names:
            if name not in excluded:
                series = frame.get_column(name)
                yield name, (series if full else series.gather(rows))

    for name, series in analysed(data.continuous):
        if not series.dtype.is_numeric():
            skipped.append((name, NotNumeric(str(series.dtype))))
            continue
        if series.null_count() == 0 and series.dtype == pl.Int64:  # as is: no null to fill, nothing to cast
            present = np.ones(series.len(), dtype=bool)
            values = series.to_numpy()
        elif series.dtype.is_float():
            present = series.is_not_null().to_numpy()
            present &= ~series.is_nan().fill_null(False).to_numpy()
            values = series.fill_nan(0).fill_null(0).round().cast(pl.Int64).to_numpy()
        else:
            present = series.is_not_null().to_numpy()
            values = series.fill_null(0).cast(pl.Int64).to_numpy()
        if not present.any():
            skipped.append((name, AllMissing()))
            continue
        thresholds = attribute_thresholds(values[present], **ms)
        code = bin_codes(thresholds, values)
        code[~present] = -1
        encodings.append(AttributeEncoding(name, "continuous", int(thresholds.size - 1), thresholds=thresholds,
                                           n_missing=int((~present).sum())))
        columns.append(code.astype(np.int32))
    for name, series in analysed(data.categorical):
        series = series.cast(pl.Utf8)
        present = series.is_not_null().to_numpy()
        if not present.any():
            skipped.append((name, AllMissing()))
            continue
        categories = series.drop_nulls().unique().sort()
        if categories.len() > max_categories:
            skipped.append((name, TooManyCategories(categories.len(), max_categories)))
            continue
        # The dense rank of each value among the sorted categories, by lookup (a sort of the column costs more).
        code = series.replace_strict(categories, pl.int_range(0, categories.len(), eager=True, dtype=pl.Int64),
                                     default=None, return_dtype=pl.Int64).fill_null(-1).to_numpy()
        encodings.append(AttributeEncoding(name, "categorical", int(categories.len()),
                                           categories=tuple(categories.to_list()), n_missing=int((~present).sum())))
        columns.append(code.astype(np.int32))
    # Column-major (one attribute's codes contiguous): the search, the masks and the context read by column.
    codes = np.array(columns).T if columns else np.empty((rows.size, 0), dtype=np.int32)
    return encodings, codes, skipped


#: :func:`bin_codes` compares the values with each threshold up to this many thresholds (a pass
#: each, cheaper than a binary search per value), and searches beyond.
FEW_THRESHOLDS = 8


def bin_codes(thresholds: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.searchsorted(thresholds, values, side="right") - 1`` (int64): the bin of each value."""
    if thresholds.size > FEW_THRESHOLDS:
        return np.searchsorted(thresholds, values, side="right") - 1
    code = np.full(values.size, -1, dtype=np.int64)
    for t in thresholds:
        code += values >= t
    return code


def pattern_mask(lo: np.ndarray, hi: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Requests satisfying the pattern of code ranges ``(lo, hi)``."""
    m = np.ones(codes.shape[0], dtype=bool)
    for a in np.flatnonzero(lo >= 0):
        m &= (codes[:, a] >= lo[a]) & (codes[:, a] < hi[a])
    return m



def column(data: Inputs, attribute: str) -> pl.Series:
    """An attribute's column over the analysed requests."""
    series = data.frame.get_column(attribute)
    return series if series.len() == data.rows.size else series.gather(data.rows)


def attribute_values(data: Inputs, attribute: str) -> np.ndarray:
    """A continuous attribute's values over the analysed requests (float, NaN where absent)."""
    return column(data, attribute).cast(pl.Float64).to_numpy()


#: :func:`split_medians` counts the values in this many equal-width bins before it selects within one.
MEDIAN_BINS = 4096
#: Below this many values :func:`split_medians` calls ``np.median`` directly (counting would not pay).
MEDIAN_DIRECT = 50_000


def split_medians(values: np.ndarray, inside: np.ndarray) -> tuple[float | None, float | None]:
    """``np.median`` of the finite ``values`` inside and outside the mask (None for no value), exactly.

    On many values, one pass counts both groups per equal-width bin (a monotone map of the values,
    so a bin's rank range is known); each median is then selected among its middle ranks' bins alone
    and averaged as ``np.median`` does, the same float.
    """
    present = np.isfinite(values)
    if values.size < MEDIAN_DIRECT:
        med = lambda m: float(np.median(values[m])) if m.any() else None  # noqa: E731
        return med(inside & present), med(~inside & present)
    whole = present.all()
    finite = values if whole else values[present]
    if finite.size == 0:
        return None, None
    low, high = float(finite.min()), float(finite.max())
    scale = (MEDIAN_BINS - 1) / (high - low) if high > low else 0.0
    bins = np.subtract(values, low)
    bins *= scale
    np.floor(bins, out=bins)
    if not whole:
        bins[~present] = MEDIAN_BINS  # the absent values' own bin
    key = bins.astype(np.intp)
    del bins
    every = np.bincount(key, minlength=MEDIAN_BINS + 1)
    mine = np.bincount(key[inside], minlength=MEDIAN_BINS + 1)
    out = []
    for group, per_bin in ((inside, mine[:MEDIAN_BINS]), (None, (every - mine)[:MEDIAN_BINS])):
        n = int(per_bin.sum())
        if n == 0:
            out.append(None)
            continue
        ranks = [n // 2 - 1, n // 2] if n % 2 == 0 else [(n - 1) // 2]
        cum = np.cumsum(per_bin)
        first, last = np.searchsorted(cum, [ranks[0], ranks[-1]], side="right")
        before = int(cum[first - 1]) if first > 0 else 0
        chosen = key == first if first == last else (key >= first) & (key <= last)
        chosen &= inside if group is not None else ~inside
        part = np.partition(values[chosen], [r - before for r in ranks])
        out.append(float(np.mean(part[[r - before for r in ranks]])))
    return out[0], out[1]


def effect(condition: Condition, data: Inputs, inside: np.ndarray) -> ConditionEffect:
    """The condition's attribute inside vs outside the pattern (``inside``: who satisfies it)."""
    if condition.kind == "categorical":
        values = column(data, condition.attribute).cast(pl.Utf8).to_numpy()
        has = values == condition.value
        share = lambda m: float(has[m].mean()) if m.any() else None  # noqa: E731
        return ConditionEffect(condition, inside_share=share(inside), outside_share=share(~inside))
    a, b = split_medians(attribute_values(data, condition.attribute), inside)
    return ConditionEffect(condition, inside_ns=a, outside_ns=b, added_ns=None if a is None or b is None else a - b)


def context(attributes: np.ndarray, encodings: list[AttributeEncoding], codes: np.ndarray, data: Inputs,
             inside: np.ndarray, *, most: int = CONTEXT_MOST) -> tuple[ConditionEffect, ...]:
    """Operations slower and categories more frequent inside the pattern (see ``SubIntervalPattern.context``),
    among the ``attributes`` (indices into ``encodings`` and the columns of ``codes``)."""
    if inside.all() or not inside.any():
        return ()
    latency_gap = float(np.median(data.latency[inside]) - np.median(data.latency[~inside]))
    n_in, n_out = int(inside.sum()), int((~inside).sum())
    slower, frequent = [], []
    for a in attributes:
        e = encodings[a]
        if e.categorical:  # shares of every category at once, from the codes
            col = codes[:, a]
            share_in = np.bincount(col[inside & (col >= 0)], minlength=e.n_bins) / n_in
            share_out = np.bincount(col[~inside & (col >= 0)], minlength=e.n_bins) / n_out
            for c in np.flatnonzero(share_in - share_out >= CONTEXT_MIN_SHARE_GAIN):
                frequent.append((share_in[c] - share_out[c], ConditionEffect(
                    Condition.categorical(e.name, e.categories[c]), inside_share=float(share_in[c]),
                    outside_share=float(share_out[c]))))
            continue
        found = effect(Condition.continuous(e.name), data, inside)
        if found.added_ns is not None and found.added_ns >= max(CONTEXT_MIN_ADDED_NS, CONTEXT_GAP_SHARE * latency_gap):
            slower.append((found.added_ns, found))
    pick = lambda found: [x for _, x in sorted(found, key=lambda t: -t[0])[:most]]  # noqa: E731
    return tuple(pick(slower) + pick(frequent))


def exclusive_matrix(data: Inputs, positives: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Exclusive times (float64 ns, 0 for an operation not called) of the requests in ``I``."""
    names, cols = [], []
    rows = data.rows[positives]
    for name in data.continuous:
        series = data.frame.get_column(name).gather(rows)
        if not series.dtype.is_numeric():
            continue
        cols.append(series.cast(pl.Float64).fill_nan(None).fill_null(0.0).to_numpy())
        names.append(name)
    X = np.column_stack(cols) if cols else np.empty((rows.size, 0))
    return X, names

