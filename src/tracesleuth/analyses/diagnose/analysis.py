"""The diagnosis: which service, which operation or log statement, which instance, since when, and
how sure (issue 28).

Stages of :meth:`Diagnosis.fit`:

1. **telemetry** - spans and log records as rows with own time, gaps, error origins
   (:mod:`.telemetry`);
2. **timeline** - the onset (the latest change of the request series before ``at``), the problem
   period and a clean baseline (:mod:`.timeline`);
3. **evidence** - per service, every family's change between the periods (:mod:`.evidence`);
4. **ranking** - one conditional-logit probability per service, "nobody" included
   (:mod:`.ranking`);
5. **answer** - the suspects with their operations, instances and evidence, and the verdict:
   ``"named"`` (the first suspect's confidence is at least ``min_confidence``), ``"uncertain"``
   (someone has evidence, nobody is sure) or ``"too thin"`` (too few requests, or no evidence).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import ParameterError
from .._contract import NONE, Analysis, InstanceOf, Interval, Seed
from .._notes import WithNotes
from .evidence import (FAMILIES, common_slowdown, gather_evidence, rate_p_values, shift_p_value,
                       time_samples)
from .notes import BaselinePeriod, ClockSkew, CommonSlowdown, NoLogRecords, OnsetFound, ProblemPeriod, Verdict
from .ranking import load_model
from .telemetry import Period, Telemetry
from .timeline import Onset, find_timeline

__all__ = ["Diagnosis", "DiagnosisResult", "Suspect"]

#: Fewest requests in the problem period for a diagnosis to name anyone.
MIN_PROBLEM_REQUESTS = 20


@dataclass(frozen=True)
class Suspect:
    """One service and why it is suspected.

    Attributes
    ----------
    service : str
    confidence : float
        Probability that it is the culprit (the ranking model's, calibrated on the evaluation).
    operations : tuple of str
        What changed in it, strongest first (operations, edges, log templates).
    instances : tuple of str
        Its instances whose own time rose (Mi et al. 2012, Algorithm 2's question), strongest
        first; all its instances when none stands out.
    evidence : tuple of Evidence
        Its evidence, strongest first.
    """

    service: str
    confidence: float
    operations: tuple
    instances: tuple
    evidence: tuple

    def to_dict(self) -> dict:
        return {"service": self.service, "confidence": self.confidence, "operations": list(self.operations),
                "instances": list(self.instances), "evidence": [e.to_dict() for e in self.evidence]}


@dataclass(frozen=True)
class DiagnosisResult(WithNotes):
    """What a :class:`Diagnosis` found.

    Attributes
    ----------
    verdict : {"named", "uncertain", "too thin"}
    services : tuple of Suspect
        Every service with evidence, most suspicious first.
    nobody : float
        The probability that the evidence names nobody.
    onset : Onset or None
        None when the problem period was given.
    problem, baseline : Period
    notes : tuple of Note
        The decisions (:mod:`.notes`): the onset, the periods, the caveats and the verdict's reason.
    """

    verdict: str
    services: tuple
    nobody: float
    onset: Onset | None
    problem: Period
    baseline: Period
    notes: tuple

    @property
    def reason(self) -> str:
        """Why the verdict is what it is: the sentence of its note (:class:`~.notes.Verdict`)."""
        return next((str(n) for n in self.notes if n.kind == "verdict"), "")

    def to_frame(self) -> pl.DataFrame:
        """One row per suspect: ``rank``, ``service``, ``confidence``, ``operations``, ``instances``,
        ``evidence`` (the families, strongest first)."""
        return pl.DataFrame(
            {"rank": list(range(1, len(self.services) + 1)), "service": [s.service for s in self.services],
             "confidence": [s.confidence for s in self.services],
             "operations": [", ".join(s.operations) for s in self.services],
             "instances": [", ".join(s.instances) for s in self.services],
             "evidence": [", ".join(e.family for e in s.evidence) for s in self.services]},
            schema={"rank": pl.Int64, "service": pl.String, "confidence": pl.Float64, "operations": pl.String,
                    "instances": pl.String, "evidence": pl.String})

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "services": [s.to_dict() for s in self.services], "nobody": self.nobody,
                "onset": None if self.onset is None else self.onset.to_dict(), "problem": self.problem.to_dict(),
                "baseline": self.baseline.to_dict(), "notes": [n.to_dict() for n in self.notes]}

    def describe(self) -> str:
        """The answer first: who, what, where, since when, how sure; then the periods and caveats."""
        lines = []
        if self.verdict == "named":
            top = self.services[0]
            lines.append(f"{top.service} (confidence {top.confidence:.2f})"
                         + (f": {', '.join(top.operations[:3])}" if top.operations else "")
                         + (f"; instances {', '.join(top.instances[:3])}" if top.instances else ""))
            lines += [f"  {e.describe()}" for e in top.evidence[:4]]
        elif self.verdict == "uncertain":
            names = ", ".join(f"{s.service} ({s.confidence:.2f})" for s in self.services[:3])
            lines.append(f"Uncertain, nobody is named: {self.reason}. Suspects: {names}.")
        else:
            lines.append(f"Too thin to name anyone: {self.reason}")
        lines += [str(n) for n in self.notes if n.kind != "verdict"]
        return "\n".join(lines)


class Diagnosis(Analysis):
    """Which service, operation, instance, since when and how sure, from a store's spans and logs.

    Parameters
    ----------
    at : int or None, default=None
        A moment inside the incident (Unix epoch ns); the onset is searched before it. None (and no
        ``time``): the store's last request.
    time : tuple of (int, int) or None, default=None
        The problem period ``[start_ns, end_ns)`` instead of a search from ``at``.
    baseline_time : tuple of (int, int) or None, default=None
        The baseline period instead of a search for a clean one.
    lookback_s : float, default=900
        How far before ``at`` the onset is searched, seconds.
    max_problem_s : float, default=300
        The longest problem period, seconds from the onset; also how far after ``at`` the onset
        search reads when it finds no change before ``at`` (the onset itself is never after ``at``).
    min_baseline_requests : int, default=300
        Requests the baseline search gathers before it stops looking further back.
    level : float, default=0.01
        Significance level of the change-point tests, the blocks of traffic and the gap rule.
    min_slowdown : float, default=0.1
        The least relative slowdown a time test detects (:func:`~.evidence.shift_p_value`).
    min_confidence : float, default=0.5
        The first suspect is named when its confidence reaches it.
    model : str, path or None, default=None
        A ranking model file (:func:`~.ranking.load_model`); None: the shipped one.
    random_state : int, numpy Generator or None, default=None
        Accepted for the analyses' common protocol; the diagnosis has no random step (its tests and
        ranking are deterministic), so equal inputs give equal results whatever it is.

    Attributes
    ----------
    result_ : DiagnosisResult
    evidence_ : tuple of Evidence
        All the evidence, strongest first.
    features_ : polars.DataFrame
        Shape (n_services, 1 + n_families): ``service`` and each family's weight.
    model_ : RankingModel
    requests_ : polars.DataFrame
        ``start_ns`` and ``latency_ns`` of the requests from the baseline's start to the problem
        period's end (for the report's timeline).

    Notes
    -----
    Build 1-3 of issue 28; the onset uses Pettitt (1979), its series tested together by Tarone's modified
    Bonferroni procedure (Biometrics 46(2), 1990), the ranking McFadden's conditional logit,
    the log-template evidence follows Nezha (Yu et al., FSE 2023, Section 3.3), the instances Mi et
    al. (Sci China Inf Sci 2012, Algorithm 2). ``fit(spans, logs=None)``: spans in
    :data:`~tracesleuth.schema.SPAN_SCHEMA`, log records in :data:`~tracesleuth.schema.LOG_SCHEMA`;
    or ``fit(telemetry)``: a :class:`~.telemetry.Telemetry` built already (partition by partition:
    :func:`tracesleuth.scale.telemetry.partitioned_telemetry`), with the same result as its spans
    and records.
    """

    _constraints = {
        "at": [Interval(int, 0, None), NONE],
        "time": [InstanceOf((tuple, list), "a (start_ns, end_ns) pair"), NONE],
        "baseline_time": [InstanceOf((tuple, list), "a (start_ns, end_ns) pair"), NONE],
        "lookback_s": [Interval(float, 0, None, closed="neither")],
        "max_problem_s": [Interval(float, 0, None, closed="neither")],
        "min_baseline_requests": [Interval(int, 1, None)],
        "level": [Interval(float, 0, 1, closed="neither")],
        "min_slowdown": [Interval(float, 0, None)],
        "min_confidence": [Interval(float, 0, 1)],
        "model": [InstanceOf((str, os.PathLike), "a path"), NONE],
        "random_state": [Seed()],
    }

    def __init__(self, *, at=None, time=None, baseline_time=None, lookback_s=900.0, max_problem_s=300.0,
                 min_baseline_requests=300, level=0.01, min_slowdown=0.1, min_confidence=0.5, model=None,
                 random_state=None):
        self.at = at
        self.time = time
        self.baseline_time = baseline_time
        self.lookback_s = lookback_s
        self.max_problem_s = max_problem_s
        self.min_baseline_requests = min_baseline_requests
        self.level = level
        self.min_slowdown = min_slowdown
        self.min_confidence = min_confidence
        self.model = model
        self.random_state = random_state

    def _fit(self, spans, logs=None) -> dict:
        if isinstance(spans, Telemetry):
            if logs is not None:
                raise ParameterError("Diagnosis.fit: give the log records to Telemetry.from_tables (or "
                                     "from_frames), not beside a Telemetry, whose records are joined already")
            telemetry = spans
        else:
            telemetry = Telemetry.from_tables(spans, logs)
        timeline = find_timeline(telemetry, at_ns=self.at, time=self.time, baseline_time=self.baseline_time,
                                 lookback_s=self.lookback_s, max_problem_s=self.max_problem_s,
                                 min_baseline_requests=self.min_baseline_requests, level=self.level)
        problem, baseline = telemetry.during(timeline.problem), telemetry.during(timeline.baseline)
        samples = time_samples(problem, baseline)
        common = common_slowdown(samples)
        slowdown = (1 + self.min_slowdown) * (1 + common) - 1  # beyond the host's own (common_slowdown)
        evidence = gather_evidence(problem, baseline, samples, level=self.level, min_slowdown=slowdown, common=common)
        model = load_model(self.model)
        features = feature_frame(evidence)
        confidence = model.probabilities(features.drop(S.SERVICE).to_numpy())
        suspects = _suspects(features[S.SERVICE].to_list(), confidence, evidence, problem, baseline,
                             self.level, slowdown)
        notes = _notes(timeline, telemetry.has_logs, problem, baseline, common)
        why = self._verdict(suspects, problem, timeline.onset)
        result = DiagnosisResult(why.verdict, suspects, float(1 - confidence.sum()), timeline.onset,
                                 timeline.problem, timeline.baseline, notes + (why,))
        around = telemetry.requests.filter((pl.col(S.START_NS) >= timeline.baseline.start_ns)
                                           & (pl.col(S.START_NS) < timeline.problem.end_ns))
        return {"result_": result, "evidence_": tuple(evidence), "features_": features, "model_": model,
                "requests_": around.select(S.START_NS, "latency_ns")}

    def _verdict(self, suspects: tuple, problem: Telemetry, onset: Onset | None) -> Verdict:
        """The verdict and its reason (:class:`~.notes.Verdict`): nobody is named on a weak onset."""
        top = suspects[0] if suspects else None
        weak = onset is not None and not onset.significant
        if problem.n_requests < MIN_PROBLEM_REQUESTS or top is None:
            verdict = "too thin"
        else:
            verdict = "named" if top.confidence >= self.min_confidence and not weak else "uncertain"
        return Verdict(verdict, problem.n_requests, MIN_PROBLEM_REQUESTS,
                       None if top is None else top.service, None if top is None else top.confidence,
                       self.min_confidence, weak)


def feature_frame(evidence) -> pl.DataFrame:
    """``service`` and each family's weight, one row per service with evidence, shape (n, 1 + n_families)."""
    services = sorted({e.service for e in evidence})
    weights = {f: [0.0] * len(services) for f in FAMILIES}
    index = {s: i for i, s in enumerate(services)}
    for e in evidence:
        weights[e.family][index[e.service]] = max(weights[e.family][index[e.service]], e.weight)
    return pl.DataFrame({S.SERVICE: services, **weights},
                        schema={S.SERVICE: pl.String, **{f: pl.Float64 for f in FAMILIES}})


