"""Is a live run a result? The load it achieved, the requests that failed, the queueing it suffered.

A live run measures real processes on a real machine. When the machine cannot keep up - the
load generator falls behind its schedule, requests time out, or requests queue for as long as a
degradation adds - the latencies no longer show the injected delays, and whatever the analysis
finds is no result. :func:`assess_run` checks a run against the thresholds below and says why it
is not to be trusted; :class:`RunHealth` carries the figures, shown in the summary and the report.

Two kinds of trouble are told apart:

* **broken**: the load itself was not what was asked - more than :data:`MAX_FAILED_SHARE` of the
  requests failed, the achieved rate is below :data:`MIN_RATE_SHARE` of the one asked, or the
  spans of more than :data:`MAX_LOST_SHARE` of the answered requests never reached the store.
  Such a run is never a result, whatever it scored;
* **overloaded**: the load was delivered, but requests no degradation touched took much longer
  than the services' modelled times (:data:`DISTURBANCE_FACTOR`), or the machine had more
  runnable processes than cores (its load average above the core count): queueing on a busy
  machine then adds as much as a degradation does. The scores may still be right (the ground
  truth says); when they are not, the overload is named as the cause. Beside these averages,
  :func:`blurred_requests` counts the requests a slow spell alone made look degraded (a few
  seconds of a busy host slow a few dozen requests and leave the median and the load average as
  they were): when they are more than a recovered pattern could absorb, the run is overloaded too.

Beside them, what became of the telemetry: every process counts the spans and log records it
recorded, exported, failed to export and had dropped before export (:class:`~._account.ProcessAccount`,
:mod:`._telemetry`). Telemetry lost on its way to the collector is no failure by itself (the
lost traces above are what breaks a run), but it is never silent: :meth:`RunHealth.telemetry_loss`
names it, and the outcome says so.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ..units import NS_PER_S, format_duration_ns
from ._account import NO_TELEMETRY, ProcessAccount, SignalAccount

__all__ = ["DISTURBANCE_FACTOR", "MAX_FAILED_SHARE", "MAX_LOST_SHARE", "MIN_RATE_SHARE", "Blur", "RunHealth",
           "assess_run", "blurred_requests"]

#: Share of the requests sent that may fail (error status, timeout, refused) in a run that is a result.
MAX_FAILED_SHARE = 0.01
#: The achieved rate must be at least this share of the rate asked.
MIN_RATE_SHARE = 0.9
#: Share of the answered requests whose trace may be missing from the store.
MAX_LOST_SHARE = 0.01
#: A run is overloaded when its undegraded requests' median latency exceeds this factor times the
#: modelled median plus one injected delay (50 ms), or their spread (90th percentile minus median)
#: exceeds the modelled spread plus that delay: queueing then adds as much as a degradation does.
DISTURBANCE_FACTOR = 2.0


@dataclass(frozen=True)
class Blur:
    """The requests without any degradation that the machine alone made look as if they had one.

    A degradation adds :data:`~tracesleuth.evaluation.eshopper.DELAY_NS` (50 ms) to each of its
    RPCs. An undegraded request whose exclusive time in *every* one of those RPCs exceeds the
    midpoint between the undegraded requests (their median) and the degraded ones (that median
    plus the delay) is nearer the degraded requests on each of them: queueing added at least half
    a degradation, and no inequality on those RPCs (what a pattern is made of, Section 3.2 of
    Cortellessa & Traini) puts it on the right side without losing degraded requests as well.

    A pattern that holds all ``affected`` requests and these ``blurred`` ones scores
    F = 2 affected / (2 affected + blurred); :attr:`tolerated` is the most that keeps that F at the
    recovery threshold. More than that and a miss is the machine's, not the analysis's: no
    threshold of ours, the derivation's only input is the recovery F-score.

    Attributes
    ----------
    degradation : str
    rpcs : tuple of str
        The RPCs it delays, ``"service:operation"``.
    affected : int
        Requests carrying it.
    blurred : int
        Undegraded requests past the midpoint on every RPC of ``rpcs`` (requests carrying another
        degradation that shares an RPC are slow there by design, not by queueing: not counted).
    tolerated : int
        ``floor(2 affected (1 / F - 1))`` for the recovery F-score ``F``.
    """

    degradation: str
    rpcs: tuple[str, ...]
    affected: int
    blurred: int
    tolerated: int

    @property
    def too_many(self) -> bool:
        return self.blurred > self.tolerated

    def describe(self) -> str:
        """One line, e.g. ``"queueing made 6 undegraded requests look like A1 ..."``."""
        return (f"queueing made {self.blurred} undegraded requests look like {self.degradation} (their "
                f"{', '.join(self.rpcs)} exclusive time past the midpoint between the undegraded requests' and "
                f"{self.degradation}'s; at most {self.tolerated} leave its {self.affected} requests recoverable)")

    def to_dict(self) -> dict:
        return {"degradation": self.degradation, "rpcs": list(self.rpcs), "affected": self.affected,
                "blurred": self.blurred, "tolerated": self.tolerated}


def blurred_requests(exclusive_ns, marks, degradations, *, recovery_f_score: float) -> tuple[Blur, ...]:
    """Count, per degradation, the requests without it that queueing made look degraded (:class:`Blur`).

    Parameters
    ----------
    exclusive_ns : mapping of str to array-like of float, each shape (n_requests,)
        Each RPC's exclusive time per request, ns (NaN or None where the request has no such span).
    marks : sequence of str or None, shape (n_requests,)
        The degradation each request carries (the ground truth), None for none.
    degradations : iterable of (str, sequence of str)
        Each degradation's name and the RPCs it delays (keys of ``exclusive_ns``; missing ones are
        left out, and a degradation with none is not counted).
    recovery_f_score : float
        The F-score a recovered degradation's pattern reaches, in (0, 1].

    Returns
    -------
    tuple of Blur
    """
    from ..evaluation.eshopper import DELAY_NS

    marks = np.array([m if m is not None else "" for m in marks], dtype=object)
    undegraded = marks == ""
    out = []
    for name, rpcs in degradations:
        rpcs = tuple(r for r in rpcs if r in exclusive_ns)
        affected = int((marks == name).sum())
        if not rpcs or not affected:
            continue
        past = undegraded.copy()
        for rpc in rpcs:
            x = np.asarray(exclusive_ns[rpc], dtype=np.float64)  # None -> NaN
            normal = x[undegraded & np.isfinite(x)]
            past &= np.isfinite(x) & (x > (np.median(normal) if normal.size else np.inf) + DELAY_NS / 2)
        # F = 2n / (2n + b) >= recovery_f_score  <=>  b <= 2n (1/F - 1); 1e-9 absorbs float error at whole numbers
        out.append(Blur(name, rpcs, affected, int(past.sum()),
                        math.floor(2 * affected * (1 / recovery_f_score - 1) + 1e-9)))
    return tuple(out)


@dataclass(frozen=True)
class RunHealth:
    """What the load of a live run was, against what was asked, and why it is no result when it is not.

    Attributes
    ----------
    requests_planned, requests_sent, requests_completed, requests_failed : int
        Requests the load generator was to send, sent, got a 200 answer for, and failed
        (error status, timeout, connection refused).
    requests_analysed : int
        Requests whose trace is in the store (rows of the trace table).
    rate_per_s : float
        The rate asked, requests per second.
    achieved_rate_per_s : float
        Requests sent per second, from the first scheduled send to the last actual one.
    latency_p50_ns, latency_p90_ns : float or None
        Median and 90th percentile latency of the requests no fault was injected into, ns.
    modelled_p50_ns, modelled_p90_ns : float or None
        The same quantities from the services' modelled execution times (the simulator's, whose
        draws the live services sleep for), ns.
    cpu_cores : float or None
        CPU the run's processes used while the load ran, in cores (CPU seconds per second);
        None where ``/proc`` is not readable.
    n_cores : int
        Cores of the machine.
    load_average : float or None
        The machine's 1-minute load average when the load ended (runnable processes, the demo's
        and everything else's), None where the system does not tell.
    broken : tuple of str
        Why the load was not what was asked (failures, rate, lost traces); empty when it was.
    overloaded : str or None
        Why the undegraded requests are too slow to tell the degradations apart, or None.
    blurred : tuple of Blur
        Per degradation, the requests without it that queueing made look degraded
        (:func:`blurred_requests`); empty when not counted.
    telemetry : tuple of ProcessAccount
        What each process (service instance, load generator) recorded of its spans and log
        records and what became of them, by instance.
    telemetry_unreported : tuple of str
        Processes that wrote no account (their telemetry is not counted), by name.
    """

    requests_planned: int
    requests_sent: int
    requests_completed: int
    requests_failed: int
    requests_analysed: int
    rate_per_s: float
    achieved_rate_per_s: float
    latency_p50_ns: float | None = None
    latency_p90_ns: float | None = None
    modelled_p50_ns: float | None = None
    modelled_p90_ns: float | None = None
    cpu_cores: float | None = None
    n_cores: int = 1
    load_average: float | None = None
    broken: tuple[str, ...] = ()
    overloaded: str | None = None
    blurred: tuple[Blur, ...] = ()
    telemetry: tuple[ProcessAccount, ...] = ()
    telemetry_unreported: tuple[str, ...] = ()

    @property
    def spans(self) -> SignalAccount:
        """The spans of every process that reported: recorded, exported, export failed, dropped."""
        return sum((p.spans for p in self.telemetry), NO_TELEMETRY)

    @property
    def logs(self) -> SignalAccount:
        """The log records of every process that reported (as :attr:`spans`)."""
        return sum((p.logs for p in self.telemetry if p.logs is not None), NO_TELEMETRY)

    def telemetry_words(self) -> str | None:
        """One line: spans and log records recorded, exported, failed, dropped (over every process);
        None when no process reported."""
        if not self.telemetry and not self.telemetry_unreported:
            return None
        words = f"{self.spans.describe('spans')}; {self.logs.describe('log records')}"
        if self.telemetry_unreported:
            words += f"; not counted: {', '.join(self.telemetry_unreported)} (wrote no account)"
        return words

    def telemetry_loss(self) -> str | None:
        """What telemetry never reached the collector, per process, or which processes did not
        count theirs; None when every process reported and none lost anything."""
        lost = [p.describe() for p in self.telemetry if p.spans.lost or (p.logs is not None and p.logs.lost)]
        if not lost and not self.telemetry_unreported:
            return None
        parts = []
        if lost:
            parts.append(f"{self.spans.lost:,} spans and {self.logs.lost:,} log records never reached the collector "
                         f"({'; '.join(lost)})")
        if self.telemetry_unreported:
            parts.append(f"the telemetry of {', '.join(self.telemetry_unreported)} was not counted "
                         "(no account written)")
        return "; ".join(parts)

    @property
    def failed_share(self) -> float:
        """Failed requests over requests sent (0 when none was sent)."""
        return self.requests_failed / self.requests_sent if self.requests_sent else 0.0

    @property
    def ok(self) -> bool:
        """Neither broken nor overloaded."""
        return not self.broken and self.overloaded is None

    def reason(self) -> str | None:
        """Why the run is not to be trusted, with what to try; None when it is."""
        causes = [*self.broken, *([self.overloaded] if self.overloaded else [])]
        if not causes:
            return None
        used = [] if self.cpu_cores is None else [f"the demo used {self.cpu_cores:.2f} of its {self.n_cores} cores"]
        if self.load_average is not None and "load average" not in (self.overloaded or ""):
            used.append(f"the machine's load average was {self.load_average:.1f}")
        used = f" ({'; '.join(used)})" if used else ""
        return ("; ".join(causes) + f": the machine could not keep up with {self.rate_per_s:g} requests/s{used}. "
                "Try a lower --rate, or a machine with spare CPU.")

    def load_words(self) -> str:
        """One line: requests sent, rate asked and achieved, failures, CPU used."""
        cpu = "" if self.cpu_cores is None else f"; the run used {self.cpu_cores:.2f} of {self.n_cores} CPU cores"
        if self.load_average is not None:
            cpu += f" (machine load average {self.load_average:.1f})"
        return (f"{self.requests_sent:,} of {self.requests_planned:,} requests sent at {self.achieved_rate_per_s:.2f}/s "
                f"({self.rate_per_s:g}/s asked; a result needs >= {MIN_RATE_SHARE:.0%} of it), "
                f"{self.requests_failed:,} failed ({self.failed_share:.1%}; a result allows <= {MAX_FAILED_SHARE:.0%}), "
                f"{self.requests_analysed:,} traced{cpu}")

    def latency_words(self) -> str | None:
        """One line: undegraded latency against the modelled one, or None when unknown."""
        if self.latency_p50_ns is None or self.modelled_p50_ns is None:
            return None
        return (f"requests without a fault took {format_duration_ns(self.latency_p50_ns)} (median) and "
                f"{format_duration_ns(self.latency_p90_ns)} (90th percentile); the services' modelled times give "
                f"{format_duration_ns(self.modelled_p50_ns)} and {format_duration_ns(self.modelled_p90_ns)}")

    def to_dict(self) -> dict:
        """JSON-safe dictionary (with ``failed_share``, ``ok``, ``reason``, the telemetry's totals
        ``spans`` and ``logs`` (:meth:`SignalAccount.to_dict <._account.SignalAccount.to_dict>`)
        and ``telemetry_loss``)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["broken"] = list(self.broken)
        out["blurred"] = [b.to_dict() for b in self.blurred]
        out["telemetry"] = [p.to_dict() for p in self.telemetry]
        out["telemetry_unreported"] = list(self.telemetry_unreported)
        return out | {"failed_share": self.failed_share, "ok": self.ok, "reason": self.reason(),
                      "spans": self.spans.to_dict(), "logs": self.logs.to_dict(),
                      "telemetry_loss": self.telemetry_loss(),
                      "thresholds": {"max_failed_share": MAX_FAILED_SHARE, "min_rate_share": MIN_RATE_SHARE,
                                     "max_lost_share": MAX_LOST_SHARE, "disturbance_factor": DISTURBANCE_FACTOR}}


