"""Branch and bound over conjunctions of binary attributes (Krushevskaja & Sandler, WWW 2013).

The baseline of Cortellessa & Traini (2020, Section 4.5): continuous attributes are binarised
into their mean-shift intervals (one binary attribute per bin ``[t_b, t_{b+1})``, the same
thresholds as the GA) and every categorical value is a binary attribute; an explanation is a
conjunction of binary attributes, at most one per original attribute. Unlike the GA, a
condition therefore covers exactly one dense region, never a range of them.

Search: best-first over the set-enumeration tree (a node's children add one binary attribute
that comes later in a fixed order, so every conjunction is reached once), ordered by an
admissible upper bound on the F-score of the node's descendants. Adding a conjunct can only
shrink ``tp``; with ``fp -> 0`` the best a descendant can reach is
``F <= 2 tp / (tp + |R_pos|)`` (the recall bound ``recall >= F*/(2 - F*)`` of the original).
A subtree whose bound does not exceed the best F-score found is pruned; a child that does not
shrink its parent's satisfied set is not expanded (its descendants repeat the parent's). The
non-admissible "decreasing support" heuristic of the original is not used, so with an unlimited
budget the result is optimal; with ``max_nodes``/``time_budget_s`` reached the best pattern so far
is returned and flagged ``exhaustive=False``.

References
----------
D. Krushevskaja and M. Sandler. "Understanding latency variations of black box services".
WWW 2013, 703-714. https://doi.org/10.1145/2488388.2488450
"""

from __future__ import annotations

import heapq
import time
from typing import Sequence

import numpy as np

from ._bitsets import admissible_f_score, PatternEvaluator, SearchResult

__all__ = ["branch_and_bound"]


#: Children class counts kept for reuse at most (int64 entries, 32 MiB); past it the cache restarts.
_CACHE_ENTRIES = 1 << 22


def branch_and_bound(
    evaluator: PatternEvaluator,
    sub_intervals: Sequence[tuple[int, int]],
    *,
    max_nodes: int | None = 2000,
    time_budget_s: float | None = None,
    least_precision: Sequence[float] | None = None,
) -> list[SearchResult]:
    """Best pattern of single-bin conditions for each sub-interval, by branch and bound.

    The searches of the sub-intervals run in lockstep: each step every unfinished search expands
    its own next node, and the children of all those nodes are counted in one evaluator call,
    once per distinct node (the class counts of a pattern serve every sub-interval; the searches
    of neighbouring sub-intervals expand many of the same nodes). Each search visits exactly the
    nodes it would visit alone.

    Parameters
    ----------
    evaluator : PatternEvaluator
    sub_intervals : sequence of (first, last)
        Split point index pairs; positives are the latency classes ``first+1 .. last``.
    max_nodes : int or None, default=2000
        Nodes expanded per sub-interval at most (``None``: no limit).
    time_budget_s : float or None, default=None
        Wall-clock seconds per sub-interval at most (``None``: no limit): the searches, run
        together, stop when ``time_budget_s`` times the number of sub-intervals has passed.
    least_precision : sequence of float, optional
        Per sub-interval, patterns below this precision score 0
        (:func:`~._bitsets.min_precision`; beyond the paper). Default: 0 (the paper).

    Returns
    -------
    list of SearchResult
        ``exhaustive`` tells whether the search finished (the pattern is then optimal among
        conjunctions of binary attributes).
    """
    pairs = [(int(first), int(last)) for first, last in sub_intervals]
    least = [0.0] * len(pairs) if least_precision is None else [float(lp) for lp in least_precision]
    m = evaluator.n_attributes
    n_bins = evaluator.n_bins
    feat_attr = np.repeat(np.arange(m), n_bins)
    feat_bin = np.concatenate([np.arange(b) for b in n_bins]) if m else np.empty(0, np.int64)
    searches = [_Search(evaluator, first, last, lp, feat_attr.size) for (first, last), lp in zip(pairs, least)]
    deadline = None if time_budget_s is None else time.perf_counter() + time_budget_s * max(1, len(pairs))
    cache: dict[bytes, tuple] = {}
    n_cached = 0
    while True:
        if deadline is not None and time.perf_counter() > deadline:
            break
        nodes = [(search, search.next_node(max_nodes)) for search in searches]
        nodes = [(search, node) for search, node in nodes if node is not None]
        if not nodes:
            break
        todo: dict[bytes, tuple] = {}
        keys = [lo.tobytes() + hi.tobytes() for _, (lo, hi, _, _) in nodes]
        for key, (_, (lo, hi, nxt, _support)) in zip(keys, nodes):
            if key not in cache and key not in todo:
                todo[key] = _children(lo, hi, nxt, feat_attr, feat_bin)
        if todo:
            counts = evaluator.class_counts(np.concatenate([c[1] for c in todo.values()]),
                                            np.concatenate([c[2] for c in todo.values()]))
            if n_cached + counts.size > _CACHE_ENTRIES:
                cache, n_cached = {}, 0
            start = 0
            for key, (cand, c_lo, c_hi) in todo.items():
                cache[key] = (cand, c_lo, c_hi, counts[start : start + cand.size])
                start += cand.size
            n_cached += counts.size
        _expand_all(nodes, [cache[key] for key in keys])
    return [search.result() for search in searches]


