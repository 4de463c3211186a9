"""What a patterns fit has to say beside its patterns, as records.

Each note is a small frozen record on the analyses' one base, :class:`~tracesleuth.analyses._notes.Note`
(re-exported here): a ``kind`` (a stable identifier tests and programs match on), the numbers
behind it, and :meth:`~Note.describe` (the sentence the command line and the report print).
``str(note)`` is its sentence, so a renderer that prints notes needs nothing else; ``to_dict()``
gives the kind, the numbers and the sentence (``"words"``), JSON-safe.

A program asks ``result.notes_of("causes_split")``, never for a substring of the prose. The reasons
an attribute is left out of the conditions (``skipped_attributes``) are records on the same base
(:class:`AttributeLeftOut`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...units import format_duration_ns
from .._notes import Note
from ._model import LatencyInterval

__all__ = ["AllMissing", "AsynchronousLeftOut", "AttributeLeftOut", "BudgetExhausted", "CausesSplit", "CompoundMoved",
           "IdentifierLeftOut", "IntervalBelowMedian", "IntervalEmpty", "IntervalHoldsEvery", "KRangeCut",
           "MissingLatency", "NeighboursMerged", "NoDegradation", "NoPatternBetterThanChance", "NoSlowerMode",
           "NoSpread", "NothingSlower", "NotNumeric", "Note", "PassThroughLeftOut", "PredictColumns", "SameLatency",
           "SampleScored", "SingleRequest", "SplitPointsRemoved", "TailOfChance", "TooFewInInterval",
           "TooManyCategories", "UncertainLeftOut", "Unexplained", "reference_mode_words"]

#: What to try when a latency interval explains nothing (shared by the notes and the reasons).
SUGGESTION = ("Give the degraded interval (--interval A:B, e.g. the latencies you consider slow) or another "
              "endpoint (--endpoint).")


@dataclass(frozen=True)
class MissingLatency(Note):
    """Requests without a latency, left out of the analysis (label -1)."""

    kind: ClassVar[str] = "missing_latency"
    n_requests: int
    column: str = "latency_ns"

    def describe(self) -> str:
        return f"{self.n_requests} request(s) without {self.column} were left out (label -1)."


@dataclass(frozen=True)
class IntervalBelowMedian(Note):
    """The automatic interval starts at or below the median latency: perhaps the slow mode is normal."""

    kind: ClassVar[str] = "interval_below_median"
    low_ns: int
    median_ns: int
    share: float

    def describe(self) -> str:
        return (f"The degraded interval starts at {format_duration_ns(self.low_ns)}, at or below the median latency "
                f"({format_duration_ns(self.median_ns)}): {self.share:.0%} of the requests are slower than the "
                "reference mode's spread. If the slow mode is the normal behaviour, give the interval "
                "(--interval A:B).")


@dataclass(frozen=True)
class SplitPointsRemoved(Note):
    """Split points merged away: they left fewer than ``min_support`` requests in a sub-interval."""

    kind: ClassVar[str] = "split_points_removed"
    n_removed: int
    min_support: int

    def describe(self) -> str:
        return (f"{self.n_removed} split point(s) removed: they left fewer than min_support={self.min_support} "
                "requests in a sub-interval.")


@dataclass(frozen=True)
class UncertainLeftOut(Note):
    """Requests between the normal spread and the interval, left out of the pattern scores."""

    kind: ClassVar[str] = "uncertain_left_out"
    n_requests: int
    uncertain_ns: int
    low_ns: int
    uncertain_z: float

    def describe(self) -> str:
        return (f"{self.n_requests:,} request(s) between {format_duration_ns(self.uncertain_ns)} "
                f"({self.uncertain_z:g} standard deviation(s) above the reference mode) and the interval's start, "
                f"{format_duration_ns(self.low_ns)}, are neither clearly normal nor in the interval: the pattern "
                "scores leave them out (uncertain_z).")


@dataclass(frozen=True)
class NeighboursMerged(Note):
    """Neighbouring sub-intervals merged: one pattern explains their union as well as the parts'."""

    kind: ClassVar[str] = "neighbours_merged"
    n_pairs: int

    def describe(self) -> str:
        return (f"{self.n_pairs} pair(s) of neighbouring sub-intervals were merged: one pattern explains their union "
                "as well as each part's, and what told the parts apart adds little time (one cause, e.g. a delay "
                "of varying size or one band cut in halves).")


