"""Trace assembly: spans -> parent/child trees, repaired and checked.

Every function here is a pure function of spans that hold whole traces (it never looks across
trace ids), so the same code runs on one machine or partition-wise (partitioned by trace id) on
Dask. The work is numpy on integer-coded spans (:func:`~._codes.encode_spans`, which also does
step 1); :func:`assemble` returns the result as a frame. Nothing is dropped: duplicates are removed only when they are exact copies, and
everything repaired is counted in an :class:`AssemblyReport`.

Steps (:func:`assemble`):

1. **Duplicate span ids.** Exact copies of a span (same trace, id, service, operation, kind and
   times) are de-duplicated and counted. A span id shared by a client and a server span (Zipkin's
   B3 shared spans, ``shared: true``) is split the way Jaeger's ``SpanIDDeduper`` does: the
   server half gets a new id derived from the old one and becomes the child of the client half;
   children recorded by the server's service are moved under it. Any other clash gets a new id
   too (counted), keeping its parent.
2. **Tree.** Depth of every span by walking parent links level by level; spans whose parent is
   not in the trace (orphans), spans on a parent cycle, and traces with several roots are
   reported and kept (an orphan's subtree is treated as one more root).
3. **Clock skew.** A synchronous child by declaration (not producer/consumer, not ``FOLLOWS_FROM``:
   :func:`~._calls.synchronous_children` without the timing test, which needs corrected times) recorded on
   another host (its instance without a ``:port``; its service when the instance is unknown; and
   never when both spans name the same machine in :data:`MACHINE_ATTRIBUTES`, as Jaeger compares
   the ``ip`` tags and Zipkin the endpoints' addresses: processes of one machine share its clock,
   and a server span that ends after its client's is then instrumentation, not skew) that starts before its
   parent, or that is the server half of an RPC (kind server, parent kind client; unspecified
   kinds count as both) and ends after its parent, is shifted the way Jaeger's clock-skew
   adjuster and Zipkin's ``CorrectForClockSkew`` do: assuming the network latency splits evenly
   between request and response, the child is centred in its parent, ``delta = parent.start +
   (parent.duration - child.duration) / 2 - child.start``; a child longer than its parent only
   has its start moved to the parent's. Descendants on the same host inherit the delta. Applied
   top-down. A child that ends after its parent and is not an RPC's server half is left alone:
   it is asynchronous work that outlives its parent.

References
----------
Jaeger ``model/adjuster/clockskew.go`` and ``span_id_deduper.go``; Zipkin
``zipkin/src/main/java/zipkin2/internal/CorrectForClockSkew.java``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema as S
from ._calls import synchronous_children
from ._codes import SOURCE_ROW, SpanCodes, dictionary_codes, encode_spans, take_rows

DEPTH = "depth"
ROOT_SPAN_ID = "root_span_id"
SKEW_NS = "skew_ns"
ORPHAN = "orphan"
#: Upper bound on tree depth; deeper chains are parent cycles.
MAX_DEPTH = 512


@dataclass(frozen=True)
class AssemblyReport:
    """What trace assembly repaired or found, with counts.

    Attributes
    ----------
    traces, spans : int
        Traces and spans after assembly.
    exact_duplicates : int
        Exact span copies removed.
    shared_spans_split : int
        Client/server shared span ids split into two spans.
    conflicting_ids_renamed : int
        Other duplicate span ids given a new id.
    orphan_spans : int
        Spans whose parent is not in their trace (kept; treated as subtree roots).
    cycle_spans : int
        Spans on a parent cycle (kept; treated as orphans).
    traces_without_root : int
        Traces with no span lacking a parent.
    traces_with_several_roots : int
        Traces with more than one root (roots plus orphans).
    skew_corrected_spans : int
        Spans found outside their parent on another host and shifted (clock-skew corrections).
    skew_shifted_spans : int
        All spans shifted, counting descendants that inherit a correction on the same host.
    max_abs_skew_ns : int
        Largest shift applied, nanoseconds.
    skew_by_service : dict
        ``{"parent service -> child service": corrections}``.
    """

    traces: int = 0
    spans: int = 0
    exact_duplicates: int = 0
    shared_spans_split: int = 0
    conflicting_ids_renamed: int = 0
    orphan_spans: int = 0
    cycle_spans: int = 0
    traces_without_root: int = 0
    traces_with_several_roots: int = 0
    skew_corrected_spans: int = 0
    skew_shifted_spans: int = 0
    max_abs_skew_ns: int = 0
    skew_by_service: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-safe dictionary of the counts."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def merge(self, other: "AssemblyReport") -> "AssemblyReport":
        """Sum of two reports (for partition-wise assembly)."""
        out = {}
        for k in self.__dataclass_fields__:
            a, b = getattr(self, k), getattr(other, k)
            if k == "max_abs_skew_ns":
                out[k] = max(a, b)
            elif k == "skew_by_service":
                out[k] = {key: a.get(key, 0) + b.get(key, 0) for key in a.keys() | b.keys()}
            else:
                out[k] = a + b
        return AssemblyReport(**out)


def as_frame(spans, *, attributes: bool = True) -> pl.DataFrame:
    """Spans as a polars DataFrame (accepts a pyarrow Table, a polars DataFrame or a read result).

    With ``attributes=False`` the attributes column is left out before any conversion (it is
    usually the largest column and assembly does not need it).
    """
    if hasattr(spans, "spans") and isinstance(getattr(spans, "spans"), pa.Table):
        spans = spans.spans
    if isinstance(spans, pl.LazyFrame):
        spans = spans.collect()
    if isinstance(spans, pa.Table):
        if not attributes and S.ATTRIBUTES in spans.column_names:
            spans = spans.drop_columns([S.ATTRIBUTES])
        df = pl.from_arrow(spans)
        assert isinstance(df, pl.DataFrame)
        # dictionary-encoded name columns (as a store reads them) become the schema's strings
        return df.with_columns(pl.selectors.categorical().cast(pl.String))
    if isinstance(spans, pl.DataFrame):
        return spans if attributes or S.ATTRIBUTES not in spans.columns else spans.drop(S.ATTRIBUTES)
    raise TypeError(f"expected spans as a pyarrow.Table or polars.DataFrame, got {type(spans).__name__}")


def attributes_of(spans) -> pa.ChunkedArray | None:
    """The attributes column of ``spans`` (Arrow), or None."""
    if hasattr(spans, "spans") and isinstance(getattr(spans, "spans"), pa.Table):
        spans = spans.spans
    if isinstance(spans, pa.Table):
        return spans.column(S.ATTRIBUTES) if S.ATTRIBUTES in spans.column_names else None
    if isinstance(spans, (pl.DataFrame, pl.LazyFrame)):
        df = spans.collect() if isinstance(spans, pl.LazyFrame) else spans
        return df[S.ATTRIBUTES].to_arrow() if S.ATTRIBUTES in df.columns else None
    return None


@dataclass
class Tree:
    """The assembled call trees of :class:`~._codes.SpanCodes`, arrays of shape (n_spans,).

    Attributes
    ----------
    parent : ndarray of int64
        Row of the parent; -1 for roots, orphans and spans cut from a parent cycle.
    depth : ndarray of int32
        0 for roots and orphans.
    orphan : ndarray of bool
        The parent is missing from the trace, or the span was on a parent cycle.
    skew_ns : ndarray of int64
        Clock-skew shift applied (original start = ``start_ns - skew_ns``).
    start_ns, end_ns : ndarray of int64
        Span times after the clock-skew correction.
    by_depth : (ndarray of int64, ndarray of int64)
        Rows ordered by depth (ascending rows within a depth) and the bounds of each depth in
        that order: the rows at depth ``d`` are ``order[bounds[d]:bounds[d + 1]]``.
    """

    parent: np.ndarray
    depth: np.ndarray
    orphan: np.ndarray
    skew_ns: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    by_depth: tuple = field(repr=False)
    _root: np.ndarray | None = field(default=None, repr=False)

    @property
    def root(self) -> np.ndarray:
        """Row of the root of each span's tree (itself for roots and orphans), ndarray of int64."""
        if self._root is None:
            root = np.arange(len(self.parent))
            order, bounds = self.by_depth
            for d in range(1, len(bounds) - 1):
                rows = order[bounds[d]:bounds[d + 1]]
                root[rows] = root[self.parent[rows]]
            self._root = root
        return self._root


