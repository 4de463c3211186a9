"""The "What changed" report section of a request-flow comparison, built from its result.

It opens the report when ``tracesleuth analyze PROBLEM --baseline BASELINE`` runs: the services
ranked most suspicious first with their evidence, the ranked mutations (Sambasivan et al., NSDI
2011, Section 3.4), and for the top mutations their request-flow graph beside their precursor's
with the changed subtrees and edges highlighted (:func:`flow_graph_figure`; Spectroscope shows
mutations and precursors side by side, Section 4), and the edges and operations whose time
changed, before and after side by side (BubbleUp-style: the same quantity in the baseline and
problem periods). Nothing here refits: every number comes from the fitted estimator's
``result_``.
"""

from __future__ import annotations

from typing import Any

from ..document import (Bullets, Code, Figure, KeyValues, Section, Strong, Table, Text, plot_text,
                                shorten)
from ...units import NS_PER_MS, format_duration_ns
from ...analyses._contract import sections_from_result

__all__ = ["build_sections", "changed_edges_figure", "flow_graph_figure", "what_changed_section"]

#: Mutations and changed edges shown at most.
MAX_ROWS = 10
#: Nodes drawn per request-flow graph at most (the first in preorder).
MAX_GRAPH_NODES = 150
#: Colours: a node or edge that changed on the mutation's side, on the precursor's side, an
#: edge or operation whose time changed, and everything else.
_ADDED, _REMOVED, _SLOWER, _PLAIN = "#e5704b", "#4c72b0", "#d4a017", "#9a9a9a"


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


def _graph_traces(graph: Any, changed_color: str, slower_edges: set, slower_ops: set):
    """Plotly traces of one :class:`~tracesleuth.analyses.compare.mutations.FlowGraph`, drawn as an indented call tree (depth
    across, preorder down: every node on its own row, so that large requests stay legible), the
    number of nodes drawn and their largest depth."""
    import plotly.graph_objects as go

    n = min(len(graph.keys), MAX_GRAPH_NODES)
    depth = []
    for i in range(n):
        p = graph.parents[i]
        depth.append(0 if p < 0 else depth[p] + 1)
    changed = set(graph.changed)
    lines: dict[tuple[str, float], list] = {}
    for i in range(1, n):
        p = graph.parents[i]
        if p < 0 or p >= n:
            continue
        key = (graph.keys[p], graph.keys[i])
        style = ((changed_color, 3.0) if i in changed else (_SLOWER, 3.0) if key in slower_edges else (_PLAIN, 1.0))
        xs, ys = lines.setdefault(style, ([], []))
        xs += [depth[p], depth[p], depth[i], None]
        ys += [-p, -i, -i, None]
    traces = [go.Scatter(x=xs, y=ys, mode="lines", line={"color": color, "width": width}, hoverinfo="skip",
                         showlegend=False) for (color, width), (xs, ys) in lines.items()]
    colors = [changed_color if i in changed else _SLOWER if graph.keys[i] in slower_ops else _PLAIN
              for i in range(n)]
    sizes = [14 if i == graph.divergence else 9 for i in range(n)]
    outline = ["#222222" if i == graph.divergence else c for i, c in enumerate(colors)]
    labels = [plot_text(shorten(graph.keys[i], 60)) for i in range(n)]
    traces.append(go.Scatter(
        x=depth, y=[-i for i in range(n)], mode="markers+text", text=labels, textposition="middle right",
        textfont={"size": 10}, hovertext=[plot_text(k) for k in graph.keys[:n]], hoverinfo="text", showlegend=False,
        cliponaxis=False, marker={"color": colors, "size": sizes, "line": {"color": outline, "width": 2}}))
    return traces, n, max(depth, default=0)