def _suspects(services: list, confidence: np.ndarray, evidence, problem: Telemetry, baseline: Telemetry,
              level: float, min_slowdown: float) -> tuple:
    order = np.argsort(-confidence, kind="stable")
    out = []
    for i in order:
        service = services[i]
        own = tuple(e for e in evidence if e.service == service and e.weight > 0)
        if not own:
            continue
        operations = tuple(dict.fromkeys(e.item for e in own if e.p_value <= level)) or (own[0].item,)
        out.append(Suspect(service, float(confidence[i]), operations,
                           _instances(service, problem, baseline, level, min_slowdown), own))
    return tuple(out)


def _instances(service: str, problem: Telemetry, baseline: Telemetry, level: float, min_slowdown: float) -> tuple:
    """The service's instances whose own time rose, or whose spans fail, against the service's
    baseline, strongest first; all its instances when none stands out (Mi et al. 2012, Algorithm 2:
    the instance that differs).

    Each instance gets two tests, doubled (Bonferroni over the two): the shift test of its own time
    (:func:`~.evidence.shift_p_value`) and the rate test of its spans that are an error's or an
    error log's origin, per span (:func:`~.evidence.rate_p_values`). Measured on random shops, one
    instance of two or three failing 20-100% of its spans: the time test alone put it first on 14 of
    30 (the names' order: none stood out), both on 30."""
    failing = pl.col("origin") | pl.col("error_log_origin")
    mine = problem.spans.filter((pl.col(S.SERVICE) == service) & pl.col(S.INSTANCE).is_not_null())
    theirs = baseline.spans.filter(pl.col(S.SERVICE) == service)
    before = theirs.filter(pl.col("own_ns") > 0)["own_ns"].to_numpy()
    failed_before = int(theirs.select(failing.sum()).item())
    found = []
    for (instance,), group in mine.group_by(S.INSTANCE):
        values = group.filter(pl.col("own_ns") > 0)["own_ns"].to_numpy()
        slower = shift_p_value(values, before, min_slowdown)
        failed = int(group.select(failing.sum()).item())
        failing_more = rate_p_values([failed], group.height, [failed_before], theirs.height, "greater")[0]
        found.append((min(1.0, 2 * min(slower, failing_more)), str(instance)))
    found.sort()
    standing_out = tuple(name for p, name in found if p <= level)
    return standing_out or tuple(sorted(name for _, name in found))


def _notes(timeline, has_logs: bool, problem: Telemetry, baseline: Telemetry, common: float) -> tuple:
    """The onset, the periods and the caveats (:mod:`.notes`), in that order."""
    notes = []
    if timeline.onset is not None:
        o = timeline.onset
        notes.append(OnsetFound(o.time_ns, o.series, o.p_value, o.level, o.significant, o.break_ns))
    p, b = timeline.problem, timeline.baseline
    notes += [kind(t.start_ns, t.end_ns, t.n_requests, t.how, len(t.ranges), t.n_skipped)
              for kind, t in ((ProblemPeriod, p), (BaselinePeriod, b))]
    notes += timeline.caveats
    skew = pl.concat([problem.spans["skew_ns"], baseline.spans["skew_ns"]])
    if (skew != 0).any():
        notes.append(ClockSkew(int((skew != 0).sum()), len(skew), int(skew.abs().max())))
    if common > 0:
        notes.append(CommonSlowdown(common))
    if not has_logs:
        notes.append(NoLogRecords())
    else:
        notes += [NoLogRecords(name) for name, t in (("problem", problem), ("baseline", baseline)) if not t.logged]
    return tuple(notes)
