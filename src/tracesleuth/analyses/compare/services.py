"""Which service: from ranked mutations to ranked services with evidence.

Spectroscope (Sambasivan et al., NSDI 2011, Section 3.4) ranks mutations and leaves the developer
to read where each one's time went. The issue this analysis answers asks for services, so
:func:`rank_services` turns the mutations into a ranked list by one rule:

1. A **response-time mutation** that got slower (positive contribution ``C``) spreads ``C`` over
   services in proportion to the added time per request of its significantly changed

   * operations' exclusive (self) time -> the operation's service (client spans excluded: their
     self time is the edge's gap, counted next),
   * edges' gaps (client time outside the server span called: network and queueing) -> the
     service called (``callee_service``).

   When none changed significantly, ``C`` goes to the service of the endpoint with the evidence
   "slower overall" (the change is spread too thin to locate).
2. A **structural mutation** gives ``|C|`` to its divergence service (the service to blame
   where the structure first differs from its top precursor's: the service a new or rerouted
   subtree enters, the node's own service when a subtree went missing; see
   ``RequestFlowComparison._divergence_service``), or to the endpoint's service when it has no
   precursor. The absolute value: a path that got *faster* by returning early or throwing is
   still the change a code fault makes (its requests show up there). A **workload-mix**
   mutation (:attr:`~.mutations.Mutation.workload_mix`: an established category that grew
   without slowing) gives nothing: the system did not change, its load did.
3. Speed-ups of response-time mutations count for nothing.
4. **Pooled evidence** (:mod:`.pooled`): every operation self time or edge gap that rose
   significantly over all categories gives its ``added_ns`` (problem-period time added) to its
   service, in the same currency as ``C``. A service's latency share is the *larger* of what the
   response-time mutations gave it (rule 1) and its pooled evidence, not their sum: both measure
   the same added time, the mutations inside categories with volume, the pooled tests across
   them, so a service seen by both is not counted twice. Structural shares (rule 2) add to it.
   This is what names a slowed service when no category has the volume for a KS test.
5. ``score = (summed contribution of the service) / (summed contribution of all services)``, in
   [0, 1], plus the rise of the share of problem requests in which the service's spans are the
   *origin* of an error (an error span without an error child), when that rise is significant
   (two-proportion test at ``alpha``): errors newly appearing in a service are evidence of a fault
   there even when no time moved.

Higher score = more suspicious (the package's orientation rule); ties broken by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import polars as pl

from ... import schema as S
from ...units import format_duration_ns
from .._statistics import proportion_p_values
from .mutations import Mutation

__all__ = ["ServiceSuspect", "error_origins", "rank_services"]


@dataclass(frozen=True)
class ServiceSuspect:
    """A service and why it is suspected.

    Attributes
    ----------
    service : str
    score : float
        Higher = more suspicious (see :mod:`.services` for the rule); in [0, 2].
    evidence : tuple of str
        What points to it, most weighty first ("edge gap into S up 3.1 ms per request", "self
        time of S:op up 12 ms per request", "structure diverges at S:op", "errors originate in S
        in 4% of requests (0% before)").
    contribution_ns : float
        The contribution of the mutations given to it, ns.
    """

    service: str
    score: float
    evidence: tuple[str, ...]
    contribution_ns: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"service": self.service, "score": self.score, "evidence": list(self.evidence),
                "contribution_ns": self.contribution_ns}


def error_origins(calls: pl.DataFrame) -> pl.DataFrame:
    """Per service, the number of requests in which one of its spans is the origin of an error.

    An origin is an error span none of whose children is an error span (errors propagate up to
    callers; the deepest one is where it began).

    Returns
    -------
    polars.DataFrame
        ``service`` (String), ``requests`` (UInt32).
    """
    errors = calls.filter(pl.col(S.ERROR)).select(S.REQUEST, S.SPAN_ID, S.PARENT_SPAN_ID, S.SERVICE)
    if errors.height == 0:
        return pl.DataFrame(schema={S.SERVICE: pl.String, "requests": pl.UInt32})
    parents = errors.select(S.REQUEST, pl.col(S.PARENT_SPAN_ID).alias(S.SPAN_ID)).drop_nulls().unique()
    origins = errors.join(parents, on=[S.REQUEST, S.SPAN_ID], how="anti")
    return origins.group_by(S.SERVICE).agg(pl.col(S.REQUEST).n_unique().alias("requests"))


def _service_of(key: str) -> str:
    return key.split(":", 1)[0]


def rank_services(mutations: Sequence[Mutation], *, endpoint: str, errors_baseline: pl.DataFrame | None,
                  errors_problem: pl.DataFrame | None, n_baseline: int, n_problem: int,
                  alpha: float, pooled: Sequence = ()) -> tuple[ServiceSuspect, ...]:
    """The services ranked by the rule of the module docstring, most suspicious first.

    Parameters
    ----------
    mutations : sequence of Mutation
        The explained mutations, ranked.
    endpoint : str
    errors_baseline, errors_problem : polars.DataFrame or None
        :func:`error_origins` of each period.
    n_baseline, n_problem : int
    alpha : float
    pooled : sequence of PooledChange, default=()
        Significant rises pooled over categories (:func:`~.pooled.pooled_changes`).
    """
    structural: dict[str, float] = {}
    latency: dict[str, float] = {}
    evidence: dict[str, list[tuple[float, str]]] = {}

    def give(service: str | None, amount: float, text: str, into: dict | None = None) -> None:
        service = service or _service_of(endpoint)
        into = latency if into is None else into
        into[service] = into.get(service, 0.0) + amount
        evidence.setdefault(service, []).append((amount, text))

    for m in mutations:
        c = m.contribution_ns
        tag = f"(mutation #{m.rank}, {m.kind})"
        if m.kind == "structural":
            if abs(c) <= 0 or m.workload_mix:
                continue
            if m.divergence is not None:
                give(m.divergence_service, abs(c), f"structure diverges at {m.divergence} "
                     f"({m.problem_count} problem requests, {m.baseline_count} before) {tag}", structural)
            else:
                give(None, abs(c), f"new structure without a precursor ({m.problem_count} problem requests) {tag}",
                     structural)
            continue
        if c <= 0:
            continue
        parts = [(o.service, o.added_ns, f"self time of {o.operation_key} up "
                  f"{format_duration_ns(o.added_ns)} per request {tag}")
                 for o in m.operations if not o.client and o.added_ns > 0]
        parts += [(e.callee_service, e.added_gap_ns, f"edge gap into {e.callee_service} ({e.caller} -> "
                   f"{e.callee}) up {format_duration_ns(e.added_gap_ns)} per request {tag}")
                  for e in m.edges if e.added_gap_ns > 0]
        total = sum(p[1] for p in parts)
        if total <= 0:
            give(None, c, f"requests slower overall (+{format_duration_ns(c / max(m.problem_count, 1))} "
                 f"each), no edge or operation changed significantly {tag}")
            continue
        for service, added, text in parts:
            give(service, c * added / total, text)

    pooled_share: dict[str, float] = {}
    for ch in pooled:
        if ch.added_ns > 0:
            give(ch.service, ch.added_ns, ch.describe(), pooled_share)
    share = {s: structural.get(s, 0.0) + max(latency.get(s, 0.0), pooled_share.get(s, 0.0))
             for s in set(structural) | set(latency) | set(pooled_share)}
    total = sum(share.values())
    scores = {s: (v / total if total > 0 else 0.0) for s, v in share.items()}
    if errors_problem is not None and errors_problem.height and n_problem > 0 and n_baseline > 0:
        before = dict(errors_baseline.rows()) if errors_baseline is not None else {}
        services = errors_problem[S.SERVICE].to_list()
        cp = errors_problem["requests"].to_numpy()
        cb = np.array([before.get(s, 0) for s in services])
        p = proportion_p_values(cp, n_problem, cb, n_baseline)
        for s, kp, kb, pv in zip(services, cp.tolist(), cb.tolist(), p.tolist()):
            rise = kp / n_problem - kb / n_baseline
            if rise > 0 and pv < alpha:
                scores[s] = scores.get(s, 0.0) + rise
                evidence.setdefault(s, []).append(
                    (float("inf"), f"errors originate in {s} in {kp / n_problem:.1%} of problem requests "
                                   f"({kb / n_baseline:.1%} before)"))
    out = []
    for s, score in scores.items():
        texts = [t for _, t in sorted(evidence.get(s, []), key=lambda e: -e[0])]
        out.append(ServiceSuspect(service=s, score=float(score), evidence=tuple(texts[:8]),
                                  contribution_ns=float(share.get(s, 0.0))))
    out.sort(key=lambda x: (-x.score, x.service))
    return tuple(out)
