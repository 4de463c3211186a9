"""Change points of a request series: Pettitt's rank test and the latest change before a moment.

A user who noticed an incident gives a moment inside it (``--at``); the onset is the latest
change of the requests' series (latency, errors, error-level log records) before that moment.

* :func:`pettitt` - A. N. Pettitt, "A non-parametric approach to the change-point problem",
  Applied Statistics 28(2), 1979, Section 2: ``U_t = sum_{i<=t} sum_{j>t} sign(x_j - x_i)``,
  ``K = max |U_t|``, approximate p-value ``2 exp(-6 K^2 / (n^3 + n^2))`` (eq. 2.3), here with the
  ranks' tie-corrected variance (without ties the same). Rank based, so it is indifferent to the
  latency distribution's shape and holds on 0/1 series (errors). A change in one direction only (a
  rise of latency or errors: an incident's onset, not an earlier incident's recovery) is searched
  with Pettitt's one-sided statistics (``max(-U_t)``: the series rose; ``max U_t``: it fell, with
  ``U_t`` as written here), p-value ``exp(-6 K^2 / (n^3 + n^2))``, half the two-sided bound (Pettitt
  1979, Section 2; the one-sided tail of the Brownian bridge): a two-sided scan followed by
  a check of the direction finds the largest change and drops it when it is a fall, although a rise
  may sit elsewhere in the series (measured on the recorded faults: onset found 30 -> 31 of 35,
  within 60 s 21 -> 24, the injected service first 14 -> 17).
* :func:`latest_change` - binary segmentation (Scott & Knott, 1974) that keeps the segment *after*
  each significant change at or before the moment, and the segment *before* each one after it: the
  last change before the moment, with its p-value and direction.
* :func:`smallest_p_value` and :func:`tarone_level` - the onset is searched in hundreds of series at
  once (every service's), and Bonferroni divides the level by all of them, although many cannot reach
  it whatever their order (about half on the TrainTicket day): a series of 25 values, one that holds
  two errors, a constant one (no logs recorded). Tarone's
  modified Bonferroni procedure (R. E. Tarone, "A modified Bonferroni method for discrete data",
  Biometrics 46(2), 1990, pp. 515-522) divides it only by the series that can: the smallest ``K``
  such that at most ``K`` series have a smallest attainable p-value ``<= level / K``. The
  family-wise error of the first split of each series stays below ``level`` (the series that cannot
  reach ``level / K`` never reject; the later splits of binary segmentation are held to the same
  level, as with Bonferroni), and the level of each series that can is larger.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["Change", "latest_change", "pettitt", "smallest_p_value", "tarone_level"]


@dataclass(frozen=True)
class Change:
    """One change point of a series.

    Attributes
    ----------
    index : int
        The first element after the change (``x[index:]`` is the new regime).
    p_value : float
        Pettitt's approximate p-value (eq. 2.3), in [0, 1].
    direction : int
        +1 when the series rose after the change, -1 when it fell.
    """

    index: int
    p_value: float
    direction: int


def pettitt(x, direction: int | None = None) -> Change | None:
    """Pettitt's test for one change in location of ``x`` (ordered in time).

    Parameters
    ----------
    x : array_like, shape (n,)
        Values in time order (ties allowed: mid-ranks).
    direction : {1, -1} or None, default=None
        Test for a rise only (1), a fall only (-1; Pettitt's one-sided statistics), or either.

    Returns
    -------
    Change or None
        The most likely change point (in ``direction``) and its p-value; None when ``n < 4``, the
        series is constant, or it never moves in ``direction``.

    Notes
    -----
    ``U_t = 2 R_t - t (n + 1)`` with ``R_t`` the sum of the first ``t`` ranks (Pettitt 1979,
    eq. 2.1 written with ranks), so the scan is O(n log n).
    """
    x = np.asarray(x, float)
    n = x.size
    if n < 4 or np.all(x == x[0]):
        return None
    # U_t < 0: the first t ranks are low, the series rose after t.
    u = _scan(stats.rankdata(x))
    score = np.abs(u) if direction is None else -direction * u
    k = int(np.argmax(score))
    if score[k] <= 0:
        return None
    return Change(index=k + 1, p_value=_p_value(float(score[k]), x, two_sided=direction is None),
                  direction=1 if u[k] < 0 else -1)


def _scan(ranks: np.ndarray) -> np.ndarray:
    """Pettitt's ``U_t`` for ``t = 1 .. n - 1`` (eq. 2.1 written with the ranks)."""
    n = ranks.size
    return 2 * np.cumsum(ranks)[:-1] - np.arange(1, n) * (n + 1)


def _p_value(big_k: float, x: np.ndarray, two_sided: bool = True) -> float:
    """Pettitt's approximate p-value of ``K = max |U_t|`` (or of a one-sided ``K+``, ``K-``) on the
    values ``x`` (eq. 2.3, tie-corrected)."""
    n = x.size
    # U_t / (2 sigma sqrt(n)) is asymptotically a Brownian bridge (P(sup |B| > b) ~ 2 exp(-2 b^2),
    # P(sup B > b) = exp(-2 b^2) one-sided),
    # sigma^2 the variance of the ranks: (n^2 - 1) / 12 without ties, which gives Pettitt's eq. 2.3,
    # less the tie correction sum(t^3 - t) / (12 n) with ties (0/1 series are all ties).
    _, tied = np.unique(x, return_counts=True)
    variance = (n * n - 1) / 12 - float(np.sum(tied.astype(float) ** 3 - tied)) / (12 * n)
    return float(min(1.0, (2 if two_sided else 1) * np.exp(-big_k ** 2 / (2 * n * variance))))


def smallest_p_value(x, *, min_size: int = 10, direction: int | None = None) -> float:
    """The smallest p-value :func:`latest_change` can find on the values of ``x``, whatever their order.

    ``|U_t|`` is largest when the ``t`` smallest values come first; that order, at the best ``t`` that
    leaves ``min_size`` values on both sides, gives Pettitt's smallest attainable p-value: the
    "minimum achievable significance level" of Tarone (1990).

    Parameters
    ----------
    x : array_like, shape (n,)
    min_size : int, default=10
        As in :func:`latest_change`.
    direction : {1, -1} or None, default=None
        As in :func:`pettitt` (one-sided: half the two-sided value).

    Returns
    -------
    float
        In (0, 1]; 1 when ``n < 2 * min_size`` or the values are all equal.

    Examples
    --------
    >>> smallest_p_value([0.0] * 38 + [1.0] * 2) > 0.01   # two errors in 40 requests: never significant
    True
    >>> smallest_p_value(range(40)) < 1e-5
    True
    """
    x = np.asarray(x, float)
    if x.size < 2 * min_size or np.all(x == x[0]):
        return 1.0
    u = _scan(np.sort(stats.rankdata(x)))[min_size - 1:x.size - min_size]
    return _p_value(float(np.abs(u).max()), x, two_sided=direction is None)


def tarone_level(smallest, level: float) -> float:
    """The level each test is held to under Tarone's modified Bonferroni procedure (module docstring).

    Parameters
    ----------
    smallest : array_like, shape (m,)
        Each test's smallest attainable p-value (:func:`smallest_p_value`).
    level : float
        The family-wise level, in (0, 1).

    Returns
    -------
    float
        ``level / K``, ``K`` the smallest count with ``#{smallest <= level / K} <= K`` (Tarone 1990);
        ``level`` for no test. A test whose smallest p-value exceeds it never rejects.

    Examples
    --------
    >>> tarone_level([1e-9, 1e-9, 0.5, 1.0], 0.01)   # two tests can reach significance, two cannot
    0.005
    """
    ordered = np.sort(np.asarray(smallest, float))
    counts = np.searchsorted(ordered, level / np.arange(1, ordered.size + 1), side="right")
    fits = np.flatnonzero(counts <= np.arange(1, ordered.size + 1))
    return level / (int(fits[0]) + 1) if fits.size else level


def latest_change(x, *, level: float, min_size: int = 10, direction: int | None = None,
                  until: int | None = None) -> Change | None:
    """The latest significant change of ``x`` (binary segmentation, keeping the later segment).

    Parameters
    ----------
    x : array_like, shape (n,)
        Values in time order.
    level : float
        Significance level of each Pettitt test, in (0, 1).
    min_size : int, default=10
        Neither side of a change holds fewer elements (a change at the series' last few points
        cannot be told from noise).
    direction : {1, -1} or None, default=None
        Only rises (1), only falls (-1), or either (:func:`pettitt`).
    until : int or None, default=None
        The latest change whose new regime begins at ``x[until]`` or before: a change found later is
        a boundary of the search, which goes on in the segment before it (the values after
        ``until`` add power to a change before it). None: ``n - 1``.

    Returns
    -------
    Change or None
        Index into ``x`` (not into the last segment) of the latest change with ``p <= level``;
        None when the whole series shows none.
    """
    x = np.asarray(x, float)
    last = x.size - 1 if until is None else until
    start, end, found = 0, x.size, None
    while end - start >= 2 * min_size:
        change = pettitt(x[start:end], direction)
        if change is None or change.p_value > level:
            break
        index = start + change.index
        if index - start < min_size or end - index < min_size:
            break
        if index <= last:
            found, start = Change(index, change.p_value, change.direction), index
        else:
            end = index
    return found
