"""Which services the failing annotations of a check point to (not in the paper).

The paper counts failed assertions; it does not say where the problem is. A slow service slows
every caller up the call graph, so its callers' annotations fail too, and a network delay into a
service shows in its callers' client spans while its own server spans are as fast as ever
(TrainTicket and OnlineBoutique, issue 30: the failing annotations belonged to the callers). So:

1. **Origins**: a failing annotation is an origin when none of the operations its calls call
   (in the measured call graph of the checked calls: a span's parent operation to its own) has
   a failing annotation: the deepest failures, where the slowdown began, as an error's origin is
   the deepest error span (:func:`tracesleuth.analyses.compare.services.error_origins`).
2. **Attribution**: an origin's evidence goes to its own service; an origin that calls another
   service (a client span: the call view's ``server_service``), whose own annotations hold, is
   time spent between the two, in the network or the callee's queue: its evidence goes to the
   callee, and half of it to its own service (the caller's side of the call is not excluded).
3. **Score** of a service: the sum of the shares of failed assertions of the origins attributed
   to it (each in [0, 1]: an annotation that fails every window counts 1); services ranked by
   it, most suspicious first, ties by the number of failed assertions, then by name.

Measured (``tracesleuth evaluate annotate``, five splits): the injected service is in the top
three for 70 % of the 90 latency fault windows: all 50 of OnlineBoutique's (first in 34), 13 of
TrainTicket's 40 (its cpu_contention faults move its pass rate by about one point: 98.9 % against
100 % on normal minutes). Without step 2, the network delay into ``currencyservice`` ranked it
nowhere (its callers first).
"""

from __future__ import annotations

import polars as pl

from ... import schema as S
from .._contract import ServiceSuspect  # the shape every analysis's ``services`` has

__all__ = ["CALLER_SHARE", "ServiceSuspect", "call_graph", "rank_services"]

#: Share of a client span's evidence that stays with the calling service (step 2).
CALLER_SHARE = 0.5


def call_graph(frame: pl.DataFrame) -> dict[str, set]:
    """Operation -> the operations its calls call, from a measurement frame (:mod:`.measurements`)."""
    if frame.height == 0:
        return {}
    parents = frame.select(S.TRACE_ID, S.SPAN_ID, pl.col(S.OPERATION_KEY).alias("parent"))
    edges = (frame.select(S.TRACE_ID, pl.col(S.PARENT_SPAN_ID).alias(S.SPAN_ID), S.OPERATION_KEY)
             .drop_nulls(S.SPAN_ID).join(parents, on=[S.TRACE_ID, S.SPAN_ID])
             .select("parent", S.OPERATION_KEY).unique())
    graph: dict[str, set] = {}
    for parent, child in edges.iter_rows():
        if parent != child:
            graph.setdefault(parent, set()).add(child)
    return graph


def rank_services(checks, graph: dict[str, set]) -> tuple[ServiceSuspect, ...]:
    """The services ranked by the failing annotations of a check (module docstring).

    Parameters
    ----------
    checks : sequence of AnnotationCheck
    graph : dict of str to set of str
        :func:`call_graph` of the checked calls.

    Returns
    -------
    tuple of ServiceSuspect
        Most suspicious first; only services with evidence (``score``: step 3; ``evidence``: the
        origins attributed to it, in words).

    Examples
    --------
    >>> from tracesleuth.analyses.annotate.check import AnnotationCheck
    >>> def c(op, failed, calls=None):
    ...     return AnnotationCheck(op, "time", "clustered", op, 30, 1, 1 - failed, None, not failed, None, None,
    ...                            None, None, None, service=op.split(":")[0], calls_service=calls)
    >>> checks = [c("front:home", 1), c("front:GET cart", 1, "cart"), c("cart:get", 0)]
    >>> [(s.service, s.score) for s in rank_services(checks, {"front:home": {"front:GET cart"},
    ...                                                       "front:GET cart": {"cart:get"}})]
    [('cart', 1.0), ('front', 0.5)]
    """
    failing = {c.operation for c in checks if c.checked and not c.holds}
    scores: dict[str, float] = {}
    failed: dict[str, int] = {}
    evidence: dict[str, list] = {}

    def give(service: str, share: float, n: int, why: str) -> None:
        scores[service] = scores.get(service, 0.0) + share
        failed[service] = failed.get(service, 0) + n
        evidence.setdefault(service, []).append(why)

    for c in checks:
        if not c.checked or c.holds or any(child in failing for child in graph.get(c.operation, ())):
            continue
        n_failed = c.n_windows - c.n_passed
        share = n_failed / c.n_windows
        what = f"{c.operation} {c.metric}: {n_failed}/{c.n_windows} assertions fail"
        if c.calls_service and c.calls_service != c.service:
            give(c.calls_service, share, n_failed, f"{what} (its calls to {c.calls_service})")
            give(c.service, CALLER_SHARE * share, n_failed, f"{what} (calls {c.calls_service})")
        else:
            give(c.service, share, n_failed, what)
    order = sorted(scores, key=lambda s: (-scores[s], -failed[s], s))
    return tuple(ServiceSuspect(s, scores[s], tuple(evidence[s])) for s in order)