@dataclass(frozen=True)
class CausesSplit(Note):
    """A sub-interval's pattern covered two causes and was split on ``condition``."""

    kind: ClassVar[str] = "causes_split"
    fastest_ns: int
    slowest_ns: int
    condition: str
    added_ns: float
    limit_ns: float
    own_cause: float

    def describe(self) -> str:
        return (f"A pattern covered two causes (its requests of latencies {format_duration_ns(self.fastest_ns)} to "
                f"{format_duration_ns(self.slowest_ns)}): those with {self.condition} took "
                f"{format_duration_ns(self.added_ns)} more there (median), at least {self.own_cause:g} x the "
                f"{format_duration_ns(self.limit_ns / self.own_cause)} its own conditions add, so it is split in two "
                "(split_causes).")


@dataclass(frozen=True)
class BudgetExhausted(Note):
    """Branch and bound stopped at its budget for some sub-intervals."""

    kind: ClassVar[str] = "budget_exhausted"
    sub_intervals: tuple[int, ...]
    max_nodes: int | None
    time_budget_s: float | None

    def describe(self) -> str:
        return (f"branch and bound stopped at its budget (max_nodes={self.max_nodes}, "
                f"time_budget_s={self.time_budget_s}) for sub-interval(s) {list(self.sub_intervals)}: their "
                "patterns are the best found, not proven optimal.")


@dataclass(frozen=True)
class NoPatternBetterThanChance(Note):
    """No sub-interval has a pattern (the slow requests share no condition the others lack)."""

    kind: ClassVar[str] = "no_pattern"
    min_lift: float | None

    def describe(self) -> str:
        lift = f" (min_lift={self.min_lift:g})" if self.min_lift is not None else ""
        return ("No sub-interval has a pattern that explains its requests better than chance" + lift
                + ": the slow requests share no condition the others lack. " + SUGGESTION)


@dataclass(frozen=True)
class CompoundMoved(Note):
    """Requests slow for two causes given a faster sub-interval's label (``compound_labels``)."""

    kind: ClassVar[str] = "compound_moved"
    n_requests: int
    slower: int
    faster: int
    slower_range: str
    slower_words: str
    faster_words: str

    def describe(self) -> str:
        return (f"{self.n_requests} request(s) satisfying the pattern of sub-interval {self.slower} "
                f"{self.slower_range} ({self.slower_words}) also carry the cause of sub-interval {self.faster} "
                f"({self.faster_words}), as large as in its own requests: slow for both causes, they are labelled "
                f"{self.faster} (compound_labels).")


@dataclass(frozen=True)
class KRangeCut(Note):
    """A clustering's ``k_range`` cut to the numbers of clusters the degraded requests allow."""

    kind: ClassVar[str] = "k_range_cut"
    given: str
    used: str
    n_degraded: int

    def describe(self) -> str:
        return f"k_range {self.given} cut to {self.used}: only {self.n_degraded} degraded request(s)."


@dataclass(frozen=True)
class PredictColumns(Note):
    """``predict`` on a table whose columns differ from the fit's."""

    kind: ClassVar[str] = "predict_columns"
    missing: tuple[str, ...]
    unknown: tuple[str, ...]

    def describe(self) -> str:
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} column(s) the patterns use are missing from the table and count as "
                         f"0 exclusive time (an instance or attribute: no value): {', '.join(self.missing[:8])}"
                         + (" ..." if len(self.missing) > 8 else ""))
        if self.unknown:
            parts.append(f"{len(self.unknown)} column(s) unknown to the fit are ignored: "
                         f"{', '.join(self.unknown[:8])}" + (" ..." if len(self.unknown) > 8 else ""))
        return "; ".join(parts) + "."


