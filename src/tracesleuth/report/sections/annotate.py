"""The "Performance annotations" report section, built from a result (never refitting).

Rogora et al., HotCloud 2017: the annotations in words (derived), or the assertions they make
on a run (checked) with the distribution over annotations of their share of passed assertions
(the paper's Figure 2), the services the failing annotations point to and, over several
periods, when each failing annotation began to fail; and a scatter per annotation of its measurements with its fitted curve
(correlated, Figure 1a-b), or the values with its clusters (clustered, constant, Figure 1c-d).
The figures are built from the points the result keeps; :func:`pass_share_cdf_figure` also draws
the evaluation's curves, one per injected delay.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..document import Bullets, Code, Figure, KeyValues, Section, Strong, Table, Text, plot_text
from ...analyses._contract import sections_from_result
from ...analyses.annotate.check import PROCEDURE
from ...analyses.annotate.model import METRICS, format_instant, format_metric

__all__ = ["annotation_figure", "annotations_section", "build_sections", "pass_share_cdf_figure"]

#: Annotations drawn at most.
MAX_FIGURES = 12
#: Rows of the tables at most.
MAX_ROWS = 40

_SCALE = {"ns": (1e6, "ms"), "bytes": (1024.0, "KiB")}


def _axis(annotation) -> tuple[float, str]:
    unit = METRICS[annotation.metric].unit if annotation.metric in METRICS else "1"
    factor, name = _SCALE.get(unit, (1.0, ""))
    return factor, f"{annotation.metric} ({name})" if name else annotation.metric


def annotation_figure(annotation, points: tuple | None):
    """One annotation over its measurements: a scatter with its curve, or the values with its clusters.

    Parameters
    ----------
    annotation : Annotation
    points : (ndarray or None, ndarray) or None
        Feature values (None without a feature) and measurements (the metric's unit), as
        :attr:`AnnotationsResult.points` keeps them.

    Returns
    -------
    plotly.graph_objects.Figure
    """
    import plotly.graph_objects as go

    factor, label = _axis(annotation)
    fig = go.Figure()
    x, y = points if points is not None else (None, np.zeros(0))
    if annotation.kind == "correlated":
        if x is not None and len(x):
            fig.add_trace(go.Scattergl(x=x, y=y / factor, mode="markers", name="calls",
                                       marker={"size": 5, "opacity": 0.5, "color": "#4c78a8"}))
        low, high = annotation.feature_range
        if x is not None and len(x):
            low, high = min(low, float(np.min(x))), max(high, float(np.max(x)))
        grid = np.linspace(low, high, 100)
        mean = annotation.expected(grid) / factor
        sd = annotation.sd / factor
        fig.add_trace(go.Scatter(x=np.r_[grid, grid[::-1]], y=np.r_[mean + sd, (mean - sd)[::-1]], fill="toself",
                                 line={"width": 0}, fillcolor="rgba(229,112,75,0.18)", name="± 1 sd",
                                 hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=grid, y=mean, mode="lines", line={"color": "#e5704b", "width": 2},
                                 name=f"degree {annotation.degree} fit"))
        fig.update_layout(xaxis_title=plot_text(annotation.feature))
    else:
        if len(y):
            fig.add_trace(go.Scattergl(x=np.arange(len(y)), y=y / factor, mode="markers", name="calls",
                                       marker={"size": 5, "opacity": 0.5, "color": "#4c78a8"}))
        centers = ([(c.centroid, c.sd, c.weight) for c in annotation.clusters] if annotation.kind == "clustered"
                   else [(annotation.value, annotation.sd, 1.0)])
        n = max(len(y), 1)
        for centroid, sd, weight in centers:
            fig.add_hrect(y0=(centroid - sd) / factor, y1=(centroid + sd) / factor, line_width=0,
                          fillcolor="rgba(229,112,75,0.15)")
            fig.add_hline(y=centroid / factor, line={"color": "#e5704b", "width": 2},
                          annotation_text=f"{weight:.0%}", annotation_position="top right")
        fig.update_layout(xaxis_title=f"call (sample of {n:,}, in time order)")
    fig.update_layout(title=plot_text(annotation.text()), yaxis_title=label, height=340, showlegend=False,
                      margin={"l": 20, "r": 20, "t": 40, "b": 40}, title_font_size=12)
    return fig


def pass_share_cdf_figure(results: Mapping[str, Any]):
    """The paper's Figure 2: per run, the CDF over annotations of their share of passed assertions.

    Parameters
    ----------
    results : mapping of str to AnnotationsResult
        Checked results, by run label (``"0 ms"``, ``"5 ms"``...), in the legend's order.

    Returns
    -------
    plotly.graph_objects.Figure
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    for label, result in results.items():
        shares, cumulative = result.pass_share_cdf()
        if len(shares):
            fig.add_trace(go.Scatter(x=np.r_[0.0, shares], y=np.r_[0.0, cumulative], mode="lines",
                                     line_shape="hv", name=plot_text(label)))
    fig.update_layout(xaxis_title="share of an annotation's assertions passed", xaxis_range=[-0.02, 1.02],
                      yaxis_title="fraction of annotations (CDF)", yaxis_range=[0, 1.02], height=380,
                      margin={"l": 20, "r": 20, "t": 30, "b": 40})
    return fig


def _ranked(result) -> list:
    """The annotations to draw: checked ones that fail first, else correlated ones first, most calls first."""
    if result.mode == "check":
        keys = [(c.operation, c.metric) for c in result.checks if c.checked]
        return [a for k in keys for a in [result.annotations.get(*k)] if a is not None][:MAX_FIGURES]
    return sorted(result.annotations, key=lambda a: (a.kind != "correlated", -a.n_samples))[:MAX_FIGURES]


def annotations_section(result: Any) -> Section:
    """The section of an :class:`AnnotationsResult`.

    Returns
    -------
    Section
        Key figures (and first, why a result is not to be trusted when it is not), the
        annotations or the checks as a table, the pass-share CDF (checking) and a figure per
        annotation.
    """
    section = Section("Performance annotations" + (": assertions on this run" if result.mode == "check" else ""),
                      key="annotate")
    counts = result.kind_counts()
    facts = [("calls measured", result.n_calls), ("operations", result.n_operations),
             ("annotations", f"{len(result.annotations)} ({counts['correlated']} correlated, {counts['clustered']} "
                             f"clustered, {counts['constant']} constant)"),
             ("features", ", ".join(result.features) or "none")]
    if result.mode == "check":
        facts += [("assertions passed", "—" if result.pass_rate is None else
                   f"{result.pass_rate:.1%} of {result.n_assertions:,} (windows of {result.window} calls, "
                   f"{'one-sided: slower fails' if result.alternative == 'greater' else 'two-sided'}, "
                   f"{PROCEDURE} at {result.alpha:g})"),
                  ("windows not tested", f"{result.n_short:,} (fewer than {result.min_calls} calls)"),
                  ("annotated operations without calls here", result.n_unknown),
                  ("annotations that hold", "—" if result.holding_rate is None else
                   f"{result.holding_rate:.1%} of {len(result.checked)} checked")]
    else:
        facts.append(("not annotated", len(result.skipped)))
    section.add(KeyValues(facts))
    section.add(Text(result.describe().splitlines()[0]))
    if result.mode == "derive" and not result.features:
        section.add(Text([Strong("No numeric feature in these calls: every annotation is clustered or constant. "
                                 "Record numeric span attributes (sizes, row counts) or measure the code with "
                                 "tracesleuth.instrument to relate time to input.")]))
    if result.mode == "check" and result.services:
        section.add(Table(["service", "score", "evidence"],
                          [[Code(x.service), x.score, "; ".join(x.evidence[:4])] for x in result.services[:MAX_ROWS]],
                          caption="Services the failing annotations point to, most suspicious first (the deepest "
                                  "failing annotations; a client span's failure counts for the service it calls, "
                                  "half for its own)"))
    if result.mode == "check":
        drift = [c for c in result.checks if c.checked and not c.holds and len(c.periods) > 1]
        if drift:
            section.add(Table(["operation", "metric", "failing since (UTC)", "failed/tested per period"],
                              [[Code(c.operation), c.metric, format_instant(c.since_ns),
                                " ".join(f"{f}/{n}" for _, n, f in c.periods)] for c in drift[:MAX_ROWS]],
                              caption="Drift: when each failing annotation began to fail, and its assertions "
                                      "per period, oldest first"))
        section.add(Table(["operation", "calls", "metric", "kind", "holds", "assertions passed", "observed median",
                           "expected median", "distance", "annotation"],
                          [[Code(c.operation), c.calls_service or "", c.metric, c.kind,
                            "—" if c.holds is None else ("yes" if c.holds else "NO"),
                            f"{c.n_passed}/{c.n_windows}" if c.checked else str(c.note or ""),
                            format_metric(c.observed_median, c.metric), format_metric(c.expected_median, c.metric), c.distance,
                            c.text] for c in result.checks[:MAX_ROWS]],
                          caption="Annotations as assertions, failing first (calls: the service a client span "
                                  "calls; distance: how many predicted standard deviations its windows' mean "
                                  "normal scores are off, median)"))
        if result.checked:
            section.add(Figure(pass_share_cdf_figure({"this run": result}),
                               caption="Share of each annotation's assertions passed: CDF over annotations (the "
                                       "paper's Figure 2)"))
    else:
        section.add(Table(["operation", "metric", "kind", "calls", "correlation", "relative error", "annotation"],
                          [[Code(a.operation), a.metric, a.kind, a.n_samples, getattr(a, "correlation", None),
                            getattr(a, "relative_error", None), a.text()] for a in result.annotations.annotations[:MAX_ROWS]],
                          caption="Derived annotations (Section 3: correlated by Pearson correlation and polynomial "
                                  "regression, clustered by a normal mixture chosen by BIC, constant)"))
        if result.skipped:
            section.add(Bullets([f"{o} {m}: not annotated, {r}" for o, m, r in result.skipped[:MAX_ROWS]]))
    if result.notes:
        section.add(Bullets([f"Note: {n}" for n in result.notes[:MAX_ROWS]]))
    for a in _ranked(result):
        section.add(Figure(annotation_figure(a, result.points.get(a.key)), caption=a.text()))
    return section


build_sections = sections_from_result(annotations_section, "PerformanceAnnotations")
