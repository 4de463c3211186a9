"""Causal paths from black-box message logs (Aguilera et al., SOSP 2003): the estimator and result.

:class:`CausalPaths` runs the nesting algorithm (:mod:`.nesting`) over a message log
(:mod:`.messages`) and aggregates the recovered paths into *path patterns*: requests with the
same tree of calls, most frequent first, with per-node latency and per-edge call-delay summaries.
:func:`recovery_rate` scores recovered patterns against the true ones when the log was made from
traces (:func:`.messages.messages_from_tables`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from ...errors import EmptyDataError, ParameterError
from ...units import format_duration_ns
from .._contract import Analysis, Interval, Options, Seed
from .._notes import Note, WithNotes
from .convolution import call_pair_scores, causal_graph
from .messages import MESSAGE_SCHEMA, messages_from_tables, path_key
from .nesting import find_call_pairs, find_call_paths, find_nested_pairs, score_nestings
from .notes import MessagesLeftOut, NoCausalEdge, NoCausalPath

__all__ = ["CausalPaths", "PathPattern", "PathsResult", "recovery_rate"]


@dataclass(frozen=True)
class PathPattern:
    """Requests with one causal path.

    Attributes
    ----------
    key : str
        :func:`~.messages.path_key` of the tree, e.g. ``frontend(cart; catalog(db))``.
    tree : dict
        ``{"node": NAME, "calls": [TREE, ...]}``, calls in the order of their CALL messages, a
        repeated call once per call.
    count : int
        Requests (root pairs) with this path.
    nodes : tuple of dict
        In the tree's preorder: ``node``, ``latency_median_ns``, ``latency_p95_ns`` (return -
        call) and ``delay_median_ns`` (the time from the parent's call to this call).
    """

    key: str
    tree: dict
    count: int
    nodes: tuple

    def to_dict(self) -> dict:
        return {"key": self.key, "count": self.count, "tree": self.tree, "nodes": list(self.nodes)}


@dataclass(frozen=True)
class PathsResult(WithNotes):
    """What :class:`CausalPaths` found.

    Attributes
    ----------
    algorithm : str
    n_messages : int
    n_call_pairs : int
        Answered calls.
    patterns : tuple of PathPattern
        Every pattern, most frequent first (ties by key).
    top_n : int
        How many :meth:`describe` and the report show.
    counts : dict
        Messages and pairs left out, by reason (the numbers of :class:`~.notes.MessagesLeftOut`).
    recovery : float or None
        When fitted on traces: the share of their requests whose true path was recovered
        (:func:`recovery_rate`), in [0, 1].
    n_true_paths : int or None
        When fitted on traces: their requests.
    graph : tuple of CausalEdge
        The convolution algorithm's causal graph (:mod:`.convolution`), exploration order;
        empty for nesting.
    graph_recall, graph_precision : float or None
        Convolution on traces: the share of the true (incoming call, outgoing call) pairs found
        in ``graph``, and of the graph's pairs between call edges that are true; in [0, 1].
    notes : tuple of Note
        What was left out, and why nothing was found when so (records, :mod:`.notes`).
    """

    algorithm: str
    n_messages: int
    n_call_pairs: int
    patterns: tuple[PathPattern, ...]
    top_n: int
    counts: dict
    recovery: float | None = None
    n_true_paths: int | None = None
    graph: tuple = ()
    graph_recall: float | None = None
    graph_precision: float | None = None
    notes: tuple[Note, ...] = ()

    @property
    def n_paths(self) -> int:
        """Causal paths (requests) recovered."""
        return sum(p.count for p in self.patterns)

    def pattern_counts(self) -> Counter:
        """``{key: count}`` of every pattern (for :func:`recovery_rate`)."""
        return Counter({p.key: p.count for p in self.patterns})

    def to_frame(self) -> pl.DataFrame:
        """One row per pattern: rank, key, count, share of the paths, root latency median (nesting);
        one row per causal edge: cause, effect, delay, height, path delay (convolution)."""
        if self.algorithm == "convolution":
            return pl.DataFrame([{"cause": " -> ".join(e.cause), "effect": " -> ".join(e.effect),
                                  "delay_ns": e.delay_ns, "height": e.height, "path_delay_ns": e.path_delay_ns}
                                 for e in self.graph],
                                schema={"cause": pl.String, "effect": pl.String, "delay_ns": pl.Int64,
                                        "height": pl.Float64, "path_delay_ns": pl.Int64})
        total = max(self.n_paths, 1)
        return pl.DataFrame([{"rank": i + 1, "key": p.key, "count": p.count, "share": p.count / total,
                              "latency_median_ns": p.nodes[0]["latency_median_ns"]}
                             for i, p in enumerate(self.patterns)],
                            schema={"rank": pl.Int64, "key": pl.String, "count": pl.Int64, "share": pl.Float64,
                                    "latency_median_ns": pl.Float64})

    def to_dict(self) -> dict:
        """JSON-safe: ``patterns`` most frequent first (``count``, ``tree``, ``nodes``), counts."""
        out = {"algorithm": self.algorithm, "n_messages": self.n_messages, "n_call_pairs": self.n_call_pairs,
               "n_paths": self.n_paths, "top_n": self.top_n, "counts": dict(self.counts),
               "recovery": self.recovery, "n_true_paths": self.n_true_paths,
               "patterns": [p.to_dict() for p in self.patterns], "graph": [e.to_dict() for e in self.graph],
               "graph_recall": self.graph_recall, "graph_precision": self.graph_precision,
               "notes": [n.to_dict() for n in self.notes]}
        json.dumps(out)
        return out

    def describe(self) -> str:
        """The top patterns (or causal edges) in words, and what was left out."""
        if self.algorithm == "convolution":
            return self._describe_graph()
        lines = [f"{self.n_messages:,} messages, {self.n_call_pairs:,} answered calls, {self.n_paths:,} causal "
                 f"paths in {len(self.patterns):,} patterns ({self.algorithm})."]
        for i, p in enumerate(self.patterns[: self.top_n]):
            lines.append(f"  {i + 1}. {p.key}: {p.count:,} requests, median "
                         f"{format_duration_ns(p.nodes[0]['latency_median_ns'])}")
        if self.recovery is not None:
            lines.append(f"Against the traces' true paths: {self.recovery:.1%} of {self.n_true_paths:,} requests "
                         "recovered.")
        lines += [str(n) for n in self.notes]
        return "\n".join(lines)


    def _describe_graph(self) -> str:
        lines = [f"{self.n_messages:,} messages: {len(self.graph):,} causal edges (convolution)."]
        for e in sorted(self.graph, key=lambda e: -e.height)[: self.top_n]:
            lines.append(f"  {' -> '.join(e.cause)} => {' -> '.join(e.effect)} after "
                         f"{format_duration_ns(e.delay_ns)} ({e.height:.1f} sd)")
        if self.graph_recall is not None:
            lines.append(f"Against the traces' true calls: {self.graph_recall:.1%} of the caller/callee call pairs "
                         f"found, {self.graph_precision:.1%} of those found true.")
        lines += [str(n) for n in self.notes]
        return "\n".join(lines)


def recovery_rate(truth: Counter, found: Counter) -> float:
    """The share of the true paths, weighted by requests, whose pattern was recovered as often.

    ``sum over true patterns of min(true count, recovered count) / sum of true counts``, in [0, 1]
    (1: every request's path recovered; a pattern recovered more often than it occurred does not
    make up for another).

    Raises
    ------
    ParameterError
        ``truth`` is empty.
    """
    total = sum(truth.values())
    if total == 0:
        raise ParameterError("recovery_rate needs at least one true path")
    return sum(min(n, found.get(k, 0)) for k, n in truth.items()) / total


def _is_table(x: Any) -> bool:
    return hasattr(x, "frame") and hasattr(x, "endpoint")


def _messages(x: Any) -> tuple[pl.DataFrame, Counter | None]:
    """The message log to analyse, and the true paths when it was made from trace tables."""
    if _is_table(x) or (isinstance(x, (list, tuple)) and x and all(_is_table(t) for t in x)):
        frame, truth = messages_from_tables([x] if _is_table(x) else list(x))
        if frame.height == 0:
            raise EmptyDataError("No message to analyse: the trace tables have no calls.")
        return frame, truth
    frame = pl.from_arrow(x) if isinstance(x, (pa.Table, pa.RecordBatch)) else x
    if not isinstance(frame, pl.DataFrame):
        raise ParameterError(f"CausalPaths.fit takes a message log (polars DataFrame or Arrow table) or trace "
                             f"tables; got {type(x).__name__}.")
    missing = [c for c in MESSAGE_SCHEMA.names if c not in frame.columns]
    if missing:
        raise ParameterError(f"The message log lacks the column(s) {', '.join(missing)}; columns are "
                             f"{', '.join(MESSAGE_SCHEMA.names)}.")
    if frame.height == 0:
        raise EmptyDataError("No message to analyse: the log is empty.")
    return frame, None


class CausalPaths(Analysis):
    """Causal paths and where their time goes, from messages without request ids (Aguilera et al. 2003).

    Parameters
    ----------
    algorithm : {"nesting", "convolution"}, default="nesting"
        The nesting algorithm for RPC-style call/return logs (:mod:`.nesting`: path patterns),
        or the convolution algorithm for any messages (:mod:`.convolution`: a causal graph).
    buckets_per_octave : int, default=4
        Delay buckets per doubling on the scoreboard (:mod:`.nesting`).
    density : bool, default=True
        Nesting: a candidate parent's score is its credit over its delay bucket's width (the
        slides' undefined penalty, :mod:`.nesting`); False: the credit alone.
    top_n : int, default=10
        Patterns :meth:`PathsResult.describe` and the report show.
    quantum_ns : int, default=1_000_000
        Convolution: the time step of the edge signals, ns (shorter than the delays of interest).
    max_delay_ns : int, default=1_000_000_000
        Convolution: the longest delay looked for, ns.
    n_sigma, s_sigma : float, default=4.0, 3.0
        Convolution: a spike reaches ``n_sigma`` standard deviations above the mean; spikes are
        separated by a point below ``s_sigma`` (``s_sigma < n_sigma``).
    min_messages : int, default=10
        Convolution: the message pairs a spike must stand for (:func:`.convolution.spikes`).
    random_state : int, numpy Generator or None, default=None
        Taken as every analysis takes it; the nesting algorithm draws nothing (the same input
        gives the same result whatever the seed).

    Attributes
    ----------
    result_ : PathsResult

    Raises
    ------
    ParameterError
        From ``fit``: a setting is not allowed, or the input is not a message log.
    EmptyDataError
        From ``fit``: no message.
    """

    _constraints = {
        "algorithm": [Options(("nesting", "convolution"))],
        "quantum_ns": [Interval(int, 1, None)],
        "max_delay_ns": [Interval(int, 1, None)],
        "n_sigma": [Interval(float, 0, None, closed="neither")],
        "s_sigma": [Interval(float, 0, None, closed="neither")],
        "min_messages": [Interval(int, 1, None)],
        "buckets_per_octave": [Interval(int, 1, None)],
        "density": [Options((True, False))],
        "top_n": [Interval(int, 1, None)],
        "random_state": [Seed()],
    }

    def __init__(self, *, algorithm: str = "nesting", buckets_per_octave: int = 4, density: bool = True,
                 top_n: int = 10,
                 quantum_ns: int = 1_000_000, max_delay_ns: int = 1_000_000_000, n_sigma: float = 4.0,
                 s_sigma: float = 3.0, min_messages: int = 10, random_state=None):
        self.algorithm = algorithm
        self.density = density
        self.quantum_ns = quantum_ns
        self.max_delay_ns = max_delay_ns
        self.n_sigma = n_sigma
        self.s_sigma = s_sigma
        self.min_messages = min_messages
        self.buckets_per_octave = buckets_per_octave
        self.top_n = top_n
        self.random_state = random_state

    def fit(self, messages) -> "CausalPaths":
        """Recover the causal paths of a message log.

        Parameters
        ----------
        messages : polars.DataFrame, pyarrow.Table, TraceTable or sequence of TraceTable
            A message log, columns of :data:`~.messages.MESSAGE_SCHEMA`, shape (n_messages, 5);
            or trace tables, whose trace ids are dropped
            (:func:`~.messages.messages_from_tables`): the result then also has the recovery
            rate of their true paths.

        Returns
        -------
        self
        """
        return super().fit(messages)

    def _fit(self, messages) -> dict[str, Any]:
        if self.s_sigma >= self.n_sigma:
            raise ParameterError(f"s_sigma ({self.s_sigma}) must be below n_sigma ({self.n_sigma}).")
        frame, truth = _messages(messages)
        if self.algorithm == "convolution":
            return {"result_": self._convolution(frame, truth)}
        pairs = find_call_pairs(frame)
        board = score_nestings(pairs, self.buckets_per_octave)
        find_nested_pairs(pairs, board, self.buckets_per_octave, density=self.density)
        groups: dict[str, list] = {}
        for tree, latencies, delays in find_call_paths(pairs):
            groups.setdefault(path_key(tree), []).append((tree, latencies, delays))
        patterns = []
        for key, members in groups.items():
            lat = np.asarray([m[1] for m in members], dtype=np.float64)
            dly = np.asarray([m[2] for m in members], dtype=np.float64)
            names = _preorder(members[0][0])
            nodes = tuple({"node": names[j], "latency_median_ns": float(np.median(lat[:, j])),
                           "latency_p95_ns": float(np.quantile(lat[:, j], 0.95)),
                           "delay_median_ns": float(np.median(dly[:, j]))} for j in range(len(names)))
            patterns.append(PathPattern(key=key, tree=members[0][0], count=len(members), nodes=nodes))
        patterns.sort(key=lambda p: (-p.count, p.key))
        n_pairs = sum(1 for t in pairs.t_return if t is not None)
        left = MessagesLeftOut(**pairs.counts)
        counts = left.numbers()
        notes = ([left] if any(counts.values()) else []) + \
            ([] if patterns else [NoCausalPath(n_pairs)])
        result = PathsResult(algorithm=self.algorithm, n_messages=frame.height, n_call_pairs=n_pairs,
                             patterns=tuple(patterns), top_n=self.top_n, counts=counts, notes=tuple(notes),
                             recovery=None if truth is None else recovery_rate(truth, Counter(
                                 {p.key: p.count for p in patterns})),
                             n_true_paths=None if truth is None else sum(truth.values()))
        return {"result_": result}


    def _convolution(self, frame: pl.DataFrame, truth: Counter | None) -> PathsResult:
        graph = causal_graph(frame, quantum_ns=self.quantum_ns, max_delay_ns=self.max_delay_ns,
                             n_sigma=self.n_sigma, s_sigma=self.s_sigma, min_messages=self.min_messages)
        recall, precision = call_pair_scores(graph, truth) if truth else (None, None)
        kinds = frame["kind"]
        return PathsResult(algorithm=self.algorithm, n_messages=frame.height,
                           n_call_pairs=int((kinds == "return").sum()), patterns=(), top_n=self.top_n, counts={},
                           n_true_paths=None if truth is None else sum(truth.values()), graph=tuple(graph),
                           graph_recall=recall, graph_precision=precision,
                           notes=() if graph else (NoCausalEdge(frame.height, self.quantum_ns, self.max_delay_ns),))


def _preorder(tree: dict) -> list[str]:
    out = [tree["node"]]
    for c in tree["calls"]:
        out += _preorder(c)
    return out
