"""The result objects of :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns`, and
how labels follow from them (:func:`assign_labels`, :func:`compound_labels`): what ``fit``,
``predict``, the command line, the report and the Dask path share."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
import polars as pl

from ...units import format_duration_ns
from .._notes import WithNotes
from ._model import Condition, LatencyInterval, Pattern, attribute_words
from .notes import NoDegradation, Note, Unexplained

__all__ = ["CompoundLabel", "ConditionEffect", "DegradationPatternsResult", "MAX_PATTERNS_SHOWN", "MIN_F_SHOWN",
           "RangeShown", "SubIntervalPattern", "assign_labels", "compound_labels"]

#: The default floor on a shown pattern's F-score (``min_f`` of ``LatencyDegradationPatterns``).
#: Below 0.5 a pattern misses more of its sub-interval than it explains (F is the harmonic mean of
#: precision and recall: F < 0.5 means one of them is below 1/3 at best): on the TrainTicket day
#: of 2023-01-29 (``trips/left``) ten such patterns, F 0.06-0.25, were shown as explanations of
#: one sub-interval whose requests mix causes. It is also where ``split_penalty=0.5`` lets a
#: sub-interval add to the partition.
MIN_F_SHOWN = 0.5
#: At most this many patterns of one sub-interval are shown (best F first), the rest counted: a
#: reader compares three explanations of one latency range; ten bury the one that matters.
MAX_PATTERNS_SHOWN = 3

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

    @property
    def adds_time(self) -> bool:
        """Whether the condition can be offered as a cause: a categorical condition (an instance or
        attribute value), or a continuous one with a lower bound whose operation takes more time in
        the pattern's requests than in the others (``added_ns > 0``). An upper bound alone
        (``exclusive < 154.5 ms``: the operation is fast) or a range whose requests are not slower
        there is context: it describes the requests, it does not make them slow."""
        c = self.condition
        if c.kind != "continuous":
            return True
        return c.low_ns is not None and self.added_ns is not None and self.added_ns > 0

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
                "cause": self.adds_time, "words": self.describe()}


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
        operations where the two patterns differ (which the slower cause may have moved).
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


@dataclass(frozen=True)
class RangeShown:
    """What is shown of one latency range (sub-interval) of a result: the patterns presented as
    explanations and how many are not (:meth:`DegradationPatternsResult.shown_by_range`).

    Attributes
    ----------
    low_ns, high_ns : int
        The range ``[low_ns, high_ns)``; several patterns share it when ``split_causes`` split one.
    shown : tuple of int
        Indices of the patterns shown, best F first: F at least ``min_f``, at most
        ``max_patterns_shown`` of them.
    below_floor : tuple of int
        Patterns (or "no pattern" entries) with F below ``min_f``: not an explanation.
    beyond_most : tuple of int
        Patterns above the floor not shown because ``max_patterns_shown`` better ones are.
    n_requests : int
        Requests whose latency is in the range.
    best_f : float or None
        The best F-score of the range's patterns (None: clusters, no score).
    """

    low_ns: int
    high_ns: int
    shown: tuple[int, ...]
    below_floor: tuple[int, ...]
    beyond_most: tuple[int, ...]
    n_requests: int
    best_f: float | None

    @property
    def explained(self) -> bool:
        """Whether some pattern explains the range (at least one is shown)."""
        return bool(self.shown)

    @property
    def n_hidden(self) -> int:
        return len(self.below_floor) + len(self.beyond_most)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict, with ``explained`` and ``n_hidden``."""
        return {"low_ns": self.low_ns, "high_ns": self.high_ns, "shown": list(self.shown),
                "below_floor": list(self.below_floor), "beyond_most": list(self.beyond_most),
                "n_requests": self.n_requests, "best_f": self.best_f, "explained": self.explained,
                "n_hidden": self.n_hidden}


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
class DegradationPatternsResult(WithNotes):
    """What :class:`LatencyDegradationPatterns` found.

    Attributes
    ----------
    found : bool
        False when there is no degradation to explain; ``reason`` then says why and
        ``sub_intervals`` is empty.
    reason : NoDegradation or None
        Why no degradation was found (``found`` False): a note of :mod:`.notes` (its ``kind``
        and numbers; ``str()`` the sentence, ending with what to try).
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
    skipped_attributes : tuple of (str, AttributeLeftOut)
        Columns left out, with the reason as a record (:class:`~.notes.AttributeLeftOut`: an
        identifier, pass-through, asynchronous, all values missing, too many categories...).
    notes : tuple of Note
        Anything else worth knowing (requests without latency, budget exhausted...), each a record
        of :mod:`~tracesleuth.analyses.patterns.notes` with its ``kind`` and numbers.
    uncertain_ns : int or None
        The requests in ``[uncertain_ns, interval.low_ns)`` were left out of the patterns' scores
        (``uncertain_z``): neither true nor false positives. None: every request counted.
    compound : tuple of CompoundLabel
        The rules that gave requests slow for two causes a faster sub-interval's label
        (``compound_labels``).
    min_f : float
        Patterns with a lower F-score are not presented as explanations (``min_f`` of the
        estimator; 0: every pattern, the paper). A range whose patterns all fall below it has an
        :class:`~.notes.Unexplained` note instead (:meth:`shown_by_range`, :meth:`presented`).
    max_patterns_shown : int or None
        At most this many patterns of one range are shown, the rest counted (None: all).
    """

    found: bool
    solver: str
    n_requests: int
    reason: NoDegradation | None = None
    interval: LatencyInterval | None = None
    interval_source: str | None = None
    interval_reason: str | None = None
    split_points: tuple[int, ...] = ()
    sub_intervals: tuple[SubIntervalPattern, ...] = ()
    score: float | None = None
    n_positives: int = 0
    attributes: tuple[str, ...] = ()
    skipped_attributes: tuple[tuple[str, str], ...] = ()
    notes: tuple[Note, ...] = field(default=())
    uncertain_ns: int | None = None
    compound: tuple[CompoundLabel, ...] = ()
    min_f: float = 0.0
    max_patterns_shown: int | None = None

    def shown_by_range(self) -> tuple[RangeShown, ...]:
        """The patterns presented as explanations, per latency range in latency order.

        A pattern is shown when its F-score is at least :attr:`min_f` and no more than
        :attr:`max_patterns_shown` - 1 better ones of its range are (best F first, then index).
        Clusters (no score) are always shown, up to the same count. The labels are not affected:
        a request keeps the label of the pattern it satisfies, shown or not.
        """
        groups: dict[tuple[int, int], list[SubIntervalPattern]] = {}
        for s in self.sub_intervals:
            groups.setdefault((s.low_ns, s.high_ns), []).append(s)
        most = len(self.sub_intervals) if self.max_patterns_shown is None else self.max_patterns_shown
        out = []
        for (low, high), subs in sorted(groups.items()):
            subs = sorted(subs, key=lambda s: (-(s.f_score if s.f_score is not None else -1.0), s.index))
            above = [s for s in subs if s.f_score is None or (s.pattern is not None and s.f_score >= self.min_f)]
            below = tuple(s.index for s in subs if s not in above)
            scores = [s.f_score for s in subs if s.f_score is not None]
            out.append(RangeShown(low, high, tuple(s.index for s in above[:most]), below,
                                  tuple(s.index for s in above[most:]), max(s.n_positives for s in subs),
                                  max(scores) if scores else None))
        return tuple(out)

    def presented(self) -> "DegradationPatternsResult":
        """This result with one :class:`~.notes.Unexplained` note per range no pattern explains
        (replacing any such notes: call it again after the scores change, as the Dask path does)."""
        if not self.found:
            return self
        kept = tuple(n for n in self.notes if n.kind != Unexplained.kind)
        new = tuple(Unexplained(r.low_ns, r.high_ns, r.n_requests, r.best_f or 0.0, len(r.below_floor), self.min_f)
                    for r in self.shown_by_range() if not r.explained)
        return replace(self, notes=kept + new)

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
        ranges = self.shown_by_range()
        shown = {i for r in ranges for i in r.shown}
        out = {
            "found": self.found,
            "reason": None if self.reason is None else self.reason.to_dict(),
            "solver": self.solver,
            "n_requests": self.n_requests,
            "interval": None if self.interval is None else self.interval.to_dict(),
            "interval_source": self.interval_source,
            "interval_reason": self.interval_reason,
            "split_points": list(self.split_points),
            "sub_intervals": [{**s.to_dict(), "shown": s.index in shown} for s in self.sub_intervals],
            "score": self.score,
            "n_positives": self.n_positives,
            "attributes": list(self.attributes),
            "skipped_attributes": [{"attribute": a, "reason": str(r), **r.to_dict()} for a, r in self.skipped_attributes],
            "notes": [n.to_dict() for n in self.notes],
            "uncertain_ns": self.uncertain_ns,
            "compound": [c.to_dict() for c in self.compound],
            "min_f": self.min_f,
            "max_patterns_shown": self.max_patterns_shown,
            "ranges": [r.to_dict() for r in ranges],
            "n_shown": len(shown),
            "n_hidden": sum(r.n_hidden for r in ranges),
        }
        json.dumps(out)  # a failure here is a bug, not bad input
        return out

    def scored(self, latency_ns: np.ndarray) -> np.ndarray:
        """Which of these latencies the patterns' scores count: all but those in
        ``[uncertain_ns, interval.low_ns)`` (the uncertain band), as a boolean array."""
        latency = np.asarray(latency_ns)
        if self.uncertain_ns is None or self.interval is None:
            return np.ones(latency.size, dtype=bool)
        return ~((latency >= self.uncertain_ns) & (latency < self.interval.low_ns))

    def describe(self) -> str:
        """A few lines in words."""
        if not self.found:
            return f"No degradation found, because {self.reason}"
        lines = [f"Latency interval {self.interval.describe()} ({self.n_positives} of {self.n_requests} requests):"]
        if self.interval_reason and self.interval_source == "automatic":
            lines.append(f"  chosen automatically: {self.interval_reason}")
        by_index = {s.index: s for s in self.sub_intervals}
        for r in self.shown_by_range():
            for s in (by_index[i] for i in r.shown):
                score = "" if s.f_score is None else \
                    f" (F={s.f_score:.3f}, precision={s.precision:.3f}, recall={s.recall:.3f})"
                lines.append(f"  {s.latency_words}: {s.words}{score}")
                lines.extend(f"      {'' if e.adds_time else 'context, adds no time: '}{e.describe()}"
                             for e in s.effects if e.added_ns is not None or e.inside_share is not None)
                if s.context:
                    lines.append("      its requests also: " + "; ".join(e.describe() for e in s.context))
            if r.n_hidden:
                lines.append(f"  ... {r.n_hidden} more pattern(s) of this range not shown "
                             f"({len(r.below_floor)} below F {self.min_f:g}, {len(r.beyond_most)} beyond the best "
                             f"{self.max_patterns_shown})")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def assign_labels(satisfied: list[np.ndarray], latency: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    """Sub-interval index per request: own sub-interval's pattern first, else the first satisfied."""
    labels = np.full(latency.size, -1, dtype=np.int64)
    for index in range(len(satisfied) - 1, -1, -1):  # reverse: the first satisfied wins
        labels[satisfied[index]] = index
    for index, (low, high) in enumerate(ranges):
        own = satisfied[index] & (latency >= low) & (latency < high)
        labels[own] = index
    return labels


def compound_labels(plain: np.ndarray, compound: Sequence[CompoundLabel], fits: Sequence[np.ndarray]) -> np.ndarray:
    """The labels of :func:`assign_labels` (``plain``) after the ``compound`` rules (``fits``: the
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