def _expand_all(nodes: list, children: list) -> None:
    """Score the children of every node of a step at once (each for its own search's sub-interval),
    then let each search keep its best and queue its promising children."""
    sizes = [c[0].size for c in children]
    if sum(sizes) == 0:
        return
    counts = np.concatenate([c[3] for c in children])
    searches = [search for search, _ in nodes]
    which = np.repeat(np.arange(len(searches)), sizes)
    first, last, n_pos = np.array([(s.first, s.last, s.n_pos) for s in searches], dtype=np.int64)[which].T
    least = np.array([s.least_precision for s in searches])[which]
    cum = np.zeros((counts.shape[0], counts.shape[1] + 1), dtype=np.int64)
    np.cumsum(counts, axis=1, out=cum[:, 1:])
    rows = np.arange(counts.shape[0])
    tp = cum[rows, last + 1] - cum[rows, first + 1]
    sup = cum[:, -1]
    f = admissible_f_score(tp, sup, n_pos, least)
    # no false positive: the best a sub-pattern can do, f_score_from_counts(tp, 0, n_pos) written out (0 where
    # tp == 0, and tp + n_pos >= 1 elsewhere)
    bound = 2.0 * tp / np.maximum(tp + n_pos, 1).astype(np.float64)
    start = 0
    for (search, (_, _, _, support)), (cand, c_lo, c_hi, c_counts), size in zip(nodes, children, sizes):
        stop = start + size
        search.expand(support, cand, c_lo, c_hi, c_counts, tp[start:stop], sup[start:stop], f[start:stop],
                      bound[start:stop])
        start = stop


def _children(lo: np.ndarray, hi: np.ndarray, nxt: int, feat_attr: np.ndarray, feat_bin: np.ndarray):
    """The node's children: features ``nxt ..`` on attributes it has no condition on, as patterns."""
    cand = np.arange(nxt, feat_attr.size)
    cand = cand[lo[feat_attr[cand]] < 0]
    c_lo = np.repeat(lo[None], cand.size, axis=0)
    c_hi = np.repeat(hi[None], cand.size, axis=0)
    rows = np.arange(cand.size)
    c_lo[rows, feat_attr[cand]] = feat_bin[cand]
    c_hi[rows, feat_attr[cand]] = feat_bin[cand] + 1
    return cand, c_lo, c_hi


class _Search:
    """The best-first search of one sub-interval ``[s_first, s_last)``."""

    def __init__(self, evaluator: PatternEvaluator, first: int, last: int, least_precision: float,
                 n_features: int):
        m = evaluator.n_attributes
        self.first, self.last = first, last
        self.least_precision = least_precision
        self.n_features = n_features
        self.n_classes = evaluator.n_classes
        self.n_pos = int(evaluator.class_sizes[first + 1 : last + 1].sum())
        self.best_f, self.best_ncond = 0.0, 0
        self.best_lo = np.full(m, -1, dtype=np.int64)
        self.best_hi = np.full(m, -1, dtype=np.int64)
        self.best_counts = np.zeros(evaluator.n_classes, dtype=np.int64)
        self.n_evaluated = 0
        self.expanded = 0
        self.stopped = False
        # heap entries: (-bound, tiebreak, lo, hi, next feature, support, every attribute conditioned)
        self.heap: list = []
        self.tiebreak = 0
        if self.n_pos > 0 and n_features > 0:
            self.heap.append((-1.0, 0, np.full(m, -1, np.int64), np.full(m, -1, np.int64), 0, evaluator.n_requests,
                              m == 0))

    def next_node(self, max_nodes: int | None):
        """The next node worth expanding ``(lo, hi, next feature, support)``, or None when done."""
        while self.heap:
            if max_nodes is not None and self.expanded >= max_nodes:
                return None
            neg_bound, _, lo, hi, nxt, support, full = heapq.heappop(self.heap)
            if -neg_bound <= self.best_f:
                continue  # cannot beat the best any more
            self.expanded += 1
            if nxt >= self.n_features or full:
                continue  # no child
            return lo, hi, nxt, support
        return None

    def expand(self, support: int, cand: np.ndarray, c_lo: np.ndarray, c_hi: np.ndarray, counts: np.ndarray,
               tp: np.ndarray, sup: np.ndarray, f: np.ndarray, bound: np.ndarray) -> None:
        """Keep the best of a node's children (their class counts, true positives, support, F-score
        and bound given) and queue the promising ones."""
        if cand.size == 0:
            return
        self.n_evaluated += cand.size
        ncond = int(np.count_nonzero(c_lo[0] >= 0))  # every child: its parent's conditions and one more
        i = int(np.argmax(f))
        if f[i] > self.best_f or (f[i] == self.best_f and f[i] > 0 and ncond < self.best_ncond):
            self.best_f, self.best_ncond = float(f[i]), ncond
            self.best_lo, self.best_hi, self.best_counts = c_lo[i].copy(), c_hi[i].copy(), counts[i].copy()
        push = np.flatnonzero((bound > self.best_f) & (sup < support) & (cand + 1 < self.n_features))
        full = ncond == c_lo.shape[1]
        for neg_bound, r, nxt, n_sat in zip((-bound[push]).tolist(), push.tolist(), (cand[push] + 1).tolist(),
                                            sup[push].tolist()):
            self.tiebreak += 1
            heapq.heappush(self.heap, (neg_bound, self.tiebreak, c_lo[r], c_hi[r], nxt, n_sat, full))

    def result(self) -> SearchResult:
        exhaustive = not self.heap or all(-entry[0] <= self.best_f for entry in self.heap)
        counts = self.best_counts
        tp = int(counts[self.first + 1 : self.last + 1].sum())
        return SearchResult(
            first=self.first, last=self.last, lo=self.best_lo, hi=self.best_hi, class_counts=counts, tp=tp,
            fp=int(counts.sum()) - tp, n_positives=self.n_pos, f_score=self.best_f if tp > 0 else 0.0,
            n_evaluated=self.n_evaluated, exhaustive=bool(exhaustive),
        )
