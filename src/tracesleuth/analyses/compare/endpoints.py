"""Every endpoint at once: which endpoints to compare, and one service ranking merged over them.

A slowdown of one service shows in the endpoints whose requests pass through it, and a gateway's
single root operation (TrainTicket's ``/*``) hides the APIs behind it. :func:`compare_endpoints`
compares the root endpoint and every *inner endpoint* — the operation of a server span of
another service called directly by the root's service (the API a gateway forwards to) — that
has requests in both periods, and merges the endpoints' rankings (:func:`merge_services`).
Nothing about the fault is used to choose the endpoints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ...errors import EmptyDataError, TraceSleuthError

__all__ = ["EndpointsComparison", "compare_endpoints", "endpoints_of", "home_of", "merge_rankings", "merge_services"]


def endpoints_of(*spans) -> list[str]:
    """The root endpoint of each span set, then their inner endpoints (module docstring), in order
    of first appearance.

    Parameters
    ----------
    *spans : SpanReadResult or pyarrow.Table
        One span set per period.

    Returns
    -------
    list of str
        Operation keys ``service:operation``.
    """
    from ...model import build_trace_table

    found: dict[str, None] = {}
    for s in spans:
        try:
            table = build_trace_table(s)
        except TraceSleuthError:
            continue
        found.setdefault(table.endpoint)
        root_service = table.endpoint.split(":", 1)[0]
        inner = table.calls().filter((pl.col("service") != root_service)
                                     & pl.col("caller_key").str.starts_with(root_service + ":"))
        for key in inner["operation_key"].unique(maintain_order=True).to_list():
            found.setdefault(key)
    return list(found)


def merge_rankings(rankings: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    """``[(service, score), ...]`` per endpoint -> one list, scores summed, highest first
    (ties by name)."""
    total: dict[str, float] = {}
    for ranking in rankings:
        for service, score in ranking:
            if score is not None and math.isfinite(score):
                total[service] = total.get(service, 0.0) + float(score)
    return sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))


def merge_services(results: dict) -> list[tuple[str, float, str]]:
    """One ranking from the endpoints' :class:`~.services.ServiceSuspect` lists, most suspicious first.

    The endpoints overlap (an inner endpoint's requests are parts of the root's), so scores are
    not added up, which would favour a service seen from many endpoints over one seen once, nor
    is their largest taken, which would favour the noisiest estimate of a small endpoint. A
    service's merged score is its score on its *home* endpoint: the one whose problem requests
    hold the most of its spans (``ComparisonResult.service_calls``), the best-supported view of
    it (the root, when the root's requests hold all its calls), whether it is suspected there or
    not; for a service with no span in any problem period (suspected for calls it no longer
    receives), the endpoint where it scores highest. Services with neither score nor
    contribution at home are left out. Ties: the larger contribution, then the name.

    Parameters
    ----------
    results : dict of str to ComparisonResult
        Per endpoint.

    Returns
    -------
    list of (str, float, str)
        ``(service, merged score, home endpoint)``.
    """
    services = {x for r in results.values() for x in dict(r.service_calls)} | {
        x.service for r in results.values() for x in r.services}
    merged = []
    for service in services:
        endpoint, support = home_of(results, service)
        if support[1] > 0 or support[2] > 0:
            merged.append((service, support, endpoint))
    merged.sort(key=lambda t: (-t[1][1], -t[1][2], t[0]))
    return [(s, v[1], e) for s, v, e in merged]


def home_of(results: dict, service: str) -> tuple[str, tuple[int, float, float]]:
    """``service``'s home endpoint (:func:`merge_services`) and its support there: ``(spans in
    the problem period, score, contribution)``."""
    def support(result) -> tuple[int, float, float]:
        x = next((x for x in result.services if x.service == service), None)
        return (dict(result.service_calls).get(service, 0), 0.0 if x is None else x.score,
                0.0 if x is None else x.contribution_ns)

    return max(((e, support(r)) for e, r in results.items()), key=lambda es: es[1])


@dataclass(frozen=True)
class EndpointsComparison:
    """The comparisons of :func:`compare_endpoints`.

    Attributes
    ----------
    results : dict of str to ComparisonResult
        Per endpoint compared, in :func:`endpoints_of` order.
    services : tuple of (str, float)
        The merged ranking, most suspicious first (:func:`merge_services`).
    skipped : dict of str to str
        Endpoints not compared, with the reason (no request in one period, one request...).
    homes : dict of str to str
        Each ranked service's home endpoint (:func:`merge_services`).
    """

    results: dict
    services: tuple
    skipped: dict = field(default_factory=dict)
    homes: dict = field(default_factory=dict)

    def suspect(self, service: str):
        """``service``'s home endpoint and its :class:`~.services.ServiceSuspect` there (None when
        it is not suspected at home)."""
        endpoint, _ = home_of(self.results, service)
        return endpoint, next((x for x in self.results[endpoint].services if x.service == service), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: ``services`` ({service, score, home, endpoints}), ``endpoints`` (each
        result's ``to_dict()``) and ``skipped``."""
        where = {s: [e for e, r in self.results.items() if any(x.service == s for x in r.services)]
                 for s, _ in self.services}
        return {"services": [{"service": s, "score": v, "home": self.homes.get(s), "endpoints": where[s]}
                             for s, v in self.services],
                "endpoints": {e: r.to_dict() for e, r in self.results.items()}, "skipped": dict(self.skipped)}


