"""Statistics shared by the analyses: the edit distance between call sequences, the two-proportion test."""

from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np
from rapidfuzz.distance import Levenshtein
from scipy import stats

__all__ = ["edit_distance", "proportion_p_values"]


def edit_distance(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Levenshtein distance between two sequences of tokens (unit insert, delete and substitute costs).

    Spectroscope ranks a mutation's candidate precursors by it (Sambasivan et al., NSDI 2011,
    Section 3.3.2, third heuristic) and Mi et al. (Sci China Inf Sci 2012, Section 4.1 and
    Algorithm 1) measure how close two clusters' call sequences are with it. Tokens are compared
    whole (an operation key is one token, not its characters); computed by ``rapidfuzz``.

    Parameters
    ----------
    a, b : sequence of hashable
        Token sequences (operation keys, ``"depth|key"`` strings...).

    Returns
    -------
    int
        The least number of single-token edits turning ``a`` into ``b``.

    Examples
    --------
    >>> edit_distance(["a", "b", "c"], ["a", "c"])
    1
    >>> edit_distance([], ["x", "y"])
    2
    """
    return int(Levenshtein.distance(list(a), list(b)))


def proportion_p_values(count_a, n_a: int, count_b, n_b: int) -> np.ndarray:
    """Two-sided p-values of the pooled two-proportion z-test, ``count_a / n_a`` vs ``count_b / n_b``.

    Parameters
    ----------
    count_a, count_b : array_like
        Shape (k,): successes in each sample (broadcast together).
    n_a, n_b : int
        Sample sizes, > 0.

    Returns
    -------
    numpy.ndarray
        Shape (k,): p-values in [0, 1]; 1.0 where both proportions are 0 or both 1 (no variance).
    """
    count_a, count_b = np.asarray(count_a, float), np.asarray(count_b, float)
    pooled = (count_a + count_b) / (n_a + n_b)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    diff = count_a / n_a - count_b / n_b
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, np.abs(diff) / np.where(se > 0, se, 1), 0.0)
    return 2 * stats.norm.sf(z)
