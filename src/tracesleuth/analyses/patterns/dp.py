"""Optimal partition of the latency interval into sub-intervals (eqs. 7-8).

Given split points ``s_0 < ... < s_k`` and the score ``Theta(s_j, s_i)`` of the best pattern of
each sub-interval ``[s_j, s_i)``, the dynamic program of Krushevskaja & Sandler (2013), used by
Cortellessa & Traini (2020, Section 3), maximises the sum of the scores of a partition:

    D(0) = 0,    D(i) = max_{0 <= j < i} D(j) + Theta(s_j, s_i),

and the optimal partition of ``[s_0, s_k)`` is read back from the maximising ``j`` of each
``i``. Ties go to the smallest ``j`` (the longest last sub-interval), so among optimal partitions
the one with fewer, wider sub-intervals is preferred at each step. ``Theta`` is evaluated once per
pair ``(j, i)`` (cached), ``k (k + 1) / 2`` evaluations in all.

References
----------
D. Krushevskaja and M. Sandler. WWW 2013. https://doi.org/10.1145/2488388.2488450
V. Cortellessa and L. Traini. ICPE 2020, eq. (8). https://doi.org/10.1145/3358960.3379126
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ...errors import ParameterError

__all__ = ["Partition", "optimal_partition"]


@dataclass(frozen=True)
class Partition:
    """The optimal partition found by :func:`optimal_partition`.

    Attributes
    ----------
    score : float
        ``D(k)``, the sum of the scores of the sub-intervals (eq. 7).
    sub_intervals : tuple of (int, int)
        Split point index pairs ``(j, i)``, consecutive, from ``(0, .)`` to ``(., k)``.
    best_scores : tuple of float
        ``D(0), ..., D(k)``.
    """

    score: float
    sub_intervals: tuple[tuple[int, int], ...]
    best_scores: tuple[float, ...]


def optimal_partition(
    n_split_points: int,
    theta: Callable[[int, int], float] | Mapping[tuple[int, int], float],
) -> Partition:
    """Maximise eq. (7) by the dynamic program of eq. (8).

    Parameters
    ----------
    n_split_points : int
        ``k + 1``, the number of split points including both ends of the interval (>= 2).
    theta : callable (j, i) -> float, or mapping {(j, i): float}
        Score of the sub-interval ``[s_j, s_i)`` for ``0 <= j < i <= k``. A callable is called
        once per pair.

    Returns
    -------
    Partition

    Examples
    --------
    >>> scores = {(0, 1): 0.9, (1, 2): 0.8, (0, 2): 1.0}
    >>> optimal_partition(3, scores).sub_intervals
    ((0, 1), (1, 2))
    """
    k = int(n_split_points) - 1
    if k < 1:
        raise ParameterError(f"The dynamic program needs at least 2 split points. Got {n_split_points!r} instead.")
    cache: dict[tuple[int, int], float] = {}

    def score(j: int, i: int) -> float:
        key = (j, i)
        if key not in cache:
            value = theta[key] if isinstance(theta, Mapping) else theta(j, i)
            cache[key] = float(value)
        return cache[key]

    best = [0.0] * (k + 1)
    back = [0] * (k + 1)
    for i in range(1, k + 1):
        best_value, best_j = None, 0
        for j in range(i):
            value = best[j] + score(j, i)
            if best_value is None or value > best_value:
                best_value, best_j = value, j
        best[i], back[i] = best_value, best_j
    pieces = []
    i = k
    while i > 0:
        pieces.append((back[i], i))
        i = back[i]
    return Partition(score=best[k], sub_intervals=tuple(reversed(pieces)), best_scores=tuple(best))
