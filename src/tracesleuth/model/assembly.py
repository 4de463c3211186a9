"""Trace assembly: spans -> parent/child trees, repaired and checked.

Every function here is a pure function of a frame that holds whole traces (it never looks
across trace ids), so the same code runs on one machine or partition-wise (partitioned by trace
id) on Dask. Nothing is dropped: duplicates are removed only when they are exact copies, and
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
3. **Clock skew.** A synchronous child (not producer/consumer, not ``FOLLOWS_FROM``) recorded on
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


SOURCE_ROW = "source_row"


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
        return df
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


def _derived_ids(trace_ids: list[str], span_ids: list[str], salts: list[int]) -> list[str]:
    """Stable new 16-hex-digit span ids derived from (trace id, span id, salt)."""
    import hashlib

    return [hashlib.blake2b(f"{t}/{s}/{k}".encode(), digest_size=8).hexdigest()
            for t, s, k in zip(trace_ids, span_ids, salts)]


def deduplicate(df: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
    """Step 1 of :func:`assemble`: remove exact copies and split shared or clashing span ids.

    Returns
    -------
    frame : polars.DataFrame
        Spans with unique ``(trace_id, span_id)``.
    counts : dict
        ``exact_duplicates``, ``shared_spans_split``, ``conflicting_ids_renamed``.
    """
    key = [S.TRACE_ID, S.SPAN_ID, S.SERVICE, S.OPERATION, S.KIND, S.START_NS, S.END_NS, S.PARENT_SPAN_ID]
    counts = {"exact_duplicates": 0, "shared_spans_split": 0, "conflicting_ids_renamed": 0}
    grp = [S.TRACE_ID, S.SPAN_ID]
    df = df.with_columns(_i=pl.int_range(pl.len()))
    # Candidates by a 64-bit hash of (trace id, span id), then the exact check on the few found.
    candidates = df.select((pl.col(S.TRACE_ID).hash(seed=1) * pl.lit(0x9E3779B97F4A7C15, pl.UInt64)
                            + pl.col(S.SPAN_ID).hash(seed=2)).is_duplicated()).to_series()
    if not candidates.any():
        return df.drop("_i"), counts
    clash = df.filter(candidates)
    clash = clash.filter(pl.struct(grp).is_duplicated())
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
    movers = movers.with_columns(_new_id=pl.Series(_derived_ids(
        movers[S.TRACE_ID].to_list(), movers[S.SPAN_ID].to_list(), movers["_i"].to_list()), dtype=pl.String))
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


def assemble(spans) -> tuple[pl.DataFrame, AssemblyReport]:
    """Assemble spans into repaired trees (steps 1-3 of the module docstring).

    Parameters
    ----------
    spans : pyarrow.Table, polars.DataFrame or SpanReadResult
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, whole traces only.

    Returns
    -------
    frame : polars.DataFrame
        The spans, shape (n_spans, 12 + 5), with ``start_ns``/``end_ns`` corrected for clock skew
        and the extra columns ``depth`` (int32, 0 for roots and orphans), ``root_span_id``
        (the root of the span's tree), ``orphan`` (bool), ``skew_ns`` (int64 shift applied:
        original start = ``start_ns - skew_ns``), ``parent_row`` (int64 row of the parent in
        this frame, null for roots and orphans) and ``source_row`` (int64 row of the span in the
        input). The attributes column is not carried (see :func:`attributes_of`).
    report : AssemblyReport
    """
    df = as_frame(spans, attributes=False)
    df = df.with_columns(pl.int_range(df.height, dtype=pl.Int64).alias(SOURCE_ROW))
    df, counts = deduplicate(df)
    n = df.height
    if n == 0:
        return _empty_assembled(df), AssemblyReport(**counts)
    # Parent links by joining on 64-bit hashes of the ids (two of them: a false link needs a
    # 128-bit collision), far less memory than joining on the id strings.
    th = pl.col(S.TRACE_ID).hash(seed=1)
    ids = df.select(th.alias("_t"), pl.col(S.SPAN_ID).hash(seed=2).alias("_s"),
                    pl.int_range(n, dtype=pl.Int64).alias("parent_row"))
    links = df.select(th.alias("_t"), pl.when(pl.col(S.PARENT_SPAN_ID).is_not_null())
                      .then(pl.col(S.PARENT_SPAN_ID).hash(seed=2)).alias("_s"))
    parent_row = links.join(ids, on=["_t", "_s"], how="left", maintain_order="left")["parent_row"]
    del ids, links
    df = df.with_columns(parent_row)
    pi = df["parent_row"].fill_null(-1).to_numpy().copy()
    orphan = (pi < 0) & df[S.PARENT_SPAN_ID].is_not_null().to_numpy()

    depth = np.full(n, -1, dtype=np.int32)
    depth[pi < 0] = 0
    has_parent = pi >= 0
    for d in range(MAX_DEPTH):
        m = has_parent & (depth < 0)
        m[m] = depth[pi[m]] == d
        if not m.any():
            break
        depth[m] = d + 1
    cycle = depth < 0
    if cycle.any():  # parent links that loop (and what hangs below them): cut, become subtree roots
        pi[cycle] = -1
        depth[cycle] = 0
    order = np.argsort(depth, kind="stable")
    levels = np.searchsorted(depth[order], np.arange(depth.max() + 2))

    root = np.arange(n)
    start = df[S.START_NS].to_numpy().copy()
    end = df[S.END_NS].to_numpy().copy()
    # Host of a span: its instance without a port (Zipkin's ip:port), else its service.
    host = df.select(pl.coalesce(pl.col(S.INSTANCE).str.replace(r":[0-9]+$", ""),
                                 pl.concat_str([pl.lit("service:"), pl.col(S.SERVICE)]))
                     .cast(pl.Categorical).to_physical()).to_series().to_numpy().astype(np.int64)
    machines = _MachineLookup(attributes_of(spans), df[SOURCE_ROW].to_numpy())
    flags = df.select(
        sync=~(pl.col(S.KIND).is_in(S.ASYNC_KINDS) | pl.col(S.FOLLOWS_FROM)),
        server=pl.col(S.KIND).is_in(["server", "unspecified"]),
        client=pl.col(S.KIND).is_in(["client", "unspecified"]),
    )
    sync_rpc = flags["sync"].to_numpy()
    is_server, is_client = flags["server"].to_numpy(), flags["client"].to_numpy()
    delta = np.zeros(n, dtype=np.int64)
    inherited = np.zeros(n, dtype=bool)
    skew_host = host.copy()
    for d in range(1, len(levels) - 1):
        idx = order[levels[d]:levels[d + 1]]
        if len(idx) == 0:
            continue
        p = pi[idx]
        root[idx] = root[p]
        inherit = host[idx] == skew_host[p]
        p_start = start[p] + delta[p]
        p_end = end[p] + delta[p]
        c_start, c_end = start[idx], end[idx]
        p_dur, c_dur = p_end - p_start, c_end - c_start
        early = c_start < p_start
        # Ending late is skew only for the server half of an RPC; otherwise the child is async.
        late = (c_end > p_end) & is_server[idx] & is_client[p]
        own = np.where(c_dur > p_dur, np.where(early, p_start - c_start, 0),
                       np.where(early | late, p_start + (p_dur - c_dur) // 2 - c_start, 0))
        own = np.where(sync_rpc[idx], own, 0)
        machines.clear_same_machine(own, idx, p, inherit)
        delta[idx] = np.where(inherit, delta[p], own)
        inherited[idx] = inherit
        skew_host[idx] = np.where(inherit, skew_host[p], host[idx])

    adjusted = delta != 0
    corrected = adjusted & (pi >= 0) & ~inherited
    pairs = {}
    if corrected.any():
        idx = np.flatnonzero(corrected)
        svc = df[S.SERVICE]
        pairs = dict(pl.DataFrame({"a": svc.gather(pi[idx]), "b": svc.gather(idx)})
                     .group_by(pl.concat_str(["a", pl.lit(" -> "), "b"]).alias("k")).len().sort("k").iter_rows())
    out = df.drop("parent_row").with_columns(
        pl.Series(S.START_NS, start + delta, dtype=pl.Int64),
        pl.Series(S.END_NS, end + delta, dtype=pl.Int64),
        pl.Series(DEPTH, depth, dtype=pl.Int32),
        pl.Series("_root", root),
        pl.Series(ORPHAN, orphan | cycle),
        pl.Series(SKEW_NS, delta, dtype=pl.Int64),
        pl.Series("parent_row", np.where(pi >= 0, pi, -1), dtype=pl.Int64),
    ).with_columns(
        pl.col(S.SPAN_ID).gather(pl.col("_root")).alias(ROOT_SPAN_ID),
        pl.when(pl.col("parent_row") >= 0).then(pl.col("parent_row")).otherwise(None).alias("parent_row"),
    ).drop("_root")
    per_trace = out.group_by(S.TRACE_ID).agg(
        roots=(pl.col(DEPTH) == 0).sum(), true_roots=pl.col(S.PARENT_SPAN_ID).is_null().sum())
    report = AssemblyReport(
        traces=per_trace.height, spans=out.height, **counts,
        orphan_spans=int(orphan.sum()), cycle_spans=int(cycle.sum()),
        traces_without_root=int((per_trace["true_roots"] == 0).sum()),
        traces_with_several_roots=int((per_trace["roots"] > 1).sum()),
        skew_corrected_spans=int(corrected.sum()), skew_shifted_spans=int(adjusted.sum()),
        max_abs_skew_ns=int(np.abs(delta).max(initial=0)),
        skew_by_service=pairs,
    )
    return out, report


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
        for attrs in self.attributes.take(pa.array(self.source_row[rows])).to_pylist():
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


def _empty_assembled(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        pl.lit(None, pl.Int32).alias(DEPTH), pl.lit(None, pl.String).alias(ROOT_SPAN_ID),
        pl.lit(None, pl.Boolean).alias(ORPHAN), pl.lit(None, pl.Int64).alias(SKEW_NS),
        pl.lit(None, pl.Int64).alias("parent_row"))