def flow_graph_figure(mutation: Any):
    """A mutation's request-flow graph beside its precursor's, changes highlighted (a plotly figure).

    Each graph is an indented call tree (one node per span of the category's structure: depth
    across, preorder down). On the mutation's side the subtrees its precursor lacks are drawn in
    orange-red and the divergence node enlarged with a dark outline; on the precursor's side the
    subtrees the mutation lacks are blue; on either side the edges and operations whose time
    rose significantly inside the mutation (:attr:`~tracesleuth.analyses.compare.mutations.Mutation.edges`,
    :attr:`~tracesleuth.analyses.compare.mutations.Mutation.operations`) are amber. A response-time mutation has one graph.
    At most :data:`MAX_GRAPH_NODES` nodes per graph are drawn.

    Parameters
    ----------
    mutation : Mutation

    Returns
    -------
    plotly.graph_objects.Figure or None
        None when the mutation carries no graph (ranked beyond ``top_k``).
    """
    from plotly.subplots import make_subplots

    if mutation.graph is None:
        return None
    slower_edges = {(e.caller, e.callee) for e in mutation.edges}
    slower_ops = {o.operation_key for o in mutation.operations}
    sides = [("mutation" if mutation.kind == "structural" else "category", mutation.graph, _ADDED)]
    if mutation.precursor_graph is not None:
        sides.append(("precursor", mutation.precursor_graph, _REMOVED))
    fig = make_subplots(rows=1, cols=len(sides), horizontal_spacing=0.04,
                        subplot_titles=[f"{name} ({min(len(g.keys), MAX_GRAPH_NODES)} of {len(g.keys)} nodes)"
                                        if len(g.keys) > MAX_GRAPH_NODES else name for name, g, _ in sides])
    rows = 0
    for col, (_, graph, color) in enumerate(sides, start=1):
        traces, n, depth = _graph_traces(graph, color, slower_edges, slower_ops)
        rows = max(rows, n)
        for t in traces:
            fig.add_trace(t, row=1, col=col)
        fig.update_xaxes(visible=False, range=[-0.5, depth + 6], row=1, col=col)
        fig.update_yaxes(visible=False, range=[-rows - 0.5, 0.8], row=1, col=col)
    fig.update_layout(height=110 + 20 * rows, margin={"l": 10, "r": 10, "t": 40, "b": 10}, showlegend=False,
                      plot_bgcolor="white")
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
        of the top three mutations its precursor, where its structure diverges, both graphs with
        the changes highlighted, its changed edges and operations (table and before/after figure)
        and the low-level differences.
    """
    section = Section("What changed", key="what-changed")
    section.add(KeyValues([("endpoint", Code(result.endpoint)), ("baseline requests", result.n_baseline),
                           ("problem requests", result.n_problem), ("mutations", len(result.mutations))]))
    if not result.significant:
        reason = str(result.reason or "no significant change")
        section.add(Text([Strong(reason[:1].upper() + reason[1:])]))
    if result.services:
        section.add(Table(["rank", "service", "score", "time vs baseline", "p-value", "contribution", "evidence"],
                          [[k + 1, Code(s.service), s.score,
                            "—" if s.severity is None else f"x{1 + s.severity:.3g}",
                            "—" if s.p_value is None else f"{s.p_value:.2g}",
                            _ns(s.contribution_ns or None), "; ".join(s.evidence)]
                           for k, s in enumerate(result.services[:MAX_ROWS])],
                          caption="Services, most suspicious first (score: how far the service's behaviour departs "
                                  "from the baseline, the largest of its time's excess share, the share of requests "
                                  "or calls whose structure changed at it, and its rise of error origins; higher = "
                                  "more suspicious. Time vs baseline: its time against its own baseline speed, with "
                                  "the p-value of that rise. Contribution: the slowdown it accounts for, Spectroscope's "
                                  "currency)"))
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
        fig = flow_graph_figure(m)
        if fig is not None:
            section.add(Figure(fig, caption=(
                f"Mutation {m.rank} beside its precursor: subtrees only the mutation has in red, subtrees only "
                "the precursor has in blue, the divergence node enlarged, edges and operations whose time rose "
                "in amber" if m.precursor_graph is not None else
                f"Mutation {m.rank}: its request-flow graph, edges and operations whose time rose in amber")))
        fig = changed_edges_figure(m)
        if fig is not None:
            section.add(Figure(fig, caption=f"Mutation {m.rank}: mean time before and after"))
    if result.notes:
        section.add(Bullets([f"Note: {n}" for n in result.notes]))
    return section


build_sections = sections_from_result(what_changed_section, "RequestFlowComparison")
