"""The diagnosis's decisions, as records (the analyses' one :class:`~tracesleuth.analyses._notes.Note` base).

Each note has a stable ``kind``, the numbers behind the decision and the sentence the command line
and the report print (:meth:`~tracesleuth.analyses._notes.Note.describe`). Their ``to_dict()`` also
keeps ``text`` (the sentence, as ``words``): the key the diagnosis's JSON gave before its notes were
records.

========================= ============================================================
kind                      decision
========================= ============================================================
``onset``                 :class:`OnsetFound` - when the problem began, and in which series
``problem``               :class:`ProblemPeriod` - the period diagnosed
``baseline``              :class:`BaselinePeriod` - the period it is compared with
``small_baseline``        :class:`SmallBaseline` - a baseline short of requests (a caveat)
``common_slowdown``       :class:`CommonSlowdown` - every time rose together; tested beyond it
``no_logs``               :class:`NoLogRecords` - no log evidence (a caveat)
``verdict``               :class:`Verdict` - why someone is named, nobody is sure, or it is too thin
========================= ============================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .._notes import Note
from .telemetry import period_words, utc_text

__all__ = ["BaselinePeriod", "ClockSkew", "CommonSlowdown", "DiagnosisNote", "NoLogRecords", "OnsetFound",
           "ProblemPeriod", "SmallBaseline", "Verdict"]


@dataclass(frozen=True)
class DiagnosisNote(Note):
    """Base of the diagnosis's notes: :meth:`to_dict` adds ``text`` (the sentence) beside ``words``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: ``kind``, the fields, ``words`` and ``text`` (both the sentence)."""
        out = super().to_dict()
        out["text"] = out["words"]
        return out


@dataclass(frozen=True)
class OnsetFound(DiagnosisNote):
    """The onset: the latest change for the worse of a request series before the moment given
    (Pettitt's test, :mod:`.changepoints`).

    Attributes
    ----------
    time_ns : int
        Unix epoch ns.
    series : str
        The series that changed (e.g. ``"latency"``).
    p_value : float
    level : float
        The level the series was held to (:class:`~.timeline.Onset`).
    significant : bool
        False: no series changed significantly with all the series counted; this is the clearest
        change of one series (a weak onset: the verdict is at most uncertain).
    break_ns : (int, int) or None
        The break in the traffic between the onset and the moment (:attr:`~.timeline.Onset.break_ns`):
        the incident was under way when the traffic resumed, since when the store cannot tell.
    """

    kind: ClassVar[str] = "onset"
    time_ns: int
    series: str
    p_value: float
    level: float
    significant: bool = True
    break_ns: tuple[int, int] | None = None

    def describe(self) -> str:
        if not self.significant:
            text = (f"Onset uncertain: no series changed significantly once all those tested are counted; the "
                    f"clearest change is of the {self.series}, at {utc_text(self.time_ns)} (Pettitt p = "
                    f"{self.p_value:.2g}, significant at {self.level:g} only by itself). Give --time if you know "
                    "when it began.")
        else:
            text = f"Onset {utc_text(self.time_ns)}: the {self.series} changed (Pettitt p = {self.p_value:.2g})."
        if self.break_ns is not None:
            text += (f" The traffic broke off from {utc_text(self.break_ns[0])} to {utc_text(self.break_ns[1])} and "
                     "no series changed from then to the moment: the incident was already under way when it "
                     "resumed; whether it began at the onset or in the break, the store cannot tell.")
        return text


@dataclass(frozen=True)
class _Period(DiagnosisNote):
    """A period the diagnosis chose and why (the fields of :class:`ProblemPeriod` and
    :class:`BaselinePeriod`).

    Attributes
    ----------
    start_ns, end_ns : int
        Unix epoch ns.
    n_requests : int
    how : str
        A key of :data:`~.telemetry.PERIOD_CHOICES`.
    n_stretches, n_skipped : int
        A clean baseline's stretches of traffic and the earlier incidents it left out.
    """

    start_ns: int
    end_ns: int
    n_requests: int
    how: str
    n_stretches: int = 0
    n_skipped: int = 0

    @property
    def why(self) -> str:
        """How it was chosen, in words."""
        return period_words(self.how, self.n_requests, self.n_stretches, self.n_skipped)


@dataclass(frozen=True)
class ProblemPeriod(_Period):
    """The problem period diagnosed and how it was chosen (``why``: from the onset, its last part up to the
    moment given, or as given)."""

    kind: ClassVar[str] = "problem"

    def describe(self) -> str:
        return (f"Problem period {utc_text(self.start_ns)} to {utc_text(self.end_ns)}: {self.n_requests} requests "
                f"({self.why}).")


