"""The "Where it went wrong" report section of a root-cause localization, built from its result.

Mi et al., Sci China Inf Sci 2012: the services ranked most suspicious first with their evidence;
the series whose time rose within the window (beyond the paper, :mod:`tracesleuth.analyses.localize.changes`); the anomalous methods with their suspicious scores (the paper's Figure 8 as bars); per major
cluster, the normal/anomalous split by the squared prediction error against the Q-statistic; and
for the top methods, the Jensen-Shannon dissimilarity ratio of each instance (Figure 9). Nothing
here refits: every number comes from the fitted estimator's ``result_``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..document import Bullets, Code, Figure, KeyValues, Section, Strong, Table, Text, plot_text
from ...units import format_duration_ns
from ...analyses._contract import sections_from_result

__all__ = ["build_sections", "instance_ratio_figure", "localization_section", "suspicious_score_figure"]

#: Methods, clusters and instances shown at most.
MAX_ROWS = 15


def suspicious_score_figure(result: Any):
    """The anomalous methods' suspicious scores as horizontal bars (the paper's Figure 8).

    Parameters
    ----------
    result : LocalizationResult

    Returns
    -------
    plotly.graph_objects.Figure or None
        None when no method is anomalous.
    """
    import plotly.graph_objects as go

    found = result.anomalous_methods[:MAX_ROWS]
    if not found:
        return None
    fig = go.Figure(go.Bar(y=[plot_text(m.operation_key) for m in found], x=[m.score for m in found],
                           orientation="h", marker_color="#e5704b",
                           customdata=[[m.tested, m.effect] for m in found],
                           hovertemplate="%{y}: anomalous in %{x} of %{customdata[0]} clusters, effect "
                                         "%{customdata[1]:.2f}<extra></extra>"))
    fig.update_layout(xaxis_title="suspicious score (clusters where anomalous)", height=120 + 34 * len(found),
                      margin={"l": 20, "r": 20, "t": 30, "b": 40}, yaxis={"autorange": "reversed"})
    return fig


def instance_ratio_figure(result: Any, operation_key: str):
    """The dissimilarity ratio of each instance of one method (the paper's Figure 9).

    Parameters
    ----------
    result : LocalizationResult
    operation_key : str
        One of the top methods.

    Returns
    -------
    plotly.graph_objects.Figure or None
        None when the method ran on fewer than three instances (the ratios tell nothing then).
    """
    import plotly.graph_objects as go

    rows = [i for i in result.instances if i.operation_key == operation_key]
    if len(rows) < 3:
        return None
    fig = go.Figure(go.Bar(x=[plot_text(i.instance) for i in rows], y=[i.dissimilarity_ratio for i in rows],
                           marker_color=["#e5704b" if i.stands_out else "#8da0cb" for i in rows]))
    fig.update_layout(yaxis_title="dissimilarity ratio", height=320, margin={"l": 20, "r": 20, "t": 30, "b": 40})
    return fig


def _when(ns: int | None) -> str:
    if ns is None:
        return "—"
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="seconds")


def localization_section(result: Any) -> Section:
    """The "Where it went wrong" section of a :class:`LocalizationResult`.

    Parameters
    ----------
    result : LocalizationResult

    Returns
    -------
    Section
        Key figures (and, first, why there is no answer when there is none), the ranked services,
        the anomalous methods (table and score bars), the major clusters' SPE splits, and the
        instance dissimilarity ratios of the top methods.
    """
    section = Section("Where it went wrong: anomalous methods and instances", key="localize")
    share = result.n_anomalous / result.n_analysed if result.n_analysed else 0.0
    top = result.services[0] if result.services else None
    section.add(KeyValues([
        ("endpoints", ", ".join(result.endpoints)), ("requests", result.n_requests),
        ("call sequences (clusters)", result.n_clusters), ("major clusters", len(result.clusters)),
        ("requests analysed", result.n_analysed), ("anomalous requests", f"{result.n_anomalous:,} ({share:.1%})"),
        ("series tested for a change within the window", result.n_series or "—"),
        ("most suspicious service", Code(top.service) if top else "none"),
        ("since", _when(result.onset_ns))]))
    found = result.anomalous_methods
    if not result.services:
        section.add(Text([Strong(result.describe().splitlines()[1])]))
    for caveat in result.caveats:
        section.add(Text([Strong(str(caveat))]))
    if result.notes:
        section.add(Bullets([f"Note: {n}" for n in result.notes]))
    if result.services:
        section.add(Table(["rank", "service", "score", "evidence"],
                          [[k + 1, Code(s.service), s.score, "; ".join(s.evidence)]
                           for k, s in enumerate(result.services[:MAX_ROWS])],
                          caption="Services, most suspicious first (score: " + (
                              "the largest slowdown attributed to the service, x-fold: a rise within the window or "
                              "an anomalous method's anomalous / normal median" if result.n_series else
                              "the suspicious score of the service's most suspicious method") + "; higher = more "
                              "suspicious)"))
    if result.changes:
        section.add(Table(
            ["service", "series", "rise", "median before", "median after", "calls before / after", "since",
             "p-value", "for the window"],
            [[Code(c.service), Code(c.key if c.kind == "self" else f"gap {c.key}"), f"{c.rise:,.1f}x",
              format_duration_ns(c.median_before_ns), format_duration_ns(c.median_after_ns),
              f"{c.calls_before:,} / {c.calls_after:,}", _when(c.onset_ns), c.p_value, c.p_family]
             for c in result.changes[:MAX_ROWS]],
            caption=f"Changes within the window: {len(result.changes):,} of {result.n_series:,} series (self times "
                    "and gaps, over all requests) slower after a change point (one-sided Mann-Whitney; 'for the "
                    "window': corrected for the cuts and series tried), largest rise first. A gap points to the "
                    "callee, or to the caller when its calls to other services rose too."))
    if found:
        section.add(Table(
            ["rank", "method", "service", "score", "effect", "p-value", "normal median", "anomalous median"],
            [[k + 1, Code(m.operation_key), m.service, f"{m.score} of {m.tested}", m.effect, m.p_value,
              format_duration_ns(m.normal_median_ns), format_duration_ns(m.anomalous_median_ns)]
             for k, m in enumerate(found[:MAX_ROWS])],
            caption="Anomalous methods (Mann-Whitney U, normal vs anomalous requests of each cluster; score: "
                    "clusters where anomalous of those where tested; effect: probability that an anomalous "
                    "request's latency exceeds a normal one's)"))
        section.add(Figure(suspicious_score_figure(result), caption="Suspicious scores of the anomalous methods"))
    if result.clusters:
        section.add(Table(
            ["cluster", "endpoint", "call sequence", "requests", "merged", "methods", "split on", "components",
             "anomalous", "anomalous methods", "note"],
            [[c.cluster, Code(c.endpoint), Code(c.sequence), c.n_requests,
              f"{c.n_merged_requests:,} from {c.n_merged_clusters}" if c.n_merged_clusters else "—", c.n_methods,
              "—" if c.n_split_methods is None else c.n_split_methods,
              "—" if c.n_components is None else c.n_components, c.n_anomalous,
              ", ".join(c.anomalous_methods) or "—", str(c.note or "")] for c in result.clusters[:MAX_ROWS]],
            caption="Major clusters: requests with the squared prediction error above the Q-statistic (or an extreme "
                    "T²) are anomalous"))
    for key in dict.fromkeys(i.operation_key for i in result.instances):
        rows = [i for i in result.instances if i.operation_key == key]
        fig = instance_ratio_figure(result, key)
        if fig is None:
            continue
        section.add(Table(["instance", "dissimilarity ratio", "stands out", "calls", "median latency"],
                          [[Code(i.instance), i.dissimilarity_ratio, "yes" if i.stands_out else "",
                            i.n_calls, format_duration_ns(i.median_ns)] for i in rows[:MAX_ROWS]],
                          caption=f"Instances of {key} in the anomalous requests (Jensen-Shannon dissimilarity "
                                  "ratio; an instance stands out at instance_factor, default 1.5, times the median ratio or more)"))
        section.add(Figure(fig, caption=f"Dissimilarity ratio of each instance of {key}"))
    return section


build_sections = sections_from_result(localization_section, "RootCauseLocalization")
