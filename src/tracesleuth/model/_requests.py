"""Requests and exclusive times on integer-coded spans: the kernels the trace table and the call
view (:mod:`.flows`) share.

* :func:`trace_partitions` - rows in partitions of whole traces, for partition-wise work;
* :func:`requests_of` - the requests of an endpoint and the request of each span;
* :func:`exclusive_times` - each span's exclusive (self) time inside its request, from the union
  of its synchronous children's intervals (:func:`covered_by_children`).

Both :mod:`.table` and :mod:`.flows` import them from here, so that neither imports the other
for them.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from .. import schema as S
from ._calls import synchronous_children
from ._codes import SpanCodes, argsort, dictionary_codes
from .assembly import Tree

__all__ = ["covered_by_children", "exclusive_times", "requests_of", "trace_partitions"]


def trace_partitions(spans: pa.Table, max_spans: int) -> list[np.ndarray]:
    """Rows of ``spans`` in partitions of whole traces of about ``max_spans`` spans each.

    Traces are laid end to end in order of first appearance; partition ``k`` holds those that
    start within spans ``[k * max_spans, (k + 1) * max_spans)`` of that sequence, so at most
    ``max_spans`` spans plus the rest of its last trace.

    Returns
    -------
    list of ndarray of int64
        The rows of each partition, ascending (the input order of its spans is kept).
    """
    trace, _ = dictionary_codes(spans.column(S.TRACE_ID))
    if len(trace) == 0:
        return []
    sizes = np.bincount(trace)
    part = ((np.cumsum(sizes) - sizes) // max_spans)[trace]  # by the offset of the trace's first span
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(part[order[-1]] + 2))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def requests_of(codes: SpanCodes, tree: Tree, endpoint: int) -> tuple[np.ndarray, np.ndarray]:
    """The requests of an endpoint and the request each span belongs to.

    A request is an outermost span of the endpoint's operation with its subtree: the request of
    a span is its outermost ancestor-or-self of that operation, found top-down by depth (a call
    of the endpoint's operation inside a request stays part of that request).

    Returns
    -------
    entry : ndarray of int64, shape (n_requests,)
        Row of each request's entry span.
    request : ndarray of int64, shape (n_spans,)
        Index into ``entry`` of each span's request; -1 for spans outside every request.
    """
    n = codes.n_spans
    is_entry = codes.operation == endpoint
    req = np.where(is_entry, np.arange(n), -1)
    order, levels = tree.by_depth
    for d in range(1, len(levels) - 1):
        idx = order[levels[d]:levels[d + 1]]
        inherited = req[tree.parent[idx]]
        req[idx] = np.where(inherited >= 0, inherited, np.where(is_entry[idx], idx, -1))
    entry = np.flatnonzero(req == np.arange(n))
    position = np.full(n, -1, dtype=np.int64)
    position[entry] = np.arange(len(entry))
    inside = req >= 0
    req[inside] = position[req[inside]]
    return entry, req


def exclusive_times(codes: SpanCodes, tree: Tree, request: np.ndarray) -> np.ndarray:
    """Exclusive time of each span inside a request, ndarray of int64 ns, shape (n_spans,).

    Duration minus the union of the synchronous children's intervals, clipped to the span
    (Cortellessa & Traini 2020, Sec. 4.2). Synchronous: :func:`~._calls.synchronous_children`
    with the parents' kinds (not producer/consumer, not ``FOLLOWS_FROM``, not ending after its
    parent unless it is the server span of a client span, which closes after sending the
    response; times after clock-skew correction). Such a late server span covers its client
    span up to the client's end: the client waited for it, so the client's exclusive time is
    its gap, not its whole duration.
    """
    n = codes.n_spans
    pi, start, end = tree.parent, tree.start_ns, tree.end_ns
    pp = np.where(pi >= 0, pi, 0)
    sync = (pi >= 0) & (request >= 0) & synchronous_children(codes.kind, codes.follows_from, end_ns=end,
                                                             parent_end_ns=end[pp], parent_kind=codes.kind[pp])
    child_start = np.maximum(start[sync], start[pp[sync]])
    child_end = np.maximum(np.minimum(end[sync], end[pp[sync]]), child_start)
    parents, covered = covered_by_children(pi[sync], child_start, child_end, start[pp[sync]])
    cover = np.zeros(n, dtype=np.int64)
    cover[parents] = covered
    return np.maximum(end - start - cover, 0)


def covered_by_children(parent: np.ndarray, s: np.ndarray, e: np.ndarray, parent_start: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Length of the union of child intervals ``[s, e)`` per parent, in one vectorized pass.

    Children are sorted by (parent, start); a child adds what it reaches beyond the running
    maximum end of its earlier siblings. The running maximum restarts at each parent by offsetting
    each parent's times (relative to the parent's start) by ``group * width``.

    Returns ``(parents, covered_ns)``, both ndarrays of shape (n_parents_with_children,).
    """
    if len(parent) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rel = s - parent_start  # >= 0: children start within their parent
    span = int(rel.max()) + 1
    if span * (int(parent.max()) + 1) < 2**62:  # one int64 key sorts faster than two columns
        rel += parent * span
        order = argsort(rel)
    else:
        order = pl.DataFrame({"p": parent, "s": s}).select(pl.arg_sort_by("p", "s")).to_series().to_numpy()
    del rel
    p = parent[order]
    rs = s[order]
    rs -= parent_start[order]
    re_ = e[order]
    re_ -= parent_start[order]
    del order
    first = np.empty(len(p), dtype=bool)
    first[0] = True
    np.not_equal(p[1:], p[:-1], out=first[1:])
    group = np.cumsum(first) - 1
    width = int(re_.max()) + 1
    if width * (int(group[-1]) + 1) < 2**62:
        group *= width
        run = np.maximum.accumulate(group + re_)
        prev = np.empty_like(run)
        prev[0] = -1
        prev[1:] = run[:-1]
        del run
        prev -= group
    else:  # pragma: no cover - spans of years; fall back to a per-parent loop over few large groups
        prev = np.empty_like(re_)
        bounds = np.flatnonzero(first).tolist() + [len(p)]
        for a, b in zip(bounds[:-1], bounds[1:]):
            prev[a:b] = np.concatenate(([-1], np.maximum.accumulate(re_[a:b])[:-1]))
    del group
    prev[first] = -1
    np.maximum(rs, prev, out=prev)  # where each child's new coverage starts
    re_ -= prev
    gain = np.maximum(re_, 0, out=re_)
    starts = np.flatnonzero(first)
    return p[starts], np.add.reduceat(gain, starts)
