"""MakeTrace: synthetic RPC message logs with known causal paths (Aguilera et al., SOSP 2003).

The slides' generator: a set of causal-path templates (*tracelets*: every call and return with
Gaussian delays between messages) and a recipe to combine them (parallelism, start and stop,
duration), to validate the algorithms on known input and check corner cases. Here:

* a :class:`Tracelet` node is ``{"node": NAME, "before_ms": a, "calls": [...], "after_ms": b}``
  with each call's ``gap_ms`` (the time from the previous return, or from the node's call for
  the first, to the call): the node receives its call, waits ``before_ms``, makes its calls one
  after the other, waits ``after_ms`` and returns. Every wait is drawn from a normal distribution
  with that mean and standard deviation ``delay_cv`` times it (the delay variation), floored at 0.
* paths start as a Poisson process of mean gap ``mean_gap_ms`` between ``start`` and the end of
  ``duration_s`` (the parallelism: the mean number of paths in flight is their mean length over
  the mean gap); each path picks a tracelet by its weight.
* each message is lost with probability ``drop_rate``, independently.

:func:`make_trace` returns the log and the true paths, ``{path_key: count}``, as
:func:`~.messages.messages_from_tables` does for recorded traces.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl

from ...errors import ParameterError
from .messages import CLIENT, MESSAGE_SCHEMA, path_key

__all__ = ["DEFAULT_TRACELETS", "Tracelet", "make_trace"]


@dataclass(frozen=True)
class Tracelet:
    """A causal path template and how often it occurs.

    Attributes
    ----------
    tree : dict
        ``{"node", "before_ms", "after_ms", "calls": [{"gap_ms", ...node...}, ...]}``.
    weight : float
        Relative frequency among the tracelets.
    """

    tree: dict
    weight: float = 1.0


def _node(name: str, before: float, after: float, *calls: dict, gap: float = 0.5) -> dict:
    return {"node": name, "before_ms": before, "after_ms": after, "gap_ms": gap, "calls": list(calls)}


#: A small RPC system: a web tier calling an application tier, which calls a database and a cache
#: (the slides' ``A -> B -> [C; D]`` among them).
DEFAULT_TRACELETS = (
    Tracelet(_node("web", 1.0, 0.5, _node("app", 2.0, 1.0, _node("db", 3.0, 0.0), _node("cache", 0.5, 0.0))), 3.0),
    Tracelet(_node("web", 1.0, 0.5, _node("app", 1.0, 1.0, _node("cache", 0.5, 0.0))), 2.0),
    Tracelet(_node("web", 0.5, 0.5, _node("auth", 4.0, 0.5), _node("app", 2.0, 1.0, _node("db", 6.0, 0.0))), 1.0),
)


def make_trace(tracelets=DEFAULT_TRACELETS, *, duration_s: float = 60.0, mean_gap_ms: float = 50.0,
               delay_cv: float = 0.1, drop_rate: float = 0.0, start_ns: int = 1_700_000_000 * 10**9,
               random_state=None) -> tuple[pl.DataFrame, Counter]:
    """A message log of overlapping causal paths, and their true patterns.

    Parameters
    ----------
    tracelets : sequence of Tracelet
    duration_s : float, default=60
        Paths start within this many seconds.
    mean_gap_ms : float, default=50
        Mean time between path starts (Poisson arrivals).
    delay_cv : float, default=0.1
        Standard deviation of every wait over its mean.
    drop_rate : float, default=0
        Probability that a message is missing from the log.
    start_ns : int
        Time of the first possible start, Unix ns.
    random_state : int, numpy Generator or None

    Returns
    -------
    (polars.DataFrame, collections.Counter)
        Messages in :data:`~.messages.MESSAGE_SCHEMA`, in time order, and ``{path_key: paths}``
        of every path generated (dropped messages included: the truth is what happened).

    Raises
    ------
    ParameterError
        A rate outside [0, 1), a negative variation, or no tracelet.
    """
    if not tracelets:
        raise ParameterError("make_trace needs at least one tracelet")
    if not 0 <= drop_rate < 1 or delay_cv < 0 or mean_gap_ms <= 0 or duration_s <= 0:
        raise ParameterError(f"make_trace: drop_rate in [0, 1), delay_cv >= 0, mean_gap_ms > 0 and duration_s > 0 "
                             f"(got {drop_rate}, {delay_cv}, {mean_gap_ms}, {duration_s})")
    rng = np.random.default_rng(random_state)
    weights = np.array([t.weight for t in tracelets], dtype=float)
    starts = np.cumsum(rng.exponential(mean_gap_ms * 1e6, int(duration_s * 1e3 / mean_gap_ms * 1.5) + 10))
    starts = starts[starts < duration_s * 1e9]
    picks = rng.choice(len(tracelets), size=len(starts), p=weights / weights.sum())
    rows: list[tuple] = []
    ids = iter(range(1 << 62))

    def wait(mean_ms: float) -> int:
        return int(max(0.0, rng.normal(mean_ms, delay_cv * mean_ms)) * 1e6) if mean_ms > 0 else 0

    def visit(tree: dict, caller: str, t: int) -> int:
        call_id = str(next(ids))
        rows.append((t, caller, tree["node"], "call", call_id))
        now = t + wait(tree["before_ms"])
        for k, child in enumerate(tree["calls"]):
            now = visit(child, tree["node"], now + (wait(child.get("gap_ms", 0.0)) if k else 0))
        now += wait(tree["after_ms"])
        rows.append((now, tree["node"], caller, "return", call_id))
        return now

    truth = Counter()
    keys = [path_key(t.tree) for t in tracelets]
    for t0, k in zip(starts, picks):
        visit(tracelets[k].tree, CLIENT, start_ns + int(t0))
        truth[keys[k]] += 1
    frame = pl.DataFrame(rows, schema={n: pl.Int64 if n == "timestamp_ns" else pl.String
                                       for n in MESSAGE_SCHEMA.names}, orient="row")
    if drop_rate:
        frame = frame.filter(pl.Series(rng.random(frame.height) >= drop_rate))
    return frame.sort("timestamp_ns", maintain_order=True), truth