def spans_table(spans) -> pa.Table:
    """Spans as an Arrow table (read results unwrapped, polars frames converted)."""
    if hasattr(spans, "spans") and isinstance(getattr(spans, "spans"), pa.Table):
        return spans.spans
    if isinstance(spans, pl.LazyFrame):
        spans = spans.collect()
    if isinstance(spans, pl.DataFrame):
        return spans.to_arrow(compat_level=pl.CompatLevel.oldest())
    if isinstance(spans, pa.Table):
        return spans
    raise TypeError(f"expected spans as a pyarrow.Table or polars.DataFrame, got {type(spans).__name__}")


def assemble(spans) -> tuple[pl.DataFrame, AssemblyReport]:
    """Assemble spans into repaired trees (steps 1-3 of the module docstring).

    Parameters
    ----------
    spans : pyarrow.Table, polars.DataFrame or SpanReadResult
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, whole traces only.

    Returns
    -------
    frame : polars.DataFrame
        The spans, shape (n_spans, 11 + 6), with ``start_ns``/``end_ns`` corrected for clock skew
        and the extra columns ``source_row`` (int64 row of the span in the input), ``depth``
        (int32, 0 for roots and orphans), ``orphan`` (bool), ``skew_ns`` (int64 shift applied:
        original start = ``start_ns - skew_ns``), ``parent_row`` (int64 row of the parent in
        this frame, null for roots and orphans) and ``root_span_id`` (the root of the span's
        tree). The attributes column is not carried (see :func:`attributes_of`).
    report : AssemblyReport
    """
    table = spans_table(spans)
    codes = encode_spans(table)
    tree, report = assemble_codes(codes, attributes_of(table))
    narrow = table.drop_columns([S.ATTRIBUTES]) if S.ATTRIBUTES in table.column_names else table
    if codes.n_spans < table.num_rows:
        narrow = take_rows(narrow, codes.source_row)
    df = as_frame(narrow)
    if codes.renamed is not None:
        rows = np.arange(codes.n_spans)
        df = df.with_columns(pl.Series(S.SPAN_ID, codes.span_ids(rows, table)),
                             pl.Series(S.PARENT_SPAN_ID, codes.parent_span_ids(rows, table)))
    out = df.with_columns(
        pl.Series(S.START_NS, tree.start_ns, dtype=pl.Int64),
        pl.Series(S.END_NS, tree.end_ns, dtype=pl.Int64),
        pl.Series(SOURCE_ROW, codes.source_row, dtype=pl.Int64),
        pl.Series(DEPTH, tree.depth, dtype=pl.Int32),
        pl.Series(ORPHAN, tree.orphan),
        pl.Series(SKEW_NS, tree.skew_ns, dtype=pl.Int64),
        pl.Series("parent_row", tree.parent, dtype=pl.Int64).set(pl.Series(tree.parent < 0), None),
    )
    out = out.with_columns(pl.col(S.SPAN_ID).gather(pl.Series(tree.root)).alias(ROOT_SPAN_ID))
    return out, report


