"""Latency degradation patterns: which conditions on operations explain slow requests.

:class:`LatencyDegradationPatterns` implements Cortellessa & Traini (ICPE 2020): given a latency
interval ``I`` of "degraded" requests and candidate split points inside it, it partitions ``I``
into sub-intervals by the dynamic program of eq. (8), each sub-interval with the pattern (a
conjunction of conditions on exclusive times, instances and root attributes) of the highest
F-score ``Q(P, I)``, found by the genetic algorithm of Section 3.1 (``solver="ga"``) or the
branch and bound of Krushevskaja & Sandler (``solver="bnb"``). The clustering baselines of the
paper (``"kmeans"``, ``"hierarchical"``, ``"meanshift"``) cluster the degraded requests instead
and give no pattern.
"""

from __future__ import annotations

import json
import numbers
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import polars as pl

from ...errors import EmptyDataError, ParameterError
from ...units import format_duration_ns, parse_duration
from .._contract import NONE, Analysis, Constraint, InstanceOf, Interval, Options, Seed, Strings
from ._bitsets import AttributeEncoding, PatternEvaluator, SearchResult, admissible_f_score, min_precision, prune
from ._model import (
    ATTR_PREFIX,
    CONTINUOUS_PREFIX,
    INSTANCE_PREFIX,
    Condition,
    LatencyInterval,
    Pattern,
    attribute_words,
    pattern_quality,
)
from .bnb import branch_and_bound
from .candidates import ASYNCHRONOUS, asynchronous_operations, identifier_columns, operation_of, pass_through_columns
from .dp import optimal_partition
from .ga import GASettings, genetic_search
from .split_points import (
    IntervalChoice,
    attribute_thresholds,
    automatic_interval,
    degraded_interval,
    interval_split_points,
    merge_small,
    parse_interval,
)

__all__ = ["CompoundLabel", "ConditionEffect", "DegradationPatternsResult", "LatencyDegradationPatterns",
           "PAPER_SETTINGS", "SubIntervalPattern"]

LATENCY_COLUMN = "latency_ns"
PATTERN_SOLVERS = ("ga", "bnb")
CLUSTERING_SOLVERS = ("kmeans", "hierarchical", "meanshift")
SOLVERS = PATTERN_SOLVERS + CLUSTERING_SOLVERS
PARTITION_OBJECTIVES = ("sum", "weighted")
INTERVAL_RULES = ("robust", "paper")
#: The paper's method exactly (Cortellessa & Traini 2020): its automatic interval rule, every
#: pattern admissible, every sub-interval of the split points, only redundant conditions dropped,
#: every operation offered. The defaults add what is documented as beyond the paper.
PAPER_SETTINGS = {"interval_rule": "paper", "split_bandwidth_quantile": None, "max_split_points": 6,
                  "split_penalty": 0.0, "min_support": 1, "min_lift": None,
                  "prune_tolerance": 0.0, "exclude_async": False, "pass_through_share": None, "patience": None,
                  "split_causes": False, "compound_labels": False, "uncertain_z": None}
#: Two groups' median times of an operation differing by at least this share of the time a
#: cause adds are two causes (:func:`_one_cause`, :func:`_cause_split`, :func:`_compound`).
_OWN_CAUSE = 0.75
#: Differing by less than this share, they are one delay of varying size (:func:`_close_ranges`,
#: :func:`_compound`).
_SAME_SIZE = 0.25
_SUGGESTION = ("Give the degraded interval (--interval A:B, e.g. the latencies you consider slow) or another "
               "endpoint (--endpoint).")


# ============================================================================================
# Results
# ============================================================================================


@dataclass(frozen=True)
class ConditionEffect:
    """What one condition of a pattern means in time: the attribute inside vs outside the pattern.

    Attributes
    ----------
    condition : Condition
    inside_ns, outside_ns : float or None
        Continuous: median of the attribute (exclusive time, ns) over the requests satisfying the
        pattern, and over the other requests that have a value. None when there is none.
    added_ns : float or None
        ``inside_ns - outside_ns``: the time the condition's operation adds in the pattern's
        requests (negative: it is faster there).
    inside_share, outside_share : float or None
        Categorical: share of the requests satisfying the pattern, and of the others, that have
        the condition's value.
    """

    condition: Condition
    inside_ns: float | None = None
    outside_ns: float | None = None
    added_ns: float | None = None
    inside_share: float | None = None
    outside_share: float | None = None

    def describe(self) -> str:
        """The condition and its effect, e.g. ``"... (median 31 ms vs 3.1 ms outside: +28 ms)"``."""
        c = self.condition
        text = attribute_words(c.attribute) if c.kind == "continuous" and c.low_ns is None and c.high_ns is None \
            else c.describe()
        if self.added_ns is not None:
            sign = "+" if self.added_ns >= 0 else "-"
            text += (f" (median {format_duration_ns(self.inside_ns)} vs {format_duration_ns(self.outside_ns)} "
                     f"outside: {sign}{format_duration_ns(abs(self.added_ns))})")
        elif self.inside_share is not None:
            text += f" ({self.inside_share:.0%} of the pattern's requests vs {self.outside_share:.0%} of the others)"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: the condition's fields and the effect."""
        return {**self.condition.to_dict(), "inside_ns": self.inside_ns, "outside_ns": self.outside_ns,
                "added_ns": self.added_ns, "inside_share": self.inside_share, "outside_share": self.outside_share,
                "words": self.describe()}


@dataclass(frozen=True)
class SubIntervalPattern:
    """One sub-interval of the latency interval and the pattern that explains it.

    For the clustering solvers an entry is one cluster of degraded requests instead: its latency
    range is the cluster's, ``pattern`` is None and the scores are None (a cluster is not a
    pattern).

    Attributes
    ----------
    index : int
        Position in the partition; the value of :attr:`LatencyDegradationPatterns.labels_`.
    low_ns, high_ns : int
        Latency range ``[low_ns, high_ns)`` in ns. Two entries share one range when the
        sub-interval's pattern covered two causes (``split_causes``): each explains its part.
    pattern : Pattern or None
        The best pattern; None for clusters, or when no condition holds for any request of the
        sub-interval (then ``words`` says so and the F-score is 0).
    words : str
        The pattern (or cluster) in words.
    precision, recall, f_score : float or None
        Eqs. (4)-(5) of the pattern against ``[low_ns, high_ns)``.
    tp, fp : int or None
        True and false positives (eq. 3).
    n_positives : int
        Requests whose latency is in ``[low_ns, high_ns)`` (clusters: the cluster's size).
    support : int
        Requests satisfying the pattern, ``tp + fp`` (clusters: the cluster's size).
    exhaustive : bool or None
        Branch and bound: whether the search finished within its budget (the pattern is then
        optimal over single-bin conditions). None for the other solvers.
    effects : tuple of ConditionEffect
        One per condition of ``pattern``: the median exclusive time inside vs outside the
        pattern (time added), or the category's share (beyond the paper).
    context : tuple of ConditionEffect
        What else sets the pattern's requests apart, beyond its conditions: the operations that
        take most time more inside than outside the pattern (at least 1 ms and a tenth of the
        latency difference, at most 3) and the categories at least 50 points more frequent
        inside (at most 3). A pattern ``customer.tier = gold`` names here the operation its
        requests are slow in; ``op exclusive >= 20 ms`` the category they share. Beyond the paper.
    """

    index: int
    low_ns: int
    high_ns: int
    pattern: Pattern | None
    words: str
    precision: float | None
    recall: float | None
    f_score: float | None
    tp: int | None
    fp: int | None
    n_positives: int
    support: int
    exhaustive: bool | None = None
    effects: tuple[ConditionEffect, ...] = ()
    context: tuple[ConditionEffect, ...] = ()

    @property
    def latency_words(self) -> str:
        return f"[{format_duration_ns(self.low_ns)}, {format_duration_ns(self.high_ns)})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (the pattern as a list of condition dicts)."""
        return {
            "index": self.index,
            "low_ns": self.low_ns,
            "high_ns": self.high_ns,
            "latency_words": self.latency_words,
            "pattern": None if self.pattern is None else [c.to_dict() for c in self.pattern],
            "words": self.words,
            "precision": self.precision,
            "recall": self.recall,
            "f_score": self.f_score,
            "tp": self.tp,
            "fp": self.fp,
            "n_positives": self.n_positives,
            "support": self.support,
            "exhaustive": self.exhaustive,
            "effects": [e.to_dict() for e in self.effects],
            "context": [e.to_dict() for e in self.context],
        }