@dataclass(frozen=True)
class BaselinePeriod(_Period):
    """The baseline the problem period is compared with and how it was chosen (``why``)."""

    kind: ClassVar[str] = "baseline"

    def describe(self) -> str:
        return f"Baseline {utc_text(self.start_ns)} to {utc_text(self.end_ns)}: {self.why}."


@dataclass(frozen=True)
class SmallBaseline(DiagnosisNote):
    """A caveat: the baseline search found fewer requests than ``min_baseline_requests`` and kept
    the best available.

    Attributes
    ----------
    n_requests : int
        Requests in the baseline.
    wanted : int
        ``min_baseline_requests``.
    """

    kind: ClassVar[str] = "small_baseline"
    n_requests: int
    wanted: int

    def describe(self) -> str:
        return (f"Caveat: the baseline holds {self.n_requests} requests, fewer than the {self.wanted} wanted: the "
                "best available.")


@dataclass(frozen=True)
class CommonSlowdown(DiagnosisNote):
    """The times of the problem period rose together (a busier host, more load), so each time item
    was tested for a rise beyond it (:func:`~.evidence.common_slowdown`).

    Attributes
    ----------
    slowdown : float
        The common slowdown, > 0 (0.2: 20% slower).
    """

    kind: ClassVar[str] = "common_slowdown"
    slowdown: float

    def describe(self) -> str:
        return (f"Every service's times rose together by about {self.slowdown:.0%} (the median operation and "
                "edge): a time counts as evidence only where it rose beyond that.")


@dataclass(frozen=True)
class ClockSkew(DiagnosisNote):
    """A caveat: spans recorded on a clock off from their caller's (found outside the call that
    made them) were put back inside it before the times were read
    (:func:`~tracesleuth.model.assembly.skew_corrected_times`: centred in the call, as Jaeger's and
    Zipkin's clock-skew adjusters do), so the gaps on their edges are estimates.

    Attributes
    ----------
    shifted : int
        Spans of the problem and baseline periods whose times were shifted (a span found outside its
        caller's call, and the spans below it on its host, which move with it).
    spans : int
        Spans of the two periods.
    max_abs_ns : int
        The largest shift, in ns.
    """

    kind: ClassVar[str] = "clock_skew"
    shifted: int
    spans: int
    max_abs_ns: int

    def describe(self) -> str:
        return (f"Clock skew: {self.shifted} of {self.spans} spans lay outside the call that made them (a clock up to "
                f"{self.max_abs_ns / 1e6:.3g} ms off) and were put back inside it, centred: the gaps on their edges "
                "are estimates.")


@dataclass(frozen=True)
class NoLogRecords(DiagnosisNote):
    """A caveat: no log evidence was weighed, because the store holds no log records, or (``period``
    given) that period holds none while the store has some: the collection of records stopped or
    had not begun (every service falling silent at once is not a change of theirs)."""

    kind: ClassVar[str] = "no_logs"
    period: str | None = None

    def describe(self) -> str:
        if self.period is None:
            return "Log evidence: none recorded (the store holds no log records)."
        return (f"Log evidence: none weighed (the {self.period} period holds no log record while the store has "
                "some: their collection stopped or had not begun).")


@dataclass(frozen=True)
class Verdict(DiagnosisNote):
    """Why the verdict is what it is.

    ``"too thin"``: the problem period holds fewer than ``min_requests`` requests, or (``service``
    None) no service shows a change; ``"named"``: the first suspect's ``confidence`` reaches
    ``min_confidence`` and the onset is significant; ``"uncertain"``: it does not, or the onset is
    weak (``weak_onset``: the periods compared rest on a change that is not significant).

    Attributes
    ----------
    verdict : {"named", "uncertain", "too thin"}
    n_requests : int
        Requests in the problem period.
    min_requests : int
    service : str or None
        The first suspect.
    confidence : float or None
        Its confidence.
    min_confidence : float
    weak_onset : bool
        The onset is not significant (:class:`OnsetFound`).
    """

    kind: ClassVar[str] = "verdict"
    verdict: str
    n_requests: int
    min_requests: int
    service: str | None = None
    confidence: float | None = None
    min_confidence: float = 0.5
    weak_onset: bool = False

    def describe(self) -> str:
        if self.n_requests < self.min_requests:
            return f"the problem period holds {self.n_requests} requests, fewer than {self.min_requests}"
        if self.service is None:
            return "no service shows a change between the baseline and the problem period"
        if self.verdict == "named":
            return f"{self.service} has confidence {self.confidence:.2f} (>= {self.min_confidence:g})"
        if self.weak_onset:
            return (f"the most suspicious, {self.service}, has confidence {self.confidence:.2f}, but the onset is "
                    "not significant: the periods compared may not be the incident's")
        return (f"the most suspicious, {self.service}, has confidence {self.confidence:.2f} "
                f"(< {self.min_confidence:g})")
