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

from ...evaluation.metrics import f_score_from_counts
from ._bitsets import admissible_f_score, PatternEvaluator, SearchResult

__all__ = ["branch_and_bound"]


def branch_and_bound(
    evaluator: PatternEvaluator,
    sub_intervals: Sequence[tuple[int, int]],
    *,
    max_nodes: int | None = 2000,
    time_budget_s: float | None = None,
    least_precision: Sequence[float] | None = None,
) -> list[SearchResult]:
    """Best pattern of single-bin conditions for each sub-interval, by branch and bound.

    Parameters
    ----------
    evaluator : PatternEvaluator
    sub_intervals : sequence of (first, last)
        Split point index pairs; positives are the latency classes ``first+1 .. last``.
    max_nodes : int or None, default=2000
        Nodes expanded per sub-interval at most (``None``: no limit).
    time_budget_s : float or None, default=None
        Wall-clock seconds per sub-interval at most (``None``: no limit).
    least_precision : sequence of float, optional
        Per sub-interval, patterns below this precision score 0
        (:func:`~._bitsets.min_precision`; beyond the paper). Default: 0 (the paper).

    Returns
    -------
    list of SearchResult
        ``exhaustive`` tells whether the search finished (the pattern is then optimal among
        conjunctions of binary attributes).
    """
    pairs = list(sub_intervals)
    least = [0.0] * len(pairs) if least_precision is None else list(least_precision)
    return [
        _search(evaluator, int(first), int(last), max_nodes=max_nodes, time_budget_s=time_budget_s,
                least_precision=float(lp))
        for (first, last), lp in zip(pairs, least)
    ]


def _search(evaluator: PatternEvaluator, first: int, last: int, *, max_nodes, time_budget_s,
            least_precision: float = 0.0) -> SearchResult:
    m = evaluator.n_attributes
    n_bins = evaluator.n_bins
    feat_attr = np.repeat(np.arange(m), n_bins)
    feat_bin = np.concatenate([np.arange(b) for b in n_bins]) if m else np.empty(0, np.int64)
    n_features = feat_attr.size
    n_pos = int(evaluator.class_sizes[first + 1 : last + 1].sum())
    n_total = evaluator.n_requests

    best_f, best_ncond = 0.0, 0
    best_lo = np.full(m, -1, dtype=np.int64)
    best_hi = np.full(m, -1, dtype=np.int64)
    best_counts = np.zeros(evaluator.n_classes, dtype=np.int64)
    n_evaluated = 0
    expanded = 0
    deadline = None if time_budget_s is None else time.perf_counter() + time_budget_s

    # heap entries: (-bound, tiebreak, lo, hi, next feature, support)
    heap: list = []
    tiebreak = 0
    if n_pos > 0 and n_features > 0:
        root = (-1.0, tiebreak, np.full(m, -1, np.int64), np.full(m, -1, np.int64), 0, n_total)
        heap.append(root)
    while heap:
        if (max_nodes is not None and expanded >= max_nodes) or (deadline is not None and time.perf_counter() > deadline):
            break
        neg_bound, _, lo, hi, nxt, support = heapq.heappop(heap)
        if -neg_bound <= best_f:
            continue  # cannot beat the best any more
        expanded += 1
        cand = np.arange(nxt, n_features)
        cand = cand[lo[feat_attr[cand]] < 0]
        if cand.size == 0:
            continue
        c_lo = np.repeat(lo[None], cand.size, axis=0)
        c_hi = np.repeat(hi[None], cand.size, axis=0)
        rows = np.arange(cand.size)
        c_lo[rows, feat_attr[cand]] = feat_bin[cand]
        c_hi[rows, feat_attr[cand]] = feat_bin[cand] + 1
        counts = evaluator.class_counts(c_lo, c_hi)
        n_evaluated += cand.size
        tp = counts[:, first + 1 : last + 1].sum(axis=1)
        sup = counts.sum(axis=1)
        f = admissible_f_score(tp, sup, n_pos, least_precision)
        ncond = int(np.count_nonzero(lo >= 0)) + 1
        i = int(np.argmax(f))
        if f[i] > best_f or (f[i] == best_f and f[i] > 0 and ncond < best_ncond):
            best_f, best_ncond = float(f[i]), ncond
            best_lo, best_hi, best_counts = c_lo[i].copy(), c_hi[i].copy(), counts[i].copy()
        bound = f_score_from_counts(tp, 0, n_pos)  # no false positive: the best a sub-pattern can do
        push = (bound > best_f) & (sup < support) & (cand + 1 < n_features)
        for r in np.flatnonzero(push):
            tiebreak += 1
            heapq.heappush(heap, (-float(bound[r]), tiebreak, c_lo[r], c_hi[r], int(cand[r]) + 1, int(sup[r])))
    exhaustive = not heap or all(-entry[0] <= best_f for entry in heap)
    tp = int(best_counts[first + 1 : last + 1].sum())
    return SearchResult(
        first=first, last=last, lo=best_lo, hi=best_hi, class_counts=best_counts, tp=tp,
        fp=int(best_counts.sum()) - tp, n_positives=n_pos, f_score=best_f if tp > 0 else 0.0,
        n_evaluated=n_evaluated, exhaustive=bool(exhaustive),
    )