@dataclass(frozen=True)
class CompoundLabel:
    """A rule by which requests slow for two causes take a faster sub-interval's label
    (``compound_labels``; beyond the paper).

    Attributes
    ----------
    slower, faster : int
        Sub-interval indices: the requests labelled ``slower`` that satisfy ``fit`` (and no other
        rule's ``fit`` for the same ``slower``) are labelled ``faster`` when ``carries``.
    fit : Pattern
        The faster sub-interval's pattern without its conditions on the slower pattern's cause
        operations (which the slower cause may have moved).
    carries : bool
        Whether the requests that fit carry the faster pattern's cause on top of the slower one's
        (as large as in its own requests, the two causes independent). False: a rule that only
        makes another ambiguous.
    """

    slower: int
    faster: int
    fit: Pattern
    carries: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (``fit`` as a pattern dict)."""
        return {"slower": self.slower, "faster": self.faster, "fit": self.fit.to_dict(), "carries": self.carries}


_FRAME_SCHEMA = {
    "index": pl.Int64,
    "low_ns": pl.Int64,
    "high_ns": pl.Int64,
    "words": pl.Utf8,
    "n_conditions": pl.Int64,
    "precision": pl.Float64,
    "recall": pl.Float64,
    "f_score": pl.Float64,
    "tp": pl.Int64,
    "fp": pl.Int64,
    "n_positives": pl.Int64,
    "support": pl.Int64,
    "exhaustive": pl.Boolean,
}


@dataclass(frozen=True)
class DegradationPatternsResult:
    """What :class:`LatencyDegradationPatterns` found.

    Attributes
    ----------
    found : bool
        False when there is no degradation to explain; ``reason`` then says why and
        ``sub_intervals`` is empty.
    reason : str or None
    solver : str
    n_requests : int
        Requests analysed (those with a latency).
    interval : LatencyInterval or None
        The degraded latency interval ``I``.
    interval_source : {"given", "automatic"} or None
    interval_reason : str or None
        How the interval was chosen, with the numbers (the automatic rule's reference mode,
        spread and cut; or "given").
    split_points : tuple of int
        Candidate split points ``s_0 < ... < s_k`` in ns (``s_0``, ``s_k``: the ends of ``I``).
    sub_intervals : tuple of SubIntervalPattern
        The optimal partition of ``I`` with its patterns (clusters for the clustering solvers).
    score : float or None
        The objective the partition maximises: the sum of the sub-intervals' F-scores (eq. 7),
        or their positives-weighted mean with ``partition_objective="weighted"`` (None for
        clustering).
    n_positives : int
        Requests with latency in ``I``.
    attributes : tuple of str
        Columns the conditions may use.
    skipped_attributes : tuple of (str, str)
        Columns left out, with the reason (all values missing, too many categories).
    notes : tuple of str
        Anything else worth knowing (requests without latency, budget exhausted...).
    uncertain_ns : int or None
        The requests in ``[uncertain_ns, interval.low_ns)`` were left out of the patterns' scores
        (``uncertain_z``): neither true nor false positives. None: every request counted.
    compound : tuple of CompoundLabel
        The rules that gave requests slow for two causes a faster sub-interval's label
        (``compound_labels``).
    """

    found: bool
    solver: str
    n_requests: int
    reason: str | None = None
    interval: LatencyInterval | None = None
    interval_source: str | None = None
    interval_reason: str | None = None
    split_points: tuple[int, ...] = ()
    sub_intervals: tuple[SubIntervalPattern, ...] = ()
    score: float | None = None
    n_positives: int = 0
    attributes: tuple[str, ...] = ()
    skipped_attributes: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())
    uncertain_ns: int | None = None
    compound: tuple[CompoundLabel, ...] = ()

    def to_frame(self) -> pl.DataFrame:
        """One row per sub-interval (empty, same columns, when nothing was found)."""
        rows = [
            {
                "index": s.index,
                "low_ns": s.low_ns,
                "high_ns": s.high_ns,
                "words": s.words,
                "n_conditions": None if s.pattern is None else len(s.pattern),
                "precision": s.precision,
                "recall": s.recall,
                "f_score": s.f_score,
                "tp": s.tp,
                "fp": s.fp,
                "n_positives": s.n_positives,
                "support": s.support,
                "exhaustive": s.exhaustive,
            }
            for s in self.sub_intervals
        ]
        return pl.DataFrame(rows, schema=_FRAME_SCHEMA)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict of everything (``json.dumps`` works on it as is)."""
        out = {
            "found": self.found,
            "reason": self.reason,
            "solver": self.solver,
            "n_requests": self.n_requests,
            "interval": None if self.interval is None else self.interval.to_dict(),
            "interval_source": self.interval_source,
            "interval_reason": self.interval_reason,
            "split_points": list(self.split_points),
            "sub_intervals": [s.to_dict() for s in self.sub_intervals],
            "score": self.score,
            "n_positives": self.n_positives,
            "attributes": list(self.attributes),
            "skipped_attributes": [{"attribute": a, "reason": r} for a, r in self.skipped_attributes],
            "notes": list(self.notes),
            "uncertain_ns": self.uncertain_ns,
            "compound": [c.to_dict() for c in self.compound],
        }
        json.dumps(out)  # a failure here is a bug, not bad input
        return out

    def describe(self) -> str:
        """A few lines in words."""
        if not self.found:
            return f"No degradation found, because {self.reason}"
        lines = [f"Latency interval {self.interval.describe()} ({self.n_positives} of {self.n_requests} requests):"]
        if self.interval_reason and self.interval_source == "automatic":
            lines.append(f"  chosen automatically: {self.interval_reason}")
        for s in self.sub_intervals:
            score = "" if s.f_score is None else f" (F={s.f_score:.3f}, precision={s.precision:.3f}, recall={s.recall:.3f})"
            lines.append(f"  {s.latency_words}: {s.words}{score}")
            lines.extend(f"      {e.describe()}" for e in s.effects if e.added_ns is not None or e.inside_share is not None)
            if s.context:
                lines.append("      its requests also: " + "; ".join(e.describe() for e in s.context))
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


# ============================================================================================
# Input
# ============================================================================================


@dataclass
class _Inputs:
    frame: pl.DataFrame
    rows: np.ndarray  # indices of the analysed rows in the table
    latency: np.ndarray
    continuous: list[str]
    categorical: list[str]
    notes: list[str]


def _column_key(name: str) -> str | None:
    for prefix in (CONTINUOUS_PREFIX, INSTANCE_PREFIX, ATTR_PREFIX):
        if name.startswith(prefix) and name.endswith("]"):
            return name[len(prefix):-1]
    return None


def _read_table(table: Any, *, attributes: Sequence[str] | None, categorical: bool) -> _Inputs:
    if isinstance(table, pl.DataFrame):
        frame = table
        continuous = [c for c in frame.columns if c.startswith(CONTINUOUS_PREFIX)]
        categ = [c for c in frame.columns if c.startswith((INSTANCE_PREFIX, ATTR_PREFIX))]
    elif all(hasattr(table, a) for a in ("frame", "continuous_columns", "categorical_columns")):
        frame = table.frame
        if not isinstance(frame, pl.DataFrame):
            raise ParameterError(f"The table's 'frame' must be a polars DataFrame. Got {type(frame).__name__} instead.")
        continuous = list(table.continuous_columns)
        categ = list(table.categorical_columns)
    else:
        raise ParameterError(
            "The 'table' argument of LatencyDegradationPatterns.fit must be a TraceTable (with .frame, "
            f".continuous_columns, .categorical_columns) or a polars DataFrame. Got {type(table).__name__} instead."
        )
    if LATENCY_COLUMN not in frame.columns:
        raise ParameterError(f"The table has no {LATENCY_COLUMN!r} column (columns: {frame.columns[:8]}...).")
    if not categorical:
        categ = []
    if attributes is not None:
        wanted = list(attributes)
        keep: list[str] = []
        for name in wanted:
            matches = [c for c in continuous + categ if c == name or _column_key(c) == name]
            if not matches:
                available = sorted({_column_key(c) or c for c in continuous + categ})
                raise ParameterError(
                    f"The 'attributes' parameter names {name!r}, which is neither a column nor an operation/attribute "
                    f"key of the table. Available keys: {available[:20]}{'...' if len(available) > 20 else ''}."
                )
            keep.extend(m for m in matches if m not in keep)
        continuous = [c for c in continuous if c in keep]
        categ = [c for c in categ if c in keep]
    latency_series = frame.get_column(LATENCY_COLUMN)
    notes: list[str] = []
    has_latency = latency_series.is_not_null().to_numpy()
    rows = np.flatnonzero(has_latency)
    if rows.size < frame.height:
        notes.append(f"{frame.height - rows.size} request(s) without {LATENCY_COLUMN} were left out (label -1).")
    latency = latency_series.cast(pl.Int64).to_numpy()[rows] if rows.size else np.empty(0, np.int64)
    return _Inputs(frame, rows, latency.astype(np.int64), continuous, categ, notes)


# ============================================================================================
# Parameter validation
# ============================================================================================


def _fail(name: str, expected: str, value: Any) -> None:
    raise ParameterError(
        f"The {name!r} parameter of LatencyDegradationPatterns must be {expected}. Got {value!r} instead."
    )


@dataclass(frozen=True)
class _KRange(Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, range) and len(value) > 0 and value.start >= 2 and value.step >= 1

    def describe(self) -> str:
        return "a non-empty increasing range of ints >= 2"


# ============================================================================================
# The estimator
# ============================================================================================


