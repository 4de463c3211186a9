"""The stages of :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns`, each a small
object the estimator builds from its settings (as scikit-learn's ``PCA._fit`` dispatches to
``_fit_full`` or ``_fit_truncated``):

1. an **interval rule** (:class:`GivenInterval`, :class:`PaperInterval`, :class:`RobustInterval`):
   the degraded latency interval ``I``, with the reference mode it was measured against (which
   the uncertain band of :mod:`.refinements` reads);
2. **split points** (:class:`DensitySplitPoints`, :class:`GivenSplitPoints`): candidate bounds of
   the sub-intervals, the least populated merged away;
3. a **search** (:class:`SearchProtocol`: :class:`GeneticSearch`, Section 3.1 of the paper, or
   :class:`BranchAndBoundSearch`, Krushevskaja & Sandler): the best pattern of every pair of
   split points, over the requests encoded once (:class:`Encoded`);
4. the **dynamic program** (:func:`partition_runs`, eq. 8): the partition of ``I`` of highest
   score, as :class:`Run` records (one sub-interval and its pruned pattern each);

then the refinements of :mod:`.refinements` (none with :data:`~.analysis.PAPER_SETTINGS`) and
:func:`describe_runs`, which turns the runs into :class:`~.results.SubIntervalPattern` results.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np

from ...errors import ParameterError
from ...units import format_duration_ns
from ._bitsets import AttributeEncoding, PatternEvaluator, SearchResult, admissible_f_score, min_precision, prune
from ._data import Inputs, context, effect, pattern_mask
from ._model import LatencyInterval, Pattern, pattern_quality
from .bnb import branch_and_bound
from .dp import Partition, optimal_partition
from .ga import GASettings, genetic_search
from .notes import (IntervalEmpty, IntervalHoldsEvery, NoDegradation, NoSlowerMode, Note, SameLatency, SingleRequest,
                    SplitPointsRemoved, TooFewInInterval)
from .results import SubIntervalPattern
from .split_points import (IntervalChoice, automatic_interval, degraded_interval, interval_split_points, merge_small,
                           parse_interval)

__all__ = ["BranchAndBoundSearch", "DensitySplitPoints", "Encoded", "GeneticSearch", "GivenInterval",
           "GivenSplitPoints", "PaperInterval", "RobustInterval", "Run", "SearchProtocol", "describe_runs",
           "partition_runs"]


# ============================================================================================
# 1. The interval rule
# ============================================================================================


def _degenerate(latency: np.ndarray) -> NoDegradation | None:
    """Why a latency distribution has no degradation to find in it, or None."""
    if latency.size < 2:
        return SingleRequest(int(latency.size))
    if latency.min() == latency.max():
        return SameLatency(int(latency.size), int(latency[0]))
    return None


def _unless_degenerate(choose):
    """A density rule's ``choose``, answering first why the latencies are degenerate when they are
    (:func:`_degenerate`): every rule that reads the latency density starts so."""
    @functools.wraps(choose)
    def checked(self, latency: np.ndarray) -> IntervalChoice | NoDegradation:
        why = _degenerate(latency)
        return why if why is not None else choose(self, latency)
    return checked


@dataclass(frozen=True)
class GivenInterval:
    """The interval the user gave (``"350ms:700ms"``, ``(low_ns, high_ns)``, a LatencyInterval)."""

    spec: Any

    def choose(self, latency: np.ndarray) -> IntervalChoice | NoDegradation:
        return IntervalChoice(parse_interval(self.spec, latency_ns=latency), "given", "given", 0)


@dataclass(frozen=True)
class PaperInterval:
    """The paper's rule: from the first density split point above the most populous latency mode
    (:func:`~.split_points.degraded_interval`)."""

    quantile: float = 0.3
    min_bin_fraction: float = 0.01

    @_unless_degenerate
    def choose(self, latency: np.ndarray) -> IntervalChoice | NoDegradation:
        interval, clusters = degraded_interval(latency, quantile=self.quantile, min_bin_fraction=self.min_bin_fraction)
        main = int(np.argmax(clusters.counts))
        if interval is None:
            return NoSlowerMode(int(clusters.centers[main]), int(clusters.n_clusters))
        return IntervalChoice(interval, "gap", (
            f"the first density split point above the most populous latency mode (around "
            f"{format_duration_ns(clusters.centers[main])}), the paper's rule"), int(clusters.centers[main]))


@dataclass(frozen=True)
class RobustInterval:
    """The robust rule beyond the paper (:func:`~.split_points.automatic_interval`): on a log scale,
    from the fastest large mode's tail cut or the density gap above it, whichever is lower.

    Parameters
    ----------
    tail_z : float, default=2.0
        The tail cut, in standard deviations of the reference mode above its centre: 2.3% of a
        normal mode lies beyond it.
    min_mode_share : float, default=0.5
        A latency mode is a candidate reference when it holds at least half the requests of the
        most populous mode: the fastest such mode is the normal behaviour (a fast mode of a few
        cached requests is not).
    min_excess : float, default=3.0
        A slow tail is a degradation only when the slow side of the reference mode holds at least
        this many times more requests, beyond what the mode's fitted (mirrored) distribution
        predicts, than the mode itself leaves beyond the tail cut by chance.
    """

    tail_z: float = 2.0
    min_mode_share: float = 0.5
    min_excess: float = 3.0
    quantile: float = 0.3
    min_bin_fraction: float = 0.01

    @_unless_degenerate
    def choose(self, latency: np.ndarray) -> IntervalChoice | NoDegradation:
        choice = automatic_interval(latency, tail_z=self.tail_z, min_mode_share=self.min_mode_share,
                                    min_excess=self.min_excess, quantile=self.quantile,
                                    min_bin_fraction=self.min_bin_fraction)
        return choice if choice.interval is not None else choice.reason


def no_degradation(interval: LatencyInterval, latency: np.ndarray, min_support: int) -> NoDegradation | None:
    """Why an interval leaves nothing to explain (no request, every request, too few), or None."""
    n_pos = int(interval.contains(latency).sum())
    if n_pos == 0:
        return IntervalEmpty(interval.low_ns, interval.high_ns, int(latency.size), int(latency.min()),
                             int(latency.max()))
    if n_pos == latency.size:
        return IntervalHoldsEvery(interval.low_ns, interval.high_ns, n_pos)
    if n_pos < min_support:
        return TooFewInInterval(interval.low_ns, interval.high_ns, n_pos, min_support)
    return None


# ============================================================================================
# 2. Split points
# ============================================================================================


@dataclass(frozen=True)
class DensitySplitPoints:
    """The density minima of the latencies inside ``I`` (mean shift), at most ``max_split_points``
    inner ones, then those leaving fewer than ``min_support`` requests between them merged away."""

    max_split_points: int = 4
    min_support: int = 15
    quantile: float = 0.1
    min_bin_fraction: float = 0.01

    def bounds(self, latency: np.ndarray, interval: LatencyInterval) -> tuple[np.ndarray, list[Note]]:
        points = interval_split_points(latency, interval, max_split_points=self.max_split_points,
                                       quantile=self.quantile, min_bin_fraction=self.min_bin_fraction)
        return _merged(points, latency, self.min_support)


@dataclass(frozen=True)
class GivenSplitPoints:
    """Inner split points the user gave (ns ints or strings such as ``"420ms"``), strictly inside ``I``."""

    points: Sequence[int | str]
    min_support: int = 15

    def bounds(self, latency: np.ndarray, interval: LatencyInterval) -> tuple[np.ndarray, list[Note]]:
        from ...units import parse_duration

        if isinstance(self.points, (str, bytes)):
            raise ParameterError("The 'split_points' parameter of LatencyDegradationPatterns must be a sequence of "
                                 f"split points (ns ints or strings such as '420ms'). Got {self.points!r} instead.")
        values = []
        for p in self.points:
            if isinstance(p, str):
                value = parse_duration(p)
            elif isinstance(p, (int, np.integer)) and not isinstance(p, bool):
                value = int(p)
            else:
                raise ParameterError("The 'split_points' parameter of LatencyDegradationPatterns must be a sequence "
                                     f"of ints (ns) or duration strings. Got {self.points!r} instead.")
            if not interval.low_ns < value < interval.high_ns:
                raise ParameterError(
                    f"The 'split_points' parameter of LatencyDegradationPatterns must lie strictly inside the latency "
                    f"interval {interval.describe()}. Got {p!r} ({format_duration_ns(value)}) instead.")
            values.append(value)
        points = np.array(sorted({interval.low_ns, interval.high_ns, *values}), dtype=np.int64)
        return _merged(points, latency, self.min_support)


def _merged(points: np.ndarray, latency: np.ndarray, min_support: int) -> tuple[np.ndarray, list[Note]]:
    merged = merge_small(points, latency, min_support)
    removed = int(points.size - merged.size)
    return merged, ([SplitPointsRemoved(removed, min_support)] if removed else [])


# ============================================================================================
# 3. The search
# ============================================================================================


@dataclass(frozen=True, eq=False)
class Encoded:
    """The requests as every search and refinement sees them (built once per fit).

    Attributes
    ----------
    data : Inputs
    encodings : tuple of AttributeEncoding
    codes : ndarray of int32, shape (n_requests, n_attributes)
    bounds : ndarray of int64, shape (k + 1,)
        The split points ``s_0 < ... < s_k``.
    latency_class : ndarray of int64, shape (n_requests,)
        0 below ``s_0``, ``c`` in ``[s_{c-1}, s_c)``, ``k + 1`` at or above ``s_k``.
    evaluator : PatternEvaluator
        Over the scored requests only (the uncertain band left out).
    least_of : dict of (int, int) to float
        Least precision of a pattern of each pair of split points (``min_lift``); filled by
        :func:`partition_runs`.
    prune_tolerance : float
    found : dict of (int, int) to SearchResult
        The search's best pattern of each pair of split points; filled by :func:`partition_runs`.
    """

    data: Inputs
    encodings: tuple[AttributeEncoding, ...]
    codes: np.ndarray
    bounds: np.ndarray
    latency_class: np.ndarray
    evaluator: PatternEvaluator
    least_of: dict = field(default_factory=dict)
    prune_tolerance: float = 0.0
    found: dict = field(default_factory=dict)
    skipped: tuple = ()

    @property
    def categorical(self) -> np.ndarray:
        return np.array([e.categorical for e in self.encodings], dtype=bool)

    @property
    def pairs(self) -> list[tuple[int, int]]:
        k = self.bounds.size - 1
        return [(j, i) for i in range(1, k + 1) for j in range(i)]

    def n_scored(self, j: int, i: int) -> int:
        """Scored requests of the sub-interval ``[s_j, s_i)``."""
        return int(self.evaluator.class_sizes[j + 1: i + 1].sum())

    def members(self, j: int, i: int) -> np.ndarray:
        """Requests (all, scored or not) of the sub-interval ``[s_j, s_i)``."""
        return (self.latency_class > j) & (self.latency_class <= i)

    def score(self, j: int, i: int, lo: np.ndarray, hi: np.ndarray) -> float:
        """The admissible F-score of a pattern (code ranges) on ``[s_j, s_i)``."""
        counts = self.evaluator.class_counts(lo[None], hi[None])[0]
        tp = int(counts[j + 1: i + 1].sum())
        return float(admissible_f_score(tp, int(counts.sum()), self.n_scored(j, i), self.least_of[(j, i)]))

    def prune(self, j: int, i: int, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return prune(self.evaluator, lo, hi, j, i, tolerance=self.prune_tolerance,
                     least_precision=self.least_of[(j, i)])


@dataclass(frozen=True, eq=False)
class Run:
    """One sub-interval ``[s_first, s_last)`` of the partition and its pattern.

    Attributes
    ----------
    first, last : int
        Split point indices.
    lo, hi : ndarray of int or None
        The pattern as code ranges (``-1``: no condition on the attribute); None: no pattern.
    exhaustive : bool
        Branch and bound proved the pattern optimal.
    f_score : float
        Its admissible F-score on the sub-interval.
    """

    first: int
    last: int
    lo: np.ndarray | None
    hi: np.ndarray | None
    exhaustive: bool
    f_score: float

    @property
    def has_pattern(self) -> bool:
        return self.lo is not None

    def mask(self, codes: np.ndarray) -> np.ndarray:
        """Requests satisfying the pattern (none without one)."""
        return np.zeros(codes.shape[0], bool) if self.lo is None else pattern_mask(self.lo, self.hi, codes)


class SearchProtocol(Protocol):
    """What a search does: the best pattern of every pair of split points."""

    def search(self, encoded: Encoded, least: np.ndarray) -> list[SearchResult]: ...


@dataclass(frozen=True)
class GeneticSearch:
    """The genetic algorithm of Section 3.1 (:func:`~.ga.genetic_search`)."""

    settings: GASettings
    random_state: Any = None

    def search(self, encoded: Encoded, least: np.ndarray) -> list[SearchResult]:
        return genetic_search(encoded.evaluator, encoded.categorical, encoded.pairs, settings=self.settings,
                              random_state=self.random_state, least_precision=least)


@dataclass(frozen=True)
class BranchAndBoundSearch:
    """Branch and bound over single-bin conditions (:func:`~.bnb.branch_and_bound`)."""

    max_nodes: int | None = 2000
    time_budget_s: float | None = None

    def search(self, encoded: Encoded, least: np.ndarray) -> list[SearchResult]:
        return branch_and_bound(encoded.evaluator, encoded.pairs, max_nodes=self.max_nodes,
                                time_budget_s=self.time_budget_s, least_precision=least)


# ============================================================================================
# 4. The dynamic program
# ============================================================================================


def partition_runs(encoded: Encoded, search: SearchProtocol, *, min_lift: float | None, weighted: bool,
                   split_penalty: float) -> tuple[Partition, list[Run]]:
    """Search every pair of split points, then partition ``I`` by eq. (8): each sub-interval
    scores its F-score (times its share of ``I``'s scored requests when ``weighted``) minus
    ``split_penalty``. Returns the partition and its runs, each pattern pruned."""
    pairs = encoded.pairs
    n = encoded.evaluator.n_requests
    least = min_precision([encoded.n_scored(j, i) for j, i in pairs], n, min_lift)
    encoded.least_of.update(zip(pairs, (float(x) for x in least)))
    found = encoded.found
    found.update({(r.first, r.last): r for r in search.search(encoded, least)})
    n_pos = max(encoded.n_scored(0, encoded.bounds.size - 1), 1)
    weight = (lambda r: r.n_positives / n_pos) if weighted else (lambda r: 1.0)
    partition = optimal_partition(encoded.bounds.size, {p: r.f_score * weight(r) - split_penalty
                                                        for p, r in found.items()})
    return partition, [_pruned(encoded, found[pair]) for pair in partition.sub_intervals]


def _pruned(encoded: Encoded, r: SearchResult) -> Run:
    if r.tp == 0 or r.f_score <= 0:
        return Run(r.first, r.last, None, None, r.exhaustive, 0.0)
    lo, hi = encoded.prune(r.first, r.last, r.lo, r.hi)
    return Run(r.first, r.last, lo, hi, r.exhaustive, encoded.score(r.first, r.last, lo, hi))


# ============================================================================================
# The runs as results
# ============================================================================================


def describe_runs(runs: Sequence[Run], encoded: Encoded, *, exhaustive: bool, min_lift: float | None
                  ) -> tuple[list[SubIntervalPattern], list[np.ndarray]]:
    """Each run as a :class:`~.results.SubIntervalPattern` (scores, effects, context), with the
    requests satisfying its pattern. ``exhaustive``: report branch and bound's proof (else None)."""
    subs, satisfied = [], []
    for index, run in enumerate(runs):
        least = float(min_precision([encoded.n_scored(run.first, run.last)], encoded.evaluator.n_requests,
                                    min_lift)[0])
        sub = _sub_interval(index, run, encoded, bool(run.exhaustive) if exhaustive else None, least, min_lift)
        subs.append(sub)
        satisfied.append(run.mask(encoded.codes))
    return subs, satisfied


def _sub_interval(index: int, run: Run, encoded: Encoded, exhaustive: bool | None, least: float,
                  min_lift: float | None) -> SubIntervalPattern:
    low, high = int(encoded.bounds[run.first]), int(encoded.bounds[run.last])
    n_sub = encoded.n_scored(run.first, run.last)
    if run.lo is None:
        if n_sub == 0:
            why = "no request in this sub-interval"
        elif min_lift is not None:
            why = (f"no condition explains its {n_sub:,} requests better than chance (a pattern needs precision "
                   f">= {least:.2f} here, min_lift={min_lift:g})")
        else:
            why = "no condition holds for its requests"
        return SubIntervalPattern(index, low, high, None, f"no pattern: {why}", 0.0, 0.0, 0.0, 0, 0, n_sub, 0,
                                  exhaustive)
    counts = encoded.evaluator.class_counts(run.lo[None], run.hi[None])[0]
    tp = int(counts[run.first + 1: run.last + 1].sum())
    quality = pattern_quality(tp, int(counts.sum()) - tp, n_sub)
    attrs = np.flatnonzero(run.lo >= 0)
    conditions = [encoded.encodings[a].condition(run.lo[a], run.hi[a]) for a in attrs]
    pattern = Pattern(conditions)
    mask = run.mask(encoded.codes)
    effects = tuple(effect(c, encoded.data, mask) for c in conditions)
    return SubIntervalPattern(
        index, low, high, pattern, pattern.describe(), quality.precision, quality.recall, quality.f_score,
        quality.tp, quality.fp, n_sub, quality.support, exhaustive, effects,
        context(np.flatnonzero(run.lo < 0), list(encoded.encodings), encoded.codes, encoded.data, mask))
