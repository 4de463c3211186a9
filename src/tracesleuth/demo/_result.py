"""What a live run found, and whether it is a result: :class:`DemoResult`, :class:`IncidentResult`.

Every run ends in one :class:`DemoOutcome`, the rule written once in :func:`outcome`:

* ``"broken"`` (exit code :data:`EXIT_BROKEN`): the load was not what was asked (requests
  failed, the rate fell short, traces were lost: :class:`~._health.RunHealth`), or the run was
  overloaded *and* missed the injected change - then the overload is named as the cause. Such a
  run is never presented as a result;
* ``"not recovered"`` (:data:`EXIT_NOT_RECOVERED`): a run that kept up with its load, on which
  the analysis missed what was injected;
* ``"recovered"`` (exit code 0): what was injected was found (an overload that did not prevent it
  is still mentioned).

Whatever the status, telemetry that never reached the collector (spans and log records dropped
before export or whose export failed, :meth:`~._health.RunHealth.telemetry_loss`) is named in the
outcome's message: no status by itself, never silent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ._health import RunHealth

__all__ = ["EXIT_BROKEN", "EXIT_NOT_RECOVERED", "RECOVERY_F_SCORE", "DemoOutcome", "DemoResult", "IncidentResult",
           "outcome"]

#: A degradation is recovered when its best-matching pattern reaches this F-score (Section 4.3 of
#: Cortellessa & Traini; the issue's target for the live demo).
RECOVERY_F_SCORE = 0.95
#: Exit code of ``tracesleuth demo`` when a run that kept up with its load missed what was injected.
EXIT_NOT_RECOVERED = 1
#: Exit code of ``tracesleuth demo`` when the run is no result (see :func:`outcome`).
EXIT_BROKEN = 3


@dataclass(frozen=True)
class DemoOutcome:
    """How a live run ended.

    Attributes
    ----------
    status : {"recovered", "not recovered", "broken"}
    message : str
        One sentence naming what was found, or the cause.
    exit_code : int
        0, :data:`EXIT_NOT_RECOVERED` or :data:`EXIT_BROKEN`.
    """

    status: str
    message: str
    exit_code: int

    def to_dict(self) -> dict:
        return {"status": self.status, "message": self.message, "exit_code": self.exit_code}


def outcome(health: RunHealth | None, *, found: str, missed: str | None) -> DemoOutcome:
    """The outcome of a run from its health and what the analysis found.

    Parameters
    ----------
    health : RunHealth or None
    found : str
        What was recovered, in words (used when nothing was missed).
    missed : str or None
        What was injected and not recovered, in words; None when everything was.
    """
    verdict = _verdict(health, found=found, missed=missed)
    loss = None if health is None else health.telemetry_loss()
    if loss is None:
        return verdict
    return DemoOutcome(verdict.status, f"{verdict.message} (telemetry lost: {loss})", verdict.exit_code)


def _verdict(health: RunHealth | None, *, found: str, missed: str | None) -> DemoOutcome:
    """:func:`outcome` without the telemetry note."""
    if health is not None and health.broken:
        return DemoOutcome("broken", f"this run is no result: {health.reason()}", EXIT_BROKEN)
    if missed is not None:
        if health is not None and health.overloaded:
            return DemoOutcome("broken", f"{missed}, because the run was overloaded: {health.reason()}", EXIT_BROKEN)
        return DemoOutcome("not recovered", f"{missed}, on a run that kept up with its load: the analysis missed it "
                                            "(see the report)", EXIT_NOT_RECOVERED)
    if health is not None and health.overloaded:
        found += f", although the machine was loaded ({health.overloaded})"
    return DemoOutcome("recovered", found, 0)


def _clean(v):
    """JSON-safe value: paths as strings, NaN as None, nested dicts and objects with to_dict."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if hasattr(v, "to_dict"):
        return v.to_dict()
    return v


