"""Density split points by mean shift, the degraded latency interval, and interval parsing.

Cortellessa & Traini (2020) use mean shift twice:

* Section 3.2 (search space reduction): for each RPC, cluster the execution times with mean shift
  and take as thresholds the values that separate the dense regions;
* Sections 2.2 and 4.3: the candidate split points ``s_0 < s_1 < ... < s_k`` of the latency
  interval ``I`` are the local minima of the latency density, found "by using the same approach
  used in search space reduction".

**The rule used here** (one rule for both uses). Mean shift with a flat kernel, bin seeding and
``min_bin_freq = min_bin_fraction * n`` (the settings of the authors' implementation) clusters the
values; in one dimension every cluster is a run of consecutive sorted values, because each value
goes to its nearest cluster centre. Between two adjacent clusters ``A < B`` the split point is the
midpoint of the empty gap between them, ``(max(A) + min(B) + 1) // 2`` in integer ns: the
least dense place between two modes that the sample shows, and any value in that gap splits the
data the same way. For thresholds the data's extremes are added: ``t_0 = min`` and
``t_K = max + 1``, so the bins ``[t_b, t_{b+1})`` cover every value.

**Automatic degraded interval, the paper's rule** (:func:`degraded_interval`). The main mode is
the most populous mean-shift cluster of all latencies (ties: the fastest).
``I = [first split point above the main mode, max latency + 1)``; when the main mode is the
slowest cluster there is no degradation to explain.

**Automatic degraded interval, the robust rule** (:func:`automatic_interval`, beyond the paper).
Recorded latencies break the paper's rule three ways: a degraded mode that sits in the normal
mode's long tail is merged with it (the interval starts above it); a slow tail without a separate
mode gives one cluster ("no degradation"); and when the degraded requests outnumber the healthy
ones, the most populous mode is the degraded one. The robust rule reads the latencies on a log
scale (latencies are products of slowdowns; a long right tail becomes a mode's shoulder) and

1. takes as **reference mode** the fastest mean-shift cluster holding at least
   ``min_mode_share`` times the requests of the most populous one (a degradation only adds
   time, so the healthy mode is the fastest large one);
2. measures its spread from its **faster half** only, which no degradation reaches:
   ``sigma = median(m - y | y < m) / 0.6745`` (the median of a half-normal), ``m`` its centre;
3. starts ``I`` at the lower of the density gap above the reference mode and the **tail cut**
   ``exp(m + tail_z * sigma)``, so that a degraded mode inside the tail is kept; the cut is
   taken only when the requests between it and the gap are more than ``min_excess`` times what
   the mode's own (symmetric) tail would put there, else the gap is (the stretch is the mode's
   tail);
4. finds nothing when the requests above the cut are no more than a symmetric mode would leave
   there (``tail_z = 2``: 2.3%), with the numbers; else it says which rule set the start, and
   when the start is at or below the median latency.

Why not ``sklearn.cluster.MeanShift`` itself: it runs one radius query per seed per iteration
(and per-seed joblib tasks), ~50 ms per attribute on 1,000 values and seconds on 10^6, while
this analysis needs one run per operation. :func:`mean_shift_1d` is the same algorithm
(same seeding, same stopping rule, same near-duplicate removal, same nearest-centre labels)
written for sorted 1-D data with prefix sums; the tests check it against scikit-learn.

References
----------
V. Cortellessa and L. Traini. ICPE 2020. https://doi.org/10.1145/3358960.3379126
D. Comaniciu and P. Meer. "Mean shift: a robust approach toward feature space analysis". IEEE
TPAMI 24(5), 2002. https://doi.org/10.1109/34.1000236
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

import numpy as np

from ...errors import ParameterError
from ...units import format_duration_ns, parse_duration
from ._model import LatencyInterval
from .notes import IntervalBelowMedian, NoDegradation, NoSpread, NothingSlower, TailOfChance, reference_mode_words

__all__ = [
    "IntervalChoice",
    "MeanShiftResult",
    "attribute_thresholds",
    "automatic_interval",
    "degraded_interval",
    "density_split_points",
    "estimate_bandwidth_1d",
    "interval_split_points",
    "mean_shift_1d",
    "merge_small",
    "parse_interval",
]

#: Above this many values the bandwidth is estimated on evenly spaced order statistics.
BANDWIDTH_SAMPLE = 10_000

#: Up to this many values, mean shift moves each seed on its own in Python floats (bisection in
#: lists): a few dozen seeds of a thousand values settle in microseconds each, while a step over
#: all seeds as arrays costs tens of microseconds whatever their number. Beyond, the values'
#: conversion to lists costs more than the array steps.
CLIMB_LISTS = 20_000


# --------------------------------------------------------------------------------------------
# Bandwidth
# --------------------------------------------------------------------------------------------


def _kth_neighbour_distance(x: np.ndarray, k: int) -> np.ndarray:
    """Distance from each sorted value to its k-th nearest value, itself counted first.

    The k nearest values of ``x[i]`` form a window ``x[l : l + k]`` that holds ``i``; the distance
    is ``max(x[i] - x[l], x[l + k - 1] - x[i])``, least at the smallest ``l`` whose right side
    reaches at least as far as its left, ``x[l] + x[l + k - 1] >= 2 x[i]``, or the window before
    it. The sums ``x[l] + x[l + k - 1]`` do not decrease with ``l``, so that ``l`` is one binary
    search per value in them (for the integer nanoseconds this module is given, below 2**52, the
    sums are exact: the same windows as comparing the two sides' differences).
    """
    n = x.size
    i = np.arange(n)
    lo = np.maximum(0, i - k + 1)
    hi = np.minimum(i, n - k)  # inclusive range of window starts
    reach = x[: n - k + 1] + x[k - 1 :]  # x[l] + x[l + k - 1] for every window start l
    a = np.clip(np.searchsorted(reach, 2.0 * x, side="left"), lo, hi + 1)
    best = np.full(n, np.inf)
    for cand in (a, a - 1):
        ok = (cand >= lo) & (cand <= hi)
        c = np.clip(cand, 0, max(n - k, 0))
        d = np.maximum(x - x[c], x[np.minimum(c + k - 1, n - 1)] - x)
        best = np.where(ok, np.minimum(best, d), best)
    return best


def estimate_bandwidth_1d(values: np.ndarray, *, quantile: float = 0.3, max_samples: int = BANDWIDTH_SAMPLE) -> float:
    """Mean distance to the ``quantile * n``-th nearest neighbour, as ``sklearn.cluster.estimate_bandwidth``.

    Parameters
    ----------
    values : ndarray of shape (n_values,)
        Finite values (any unit; the result is in the same unit).
    quantile : float, default=0.3
        In (0, 1].
    max_samples : int, default=10000
        Above this many values the estimate uses ``max_samples`` evenly spaced order statistics
        (deterministic, unlike a random subsample).

    Returns
    -------
    float
        The bandwidth. When it is 0 (most values repeated, or ``quantile * n < 2``) but the values
        are not all equal, it is re-estimated on the distinct values with at least 2 neighbours
        (the first is the value itself), so a non-constant sample always gets a positive one.
    """
    if not 0.0 < quantile <= 1.0:
        raise ParameterError(f"The 'quantile' parameter must be a float in (0, 1]. Got {quantile!r} instead.")
    x = np.sort(np.asarray(values, dtype=np.float64))
    if x.size == 0:
        raise ParameterError("Cannot estimate a bandwidth from no value.")
    return _estimate_sorted(x, quantile, max_samples)


def _estimate_sorted(x: np.ndarray, quantile: float, max_samples: int = BANDWIDTH_SAMPLE) -> float:
    if x.size > max_samples:
        x = x[np.linspace(0, x.size - 1, max_samples).round().astype(np.int64)]
    bandwidth = _bandwidth_sorted(x, quantile)
    if bandwidth == 0.0 and x[0] != x[-1]:
        bandwidth = _bandwidth_sorted(np.unique(x), quantile, min_neighbours=2)
    return bandwidth


def _bandwidth_sorted(x: np.ndarray, quantile: float, min_neighbours: int = 1) -> float:
    k = min(x.size, max(min_neighbours, int(x.size * quantile)))
    return float(_kth_neighbour_distance(x, k).mean())


# --------------------------------------------------------------------------------------------
# Mean shift
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeanShiftResult:
    """Clusters of 1-D values found by :func:`mean_shift_1d`, in increasing order.

    Attributes
    ----------
    centers : ndarray of shape (n_clusters,)
        Cluster centres (modes), increasing.
    counts : ndarray of shape (n_clusters,)
        Values per cluster (every value belongs to its nearest centre).
    minima, maxima : ndarray of shape (n_clusters,)
        Extent of each cluster; ``maxima[c] < minima[c + 1]``.
    bandwidth : float
        The flat kernel's radius.
    """

    centers: np.ndarray
    counts: np.ndarray
    minima: np.ndarray
    maxima: np.ndarray
    bandwidth: float

    @property
    def n_clusters(self) -> int:
        return int(self.centers.size)

    def gap_split_points_float(self) -> np.ndarray:
        """Midpoints of the gaps between adjacent clusters, shape (n_clusters - 1,)."""
        return (self.maxima[:-1] + self.minima[1:]) / 2.0

    def gap_split_points(self) -> np.ndarray:
        """Integer midpoints of the gaps between adjacent clusters, shape (n_clusters - 1,)."""
        lo = np.floor(self.maxima[:-1]).astype(np.int64)
        hi = np.ceil(self.minima[1:]).astype(np.int64)
        return (lo + hi + 1) // 2


def _bin_seeds(x: np.ndarray, h: float, min_bin_fraction: float) -> np.ndarray:
    """Seeds of the sorted values ``x`` (sklearn.cluster.get_bin_seeds): bins of width ``h`` holding
    at least ``min_bin_fraction`` of the values (the fullest when none does); every value when
    each has its own bin."""
    n = x.size
    binned = np.round(x / h)  # non-decreasing, as x is sorted: bins are runs
    starts = np.concatenate(([0], np.flatnonzero(np.diff(binned)) + 1))
    bins = binned[starts]
    bin_counts = np.diff(np.concatenate((starts, [n])))
    keep = bin_counts >= min_bin_fraction * n
    if keep.all() and bins.size == n:
        return x.copy()
    if not keep.any():
        keep = bin_counts == bin_counts.max()
    return bins[keep].astype(np.float32).astype(np.float64) * h


def _climb(means: np.ndarray, xs: np.ndarray, prefix: np.ndarray, h: float, max_iter: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """Each seed moved to the mean of the values within ``h`` until it moves less than ``h / 1000``
    (flat kernel; ``prefix``: cumulative sums of the sorted ``xs``). Returns the final means and
    how many values each had within ``h``. Seed by seed in Python floats up to :data:`CLIMB_LISTS`
    values, all seeds at once as arrays beyond: the same float64 operations, the same result."""
    if xs.size <= CLIMB_LISTS:
        return _climb_each(means, xs, prefix, h, max_iter)
    stop = 1e-3 * h
    intensity = np.zeros(means.size, dtype=np.int64)
    active = np.arange(means.size)
    m = means.copy()
    for _ in range(max_iter + 1):
        lo = np.searchsorted(xs, m - h, side="left")
        hi = np.searchsorted(xs, m + h, side="right")
        count = hi - lo
        new = (prefix[hi] - prefix[lo]) / np.maximum(count, 1)
        done = np.abs(new - m) <= stop
        if not count.all():  # no value within h: the seed stays (a seed has its bin's values nearby)
            new = np.where(count == 0, m, new)
            done |= count == 0
        if done.any():  # the seeds that settled keep their mean and how many values it had within h
            means[active[done]], intensity[active[done]] = new[done], count[done]
            keep = ~done
            active, new, count = active[keep], new[keep], count[keep]
            if active.size == 0:
                return means, intensity
        m = new
    means[active], intensity[active] = m, count  # after max_iter steps, the seeds still moving
    return means, intensity


def _climb_each(means: np.ndarray, xs: np.ndarray, prefix: np.ndarray, h: float, max_iter: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_climb`, one seed at a time (``bisect`` on lists is ``np.searchsorted``)."""
    stop = 1e-3 * h
    values, sums = xs.tolist(), prefix.tolist()
    out, intensity = means.tolist(), [0] * means.size
    for s, m in enumerate(out):
        for _ in range(max_iter + 1):
            lo, hi = bisect_left(values, m - h), bisect_right(values, m + h)
            count = hi - lo
            new = m if count == 0 else (sums[hi] - sums[lo]) / count
            settled = count == 0 or abs(new - m) <= stop
            m = new
            if settled:
                break
        out[s], intensity[s] = m, count
    return np.array(out, dtype=np.float64), np.array(intensity, dtype=np.int64)


def _distinct_centres(final: np.ndarray, intensity: np.ndarray, h: float, xs: np.ndarray) -> np.ndarray:
    """The centres reached, the most intense first, each dropping the others within ``h`` (as
    scikit-learn's MeanShift), sorted."""
    valid = intensity > 0
    centers, intensity = final[valid], intensity[valid]
    if centers.size == 0:  # pragma: no cover - every seed has its own bin's values nearby
        centers, intensity = np.array([np.median(xs)]), np.array([xs.size])
    # Same centre reached from several seeds: one entry (the dict of scikit-learn).
    centers, first = np.unique(centers, return_index=True)
    intensity = intensity[first]
    order = np.lexsort((-centers, -intensity))  # intensity desc, then centre desc
    ranked = centers[order]
    unique = np.ones(ranked.size, dtype=bool)
    by_value = np.argsort(ranked, kind="stable")
    sorted_vals = ranked[by_value]
    for i in range(ranked.size):
        if unique[i]:
            a = np.searchsorted(sorted_vals, ranked[i] - h, side="left")
            b = np.searchsorted(sorted_vals, ranked[i] + h, side="right")
            unique[by_value[a:b]] = False
            unique[i] = True
    return np.sort(ranked[unique])


def mean_shift_1d(
    values: np.ndarray,
    *,
    bandwidth: float | None = None,
    quantile: float = 0.3,
    min_bin_fraction: float = 0.01,
    max_iter: int = 300,
) -> MeanShiftResult:
    """Flat-kernel mean shift with bin seeding on 1-D data (``sklearn.cluster.MeanShift`` semantics).

    Seeds are the centres of the bins ``round(x / bandwidth)`` holding at least
    ``min_bin_fraction * n`` values (all values if every bin holds one value, as in scikit-learn;
    the most populous bins if none reaches the threshold). Each seed moves to the mean of the
    values within ``bandwidth`` until it moves by at most ``1e-3 * bandwidth`` or after
    ``max_iter`` steps. Centres closer than ``bandwidth`` to a centre with more values nearby are
    removed; each value goes to its nearest remaining centre.

    Parameters
    ----------
    values : ndarray of shape (n_values,)
        Finite values, at least one.
    bandwidth : float, optional
        Kernel radius; default :func:`estimate_bandwidth_1d` with ``quantile``.
    quantile : float, default=0.3
    min_bin_fraction : float, default=0.01
        Minimum seed-bin population as a fraction of the values.
    max_iter : int, default=300

    Returns
    -------
    MeanShiftResult
        A single cluster when the values are constant.
    """
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    if n == 0:
        raise ParameterError("Mean shift needs at least one value. Got none.")
    if not np.isfinite(x).all():
        raise ParameterError("Mean shift needs finite values. Got NaN or infinity.")
    if bandwidth is None:
        if not 0.0 < quantile <= 1.0:
            raise ParameterError(f"The 'quantile' parameter must be a float in (0, 1]. Got {quantile!r} instead.")
        bandwidth = _estimate_sorted(x, quantile)
    if x[0] == x[-1] or bandwidth <= 0:
        # Constant values: one mode. (bandwidth 0 only arises for constant values.)
        return MeanShiftResult(np.array([x[0]]), np.array([n]), np.array([x[0]]), np.array([x[-1]]), float(bandwidth))
    h = float(bandwidth)
    origin = x[0]
    xs = x - origin  # small magnitudes keep the prefix sums exact enough
    prefix = np.concatenate(([0.0], np.cumsum(xs)))

    kept = _distinct_centres(*_climb(_bin_seeds(x, h, min_bin_fraction) - origin, xs, prefix, h, max_iter), h, xs)

    # Nearest centre: boundaries at the midpoints between adjacent centres.
    cuts = (kept[:-1] + kept[1:]) / 2.0
    # xs is sorted: centre j holds a run, from the first value above cut j - 1 to the last at most cut j.
    bounds = np.concatenate(([0], np.searchsorted(xs, cuts, side="right"), [n]))
    counts = np.diff(bounds)
    nonempty = counts > 0
    starts, ends = bounds[:-1], bounds[1:] - 1
    minima = xs[np.clip(starts, 0, n - 1)] + origin
    maxima = xs[np.clip(ends, 0, n - 1)] + origin
    return MeanShiftResult(
        centers=kept[nonempty] + origin,
        counts=counts[nonempty],
        minima=minima[nonempty],
        maxima=maxima[nonempty],
        bandwidth=h,
    )


def density_split_points(values: np.ndarray, **mean_shift: float) -> np.ndarray:
    """Split points between the dense regions of ``values`` (Sections 2.2, 3.2 and 4.3).

    Parameters
    ----------
    values : ndarray of shape (n_values,)
        Integer values (ns), at least one.
    **mean_shift
        ``quantile``, ``min_bin_fraction``, ``bandwidth`` of :func:`mean_shift_1d`.

    Returns
    -------
    ndarray of int64, shape (n_clusters - 1,)
        Increasing split points strictly between the data's minimum and maximum (+1).
    """
    return mean_shift_1d(values, **mean_shift).gap_split_points()


def attribute_thresholds(values: np.ndarray, **mean_shift: float) -> np.ndarray:
    """Inequality-check thresholds ``e_t`` of one continuous attribute (Section 3.2).

    Parameters
    ----------
    values : ndarray of int64, shape (n_present,)
        The attribute's present values (missing ones left out), at least one.

    Returns
    -------
    ndarray of int64, shape (n_clusters + 1,)
        ``[min, split points..., max + 1]``: the bins ``[t_b, t_{b+1})`` are the dense regions.
    """
    values = np.asarray(values)
    lo, hi = int(values.min()), int(values.max())
    inner = density_split_points(values, **mean_shift)
    return np.concatenate(([lo], inner, [hi + 1])).astype(np.int64)


def degraded_interval(latency_ns: np.ndarray, **mean_shift: float) -> tuple[LatencyInterval | None, MeanShiftResult]:
    """The automatic degraded interval: from the first split point above the main mode to the max.

    Parameters
    ----------
    latency_ns : ndarray of int64, shape (n_requests,)

    Returns
    -------
    interval : LatencyInterval or None
        ``[split point above the main mode, max latency + 1)``; ``None`` when the main mode (most
        populous cluster, ties to the fastest) is the slowest cluster.
    clusters : MeanShiftResult
        The latency clusters the rule was applied to.
    """
    clusters = mean_shift_1d(latency_ns, **mean_shift)
    main = int(np.argmax(clusters.counts))  # first maximum: the fastest among ties
    if main == clusters.n_clusters - 1:
        return None, clusters
    low = int(clusters.gap_split_points()[main])
    return LatencyInterval(low, int(np.max(latency_ns)) + 1), clusters


@dataclass(frozen=True)
class IntervalChoice:
    """What :func:`automatic_interval` chose, and why.

    Attributes
    ----------
    interval : LatencyInterval or None
        ``None`` when there is no degradation to explain.
    rule : {"gap", "tail", "none"}
        ``"gap"``: the interval starts at the density gap above the reference mode;
        ``"tail"``: at the reference mode's tail cut (below the gap, or no gap); ``"none"``.
    reason : str or NoDegradation
        In words, with the numbers: the reference mode, its spread, the cut and the share of
        requests above it; when ``interval`` is None, why nothing was found (a note: its kind
        and numbers, :mod:`.notes`).
    mode_ns : int
        Centre of the reference mode, ns.
    notes : tuple of Note
        Worth knowing beside the reason (:class:`~.notes.IntervalBelowMedian`).
    uncertain_ns : int or None
        Start of the stretch below the interval whose requests are neither clearly normal
        (beyond the reference mode's usual spread) nor in the interval: the pattern scores leave
        them out (:class:`~.refinements.UncertainBand` sets it). None: no such stretch.
    log_centre, log_sigma : float or None
        The reference mode as fitted on a log scale (``m``, ``sigma``): what
        :class:`~.refinements.UncertainBand` measures its band in. None: no mode fitted (a given
        interval, the paper's rule).
    """

    interval: LatencyInterval | None
    rule: str
    reason: str | NoDegradation
    mode_ns: int
    notes: tuple = ()
    uncertain_ns: int | None = None
    log_centre: float | None = None
    log_sigma: float | None = None


#: Share of a symmetric mode beyond ``tail_z`` standard deviations, for ``tail_z = 2``.
def _normal_tail(z: float) -> float:
    from math import erfc, sqrt

    return 0.5 * erfc(z / sqrt(2.0))


#: The median of a half-normal distribution in standard deviations (``Phi^-1(0.75)``): the
#: spread of a mode from the median distance of its faster half to its centre.
HALF_NORMAL_MEDIAN = 0.6745
#: Fewer values in a mode's faster half give no median to trust: the whole mode's spread is used.
MIN_HALF = 5
#: A slow tail (no density gap) is a degradation when it holds at least this many times the
#: requests the reference mode's fast tail holds as far below its centre (the mode's own chance
#: tail, measured on its mirror rather than assumed normal): measured on seeds 0-7, one lognormal
#: mode gives ratios 0.4-1.8, a 30 ms delay of 15% of the requests over a 58 ms mode 3.0-5.5. The
#: share beyond the cut alone (``min_excess`` x 2.3%) called that delay "a tail of chance" on 4 of
#: 8 seeds (5.1-5.9% beyond the cut, under 6.9%); either test finds it on all 8, and no one-mode
#: sample of seeds 0-7.
MIN_TAIL_RATIO = 2.5
#: ... and when the difference is significant: ``(slow - mirror) / sqrt(slow + mirror)`` (Poisson
#: counts) at least this. Not 3: the mode's centre and spread are estimated (mean shift, its faster
#: half), so one mode's own tails differ by more than chance: up to 3.2 measured on one lognormal
#: mode (seeds 0-7), 3.1 for 500 requests of one mode and 3 outliers; the delay above gives 7.2-15.
MIN_TAIL_Z = 4.0


def automatic_interval(latency_ns: np.ndarray, *, tail_z: float = 2.0, min_mode_share: float = 0.5,
                       min_excess: float = 3.0, min_tail_ratio: float = MIN_TAIL_RATIO, min_tail_z: float = MIN_TAIL_Z,
                       **mean_shift: float) -> IntervalChoice:
    """The robust automatic degraded interval (module notes; beyond the paper).

    Parameters
    ----------
    latency_ns : ndarray of int64, shape (n_requests,)
        At least two distinct positive values.
    tail_z : float, default=2.0
        The tail cut, in standard deviations of the reference mode (log scale) above its centre.
    min_mode_share : float, default=0.5
        A cluster is a candidate reference mode when it holds at least this share of the most
        populous cluster's requests.
    min_excess : float, default=3.0
        A slow tail is a degradation when the requests at or above the tail cut are at least
        ``min_excess`` times what a normal mode leaves beyond it (2.3% at ``tail_z=2``); and a
        density gap above the cut is the start only when the requests between the cut and the
        gap are no more than ``min_excess`` times what the mode leaves there by chance.
    min_tail_ratio, min_tail_z : float, default=MIN_TAIL_RATIO (2.5), MIN_TAIL_Z (4.0)
        ... or when the slow tail holds ``min_tail_ratio`` times the mode's requests as far below
        its centre (its mirrored tail), a difference of at least ``min_tail_z`` Poisson standard
        deviations: see :data:`MIN_TAIL_RATIO` for why and what was measured.
    **mean_shift
        ``quantile`` and ``min_bin_fraction`` of :func:`mean_shift_1d`.

    Returns
    -------
    IntervalChoice

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> normal = rng.lognormal(np.log(50e6), 0.3, 900)
    >>> slow = rng.lognormal(np.log(50e6), 0.3, 100) + 40e6   # a degraded mode in the normal tail
    >>> choice = automatic_interval(np.concatenate([normal, slow]).astype(np.int64))
    >>> choice.rule, round(choice.interval.low_ns / 1e6)
    ('tail', 81)
    """
    latency = np.asarray(latency_ns, dtype=np.int64)
    y = np.log(np.maximum(latency, 1).astype(np.float64))
    clusters = mean_shift_1d(y, **mean_shift)
    counts = clusters.counts
    ref, m, sigma, in_ref = _reference_mode(y, clusters, min_mode_share)
    mode_ns = int(round(np.exp(m)))
    cut = int(np.ceil(np.exp(m + tail_z * sigma))) if sigma > 0 else None
    gap = int(np.ceil(np.exp(clusters.gap_split_points_float()[ref]))) if ref < clusters.n_clusters - 1 else None
    n = latency.size
    expected = _normal_tail(tail_z)
    mode = (mode_ns, int(counts[ref]), n, min_mode_share if ref else None, float(np.exp(sigma)))  # (reference_mode_words)
    if gap is not None and cut is not None and cut < gap and _own_tail(y, in_ref, m, sigma, cut, gap, tail_z,
                                                                      min_excess):
        cut = None  # no more than the mode's own tail between the cut and the gap: the gap is the start
    if gap is None and cut is None:
        return IntervalChoice(None, "none", NoSpread(mode_ns), mode_ns)
    low, rule, why = _start(gap, cut, reference_mode_words(*mode), tail_z)
    above = int(np.count_nonzero(latency >= low))
    share = above / n
    # a slow tail is a degradation when it is heavier than a normal mode's (min_excess) or than the mode's own
    # mirrored fast tail (min_tail_ratio, min_tail_z): either test, as a degraded mode inside the spread shows in one
    chance = (_tail_of_chance(y, in_ref, m, low, min_tail_ratio, min_tail_z)
              if rule == "tail" and share < min_excess * expected else None)
    if chance is not None:
        n_mirror, significance = chance
        return IntervalChoice(None, "none", TailOfChance(*mode, int(low), above, min_excess, expected, n_mirror,
                                                         min_tail_ratio, significance, min_tail_z), mode_ns)
    if above == 0:
        return IntervalChoice(None, "none", NothingSlower(*mode, int(low)), mode_ns)
    median = float(np.median(latency))
    notes = (IntervalBelowMedian(int(low), int(median), share),) if low <= median else ()
    reason = f"{why}; {above:,} request(s) ({share:.1%}) are at or above it."
    return IntervalChoice(LatencyInterval(int(low), int(latency.max()) + 1), rule, reason, mode_ns, notes,
                          None, m, sigma)


def _reference_mode(y: np.ndarray, clusters: "MeanShiftResult", min_mode_share: float
                    ) -> tuple[int, float, float, np.ndarray]:
    """The reference mode of log latencies ``y``: the fastest cluster with at least
    ``min_mode_share`` of the largest's values. Returns its index, centre ``m``, spread ``sigma``
    (from its faster half, the robust ``median / 0.6745``; its whole spread when the faster half
    holds fewer than 5 values) and its members."""
    counts = clusters.counts
    ref = int(np.flatnonzero(counts >= min_mode_share * counts.max())[0])
    m = float(clusters.centers[ref])
    in_ref = (y >= clusters.minima[ref]) & (y <= clusters.maxima[ref])
    below = m - y[in_ref & (y < m)]
    sigma = float(np.median(below)) / HALF_NORMAL_MEDIAN if below.size >= MIN_HALF else 0.0
    if sigma <= 0:  # too few faster values: the cluster's own spread
        sigma = float(np.median(np.abs(y[in_ref] - m))) / HALF_NORMAL_MEDIAN
    return ref, m, sigma, in_ref


def _start(gap: int | None, cut: int | None, spread: str, tail_z: float) -> tuple[int, str, str]:
    """The interval's start: the density gap above the reference mode or its tail cut, whichever
    is lower (one of them given), with the rule's name and why in words."""
    if gap is not None and (cut is None or gap <= cut):
        return gap, "gap", f"{spread}; the interval starts at the density gap above it, {format_duration_ns(gap)}"
    return cut, "tail", (
        f"{spread}; the interval starts at its tail cut, {tail_z:g} standard deviations above it: "
        f"{format_duration_ns(cut)}"
        + (f" (below the next density gap, {format_duration_ns(gap)}, which would leave out a degraded "
           f"mode in the tail)" if gap is not None else " (no density gap above it: a slow tail, not a mode)"))


def _own_tail(y: np.ndarray, in_ref: np.ndarray, m: float, sigma: float, cut: int, gap: int, tail_z: float,
              min_excess: float) -> bool:
    """Whether the requests between the tail cut and the density gap above it are the reference
    mode's own tail (no more than ``min_excess`` times what a normal mode leaves there), not a
    degraded mode in the tail."""
    n_mode = 2 * int(np.count_nonzero(in_ref & (y < m)))
    z_gap = (np.log(gap) - m) / sigma
    chance = n_mode * (_normal_tail(tail_z) - _normal_tail(float(z_gap)))
    between = int(np.count_nonzero((y >= np.log(cut)) & (y < np.log(gap))))
    return between <= min_excess * max(chance, 1.0)


def _tail_of_chance(y: np.ndarray, in_ref: np.ndarray, m: float, low: int, min_ratio: float, min_z: float
                    ) -> tuple[int, float | None] | None:
    """Whether the slow tail from ``low`` is the mode's own: ``(mirror, significance)`` when it
    holds under ``min_ratio`` times the ``mirror`` values of the mode (``in_ref``) as far below its
    centre ``m`` (its mirrored fast tail; faster modes, other kinds of request, are not its tail;
    significance None), or a difference of ``significance`` < ``min_z`` Poisson standard
    deviations; None when it is a degradation."""
    above = int(np.count_nonzero(y >= np.log(low)))
    mirror = int(np.count_nonzero(in_ref & (y <= 2 * m - np.log(low))))
    significance = (above - mirror) / np.sqrt(above + mirror) if above + mirror else 0.0
    if above < min_ratio * mirror:
        return mirror, None
    if significance < min_z:
        return mirror, float(significance)
    return None


def interval_split_points(
    latency_ns: np.ndarray,
    interval: LatencyInterval,
    *,
    max_split_points: int | None = None,
    **mean_shift: float,
) -> np.ndarray:
    """Candidate split points ``s_0 < ... < s_k`` of ``I`` from the latencies inside it.

    ``s_0`` and ``s_k`` are the interval's bounds; the inner points are the density split points
    of the latencies in ``I`` (mean shift re-run on those latencies only). When there are more
    than ``max_split_points`` inner points, the least populated sub-interval is merged with a
    neighbour, across whichever of its two bounds lies in the narrower gap between latencies,
    until there are at most that many (the DP costs ``O(k^2)`` searches).

    Returns
    -------
    ndarray of int64, shape (k + 1,)
    """
    latency_ns = np.asarray(latency_ns)
    inside = latency_ns[interval.contains(latency_ns)]
    inner = density_split_points(inside, **mean_shift) if inside.size else np.empty(0, np.int64)
    inner = inner[(inner > interval.low_ns) & (inner < interval.high_ns)]
    bounds = np.concatenate(([interval.low_ns], np.unique(inner), [interval.high_ns])).astype(np.int64)
    if max_split_points is not None:
        bounds = _merge_to(bounds, np.sort(inside), max_split_points)
    return bounds


def merge_small(bounds: np.ndarray, latency_ns: np.ndarray, min_support: int) -> np.ndarray:
    """Split points ``bounds`` with the inner points removed until every elementary sub-interval
    holds at least ``min_support`` of the latencies (or none is left to remove).

    The least populated sub-interval is merged first, as in :func:`interval_split_points`. Beyond the paper (``min_support=1`` changes nothing).

    Returns
    -------
    ndarray of int64, shape (k' + 1,), ``k' <= k``
    """
    inside = np.sort(np.asarray(latency_ns)[(latency_ns >= bounds[0]) & (latency_ns < bounds[-1])])
    return _merge_to(bounds, inside, None, min_support)


def _gap_width(sorted_values: np.ndarray, edge: int) -> float:
    """Width of the empty gap around a split point whose first value at or above it is ``sorted_values[edge]``."""
    if edge <= 0 or edge >= sorted_values.size:
        return float("inf")
    return float(sorted_values[edge] - sorted_values[edge - 1])


def _merge_to(bounds: np.ndarray, sorted_inside: np.ndarray, max_inner: int | None, min_size: int = 0) -> np.ndarray:
    """Remove inner bounds until at most ``max_inner`` remain and every sub-interval holds
    ``min_size`` values: the least populated sub-interval goes first, merged across the bound that
    sits in the narrower gap between values (the shallower density minimum)."""
    bounds = list(bounds)
    while len(bounds) > 2:
        edges = np.searchsorted(sorted_inside, np.asarray(bounds), side="left")
        sizes = np.diff(edges)
        if (max_inner is None or len(bounds) - 2 <= max_inner) and sizes.min() >= min_size:
            break
        i = int(np.argmin(sizes))  # sub-interval [bounds[i], bounds[i+1])
        if i == 0:
            drop = 1
        elif i == len(sizes) - 1:
            drop = i
        else:  # keep the bound in the wider empty gap between latencies: the deeper density minimum
            drop = i if _gap_width(sorted_inside, edges[i]) <= _gap_width(sorted_inside, edges[i + 1]) else i + 1
        del bounds[drop]
    return np.asarray(bounds, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# Parsing (durations: :func:`tracesleuth.units.parse_duration`)
# --------------------------------------------------------------------------------------------


def parse_interval(spec: "str | tuple[int, int] | LatencyInterval", *, latency_ns: np.ndarray | None = None) -> LatencyInterval:
    """Read a latency interval ``"350ms:700ms"`` (half-open ``[350 ms, 700 ms)``).

    Parameters
    ----------
    spec : str, (int, int) or LatencyInterval
        ``"LOW:HIGH"`` with units ns/us/ms/s; an empty side means the data's minimum (low) or
        maximum + 1 ns (high) and needs ``latency_ns``. A pair of ints is read as nanoseconds.
    latency_ns : ndarray, optional
        The latencies, for open sides.

    Raises
    ------
    ParameterError
        Malformed text, ``low >= high``, or an open side without latencies.

    Examples
    --------
    >>> parse_interval("350ms:700ms")
    LatencyInterval(low_ns=350000000, high_ns=700000000)
    """
    if isinstance(spec, LatencyInterval):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2:
        try:
            return LatencyInterval(int(spec[0]), int(spec[1]))
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ParameterError):
                raise ParameterError(f"The 'interval' parameter: {exc}") from None
            raise ParameterError(f"The 'interval' parameter must be 'LOW:HIGH' or (low_ns, high_ns). Got {spec!r} instead.") from None
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ParameterError(
            f"The 'interval' parameter must be a string 'LOW:HIGH' such as '350ms:700ms' or a pair "
            f"(low_ns, high_ns). Got {spec!r} instead."
        )
    low_text, high_text = (part.strip() for part in spec.split(":"))
    if (not low_text or not high_text) and latency_ns is None:
        raise ParameterError(f"The 'interval' {spec!r} has an open side; it needs the latencies to close it.")
    low = parse_duration(low_text) if low_text else int(np.min(latency_ns))
    high = parse_duration(high_text) if high_text else int(np.max(latency_ns)) + 1
    if not low < high:
        raise ParameterError(f"The 'interval' parameter must have LOW < HIGH. Got {spec!r} ([{low}, {high}) ns) instead.")
    return LatencyInterval(low, high)
