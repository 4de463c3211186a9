"""Which service: from ranked mutations and pooled times to ranked services with evidence.

Spectroscope (Sambasivan et al., NSDI 2011, Section 3.4) ranks mutations by their expected
contribution to the slowdown and leaves the developer to read where each one's time went. The
issue this analysis answers asks for services, so :func:`rank_services` orders them by one
documented rule, and keeps the paper's currency beside it.

**Score** (higher = more suspicious, the package's orientation rule): how far the service's own
behaviour in the problem period departs from the baseline, the largest of three shares, each in
[0, 1] and scale-free, so that a service of microseconds and one of seconds compare (the largest,
not the sum: each is a share of something else, so they do not add up):

1. **latency**, ``d = s / (1 + s)`` where ``s`` is the service's severity
   (:class:`~.pooled.ServiceTime`: the relative rise of its time, self time and the gaps of the
   calls into it, against its own baseline speed, stratified by operation and by what the span
   calls, over all categories; a rise that a caller's gaps share on every service it calls is
   the caller's). ``d`` is the share of the service's problem-period time that its baseline
   speed does not explain: 0.5 when it takes twice its baseline time, 0.9 at ten times.
   A rise counts when it is significant (the service's strata together, van Elteren and tail
   test, multiple-test control over the services) **or** when the time at least doubled
   (``min_rise``, the fold-change convention of differential-expression analyses: effect size
   or evidence, as a volcano plot reads them). The second arm is for what a CPU-throttled
   instance looks like: a few of its calls paused by a scheduler period, which a rarely-called
   service cannot make significant in minutes of traffic, yet its time rising tenfold is the
   lead to follow; such evidence says it is not significant. Sampling noise between stationary
   periods moves a service's time by percents, not folds, so it counts for nothing. The verdict
   "no significant change" rests on the tests alone (:class:`~.analysis.RequestFlowComparison`),
   and no service is ranked then.
2. **structure**: for every structural mutation that is not a workload-mix change
   (:attr:`~.mutations.Mutation.workload_mix`), the rise of its share of the endpoint's
   requests, given to its divergence service (the service to blame where its structure first
   differs from its top precursor's: the service a new or rerouted subtree enters, the node's
   own service when a subtree went missing; see ``RequestFlowComparison._divergence_service``),
   or to the endpoint's service when it has no precursor; capped at 1; or, when larger, the
   drop of the calls its operations make into other services (:class:`~.pooled.CallDrop`:
   ``1 - problem / baseline`` calls per span, significant, pooled over categories: a service
   that returns early or throws stops calling downstream, which small periods' categories are
   too thin to show).
3. **errors**: the rise of the share of problem requests in which the service's spans are the
   *origin* of an error (an error span without an error child), when that rise is significant
   (two-proportion test at ``alpha``).

Only services with a positive score are listed; ties are broken by the contribution, then by
name.

**Contribution** (:attr:`ServiceSuspect.contribution_ns`, the paper's currency, shown beside the
score): the slowdown the service accounts for, in ns of the problem period's total response time:

* a **response-time mutation** that got slower (contribution ``C``) spreads ``C`` over services in
  proportion to the added time per request of its significantly changed operations' exclusive
  (self) time (the operation's service; client spans excluded: their self time is the edge's
  gap) and edges' gaps (the service called), or gives it to the endpoint's service ("slower
  overall") when none changed significantly;
* a **structural mutation** (not workload mix) gives ``|C|`` to its divergence service (the
  absolute value: a path that got *faster* by returning early or throwing is still the change a
  code fault makes);
* the **pooled evidence** (:mod:`.pooled`: self times and gaps that rose significantly over all
  categories) gives its ``added_ns``; a service's latency contribution is the *larger* of what the
  response-time mutations gave it and its pooled evidence, not their sum (both measure the same
  added time), and its structural contribution adds to it.

Why not rank by contribution, as the paper ranks mutations: contribution measures impact, and
between periods hours apart a heavily used operation that drifts (a table that grows, a query
from 0.8 to 6 ms over a thousand calls) contributes more than a service whose every call is ten
times slower; the relative rise is what tells a service that changed from one that carries the
load. Both are shown.
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
        Higher = more suspicious: ``max(latency, structure, errors)`` (:mod:`.services` gives the
        rule), in [0, 1].
    evidence : tuple of str
        What points to it, most weighty first ("time of S x11 its baseline speed (...)",
        "structure diverges at S:op", "errors originate in S in 4% of requests (0% before)",
        "self time of S:op up 12 ms per request").
    contribution_ns : float
        The slowdown given to it (the paper's currency), ns.
    latency, structure, errors : float
        The three parts of the score, each in [0, 1].
    severity : float or None
        Relative rise of its time (:attr:`~.pooled.ServiceTime.severity`); None when it has no
        call in both periods' common strata or its time did not rise.
    p_value : float or None
        The p-value of that rise (after the multiple-test control over the services).
    calls : int
        Its problem calls behind ``severity`` (the support).
    """

    service: str
    score: float
    evidence: tuple[str, ...]
    contribution_ns: float = 0.0
    latency: float = 0.0
    structure: float = 0.0
    errors: float = 0.0
    severity: float | None = None
    p_value: float | None = None
    calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["evidence"] = list(self.evidence)
        return out


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


