"""The convolution algorithm: causality between message streams by cross-correlation.

Aguilera et al., SOSP 2003, Section 4.2 (the slides' "convolution algorithm"): it needs only
``(timestamp, sender, receiver)``, so it also works for free-form messages. The log is split into
one time signal per edge (messages ``A -> B`` counted per ``quantum``); for a node ``B``, an
incoming edge ``A -> B`` and an outgoing edge ``B -> C``, the cross-correlation

``C(t) = sum_u S_AB(u) S_BC(u + t)``

(computed by FFT, :func:`scipy.signal.correlate`) shows a *spike* at the delay ``t`` after which
``B`` usually sends to ``C`` once ``A`` sent to it. Spikes (:func:`spikes`): a local maximum at
least ``n_sigma`` (N = 4) standard deviations above the mean of ``C``, separated from the next
spike by at least one point below ``s_sigma`` (S = 3) standard deviations; the largest point
represents the spike, and it must stand for at least ``min_messages`` message pairs (a
coincidence in a sparse signal is many deviations above a mean near 0). The mean and standard deviation are those of ``C`` over the shifts
``-max_delay .. +max_delay``; spikes are looked for at shifts ``0 .. max_delay`` (the effect
follows its cause).

From the edges that leave the client (or, when none is called so, from every node no message
reaches), the causal graph is explored edge by edge: an outgoing edge with a spike joins the
graph, its delay added to the path's, and is explored in turn; an edge already on the path is not
followed again. Cost: one correlation per (incoming, outgoing) edge pair explored, each
``O(s log s)`` for ``s`` time steps, plus ``O(m)`` to build the signals: the slides'
``O(e m + e s log s)`` bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.signal import correlate

from ...errors import ParameterError
from .messages import CLIENT, call_pairs, parse_path_key

__all__ = ["CausalEdge", "call_pair_scores", "causal_graph", "spikes"]

#: Time steps above which one correlation would not fit in memory reasonably (two signals of 8
#: bytes per step and their FFTs, about 80 bytes per step in all).
MAX_STEPS = 50_000_000


@dataclass(frozen=True)
class CausalEdge:
    """``B -> C`` caused by ``A -> B``: a spike of their cross-correlation.

    Attributes
    ----------
    cause : tuple of (str, str)
        The incoming edge ``(A, B)``.
    effect : tuple of (str, str)
        The outgoing edge ``(B, C)``.
    delay_ns : int
        The shift of the largest spike: how long after ``A -> B`` the node sends ``B -> C``.
    other_delays_ns : tuple of int
        The shifts of the other spikes, largest spike first.
    height : float
        The spike's height in standard deviations above the mean.
    path_delay_ns : int
        The delay from the start of the explored path (the client's call) to ``B -> C``.
    depth : int
        Edges from the start of the path to this one (1: the client's call caused it).
    """

    cause: tuple
    effect: tuple
    delay_ns: int
    other_delays_ns: tuple
    height: float
    path_delay_ns: int
    depth: int

    def to_dict(self) -> dict:
        return {"cause": list(self.cause), "effect": list(self.effect), "delay_ns": self.delay_ns,
                "other_delays_ns": list(self.other_delays_ns), "height": self.height,
                "path_delay_ns": self.path_delay_ns, "depth": self.depth}


def spikes(c: np.ndarray, zero: int, *, n_sigma: float = 4.0, s_sigma: float = 3.0,
           min_messages: float = 0.0) -> list[tuple[int, float]]:
    """The spikes of a cross-correlation (module docstring).

    Parameters
    ----------
    c : numpy.ndarray
        Shape (2 * zero + 1,): the correlation at shifts ``-zero .. +zero`` time steps.
    zero : int
        The index of shift 0.
    n_sigma, s_sigma : float
        N and S of the slides (S < N).
    min_messages : float, default=0
        The least correlation a spike needs: about the number of message pairs at its shift
        (the slides' Figure 7). In a sparse signal one coincidence is many standard deviations
        above a mean near 0; the slides' "rare events: no" is this.

    Returns
    -------
    list of (int, float)
        ``(shift in time steps >= 0, height in standard deviations)``, highest first.
    """
    mean, std = float(c.mean()), float(c.std())
    if std <= 0:
        return []
    z = (c[zero:] - mean) / std
    above = z > s_sigma
    out = []
    # runs of points above S: one spike each, its largest point, when that reaches N
    edges = np.flatnonzero(np.diff(np.r_[False, above, False].astype(np.int8)))
    for start, stop in zip(edges[::2], edges[1::2]):
        k = start + int(np.argmax(z[start:stop]))
        if z[k] >= n_sigma and c[zero + k] >= min_messages:
            out.append((int(k), float(z[k])))
    return sorted(out, key=lambda s: -s[1])


def causal_graph(messages: pl.DataFrame, *, quantum_ns: int, max_delay_ns: int, n_sigma: float = 4.0,
                 s_sigma: float = 3.0, min_messages: float = 10.0, max_depth: int = 16) -> list[CausalEdge]:
    """The causal graph of a message log by cross-correlation (module docstring).

    Parameters
    ----------
    messages : polars.DataFrame
        ``timestamp_ns``, ``sender``, ``receiver`` (other columns ignored: calls and returns are
        messages alike).
    quantum_ns : int
        The time step, ns: shorter than the delays of interest.
    max_delay_ns : int
        The longest delay looked for, ns.
    n_sigma, s_sigma : float
    min_messages : float, default=10
        See :func:`spikes`.
    max_depth : int, default=16
        Edges followed from a path's start at most.

    Returns
    -------
    list of CausalEdge
        In exploration order (breadth first from the client's calls).

    Raises
    ------
    ParameterError
        When the log spans more time steps than :data:`MAX_STEPS` (a larger ``quantum_ns``).
    """
    t = messages["timestamp_ns"].to_numpy()
    t0, steps = int(t.min()), int((t.max() - t.min()) // quantum_ns) + 1
    if steps > MAX_STEPS:
        raise ParameterError(f"The log spans {steps:,} time steps of {quantum_ns:,} ns (at most {MAX_STEPS:,}): "
                             "choose a larger quantum_ns.")
    lag = max(1, int(max_delay_ns // quantum_ns))
    bins = ((t - t0) // quantum_ns).astype(np.int64)
    edges = messages.select("sender", "receiver").with_columns(pl.Series("_bin", bins))
    # Signals kept sparse (time steps with messages, and their counts); two are made dense at a
    # time, when correlated: memory O(m + s), not O(e s).
    signals: dict[tuple, tuple] = {}
    for (a, b), part in edges.group_by(["sender", "receiver"]):
        signals[(a, b)] = np.unique(part["_bin"].to_numpy(), return_counts=True)
    incoming: dict[str, list] = {}
    outgoing: dict[str, list] = {}
    for a, b in signals:
        outgoing.setdefault(a, []).append((a, b))
        incoming.setdefault(b, []).append((a, b))
    starts = outgoing.get(CLIENT) or [e for n, es in outgoing.items() if n not in incoming for e in es]
    found: list[CausalEdge] = []
    seen: set = set()
    frontier = [(e, 0, 1, (e,)) for e in sorted(starts)]
    while frontier:
        nxt = []
        for cause, path_delay, depth, path in frontier:
            if depth > max_depth:
                continue
            b = cause[1]
            for effect in sorted(outgoing.get(b, ())):
                if effect in path or (cause, effect) in seen:
                    continue
                seen.add((cause, effect))
                c = _correlation(signals[cause], signals[effect], lag, steps)
                peaks = spikes(c, lag, n_sigma=n_sigma, s_sigma=s_sigma, min_messages=min_messages)
                if not peaks:
                    continue
                delay = peaks[0][0] * quantum_ns
                found.append(CausalEdge(cause=cause, effect=effect, delay_ns=delay,
                                        other_delays_ns=tuple(p[0] * quantum_ns for p in peaks[1:]),
                                        height=peaks[0][1], path_delay_ns=path_delay + delay, depth=depth))
                nxt.append((effect, path_delay + delay, depth + 1, path + (effect,)))
        frontier = nxt
    return found


def _correlation(cause: tuple, effect: tuple, lag: int, steps: int) -> np.ndarray:
    """``C(t) = sum_u cause(u) effect(u + t)`` for ``t`` in ``-lag .. +lag``.

    The signals are sparse (time steps with messages, counts). When the message pairs within
    ``lag`` of each other are fewer than the FFT's ``s log s`` operations, the same sums are
    added up directly from the pairs; otherwise by FFT (:func:`scipy.signal.correlate`) over the
    dense signals. Both give the same ``C``.
    """
    cb, cc = cause
    eb, ec = effect
    lo = np.searchsorted(eb, cb - lag, side="left")
    hi = np.searchsorted(eb, cb + lag, side="right")
    n = hi - lo
    pairs = int(n.sum())
    if pairs * 8 < steps * max(1.0, np.log2(steps)):
        rep = np.repeat(np.arange(len(cb)), n)
        idx = np.arange(pairs) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
        return np.bincount(eb[idx] - cb[rep] + lag, weights=(cc[rep] * ec[idx]).astype(np.float64),
                           minlength=2 * lag + 1)[: 2 * lag + 1]
    dense_cause, dense_effect = np.zeros(steps), np.zeros(steps)
    dense_cause[cb], dense_effect[eb] = cc, ec
    full = correlate(dense_effect, dense_cause, mode="full", method="fft")  # index k: shift k - (steps - 1)
    mid = steps - 1
    out = np.zeros(2 * lag + 1)
    window = full[max(0, mid - lag): mid + lag + 1]
    start = lag - (mid - max(0, mid - lag))
    out[start: start + len(window)] = window
    return out


def call_pair_scores(graph, truth) -> tuple[float, float | None]:
    """Recall and precision of a causal graph against true paths.

    Parameters
    ----------
    graph : sequence of CausalEdge
    truth : mapping of str to int
        ``{path_key: count}`` of the true paths.

    Returns
    -------
    (float, float or None)
        The share of the true (incoming call, outgoing call) pairs found in ``graph``, and the
        share of the graph's pairs between true call edges that are true pairs (None when it has
        none): returns and other messages are not scored.
    """
    true = set().union(*(call_pairs(parse_path_key(k)) for k in truth))
    edges = {e for pair in true for e in pair}
    found = {(e.cause, e.effect) for e in graph if e.cause in edges and e.effect in edges}
    return len(true & found) / max(len(true), 1), (len(true & found) / len(found) if found else None)