#: What :func:`skew_corrected_times` assumes of a span whose column is missing: its kind unknown (a
#: client and a server alike), not ``FOLLOWS_FROM``, its status unset, its instance unknown.
_ASSUMED = {S.KIND: pa.scalar("unspecified"), S.FOLLOWS_FROM: pa.scalar(False), S.STATUS: pa.scalar("unset"),
            S.INSTANCE: pa.scalar(None, pa.string())}


#: The columns :func:`skew_corrected_times` reads: ids, names, times, the declarations of step 3, and
#: the attributes that name a span's machine.
_READ = (S.TRACE_ID, S.SPAN_ID, S.PARENT_SPAN_ID, S.SERVICE, S.OPERATION, S.INSTANCE, S.KIND, S.STATUS,
         S.FOLLOWS_FROM, S.START_NS, S.END_NS, S.ATTRIBUTES)


def skew_corrected_times(spans) -> tuple[np.ndarray, np.ndarray, AssemblyReport]:
    """Each span's start and end after the clock-skew correction (step 3 of the module docstring),
    in the input's rows.

    Parameters
    ----------
    spans : pyarrow.Table or polars.DataFrame
        Spans of whole traces: at least the ids, ``service``, ``operation`` and times of
        :data:`~tracesleuth.schema.SPAN_SCHEMA`; a missing ``kind``, ``follows_from``, ``status`` or
        ``instance`` is taken as unknown (:data:`_ASSUMED`).

    Returns
    -------
    start_ns, end_ns : ndarray of int64, shape (n_spans,)
        Unix epoch ns; a span de-duplicated away (an exact copy, step 1) keeps its recorded times.
    report : AssemblyReport
    """
    if isinstance(spans, pl.DataFrame):   # only what the correction reads (not the events) is converted
        spans = spans.select([c for c in _READ if c in spans.columns])
    table = spans_table(spans)
    table = table.select([c for c in _READ if c in table.column_names])
    for name, value in _ASSUMED.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.repeat(value, table.num_rows))
    codes = encode_spans(table)
    tree, report = assemble_codes(codes, attributes_of(table))
    start = table.column(S.START_NS).to_numpy().astype(np.int64, copy=True)
    end = table.column(S.END_NS).to_numpy().astype(np.int64, copy=True)
    start[codes.source_row] = tree.start_ns
    end[codes.source_row] = tree.end_ns
    return start, end, report


