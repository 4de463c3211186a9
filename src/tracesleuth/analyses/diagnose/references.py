"""Two simple rules the diagnosis must beat (issue 28's references), told the same moment ``--at``.

Both compare a problem period around the moment (75 s before it to 45 s after) with the 5 minutes
of traffic before that, as a user looking at the dashboards around the moment would:

* :func:`time_rule` - each service's score is its largest relative rise of the median self time of
  its spans or of the median gap on the edges into it;
* :func:`log_rule` - each service's score is the rise of its error-level share of log records plus
  the share of its baseline log templates (code locations) that vanish in the problem period.
"""

from __future__ import annotations

import polars as pl

from ... import schema as S
from .telemetry import ERROR_SEVERITY, Period, Telemetry

__all__ = ["BEFORE_S", "AFTER_S", "BASELINE_S", "log_rule", "reference_periods", "time_rule"]

#: The problem period of the references: from BEFORE_S before the moment to AFTER_S after it.
BEFORE_S, AFTER_S = 75, 45
#: The baseline of the references: this long before the problem period.
BASELINE_S = 300


def reference_periods(at_ns: int) -> tuple[Period, Period]:
    """(problem, baseline) of the references for a moment ``at_ns``."""
    start = at_ns - BEFORE_S * 10**9
    return (Period(start, at_ns + AFTER_S * 10**9, 0, "reference"),
            Period(start - BASELINE_S * 10**9, start, 0, "reference"))


def _ranked(scores: pl.DataFrame) -> list[str]:
    return scores.filter(pl.col("score") > 0).sort(["score", S.SERVICE], descending=[True, False])[S.SERVICE].to_list()


def time_rule(problem: Telemetry, baseline: Telemetry) -> list[str]:
    """Services by their largest rise of median self time or of the median gap into them."""
    def medians(t: Telemetry) -> pl.DataFrame:
        own = t.spans.filter(pl.col("own_ns") > 0).group_by(S.SERVICE).agg(pl.col("own_ns").median().alias("own"))
        gap = (t.spans.filter(pl.col("gap_ns") > 0).group_by(pl.col("callee").alias(S.SERVICE))
               .agg(pl.col("gap_ns").median().alias("gap")))
        return own.join(gap, on=S.SERVICE, how="full", coalesce=True)
    both = medians(problem).join(medians(baseline), on=S.SERVICE, how="inner", suffix="_b")
    rise = pl.max_horizontal((pl.col("own") / pl.col("own_b")).fill_null(0), (pl.col("gap") / pl.col("gap_b")).fill_null(0))
    return _ranked(both.select(S.SERVICE, (rise - 1).alias("score")))


def log_rule(problem: Telemetry, baseline: Telemetry) -> list[str]:
    """Services by the rise of their error-level share plus the share of their templates that vanish."""
    if not (problem.has_logs and baseline.has_logs):
        return []

    def shares(t: Telemetry) -> pl.DataFrame:
        return t.logs.group_by(S.SERVICE).agg((pl.col(S.SEVERITY_NUMBER) >= ERROR_SEVERITY).mean().alias("errors"),
                                              pl.col(S.TEMPLATE_ID).unique().alias("templates"))
    both = shares(problem).join(shares(baseline), on=S.SERVICE, how="full", coalesce=True, suffix="_b")
    vanished = (pl.col("templates_b").list.set_difference(pl.col("templates").fill_null(pl.lit([], pl.List(pl.Int64))))
                .list.len() / pl.col("templates_b").list.len().clip(1))
    score = (pl.col("errors").fill_null(0) - pl.col("errors_b").fill_null(0)).clip(0) + vanished.fill_null(0)
    return _ranked(both.select(S.SERVICE, score.alias("score")))
