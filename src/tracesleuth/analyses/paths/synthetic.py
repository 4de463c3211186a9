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


def spaced_requests(n_requests: int, gap_s: float, *, random_state=1, poisson: bool = False) -> list:
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
    for name in ("start_ns", "end_ns"):
        spans = spans.set_column(spans.schema.get_field_index(name), name,
                                 pa.array(spans[name].to_numpy() + shift[trace]))
    return [build_trace_table(spans, e) for e in ("front:SaveFile", "front:ListFile", "front:ReadFile")]


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
