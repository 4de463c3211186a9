"""Figures built from data: the latency-over-time heatmap, and Gantt charts (synchronous server
spans, highlighted operations, one time scale, collapsing by depth)."""

from __future__ import annotations

import numpy as np
import polars as pl

from tracesleuth.report.figures import (gantt_x_range_ms, latency_over_time_figure, request_gantt_figure,
                                        request_spans)

MS = 1_000_000


def _spans(rows):
    """Spans of one trace from ``(span_id, parent, service, operation, kind, start_ms, end_ms)``."""
    return pl.DataFrame({
        "trace_id": ["t"] * len(rows), "span_id": [r[0] for r in rows], "parent_span_id": [r[1] for r in rows],
        "service": [r[2] for r in rows], "operation": [r[3] for r in rows], "instance": [None] * len(rows),
        "kind": [r[4] for r in rows], "start_ns": [r[5] * MS for r in rows], "end_ns": [r[6] * MS for r in rows],
        "status": ["unset"] * len(rows), "follows_from": [False] * len(rows)})


def test_the_server_span_of_a_synchronous_call_is_synchronous_even_when_it_closes_late():
    req = request_spans(_spans([
        ("01", None, "web", "home", "server", 0, 100),
        ("02", "01", "web", "cart", "client", 10, 40),
        ("03", "02", "cart", "cart", "server", 12, 41),          # closes after its client span
        ("04", "01", "web", "items", "producer", 50, 60),
        ("05", "04", "items", "items", "server", 52, 58),        # the server side of a message
        ("06", "01", "web", "audit", "internal", 90, 130),       # outlives its parent
    ]), "t")
    asyn = dict(zip(req["span_id"], req["asynchronous"]))
    assert asyn == {"01": False, "02": False, "03": False, "04": True, "05": True, "06": True}


def _deep_request(depth: int = 5, fan_out: int = 3) -> pl.DataFrame:
    rows, k = [("0", None, "s0", "op0", "server", 0, 1000)], 1
    frontier = ["0"]
    for d in range(1, depth + 1):
        nxt = []
        for parent in frontier[:2]:
            for _ in range(fan_out):
                rows.append((str(k), parent, f"s{d}", f"op{d}", "internal", d, 1000 - d))
                nxt.append(str(k))
                k += 1
        frontier = nxt
    return request_spans(_spans(rows), "t")


def test_a_deep_gantt_opens_collapsed_and_expands_by_depth():
    req = _deep_request()
    assert req.height > 12 and req["depth"].max() == 5
    fig = request_gantt_figure(req, max_rows=12)
    [menu] = fig.layout.updatemenus
    labels = [b.label for b in menu.buttons]
    assert labels == ["depth ≤ 1", "depth ≤ 2", "all"]
    opened = menu.buttons[menu.active]
    shown = len(fig.layout.yaxis.ticktext)
    assert shown <= 12 and shown == len(opened.args[1]["yaxis.ticktext"])
    bars = [t for t in fig.data if t.legendgroup != "kinds"]
    assert sum(y is not None for t in bars for y in t.y) == shown          # the deeper spans are hidden
    everything = menu.buttons[-1].args
    assert len(everything[1]["yaxis.ticktext"]) == req.height
    assert sorted(y for ys in everything[0]["y"] for y in ys) == list(range(req.height))
    assert everything[1]["height"] > opened.args[1]["height"]
    # A shallow request has no buttons and shows every span.
    small = request_spans(_spans([("01", None, "a", "x", "server", 0, 10), ("02", "01", "a", "y", "client", 1, 5)]),
                          "t")
    assert not request_gantt_figure(small).layout.updatemenus


def test_charts_share_one_time_scale():
    a = request_spans(_spans([("01", None, "a", "x", "server", 0, 10)]), "t")
    b = request_spans(_spans([("01", None, "a", "x", "server", 0, 80)]), "t")
    x = gantt_x_range_ms([a, b])
    assert x == 80.0
    assert request_gantt_figure(a, x_range_ms=x).layout.xaxis.range == request_gantt_figure(b, x_range_ms=x).layout.xaxis.range


def test_latency_over_time_heatmap_counts_every_request_and_marks_events():
    rng = np.random.default_rng(0)
    start = 1_700_000_000 * 10**9 + np.sort(rng.integers(0, 60 * 10**9, 2000))
    latency = rng.normal(50, 5, 2000) * MS
    latency[start > start[1000]] += 30 * MS                                  # slower after a moment
    latency[:3] = 5_000 * MS                                                 # far beyond the axis
    fig = latency_over_time_figure(start, latency, events=[(int(start[1000]), "fault on")])
    [heat] = fig.data
    z = np.array([[0 if v is None else v for v in row] for row in heat.z])
    assert z.sum() == 2000
    assert len(heat.x) == z.shape[1] + 1 and len(heat.y) == z.shape[0] + 1   # cell edges
    assert fig.layout.yaxis.range[1] < 5_000                                 # the axis ends at the 99.5th percentile
    texts = [a.text for a in fig.layout.annotations]
    above = int((latency > fig.layout.yaxis.range[1] * MS).sum())
    assert "fault on" in texts and f"{above} slower requests counted in the top row" in texts and above >= 3
    assert [s.type for s in fig.layout.shapes] == ["line"]
    # later columns are slower: the mean latency bin rises after the event
    centers = (np.array(heat.y[:-1]) + np.array(heat.y[1:])) / 2
    mean_by_time = (z * centers[:, None]).sum(0) / np.maximum(z.sum(0), 1)
    assert mean_by_time[-5:].mean() > mean_by_time[:5].mean() + 20


def test_the_gantt_hover_names_a_span_s_exception_and_status_message():
    from spans import event, span, table

    from tracesleuth import schema as S

    spans = table([span("t", "1", None, "web", "home", 0, 100),
                   span("t", "2", "1", "pay", "charge", 10, 40, status="error", status_message="declined",
                        events=[event("retry", 12), event(S.EXCEPTION_EVENT, 30, {
                            S.ATTR_EXCEPTION_TYPE: "CardError", S.ATTR_EXCEPTION_MESSAGE: "insufficient funds"})])])
    req = request_spans(spans, "t".rjust(32, "0"))
    assert req["exception"].to_list() == [None, "CardError: insufficient funds"]
    assert req[S.STATUS_MESSAGE].to_list() == [None, "declined"]
    text = " ".join(str(t) for trace in request_gantt_figure(req).data for t in (trace.hovertext or ()))
    assert "exception CardError: insufficient funds" in text and "status error (declined)" in text
    assert request_spans(_spans([("01", None, "a", "x", "server", 0, 10)]), "t")["exception"].to_list() == [None]
