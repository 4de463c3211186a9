"""Categories of requests and their structures (Sambasivan et al., NSDI 2011, Sections 3.1 and 3.3).

Spectroscope groups the requests of both periods into *categories*: requests with an identical
call structure (the same request-flow graph, timing ignored). Here a category is a value of the
trace table's ``signature`` column (:mod:`tracesleuth.model.table`): an operation key
``service:operation`` followed, when the span has children, by its children's signatures sorted and
comma-separated in parentheses, e.g. ``a:x(b:y,b:y,c:z(d:w))``.

This module gives

* :func:`category_stats`: per category and period, request count, share of the period's requests,
  mean and variance of the response time (one vectorised polars group-by per period);
* :func:`parse_signature`: a signature as its nodes in preorder (the canonical order: children
  sorted by their own signatures), each with its depth, parent and subtree text;
* :func:`~tracesleuth.analyses._statistics.edit_distance` (re-exported): the string-edit
  (Levenshtein) distance between two structures' node sequences, the similarity of
  Spectroscope's third mapping heuristic (Section 3.3.2);
* :func:`divergence`: where a mutation's structure first differs from its precursor's.

References
----------
.. [1] R. R. Sambasivan, A. X. Zheng, M. De Rosa, E. Krevat, S. Whitman, M. Stroucken, W. Wang,
   L. Xu and G. R. Ganger, "Diagnosing performance changes by comparing request flows", NSDI 2011.
   https://www.usenix.org/conference/nsdi11/technical-sessions/presentation/sambasivan
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import polars as pl

from ... import schema as S
from .._statistics import edit_distance

__all__ = ["Node", "Structure", "category_stats", "divergence", "divergence_sides", "edit_distance", "parse_signature"]

#: Columns of :func:`category_stats`, in order.
CATEGORY_COLUMNS = ("signature", "root", "n_nodes", "baseline_count", "problem_count", "baseline_share",
                    "problem_share", "baseline_mean_ns", "baseline_var_ns2", "problem_mean_ns", "problem_var_ns2")


def category_stats(baseline: pl.DataFrame, problem: pl.DataFrame) -> pl.DataFrame:
    """Per category (signature) and period: count, share, mean and variance of the latency.

    Parameters
    ----------
    baseline, problem : polars.DataFrame
        Trace-table frames (``signature`` and ``latency_ns`` columns) of the two periods.

    Returns
    -------
    polars.DataFrame
        One row per signature seen in either period, sorted by signature: ``signature``,
        ``baseline_count``, ``problem_count`` (Int64, 0 when absent), ``baseline_share``,
        ``problem_share`` (count over the period's requests, Float64), ``baseline_mean_ns``,
        ``baseline_var_ns2``, ``problem_mean_ns``, ``problem_var_ns2`` (ns and ns², null when the
        category has no request (variance: fewer than 2) in the period). ``root`` and ``n_nodes``
        are filled in by the caller (null here).
    """
    def one(frame: pl.DataFrame, period: str) -> pl.DataFrame:
        lat = pl.col(S.LATENCY_NS).cast(pl.Float64)
        return frame.group_by(S.SIGNATURE).agg(
            pl.len().cast(pl.Int64).alias(f"{period}_count"),
            lat.mean().alias(f"{period}_mean_ns"),
            lat.var(ddof=1).alias(f"{period}_var_ns2"),
        ).with_columns((pl.col(f"{period}_count") / max(frame.height, 1)).alias(f"{period}_share"))

    out = one(baseline, "baseline").join(one(problem, "problem"), on=S.SIGNATURE, how="full", coalesce=True)
    return out.with_columns(
        pl.col("baseline_count", "problem_count").fill_null(0),
        pl.col("baseline_share", "problem_share").fill_null(0.0),
        pl.lit(None, pl.String).alias("root"),
        pl.lit(None, pl.Int64).alias("n_nodes"),
    ).select(CATEGORY_COLUMNS).sort(S.SIGNATURE)


# ============================================================================================
# Structures
# ============================================================================================


@dataclass(frozen=True)
class Node:
    """One node (span) of a category's structure.

    Attributes
    ----------
    key : str
        Operation key ``service:operation``.
    depth : int
        Depth below the entry span (0 for it).
    parent : int
        Index of the parent node in :attr:`Structure.nodes` (-1 for the entry span).
    start, end : int
        The node's subtree is ``signature[start:end]``.
    """

    key: str
    depth: int
    parent: int
    start: int
    end: int


@dataclass(frozen=True)
class Structure:
    """A category's structure: its nodes in preorder (children in signature order)."""

    signature: str
    nodes: tuple[Node, ...]

    @property
    def root(self) -> str:
        """Operation key of the entry span."""
        return self.nodes[0].key

    def subtree(self, i: int) -> str:
        """Signature of the subtree of node ``i``."""
        return self.signature[self.nodes[i].start:self.nodes[i].end]

    def subtree_nodes(self, i: int) -> range:
        """Indices of node ``i`` and its descendants (consecutive in preorder)."""
        n = self.nodes
        return range(i, i + sum(1 for j in range(i, len(n)) if n[j].start >= n[i].start and n[j].end <= n[i].end))

    def children(self, i: int) -> list[int]:
        """Indices of node ``i``'s children, in signature order."""
        return [j for j in range(i + 1, len(self.nodes)) if self.nodes[j].parent == i]

    def tokens(self) -> list[str]:
        """The nodes as ``"depth|key"`` strings, the sequence :func:`edit_distance` compares."""
        return [f"{n.depth}|{n.key}" for n in self.nodes]


def key_pattern(keys: Iterable[str]) -> re.Pattern | None:
    """A regular expression matching any of ``keys`` (longest first) where a node key may end.

    Operation names may hold ``(``, ``,`` or ``)`` (``HTTP GET /a(b)``), so a signature cannot be
    split on those characters alone; matching known operation keys first, longest first, and only
    where a delimiter or the end follows, parses such names as one key.
    """
    keys = sorted(set(keys), key=lambda k: (-len(k), k))
    if not keys:
        return None
    return re.compile("(?:" + "|".join(re.escape(k) for k in keys) + r")(?=[(),]|$)")


def parse_signature(signature: str, keys: re.Pattern | Iterable[str] | None = None) -> Structure:
    """Parse a trace-table signature into its nodes in preorder.

    Parameters
    ----------
    signature : str
        ``key`` or ``key(child,child,...)``, recursively (:mod:`tracesleuth.model.table`).
    keys : re.Pattern or iterable of str, optional
        The operation keys that may occur (the trace tables' operations), or
        :func:`key_pattern` of them. A key is matched against them first, so a key holding
        ``(``, ``,`` or ``)`` is read whole; without them (or when none matches) a key runs to
        the next delimiter.

    Returns
    -------
    Structure

    Examples
    --------
    >>> s = parse_signature("a:x(b:y,c:z(d:w))")
    >>> [(n.key, n.depth, n.parent) for n in s.nodes]
    [('a:x', 0, -1), ('b:y', 1, 0), ('c:z', 1, 0), ('d:w', 2, 2)]
    >>> s.subtree(2)
    'c:z(d:w)'
    """
    pattern = keys if isinstance(keys, re.Pattern) or keys is None else key_pattern(keys)
    nodes: list[list] = []  # [key, depth, parent, start, end]
    stack: list[int] = []  # open nodes (those whose "(" was read)
    i, n = 0, len(signature)
    last = -1
    while i < n:
        c = signature[i]
        if c == ",":
            i += 1
            continue
        if c == ")":
            closed = stack.pop() if stack else -1
            i += 1
            if closed >= 0:
                nodes[closed][4] = i
            continue
        if c == "(" and last >= 0 and nodes[last][4] == i:  # the children of the node just read
            stack.append(last)
            i += 1
            continue
        m = pattern.match(signature, i) if pattern is not None else None
        if m is not None:
            end = m.end()
        else:
            end = i + 1
            while end < n and signature[end] not in "(),":
                end += 1
        parent = stack[-1] if stack else -1
        nodes.append([signature[i:end], len(stack), parent, i, end])
        last = len(nodes) - 1
        i = end
    return Structure(signature, tuple(Node(*row) for row in nodes))


def divergence(mutation: Structure, precursor: Structure) -> tuple[int, tuple[str, ...]] | None:
    """Where ``mutation``'s structure first differs from ``precursor``'s.

    The two trees are aligned top-down from their entry spans: children with identical subtrees
    are paired off; when what remains differs in operation keys, the node is the divergence (its
    children changed: a call added, or missing because the node returned early or threw);
    otherwise the first remaining pair with the same key is followed down. So the divergence is
    the deepest node whose own calls differ, in structure (preorder) order.

    Parameters
    ----------
    mutation, precursor : Structure

    Returns
    -------
    (int, tuple of str) or None
        The divergence node's index in ``mutation.nodes`` and the operation keys of the children
        that differ (in either structure), sorted; None when the structures are identical. When
        the entry spans differ, the root (index 0) with both root keys.

    See Also
    --------
    divergence_sides : the same place, with the subtrees added and removed.
    """
    found = divergence_sides(mutation, precursor)
    if found is None:
        return None
    mi, added, removed = found
    if mi == 0 and not added and not removed:  # different roots
        return 0, tuple(sorted({mutation.root, precursor.root}))
    km = sorted(mutation.nodes[c].key for c in added)
    kp = sorted(precursor.nodes[c].key for c in removed)
    changed = sorted(set(km).symmetric_difference(kp)) or sorted(set(km) | set(kp))
    return mi, tuple(changed)


def divergence_sides(mutation: Structure, precursor: Structure) -> tuple[int, list[int], list[int]] | None:
    """Where ``mutation`` diverges from ``precursor`` (as :func:`divergence`), and how.

    Returns
    -------
    (int, list of int, list of int) or None
        The divergence node's index in ``mutation.nodes``; the indices in ``mutation.nodes`` of
        its children whose subtrees the precursor lacks (**added**, or the new side of a
        replaced subtree); the indices in ``precursor.nodes`` of the divergence node's children
        the mutation lacks (**removed**, or the old side). None when the structures are
        identical; ``(0, [], [])`` when the entry spans differ.

    Examples
    --------
    >>> m = parse_signature("a:x(b:y,c:z(e:v))")
    >>> p = parse_signature("a:x(b:y,c:z(d:w))")
    >>> i, added, removed = divergence_sides(m, p)
    >>> m.nodes[i].key, [m.nodes[j].key for j in added], [p.nodes[j].key for j in removed]
    ('c:z', ['e:v'], ['d:w'])
    """
    if not mutation.nodes or not precursor.nodes:
        return None
    if mutation.root != precursor.root:
        return 0, [], []
    mi, pi = 0, 0
    while True:
        if mutation.subtree(mi) == precursor.subtree(pi):
            return None
        mc = {c: mutation.subtree(c) for c in mutation.children(mi)}
        pc = {c: precursor.subtree(c) for c in precursor.children(pi)}
        left_p = list(pc.items())
        rest_m = []
        for c, text in mc.items():
            match = next((k for k, (_, t) in enumerate(left_p) if t == text), None)
            if match is None:
                rest_m.append(c)
            else:
                left_p.pop(match)
        rest_p = [c for c, _ in left_p]
        km = sorted(mutation.nodes[c].key for c in rest_m)
        kp = sorted(precursor.nodes[c].key for c in rest_p)
        if km != kp or not rest_m:
            return mi, rest_m, rest_p
        # Same keys, different subtrees: follow the first pair down.
        mi = rest_m[0]
        pi = next(c for c in rest_p if precursor.nodes[c].key == mutation.nodes[mi].key)
