"""The "What changed" report section of a request-flow comparison, built from its result.

It opens the report when ``tracesleuth analyze PROBLEM --baseline BASELINE`` runs: the services
ranked most suspicious first with their evidence, the ranked mutations (Sambasivan et al., NSDI
2011, Section 3.4), and for the top mutations the edges and operations whose time changed, before
and after side by side (BubbleUp-style: the same quantity in the baseline and problem periods).
Nothing here refits: every number comes from the fitted estimator's ``result_``.
"""

from __future__ import annotations

from typing import Any

from ...report.document import (Bullets, Code, Figure, KeyValues, Section, Strong, Table, Text, plot_text,
                                shorten)
from ...units import NS_PER_MS, format_duration_ns
from .._contract import ReportContext

__all__ = ["build_sections", "changed_edges_figure", "what_changed_section"]

#: Mutations and changed edges shown at most.
MAX_ROWS = 10


def _ns(value: float | None) -> str:
    return "—" if value is None else format_duration_ns(value)



def changed_edges_figure(mutation: Any):
    """Before/after mean time of a mutation's changed edges and operations (a plotly bar chart).

    Parameters
    ----------
    mutation : Mutation
        Its ``edges`` (call latency, and the gap into the callee where known) and ``operations``
        (exclusive time) give the bars.

    Returns
    -------
    plotly.graph_objects.Figure or None
        None when the mutation has no changed edge or operation.
    """
    import plotly.graph_objects as go

    labels, before, after = [], [], []
    for e in mutation.edges[:MAX_ROWS]:
        labels.append(plot_text(f"{e.caller} → {e.callee}"))
        before.append(e.baseline_mean_ns / NS_PER_MS)
        after.append(e.problem_mean_ns / NS_PER_MS)
    for o in mutation.operations[:MAX_ROWS]:
        labels.append(plot_text(f"self time of {o.operation_key}"))
        before.append(o.baseline_mean_ns / NS_PER_MS)
        after.append(o.problem_mean_ns / NS_PER_MS)
    if not labels:
        return None
    fig = go.Figure([go.Bar(name="baseline", y=labels, x=before, orientation="h", marker_color="#8da0cb"),
                     go.Bar(name="problem", y=labels, x=after, orientation="h", marker_color="#e5704b")])
    fig.update_layout(barmode="group", xaxis_title="mean time (ms)", height=120 + 46 * len(labels),
                      margin={"l": 20, "r": 20, "t": 30, "b": 40}, yaxis={"autorange": "reversed"},
                      legend={"orientation": "h"})
    return fig


def what_changed_section(result: Any) -> Section:
    """The "What changed" section of a :class:`ComparisonResult`.

    Parameters
    ----------
    result : ComparisonResult

    Returns
    -------
    Section
        Key figures, the ranked services with their evidence, the ranked mutations, the self
        times and gaps that rose pooled over all categories, and for each
        of the top three mutations its precursor, where its structure diverges, its changed
        edges and operations (table and before/after figure) and the low-level differences.
    """
    section = Section("What changed", key="what-changed")
    section.add(KeyValues([("endpoint", Code(result.endpoint)), ("baseline requests", result.n_baseline),
                           ("problem requests", result.n_problem), ("mutations", len(result.mutations))]))
    if not result.significant:
        reason = result.reason or "no significant change"
        section.add(Text([Strong(reason[:1].upper() + reason[1:])]))
    if result.services:
        section.add(Table(["rank", "service", "score", "evidence"],
                          [[k + 1, Code(s.service), s.score, "; ".join(s.evidence)]
                           for k, s in enumerate(result.services[:MAX_ROWS])],
                          caption="Services, most suspicious first (score: share of the slowdown attributed to "
                                  "the service; higher = more suspicious)"))
    if result.mutations:
        section.add(Table(
            ["rank", "kind", "category", "baseline requests", "problem requests", "mean before", "mean after",
             "contribution", "p-value"],
            [[m.rank, m.kind, Code(shorten(m.category)), m.baseline_count, m.problem_count, _ns(m.baseline_mean_ns),
              _ns(m.problem_mean_ns), _ns(m.contribution_ns), m.p_value] for m in result.mutations[:MAX_ROWS]],
            caption="Mutations ranked by their expected contribution to the slowdown (requests x added time)"))
    pooled = sorted(getattr(result, "pooled", ()), key=lambda c: -c.added_ns)[:MAX_ROWS]
    if pooled:
        section.add(Table(
            ["time", "where", "service", "mean before", "mean after", "calls before", "calls after", "P(slower)",
             "added", "p-value"],
            [["self time" if c.kind == "self" else "gap", Code(c.key), Code(c.service), _ns(c.baseline_mean_ns),
              _ns(c.problem_mean_ns), c.baseline_calls, c.problem_calls, c.auc, _ns(c.added_ns), c.p_value]
             for c in pooled],
            caption="Self times and edge gaps that rose, pooled over all categories (stratified rank-sum test; "
                    "P(slower): probability that a problem call is slower than a baseline call)"))
    for m in result.mutations[:3]:
        sub = [Strong(f"Mutation {m.rank} ({m.kind}): "), Code(shorten(m.category, 200))]
        section.add(Text(sub))
        items = []
        if m.precursors:
            p = m.precursors[0]
            items.append(["precursor: ", Code(shorten(p.category, 200)),
                          f" (edit distance {p.edit_distance}, {p.baseline_count:,} -> {p.problem_count:,} requests, "
                          f"mean {_ns(p.mean_ns)})"])
        if m.divergence:
            items.append(["structure diverges at ", Code(m.divergence),
                          f" (service {m.divergence_service})" if m.divergence_service else ""])
        items += [f"low-level difference: {w}" for w in m.low_level]
        if items:
            section.add(Bullets(items))
        rows = [[Code(f"{e.caller} -> {e.callee}"), e.callee_service, _ns(e.baseline_mean_ns), _ns(e.problem_mean_ns),
                 _ns(e.baseline_gap_ns), _ns(e.problem_gap_ns), e.p_value] for e in m.edges[:MAX_ROWS]]
        if rows:
            section.add(Table(["edge", "callee service", "mean before", "mean after", "gap before", "gap after",
                               "p-value"], rows, caption="Edges whose latency changed (gap: network and queueing)"))
        rows = [[Code(o.operation_key), _ns(o.baseline_mean_ns), _ns(o.problem_mean_ns), o.p_value]
                for o in m.operations[:MAX_ROWS]]
        if rows:
            section.add(Table(["operation", "self time before", "self time after", "p-value"], rows,
                              caption="Operations whose exclusive (self) time changed"))
        fig = changed_edges_figure(m)
        if fig is not None:
            section.add(Figure(fig, caption=f"Mutation {m.rank}: mean time before and after"))
    if result.notes:
        section.add(Bullets([f"Note: {n}" for n in result.notes]))
    return section


def build_sections(fitted: Any, context: ReportContext) -> list[Section]:
    """The report sections of a fitted :class:`RequestFlowComparison` (the registry's ``section``).

    Parameters
    ----------
    fitted : RequestFlowComparison or ComparisonResult
    context : ReportContext
        Unused beyond the contract: every number comes from the result.

    Returns
    -------
    list of Section
        The "What changed" section.
    """
    result = getattr(fitted, "result_", fitted)
    return [what_changed_section(result)]
