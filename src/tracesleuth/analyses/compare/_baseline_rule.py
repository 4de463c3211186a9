"""The anchor to beat (issue 16, Targets): rank services by the relative rise of their time.

A deliberately simple rule, no statistics, no categories: for each service ``S``,

* ``self``: the mean exclusive (self) time of ``S``'s spans, per span, in each period;
* ``gap``: the mean gap (client span time outside the server span it calls: network and
  queueing) of the calls into ``S`` (``server_service == S``), per call, in each period;

and ``S``'s score is the larger of the two relative rises ``(problem - baseline) / (baseline +
1 ms)``, the 1 ms keeping a service absent from the baseline (mean 0) or one of microseconds
from a division by almost nothing. Services are ranked by score, highest first. The request-flow
comparison must rank the injected service first more often than this does
(:mod:`tracesleuth.evaluation.protocols.compare` prints both side by side).
"""

from __future__ import annotations

import polars as pl

from ... import schema as S
from ...units import NS_PER_MS

__all__ = ["rank_services_by_rise"]

#: Added to the baseline mean of the denominator, ns.
FLOOR_NS = NS_PER_MS


def _means(table) -> pl.DataFrame:
    calls = table.calls()
    own = calls.group_by(S.SERVICE).agg(pl.col(S.EXCLUSIVE_NS).mean().alias("self_ns"))
    gap = (calls.filter(pl.col(S.SERVER_SERVICE).is_not_null())
           .group_by(pl.col(S.SERVER_SERVICE).alias(S.SERVICE)).agg(pl.col(S.GAP_NS).mean().alias("gap_ns")))
    return own.join(gap, on=S.SERVICE, how="full", coalesce=True)


def rank_services_by_rise(problem, baseline) -> list[tuple[str, float]]:
    """Services ranked by the relative rise of their self time and of the gap of calls into them.

    Parameters
    ----------
    problem, baseline : TraceTable
        The two periods' trace tables (built by :func:`~tracesleuth.model.build_trace_table`,
        so that :meth:`~tracesleuth.model.TraceTable.calls` works).

    Returns
    -------
    list of (str, float)
        ``(service, score)``, highest score first (ties by name); a service seen in only one
        period counts 0 ns in the other.

    Examples
    --------
    >>> from tracesleuth.analyses.compare.synthetic import simulate_scenario
    >>> sc = simulate_scenario("slowed-handler", n_requests=300, random_state=0)
    >>> rank_services_by_rise(*sc.tables())[0][0] == sc.injected
    True
    """
    both = _means(problem).join(_means(baseline), on=S.SERVICE, how="full", coalesce=True, suffix="_b")
    both = both.fill_null(0.0).with_columns(
        ((pl.col("self_ns") - pl.col("self_ns_b")) / (pl.col("self_ns_b") + FLOOR_NS)).alias("self_rise"),
        ((pl.col("gap_ns") - pl.col("gap_ns_b")) / (pl.col("gap_ns_b") + FLOOR_NS)).alias("gap_rise"),
    ).with_columns(pl.max_horizontal("self_rise", "gap_rise").alias("score"))
    ranked = both.sort(["score", S.SERVICE], descending=[True, False])
    return list(zip(ranked[S.SERVICE].to_list(), ranked["score"].to_list()))