class LatencyDegradationPatterns(Analysis):
    """Find the latency degradation patterns of a set of requests (Cortellessa & Traini, 2020).

    Given a latency interval ``I`` of degraded requests (automatic or given) and candidate split
    points inside it (density minima by mean shift, or given), the analysis partitions ``I`` into
    sub-intervals and gives each the pattern of highest F-score ``Q(P, I)`` (eq. 5), maximising
    the sum of scores (eqs. 7-8). A pattern is a conjunction of conditions on exclusive times
    (``exclusive_ns[K]`` in a range), instances and root attributes (Section 5); a request with a
    missing value satisfies no condition on it.

    Parameters
    ----------
    solver : {"ga", "bnb", "kmeans", "hierarchical", "meanshift"}, default="ga"
        ``"ga"``: the genetic algorithm (Section 3.1). ``"bnb"``: branch and bound over single-bin
        conditions (Krushevskaja & Sandler 2013). The clustering baselines (Section 4.5) cluster
        the requests in ``I`` by their exclusive times with
        :func:`tracesleuth.analyses.patterns.clustering.cluster_degraded` and give no pattern.
    interval : str, (int, int), LatencyInterval or None, default=None
        The degraded interval ``I``, e.g. ``"350ms:700ms"`` (half-open, units ns/us/ms/s; an open
        side means the data's min or max) or ``(low_ns, high_ns)``. None: chosen by
        ``interval_rule`` and explained in ``result_.interval_reason``.
    interval_rule : {"robust", "paper"}, default="robust"
        The automatic interval. ``"paper"``: from the first split point above the most populous
        latency mode (:func:`~tracesleuth.analyses.patterns.split_points.degraded_interval`).
        ``"robust"`` (beyond the paper): on a log scale, from the fastest large mode's tail cut or
        the density gap above it, whichever is lower; a slow tail without a mode is explained too,
        and a tail no heavier than chance is not
        (:func:`~tracesleuth.analyses.patterns.split_points.automatic_interval`).
    tail_z : float, default=2.0
        ``"robust"`` rule: the tail cut in standard deviations of the reference mode.
    uncertain_z : float or None, default=1.0
        ``"robust"`` rule: the requests below the automatic interval but more than this many
        standard deviations of the reference mode above its centre are left out of the pattern
        scores, neither true nor false positives: where a degraded mode overlaps the normal tail,
        its faster requests lie below the interval's start, and counting them as false positives
        makes the search add conditions that describe latency, not cause (a pattern naming an
        optional call that makes the request slower). They are still labelled by the patterns
        they satisfy. Beyond the paper; None: every request below the interval is normal.
    split_points : sequence of int or str, or None, default=None
        Inner split points of ``I`` (ns, or strings such as ``"420ms"``). None: the density minima
        of the latencies in ``I`` (mean shift).
    attributes : sequence of str or None, default=None
        Restrict the conditions to these columns or operation/attribute keys (``"svc:op"`` selects
        ``exclusive_ns[svc:op]`` and ``instance[svc:op]``; ``"version"`` selects
        ``attr[version]``). None: every exclusive-time, instance and attribute column.
    categorical : bool, default=True
        Use the categorical columns (instances and root attributes, Section 5).
    max_split_points : int, default=4
        At most this many inner split points (least populated sub-intervals are merged): the
        search runs once per pair of split points, ``(k + 1)(k + 2) / 2`` times for ``k`` inner
        points (15 for 4). The paper sets no limit; :data:`PAPER_SETTINGS` keeps 6.
    min_support : int, default=15
        Least requests of a sub-interval: split points leaving fewer between them are merged away,
        and an interval holding fewer is no degradation to explain (beyond the paper; 1: the
        paper, where a sub-interval of one request scores F = 1).
    min_lift : float or None, default=2.0
        A pattern must lift its sub-interval's share of the requests: precision at least
        ``min(min_lift * b, 1 - (1 - b) / min_lift)`` for a sub-interval holding a share ``b``
        (:func:`~tracesleuth.analyses.patterns._bitsets.min_precision`), else it scores 0. Beyond
        the paper, whose F-score rewards describing the normal requests of a band; None: off.
    prune_tolerance : float, default=0.01
        Conditions are dropped from a found pattern while its F-score stays within this much of
        the pattern's (the shortest pattern within the tolerance,
        :func:`~tracesleuth.analyses.patterns._bitsets.prune`). 0: only conditions that change
        nothing go (the paper's patterns as found).
    exclude_async : bool, default=True
        Leave out the operations the request never waits for (every call below a producer/consumer
        or ``FOLLOWS_FROM`` link; needs a TraceTable with spans). Beyond the paper.
    pass_through_share : float or None, default=0.95
        Leave out the operations whose exclusive time is at least this share of the request latency
        (median, over the requests calling them; at least half do): a gateway span with no traced
        child restates the latency. Beyond the paper; None: off.
    partition_objective : {"sum", "weighted"}, default="sum"
        What the dynamic program maximises. ``"sum"``: the sum of the sub-intervals' F-scores,
        eq. (7) of the paper. ``"weighted"``: each F-score weighted by its sub-interval's share of
        the requests in ``I`` (the mean F-score of a degraded request). The plain sum rewards
        splitting: a pattern explaining a whole mode perfectly (F = 1) scores about 1.33 once the
        mode is cut in halves (F = 2/3 each), so latency modes that have no distinct cause (an
        optional call, a cache miss) become separate sub-intervals with weak patterns; the
        weighted objective splits only where different patterns explain the parts better.
    split_penalty : float, default=0.5
        Subtracted from each sub-interval's score in the dynamic program, so that a partition
        into ``p`` sub-intervals pays ``p * split_penalty``: a split is kept only when the two
        parts' scores exceed the whole's by more than the penalty. The paper's sum of F-scores
        (eq. 7, ``split_penalty=0``) rewards splitting itself: one cause explained perfectly
        (F = 1) scores 1.5 once its band is cut in two halves explained at F = 0.75 by the cause
        and an unrelated bimodality. With 0.5, a sub-interval adds to the partition only when its
        pattern explains more of it than it misses (F > 0.5), and the halves need F > 0.75 each.
        Neighbouring sub-intervals are then merged when one pattern explains their union at least
        as well as the parts' patterns explain their parts (F-score against their mean weighted by
        the parts' requests): the hull of the parts' ranges when they
        condition the same attributes (a delay of 50 ms in one, 60 ms in the next), or the best
        pattern of the union when what tells the parts' requests apart adds little time (a
        chance difference of another operation between the halves of one delay's band). Beyond
        the paper; 0: the paper's objective, no merging.
    split_causes : bool, default=True
        A sub-interval's pattern is split in two when its requests fall into two groups told
        apart by an operation it does not name (``op >= t`` vs ``op < t``, each group at least
        ``min_support`` requests) whose median exclusive time differs between the groups by at
        least three quarters of the time the pattern's own cause conditions add: the rule by
        which neighbouring sub-intervals stay apart, applied inside one. One pattern per
        sub-interval (the paper) otherwise covers two causes whose latencies overlap, e.g. a
        delay of two operations and a normal slow mode of one of them (cache misses), or two
        degradations sharing an operation. Repeated on each part; a split on an operation the
        pattern does not name is preferred to one inside the range of its own cause (a delay and a
        slow normal mode of that operation, told apart at a density minimum of its times). Beyond
        the paper.
    compound_labels : bool, default=True
        A request slow for two independent causes lands in a slower sub-interval than either
        cause alone, where the pattern of one of them (often a normal slow mode, e.g. cache
        misses) labels it. It is labelled with a faster sub-interval's pattern instead when it
        carries that pattern's cause as well: it meets that pattern's conditions but those on the
        slower pattern's cause operations, its cause operations take as much time as in that
        pattern's own requests, and the slower pattern's cause occurs without it about as often
        as with it (independent). A request fitting two faster patterns keeps
        its label. Each move is a note. Beyond the paper (a request belongs to the sub-interval
        holding its latency).
    bandwidth_quantile : float, default=0.3
        Quantile of the mean-shift bandwidth estimate (as ``sklearn.cluster.estimate_bandwidth``).
    split_bandwidth_quantile : float or None, default=0.1
        The same for the split points of ``I`` (density minima of the latencies inside it). A
        finer bandwidth than the attributes' offers the dynamic program the minima between
        degraded bands that overlap (two degradations a few tens of ms apart); the least
        populated are merged (``max_split_points``, ``min_support``) and the dynamic program
        keeps only the splits that better patterns justify. Beyond the paper; None: as
        ``bandwidth_quantile`` (the paper's one mean-shift setting).
    min_bin_fraction : float, default=0.01
        Mean-shift seed bins need this fraction of the values.
    max_categories : int, default=100
        Categorical columns with more distinct values are left out (and reported).
    population_size, offspring_size, generations : int, default=100, 100, 400
        GA ``mu``, ``lambda`` and generations.
    crossover_probability, mutation_probability : float, default=0.8, 0.2
    tournament_size : int, default=20
    patience : int or None, default=100
        GA: stop when no sub-interval's best pattern improved for this many generations
        (:class:`~tracesleuth.analyses.patterns.ga.GASettings`). Beyond the paper; None: every
        generation.
    max_nodes : int or None, default=2000
        Branch and bound: nodes expanded per sub-interval at most.
    time_budget_s : float or None, default=None
        Branch and bound: seconds per sub-interval at most.
    k_range : range, default=range(2, 7)
        Numbers of clusters tried by ``"kmeans"`` and ``"hierarchical"``.
    random_state : int, numpy Generator or None, default=None
        Seeds the GA (and the clustering solvers); equal seeds give equal patterns.

    Attributes
    ----------
    result_ : DegradationPatternsResult
        The partition, its patterns and scores.
    labels_ : ndarray of int64, shape (n_requests,)
        Per table row: the index of the sub-interval whose pattern the request satisfies (the one
        holding its latency when it satisfies several, else the first; a faster one whose cause
        it carries too with ``compound_labels``), or of its cluster; -1 for none.
    interval_ : LatencyInterval or None
    split_points_ : ndarray of int64, shape (k + 1,)
    encodings_ : tuple of AttributeEncoding
        The attributes as searched: thresholds (continuous) or categories.

    Raises
    ------
    ParameterError
        A setting out of range, an unknown attribute, a malformed interval or split point,
        ``k_range`` with no feasible number of clusters.
    EmptyDataError
        An empty table or no usable attribute. No degradation to explain (one latency mode, a
        given interval holding no request or too few) is not an error: ``result_.found`` is
        False and ``result_.reason`` says why, with the numbers and what to try.

    Notes
    -----
    :data:`PAPER_SETTINGS` gives the paper's method exactly; the defaults add the robust
    interval, least support and lift, pruning and the left-out columns of
    :mod:`~tracesleuth.analyses.patterns.candidates`, each documented as beyond the paper.

    See Also
    --------
    tracesleuth.analyses.patterns.split_points.degraded_interval : the automatic interval rule.

    References
    ----------
    V. Cortellessa and L. Traini. "Detecting Latency Degradation Patterns in Service-based
    Systems". ICPE 2020. https://doi.org/10.1145/3358960.3379126

    D. Krushevskaja and M. Sandler. "Understanding latency variations of black box services".
    WWW 2013. https://doi.org/10.1145/2488388.2488450

    Examples
    --------
    >>> from tracesleuth.analyses.patterns import LatencyDegradationPatterns
    >>> from tracesleuth.analyses.patterns.synthetic import make_degraded_session
    >>> session = make_degraded_session(1000, random_state=1)
    >>> model = LatencyDegradationPatterns(random_state=0).fit(session.frame)
    >>> model.result_.found, len(model.result_.sub_intervals)
    (True, 2)
    >>> all(s.f_score > 0.95 for s in model.result_.sub_intervals)
    True
    """

    def __init__(
        self,
        *,
        solver: str = "ga",
        interval: Any = None,
        interval_rule: str = "robust",
        tail_z: float = 2.0,
        uncertain_z: float | None = 1.0,
        split_points: Sequence[int | str] | None = None,
        attributes: Sequence[str] | None = None,
        categorical: bool = True,
        max_split_points: int = 4,
        min_support: int = 15,
        min_lift: float | None = 2.0,
        prune_tolerance: float = 0.01,
        exclude_async: bool = True,
        pass_through_share: float | None = 0.95,
        partition_objective: str = "sum",
        split_penalty: float = 0.5,
        split_causes: bool = True,
        compound_labels: bool = True,
        bandwidth_quantile: float = 0.3,
        split_bandwidth_quantile: float | None = 0.1,
        min_bin_fraction: float = 0.01,
        max_categories: int = 100,
        population_size: int = 100,
        offspring_size: int = 100,
        generations: int = 400,
        crossover_probability: float = 0.8,
        mutation_probability: float = 0.2,
        tournament_size: int = 20,
        patience: int | None = 100,
        max_nodes: int | None = 2000,
        time_budget_s: float | None = None,
        k_range: range = range(2, 7),
        random_state: int | np.random.Generator | None = None,
    ):
        self.solver = solver
        self.interval = interval
        self.interval_rule = interval_rule
        self.tail_z = tail_z
        self.uncertain_z = uncertain_z
        self.split_points = split_points
        self.attributes = attributes
        self.categorical = categorical
        self.max_split_points = max_split_points
        self.min_support = min_support
        self.min_lift = min_lift
        self.prune_tolerance = prune_tolerance
        self.exclude_async = exclude_async
        self.pass_through_share = pass_through_share
        self.partition_objective = partition_objective
        self.split_penalty = split_penalty
        self.split_causes = split_causes
        self.compound_labels = compound_labels
        self.bandwidth_quantile = bandwidth_quantile
        self.split_bandwidth_quantile = split_bandwidth_quantile
        self.min_bin_fraction = min_bin_fraction
        self.max_categories = max_categories
        self.population_size = population_size
        self.offspring_size = offspring_size
        self.generations = generations
        self.crossover_probability = crossover_probability
        self.mutation_probability = mutation_probability
        self.tournament_size = tournament_size
        self.patience = patience
        self.max_nodes = max_nodes
        self.time_budget_s = time_budget_s
        self.k_range = k_range
        self.random_state = random_state

    # ----------------------------------------------------------------------------------------

    _constraints = {
        "solver": [Options(SOLVERS)],
        "interval": [InstanceOf((None, str, tuple, list, LatencyInterval),
                                "None, 'A:B' (e.g. '350ms:700ms'), (low_ns, high_ns) or a LatencyInterval")],
        "split_points": [NONE, InstanceOf((list, tuple, np.ndarray), "a sequence of ints (ns) or duration strings")],
        "attributes": [NONE, Strings()],
        "categorical": [Options((True, False))],
        "interval_rule": [Options(INTERVAL_RULES)],
        "tail_z": [Interval(float, 0.0, None, closed="neither")],
        "uncertain_z": [NONE, Interval(float, 0.0, None)],
        "max_split_points": [Interval(int, 0, None)],
        "min_support": [Interval(int, 1, None)],
        "min_lift": [NONE, Interval(float, 1.0, None)],
        "prune_tolerance": [Interval(float, 0.0, 1.0)],
        "exclude_async": [Options((True, False))],
        "pass_through_share": [NONE, Interval(float, 0.0, 1.0, closed="right")],
        "partition_objective": [Options(PARTITION_OBJECTIVES)],
        "split_penalty": [Interval(float, 0.0, 1.0)],
        "split_causes": [Options((True, False))],
        "compound_labels": [Options((True, False))],
        "bandwidth_quantile": [Interval(float, 0.0, 1.0, closed="right")],
        "split_bandwidth_quantile": [NONE, Interval(float, 0.0, 1.0, closed="right")],
        "min_bin_fraction": [Interval(float, 0.0, 1.0)],
        "max_categories": [Interval(int, 1, None)],
        "population_size": [Interval(int, 2, None)],
        "offspring_size": [Interval(int, 1, None)],
        "generations": [Interval(int, 0, None)],
        "crossover_probability": [Interval(float, 0.0, 1.0)],
        "mutation_probability": [Interval(float, 0.0, 1.0)],
        "tournament_size": [Interval(int, 1, None)],
        "patience": [NONE, Interval(int, 1, None)],
        "max_nodes": [NONE, Interval(int, 1, None)],
        "time_budget_s": [NONE, Interval(float, 0.0, None, closed="right")],
        "k_range": [_KRange()],
        "random_state": [Seed()],
    }

    # ----------------------------------------------------------------------------------------

    def fit(self, table: Any) -> "LatencyDegradationPatterns":
        """Find the patterns of ``table``; every fitted attribute is set together at the end.

        Parameters
        ----------
        table : TraceTable or polars.DataFrame
            One row per request with ``latency_ns`` (int64 ns) and ``exclusive_ns[K]`` /
            ``instance[K]`` / ``attr[KEY]`` columns (a plain DataFrame's columns are recognised by
            these prefixes; a TraceTable names them in ``continuous_columns`` and
            ``categorical_columns``).

        Returns
        -------
        self
        """
        return super().fit(table)

    def _fit(self, table: Any) -> dict[str, Any]:
        if self.crossover_probability + self.mutation_probability > 1.0 + 1e-12:
            _fail(
                "crossover_probability",
                f"at most 1 - mutation_probability = {1.0 - self.mutation_probability:g} (their sum must be <= 1)",
                self.crossover_probability,
            )
        data = _read_table(table, attributes=self.attributes, categorical=self.categorical)
        n_rows = data.frame.height
        if n_rows == 0:
            raise EmptyDataError("The table holds no request: nothing to analyse.")
        if data.rows.size == 0:
            raise EmptyDataError(f"No request of the table has a {LATENCY_COLUMN}: nothing to analyse.")
        out: dict[str, Any] = {"labels_": np.full(n_rows, -1, dtype=np.int64), "interval_": None,
                               "split_points_": np.empty(0, dtype=np.int64), "encodings_": ()}
        ms = {"quantile": float(self.bandwidth_quantile), "min_bin_fraction": float(self.min_bin_fraction)}
        latency = data.latency
        notes = data.notes

        # ---- the latency interval I ---------------------------------------------------------
        chosen = self._interval(latency, ms)
        if isinstance(chosen, str):
            return self._nothing(out, data, chosen)
        interval, source, why = chosen.interval, ("given" if self.interval is not None else "automatic"), chosen.reason
        notes.extend(chosen.notes)
        positives = interval.contains(latency)
        n_pos = int(positives.sum())
        out["interval_"] = interval
        span = f"latencies span [{format_duration_ns(latency.min())}, {format_duration_ns(latency.max())}]"
        if n_pos == 0:
            return self._nothing(out, data, f"the latency interval {interval.describe()} holds no request of the "
                                 f"{latency.size:,} ({span}). {_SUGGESTION}", interval=interval, source=source)
        if n_pos == latency.size:
            return self._nothing(
                out, data, f"every request ({n_pos:,}) lies in the latency interval {interval.describe()}: "
                "no faster request to contrast with. Give an interval above the normal latencies (--interval A:B).",
                interval=interval, source=source)
        if n_pos < self.min_support:
            return self._nothing(
                out, data, f"the latency interval {interval.describe()} holds {n_pos} request(s), fewer than "
                f"min_support={self.min_support}: too few to tell a pattern from chance. {_SUGGESTION}",
                interval=interval, source=source)

        # ---- split points -------------------------------------------------------------------
        if self.split_points is None:
            split_ms = dict(ms)
            if self.split_bandwidth_quantile is not None:
                split_ms["quantile"] = float(self.split_bandwidth_quantile)
            bounds = interval_split_points(latency, interval, max_split_points=int(self.max_split_points), **split_ms)
        else:
            bounds = self._given_split_points(interval)
        merged = merge_small(bounds, latency, int(self.min_support))
        if merged.size < bounds.size:
            notes.append(f"{bounds.size - merged.size} split point(s) removed: they left fewer than "
                         f"min_support={self.min_support} requests in a sub-interval.")
        bounds = merged
        out["split_points_"] = bounds

        if self.solver in CLUSTERING_SOLVERS:
            return self._fit_clustering(out, data, interval, source, bounds, positives, why)

        # ---- encoding, bit strings, search ----------------------------------------------------
        excluded = self._excluded_columns(table, data)
        encodings, codes, skipped = _encode(data, ms, int(self.max_categories), excluded)
        out["encodings_"] = tuple(encodings)
        if not encodings:
            detail = "; ".join(f"{a}: {r}" for a, r in skipped) or "the table has no exclusive_ns/instance/attr column"
            raise EmptyDataError(f"No attribute to build conditions from ({detail}).")
        latency_class = np.searchsorted(bounds, latency, side="right")
        scored = _scored(latency, chosen.uncertain_ns, interval)
        if chosen.uncertain_ns is not None:
            notes.append(f"{int((~scored).sum()):,} request(s) between {format_duration_ns(chosen.uncertain_ns)} "
                         f"({float(self.uncertain_z):g} standard deviation(s) above the reference mode) and the "
                         "interval's start are neither clearly normal nor in the interval: the pattern scores leave "
                         "them out (uncertain_z).")
        evaluator = PatternEvaluator(codes[scored], np.array([e.n_bins for e in encodings]), latency_class[scored],
                                     bounds.size + 1)
        k = bounds.size - 1
        pairs = [(j, i) for i in range(1, k + 1) for j in range(i)]
        class_cum = np.concatenate(([0], np.cumsum(evaluator.class_sizes)))
        least = min_precision([class_cum[i + 1] - class_cum[j + 1] for j, i in pairs], evaluator.n_requests,
                              self.min_lift)
        found = self._search(evaluator, np.array([e.categorical for e in encodings]), pairs, least)
        by_pair: dict[tuple[int, int], SearchResult] = {(r.first, r.last): r for r in found}
        least_of = dict(zip(pairs, least))
        weight = (lambda r: r.n_positives / n_pos) if self.partition_objective == "weighted" else (lambda r: 1.0)
        penalty = float(self.split_penalty)
        partition = optimal_partition(bounds.size, {p: r.f_score * weight(r) - penalty for p, r in by_pair.items()})

        # each sub-interval's pattern, pruned; neighbours whose patterns are one cause become one
        categorical = np.array([e.categorical for e in encodings])

        def score(j: int, i: int, lo, hi) -> float:
            counts = evaluator.class_counts(lo[None], hi[None])[0]
            tp = int(counts[j + 1 : i + 1].sum())
            return float(admissible_f_score(tp, int(counts.sum()), int(class_cum[i + 1] - class_cum[j + 1]),
                                            least_of[(j, i)]))

        def pruned(j: int, i: int):
            r = by_pair[(j, i)]
            if r.tp == 0 or r.f_score <= 0:
                return None, None, 0.0
            lo, hi = prune(evaluator, r.lo, r.hi, j, i, tolerance=float(self.prune_tolerance),
                           least_precision=least_of[(j, i)])
            return lo, hi, score(j, i, lo, hi)

        runs: list[list] = []  # [first, last, lo, hi, exhaustive, f]
        for j, i in partition.sub_intervals:
            lo, hi, f = pruned(j, i)
            exhaustive = by_pair[(j, i)].exhaustive
            if runs and self.split_penalty > 0:
                first, _, plo, phi, pex, pf = runs[-1]
                if lo is None and plo is None:
                    runs[-1][1] = i
                    continue
                if lo is not None and plo is not None:
                    union = []
                    hull = _hull(plo, phi, lo, hi, categorical)
                    if hull is not None and _close_ranges((plo, phi), (lo, hi), hull, encodings, codes, data):
                        hlo, hhi = prune(evaluator, *hull, first, i, tolerance=float(self.prune_tolerance),
                                         least_precision=least_of[(first, i)])
                        union.append((score(first, i, hlo, hhi), hlo, hhi))
                    ulo, uhi, uf = pruned(first, i)
                    members = ((latency_class > first) & (latency_class <= j), (latency_class > j) & (latency_class <= i))
                    if ulo is not None and _one_cause((plo, phi), (lo, hi), (ulo, uhi), encodings, codes, data, members):
                        union.append((uf, ulo, uhi))
                    best = max(union, key=lambda u: u[0], default=None)
                    n_prev, n_this = class_cum[j + 1] - class_cum[first + 1], class_cum[i + 1] - class_cum[j + 1]
                    if best is not None and best[0] >= (n_prev * pf + n_this * f) / max(n_prev + n_this, 1):
                        runs[-1] = [first, i, best[1], best[2], pex and exhaustive, best[0]]
                        continue
            runs.append([j, i, lo, hi, exhaustive, f])
        if len(runs) < len(partition.sub_intervals):
            notes.append(f"{len(partition.sub_intervals) - len(runs)} pair(s) of neighbouring sub-intervals were "
                         "merged: one pattern explains their union as well as each part's, and what told the parts "
                         "apart adds little time (one cause, e.g. a delay of varying size or one band cut in halves).")
        if self.split_causes:
            runs = self._split_causes(runs, latency_class, encodings, codes, data, notes)
        subs: list[SubIntervalPattern] = []
        satisfied: list[np.ndarray] = []
        for index, (j, i, lo, hi, exhaustive, _) in enumerate(runs):
            sub, mask = self._sub_interval(index, j, i, lo, hi, exhaustive, bounds, evaluator, encodings, codes, data,
                                           float(min_precision([class_cum[i + 1] - class_cum[j + 1]],
                                                               evaluator.n_requests, self.min_lift)[0]))
            subs.append(sub)
            satisfied.append(mask)
        if self.solver == "bnb":
            unfinished = [s.index for s in subs if s.exhaustive is False]
            if unfinished:
                notes.append(
                    f"branch and bound stopped at its budget (max_nodes={self.max_nodes}, time_budget_s={self.time_budget_s}) "
                    f"for sub-interval(s) {unfinished}: their patterns are the best found, not proven optimal."
                )
        if all(s.pattern is None for s in subs):
            notes.append("No sub-interval has a pattern that explains its requests better than chance"
                         + (f" (min_lift={self.min_lift:g})" if self.min_lift is not None else "")
                         + ": the slow requests share no condition the others lack. " + _SUGGESTION)
        ranges = [(s.low_ns, s.high_ns) for s in subs]
        plain = _assign_labels(satisfied, latency, ranges)
        compound, fits = (self._compound_rules(plain, [run[2:4] for run in runs], subs, encodings, codes, data)
                          if self.compound_labels else ((), []))
        labels = _compound_labels(plain, compound, fits)
        for rule in compound:
            moved = int(((plain == rule.slower) & (labels == rule.faster)).sum())
            if moved:
                notes.append(f"{moved} request(s) satisfying the pattern of sub-interval {rule.slower} "
                             f"{subs[rule.slower].latency_words} ({subs[rule.slower].words}) also carry the cause of "
                             f"sub-interval {rule.faster} ({subs[rule.faster].words}), as large as in its own "
                             f"requests: slow for both causes, they are labelled {rule.faster} (compound_labels).")
        out["labels_"][data.rows] = labels
        out["result_"] = DegradationPatternsResult(
            found=True, solver=self.solver, n_requests=int(latency.size), interval=interval, interval_source=source,
            interval_reason=why, split_points=tuple(int(b) for b in bounds), sub_intervals=tuple(subs),
            score=float(partition.score), n_positives=n_pos, attributes=tuple(e.name for e in encodings),
            skipped_attributes=tuple(skipped), notes=tuple(notes), uncertain_ns=chosen.uncertain_ns,
            compound=tuple(compound),
        )
        return out

    # ----------------------------------------------------------------------------------------

    def _split_causes(self, runs: list[list], latency_class: np.ndarray, encodings: list, codes: np.ndarray,
                      data: _Inputs, notes: list[str]) -> list[list]:
        """Each run ``[first, last, lo, hi, exhaustive, f]`` whose pattern covers two causes, as two
        runs of the same sub-interval (see ``split_causes``)."""
        least = int(self.min_support)
        out: list[list] = []
        todo = list(reversed(runs))
        while todo:
            run = todo.pop()
            j, i, lo, hi = run[:4]
            split = None
            if lo is not None:
                members = _pattern_mask(lo, hi, codes) & (latency_class > j) & (latency_class <= i)
                if members.sum() >= 2 * least:
                    split = _cause_split(lo, hi, members, encodings, codes, data, least)
            if split is None:
                out.append(run)
                continue
            b, t, added, limit = split
            cond = encodings[b].condition(t, encodings[b].n_bins if lo[b] < 0 else hi[b])
            notes.append(f"A pattern covered two causes (its requests of latencies "
                         f"{format_duration_ns(data.latency[members].min())} to "
                         f"{format_duration_ns(data.latency[members].max())}): those with {cond.describe()} took "
                         f"{format_duration_ns(added)} more there (median), at least {_OWN_CAUSE:g} x the "
                         f"{format_duration_ns(limit / _OWN_CAUSE)} its own conditions add, so it is split in two "
                         "(split_causes).")
            slow_lo, fast_lo, slow_hi, fast_hi = lo.copy(), lo.copy(), hi.copy(), hi.copy()
            low, high = (0, encodings[b].n_bins) if lo[b] < 0 else (lo[b], hi[b])
            slow_lo[b], slow_hi[b] = t, high
            fast_lo[b], fast_hi[b] = low, t
            todo.append([j, i, fast_lo, fast_hi, run[4], run[5]])
            todo.append([j, i, slow_lo, slow_hi, run[4], run[5]])
        return out

    def _compound_rules(self, labels: np.ndarray, patterns: list, subs: list, encodings: list, codes: np.ndarray,
                        data: _Inputs) -> tuple[tuple[CompoundLabel, ...], list[np.ndarray]]:
        """The rules of ``compound_labels`` for each pair of a slower and a faster pattern (each
        a pair of code-range arrays, None: no pattern), with the requests each rule's ``fit``
        holds for; ``labels``: the plain labels (:func:`_assign_labels`)."""
        rules, fits = [], []
        for k, slower in enumerate(patterns):
            for j, faster in enumerate(patterns):
                if slower[0] is None or faster[0] is None or subs[j].high_ns > subs[k].low_ns:
                    continue
                found = _compound(faster, slower, labels == k, labels == j, (labels >= 0) & (labels != j) & (labels != k),
                                  encodings, codes, data, int(self.min_support))
                if found is not None:
                    attributes, fit, carries = found
                    rules.append(CompoundLabel(k, j, Pattern(encodings[a].condition(faster[0][a], faster[1][a])
                                                             for a in attributes), carries))
                    fits.append(fit)
        return tuple(rules), fits

    def _interval(self, latency: np.ndarray, ms: dict) -> IntervalChoice | str:
        """The interval I with how it was chosen, or why there is none (a str)."""
        if self.interval is not None:
            return IntervalChoice(parse_interval(self.interval, latency_ns=latency), "given", "given", 0)
        return choose_interval(latency, rule=self.interval_rule, tail_z=float(self.tail_z),
                               uncertain_z=None if self.uncertain_z is None else float(self.uncertain_z), **ms)

    def _excluded_columns(self, table: Any, data: _Inputs) -> dict[str, str]:
        """Columns left out of the conditions (identifiers, pass-through, asynchronous) and why."""
        excluded = dict(identifier_columns(data.frame, data.categorical, data.rows))
        if self.pass_through_share is not None:
            excluded.update(pass_through_columns(data.frame, data.continuous, data.rows, data.latency,
                                                 float(self.pass_through_share)))
        if self.exclude_async:
            asynchronous = asynchronous_operations(table)
            for name in data.continuous + data.categorical:
                key = operation_of(name)
                if key in asynchronous:
                    excluded[name] = (f"{ASYNCHRONOUS}: none of its {asynchronous[key]:,} calls is waited for by the "
                                      "request (producer/consumer or FOLLOWS_FROM), so it cannot delay it")
        return excluded

    def _search(self, evaluator: PatternEvaluator, categorical: np.ndarray, pairs: list, least: np.ndarray
                ) -> list[SearchResult]:
        if self.solver == "ga":
            settings = GASettings(
                population_size=int(self.population_size), offspring_size=int(self.offspring_size),
                generations=int(self.generations), crossover_probability=float(self.crossover_probability),
                mutation_probability=float(self.mutation_probability), tournament_size=int(self.tournament_size),
                patience=None if self.patience is None else int(self.patience),
            )
            return genetic_search(evaluator, categorical, pairs, settings=settings, random_state=self.random_state,
                                  least_precision=least)
        return branch_and_bound(evaluator, pairs, max_nodes=self.max_nodes, time_budget_s=self.time_budget_s,
                                least_precision=least)

    def _sub_interval(self, index: int, j: int, i: int, lo: np.ndarray | None, hi: np.ndarray | None,
                      exhaustive: bool, bounds: np.ndarray, evaluator: PatternEvaluator, encodings: list,
                      codes: np.ndarray, data: _Inputs, least: float) -> tuple[SubIntervalPattern, np.ndarray]:
        """Sub-interval ``[s_j, s_i)`` with its pattern (code ranges ``lo, hi``; None: none), scores and
        effects; and who satisfies the pattern."""
        low, high = int(bounds[j]), int(bounds[i])
        n_sub = int(evaluator.class_sizes[j + 1 : i + 1].sum())
        exhaustive = bool(exhaustive) if self.solver == "bnb" else None
        if lo is None:
            if n_sub == 0:
                why = "no request in this sub-interval"
            elif self.min_lift is not None:
                why = (f"no condition explains its {n_sub:,} requests better than chance (a pattern needs precision "
                       f">= {least:.2f} here, min_lift={self.min_lift:g})")
            else:
                why = "no condition holds for its requests"
            return (SubIntervalPattern(index, low, high, None, f"no pattern: {why}", 0.0, 0.0, 0.0, 0, 0, n_sub, 0,
                                       exhaustive), np.zeros(data.latency.size, dtype=bool))
        counts = evaluator.class_counts(lo[None], hi[None])[0]
        tp = int(counts[j + 1 : i + 1].sum())
        quality = pattern_quality(tp, int(counts.sum()) - tp, n_sub)
        attrs = np.flatnonzero(lo >= 0)
        pattern = Pattern(encodings[a].condition(lo[a], hi[a]) for a in attrs)
        mask = np.ones(data.latency.size, dtype=bool)
        for a in attrs:
            mask &= (codes[:, a] >= lo[a]) & (codes[:, a] < hi[a])
        effects = tuple(_effect(encodings[a].condition(lo[a], hi[a]), data, mask) for a in attrs)
        return SubIntervalPattern(
            index, low, high, pattern, pattern.describe(), quality.precision, quality.recall, quality.f_score,
            quality.tp, quality.fp, n_sub, quality.support, exhaustive, effects,
            _context(np.flatnonzero(lo < 0), encodings, codes, data, mask),
        ), mask

    # ----------------------------------------------------------------------------------------

    def _nothing(self, out: dict, data: _Inputs, reason: str, *, interval: LatencyInterval | None = None,
                 source: str | None = None) -> dict:
        out["result_"] = DegradationPatternsResult(
            found=False, solver=self.solver, n_requests=int(data.latency.size), reason=reason, interval=interval,
            interval_source=source, notes=tuple(data.notes),
            n_positives=0 if interval is None else int(interval.contains(data.latency).sum()),
        )
        return out

    def _given_split_points(self, interval: LatencyInterval) -> np.ndarray:
        points = []
        if isinstance(self.split_points, (str, bytes)):
            _fail("split_points", "a sequence of split points (ns ints or strings such as '420ms')", self.split_points)
        for p in self.split_points:
            if isinstance(p, str):
                value = parse_duration(p)
            elif isinstance(p, numbers.Integral) and not isinstance(p, bool):
                value = int(p)
            else:
                _fail("split_points", "a sequence of ints (ns) or duration strings", self.split_points)
            if not interval.low_ns < value < interval.high_ns:
                raise ParameterError(
                    f"The 'split_points' parameter of LatencyDegradationPatterns must lie strictly inside the latency "
                    f"interval {interval.describe()}. Got {p!r} ({format_duration_ns(value)}) instead."
                )
            points.append(value)
        return np.array(sorted({interval.low_ns, interval.high_ns, *points}), dtype=np.int64)

    def _fit_clustering(self, out, data, interval, source, bounds, positives, why) -> dict:
        from . import clustering  # written separately; imported on use

        X, names = _exclusive_matrix(data, positives)
        if X.shape[1] == 0:
            raise EmptyDataError("No exclusive_ns[...] column to cluster the degraded requests on.")
        n_deg = X.shape[0]
        k_range = self.k_range
        if self.solver in ("kmeans", "hierarchical"):
            feasible = range(k_range.start, min(k_range.stop, n_deg), k_range.step)
            if len(feasible) == 0:
                raise ParameterError(
                    f"The 'k_range' parameter of LatencyDegradationPatterns allows no number of clusters for the "
                    f"{n_deg} request(s) in {interval.describe()} (k must be < {n_deg}). Got {k_range!r} instead."
                )
            if feasible != k_range:
                data.notes.append(f"k_range {k_range!r} cut to {feasible!r}: only {n_deg} degraded request(s).")
            k_range = feasible
        seed = self.random_state
        if isinstance(seed, np.random.Generator):
            seed = int(seed.integers(2**31 - 1))
        labels = np.asarray(clustering.cluster_degraded(X, method=self.solver, random_state=seed, k_range=k_range))
        if labels.shape != (n_deg,):
            raise ValueError(f"cluster_degraded returned labels of shape {labels.shape}, expected ({n_deg},)")
        deg_latency = data.latency[positives]
        subs = []
        relabel = np.full(labels.shape, -1, dtype=np.int64)
        clusters = [c for c in np.unique(labels) if c >= 0]
        clusters.sort(key=lambda c: (float(np.median(deg_latency[labels == c])), int(c)))
        for index, c in enumerate(clusters):
            members = labels == c
            relabel[members] = index
            lat = deg_latency[members]
            size = int(members.sum())
            subs.append(SubIntervalPattern(
                index, int(lat.min()), int(lat.max()) + 1, None,
                f"cluster {index}: {size} degraded request(s) ({self.solver}), latency {format_duration_ns(np.median(lat))} median",
                None, None, None, None, None, size, size, None,
            ))
        all_labels = np.full(data.latency.size, -1, dtype=np.int64)
        all_labels[positives] = relabel
        out["labels_"][data.rows] = all_labels
        out["result_"] = DegradationPatternsResult(
            found=True, solver=self.solver, n_requests=int(data.latency.size), interval=interval, interval_source=source,
            interval_reason=why, split_points=tuple(int(b) for b in bounds), sub_intervals=tuple(subs), score=None,
            n_positives=int(positives.sum()), attributes=tuple(names), notes=tuple(data.notes),
        )
        return out


