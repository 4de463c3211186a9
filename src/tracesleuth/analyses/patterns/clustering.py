"""Clustering baselines for latency degradation patterns: K-means, hierarchical, mean shift.

Cortellessa and Traini compare their genetic algorithm with three general-purpose clustering
algorithms from scikit-learn (Section 4.5). As in their protocol (Section 4.3), the baselines see
only the *degraded* requests, those whose latency falls in the target interval, and group them by
their RPC execution times; they never see the latency itself. K-means and hierarchical clustering
need a number of clusters: the paper runs them for k = 2, ..., 6 and keeps the best solution per
set of traces. Without ground truth, :func:`cluster_degraded` keeps the k with the highest mean
silhouette; the evaluation harness passes a callable instead, which reproduces the paper's choice
against the injected degradations.

Input conventions
-----------------
Features are exclusive ("pure") execution times in integer or float nanoseconds, one column per
RPC (``service:operation``), as the trace table gives them. ``NaN`` marks an RPC the request did
not call. It is imputed as ``0``: no time was spent in an operation that was not called, which is
exactly what the exclusive-time column would hold had the trace been recorded with that call
skipped. Values are converted to milliseconds before clustering, so that the numbers the
algorithms see are of order one to a hundred; this changes nothing in the clustering but keeps
distances and the mean-shift bandwidth readable.

Features are **not standardised** by default (``standardize=False``). All columns share one unit,
so a 50 ms deviation means the same in every RPC, and that is what an injected degradation is.
Standardising would instead shrink the columns that carry a degradation (their variance is large
*because* of it) and inflate near-constant ones (a fast cache lookup, a network hop), so a few
tenths of a millisecond of jitter would weigh as much as the degradation. Pass
``standardize=True`` to scale each column to unit variance anyway (constant columns are left
centred at zero).

References
----------
.. [1] V. Cortellessa and L. Traini, "Detecting Latency Degradation Patterns in Service-based
   Systems", ICPE 2020, Sections 4.3 and 4.5. https://doi.org/10.1145/3358960.3379126
"""

from __future__ import annotations

import warnings
from typing import Callable, Literal, Union

import numpy as np
from sklearn.cluster import AgglomerativeClustering, KMeans, MeanShift, estimate_bandwidth
from sklearn.metrics import silhouette_score

from ...errors import EmptyDataError, ParameterError
from ...units import NS_PER_MS

__all__ = ["CLUSTERING_METHODS", "ClusteringWarning", "cluster_degraded"]

#: The clustering baselines of Section 4.5, by the names the estimator uses for its solvers.
CLUSTERING_METHODS = ("kmeans", "hierarchical", "meanshift")

#: ``k`` values tried by default for K-means and hierarchical clustering (Section 4.3: k = 2..6).
DEFAULT_K_RANGE = range(2, 7)

#: K-means restarts. scikit-learn's default became one k-means++ start (``n_init="auto"``) in
#: version 1.4; the paper (2019) ran with the then default of 10, which is also far more stable.
KMEANS_N_INIT = 10

#: Quantile of pairwise distances used to estimate the mean-shift bandwidth (scikit-learn's default).
MEANSHIFT_QUANTILE = 0.3


Selector = Union[Literal["silhouette"], Callable[[np.ndarray], float]]


class ClusteringWarning(UserWarning):
    """A clustering request was adjusted to what the data allow (``k`` values dropped, one cluster)."""