@dataclass(frozen=True)
class SampleScored(Note):
    """Patterns found on a uniform sample, scored on every request (the Dask path)."""

    kind: ClassVar[str] = "sample_scored"
    sample: int
    n_requests: int
    random_state: int | None
    epsilon: float
    confidence: float
    sub_intervals: tuple[int, ...]
    f_sample: tuple[float, ...]
    f_all: tuple[float, ...]

    def describe(self) -> str:
        scores = ", ".join(f"#{i} {a:.3f} -> {b:.3f}" for i, a, b in zip(self.sub_intervals, self.f_sample, self.f_all))
        return (f"found on a uniform sample of {self.sample:,} of the {self.n_requests:,} requests (seed "
                f"{self.random_state}); precision, recall and F-score counted on every request (F on the sample -> "
                f"on every request: {scores or 'no pattern'}); latency shares of the sample within "
                f"{self.epsilon:.4f} of the table's at {self.confidence:.0%} confidence")


@dataclass(frozen=True)
class Unexplained(Note):
    """No pattern explains a sub-interval: its best F-score is below ``min_f``. Its requests are
    slow for several causes at once (or for one the columns do not show); a pattern of F < 0.5
    misses more than it explains, so none is offered as the explanation."""

    kind: ClassVar[str] = "unexplained"
    low_ns: int
    high_ns: int
    n_requests: int
    best_f: float
    n_patterns: int
    min_f: float

    def describe(self) -> str:
        return (f"No pattern explains the {self.n_requests:,} request(s) of "
                f"{LatencyInterval(self.low_ns, self.high_ns).describe()}: best F {self.best_f:.2f} (of {self.n_patterns} pattern(s), "
                f"below min_f={self.min_f:g}); its requests mix causes. Look at a narrower period (--time START/END) "
                "or compare a slow period with a normal one (tracesleuth compare).")


# --- why there is no degradation to explain (``result.reason``) ------------------------------------


@dataclass(frozen=True)
class NoDegradation(Note):
    """Base of the reasons a fit found no degradation to explain (``result.reason``, with
    ``found`` False): each records the numbers of its case and ends with what to try."""

    kind: ClassVar[str] = "no_degradation"


@dataclass(frozen=True)
class SingleRequest(NoDegradation):
    """One request: there is no latency distribution."""

    kind: ClassVar[str] = "single_request"
    n_requests: int

    def describe(self) -> str:
        return ("there is a single request: no latency distribution to find a degradation in." if self.n_requests
                else "there is no request: no latency distribution to find a degradation in.")


@dataclass(frozen=True)
class SameLatency(NoDegradation):
    """Every request has the same latency: nothing is slower than anything else."""

    kind: ClassVar[str] = "same_latency"
    n_requests: int
    latency_ns: int

    def describe(self) -> str:
        return f"every request has the same latency ({format_duration_ns(self.latency_ns)})."


@dataclass(frozen=True)
class NoSlowerMode(NoDegradation):
    """The paper's interval rule: the most populous latency mode is also the slowest one found."""

    kind: ClassVar[str] = "no_slower_mode"
    mode_ns: int
    n_modes: int

    def describe(self) -> str:
        return (f"the most populous latency mode (around {format_duration_ns(self.mode_ns)}) is also the slowest of "
                f"the {self.n_modes} mode(s) found by mean shift: no slower mode to explain. {SUGGESTION}")


def reference_mode_words(mode_ns: int, n_in_mode: int, n_requests: int, min_mode_share: float | None,
                         spread: float) -> str:
    """The robust interval rule's reference latency mode in words (the start of its reasons):
    its centre ``mode_ns``, its ``n_in_mode`` of ``n_requests`` requests, ``min_mode_share`` when
    a faster mode was passed over (None: it is the fastest mode), its ``spread`` as a factor per
    standard deviation (``exp(sigma)`` on a log scale)."""
    return (f"the reference latency mode is around {format_duration_ns(mode_ns)} ({n_in_mode:,} of {n_requests:,} "
            "requests" + (f", the fastest with at least {min_mode_share:.0%} of the largest mode's requests"
                          if min_mode_share is not None else "")
            + f"; spread from its faster half: x{spread:.2f} per standard deviation)")