@dataclass(frozen=True)
class DemoResult:
    """What a live demo run did and how well the analysis recovered the injected degradations.

    Attributes
    ----------
    workdir : Path
        The run's directory (store, ground truth, report, config, databases, logs/).
    store_path : Path
        The span store the collector wrote (``tracesleuth analyze STORE -e web-service:gethome``).
    labels_path : Path
        Ground truth, one row per request: ``request, trace_id, degradation, noise, scheduled_ns,
        sent_ns, latency_ns, status``.
    injections_path : Path
        Every delay asked for: ``trace_id, degradation, service, operation, call, delay_ns, noise``.
    report_path : Path
        The HTML report, with the ground-truth section.
    requests_sent, requests_completed, requests_failed : int
        Homepage requests sent, answered 200, failed (error status, timeout, refused).
    requests_analysed : int
        Rows of the trace table (homepage requests found in the store).
    spans_stored : int
        Spans in the store.
    affected : dict of str to int
        Requests marked with each degradation.
    degradations : tuple of LiveDegradation
        A1 and A2 as injected, their RPCs under the live services' names (the simulator's
        definitions in ``.degradation``).
    endpoint : str
    interval : str or None
        The degraded latency interval the analysis chose, in words (None when nothing was found).
    match_f_scores : dict of str to float
        F-score of each degradation's best-matching pattern (Section 4.3 of Cortellessa & Traini).
    matched : dict of str to int
        The sub-interval (pattern) matched to each degradation, -1 for none.
    recovered_patterns : dict of str to str or None
        The matched pattern of each degradation in words, e.g.
        ``"web-service:gethome exclusive >= 55.2 ms"`` (None when none was matched).
    precision, recall, f_score : float
        Over both degradations (:func:`~tracesleuth.analyses.metrics.match_clusters`).
    timings : dict of str to float
        Seconds: ``startup_s``, ``load_s``, ``flush_s``, ``analysis_s``, ``report_s``, ``total_s``.
    seed, rate_per_s, duration_s, noised, interval_rule
        The settings of the run.
    collector_stats : dict
        The receiver's final counters.
    health : RunHealth or None
        The load achieved against the load asked, failures, queueing and CPU used
        (:func:`~._health.assess_run`).
    recovery_f_score : float
        The F-score at which a degradation counts as recovered (:data:`RECOVERY_F_SCORE`).
    """

    workdir: Path
    store_path: Path
    labels_path: Path
    injections_path: Path
    report_path: Path
    requests_sent: int
    requests_completed: int
    requests_failed: int
    requests_analysed: int
    spans_stored: int
    affected: dict
    degradations: tuple
    endpoint: str
    interval: str | None
    match_f_scores: dict
    matched: dict
    recovered_patterns: dict
    precision: float
    recall: float
    f_score: float
    timings: dict
    seed: int
    rate_per_s: float
    duration_s: float
    noised: bool
    interval_rule: str = "affected"
    collector_stats: dict = field(default_factory=dict, repr=False)
    health: RunHealth | None = None
    recovery_f_score: float = RECOVERY_F_SCORE

    @property
    def disturbed(self) -> str | None:
        """Why the run is not to be trusted (:meth:`RunHealth.reason`), None for a clean run."""
        return None if self.health is None else self.health.reason()

    def recovered(self, threshold: float | None = None) -> dict:
        """``{degradation: bool}``: whether its best match reaches ``threshold`` F-score
        (default :attr:`recovery_f_score`)."""
        threshold = self.recovery_f_score if threshold is None else threshold
        return {k: v >= threshold for k, v in self.match_f_scores.items()}

    def outcome(self) -> DemoOutcome:
        """Recovered, not recovered, or broken (:func:`outcome`)."""
        thr = self.recovery_f_score
        missed = {k: v for k, v in self.match_f_scores.items() if v < thr}
        scores = ", ".join(f"{k} F {v:.3f}" for k, v in self.match_f_scores.items())
        words = (None if not missed else
                 f"{' and '.join(f'{k} (F {v:.3f})' for k, v in missed.items())} not recovered (a degradation is "
                 f"recovered when its best-matching pattern scores F >= {thr:g})")
        return outcome(self.health, found=f"both degradations recovered ({scores}; recovered at F >= {thr:g})",
                       missed=words)

    def to_dict(self) -> dict:
        """JSON-safe dictionary (paths as strings, NaN as None), with ``disturbed`` and ``outcome``."""
        out = {k: _clean(getattr(self, k)) for k in self.__dataclass_fields__ if k != "degradations"}
        out["degradations"] = [d.to_dict() | {"type": d.type, "description": d.describe()} for d in self.degradations]
        return out | {"disturbed": self.disturbed, "outcome": self.outcome().to_dict()}


@dataclass(frozen=True)
class IncidentResult:
    """What an incident run did: a baseline phase, one fault, a problem phase, compared.

    Attributes
    ----------
    workdir, store_path, report_path : Path
    labels_paths : dict of str to Path
        Ground truth of each phase (``baseline``, ``problem``): one row per request, as
        :attr:`DemoResult.labels_path`.
    fault : Fault
        What was injected, into which service.
    fault_start_ns : int
        When the fault was switched on, ns since the epoch (the problem phase's requests were
        all sent after it).
    requests : dict of str to int
        Requests of each phase found in the store.
    endpoint : str
    services : tuple of dict
        The comparison's ranked services (``service``, ``score``, ``evidence``), most suspicious
        first (:class:`~tracesleuth.analyses.compare.ComparisonResult`).
    injected_rank : int or None
        Rank (1 = most suspicious) of the injected service, None when it is not listed.
    significant : bool
        Whether the comparison found any change.
    timings : dict of str to float
    seed, rate_per_s, duration_s
    health : RunHealth or None
        Both phases' load; queueing judged on the baseline phase's requests.
    collector_stats : dict
    fault_hits_path : Path or None
        The requests a code fault hit (``exception``, ``early-return``): one row per faulty
        server span (:data:`~._protocol.FAULT_HITS_COLUMNS`); only the header for the other
        faults. The ground truth, beside the store.
    """

    workdir: Path
    store_path: Path
    report_path: Path
    labels_paths: dict
    fault: object
    fault_start_ns: int
    requests: dict
    endpoint: str
    services: tuple
    injected_rank: int | None
    significant: bool
    timings: dict
    seed: int
    rate_per_s: float
    duration_s: float
    health: RunHealth | None = None
    collector_stats: dict = field(default_factory=dict, repr=False)
    fault_hits_path: Path | None = None

    @property
    def top_service(self) -> str | None:
        """The most suspicious service, None when none is suspected."""
        return self.services[0]["service"] if self.services else None

    @property
    def disturbed(self) -> str | None:
        return None if self.health is None else self.health.reason()

    def outcome(self) -> DemoOutcome:
        """Recovered when the injected service ranks first (:func:`outcome`)."""
        svc = self.fault.service
        if self.injected_rank == 1:
            return outcome(self.health, found=f"the injected service {svc} ranks first in What changed", missed=None)
        where = ("is not suspected at all" if self.injected_rank is None else f"ranks {self.injected_rank}")
        top = f" ({self.top_service} ranks first)" if self.top_service else ""
        return outcome(self.health, found="", missed=f"the injected service {svc} {where}{top}")

    def to_dict(self) -> dict:
        """JSON-safe dictionary, with ``top_service``, ``disturbed`` and ``outcome``."""
        out = {k: _clean(getattr(self, k)) for k in self.__dataclass_fields__}
        return out | {"top_service": self.top_service, "disturbed": self.disturbed,
                      "outcome": self.outcome().to_dict()}