def cluster_degraded(X, *, method: str, random_state=None, k_range=DEFAULT_K_RANGE,
                     select: Selector = "silhouette", standardize: bool = False) -> np.ndarray:
    """Cluster degraded requests by their RPC exclusive times with a scikit-learn baseline.

    The baselines of Section 4.5 of the paper (module References), run as in Section 4.3: only
    the requests whose latency falls in the degradation interval are given, one row each.

    Parameters
    ----------
    X : array-like of shape (n_degraded, n_features)
        Exclusive execution time of each RPC (column) in each degraded request (row), in
        nanoseconds. ``NaN`` means the RPC was not called and is imputed as 0 ns. Infinite values
        are rejected.
    method : {"kmeans", "hierarchical", "meanshift"}
        :class:`sklearn.cluster.KMeans` (k-means++, 10 restarts), bottom-up
        :class:`~sklearn.cluster.AgglomerativeClustering` (Ward), or
        :class:`~sklearn.cluster.MeanShift` (bandwidth quantile 0.3; it chooses the number of
        clusters itself, ``k_range`` and ``select`` unused).
    random_state : int, numpy.random.Generator, RandomState or None, default=None
        Seeds K-means and mean shift's bandwidth estimate (hierarchical is deterministic).
    k_range : iterable of int, default=range(2, 7)
        Numbers of clusters tried by K-means and hierarchical (the paper's 2..6); more than the
        data allow (distinct rows; silhouette: ``n_degraded - 1``) dropped with a warning.
    select : "silhouette" or callable, default="silhouette"
        How the k is chosen: the highest mean silhouette (Euclidean; ties to the smaller k), or
        the highest float a callable returns for the candidate labels (the evaluation scores them
        against the injected degradations, as the paper "pick[s] the best achieved solution").
    standardize : bool, default=False
        Scale each column to unit variance first; off: all columns are times in one unit, and a
        degradation is an absolute deviation (module notes).

    Returns
    -------
    labels : ndarray of int64 of shape (n_degraded,)
        Cluster of each degraded request, ``0 .. n_clusters - 1`` in order of first appearance.

    Raises
    ------
    ParameterError
        Unknown ``method`` or ``select``; ``X`` not 2-D numeric, or infinite; ``k_range`` empty,
        below 2, or with no value the data allow.
    EmptyDataError
        ``X`` has no rows.

    Warns
    -----
    ClusteringWarning
        ``k`` values dropped (too few distinct rows), or every row identical (one cluster).

    See Also
    --------
    tracesleuth.analyses.patterns.baselines.DegradedClusters : these baselines as an estimator.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal([5, 55], 1, (20, 2)), rng.normal([55, 5], 1, (20, 2))]) * 1_000_000
    >>> labels = cluster_degraded(X, method="kmeans", random_state=0)
    >>> np.bincount(labels).tolist()
    [20, 20]
    """
    _check_choices(method, select)
    Z = _prepare(X, standardize=standardize)
    n = Z.shape[0]
    n_distinct = len(np.unique(Z, axis=0))
    if method == "meanshift":
        if n_distinct < 2:
            return _one_cluster(n)
        return _relabel(_meanshift(Z, random_state))

    ks = _check_k_range(k_range)
    if n_distinct < 2:
        return _one_cluster(n)
    best_labels, best_score = None, -np.inf
    for k in _feasible(ks, n, n_distinct, callable(select)):
        labels = _relabel(_fit_k(Z, method, k, random_state))
        score = _silhouette(Z, labels) if select == "silhouette" else float(select(labels.copy()))
        if best_labels is None or score > best_score:
            best_labels, best_score = labels, score
    return best_labels


def _check_choices(method: str, select) -> None:
    if method not in CLUSTERING_METHODS:
        raise ParameterError(f"The 'method' parameter of cluster_degraded must be one of "
                             f"{', '.join(map(repr, CLUSTERING_METHODS))}. Got {method!r} instead.")
    if not (select == "silhouette" or callable(select)):
        raise ParameterError("The 'select' parameter of cluster_degraded must be 'silhouette' or a "
                             f"callable taking labels and returning a float. Got {select!r} instead.")


def _feasible(ks: list[int], n: int, n_distinct: int, by_callable: bool) -> list[int]:
    """The numbers of clusters the data allow (at most the distinct rows; silhouette: also at
    most ``n - 1``), the others dropped with a :class:`ClusteringWarning`; none: ParameterError."""
    limit = n_distinct if by_callable else min(n_distinct, n - 1)
    feasible = [k for k in ks if k <= limit]
    if not feasible:
        raise ParameterError(
            f"The 'k_range' parameter of cluster_degraded allows no k for these data: "
            f"{n} degraded requests with {n_distinct} distinct rows admit at most k = {limit}"
            f"{' (silhouette needs k <= n_degraded - 1)' if not by_callable else ''}. "
            f"Got {_show(ks)} instead.")
    if len(feasible) < len(ks):
        warnings.warn(f"cluster_degraded: k = {_show([k for k in ks if k > limit])} dropped: "
                      f"{n} degraded requests with {n_distinct} distinct rows admit at most "
                      f"k = {limit}; trying k = {_show(feasible)}.", ClusteringWarning, stacklevel=3)
    return feasible