@dataclass(frozen=True)
class NoSpread(NoDegradation):
    """The robust rule: every request is in one latency mode whose spread cannot be measured."""

    kind: ClassVar[str] = "no_spread"
    mode_ns: int

    def describe(self) -> str:
        return (f"every request is in one latency mode around {format_duration_ns(self.mode_ns)} with no spread to "
                f"measure. {SUGGESTION}")


@dataclass(frozen=True)
class _AgainstReferenceMode(NoDegradation):
    """A reason of the robust rule measured against its reference mode (its fields first, as
    :func:`reference_mode_words` takes them)."""

    mode_ns: int
    n_in_mode: int
    n_requests: int
    min_mode_share: float | None
    spread: float

    def mode_words(self) -> str:
        return reference_mode_words(self.mode_ns, self.n_in_mode, self.n_requests, self.min_mode_share, self.spread)


@dataclass(frozen=True)
class NothingSlower(_AgainstReferenceMode):
    """The robust rule: no request is as slow as the interval's start (the reference mode's tail
    cut or the density gap above it)."""

    kind: ClassVar[str] = "nothing_slower"
    low_ns: int

    def describe(self) -> str:
        return f"{self.mode_words()}; no request is slower than {format_duration_ns(self.low_ns)}. {SUGGESTION}"


@dataclass(frozen=True)
class TailOfChance(_AgainstReferenceMode):
    """The robust rule: the requests slower than the reference mode's tail cut are no more than
    the mode leaves there by chance, by both tests of
    :func:`~.split_points.automatic_interval` (``min_excess`` times a symmetric mode's tail share;
    ``min_tail_ratio`` times, and ``min_tail_z`` Poisson standard deviations above, the mode's own
    mirrored fast tail). ``significance`` is None when the ratio test already failed."""

    kind: ClassVar[str] = "tail_of_chance"
    cut_ns: int
    n_above: int
    min_excess: float
    expected_share: float
    n_mirror: int
    min_tail_ratio: float
    significance: float | None
    min_tail_z: float

    def describe(self) -> str:
        test = (f"under {self.min_tail_ratio:g} x the mode's own mirrored tail" if self.significance is None else
                f"a difference of {self.significance:.1f} standard deviations, under {self.min_tail_z:g}")
        return (f"{self.mode_words()}; {self.n_above:,} request(s) ({self.n_above / self.n_requests:.1%}) are "
                f"slower than its tail cut {format_duration_ns(self.cut_ns)}, no more than {self.min_excess:g} x the "
                f"{self.expected_share:.1%} a symmetric mode leaves there, and against {self.n_mirror:,} as far below "
                f"its centre: {test}: a tail of chance, not a degradation. {SUGGESTION}")


@dataclass(frozen=True)
class IntervalEmpty(NoDegradation):
    """The latency interval (given, or chosen) holds no request."""

    kind: ClassVar[str] = "interval_empty"
    low_ns: int
    high_ns: int
    n_requests: int
    min_latency_ns: int
    max_latency_ns: int

    def describe(self) -> str:
        return (f"the latency interval {LatencyInterval(self.low_ns, self.high_ns).describe()} holds no request of the "
                f"{self.n_requests:,} (latencies span [{format_duration_ns(self.min_latency_ns)}, "
                f"{format_duration_ns(self.max_latency_ns)}]). {SUGGESTION}")


