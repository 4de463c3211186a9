"""Spans as integer codes: the form trace assembly and the trace table compute on.

The strings of a span table are looked at once, column by column: trace ids and names are
dictionary-encoded (Arrow; a store reads them so already), span ids hashed to 64 bits (exactly,
from the Arrow buffers, when they are 16 hexadecimal digits as the readers write them), and the
parent of each span is found by one sort of (trace, span id) keys. From then on every step is
numpy on arrays of ``n_spans`` integers; the strings come back only for the few values shown
(entry span ids, operation keys, instances).

Exact span copies and clashing span ids (Zipkin's shared client/server spans) are repaired here,
before the parent links are made (:func:`deduplicate`, step 1 of
:func:`~tracesleuth.model.assembly.assemble`).

A span's events are looked at once too (:func:`exception_columns`): whether it has an
``exception`` event, and the ``exception.type`` of its first one. The two per-span values stand in
for the events column from then on (:func:`narrow_spans`), so a table build never carries the
events (nor the attributes, links and status messages) of its spans.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema as S

SOURCE_ROW = "source_row"
#: Columns :func:`narrow_spans` puts in place of the events: the span has an
#: :data:`~tracesleuth.schema.EXCEPTION_EVENT` event (bool), and the
#: :data:`~tracesleuth.schema.ATTR_EXCEPTION_TYPE` of its first one (string, null when none).
HAS_EXCEPTION = "_has_exception"
FIRST_EXCEPTION_TYPE = "_first_exception_type"
_KIND_CODE = {k: i for i, k in enumerate(S.SPAN_KINDS)}
_M1, _M2, _M3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
#: Largest service x operation-name grid given codes by a lookup table (else by sorting).
_MAX_GRID = 1 << 24


def mix64(x: np.ndarray, *, copy: bool = True) -> np.ndarray:
    """splitmix64 finalizer of a uint64 array (wrapping arithmetic); ``copy=False`` mixes a
    uint64 array in place."""
    with np.errstate(over="ignore"):
        x = x.astype(np.uint64, copy=copy)
        x ^= x >> np.uint64(30)
        x *= _M2
        x ^= x >> np.uint64(27)
        x *= _M3
        return x ^ (x >> np.uint64(31))


def mostly_ascending(a: np.ndarray) -> bool:
    """Whether at least 75% of the adjacent pairs of ``a`` are ascending."""
    return len(a) < 2 or np.count_nonzero(a[1:] >= a[:-1]) >= 0.75 * (len(a) - 1)


def argsort(key: np.ndarray, presorted: bool | None = None) -> np.ndarray:
    """Indices (int64) sorting an integer array, stably.

    Spans usually come grouped by trace and in time order, so keys by trace, parent or request
    are mostly in ascending runs already: numpy's stable sort (timsort) then beats polars'
    parallel sort 2x (TrainTicket, the demo's store); on keys in no order it is 2.4x slower
    (3M random keys), and polars sorts them. ``presorted``: whether the keys come in such runs;
    by default, whether the keys are :func:`mostly_ascending`.
    """
    if presorted if presorted is not None else mostly_ascending(key):
        return np.argsort(key, kind="stable")
    return pl.Series(key).arg_sort().to_numpy().astype(np.int64, copy=False)


@dataclass
class SpanCodes:
    """Spans as numpy arrays of shape (n_spans,), one entry per span after de-duplication.

    Attributes
    ----------
    source_row : ndarray of int64
        Row of the span in the input table.
    trace : ndarray of int32
        Trace code, an index into ``trace_ids``.
    parent : ndarray of int64
        Row (in these arrays) of the span's parent in its trace; -1 for a root or an orphan.
    has_parent : ndarray of bool
        The span names a parent (``parent_span_id`` set), found or not.
    operation : ndarray of int32
        Operation code, an index into ``operation_keys``.
    instance : ndarray of int32
        Instance code, an index into ``instances``; -1 when unknown.
    kind : ndarray of int8
        Index into :data:`~tracesleuth.schema.SPAN_KINDS`.
    follows_from, error : ndarray of bool
        ``FOLLOWS_FROM`` relation to the parent; the span failed: status ``error``, or an
        ``exception`` event (:data:`~tracesleuth.schema.ERROR`).
    exception_type : ndarray of int32
        Index into ``exception_types`` of the ``exception.type`` of the span's first
        ``exception`` event; -1 when it has none (or its first one names no type).
    start_ns, end_ns : ndarray of int64
        Span start and end, Unix epoch ns.
    trace_ids, instances, exception_types : pyarrow.Array of string
        Dictionaries of the trace, instance and exception type codes.
    operation_keys, operation_names : list of str
        ``"service:operation"`` and the operation name of each operation code.
    operation_service : ndarray of int32
        Service code (index into ``services``) of each operation code.
    services : list of str
    repairs : dict
        ``exact_duplicates``, ``shared_spans_split``, ``conflicting_ids_renamed`` counts.
    renamed : polars.DataFrame or None
        ``source_row``, ``span_id``, ``parent_span_id`` of the spans whose ids de-duplication
        changed.
    """

    source_row: np.ndarray
    trace: np.ndarray
    parent: np.ndarray
    has_parent: np.ndarray
    operation: np.ndarray
    instance: np.ndarray
    kind: np.ndarray
    follows_from: np.ndarray
    error: np.ndarray
    exception_type: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    trace_ids: pa.Array
    instances: pa.Array
    exception_types: pa.Array
    operation_keys: list
    operation_names: list
    operation_service: np.ndarray
    services: list
    repairs: dict
    renamed: pl.DataFrame | None = None

    @property
    def n_spans(self) -> int:
        return len(self.source_row)

    @property
    def service(self) -> np.ndarray:
        """Service code of each span, ndarray of int32."""
        return self.operation_service[self.operation]

    def is_kind(self, kinds) -> np.ndarray:
        """Boolean mask of the spans whose kind is one of ``kinds``."""
        lut = np.zeros(len(_KIND_CODE), dtype=bool)
        lut[[_KIND_CODE[k] for k in kinds]] = True
        return lut[self.kind]

    def span_ids(self, rows: np.ndarray, spans: pa.Table) -> pa.Array:
        """The span ids (after de-duplication) of ``rows`` of these arrays, taken from ``spans``."""
        return self._ids(rows, spans, S.SPAN_ID)

    def parent_span_ids(self, rows: np.ndarray, spans: pa.Table) -> pa.Array:
        """The parent span ids (after de-duplication) of ``rows``, taken from ``spans``."""
        return self._ids(rows, spans, S.PARENT_SPAN_ID)

    def _ids(self, rows: np.ndarray, spans: pa.Table, column: str) -> pa.Array:
        src = self.source_row[rows]
        ids = take_rows(spans.column(column), src).combine_chunks().cast(pa.string())
        if self.renamed is None or len(src) == 0:
            return ids
        new = pl.DataFrame({SOURCE_ROW: src, "_old": pl.Series(ids)}).join(
            self.renamed, on=SOURCE_ROW, how="left", maintain_order="left")
        ids = new.select(pl.when(pl.col(S.SPAN_ID).is_not_null()).then(pl.col(column)).otherwise("_old"))
        return ids.to_series().to_arrow(compat_level=pl.CompatLevel.oldest()).cast(pa.string())


def take_rows(data, rows: np.ndarray):
    """``rows`` (any order) of a pyarrow Table or ChunkedArray, without concatenating its chunks.

    A run ``lo, lo + 1, ..., hi`` is a zero-copy slice. Other rows are taken chunk by chunk from
    the chunks they fall in (pyarrow's ``take`` on chunked data first concatenates every chunk:
    on a Parquet-read table that copies the whole column to pick a few rows); the result has one
    chunk per chunk read, in the order of ``rows``.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return data.slice(0, 0)
    lo, hi = int(rows.min()), int(rows.max()) + 1
    part = data.slice(lo, hi - lo)
    idx = rows - lo
    if hi - lo == len(rows) and (np.diff(rows) == 1).all():
        return part
    chunks = part.to_batches() if isinstance(part, pa.Table) else part.chunks
    if len(chunks) < 2:
        return part.take(pa.array(idx))
    order = None if (idx[1:] >= idx[:-1]).all() else np.argsort(idx, kind="stable")
    ordered = idx if order is None else idx[order]
    ends = np.cumsum([len(c) for c in chunks])
    cuts = np.searchsorted(ordered, ends, side="left")
    pieces, begin = [], 0
    for chunk, end, stop, first in zip(chunks, ends, cuts, np.concatenate(([0], ends[:-1]))):
        if stop > begin:
            pieces.append(chunk.take(pa.array(ordered[begin:stop] - first)))
        begin = stop
    taken = (pa.Table.from_batches(pieces, part.schema) if isinstance(part, pa.Table)
             else pa.chunked_array(pieces, part.type))
    if order is None:
        return taken
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return taken.take(pa.array(back))  # the taken rows only (len(rows)), back in the order asked


def dictionary_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Codes (int32, -1 for null) and dictionary of a string column, plain or dictionary-encoded.

    The codes number the values in order of first appearance. A dictionary-encoded column's
    chunks are put on one dictionary, which may then hold values no row has.
    """
    enc = column.unify_dictionaries() if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
    if enc.num_chunks == 0 or len(enc) == 0:
        return np.zeros(0, np.int32), pa.array([], pa.string())
    # The chunks of one encoding share a single dictionary (one memo table).
    dictionary = enc.chunk(enc.num_chunks - 1).dictionary
    codes, at = np.empty(len(enc), dtype=np.int32), 0
    for c in enc.chunks:
        indices = c.indices if c.null_count == 0 else pc.fill_null(c.indices, -1)
        codes[at:at + len(c)] = indices.to_numpy()
        at += len(c)
    return codes, dictionary.cast(pa.string())


def id_hashes(*columns: pa.ChunkedArray) -> tuple[list[np.ndarray], bool]:
    """64-bit hashes (ndarrays of uint64) of span id columns, one hash function for all of them.

    Span ids as the readers write them (16 lower-case hexadecimal digits) are taken as their
    64-bit value, mixed by :func:`mix64` (a bijection, so distinct ids never collide) and read
    straight from the Arrow buffers. If any id of any column is not such an id, every column is
    hashed by polars instead. Returns the hashes and whether they are the exact form (pass it
    to :func:`id_hash` for ids to compare with these).
    """
    exact = [_hex_values(c) for c in columns]
    if all(e is not None for e in exact):
        return [mix64(e, copy=False) for e in exact], True
    return [pl.Series(c).hash(seed=2).to_numpy() for c in columns], False


def id_hash(ids: pl.Series, exact: bool) -> np.ndarray:
    """The hashes of :func:`id_hashes` of more ids (``exact``: its second result)."""
    if not exact:
        return ids.hash(seed=2).to_numpy()
    values = _hex_values(ids.to_arrow(compat_level=pl.CompatLevel.oldest()))
    if values is None:
        raise ValueError("ids to compare with exact id hashes must be 16 hexadecimal digits")
    return mix64(values, copy=False)


def _hex_values(column) -> np.ndarray | None:
    """The 64-bit values of ids of 16 lower-case hexadecimal digits (nulls: 0), or None if a
    value is not one."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    values, at = np.empty(sum(len(c) for c in chunks), dtype=np.uint64), 0
    for chunk in chunks:
        n = len(chunk)
        digits = S.hex_digits(chunk, S.SPAN_ID_HEX_CHARS)
        if digits is None:
            return None
        if n == 0:
            continue
        # Each 8 digits (one per byte, little-endian) into 32 bits, by shifts and masks, in place:
        # the bytes come out permuted, which keeps distinct ids distinct.
        x = digits.view(np.uint64)
        tmp = np.empty_like(x)
        np.right_shift(x, np.uint64(8), out=tmp)  # two digits into one byte
        x <<= np.uint64(4)
        x |= tmp
        x &= np.uint64(0x00FF00FF00FF00FF)
        np.right_shift(x, np.uint64(8), out=tmp)  # two bytes into 16 bits
        x |= tmp
        x &= np.uint64(0x0000FFFF0000FFFF)
        np.right_shift(x, np.uint64(16), out=tmp)  # two 16 bits into 32 bits
        x |= tmp
        x &= np.uint64(0xFFFFFFFF)
        out = values[at:at + n]
        np.left_shift(x[0::2], np.uint64(32), out=out)
        out |= x[1::2]
        at += n
    return values


def exception_columns(spans: pa.Table) -> tuple[np.ndarray, pa.Array]:
    """Whether each span has an :data:`~tracesleuth.schema.EXCEPTION_EVENT` event, and the
    :data:`~tracesleuth.schema.ATTR_EXCEPTION_TYPE` of its first one.

    Vectorized over the flattened events (a chunk at a time): no per-span Python object.

    Parameters
    ----------
    spans : pyarrow.Table
        Spans with an :data:`~tracesleuth.schema.EVENTS` column (null or empty: no event),
        or without one (no span has an exception then).

    Returns
    -------
    has_exception : ndarray of bool, shape (n_spans,)
    exception_type : pyarrow.Array of string, shape (n_spans,)
        The string value of the first exception event's ``exception.type`` attribute (its first
        such attribute); null when the span has no exception event or it names no type.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from tracesleuth import schema as S
    >>> kv = lambda k, v: {"key": k, "str": v, "int": None, "float": None, "bool": None}
    >>> events = pa.array([[{"time_ns": 1, "name": "retry", "attributes": []},
    ...                     {"time_ns": 2, "name": "exception", "attributes": [kv("exception.type", "KeyError")]}],
    ...                    None, [{"time_ns": 3, "name": "exception", "attributes": []}]], pa.list_(S.EVENT_TYPE))
    >>> has, kind = exception_columns(pa.table({S.EVENTS: events}))
    >>> has.tolist(), kind.to_pylist()
    ([True, False, True], ['KeyError', None, None])
    """
    n = spans.num_rows
    has = np.zeros(n, dtype=bool)
    at = np.full(n, -1, dtype=np.int64)
    found: list[pa.Array] = []
    if S.EVENTS in spans.column_names and n:
        offset, taken = 0, 0
        for chunk in spans.column(S.EVENTS).chunks:
            events = chunk.flatten()
            if len(events):
                rows = pc.list_parent_indices(chunk).to_numpy()
                exceptions = np.flatnonzero(pc.fill_null(pc.equal(events.field("name"), S.EXCEPTION_EVENT), False)
                                            .to_numpy(zero_copy_only=False))
                if len(exceptions):
                    spans_with, first = np.unique(rows[exceptions], return_index=True)
                    has[offset + spans_with] = True
                    attributes = events.field(S.ATTRIBUTES).take(pa.array(exceptions[first]))
                    keys = attributes.flatten()
                    typed = np.flatnonzero(pc.fill_null(pc.equal(keys.field("key"), S.ATTR_EXCEPTION_TYPE), False)
                                           .to_numpy(zero_copy_only=False))
                    if len(typed):
                        owner = pc.list_parent_indices(attributes).to_numpy()[typed]
                        named, first_key = np.unique(owner, return_index=True)
                        found.append(keys.field("str").take(pa.array(typed[first_key])).cast(pa.string()))
                        at[offset + spans_with[named]] = taken + np.arange(len(named))
                        taken += len(named)
            offset += len(chunk)
    values = pa.concat_arrays(found) if found else pa.array([], pa.string())
    return has, values.take(pa.array(at, mask=at < 0))


def narrow_spans(spans: pa.Table) -> pa.Table:
    """``spans`` as trace assembly and the trace table read them: without the attributes, events,
    links and status message, with :data:`HAS_EXCEPTION` and :data:`FIRST_EXCEPTION_TYPE` derived
    once from the events (:func:`exception_columns`) when it has them."""
    drop = [c for c in (*S.NESTED_SPAN_COLUMNS, S.STATUS_MESSAGE) if c in spans.column_names]
    if S.EVENTS not in spans.column_names or HAS_EXCEPTION in spans.column_names:
        return spans.drop_columns(drop)
    has, kind = exception_columns(spans)
    narrow = spans.drop_columns(drop).append_column(HAS_EXCEPTION, pa.array(has))
    return narrow.append_column(FIRST_EXCEPTION_TYPE, kind)


def encode_spans(spans: pa.Table, rows: np.ndarray | None = None) -> SpanCodes:
    """Integer codes of a span table, its duplicates repaired and parents linked.

    Parameters
    ----------
    spans : pyarrow.Table
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, whole traces only (the attributes
        column is not read; the events only for :func:`exception_columns`, whose two columns
        :func:`narrow_spans` puts in their place beforehand).
    rows : ndarray of int64, shape (spans.num_rows,), optional
        When ``spans`` is a partition taken from a larger input: the row of each of its spans
        in that input. ``source_row`` (and ``renamed``) then index the input.

    Returns
    -------
    SpanCodes
    """
    n = spans.num_rows
    with ThreadPoolExecutor(1) as pool:  # the names are encoded beside the id work (numpy, Arrow
        names = pool.submit(_name_codes, spans)  # and polars release the GIL)
        source_row, trace, trace_ids, parent, has_parent, repairs, renamed = _link_spans(spans)
        names = names.result()
    kept = source_row if len(source_row) < n else slice(None)  # spans left after de-duplication
    services, operation_keys, operation_service, operation, operation_names = _operations(
        *names[S.SERVICE], *names[S.OPERATION], kept)
    instance, instances = names[S.INSTANCE]
    kind, kinds = names[S.KIND]
    kind_lut = np.array([_KIND_CODE.get(k, _KIND_CODE["unspecified"]) for k in kinds.to_pylist()] or [0], np.int8)
    status, statuses = names[S.STATUS]
    err_lut = np.array([s == "error" for s in statuses.to_pylist()] or [False])
    if HAS_EXCEPTION in spans.column_names:
        has_exception = spans.column(HAS_EXCEPTION).to_numpy()
        exception_type, exception_types = dictionary_codes(spans.column(FIRST_EXCEPTION_TYPE))
    else:
        has_exception, kinds_of = exception_columns(spans)
        exception_type, exception_types = dictionary_codes(pa.chunked_array([kinds_of], pa.string()))
    exception_type = exception_type if len(exception_type) == n else np.full(n, -1, np.int32)
    follows_from = spans.column(S.FOLLOWS_FROM).to_numpy()[kept].astype(bool, copy=False)
    start_ns, end_ns = spans.column(S.START_NS).to_numpy()[kept], spans.column(S.END_NS).to_numpy()[kept]
    if rows is not None:
        source_row = rows[source_row]
        if renamed is not None:
            renamed = renamed.with_columns(pl.Series(SOURCE_ROW, rows[renamed[SOURCE_ROW].to_numpy()]))
    return SpanCodes(
        source_row=source_row, trace=trace, parent=parent, has_parent=has_parent,
        operation=operation, instance=instance[kept], kind=kind_lut[kind[kept]],
        follows_from=follows_from, error=err_lut[status[kept]] | has_exception[kept],
        exception_type=exception_type[kept], start_ns=start_ns, end_ns=end_ns, trace_ids=trace_ids,
        instances=instances, exception_types=exception_types, operation_keys=operation_keys,
        operation_names=operation_names,
        operation_service=operation_service, services=services, repairs=repairs, renamed=renamed)


def _name_codes(spans: pa.Table) -> dict:
    """Dictionary codes of the name columns, ``{column: (codes, dictionary)}``."""
    return {c: dictionary_codes(spans.column(c)) for c in (S.SERVICE, S.OPERATION, S.INSTANCE, S.KIND, S.STATUS)}


def _link_spans(spans: pa.Table):
    """Trace codes, duplicates repaired (:func:`deduplicate`) and parent rows linked."""
    n = spans.num_rows
    trace, trace_ids = dictionary_codes(spans.column(S.TRACE_ID))
    parent_col = spans.column(S.PARENT_SPAN_ID)
    (span_hash, parent_hash), exact = id_hashes(spans.column(S.SPAN_ID), parent_col)
    has_parent = pc.is_valid(parent_col).to_numpy(zero_copy_only=False) if n else np.zeros(0, bool)
    keys = _SpanKeys(trace, span_hash, parent_hash)
    source_row = np.arange(n, dtype=np.int64)
    repairs = {"exact_duplicates": 0, "shared_spans_split": 0, "conflicting_ids_renamed": 0}
    renamed = None
    shared, shared_keys = keys.shared()
    if len(shared):
        # De-duplication reads the spans that share an id and the children of such ids (a shared
        # server half's children follow it to its new id); no other span is changed by it.
        child = np.flatnonzero(has_parent & keys.parent_in(shared_keys))
        keep, span_hash, parent_hash, has_parent, repairs, renamed = _repair_ids(
            spans, np.union1d(shared, child), span_hash, parent_hash, has_parent, exact)
        if not keep.all():
            source_row, trace = source_row[keep], trace[keep]
            span_hash, parent_hash, has_parent = span_hash[keep], parent_hash[keep], has_parent[keep]
        if renamed is None:
            keys.drop(keep)
        else:
            keys = _SpanKeys(trace, span_hash, parent_hash, grouped=keys.grouped)
    parent = keys.parents(trace, span_hash, parent_hash, has_parent)
    return source_row, trace, trace_ids, parent, has_parent, repairs, renamed


class _SpanKeys:
    """64-bit keys of (trace, span id) in sorted order, and the key of each span's parent.

    A key is the trace code in the high bits and the top bits of the 64-bit span id hash below
    it, so spans grouped by trace (as stored) give keys in runs, which sort fast, and a lookup
    of parents in trace order walks the sorted keys in order. Equal keys (a span id repeated in
    a trace, or, rarely, two ids whose hashes share their top bits) are adjacent once sorted.
    """

    def __init__(self, trace, span_hash, parent_hash, *, grouped: bool | None = None):
        bits = np.uint64(max(int(trace.max(initial=0)).bit_length(), 1))
        high = trace.astype(np.uint64) << (np.uint64(64) - bits)
        key = high | (span_hash >> bits)
        high |= parent_hash >> bits
        self.parent_key = high
        self.grouped = mostly_ascending(trace) if grouped is None else grouped
        self.order = argsort(key, presorted=self.grouped)  # a trace's keys come in a run when grouped
        self.sorted = key[self.order]

    def shared(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows whose key another row has too (ascending), and those keys (unique, ascending)."""
        at = np.flatnonzero(self.sorted[1:] == self.sorted[:-1])
        return np.unique(self.order[np.concatenate((at, at + 1))]), np.unique(self.sorted[at])

    def parent_in(self, keys: np.ndarray) -> np.ndarray:
        """Boolean mask of the spans whose parent key is one of ``keys`` (unique, ascending)."""
        at = np.minimum(np.searchsorted(keys, self.parent_key), len(keys) - 1)
        return keys[at] == self.parent_key

    def drop(self, keep: np.ndarray) -> None:
        """Keep the spans at ``keep`` (a mask) only; dropping keys keeps the rest sorted."""
        if keep.all():
            return
        kept = keep[self.order]
        self.sorted, self.order = self.sorted[kept], (np.cumsum(keep) - 1)[self.order[kept]]
        self.parent_key = self.parent_key[keep]

    def parents(self, trace, span_hash, parent_hash, has_parent) -> np.ndarray:
        """Row of each span's parent (-1 when it has none or it is not in the trace).

        A match of keys is checked on the trace code and the full span id hash, so a false link
        would need a 64-bit collision of span id hashes within one trace (exact hashes of
        :func:`id_hashes` have none). When a key is shared by
        several spans and the first of them is not the parent, every link is made again by an
        exact join on (trace, span id hash).
        """
        n = len(trace)
        if n == 0:
            return np.zeros(0, np.int64)
        at = np.minimum(np.searchsorted(self.sorted, self.parent_key), n - 1)
        found = has_parent & (self.sorted[at] == self.parent_key)
        candidate = self.order[at]
        del at
        ok = found.copy()
        ok[found] = (trace[candidate[found]] == trace[found]) & (span_hash[candidate[found]] == parent_hash[found])
        if (found & ~ok).any() and (self.sorted[1:] == self.sorted[:-1]).any():
            return _link_parents_exact(trace, span_hash, parent_hash, has_parent)
        candidate[~ok] = -1
        return candidate


def _operations(svc: np.ndarray, services: pa.Array, name: np.ndarray, names: pa.Array, rows):
    """Services, operation keys and names, the service of each key, and each span's key code
    (of the spans at ``rows``)."""
    svc, name = svc[rows].astype(np.int64), name[rows].astype(np.int64)
    n_names = max(len(names), 1)
    pair = svc * n_names + name
    if len(services) * n_names <= _MAX_GRID:
        present = np.zeros(len(services) * n_names, dtype=bool)
        present[pair] = True
        used = np.flatnonzero(present)
        lut = np.full(len(present), -1, dtype=np.int32)
        lut[used] = np.arange(len(used), dtype=np.int32)
        code = lut[pair]
    else:
        used, code = np.unique(pair, return_inverse=True)
        code = code.astype(np.int32)
    service_names, op_names = services.to_pylist(), names.to_pylist()
    op_service = (used // n_names).astype(np.int32)
    op_name = [op_names[i] for i in (used % n_names).tolist()]
    keys = [f"{service_names[s]}:{o}" for s, o in zip(op_service.tolist(), op_name)]
    return service_names, keys, op_service, code, op_name


def _repair_ids(spans: pa.Table, rows: np.ndarray, span_hash, parent_hash, has_parent, exact: bool):
    """Run :func:`deduplicate` on the spans at ``rows`` (those sharing ids, and their children);
    ``exact``: how the hashes were made (:func:`id_hashes`)."""
    cols = [S.TRACE_ID, S.SPAN_ID, S.PARENT_SPAN_ID, S.SERVICE, S.OPERATION, S.KIND, S.START_NS, S.END_NS]
    sub = pl.from_arrow(take_rows(spans.select(cols), rows)).with_columns(pl.selectors.categorical().cast(pl.String))
    sub = sub.with_columns(pl.Series(SOURCE_ROW, rows, dtype=pl.Int64))
    fixed, repairs = deduplicate(sub)
    kept = fixed[SOURCE_ROW].to_numpy()
    keep = np.ones(spans.num_rows, dtype=bool)
    keep[np.setdiff1d(rows, kept)] = False
    before = sub.join(fixed.select(SOURCE_ROW, pl.col(S.SPAN_ID).alias("_s"), pl.col(S.PARENT_SPAN_ID).alias("_p")),
                      on=SOURCE_ROW, how="inner")
    changed = before.filter((pl.col(S.SPAN_ID) != pl.col("_s")) | pl.col(S.PARENT_SPAN_ID).ne_missing(pl.col("_p")))
    renamed = None
    if changed.height:
        renamed = changed.select(SOURCE_ROW, pl.col("_s").alias(S.SPAN_ID), pl.col("_p").alias(S.PARENT_SPAN_ID))
        span_hash, parent_hash, has_parent = span_hash.copy(), parent_hash.copy(), has_parent.copy()
        at = renamed[SOURCE_ROW].to_numpy()
        span_hash[at] = id_hash(renamed[S.SPAN_ID], exact)
        parent_hash[at] = id_hash(renamed[S.PARENT_SPAN_ID], exact)
        has_parent[at] = renamed[S.PARENT_SPAN_ID].is_not_null().to_numpy()
    return keep, span_hash, parent_hash, has_parent, repairs, renamed


def _link_parents_exact(trace, span_hash, parent_hash, has_parent) -> np.ndarray:
    """Row of each span's parent by an exact join on (trace code, span id hash); of spans
    sharing both, the first."""
    row = pl.Series(np.arange(len(trace), dtype=np.int32))
    ids = pl.DataFrame({"t": trace, "s": span_hash, "r": row}).unique(["t", "s"], keep="first")
    joined = pl.DataFrame({"t": trace, "s": parent_hash, "l": row}).join(ids, on=["t", "s"], how="inner")
    parent = np.full(len(trace), -1, dtype=np.int64)
    parent[joined["l"].to_numpy()] = joined["r"].to_numpy()
    return np.where(has_parent, parent, -1)


def _derived_ids(trace_ids: list[str], span_ids: list[str], salts: list[str]) -> list[str]:
    """Stable new 16-hex-digit span ids derived from (trace id, span id, salt)."""
    import hashlib

    return [hashlib.blake2b(f"{t}/{s}/{k}".encode(), digest_size=8).hexdigest()
            for t, s, k in zip(trace_ids, span_ids, salts)]


def deduplicate(df: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
    """Step 1 of :func:`~tracesleuth.model.assembly.assemble`: remove exact copies and split
    shared or clashing span ids.

    A new id is derived from the trace id, the old id and the span's own fields (service,
    operation, kind, times, parent; holders of one id that are not exact copies differ in one of
    them), so it depends neither on the other spans read nor on their order.

    Returns
    -------
    frame : polars.DataFrame
        Spans with unique ``(trace_id, span_id)``, in input order.
    counts : dict
        ``exact_duplicates``, ``shared_spans_split``, ``conflicting_ids_renamed``.
    """
    key = [S.TRACE_ID, S.SPAN_ID, S.SERVICE, S.OPERATION, S.KIND, S.START_NS, S.END_NS, S.PARENT_SPAN_ID]
    counts = {"exact_duplicates": 0, "shared_spans_split": 0, "conflicting_ids_renamed": 0}
    grp = [S.TRACE_ID, S.SPAN_ID]
    df = df.with_columns(_i=pl.int_range(pl.len()))
    clash = df.filter(pl.struct(grp).is_duplicated())
    if clash.height == 0:
        return df.drop("_i"), counts
    copies = clash.filter(pl.struct(key).is_first_distinct().not_())["_i"]
    counts["exact_duplicates"] = copies.len()
    if copies.len():
        df = df.filter(~pl.col("_i").is_in(copies.implode()))
        clash = clash.filter(~pl.col("_i").is_in(copies.implode()))
        clash = clash.filter(pl.struct(grp).is_duplicated())
        if clash.height == 0:
            return df.drop("_i"), counts
    # The id stays with the earliest client span holding it (else the earliest span); every other
    # holder gets a new id. A server half of a client's id is Zipkin's shared span: it becomes the
    # client's child.
    clash = clash.sort([S.TRACE_ID, S.SPAN_ID, pl.col(S.KIND) != "client", S.START_NS, "_i"]).with_columns(
        _rank=pl.int_range(pl.len()).over(grp),
        _has_client=(pl.col(S.KIND) == "client").any().over(grp),
    )
    movers = clash.filter(pl.col("_rank") > 0).with_columns(
        _shared=(pl.col(S.KIND) == "server") & pl.col("_has_client"))
    salt = pl.concat_str([pl.col(c).cast(pl.String).fill_null("") for c in key[2:]], separator="/")
    movers = movers.with_columns(_new_id=pl.Series(_derived_ids(
        movers[S.TRACE_ID].to_list(), movers[S.SPAN_ID].to_list(), movers.select(salt).to_series().to_list()),
        dtype=pl.String))
    counts["shared_spans_split"] = int(movers["_shared"].sum())
    counts["conflicting_ids_renamed"] = movers.height - counts["shared_spans_split"]
    moved = movers.select(
        "_i", "_new_id",
        _new_parent=pl.when(pl.col("_shared")).then(pl.col(S.SPAN_ID)).otherwise(pl.col(S.PARENT_SPAN_ID)))
    df = df.join(moved, on="_i", how="left").with_columns(
        pl.coalesce("_new_id", S.SPAN_ID).alias(S.SPAN_ID),
        pl.when(pl.col("_new_id").is_not_null()).then(pl.col("_new_parent"))
        .otherwise(pl.col(S.PARENT_SPAN_ID)).alias(S.PARENT_SPAN_ID),
    )
    # Children recorded by a shared server half's own service follow it to its new id.
    shared = movers.filter(pl.col("_shared")).select(
        S.TRACE_ID, pl.col(S.SPAN_ID).alias("_p_old"), pl.col(S.SERVICE).alias("_p_service"),
        pl.col("_new_id").alias("_p_new")).unique(subset=[S.TRACE_ID, "_p_old", "_p_service"], keep="first")
    if shared.height:
        df = df.join(shared, left_on=[S.TRACE_ID, S.PARENT_SPAN_ID, S.SERVICE],
                     right_on=[S.TRACE_ID, "_p_old", "_p_service"], how="left")
        df = df.with_columns(
            pl.when(pl.col("_p_new").is_not_null() & (pl.col("_p_new") != pl.col(S.SPAN_ID)))
            .then(pl.col("_p_new")).otherwise(pl.col(S.PARENT_SPAN_ID)).alias(S.PARENT_SPAN_ID))
    return df.sort("_i").drop("_i", "_new_id", "_new_parent", "_p_new", strict=False), counts