def achieved_rate(scheduled_ns, sent_ns, rate_per_s: float) -> float:
    """Requests sent per second: ``n / (last send - first scheduled send + one interval)``.

    Parameters
    ----------
    scheduled_ns, sent_ns : array-like of int, shape (n_sent,)
        When each request was due and when it left, ns since the epoch (``labels.csv``).
    rate_per_s : float
        The rate asked (its interval closes the last request's slot).

    Returns
    -------
    float
        Equal to ``rate_per_s`` for a generator that kept its schedule; 0 when nothing was sent.

    Examples
    --------
    >>> achieved_rate([0, 100_000_000, 200_000_000], [1, 100_000_001, 200_000_001], 10.0)
    10.0
    """
    scheduled, sent = np.asarray(scheduled_ns, dtype=np.int64), np.asarray(sent_ns, dtype=np.int64)
    if sent.size == 0:
        return 0.0
    span_s = (int(sent.max()) - int(scheduled.min())) / NS_PER_S + 1.0 / rate_per_s
    return round(sent.size / span_s, 6)


def modelled_quantiles_ns(seed: int) -> tuple[float, float]:
    """Median and 90th percentile latency of undegraded requests from the services' modelled times, ns.

    :func:`~tracesleuth.evaluation.eshopper.simulate_eshopper` draws the same execution-time
    model the live services sleep for; its undegraded requests give the latencies an unloaded
    machine would show.
    """
    import polars as pl

    from ..evaluation.eshopper import simulate_eshopper
    from ..model import build_trace_table

    session = simulate_eshopper(n_requests=1000, random_state=seed)
    table = build_trace_table(session.spans)
    labelled = [t for t, label in session.label_map().items() if label is not None]
    undegraded = (~table.frame["trace_id"].is_in(pl.Series(labelled, dtype=pl.String).implode())).to_numpy()
    q = np.quantile(table.frame["latency_ns"].to_numpy()[undegraded], [0.5, 0.9])
    return float(q[0]), float(q[1])


