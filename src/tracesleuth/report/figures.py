"""Plotly figures of the report, built from results and data already computed (never re-analysing).

* :func:`latency_distribution_figure` - request latencies (histogram and KDE) with the degraded
  interval, its split points and sub-intervals;
* :func:`latency_by_group_figure` - the same, stacked by a grouping such as the ground truth;
* :func:`latency_over_time_figure` - a heatmap of request latency against time (BubbleUp-style);
* :func:`request_gantt_figure` - one request's spans as a Gantt chart (from :func:`request_spans`),
  the spans a pattern names highlighted, deep call trees collapsible by depth;
  :func:`gantt_x_range_ms` gives several charts one time scale.

Every string taken from a trace is escaped with :func:`~tracesleuth.report.document.plot_text`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import polars as pl

from .. import schema as S
from ..units import NS_PER_MS, format_duration_ns
from .document import plot_text

__all__ = ["SERVICE_COLORS", "SUB_INTERVAL_COLORS", "gantt_x_range_ms", "latency_by_group_figure",
           "latency_distribution_figure", "latency_histogram", "latency_over_time_figure", "mark_latency_bands",
           "operation_keys_named", "request_gantt_figure", "request_spans", "sub_interval_color"]

#: Colours of sub-intervals (index k takes colour k modulo the length).
SUB_INTERVAL_COLORS = ("#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#2ca02c")
#: Colours of services in Gantt charts.
SERVICE_COLORS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                  "#7f7f7f", "#d62728", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")
#: At most this many latencies are used for the KDE (a seeded sample beyond that).
KDE_SAMPLE = 20_000
#: Spans shown in one Gantt chart at most (the earliest in call-tree order).
MAX_GANTT_SPANS = 400
#: A Gantt chart with more rows than this opens collapsed to the deepest level that fits (its
#: depth buttons expand it).
MAX_EXPANDED_ROWS = 40
#: Colour of the outline of the spans a pattern names.
HIGHLIGHT_COLOR = "#111111"
#: Time and latency bins of the latency-over-time heatmap at most.
HEATMAP_TIME_BINS, HEATMAP_LATENCY_BINS = 60, 40
#: Attributes listed in a span's hover text at most.
MAX_HOVER_ATTRIBUTES = 6
#: Characters of an attribute value shown in hover text at most.
MAX_HOVER_VALUE = 100
#: Namespaces of OpenTelemetry's resource semantic conventions: attributes of the process that
#: emitted a span (the same on all its spans; its service and instance are shown already), left
#: out of the hover text.
RESOURCE_NAMESPACES = ("service.", "telemetry.", "host.", "process.", "os.", "k8s.", "container.", "cloud.",
                       "deployment.")


def sub_interval_color(index: int, alpha: float | None = None) -> str:
    """Colour of sub-interval ``index`` (``rgba`` with ``alpha`` when given)."""
    color = SUB_INTERVAL_COLORS[index % len(SUB_INTERVAL_COLORS)]
    return color if alpha is None else _with_alpha(color, alpha)


def _with_alpha(color: str, alpha: float) -> str:
    """``#rrggbb`` as ``rgba(r,g,b,alpha)``."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def latency_histogram(latency_ns: np.ndarray, *, max_bins: int = 160, min_bins: int = 20
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Histogram of latencies with Freedman-Diaconis bins, clamped to ``[min_bins, max_bins]``.

    Returns
    -------
    counts : ndarray of shape (n_bins,)
    edges_ns : ndarray of shape (n_bins + 1,), float64 ns
    """
    x = np.asarray(latency_ns, dtype=np.float64)
    if x.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(1)
    lo, hi = float(x.min()), float(x.max())
    if hi <= lo:
        hi = lo + 1.0
    q75, q25 = np.percentile(x, [75, 25])
    width = 2 * (q75 - q25) / np.cbrt(x.size)
    n_bins = int(np.clip(np.ceil((hi - lo) / width) if width > 0 else min_bins, min_bins, max_bins))
    counts, edges = np.histogram(x, bins=n_bins, range=(lo, hi))
    return counts, edges


def _kde(latency_ns: np.ndarray, grid_ns: np.ndarray) -> np.ndarray | None:
    """Gaussian KDE density (per ns) on ``grid_ns``; None when it cannot be estimated."""
    from scipy.stats import gaussian_kde

    x = np.asarray(latency_ns, dtype=np.float64)
    if x.size < 2 or np.ptp(x) == 0:
        return None
    if x.size > KDE_SAMPLE:
        x = np.random.default_rng(0).choice(x, KDE_SAMPLE, replace=False)
    try:
        return gaussian_kde(x)(grid_ns)
    except (np.linalg.LinAlgError, ValueError):
        return None


def latency_distribution_figure(latency_ns, result=None, *, title: str | None = None, log_y: bool = False):
    """Request latencies as a histogram and a KDE, with the analysis' latency bands marked.

    Parameters
    ----------
    latency_ns : array-like of shape (n_requests,)
        Request latencies, ns (missing values are left out).
    result : DegradationPatternsResult, optional
        Marks its degraded interval (outlined band), split points (dashed lines) and
        sub-intervals (shaded bands labelled ``#k``, in :func:`sub_interval_color`).
    title : str, optional
    log_y : bool, default=False
        Start with a logarithmic count axis (a button toggles it in the page).

    Returns
    -------
    plotly.graph_objects.Figure
        x in milliseconds, y in requests per bin.
    """
    import plotly.graph_objects as go

    x = _finite_latencies(latency_ns)
    x = x[np.isfinite(x)]
    counts, edges = latency_histogram(x)
    fig = go.Figure()
    if counts.size:
        centers = (edges[:-1] + edges[1:]) / 2 / NS_PER_MS
        widths = float(np.diff(edges).mean()) / NS_PER_MS      # equal bins (np.histogram's range)
        fig.add_trace(go.Bar(x=centers, y=counts, width=widths, name="requests", marker_color="#8fb1d9",
                             marker_line_width=0, hovertemplate=_bin_hover(widths)))
        pad = 0.05 * (edges[-1] - edges[0])
        grid = np.linspace(max(edges[0] - pad, 0.0) if edges[0] >= 0 else edges[0] - pad, edges[-1] + pad, 400)
        density = _kde(x, grid)
        if density is not None:
            bin_ns = float(np.mean(np.diff(edges)))
            fig.add_trace(go.Scatter(x=grid / NS_PER_MS, y=density * x.size * bin_ns, mode="lines",
                                     name="KDE", line=dict(color="#1f4e8c", width=2), hoverinfo="skip"))
    mark_latency_bands(fig, result)
    _latency_layout(fig, title=title, log_y=log_y)
    return fig


def _bin_hover(width_ms: float) -> str:
    """Hover template of a histogram bar: its trace's name, count and latency bin (one template per
    trace, instead of a text per bar)."""
    return (f"%{{fullData.name}}: %{{y:,}} requests<br>latency %{{x:.1f}} ms ± {width_ms / 2:.3g} ms"
            "<extra></extra>")


def mark_latency_bands(fig, result) -> None:
    """Draw a result's degraded interval, sub-intervals and split points on a latency-axis figure.

    The interval is an outlined band with its bounds written above, each sub-interval a shaded
    band labelled ``#k`` in :func:`sub_interval_color`, each inner split point a dashed line.
    Nothing is drawn when ``result`` is None or has no interval.
    """
    import plotly.graph_objects as go

    if result is None or getattr(result, "interval", None) is None:
        return
    iv = result.interval
    fig.add_vrect(x0=iv.low_ns / NS_PER_MS, x1=iv.high_ns / NS_PER_MS, fillcolor="rgba(0,0,0,0)",
                  line=dict(color="#444", width=1.5), layer="above")
    fig.add_annotation(x=(iv.low_ns + iv.high_ns) / 2 / NS_PER_MS, y=1.0, yref="paper", yanchor="bottom",
                       text=f"degraded interval {plot_text(iv.describe())}", showarrow=False,
                       font=dict(size=12, color="#444"))
    for s in result.sub_intervals:
        fig.add_vrect(x0=s.low_ns / NS_PER_MS, x1=s.high_ns / NS_PER_MS,
                      fillcolor=sub_interval_color(s.index, 0.16), line_width=0, layer="below")
        fig.add_annotation(x=(s.low_ns + s.high_ns) / 2 / NS_PER_MS, y=0.94, yref="paper",
                           text=f"<b>#{s.index}</b>", showarrow=False,
                           font=dict(size=13, color=sub_interval_color(s.index)))
    inner = result.split_points[1:-1] if len(result.split_points) > 2 else ()
    for p in inner:
        fig.add_vline(x=p / NS_PER_MS, line=dict(color="#555", width=1, dash="dash"))
    if inner:  # a legend entry for the dashed lines
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="split point",
                                 line=dict(color="#555", width=1, dash="dash")))


def _latency_layout(fig, *, title: str | None, log_y: bool) -> None:
    fig.update_layout(
        title=dict(text=plot_text(title)) if title else None,
        xaxis=dict(title=dict(text="request latency (ms)")),
        yaxis=dict(title=dict(text="requests per bin"), type="log" if log_y else "linear"),
        bargap=0, height=420, margin=dict(l=60, r=20, t=70 if title else 60, b=50),
        legend=dict(orientation="h", yanchor="bottom", y=1.06, x=1, xanchor="right"),
        template="plotly_white", hovermode="closest",
        updatemenus=[dict(type="buttons", direction="right", x=0, xanchor="left", y=1.06, yanchor="bottom",
                          showactive=True, active=1 if log_y else 0, pad=dict(r=4, t=0, b=14),
                          buttons=[dict(label="linear", method="relayout", args=[{"yaxis.type": "linear"}]),
                                   dict(label="log", method="relayout", args=[{"yaxis.type": "log"}])])],
    )


def _finite_latencies(latency_ns) -> np.ndarray:
    """Latencies as float64 ns with NaN for missing values (None, null)."""
    if isinstance(latency_ns, pl.Series):
        latency_ns = latency_ns.cast(pl.Float64).to_numpy()
    a = np.asarray(latency_ns)
    if a.dtype == object:
        a = np.array([np.nan if v is None else v for v in a.ravel()], dtype=np.float64)
    return a.astype(np.float64, copy=False).ravel()


def latency_by_group_figure(latency_ns, groups, result=None, *, order: Sequence[str] | None = None,
                            colors: dict | None = None, title: str | None = None):
    """Stacked latency histogram of requests by group (e.g. the injected degradation).

    Parameters
    ----------
    latency_ns : array-like of shape (n_requests,)
    groups : array-like of shape (n_requests,)
        Group name of each request (escaped here).
    result : DegradationPatternsResult, optional
        Its bands are marked as in :func:`latency_distribution_figure`.
    order : sequence of str, optional
        Stacking order (bottom first); default sorted.
    colors : dict of str to str, optional
        Colour per group (the report's palettes).
    title : str, optional

    Returns
    -------
    plotly.graph_objects.Figure
    """
    import plotly.graph_objects as go

    x = _finite_latencies(latency_ns)
    g = np.asarray([str(v) for v in groups], dtype=object)
    ok = np.isfinite(x)
    x, g = x[ok], g[ok]
    counts, edges = latency_histogram(x)
    fig = go.Figure()
    names = list(order) if order is not None else sorted(set(g.tolist()))
    if counts.size:
        centers = (edges[:-1] + edges[1:]) / 2 / NS_PER_MS
        widths = float(np.diff(edges).mean()) / NS_PER_MS      # equal bins (np.histogram's range)
        for k, name in enumerate(names):
            c, _ = np.histogram(x[g == name], bins=edges)
            color = (colors or {}).get(name, SERVICE_COLORS[k % len(SERVICE_COLORS)])
            fig.add_trace(go.Bar(x=centers, y=c, width=widths, name=plot_text(name), marker_color=color,
                                 marker_line_width=0, hovertemplate=_bin_hover(widths)))
    mark_latency_bands(fig, result)
    _latency_layout(fig, title=title, log_y=False)
    fig.update_layout(barmode="stack")
    return fig


# ============================================================================================
# One request's spans and its Gantt chart
# ============================================================================================


def _attributes_text(entries) -> list[str]:
    """``key=value`` lines of a span's own attributes (resource attributes left out), cut to
    :data:`MAX_HOVER_ATTRIBUTES` lines of :data:`MAX_HOVER_VALUE` characters."""
    entries = [e for e in entries or () if not str(e["key"]).startswith(RESOURCE_NAMESPACES)]
    if not entries:
        return []
    out = []
    for e in entries[:MAX_HOVER_ATTRIBUTES]:
        value = next((e[k] for k in ("str", "int", "float", "bool") if e.get(k) is not None), None)
        text = str(value)
        if len(text) > MAX_HOVER_VALUE:
            text = text[:MAX_HOVER_VALUE - 1] + "…"
        out.append(f"{e['key']}={text}")
    if len(entries) > MAX_HOVER_ATTRIBUTES:
        out.append(f"… {len(entries) - MAX_HOVER_ATTRIBUTES} more")
    return out


def _exception_text(events) -> str | None:
    """``type: message`` of a span's first ``exception`` event (semantic conventions), cut to
    :data:`MAX_HOVER_VALUE` characters; None when it has none."""
    for event in events or ():
        if event["name"] == S.EXCEPTION_EVENT:
            values = {a["key"]: a["str"] for a in event[S.ATTRIBUTES] or () if a["str"] is not None}
            text = ": ".join(v for v in (values.get(S.ATTR_EXCEPTION_TYPE), values.get(S.ATTR_EXCEPTION_MESSAGE))
                             if v) or S.EXCEPTION_EVENT
            return text if len(text) <= MAX_HOVER_VALUE else text[:MAX_HOVER_VALUE - 1] + "…"
    return None


def request_spans(spans, trace_id: str, span_id: str | None = None) -> pl.DataFrame:
    """The spans of one request, assembled, in call-tree order, timed relative to its entry span.

    Parameters
    ----------
    spans : pyarrow.Table, polars.DataFrame or SpanReadResult
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA` holding (at least) the whole trace.
    trace_id : str
    span_id : str, optional
        The request's entry span (a trace-table row's ``span_id``); default the trace's root
        (its earliest span without a parent in the trace).

    Returns
    -------
    polars.DataFrame
        One row per span of the request's subtree, parents before children and siblings by
        start: ``service``, ``operation``, ``kind``, ``instance``, ``status``, ``span_id``,
        ``depth`` (0 for the entry span), ``offset_ns`` (start minus the entry span's start,
        after clock-skew correction), ``duration_ns``, ``skew_ns``, ``asynchronous`` (the span or
        an ancestor below the entry span is not a synchronous child,
        :func:`~tracesleuth.model.synchronous_children`: a producer/consumer span, a
        ``FOLLOWS_FROM`` child, or one that ends after its parent - but the server span of a
        client's call, which is part of the call), ``attributes`` (list of ``"key=value"``
        strings), ``status_message`` (null when none) and ``exception`` (``type: message`` of the
        span's first ``exception`` event, null when none).

    Raises
    ------
    KeyError
        When the trace or the span is not among ``spans``.
    """
    from ..model import synchronous_children
    from ..model.assembly import SOURCE_ROW, as_frame, assemble

    frame = as_frame(spans)
    trace = frame.filter(pl.col(S.TRACE_ID) == trace_id)
    if trace.height == 0:
        raise KeyError(f"trace {trace_id!r} is not among the spans")
    assembled, _ = assemble(trace)
    parent = assembled["parent_row"].fill_null(-1).to_numpy()
    start = assembled[S.START_NS].to_numpy()
    end = assembled[S.END_NS].to_numpy()
    if span_id is None:
        roots = np.flatnonzero(assembled[S.PARENT_SPAN_ID].is_null().to_numpy())
        candidates = roots if roots.size else np.flatnonzero(parent < 0)
        entry = int(candidates[np.argmin(start[candidates])])
    else:
        hits = np.flatnonzero((assembled[S.SPAN_ID] == span_id).to_numpy())
        if hits.size == 0:
            raise KeyError(f"span {span_id!r} is not in trace {trace_id!r}")
        entry = int(hits[0])
    children: dict[int, list[int]] = {}
    for row in np.argsort(start, kind="stable"):
        if parent[row] >= 0:
            children.setdefault(int(parent[row]), []).append(int(row))
    kind = assembled[S.KIND].to_numpy()
    synchronous = synchronous_children(kind, assembled[S.FOLLOWS_FROM].to_numpy(), end_ns=end,
                                       parent_end_ns=end[np.maximum(parent, 0)], parent_kind=kind[np.maximum(parent, 0)])
    order, depth, asynchronous = [], [], []
    stack = [(entry, 0, False)]
    while stack:
        row, d, inherited = stack.pop()
        own = d > 0 and not synchronous[row]
        is_async = inherited or own
        order.append(row)
        depth.append(d)
        asynchronous.append(is_async)
        for child in reversed(children.get(row, [])):
            stack.append((child, d + 1, is_async))
    picked = assembled[order]
    if S.ATTRIBUTES in trace.columns:
        entries = trace[S.ATTRIBUTES].gather(picked[SOURCE_ROW]).to_list()
    else:
        entries = [None] * picked.height
    events = picked[S.EVENTS].to_list() if S.EVENTS in picked.columns else [None] * picked.height
    message = pl.col(S.STATUS_MESSAGE) if S.STATUS_MESSAGE in picked.columns else pl.lit(None, pl.String)
    return picked.select(
        S.SERVICE, S.OPERATION, S.KIND, S.INSTANCE, S.STATUS, S.SPAN_ID,
        pl.Series("depth", depth, dtype=pl.Int32),
        (pl.col(S.START_NS) - int(start[entry])).alias("offset_ns"),
        (pl.col(S.END_NS) - pl.col(S.START_NS)).alias(S.DURATION_NS),
        "skew_ns",
        pl.Series("asynchronous", asynchronous, dtype=pl.Boolean),
        pl.Series(S.ATTRIBUTES, [_attributes_text(e) for e in entries], dtype=pl.List(pl.String)),
        message.alias(S.STATUS_MESSAGE),
        pl.Series("exception", [_exception_text(e) for e in events], dtype=pl.String),
    )


def operation_keys_named(columns, entry: str | None = None) -> frozenset[str]:
    """The operation keys ``"service:operation"`` that trace-table columns name.

    Parameters
    ----------
    columns : iterable of str
        Trace-table column names, e.g. the attributes of a pattern's conditions:
        ``exclusive_ns[K]``, ``calls[K]`` and ``instance[K]`` name operation ``K``; a request
        attribute (``attr[...]``, ``num[...]``) names the request's entry span.
    entry : str, optional
        Operation key of the requests' entry span (the table's endpoint).

    Examples
    --------
    >>> sorted(operation_keys_named(["exclusive_ns[cart:get]", "attr[tier]", "instance[web:pay]"], entry="web:home"))
    ['cart:get', 'web:home', 'web:pay']
    """
    columns = [c for c in columns if c.endswith("]")]
    keys = {S.column_key(c) for c in columns if c.startswith((S.EXCLUSIVE_PREFIX, S.CALLS_PREFIX, S.INSTANCE_PREFIX))}
    if entry is not None and any(c.startswith((S.ATTRIBUTE_PREFIX, S.NUMERIC_ATTRIBUTE_PREFIX)) for c in columns):
        keys.add(entry)
    return frozenset(keys)


def gantt_x_range_ms(requests: Sequence[pl.DataFrame]) -> float:
    """One time axis for several Gantt charts: the latest span end among ``requests``, ms.

    Parameters
    ----------
    requests : sequence of polars.DataFrame
        Outputs of :func:`request_spans`.
    """
    ends = [float((r["offset_ns"] + r[S.DURATION_NS]).max()) for r in requests if r.height]
    return max(ends, default=0.0) / NS_PER_MS


def _depth_levels(depth: np.ndarray, max_rows: int) -> tuple[list[int], int]:
    """Depths a chart can be collapsed to, and the one it opens at.

    The one it opens at is the deepest whose rows fit in ``max_rows`` (all when they all fit);
    the choices are depths 1 and 2, that one, and everything (each choice repeats the row labels
    it shows in the page, so there are four at most).
    """
    deepest = int(depth.max()) if depth.size else 0
    fitting = [d for d in range(deepest + 1) if (depth <= d).sum() <= max_rows]
    opened = fitting[-1] if fitting else 0
    return sorted({d for d in (1, 2, opened, deepest) if d <= deepest}), opened


def request_gantt_figure(request: pl.DataFrame, *, title: str | None = None, max_spans: int = MAX_GANTT_SPANS,
                         service_colors: dict | None = None, highlight=(), x_range_ms: float | None = None,
                         max_rows: int = MAX_EXPANDED_ROWS):
    """One request's spans as a Gantt chart: a bar per span from its start for its duration.

    Rows follow the call tree (parents before children, siblings by start); bars are coloured by
    service (one legend entry per service). Asynchronous spans are hatched and paler; the legend
    shows the two swatches ("synchronous", "asynchronous") once. Spans of the operations in
    ``highlight`` (those a pattern names) get a dark outline and a bold row label, with a legend
    entry. A call tree deeper than two levels gets buttons that collapse it to depth 1 or 2 or
    expand it; one with more than ``max_rows`` spans opens collapsed to the deepest level that
    fits (and always has the buttons).

    Parameters
    ----------
    request : polars.DataFrame
        The output of :func:`request_spans`.
    title : str, optional
        Escaped here (it may hold trace-derived text).
    max_spans : int, default=400
        Rows shown at most (the first in call-tree order); the title says when spans were cut.
    service_colors : dict of str to str, optional
        Colour per service, to keep colours equal across charts; services not in it take the next
        free colour of :data:`SERVICE_COLORS`.
    highlight : collection of str, optional
        Operation keys ``"service:operation"`` whose spans are highlighted
        (:func:`operation_keys_named` of a pattern's attributes).
    x_range_ms : float, optional
        Right end of the time axis, ms (:func:`gantt_x_range_ms`: one scale for several
        charts); default the request's own extent.
    max_rows : int, default=40
        Rows shown expanded at most when the chart opens.

    Returns
    -------
    plotly.graph_objects.Figure
        x in milliseconds since the entry span's start.
    """
    import plotly.graph_objects as go

    n_all = request.height
    rows = request.head(max_spans)
    n = rows.height
    colors = dict(service_colors or {})
    for svc in rows[S.SERVICE].unique(maintain_order=True).to_list():
        if svc not in colors:
            colors[svc] = SERVICE_COLORS[len(colors) % len(SERVICE_COLORS)]
    keys = [f"{svc}:{op}" for svc, op in zip(rows[S.SERVICE], rows[S.OPERATION])]
    marked = np.array([k in highlight for k in keys], dtype=bool)
    labels = [f"<b>{plot_text(k)}</b>" if m else plot_text(k) for k, m in zip(keys, marked)]
    depth = rows["depth"].to_numpy()
    hover = []
    for r, m in zip(rows.iter_rows(named=True), marked):
        lines = [f"<b>{plot_text(r[S.SERVICE])}</b>: {plot_text(r[S.OPERATION])}"
                 + (" (named by the pattern)" if m else ""),
                 f"kind {plot_text(r[S.KIND])}" + (" (asynchronous)" if r["asynchronous"] else "")
                 + f", status {plot_text(r[S.STATUS])}"
                 + (f" ({plot_text(r[S.STATUS_MESSAGE][:MAX_HOVER_VALUE])})" if r.get(S.STATUS_MESSAGE) else "")
                 + f", depth {r['depth']}",
                 f"start +{format_duration_ns(r['offset_ns'])}, duration {format_duration_ns(r[S.DURATION_NS])}"]
        if r[S.INSTANCE]:
            lines.append(f"instance {plot_text(r[S.INSTANCE])}")
        if r["skew_ns"]:
            lines.append(f"clock-skew correction {format_duration_ns(r['skew_ns'])}")
        if r.get("exception"):
            lines.append(f"exception {plot_text(r['exception'])}")
        lines += [plot_text(a) for a in (r[S.ATTRIBUTES] or [])]
        hover.append("<br>".join(lines))
    offset = rows["offset_ns"].to_numpy() / NS_PER_MS
    duration = rows[S.DURATION_NS].to_numpy() / NS_PER_MS
    service = rows[S.SERVICE].to_numpy()
    is_async = rows["asynchronous"].to_numpy()
    levels, opened = _depth_levels(depth, max_rows)
    legend_px = 150 + 21 * (len(colors) + 3)          # room for the whole legend

    def positions(level: int) -> np.ndarray:
        """Row of each span with the chart collapsed to ``level`` (-1: hidden)."""
        shown = depth <= level
        return np.where(shown, np.cumsum(shown) - 1, -1)

    fig = go.Figure()
    groups = []                       # the row indices of each trace, in trace order
    in_legend: set[str] = set()       # one legend entry per service
    for svc, color in colors.items():
        for asyn in (False, True):
            for mark in (False, True):
                idx = np.flatnonzero((service == svc) & (is_async == asyn) & (marked == mark))
                if idx.size == 0:
                    continue
                groups.append(idx)
                fig.add_trace(go.Bar(
                    orientation="h", y=_rows_shown(positions(opened)[idx]), x=np.maximum(duration[idx], 1e-6),
                    base=offset[idx], name=plot_text(svc), legendgroup=plot_text(svc), showlegend=svc not in in_legend,
                    marker=_bar_marker(color, asyn, HIGHLIGHT_COLOR if mark else None),
                    hovertext=[hover[i] for i in idx], hoverinfo="text", width=0.72))
                in_legend.add(svc)
    # The encodings, explained once: solid = synchronous, hatched = asynchronous, outlined = named.
    for name, marker in (("synchronous", _bar_marker("#80868b", False)), ("asynchronous", _bar_marker("#80868b", True)),
                         ("named by the pattern", dict(color="rgba(0,0,0,0)",
                                                       line=dict(color=HIGHLIGHT_COLOR, width=3)))):
        if name == "asynchronous" and not is_async.any() or name == "named by the pattern" and not marked.any():
            continue
        fig.add_trace(go.Bar(orientation="h", x=[None], y=[None], name=name, marker=marker, legendgroup="kinds",
                             legendgrouptitle=dict(text="spans") if name == "synchronous" else None,
                             hoverinfo="skip"))
    if n:
        fig.add_vline(x=float(duration[0]), line=dict(color="#444", width=1, dash="dot"))
    heading = plot_text(title) if title else ""
    if n_all > n:
        heading += f" (first {n:,} of {n_all:,} spans)"

    def axis(level: int) -> dict:
        pos = positions(level)
        shown = np.flatnonzero(pos >= 0)
        k = shown.size
        return {"yaxis.tickvals": list(range(k)), "yaxis.ticktext": [labels[i] for i in shown],
                "yaxis.range": [k - 0.5, -0.5], "height": max(240, 110 + 20 * k, legend_px)}

    layout = axis(opened)
    menus = []
    if len(levels) > 1 and (levels[-1] >= 3 or opened < levels[-1]):     # deep, or opened collapsed
        buttons = [dict(label="all" if d == levels[-1] else f"depth ≤ {d}", method="update",
                        args=[{"y": [_rows_shown(positions(d)[idx]) for idx in groups]}, axis(d)]) for d in levels]
        menus = [dict(type="buttons", direction="right", x=0, xanchor="left", y=1.0, yanchor="bottom",
                      showactive=True, active=levels.index(opened), pad=dict(r=4, t=0, b=6), buttons=buttons,
                      font=dict(size=11))]
    x_max = x_range_ms if x_range_ms is not None else (gantt_x_range_ms([rows]) if n else 1.0)
    fig.update_layout(
        title=dict(text=heading, font=dict(size=14), x=0.01, xanchor="left") if heading else None,
        barmode="overlay", template="plotly_white", height=layout["height"],
        xaxis=dict(title=dict(text="time since the request started (ms)"), range=[0, x_max * 1.02], zeroline=True),
        yaxis=dict(tickmode="array", tickvals=layout["yaxis.tickvals"], ticktext=layout["yaxis.ticktext"],
                   range=layout["yaxis.range"], automargin=True, tickfont=dict(size=11), showgrid=False),
        margin=dict(l=20, r=20, t=(70 if menus else 40) if heading else (40 if menus else 20), b=50),
        hovermode="closest", updatemenus=menus,
        legend=dict(orientation="v", yanchor="top", y=1, x=1.01, xanchor="left", font=dict(size=11),
                    title=dict(text="service"), groupclick="toggleitem"),
    )
    return fig


def _bar_marker(color: str, asynchronous: bool, outline: str | None = None) -> dict:
    """A Gantt bar's look: solid for synchronous work; pale with stripes of the same colour for
    asynchronous work; a thick dark outline for a span the pattern names."""
    line = dict(color=outline, width=3) if outline else dict(color=color, width=1)
    if not asynchronous:
        return dict(color=color, opacity=0.9, line=line)
    return dict(color=_with_alpha(color, 0.25), line=line, pattern=dict(shape="/", fgcolor=color, solidity=0.45))


def _rows_shown(pos: np.ndarray) -> list:
    """Bar positions for plotly: a row, or None to hide the bar (a collapsed subtree)."""
    return [int(p) if p >= 0 else None for p in pos]


def latency_over_time_figure(start_ns, latency_ns, result=None, *, events=(), title: str | None = None,
                             time_bins: int = HEATMAP_TIME_BINS, latency_bins: int = HEATMAP_LATENCY_BINS):
    """Request latency against time as a heatmap (BubbleUp-style): when did requests get slow?

    Each cell counts the requests that started in a time bin with a latency in a latency bin
    (empty cells are blank). The latency axis ends at the 99.5th percentile; slower requests are
    counted in the top row, whose hover says so.

    Parameters
    ----------
    start_ns : array-like of shape (n_requests,)
        Request start times, ns since the epoch.
    latency_ns : array-like of shape (n_requests,)
        Request latencies, ns (missing values are left out).
    result : DegradationPatternsResult, optional
        Its sub-intervals (dotted outlines labelled ``#k``) are drawn across.
    events : sequence of (int, str), optional
        ``(time_ns, label)`` marked by a vertical line (e.g. when a fault started).
    title : str, optional
    time_bins, latency_bins : int, default=60, 40
        Bins at most (fewer with few requests).

    Returns
    -------
    plotly.graph_objects.Figure
        x: time (UTC), y: latency in ms, colour: requests per cell.
    """
    import plotly.graph_objects as go

    t = _finite_latencies(start_ns)
    x = _finite_latencies(latency_ns)
    ok = np.isfinite(t) & np.isfinite(x)
    t, x = t[ok], x[ok]
    fig = go.Figure()
    y_range = None
    if x.size:
        n_t = int(np.clip(np.sqrt(x.size), 5, time_bins))
        n_l = int(np.clip(np.sqrt(x.size), 5, latency_bins))
        t_lo, t_hi = float(t.min()), float(t.max())
        t_edges = np.linspace(t_lo, t_hi if t_hi > t_lo else t_lo + 1.0, n_t + 1)
        top = float(np.quantile(x, 0.995))
        l_lo = max(float(x.min()), 0.0)
        l_edges = np.linspace(l_lo, top if top > l_lo else l_lo + 1.0, n_l + 1)
        counts, _, _ = np.histogram2d(np.minimum(x, l_edges[-1]), t, bins=[l_edges, t_edges])
        z = [[int(c) if c else None for c in row] for row in counts]
        times = np.datetime_as_string(t_edges.astype("datetime64[ns]"), unit="ms").tolist()
        above = int((x > l_edges[-1]).sum())
        y_range = [l_edges[0] / NS_PER_MS, l_edges[-1] / NS_PER_MS]
        fig.add_trace(go.Heatmap(
            x=times, y=(l_edges / NS_PER_MS).round(3).tolist(), z=z, colorscale="Viridis", reversescale=True,
            colorbar=dict(title=dict(text="requests"), thickness=12), hoverongaps=False, zmin=0,
            hovertemplate="%{x}<br>latency %{y:.1f} ms<br>%{z} requests<extra></extra>",
            name="requests"))
        if above:
            fig.add_annotation(x=1, xref="paper", xanchor="right", y=l_edges[-1] / NS_PER_MS, yanchor="bottom",
                               text=f"{above:,} slower requests counted in the top row", showarrow=False,
                               font=dict(size=11, color="#444"))
    if result is not None and getattr(result, "interval", None) is not None:
        for s in result.sub_intervals:       # outlined, not filled: the cells stay readable
            fig.add_hrect(y0=s.low_ns / NS_PER_MS, y1=s.high_ns / NS_PER_MS, fillcolor="rgba(0,0,0,0)", layer="above",
                          line=dict(color=sub_interval_color(s.index), width=1.5, dash="dot"))
            top = s.high_ns / NS_PER_MS if y_range is None else min(s.high_ns / NS_PER_MS, y_range[1])
            fig.add_annotation(x=0, xref="paper", xanchor="left", y=top, yanchor="top",
                               text=f"<b>#{s.index}</b>", showarrow=False,
                               font=dict(size=12, color=sub_interval_color(s.index)))
    for when_ns, label in events:
        when = str(np.datetime64(int(when_ns), "ns").astype("datetime64[ms]"))
        fig.add_shape(type="line", x0=when, x1=when, xref="x", y0=0, y1=1, yref="paper",
                      line=dict(color="#d62728", width=2, dash="dash"))
        fig.add_annotation(x=when, y=1, yref="paper", yanchor="bottom", text=plot_text(label), showarrow=False,
                           font=dict(size=12, color="#d62728"))
    fig.update_layout(
        title=dict(text=plot_text(title)) if title else None, template="plotly_white", height=380,
        xaxis=dict(title=dict(text="request start (UTC)"), type="date"),
        yaxis=dict(title=dict(text="request latency (ms)"), range=y_range),
        margin=dict(l=60, r=20, t=60 if title else 40, b=50), hovermode="closest")
    return fig