@dataclass(frozen=True)
class IntervalHoldsEvery(NoDegradation):
    """The latency interval holds every request: no faster request to contrast with."""

    kind: ClassVar[str] = "interval_holds_every_request"
    low_ns: int
    high_ns: int
    n_requests: int

    def describe(self) -> str:
        return (f"every request ({self.n_requests:,}) lies in the latency interval {LatencyInterval(self.low_ns, self.high_ns).describe()}: "
                "no faster request to contrast with. Give an interval above the normal latencies (--interval A:B).")


@dataclass(frozen=True)
class TooFewInInterval(NoDegradation):
    """The latency interval holds fewer than ``min_support`` requests: too few to tell a pattern
    from chance."""

    kind: ClassVar[str] = "too_few_in_interval"
    low_ns: int
    high_ns: int
    n_in_interval: int
    min_support: int

    def describe(self) -> str:
        return (f"the latency interval {LatencyInterval(self.low_ns, self.high_ns).describe()} holds {self.n_in_interval} request(s), "
                f"fewer than min_support={self.min_support}: too few to tell a pattern from chance. {SUGGESTION}")


# --- why an attribute is left out of the conditions (the reasons of ``skipped_attributes``) ----------


@dataclass(frozen=True)
class AttributeLeftOut(Note):
    """Base of the reasons an attribute is left out of the conditions: :meth:`short` is the reason
    in a word or two (what the command line lists), :meth:`describe` the whole of it."""

    def short(self) -> str:
        """The reason in a word or two."""
        return self.describe()


@dataclass(frozen=True)
class IdentifierLeftOut(AttributeLeftOut):
    """An ``attr[KEY]`` column that identifies (a port, an id, a UUID; or, with the counts, more
    than half of its values distinct): a condition on it names requests, not a cause."""

    kind: ClassVar[str] = "identifier"
    n_distinct: int | None = None
    n_requests: int | None = None

    def short(self) -> str:
        return "identifier"

    def describe(self) -> str:
        if self.n_distinct is None:
            return "identifier"
        return f"identifier: {self.n_distinct:,} distinct values in {self.n_requests:,} requests"


@dataclass(frozen=True)
class PassThroughLeftOut(AttributeLeftOut):
    """An ``exclusive_ns[K]`` column whose exclusive time is (a median ``share`` of) the request
    latency: a condition on it restates the latency (``pass_through_share``)."""

    kind: ClassVar[str] = "pass_through"
    share: float

    def short(self) -> str:
        return "pass-through"

    def describe(self) -> str:
        return (f"pass-through: its exclusive time is {self.share:.0%} of the request latency (median), so a "
                "condition on it restates the latency")


@dataclass(frozen=True)
class AsynchronousLeftOut(AttributeLeftOut):
    """A column of an operation none of whose ``n_calls`` calls the request waits for (below a
    producer/consumer or ``FOLLOWS_FROM`` link): it cannot delay the request (``exclude_async``)."""

    kind: ClassVar[str] = "asynchronous"
    n_calls: int

    def short(self) -> str:
        return "asynchronous"

    def describe(self) -> str:
        return (f"asynchronous: none of its {self.n_calls:,} calls is waited for by the request (producer/consumer "
                "or FOLLOWS_FROM), so it cannot delay it")


@dataclass(frozen=True)
class NotNumeric(AttributeLeftOut):
    """An ``exclusive_ns[K]`` column that is not numeric (``dtype``): it cannot be binned."""

    kind: ClassVar[str] = "not_numeric"
    dtype: str

    def describe(self) -> str:
        return f"not numeric ({self.dtype})"


@dataclass(frozen=True)
class AllMissing(AttributeLeftOut):
    """A column with no value in any request analysed."""

    kind: ClassVar[str] = "all_missing"

    def describe(self) -> str:
        return "all values missing"


@dataclass(frozen=True)
class TooManyCategories(AttributeLeftOut):
    """A categorical column with more distinct values than ``max_categories``."""

    kind: ClassVar[str] = "too_many_categories"
    n_categories: int
    max_categories: int

    def describe(self) -> str:
        return f"{self.n_categories} distinct values > max_categories={self.max_categories}"