def compare_endpoints(problem_spans, baseline_spans, *, endpoints: list[str] | None = None,
                      **settings) -> EndpointsComparison:
    """Compare the two periods on every endpoint (module docstring) and merge the rankings.

    Parameters
    ----------
    problem_spans, baseline_spans : SpanReadResult or pyarrow.Table
    endpoints : list of str, optional
        Default: :func:`endpoints_of` both periods.
    **settings
        :class:`~.analysis.RequestFlowComparison` settings.

    Returns
    -------
    EndpointsComparison

    Raises
    ------
    EmptyDataError
        When no endpoint has requests in both periods.
    ParameterError
        A setting is not allowed.
    """
    from .._contract import check_settings
    from .analysis import RequestFlowComparison

    check_settings(RequestFlowComparison(**settings))  # a bad setting fails before any table is built
    if endpoints is None:
        endpoints = endpoints_of(problem_spans, baseline_spans)
    return _compare_tables(_tables_of(problem_spans, baseline_spans, endpoints), **settings)


def _tables_of(problem_spans, baseline_spans, endpoints) -> dict:
    """``{endpoint: (problem table, baseline table) or why there is none}``, in ``endpoints`` order."""
    from ...model import build_trace_table

    tables: dict = {}
    for endpoint in endpoints:
        try:
            tables[endpoint] = (build_trace_table(problem_spans, endpoint), build_trace_table(baseline_spans, endpoint))
        except TraceSleuthError as exc:  # no request in one period
            tables[endpoint] = str(exc)
    return tables


def _compare_tables(tables: dict, **settings) -> EndpointsComparison:
    """:func:`compare_endpoints` on the trace tables of :func:`_tables_of`."""
    from .._contract import check_settings
    from .analysis import RequestFlowComparison

    check_settings(RequestFlowComparison(**settings))  # a bad setting fails once, not per endpoint
    results, skipped = {}, {}
    for endpoint, pair in tables.items():
        if isinstance(pair, str):
            skipped[endpoint] = pair
            continue
        try:
            results[endpoint] = RequestFlowComparison(**settings).fit(*pair).result_
        except TraceSleuthError as exc:  # a single request...
            skipped[endpoint] = str(exc)
    if not results:
        raise EmptyDataError("No endpoint has requests in both periods to compare"
                             + (f" ({len(skipped)} skipped)" if skipped else "") + ".")
    merged = merge_services(results)
    return EndpointsComparison(results=results, services=tuple((s, v) for s, v, _ in merged), skipped=skipped,
                               homes={s: e for s, _, e in merged})
