"""A span store's parts, checked before any work starts, as a Dask dataframe.

Before a graph is built every part is looked at (its Parquet footer only): a part an ingest
recorded in the manifest that is not there, a part that cannot be opened, and a part whose
columns disagree with :data:`~tracesleuth.schema.SPAN_SCHEMA` stop the command with one message
naming the part, before anything is written. A part written before events, links and status
messages were kept lacks exactly :data:`~tracesleuth.schema.LATER_SPAN_COLUMNS`: it is accepted,
and its spans read with those columns null (:func:`~tracesleuth.schema.with_later_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .. import schema as S
from ..errors import TraceFormatError
from ..io.store import PARTITION_NS, SpanStore, is_store, partition_hour

__all__ = ["LIGHT_COLUMNS_LEFT_OUT", "PERIOD_MARGIN_HOURS", "StoreParts", "read_part", "store_parts"]

#: Hours after a period's end whose partitions are read for the period's traces.
PERIOD_MARGIN_HOURS = 1
#: The span columns a reader of the spans' times, names, tree, status and exceptions only (the
#: diagnosis) need not carry through a split by trace id: the bulk of a span's bytes, and nullable.
LIGHT_COLUMNS_LEFT_OUT = (S.ATTRIBUTES, S.STATUS_MESSAGE, S.LINKS)


@dataclass(frozen=True)
class StoreParts:
    """The span parts of a store, checked.

    Attributes
    ----------
    store : Path
    files : tuple of Path
        The parts, in store order.
    spans : tuple of int
        Spans in each part (from its footer).
    row_groups : tuple of int
        Row groups in each part.
    """

    store: Path
    files: tuple
    spans: tuple
    row_groups: tuple

    @property
    def n_spans(self) -> int:
        return sum(self.spans)

    def during(self, low_ns: int, high_ns: int) -> "StoreParts":
        """The parts that may hold spans of traces starting in ``[low_ns, high_ns)``: those of the
        hours from ``low_ns``'s to one hour after ``high_ns``'s (a trace's spans start at or after
        its first span; spans starting more than an hour after the period's end are not read).
        Parts of a flat store (version 1) are all kept."""
        first, last = low_ns // PARTITION_NS, (high_ns - 1) // PARTITION_NS + PERIOD_MARGIN_HOURS
        keep = [k for k, f in enumerate(self.files) if (h := partition_hour(f)) is None or first <= h <= last]
        return StoreParts(self.store, *(tuple(column[k] for k in keep) for column in
                                        (self.files, self.spans, self.row_groups)))

    def dataframe(self):
        """The spans as a Dask dataframe, one partition per part (pyarrow-backed dtypes), columns
        :data:`~tracesleuth.schema.SPAN_COLUMNS` (the Hive partition columns left out; those a
        part written before events and links were kept lacks, null)."""
        import dask.dataframe as dd

        return dd.from_map(_part_frame, [str(f) for f in self.files], meta=_part_frame(None),
                           enforce_metadata=False)


def store_parts(store) -> StoreParts:
    """The parts of a span store, every one checked (see the module docstring).

    Parameters
    ----------
    store : str, Path or SpanStore

    Returns
    -------
    StoreParts

    Raises
    ------
    TraceFormatError
        Naming the store or the part: not a span store; no span part; a part the manifest lists
        is missing; a part cannot be opened; a part's column is missing or of another type.
    """
    if not isinstance(store, SpanStore):
        if not is_store(store):
            raise TraceFormatError(str(store), "not a tracesleuth span store (--scheduler reads span stores; "
                                   "make one with: tracesleuth ingest FILES -o STORE)")
        store = SpanStore(store, create=False)
    files = store.span_files()
    present = {f.relative_to(store.path).as_posix() for f in files}
    for entry in store.manifest().get("ingests", []):
        for part in entry.get("parts", []):
            if part.startswith("spans/") and part not in present:
                raise TraceFormatError(str(store.path / part), f"missing: the manifest lists it as written by the "
                                       f"ingest of {', '.join(entry.get('paths', [])) or 'an earlier run'}, and it "
                                       "is not in the store (restore it, or ingest its files again into a new store)")
    if not files:
        raise TraceFormatError(str(store.path), "the store holds no span part")
    spans, groups = zip(*(_checked(f) for f in files))
    return StoreParts(store.path, tuple(files), spans, groups)


def _checked(path: Path) -> tuple[int, int]:
    """Spans and row groups of a part whose columns are those of SPAN_SCHEMA (or of a part
    written before events and links were kept: all but exactly LATER_SPAN_COLUMNS); raise naming
    the part otherwise."""
    try:
        meta = pq.ParquetFile(path).metadata
        schema = meta.schema.to_arrow_schema()
    except (OSError, pa.ArrowException) as e:
        raise TraceFormatError(str(path), f"cannot be read as Parquet: {e}") from None
    older = not any(c in schema.names for c in S.LATER_SPAN_COLUMNS)
    for field in S.SPAN_SCHEMA:
        if older and field.name in S.LATER_SPAN_COLUMNS:
            continue
        if field.name not in schema.names:
            raise TraceFormatError(str(path), "has no such column, unlike the store's other parts "
                                   f"(span schema: {', '.join(S.SPAN_COLUMNS)})", field=field.name)
        got = schema.field(field.name).type
        if not _same_type(got, field.type):
            raise TraceFormatError(str(path), f"is {got}, the span schema's is {field.type}: the part disagrees "
                                   "with the store's schema", field=field.name)
    return meta.num_rows, meta.num_row_groups


def read_part(path, row_group: int | None = None, *, without: tuple = ()) -> pa.Table:
    """A part (or one of its row groups) in :data:`~tracesleuth.schema.SPAN_SCHEMA`, the
    :data:`~tracesleuth.schema.LATER_SPAN_COLUMNS` it lacks null.

    Parameters
    ----------
    path : str or Path
    row_group : int, optional
        Only this row group.
    without : tuple of str, default=()
        Nullable columns not read: null in the table returned (:data:`LIGHT_COLUMNS_LEFT_OUT`).

    Raises
    ------
    TraceFormatError
        Naming the part, when it cannot be read.
    """
    try:
        part = pq.ParquetFile(path)
        columns = [c for c in part.schema_arrow.names if c not in without] if without else None
        spans = part.read(columns=columns) if row_group is None else part.read_row_group(row_group, columns=columns)
        spans = S.with_later_columns(spans)
        for name in without:
            if name not in spans.column_names:
                field = S.SPAN_SCHEMA.field(name)
                spans = spans.append_column(field, pa.nulls(spans.num_rows, field.type))
        return spans.select(list(S.SPAN_COLUMNS)).cast(S.SPAN_SCHEMA)
    except (OSError, pa.ArrowException) as e:
        raise TraceFormatError(str(path), f"cannot be read: {e}") from None


def _part_frame(path):
    """A part as pandas with pyarrow-backed dtypes (``None``: no row, the collection's metadata)."""
    import pandas as pd

    spans = S.SPAN_SCHEMA.empty_table() if path is None else read_part(path)
    return spans.to_pandas(types_mapper=pd.ArrowDtype)


def _same_type(got: pa.DataType, want: pa.DataType) -> bool:
    """Equal types, strings in any of their Arrow forms (plain, large, dictionary-encoded)."""
    if pa.types.is_dictionary(got):
        got = got.value_type
    if pa.types.is_large_string(got) or pa.types.is_string_view(got):
        got = pa.string()
    if pa.types.is_list(want) or pa.types.is_large_list(want):
        return (pa.types.is_list(got) or pa.types.is_large_list(got)) and got.value_type.equals(want.value_type)
    return got.equals(want)