def assemble_codes(codes: SpanCodes, attributes: pa.ChunkedArray | None = None) -> tuple[Tree, AssemblyReport]:
    """Steps 2-3 of the module docstring on spans already encoded (step 1 is done by
    :func:`~._codes.encode_spans`).

    Parameters
    ----------
    codes : SpanCodes
        Spans of whole traces.
    attributes : pyarrow.ChunkedArray, optional
        The input's attributes column (indexed by ``codes.source_row``), read only to tell
        whether a span outside its parent ran on the parent's machine.

    Returns
    -------
    tree : Tree
    report : AssemblyReport
    """
    n = codes.n_spans
    pi = codes.parent.copy()
    orphan = (pi < 0) & codes.has_parent
    depth = np.full(n, -1, dtype=np.int32)
    level = [np.flatnonzero(pi < 0)]  # the rows at each depth, top-down
    depth[level[0]] = 0
    waiting = np.flatnonzero(pi >= 0)  # rows whose depth is not known yet
    for d in range(MAX_DEPTH):
        found = depth[pi[waiting]] == d
        if not found.any():
            break
        level.append(waiting[found])
        depth[level[-1]] = d + 1
        waiting = waiting[~found]
    cycle = depth < 0
    if len(waiting):  # parent links that loop (and what hangs below them): cut, become subtree roots
        pi[waiting] = -1
        depth[waiting] = 0
        level[0] = np.flatnonzero(depth == 0)
    tree = Tree(parent=pi, depth=depth, orphan=orphan | cycle,
                skew_ns=np.zeros(n, dtype=np.int64), start_ns=codes.start_ns, end_ns=codes.end_ns,
                by_depth=(np.concatenate(level), np.cumsum([0] + [len(rows) for rows in level])))
    corrected = _correct_skew(codes, tree, attributes)

    per_trace = np.bincount(codes.trace, minlength=len(codes.trace_ids))
    roots = np.bincount(codes.trace[depth == 0], minlength=len(per_trace))
    true_roots = np.bincount(codes.trace[~codes.has_parent], minlength=len(per_trace))
    present = per_trace > 0
    pairs = {}
    if corrected.any():
        idx = np.flatnonzero(corrected)
        names = np.array(codes.services, dtype=object)
        keys = names[codes.service[pi[idx]]] + " -> " + names[codes.service[idx]]
        k, c = np.unique(keys.astype(str), return_counts=True)
        pairs = dict(zip(k.tolist(), c.tolist()))
    report = AssemblyReport(
        traces=int(present.sum()), spans=n, **codes.repairs,
        orphan_spans=int(orphan.sum()), cycle_spans=int(cycle.sum()),
        traces_without_root=int((present & (true_roots == 0)).sum()),
        traces_with_several_roots=int((roots > 1).sum()),
        skew_corrected_spans=int(corrected.sum()), skew_shifted_spans=int((tree.skew_ns != 0).sum()),
        max_abs_skew_ns=int(np.abs(tree.skew_ns).max(initial=0)),
        skew_by_service=pairs,
    )
    return tree, report


