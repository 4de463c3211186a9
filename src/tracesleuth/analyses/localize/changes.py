"""Changes within the analysed window: which service's times rose, by how much, and since when.

Beyond Mi et al. 2012 (a setting of :class:`~.analysis.RootCauseLocalization`, ``changes``; off
in the paper's settings). The paper's method compares the anomalous requests of each call-sequence
cluster with its normal ones, so it needs clusters with more requests than methods. A
microservice application splits its traffic over many call sequences: three minutes of
TrainTicket hold about 160 requests in 22 sequences, and the 9 requests that reach a slowed
service fall into clusters of 2 to 8. What those calls still show is *time*: an incident starts
somewhere inside the window an operator looks at, and the calls of the slowed service after that
moment are slower than its calls before it. This module tests every series of the window for
such a rise, pooled over every request that makes the call (no clustering), and names the service
each rise points to.

**Series.** As in the method matrices (:mod:`.analysis`): the **self time** of each operation key
(its span's exclusive time; a call to an uninstrumented system such as a database is a span of
the calling service), and the **gap** of each edge ``caller key -> callee key`` of a client span
that calls a server span (client time outside the server span: network, the callee's queue, or
the caller's own scheduling). Each call is placed in time by its span's start.

**Change point.** For a series with at least ``min_calls`` calls on each side of it, the window
is cut at ``n_splits`` evenly spaced times (the first to the last call start, cut at ``k / (n_splits
+ 1)``); at each cut, a one-sided Mann-Whitney U test asks whether the calls after the cut are
slower than those before (:func:`scipy.stats.mannwhitneyu`, exact for small samples; from the
series' ranks computed once, with the normal approximation and tie correction, for series of
more than :data:`EXACT_MAX_CALLS` calls). The cut with the smallest p-value is the series'
change point; its **rise** is the ratio of the medians after and before it (x-fold), its effect
size the common-language ``A = U / (n_after n_before)``. A series *rose* when that p-value is
below ``level``, ``A >= min_effect`` and the rise is above 1.

**How sure.** The p-value is nominal: the smallest of ``n_splits`` tests of one series, and one
of many series. ``p_family`` multiplies it by ``n_splits`` and by the number of series tested
(Bonferroni): a rise with ``p_family < level`` is significant for the whole window; one with
only a nominal p is reported as such (a service reached by 7 calls in three minutes cannot be
more than that). On windows with no incident (the minute before each recorded fault, see the
evaluation), nominal rises of 1.2-15x appear in chronically heavy-tailed series, while the
recorded CPU and network faults raised their service's series 13-3,400x.

**Which service.** A self-time rise points to the operation's service. A gap rise has two ends:
the callee (network into it, its queue: the usual attribution, as in the method matrices) or the
caller (CPU contention in the caller delays all its outgoing calls). Which, decides the one rule
every analysis uses (:func:`~tracesleuth.model.gaps.gap_owner`): the callee, unless the caller's
gaps into its other services and its own self time rose more (found risen by the test, or by
their size against this edge's) than the callee's from its other callers. On OnlineBoutique,
CPU contention in the frontend raised its gaps to 6 of its 7 callees (blamed: the frontend) and a
network delay into the currency service raised the gaps of both its callers (blamed: currency).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

from ... import schema as S
from ...model.gaps import gap_owner
from ...units import format_duration_ns

__all__ = ["EXACT_MAX_CALLS", "SeriesChange", "window_changes"]

#: Series with at most this many calls are tested with scipy's Mann-Whitney (exact when the
#: sample allows); longer ones from their ranks with the normal approximation.
EXACT_MAX_CALLS = 400


@dataclass(frozen=True)
class SeriesChange:
    """A series whose time rose inside the window.

    Attributes
    ----------
    kind : {"self", "gap"}
        Self time of an operation, or the gap of an edge (client time outside the server span).
    key : str
        The operation key (``self``) or ``"caller key -> callee key"`` (``gap``).
    service : str
        The service it points to (module docstring: which end of a gap).
    caller_service, callee_service : str or None
        For a gap, the calling and the called service (``service`` is one of them).
    onset_ns : int
        The change point: start of the first call after it, Unix ns.
    calls_before, calls_after : int
    median_before_ns, median_after_ns : float
    rise : float
        ``median_after_ns / median_before_ns`` (x-fold; a median of 0 counts as 1 ns).
    effect : float
        Common-language effect size ``A`` in [0, 1] (0.5: no shift).
    p_value : float
        One-sided Mann-Whitney p-value at the change point (nominal).
    p_family : float
        ``p_value`` times the cuts tried and the series tested, at most 1.
    """

    kind: str
    key: str
    service: str
    caller_service: str | None
    callee_service: str | None
    onset_ns: int
    calls_before: int
    calls_after: int
    median_before_ns: float
    median_after_ns: float
    rise: float
    effect: float
    p_value: float
    p_family: float

    def significant(self, level: float) -> bool:
        """Significant for the whole window (``p_family < level``), not only nominally."""
        return self.p_family < level

    def describe(self) -> str:
        what = (f"self time of {self.key}" if self.kind == "self" else
                f"gap of {self.key} (calls from {self.caller_service} into {self.callee_service})")
        blame = ""
        if self.kind == "gap" and self.service == self.caller_service:
            blame = " (blamed on the caller: its calls into other services waited longer too)"
        return (f"{what} rose {self.rise:,.1f}x ({format_duration_ns(self.median_before_ns)} -> "
                f"{format_duration_ns(self.median_after_ns)} median; {self.calls_before:,} calls before, "
                f"{self.calls_after:,} after the change; p = {self.p_value:.2g}, "
                f"{self.p_family:.2g} for the window){blame}")

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def window_changes(calls: pl.DataFrame, *, n_splits: int = 9, level: float = 0.05, min_effect: float = 0.64,
                   min_calls: int = 3) -> tuple[tuple[SeriesChange, ...], int]:
    """The series of ``calls`` whose time rose inside their window (module docstring).

    Parameters
    ----------
    calls : polars.DataFrame
        One row per call: ``start_ns`` (the span's start, Unix ns), :data:`~tracesleuth.schema.
        OPERATION_KEY`, ``service``, ``kind``, ``caller_key``, ``server_service``,
        ``exclusive_ns`` and ``gap_ns`` (a call view with start times).
    n_splits : int, default=9
        Cut times tried per series.
    level : float, default=0.05
        Nominal significance level of a rise.
    min_effect : float, default=0.64
        Least common-language effect size of a rise.
    min_calls : int, default=3
        Least calls on each side of a cut.

    Returns
    -------
    changes : tuple of SeriesChange
        The series that rose, largest rise first.
    n_tested : int
        Series with at least one usable cut.
    """
    series = _series(calls)
    if series.height == 0:
        return (), 0
    t0, t1 = int(series["first"].min()), int(series["last"].max())
    cuts = t0 + (t1 - t0) * np.arange(1, n_splits + 1) / (n_splits + 1)
    found, n_tested, gap_rises, own_rises = [], 0, {}, []
    for i, (gap, caller_key, operation, callee, caller) in enumerate(
            series.select("gap", "caller_key", S.OPERATION_KEY, "callee", "caller_service").iter_rows()):
        kind, key = ("gap", f"{caller_key} -> {operation}") if gap else ("self", operation)
        times, values = series["start_ns"][i].to_numpy(), series["value"][i].to_numpy().astype(np.float64)
        order = np.argsort(times, kind="stable")
        best = _best_cut(times[order], values[order], cuts, min_calls)
        if best is None:
            continue
        n_tested += 1
        p, at, before, after, effect = best
        mb, ma = float(np.median(before)), float(np.median(after))
        rise = ma / max(mb, 1.0)
        if kind == "gap":  # the largest relative rise of the pair's series
            gap_rises[(caller, callee)] = max(gap_rises.get((caller, callee), -np.inf), rise - 1)
        else:
            own_rises.append((callee, rise - 1))
        if p < level and effect >= min_effect and rise > 1:
            found.append(dict(kind=kind, key=key, callee=callee, caller=caller, onset_ns=int(at), p=p, effect=effect,
                              before=len(before), after=len(after), mb=mb, ma=ma, rise=rise))
    blamed = _blame(found, gap_rises, own_rises)
    out = [SeriesChange(kind=f["kind"], key=f["key"], service=s, caller_service=f["caller"],
                        callee_service=f["callee"] if f["kind"] == "gap" else None, onset_ns=f["onset_ns"],
                        calls_before=f["before"], calls_after=f["after"], median_before_ns=f["mb"],
                        median_after_ns=f["ma"], rise=f["rise"], effect=f["effect"], p_value=f["p"],
                        p_family=min(1.0, f["p"] * n_splits * n_tested))
           for f, s in zip(found, blamed)]
    out.sort(key=lambda c: (-c.rise, c.p_value, c.key))
    return tuple(out), n_tested


def _series(calls: pl.DataFrame) -> pl.DataFrame:
    """One row per series, in the order of their first call: ``gap`` (a gap series, else self
    time), ``caller_key`` (of a gap; ``"(entry)"`` for the entry span), ``operation_key``,
    ``callee``, ``caller_service`` (of a gap), ``start_ns`` and ``value`` (lists, one element per
    call, in input order), ``first`` and ``last`` (start of the series' first and last call).

    Grouped by streaming over the calls: no per-call copy of their string columns is made."""
    to_server = pl.col(S.SERVER_SERVICE).is_not_null()
    return (calls.lazy().select(
        to_server.alias("gap"),
        pl.when(to_server).then(pl.col(S.CALLER_KEY).fill_null("(entry)")).alias("caller_key"),
        S.OPERATION_KEY,
        pl.coalesce(S.SERVER_SERVICE, S.SERVICE).alias("callee"),
        pl.when(to_server).then(pl.col(S.SERVICE)).alias("caller_service"),
        pl.col("start_ns"),
        pl.when(to_server).then(pl.col(S.GAP_NS)).otherwise(pl.col(S.EXCLUSIVE_NS)).alias("value"),
    ).filter(pl.col("value").is_not_null())
        .group_by("gap", "caller_key", S.OPERATION_KEY, "callee", "caller_service")
        .agg("start_ns", "value", pl.col("start_ns").min().alias("first"), pl.col("start_ns").max().alias("last"))
        .sort("first", "gap", "caller_key", S.OPERATION_KEY, "callee", "caller_service", nulls_last=True)
        .collect(engine="streaming"))


def _best_cut(times: np.ndarray, values: np.ndarray, cuts: np.ndarray, min_calls: int):
    """(p, onset, before, after, effect) at the cut where the calls after are most significantly
    slower; None when no cut leaves ``min_calls`` on each side. ``times`` are sorted."""
    n = len(values)
    at = np.searchsorted(times, cuts, side="left")  # calls [at:] are after the cut
    at = np.unique(at[(at >= min_calls) & (n - at >= min_calls)])
    if len(at) == 0:
        return None
    if n <= EXACT_MAX_CALLS:
        res = [stats.mannwhitneyu(values[k:], values[:k], alternative="greater") for k in at]
        p = np.array([r.pvalue for r in res])
        u = np.array([r.statistic for r in res])
    else:
        ranks = stats.rankdata(values)
        tail = np.cumsum(ranks[::-1])[::-1]  # tail[k]: rank sum of calls k..n-1
        m = n - at
        u = tail[at] - m * (m + 1) / 2
        _, counts = np.unique(values, return_counts=True)
        ties = float(np.sum(counts.astype(np.float64) ** 3 - counts))
        var = at * m / 12 * ((n + 1) - ties / (n * (n - 1)))
        z = (u - at * m / 2 - 0.5) / np.sqrt(np.maximum(var, 1e-12))
        p = stats.norm.sf(z)
    i = int(np.argmin(p))
    k = int(at[i])
    return float(p[i]), int(times[k]), values[:k], values[k:], float(u[i] / (k * (n - k)))


def _blame(found: list[dict], gap_rises: dict, own_rises: list) -> list[str]:
    """The service each rise points to: its own for self time; for a gap, the owner by the one rule
    (:func:`~tracesleuth.model.gaps.gap_owner`) over every tested (caller, callee) service pair's
    relative rise (``gap_rises``: its series' median after its best cut over before, less 1), risen
    when found, and each self-time series' relative rise (``own_rises``: ``(service, rise)``)."""
    if not gap_rises:
        return [f["callee"] for f in found]
    pairs = sorted(gap_rises)
    risen = {(f["caller"], f["callee"]) for f in found if f["kind"] == "gap"}
    edges = pl.DataFrame({"caller": [a for a, _ in pairs], "callee": [b for _, b in pairs],
                          "rise": [float(gap_rises[pair]) for pair in pairs], "rose": [p in risen for p in pairs]})
    own = pl.DataFrame({"service": [a for a, _ in own_rises], "rise": [float(r) for _, r in own_rises]},
                       schema={"service": pl.String, "rise": pl.Float64})
    owners = dict(zip(pairs, gap_owner(edges, own).to_list()))
    return [owners[(f["caller"], f["callee"])] if f["kind"] == "gap" else f["callee"] for f in found]