def _prepare(X, *, standardize: bool) -> np.ndarray:
    try:
        Z = np.array(X, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"The 'X' parameter of cluster_degraded must be a numeric array of "
                             f"shape (n_degraded, n_features). Got {type(X).__name__}: {exc}") from None
    if Z.ndim != 2:
        raise ParameterError(f"The 'X' parameter of cluster_degraded must be two-dimensional, "
                             f"shape (n_degraded, n_features). Got shape {Z.shape} instead.")
    if Z.shape[0] == 0:
        raise EmptyDataError("cluster_degraded: no degraded request to cluster (X has 0 rows).")
    if Z.shape[1] == 0:
        raise ParameterError("The 'X' parameter of cluster_degraded must have at least one feature "
                             "column. Got shape (%d, 0) instead." % Z.shape[0])
    bad = np.isinf(Z)
    if bad.any():
        row, col = map(int, np.argwhere(bad)[0])
        raise ParameterError(f"The 'X' parameter of cluster_degraded must hold finite times or NaN "
                             f"(RPC not called). Got {Z[row, col]} at row {row}, column {col} "
                             f"({int(bad.sum())} infinite values in all).")
    Z[np.isnan(Z)] = 0.0            # RPC not called: no time spent in it
    Z /= NS_PER_MS
    if standardize:
        Z -= Z.mean(axis=0)
        std = Z.std(axis=0)
        np.divide(Z, std, out=Z, where=std > 0)
    return Z


def _check_k_range(k_range) -> list[int]:
    try:
        ks = sorted({int(k) for k in k_range})
    except (TypeError, ValueError):
        raise ParameterError(f"The 'k_range' parameter of cluster_degraded must be an iterable of "
                             f"int >= 2. Got {k_range!r} instead.") from None
    if not ks or ks[0] < 2:
        raise ParameterError(f"The 'k_range' parameter of cluster_degraded must hold at least one "
                             f"int, all >= 2. Got {k_range!r} instead.")
    return ks


def _fit_k(Z: np.ndarray, method: str, k: int, random_state) -> np.ndarray:
    if method == "kmeans":
        return KMeans(n_clusters=k, n_init=KMEANS_N_INIT, random_state=_sk_seed(random_state)).fit_predict(Z)
    return AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(Z)


def _meanshift(Z: np.ndarray, random_state) -> np.ndarray:
    bandwidth = estimate_bandwidth(Z, quantile=MEANSHIFT_QUANTILE, random_state=_sk_seed(random_state))
    if not bandwidth > 0:       # more than half of the rows coincide: fall back to the spread
        bandwidth = float(np.max(np.ptp(Z, axis=0))) / 2 or 1.0
    return MeanShift(bandwidth=bandwidth).fit_predict(Z)


def _silhouette(Z: np.ndarray, labels: np.ndarray) -> float:
    n_labels = labels.max() + 1
    if n_labels < 2 or n_labels > len(labels) - 1:
        return -np.inf
    return float(silhouette_score(Z, labels))


def _sk_seed(random_state):
    """scikit-learn takes an int, a RandomState or None; a numpy Generator gives an int."""
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31 - 1))
    return random_state


def _relabel(labels: np.ndarray) -> np.ndarray:
    """Number clusters 0..k-1 in order of first appearance (stable across runs and methods)."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.ravel()]


def _one_cluster(n: int) -> np.ndarray:
    warnings.warn(f"cluster_degraded: all {n} degraded requests have identical features; "
                  f"returning a single cluster.", ClusteringWarning, stacklevel=3)
    return np.zeros(n, dtype=np.int64)


def _show(ks) -> str:
    ks = list(ks)
    return "[" + ", ".join(map(str, ks)) + "]"