# ============================================================================================
# Helpers
# ============================================================================================


def choose_interval(latency_ns: np.ndarray, *, rule: str = "robust", tail_z: float = 2.0,
                    uncertain_z: float | None = None, **mean_shift: float) -> IntervalChoice | str:
    """The automatic degraded interval of :class:`LatencyDegradationPatterns`, or why there is none.

    Parameters
    ----------
    latency_ns : ndarray of int64, shape (n_requests,)
    rule : {"robust", "paper"}, default="robust"
        :func:`~.split_points.automatic_interval` or the paper's :func:`~.split_points.degraded_interval`.
    tail_z : float, default=2.0
    uncertain_z : float or None, default=None
        ``"robust"`` rule: see :func:`~.split_points.automatic_interval`.
    **mean_shift
        ``quantile`` and ``min_bin_fraction``.

    Returns
    -------
    IntervalChoice or str
        The choice with its reason, or the reason there is no degradation (with a suggestion).
    """
    latency = np.asarray(latency_ns)
    if latency.size < 2:
        return "there is a single request: no latency distribution to find a degradation in."
    if latency.min() == latency.max():
        return f"every request has the same latency ({format_duration_ns(latency[0])})."
    if rule == "robust":
        choice = automatic_interval(latency, tail_z=tail_z, uncertain_z=uncertain_z, **mean_shift)
        return choice if choice.interval is not None else f"{choice.reason} {_SUGGESTION}"
    interval, clusters = degraded_interval(latency, **mean_shift)
    main = int(np.argmax(clusters.counts))
    if interval is None:
        return (f"the most populous latency mode (around {format_duration_ns(clusters.centers[main])}) is also the "
                f"slowest of the {clusters.n_clusters} mode(s) found by mean shift: no slower mode to explain. "
                + _SUGGESTION)
    return IntervalChoice(interval, "gap", (
        f"the first density split point above the most populous latency mode (around "
        f"{format_duration_ns(clusters.centers[main])}), the paper's rule"), int(clusters.centers[main]))