#: Sort key of the evidence shown first.
_FIRST = float("inf")


def _service_of(key: str) -> str:
    return key.split(":", 1)[0]


def rank_services(mutations: Sequence[Mutation], *, endpoint: str, errors_baseline: pl.DataFrame | None,
                  errors_problem: pl.DataFrame | None, n_baseline: int, n_problem: int,
                  alpha: float, pooled: Sequence = (), service_times: Sequence = (),
                  call_drops: Sequence = (), min_rise: float = 1.0) -> tuple[ServiceSuspect, ...]:
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
    service_times : sequence of ServiceTime, default=()
        Every service whose time rose (:func:`~.pooled.pooled_changes`).
    call_drops : sequence of CallDrop, default=()
        Operations that make significantly fewer calls (:func:`~.pooled.pooled_changes`).
    min_rise : float, default=1.0
        Severity from which a rise that is not significant still counts (1.0: the time doubled;
        ``inf``: never).

    Returns
    -------
    tuple of ServiceSuspect
        Most suspicious first.
    """
    evidence: dict[str, list[tuple[float, str]]] = {}
    contribution = _contributions(mutations, endpoint, pooled, evidence)
    times = {t.service: t for t in service_times
             if t.added_ns > 0 and (t.p_value < alpha or t.severity >= min_rise)}
    latency = {s: t.severity / (1 + t.severity) for s, t in times.items()}
    for s, t in times.items():
        weak = "" if t.p_value < alpha else f"; not significant at {alpha:g}, counted for its {1 + t.severity:.2g}-fold time"
        evidence.setdefault(s, []).append((_FIRST, t.describe() + weak))
    structure: dict[str, float] = {}
    for m in mutations:
        if m.kind == "structural" and m.contribution_ns != 0 and not m.workload_mix:
            s = (m.divergence_service if m.divergence is not None else None) or _service_of(endpoint)
            structure[s] = min(1.0, structure.get(s, 0.0) + max(0.0, m.problem_share - m.baseline_share))
    for d in call_drops:
        structure[d.service] = max(structure.get(d.service, 0.0), d.drop)
        evidence.setdefault(d.service, []).append((_FIRST, d.describe()))
    errors = _error_rises(errors_baseline, errors_problem, n_baseline, n_problem, alpha, evidence)
    out = []
    for s in sorted(set(latency) | set(structure) | set(errors)):
        t = times.get(s)
        texts = [t for _, t in sorted(evidence.get(s, []), key=lambda e: -e[0])]
        parts = (latency.get(s, 0.0), structure.get(s, 0.0), errors.get(s, 0.0))
        if max(parts) <= 0:
            continue
        out.append(ServiceSuspect(
            service=s, score=float(max(parts)), evidence=tuple(texts[:8]), contribution_ns=float(contribution.get(s, 0.0)),
            latency=parts[0], structure=parts[1], errors=parts[2], severity=None if t is None else t.severity,
            p_value=None if t is None else t.p_value, calls=0 if t is None else t.problem_calls))
    out.sort(key=lambda x: (-x.score, -x.contribution_ns, x.service))
    return tuple(out)


def _contributions(mutations: Sequence[Mutation], endpoint: str, pooled: Sequence,
                   evidence: dict[str, list[tuple[float, str]]]) -> dict[str, float]:
    """Per service, the contribution of the module docstring, ns; its evidence added to ``evidence``."""
    structural: dict[str, float] = {}
    latency: dict[str, float] = {}
    pooled_share: dict[str, float] = {}

    def give(service: str | None, amount: float, text: str, into: dict) -> None:
        service = service or _service_of(endpoint)
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
                 f"each), no edge or operation changed significantly {tag}", latency)
            continue
        for service, added, text in parts:
            give(service, c * added / total, text, latency)
    for ch in pooled:
        if ch.added_ns > 0:
            give(ch.service, ch.added_ns, ch.describe(), pooled_share)
    return {s: structural.get(s, 0.0) + max(latency.get(s, 0.0), pooled_share.get(s, 0.0))
            for s in set(structural) | set(latency) | set(pooled_share)}


def _error_rises(errors_baseline: pl.DataFrame | None, errors_problem: pl.DataFrame | None, n_baseline: int,
                 n_problem: int, alpha: float, evidence: dict[str, list[tuple[float, str]]]) -> dict[str, float]:
    """Per service, the significant rise of the share of requests whose error originates in it."""
    if errors_problem is None or not errors_problem.height or n_problem <= 0 or n_baseline <= 0:
        return {}
    before = dict(errors_baseline.rows()) if errors_baseline is not None else {}
    services = errors_problem[S.SERVICE].to_list()
    cp = errors_problem["requests"].to_numpy()
    cb = np.array([before.get(s, 0) for s in services])
    out = {}
    for s, kp, kb, pv in zip(services, cp.tolist(), cb.tolist(),
                             proportion_p_values(cp, n_problem, cb, n_baseline).tolist()):
        rise = kp / n_problem - kb / n_baseline
        if rise > 0 and pv < alpha:
            out[s] = min(1.0, rise)
            evidence.setdefault(s, []).append(
                (_FIRST, f"errors originate in {s} in {kp / n_problem:.1%} of problem requests "
                         f"({kb / n_baseline:.1%} before)"))
    return out
