"""Simulated requests with a chosen parallelism, for the causal-path analyses.

Until MakeTrace (issue 18, item 4) lands, the requests come from the root-cause localization's
simulator (:func:`tracesleuth.analyses.localize.synthetic.simulate_scenario`, the file-sharing
service: 3 endpoints, 6 components, 24 methods), each trace moved to start ``gap_s`` after the
previous one: a gap longer than the requests gives no overlap, shorter gaps more parallelism.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["planted_case", "spaced_requests"]


def spaced_requests(n_requests: int, gap_s: float, *, random_state=1, poisson: bool = False,
                    delayed: str | None = None, delay_s: float = 0.2) -> list:
    """The simulator's requests, one starting every ``gap_s`` seconds, as trace tables.

    Parameters
    ----------
    n_requests : int
    gap_s : float
        Seconds between consecutive request starts (> 0), or their mean with ``poisson``.
    random_state : int, optional
        Seeds the simulator and the arrivals.
    poisson : bool, default=False
        Exponential gaps (Poisson arrivals, as real traffic) instead of equal ones; equal gaps
        longer than the requests guarantee that no two overlap, while periodic arrivals make the
        message signals periodic, which the convolution algorithm would read as causality.
    delayed : str, optional
        A service whose every call takes ``delay_s`` longer (the slides' validation: 200 ms
        added on one node): each span that enters it from another service ends later, the spans
        around it too, and everything after it in the request starts later.
    delay_s : float, default=0.2

    Returns
    -------
    list of TraceTable
        One per endpoint (``front:SaveFile``, ``front:ListFile``, ``front:ReadFile``).
    """
    from ...model import build_trace_table
    from ..localize.synthetic import simulate_scenario

    spans = simulate_scenario("code-bug", n_requests=n_requests, random_state=random_state).spans
    _, trace = np.unique(spans["trace_id"].to_numpy(zero_copy_only=False), return_inverse=True)
    first = np.full(trace.max() + 1, np.iinfo(np.int64).max)
    np.minimum.at(first, trace, spans["start_ns"].to_numpy())
    if poisson:
        offsets = np.cumsum(np.random.default_rng(random_state).exponential(gap_s, len(first)))
    else:
        offsets = np.arange(len(first)) * gap_s
    shift = (offsets * 1e9).astype(np.int64) - first + 1_700_000_000 * 10**9
    start, end = spans["start_ns"].to_numpy() + shift[trace], spans["end_ns"].to_numpy() + shift[trace]
    if delayed is not None:
        service = spans["service"].to_pylist()
        owner = dict(zip(zip(trace.tolist(), spans["span_id"].to_pylist()), service))
        called = np.array([svc == delayed and owner.get((t, parent)) != delayed
                           for t, parent, svc in zip(trace.tolist(), spans["parent_span_id"].to_pylist(), service)])
        start, end = _add_delay(trace, start, end, called, int(delay_s * 1e9))
    for name, values in (("start_ns", start), ("end_ns", end)):
        spans = spans.set_column(spans.schema.get_field_index(name), name, pa.array(values))
    return [build_trace_table(spans, e) for e in ("front:SaveFile", "front:ListFile", "front:ReadFile")]


def _add_delay(trace: np.ndarray, start: np.ndarray, end: np.ndarray, slow: np.ndarray, delay: int):
    """Each slow span ends ``delay`` later; spans that contain it end later, spans after it in its
    request start and end later (slow spans of one request taken in time order)."""
    start, end = start.copy(), end.copy()
    order = np.argsort(trace, kind="stable")
    bounds = np.r_[0, np.flatnonzero(np.diff(trace[order])) + 1, len(order)]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = order[lo:hi]
        for k in sorted(rows[slow[rows]], key=lambda r: start[r]):
            s0, e0 = start[k], end[k]
            after = rows[start[rows] >= e0]
            around = rows[(start[rows] <= s0) & (end[rows] >= e0)]
            start[after] += delay
            end[after] += delay
            end[around] += delay  # the slow span itself among them
    return start, end


def planted_case(random_state: int = 0):
    """The common test's planted case: 300 requests that do not overlap, the trace table of the
    endpoint ``front:ReadFile``.

    The score is the recovery rate of their true paths; the floor is 1.0 (without overlap every
    call has one candidate parent).

    Returns
    -------
    PlantedCase
    """
    from .. import PlantedCase

    table = spaced_requests(300, 1.0, random_state=random_state)[2]
    return PlantedCase(args=(table,), settings={"random_state": random_state}, score=lambda fitted: fitted.result_.recovery, floor=1.0)