def _encode(data: _Inputs, ms: dict, max_categories: int, excluded: dict[str, str] | None = None):
    """Bin codes of every usable attribute over the analysed rows (``excluded``: left out, with the reason)."""
    frame = data.frame
    rows = data.rows
    full = rows.size == frame.height
    encodings: list[AttributeEncoding] = []
    columns: list[np.ndarray] = []
    excluded = excluded or {}
    skipped: list[tuple[str, str]] = [(name, excluded[name]) for name in data.continuous + data.categorical
                                      if name in excluded]
    for name in data.continuous:
        if name in excluded:
            continue
        series = frame.get_column(name)
        if not full:
            series = series.gather(rows)
        if not series.dtype.is_numeric():
            skipped.append((name, f"not numeric ({series.dtype})"))
            continue
        present = series.is_not_null().to_numpy()
        if series.dtype.is_float():
            present &= ~series.is_nan().fill_null(False).to_numpy()
            values = series.fill_nan(0).fill_null(0).round().cast(pl.Int64).to_numpy()
        else:
            values = series.fill_null(0).cast(pl.Int64).to_numpy()
        if not present.any():
            skipped.append((name, "all values missing"))
            continue
        thresholds = attribute_thresholds(values[present], **ms)
        code = np.searchsorted(thresholds, values, side="right") - 1
        code[~present] = -1
        encodings.append(AttributeEncoding(name, "continuous", int(thresholds.size - 1), thresholds=thresholds,
                                           n_missing=int((~present).sum())))
        columns.append(code.astype(np.int32))
    for name in data.categorical:
        if name in excluded:
            continue
        series = frame.get_column(name)
        if not full:
            series = series.gather(rows)
        series = series.cast(pl.Utf8)
        present = series.is_not_null().to_numpy()
        if not present.any():
            skipped.append((name, "all values missing"))
            continue
        categories = series.drop_nulls().unique().sort()
        if categories.len() > max_categories:
            skipped.append((name, f"{categories.len()} distinct values > max_categories={max_categories}"))
            continue
        code = (series.rank("dense").cast(pl.Int64) - 1).fill_null(-1).to_numpy()
        encodings.append(AttributeEncoding(name, "categorical", int(categories.len()),
                                           categories=tuple(categories.to_list()), n_missing=int((~present).sum())))
        columns.append(code.astype(np.int32))
    codes = np.column_stack(columns) if columns else np.empty((rows.size, 0), dtype=np.int32)
    return encodings, codes, skipped