def _correct_skew(codes: SpanCodes, tree: Tree, attributes) -> np.ndarray:
    """Step 3: shift spans outside their parent on another host, top-down. Fills
    ``tree.skew_ns`` and shifts ``tree.start_ns``/``end_ns``; returns the mask of spans
    corrected (not counting those that inherit their parent's shift).

    Only the subtrees under a span outside its parent by the recorded times are walked: a span
    none of whose ancestors moved is compared with its parent's recorded times, so it moves only
    if it is outside them.
    """
    n = codes.n_spans
    pi, delta = tree.parent, tree.skew_ns
    start, end = codes.start_ns, codes.end_ns
    host = _hosts(codes)
    sync_rpc = synchronous_children(codes.kind, codes.follows_from)  # declared; lateness is decided below
    is_server, is_client = codes.is_kind(("server", "unspecified")), codes.is_kind(("client", "unspecified"))

    def outside(idx, p, p_start, p_end, inherit):
        # Outside the parent: starting early, or (the server half of an RPC) ending late;
        # otherwise a child ending late is asynchronous work.
        return (((start[idx] < p_start) | ((end[idx] > p_end) & is_server[idx] & is_client[p]))
                & sync_rpc[idx] & ~inherit)

    child = np.flatnonzero(pi >= 0)
    p = pi[child]
    moved = np.zeros(n, dtype=bool)  # the spans that can move: outside their parent, and below them
    moved[child[outside(child, p, start[p], end[p], host[child] == host[p])]] = True
    if not moved.any():
        return moved
    order, levels = tree.by_depth
    for d in range(1, len(levels) - 1):
        idx = order[levels[d]:levels[d + 1]]
        moved[idx] |= moved[pi[idx]]
    machines = _MachineLookup(attributes, codes.source_row)
    inherited = np.zeros(n, dtype=bool)
    for d in range(1, len(levels) - 1):
        idx = order[levels[d]:levels[d + 1]]
        idx = idx[moved[idx]]
        if len(idx) == 0:
            continue
        p = pi[idx]
        inherit = host[idx] == host[p]
        p_delta = delta[p]
        p_start, p_end = start[p] + p_delta, end[p] + p_delta
        out = outside(idx, p, p_start, p_end, inherit)
        own = np.zeros(len(idx), dtype=np.int64)
        if out.any():
            k = np.flatnonzero(out)
            ps, pe, cs, ce = p_start[k], p_end[k], start[idx[k]], end[idx[k]]
            p_dur, c_dur = pe - ps, ce - cs
            own[k] = np.where(c_dur > p_dur, np.where(cs < ps, ps - cs, 0), ps + (p_dur - c_dur) // 2 - cs)
            machines.clear_same_machine(own, idx, p, inherit)
        delta[idx] = np.where(inherit, p_delta, own)
        inherited[idx] = inherit
    if delta.any():
        tree.start_ns, tree.end_ns = start + delta, end + delta
    return (delta != 0) & (pi >= 0) & ~inherited


def _hosts(codes: SpanCodes) -> np.ndarray:
    """Host code of each span: its instance without a port (Zipkin's ip:port), else its service."""
    stripped = pc.replace_substring_regex(codes.instances, r":[0-9]+$", "")
    host_of_instance, hosts = dictionary_codes(pa.chunked_array([stripped], pa.string()))
    known = codes.instance >= 0
    host = len(hosts) + codes.service.astype(np.int64)
    host[known] = host_of_instance[codes.instance[known]]
    return host


#: Attributes naming the machine (and so the clock) of a span, in order of preference.
MACHINE_ATTRIBUTES = (S.ATTR_HOST_NAME, "host.ip", S.ATTR_NET_HOST_IP, "ip", "hostname")


class _MachineLookup:
    """The machine of spans found outside their parent, read from their attributes on demand
    (only those few spans are looked at)."""

    def __init__(self, attributes: pa.ChunkedArray | None, source_row: np.ndarray):
        self.attributes, self.source_row = attributes, source_row
        self.checked = False

    def _machine(self, rows: np.ndarray) -> list:
        out = []
        for attrs in take_rows(self.attributes, self.source_row[rows]).to_pylist():
            found = {a["key"]: a["str"] for a in attrs or () if a["key"] in MACHINE_ATTRIBUTES and a["str"]}
            out.append(next((found[k] for k in MACHINE_ATTRIBUTES if k in found), None))
        return out

    def clear_same_machine(self, own: np.ndarray, child: np.ndarray, parent: np.ndarray,
                           inherit: np.ndarray) -> None:
        """Zero ``own`` (in place) where a child outside its parent runs on the parent's machine."""
        if self.attributes is None:
            return
        cand = np.flatnonzero((own != 0) & ~inherit)
        if len(cand) == 0:
            return
        if not self.checked:  # once, at the first span outside its parent
            self.checked = True
            keys = pc.struct_field(pc.list_flatten(self.attributes), "key")
            if not pc.any(pc.is_in(keys, pa.array(MACHINE_ATTRIBUTES))).as_py():
                self.attributes = None  # no span names its machine
                return
        same = [a is not None and a == b
                for a, b in zip(self._machine(child[cand]), self._machine(parent[cand]))]
        own[cand[np.array(same, dtype=bool)]] = 0
