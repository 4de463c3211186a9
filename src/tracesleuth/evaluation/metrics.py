"""How well clusters of requests recover injected degradations: Section 4.3's precision, recall, F.

Cortellessa and Traini score every approach, pattern search and clustering alike, by the clusters
of requests it outputs [1]_:

1. For each injected degradation ``A_i``, the best-matching cluster ``C_i`` is the one with the
   highest F-score (eq. 5) when the requests affected by ``A_i`` are the positives:
   ``F(C, A_i) = 2 |C ∩ A_i| / (|C| + |A_i|)``. Each degradation picks independently, so two
   degradations may pick the same cluster (a solver that lumps them together is then charged
   twice in the precision's denominator). Ties go to the cluster listed first.
2. ``G`` is the set of requests correctly associated, ``∪_i (C_i ∩ A_i)``; ``P`` the requests
   affected by any degradation.
3. recall = ``|G| / |P|``, precision = ``|G| / Σ_i |C_i|``, F-score = their harmonic mean (eq. 5).

Conventions where the paper is silent: with no cluster at all (or only empty ones) the precision
is 0; with no affected request the recall and F-score are NaN; when precision and recall are both
0 the F-score is 0.

References
----------
.. [1] V. Cortellessa and L. Traini, "Detecting Latency Degradation Patterns in Service-based
   Systems", ICPE 2020, Section 4.3 and eq. 5. https://doi.org/10.1145/3358960.3379126
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import ParameterError

__all__ = ["ClusterMatch", "f_score", "match_clusters"]


def f_score(precision: float, recall: float) -> float:
    """Harmonic mean of precision and recall (eq. 5 of [1]_); 0 when both are 0, NaN if either is.

    Examples
    --------
    >>> f_score(1.0, 0.5)
    0.6666666666666666
    """
    if np.isnan(precision) or np.isnan(recall):
        return float("nan")
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class ClusterMatch:
    """The outcome of :func:`match_clusters`.

    Attributes
    ----------
    precision, recall, f_score : float
        ``|G| / Σ|C_i|``, ``|G| / |P|`` and their harmonic mean (Section 4.3 of [1]_).
    matched : dict of str to int
        The cluster chosen for each degradation (its index among the clusters given, or its label
        when clusters were given as labels); -1 when there is no cluster to choose.
    match_f_scores : dict of str to float
        ``F(C_i, A_i)`` of each chosen pair.
    n_correct : int
        ``|G|``, requests in the cluster chosen for their own degradation.
    n_affected : int
        ``|P|``, requests affected by any degradation.
    n_clustered : int
        ``Σ_i |C_i|``, sizes of the chosen clusters (a cluster chosen twice counts twice).
    """

    precision: float
    recall: float
    f_score: float
    matched: dict
    match_f_scores: dict
    n_correct: int
    n_affected: int
    n_clustered: int

    def to_dict(self) -> dict:
        """The match as plain Python values."""
        return {"precision": self.precision, "recall": self.recall, "f_score": self.f_score,
                "matched": dict(self.matched), "match_f_scores": dict(self.match_f_scores),
                "n_correct": self.n_correct, "n_affected": self.n_affected, "n_clustered": self.n_clustered}


def match_clusters(truth, clusters, *, degradations: Sequence[str] | None = None) -> ClusterMatch:
    """Match clusters to injected degradations and score them as in Section 4.3 of [1]_.

    Parameters
    ----------
    truth : array-like of shape (n_requests,)
        The degradation affecting each request (e.g. ``"A1"``), ``None`` (or NaN) when none.
    clusters : array-like
        Either **labels**, ints of shape (n_requests,) with the cluster of each request and ``-1``
        for a request in no cluster (the ``labels_`` convention); or **masks**, a sequence of
        boolean arrays of shape (n_requests,) or a 2-D boolean array of shape
        (n_clusters, n_requests), one per cluster, which may overlap.
    degradations : sequence of str, optional
        The degradations to match, in order. Default: the distinct non-null values of ``truth``,
        sorted.

    Returns
    -------
    ClusterMatch

    Raises
    ------
    ParameterError
        When the shapes of ``truth`` and ``clusters`` disagree, or labels are not integers.

    Examples
    --------
    >>> truth = ["A1", "A1", "A2", "A2", None, None]
    >>> m = match_clusters(truth, [0, 0, 1, 1, 1, -1])
    >>> m.matched, m.recall, round(m.precision, 3)
    ({'A1': 0, 'A2': 1}, 1.0, 0.8)
    """
    t = _truth_array(truth)
    n = len(t)
    ids, masks = _cluster_masks(clusters, n)
    names = list(degradations) if degradations is not None else sorted({x for x in t if x is not None})

    sizes = masks.sum(axis=1)
    matched, match_f, correct = {}, {}, np.zeros(n, dtype=bool)
    n_clustered = 0
    for name in names:
        pos = t == name
        n_pos = int(pos.sum())
        if not len(ids):
            matched[name], match_f[name] = -1, 0.0
            continue
        inter = (masks & pos).sum(axis=1)
        denom = sizes + n_pos
        f = np.divide(2.0 * inter, denom, out=np.zeros(len(ids)), where=denom > 0)
        best = int(np.argmax(f))
        matched[name], match_f[name] = ids[best], float(f[best])
        correct |= masks[best] & pos
        n_clustered += int(sizes[best])
    n_affected = int(np.isin(t, names).sum()) if names else 0
    n_correct = int(correct.sum())
    precision = n_correct / n_clustered if n_clustered else 0.0
    recall = n_correct / n_affected if n_affected else float("nan")
    return ClusterMatch(precision=float(precision), recall=float(recall), f_score=f_score(precision, recall),
                        matched=matched, match_f_scores=match_f, n_correct=n_correct,
                        n_affected=n_affected, n_clustered=n_clustered)


def _truth_array(truth) -> np.ndarray:
    values = list(truth.to_list() if hasattr(truth, "to_list") else truth)
    return np.array([None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)
                     for v in values], dtype=object)


def _cluster_masks(clusters, n: int) -> tuple[list, np.ndarray]:
    """``(ids, masks)``: cluster ids and a boolean array of shape (n_clusters, n)."""
    if not isinstance(clusters, np.ndarray) and len(clusters) == 0 and n:
        return [], np.zeros((0, n), dtype=bool)           # no cluster at all
    if isinstance(clusters, np.ndarray) and clusters.ndim == 2 or (
            not isinstance(clusters, np.ndarray) and len(clusters) and np.ndim(clusters[0]) == 1):
        masks = np.asarray(clusters) if isinstance(clusters, np.ndarray) else \
            np.array([np.asarray(m) for m in clusters])
        if masks.ndim != 2 or masks.shape[1] != n or masks.dtype != bool:
            raise ParameterError(f"match_clusters: cluster masks must be boolean arrays of shape "
                                 f"({n},), one per request. Got an array of shape {masks.shape} "
                                 f"and dtype {masks.dtype} instead.")
        return list(range(len(masks))), masks
    labels = np.asarray(clusters)
    if labels.shape != (n,):
        raise ParameterError(f"match_clusters: labels must have shape ({n},) like the ground truth. "
                             f"Got shape {labels.shape} instead.")
    if n and not np.issubdtype(labels.dtype, np.integer):
        raise ParameterError(f"match_clusters: labels must be integers (-1 for no cluster). "
                             f"Got dtype {labels.dtype} instead.")
    ids = sorted(int(k) for k in np.unique(labels) if k >= 0)
    masks = np.array([labels == k for k in ids], dtype=bool).reshape(len(ids), n)
    return ids, masks