def _hull(lo1, hi1, lo2, hi2, categorical: np.ndarray):
    """The hull ``(lo, hi)`` of two patterns on the same attributes with equal categories and touching
    or overlapping ranges (a delay of 50 in one sub-interval, 60 ms in the next); else None."""
    a1 = lo1 >= 0
    if not np.array_equal(a1, lo2 >= 0):
        return None
    same_cat = np.all(~categorical[a1] | ((lo1[a1] == lo2[a1]) & (hi1[a1] == hi2[a1])))
    if not (same_cat and np.all((lo2[a1] <= hi1[a1]) & (lo1[a1] <= hi2[a1]))):
        return None
    lo, hi = lo1.copy(), hi1.copy()
    lo[a1], hi[a1] = np.minimum(lo1[a1], lo2[a1]), np.maximum(hi1[a1], hi2[a1])
    return lo, hi


def _pattern_mask(lo: np.ndarray, hi: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Requests satisfying the pattern of code ranges ``(lo, hi)``."""
    m = np.ones(codes.shape[0], dtype=bool)
    for a in np.flatnonzero(lo >= 0):
        m &= (codes[:, a] >= lo[a]) & (codes[:, a] < hi[a])
    return m


def _close_ranges(part1, part2, hull, encodings: list, codes: np.ndarray, data: _Inputs) -> bool:
    """Whether the parts' ranges of each attribute are one delay of varying size: the attribute's
    medians in the two parts' requests differ by less than a quarter of the time the hull's
    condition adds (50 vs 60 ms, not a 50 ms delay vs a 110 ms cache miss of the same operation)."""
    m1, m2, mh = (_pattern_mask(lo, hi, codes) for lo, hi in (part1, part2, hull))
    for a in np.flatnonzero((part1[0] != part2[0]) | (part1[1] != part2[1])):
        condition = encodings[a].condition(hull[0][a], hull[1][a])
        whole = _effect(condition, data, mh).added_ns
        a1 = _effect(condition, data, m1).inside_ns
        a2 = _effect(condition, data, m2).inside_ns
        if None in (whole, a1, a2) or abs(a1 - a2) >= _SAME_SIZE * abs(whole):
            return False
    return True


def _one_cause(part1, part2, union, encodings: list, codes: np.ndarray, data: _Inputs,
               members: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether two neighbouring sub-intervals are one cause, given their patterns and the best
    pattern of their union (each a pair of code-range arrays ``(lo, hi)``); ``members`` are the
    two sub-intervals' requests (boolean masks over the table's rows).

    They are when what tells the parts apart adds less time than the cause: every condition of
    either part that the other part does not share and that is on an attribute the union's
    pattern does not use is continuous, and its operation's median exclusive time differs
    between the requests of the two parts that satisfy their patterns by less than three
    quarters of the smallest time the union's cause conditions add (inside vs outside the union's
    pattern). The cause conditions are the continuous ones with a lower bound (``op >= t``: they
    select slow calls); an upper bound (``op < t``) only sets the union apart from another cause
    and adds next to no time, so it sets the limit only when the union has no lower bound.
    Comparing the parts' requests (not each part's requests with all others) lets a condition
    that both parts' requests meet, named by one part's pattern only, not count as a
    difference (a type-2 delay of two operations, one part's pattern naming each). A delay of
    50 or 60 ms, or one cause's latency band cut in halves that a chance difference of another
    operation tells apart, then joins its halves; two causes that share an operation but differ
    by another stay apart. Beyond the paper (its sum of F-scores keeps such halves apart).
    """
    ulo, uhi = union
    in_union = ulo >= 0
    limit = _cause_limit(ulo, uhi, encodings, codes, data)
    if limit is None:
        return False
    shared = (part1[0] >= 0) & (part1[0] == part2[0]) & (part1[1] == part2[1])
    inside = [_pattern_mask(lo, hi, codes) & m for (lo, hi), m in zip((part1, part2), members)]
    for lo, hi in (part1, part2):
        for a in np.flatnonzero((lo >= 0) & ~in_union & ~shared):
            if encodings[a].categorical:
                return False
            condition = encodings[a].condition(lo[a], hi[a])
            m1, m2 = (_effect(condition, data, m).inside_ns for m in inside)
            if m1 is None or m2 is None or abs(m1 - m2) >= limit:
                return False
    return True


def _cause_attributes(lo: np.ndarray, encodings: list) -> list[int]:
    """A pattern's cause conditions: the continuous ones with a lower bound (``op >= t``: they
    select slow calls). An upper bound (``op < t``) only sets the pattern apart from another
    cause and adds next to no time, so it counts only when the pattern has no lower bound."""
    continuous = [a for a in np.flatnonzero(lo >= 0) if not encodings[a].categorical]
    return [a for a in continuous if lo[a] > 0] or continuous


def _cause_limit(lo: np.ndarray, hi: np.ndarray, encodings: list, codes: np.ndarray, data: _Inputs) -> float | None:
    """Three quarters of the smallest time (ns) a pattern's cause conditions
    (:func:`_cause_attributes`) add, median exclusive time inside vs outside the pattern: the
    time below which what tells two parts apart is not a cause of its own (:func:`_one_cause`).
    None: no continuous condition."""
    mask = _pattern_mask(lo, hi, codes)
    added = [_effect(encodings[a].condition(lo[a], hi[a]), data, mask).added_ns for a in _cause_attributes(lo, encodings)]
    added = [abs(x) for x in added if x is not None]
    return _OWN_CAUSE * min(added) if added else None


def _cause_split(lo: np.ndarray, hi: np.ndarray, members: np.ndarray, encodings: list, codes: np.ndarray,
                 data: _Inputs, least: int) -> tuple[int, int, float, float] | None:
    """The condition ``op >= t`` on an operation the pattern does not name (or bounds from above
    only, ``t`` then inside its range), or inside the range of one of its cause conditions (a
    range of several bins: a delay and a slow normal mode of the same operation, told apart by a
    density minimum of its times), that splits its sub-interval's requests (``members``) into
    two groups of at least ``least`` requests, each
    a cause of its own: the groups' median exclusive times of ``op`` differ by at least three
    quarters of the smallest time the pattern's cause conditions add in either group (its median
    there minus its median outside the pattern), the rule of :func:`_one_cause` with each group
    as a part. Among such conditions, one on an operation the pattern does not name first (it
    keeps a request slow for both causes with the cause it does not share), then the most even
    split, then the largest difference.
    Returns ``(attribute, t, difference_ns, limit_ns)`` or None."""
    causes = _cause_attributes(lo, encodings)
    if not causes:
        return None
    outside = ~_pattern_mask(lo, hi, codes)
    cause_values = [_attribute_values(data, encodings[a].name) for a in causes]
    base = [np.nanmedian(v[outside]) if np.isfinite(v[outside]).any() else np.nan for v in cause_values]
    cause_values = [v[members] for v in cause_values]
    best, best_key = None, None
    n = int(members.sum())
    for b in range(lo.size):
        enc = encodings[b]
        if enc.categorical or (b in causes and lo[b] == 0):
            continue
        values = _attribute_values(data, enc.name)[members]
        code = codes[members, b]
        first, last = (1, enc.n_bins) if lo[b] < 0 else (lo[b] + 1, hi[b])
        for t in range(first, last):
            slow = code >= t
            n_slow = int(slow.sum())
            if n_slow < least or n - n_slow < least:
                continue
            a, z = values[slow], values[~slow]
            if not (np.isfinite(a).any() and np.isfinite(z).any()):
                continue
            diff = float(np.nanmedian(a) - np.nanmedian(z))
            added = [abs(np.nanmedian(v[g]) - m) for v, m in zip(cause_values, base) for g in (slow, ~slow)
                     if np.isfinite(v[g]).any()]
            added = [x for x in added if np.isfinite(x)]
            if not added:
                continue
            limit = _OWN_CAUSE * min(added)
            key = (b not in causes, min(n_slow, n - n_slow), diff)
            if limit > 0 and diff >= limit and (best_key is None or key > best_key):
                best, best_key = (int(b), t, diff, limit), key
    return best


def _compound(faster: tuple, slower: tuple, mine: np.ndarray, own: np.ndarray, elsewhere: np.ndarray,
              encodings: list, codes: np.ndarray, data: _Inputs, least: int
              ) -> tuple[list[int], np.ndarray, bool] | None:
    """Which requests fit a faster pattern though labelled with a slower one (``mine``), and
    whether they carry the faster one's cause on top of the slower one's (each pattern a pair of
    code-range arrays ``(lo, hi)``; ``own``: the requests labelled with the faster pattern;
    ``elsewhere``: those labelled with any third pattern). Returns ``(attributes, fit, carries)``
    (the fit's attributes, the requests it holds for, a bool), or None when no request of
    ``mine`` fits or no condition is left to tell.

    A request fits when it meets the faster pattern's conditions but those on the slower
    pattern's cause attributes (:func:`_cause_attributes`), which the slower cause may have moved.
    The fitting requests carry the faster cause as well when
    * the slower pattern has a cause the faster one lacks, independent of the faster cause: it
      occurs in at least ``least`` requests without the faster cause, and among the requests
      with the faster cause at most three times as often as among the others, leaving out those of
      third patterns (which may combine both causes): a cache miss, not the second operation of
      one delay;
    * each of the faster pattern's cause attributes takes as much time in them as in the faster
      pattern's own requests (medians within a quarter of the time its condition adds, the rule
      of :func:`_close_ranges`), and, where the slower pattern does not name it, at least three
      quarters of that time more than in the slower pattern's other requests (:func:`_one_cause`).
    """
    (lo, hi), (lo_k, hi_k) = faster, slower
    named = set(_cause_attributes(lo_k, encodings))
    causes = _cause_attributes(lo, encodings)
    only = lambda attributes, ranges: _pattern_mask(  # noqa: E731  conditions on these attributes only
        np.where(np.isin(np.arange(lo.size), list(attributes)), ranges[0], -1), ranges[1], codes)
    kept = sorted(set(np.flatnonzero(lo >= 0)) - named)
    if not kept:
        return None  # nothing would tell
    fit = only(kept, faster)
    both = mine & fit
    if not both.any():
        return None
    extra = named - set(causes)
    slow = only(extra, slower)[~elsewhere]
    carrying = only(set(np.flatnonzero(lo >= 0)) - extra, faster)[~elsewhere]
    lacking = ~only(causes, faster)[~elsewhere]
    carries = bool(extra and carrying.any() and int((slow & lacking).sum()) >= least
                   and slow[carrying].mean() <= 3 * slow[lacking].mean())
    pattern = _pattern_mask(lo, hi, codes)
    for a in causes if carries else ():
        condition = encodings[a].condition(lo[a], hi[a])
        added = _effect(condition, data, pattern).added_ns
        inside, others, usual = (_effect(condition, data, m).inside_ns for m in (both, mine & ~both, own & pattern))
        if None in (added, inside, usual) or abs(inside - usual) >= _SAME_SIZE * abs(added) or (
                a not in named and others is not None and inside - others < _OWN_CAUSE * abs(added)):
            carries = False
    return kept, fit, carries


def _column(data: _Inputs, attribute: str) -> pl.Series:
    """An attribute's column over the analysed requests."""
    series = data.frame.get_column(attribute)
    return series if series.len() == data.rows.size else series.gather(data.rows)


def _attribute_values(data: _Inputs, attribute: str) -> np.ndarray:
    """A continuous attribute's values over the analysed requests (float, NaN where absent)."""
    return _column(data, attribute).cast(pl.Float64).to_numpy()


def _effect(condition: Condition, data: _Inputs, inside: np.ndarray) -> ConditionEffect:
    """The condition's attribute inside vs outside the pattern (``inside``: who satisfies it)."""
    if condition.kind == "categorical":
        values = _column(data, condition.attribute).cast(pl.Utf8).to_numpy()
        has = values == condition.value
        share = lambda m: float(has[m].mean()) if m.any() else None  # noqa: E731
        return ConditionEffect(condition, inside_share=share(inside), outside_share=share(~inside))
    values = _attribute_values(data, condition.attribute)
    present = np.isfinite(values)
    med = lambda m: float(np.median(values[m & present])) if (m & present).any() else None  # noqa: E731
    a, b = med(inside), med(~inside)
    return ConditionEffect(condition, inside_ns=a, outside_ns=b, added_ns=None if a is None or b is None else a - b)


def _context(attributes: np.ndarray, encodings: list[AttributeEncoding], codes: np.ndarray, data: _Inputs,
             inside: np.ndarray, *, most: int = 3) -> tuple[ConditionEffect, ...]:
    """Operations slower and categories more frequent inside the pattern (see ``SubIntervalPattern.context``),
    among the ``attributes`` (indices into ``encodings`` and the columns of ``codes``)."""
    if inside.all() or not inside.any():
        return ()
    latency_gap = float(np.median(data.latency[inside]) - np.median(data.latency[~inside]))
    n_in, n_out = int(inside.sum()), int((~inside).sum())
    slower, frequent = [], []
    for a in attributes:
        e = encodings[a]
        if e.categorical:  # shares of every category at once, from the codes
            col = codes[:, a]
            share_in = np.bincount(col[inside & (col >= 0)], minlength=e.n_bins) / n_in
            share_out = np.bincount(col[~inside & (col >= 0)], minlength=e.n_bins) / n_out
            for c in np.flatnonzero(share_in - share_out >= 0.5):
                frequent.append((share_in[c] - share_out[c], ConditionEffect(
                    Condition.categorical(e.name, e.categories[c]), inside_share=float(share_in[c]),
                    outside_share=float(share_out[c]))))
            continue
        effect = _effect(Condition.continuous(e.name), data, inside)
        if effect.added_ns is not None and effect.added_ns >= max(1e6, 0.1 * latency_gap):
            slower.append((effect.added_ns, effect))
    pick = lambda found: [x for _, x in sorted(found, key=lambda t: -t[0])[:most]]  # noqa: E731
    return tuple(pick(slower) + pick(frequent))


def _exclusive_matrix(data: _Inputs, positives: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Exclusive times (float64 ns, 0 for an operation not called) of the requests in ``I``."""
    names, cols = [], []
    rows = data.rows[positives]
    for name in data.continuous:
        series = data.frame.get_column(name).gather(rows)
        if not series.dtype.is_numeric():
            continue
        cols.append(series.cast(pl.Float64).fill_nan(None).fill_null(0.0).to_numpy())
        names.append(name)
    X = np.column_stack(cols) if cols else np.empty((rows.size, 0))
    return X, names


def _assign_labels(satisfied: list[np.ndarray], latency: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    """Sub-interval index per request: own sub-interval's pattern first, else the first satisfied."""
    labels = np.full(latency.size, -1, dtype=np.int64)
    for index in range(len(satisfied) - 1, -1, -1):  # reverse: the first satisfied wins
        labels[satisfied[index]] = index
    for index, (low, high) in enumerate(ranges):
        own = satisfied[index] & (latency >= low) & (latency < high)
        labels[own] = index
    return labels


def _scored(latency: np.ndarray, uncertain_ns: int | None, interval: LatencyInterval) -> np.ndarray:
    """The requests the patterns' scores count: all but those in ``[uncertain_ns, interval.low_ns)``
    (``uncertain_z``)."""
    if uncertain_ns is None:
        return np.ones(latency.size, dtype=bool)
    return ~((latency >= uncertain_ns) & (latency < interval.low_ns))


def _compound_labels(plain: np.ndarray, compound: Sequence[CompoundLabel], fits: Sequence[np.ndarray]) -> np.ndarray:
    """The labels of :func:`_assign_labels` (``plain``) after the ``compound`` rules (``fits``: the
    requests each rule's ``fit`` holds for): a request labelled ``slower`` that fits exactly one
    of that sub-interval's rules takes the rule's ``faster`` label when the rule ``carries``."""
    labels = plain.copy()
    for slower in sorted({rule.slower for rule in compound}):
        group = [(rule, fit & (plain == slower)) for rule, fit in zip(compound, fits) if rule.slower == slower]
        alone = np.sum([m for _, m in group], axis=0) == 1  # two rules fit: ambiguous, kept
        for rule, m in group:
            if rule.carries:
                labels[m & alone] = rule.faster
    return labels