def assess_run(*, planned: int, sent: int, completed: int, failed: int, analysed: int, lost: int, rate_per_s: float,
               achieved_rate_per_s: float, undegraded_latency_ns, seed: int, cpu_cores: float | None = None,
               load_average: float | None = None, blurred=(), telemetry=(), telemetry_unreported=()) -> RunHealth:
    """Check a live run's load and latencies against the thresholds of this module.

    Parameters
    ----------
    planned, sent, completed, failed, analysed : int
        Requests planned, sent, answered 200, failed, and found in the store.
    lost : int
        Requests answered 200 whose trace is not in the store.
    rate_per_s, achieved_rate_per_s : float
        Rate asked and achieved (:func:`achieved_rate`), requests per second.
    undegraded_latency_ns : array-like of int
        Latencies of the requests no fault was injected into, ns.
    seed : int
        Seed of the services' execution times (:func:`modelled_quantiles_ns`).
    cpu_cores : float, optional
        CPU the run used during the load, in cores.
    load_average : float, optional
        The machine's 1-minute load average at the end of the load.
    blurred : iterable of Blur, optional
        :func:`blurred_requests`; a degradation with more than it tolerates makes the run
        overloaded.
    telemetry : iterable of ProcessAccount, optional
        What each process recorded of its telemetry and what became of it.
    telemetry_unreported : iterable of str, optional
        Processes that wrote no account.

    Returns
    -------
    RunHealth
    """
    broken = []
    if sent and failed / sent > MAX_FAILED_SHARE:
        broken.append(f"{failed:,} of {sent:,} requests failed ({failed / sent:.1%}, more than {MAX_FAILED_SHARE:.0%})")
    if achieved_rate_per_s < MIN_RATE_SHARE * rate_per_s or sent < planned:
        broken.append(f"the load generator sent {sent:,} of {planned:,} requests at {achieved_rate_per_s:.2f}/s where "
                      f"{rate_per_s:g}/s was asked (less than {MIN_RATE_SHARE:.0%} of it)")
    if completed and lost / completed > MAX_LOST_SHARE:
        broken.append(f"the traces of {lost:,} of {completed:,} answered requests did not reach the store")
    lat = np.asarray(undegraded_latency_ns, dtype=np.float64)
    lat = lat[np.isfinite(lat)]
    p50 = p90 = m50 = m90 = None
    overloaded = []
    if lat.size:
        from ..evaluation.eshopper import DELAY_NS

        m50, m90 = modelled_quantiles_ns(seed)
        p50, p90 = (float(q) for q in np.quantile(lat, [0.5, 0.9]))
        if p50 > DISTURBANCE_FACTOR * m50 + DELAY_NS or p90 - p50 > m90 - m50 + DELAY_NS:
            overloaded.append(f"requests without a fault took {format_duration_ns(p50)} (median) and "
                              f"{format_duration_ns(p90)} (90th percentile) where the services' modelled times give "
                              f"{format_duration_ns(m50)} and {format_duration_ns(m90)}: queueing as long as the "
                              "injected delays blurs them")
    n_cores = os.cpu_count() or 1
    if load_average is not None and load_average > n_cores:
        overloaded.append(f"the machine was busy: its load average was {load_average:.1f} on {n_cores} cores (more "
                          "runnable processes than cores, so requests waited for a CPU)")
    blurred = tuple(blurred)
    overloaded += [b.describe() for b in blurred if b.too_many]
    return RunHealth(requests_planned=planned, requests_sent=sent, requests_completed=completed,
                     requests_failed=failed, requests_analysed=analysed, rate_per_s=float(rate_per_s),
                     achieved_rate_per_s=float(achieved_rate_per_s), latency_p50_ns=p50, latency_p90_ns=p90,
                     modelled_p50_ns=m50, modelled_p90_ns=m90, cpu_cores=cpu_cores, n_cores=n_cores,
                     load_average=load_average, broken=tuple(broken), overloaded="; ".join(overloaded) or None,
                     blurred=blurred,
                     telemetry=tuple(sorted(telemetry, key=lambda p: p.instance)),
                     telemetry_unreported=tuple(telemetry_unreported))
