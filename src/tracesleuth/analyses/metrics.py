"""Precision, recall and F-score, written once; and how well clusters recover injected degradations.

The home of the scores every analysis and evaluation reports (eqs. 4-5 of [1]_):

* :func:`precision_recall_f` - precision, recall and F-score from true/false positive counts,
  vectorized, with the conventions for 0/0; :func:`f_score` - the harmonic mean of a precision
  and a recall; :func:`f_score_from_counts` - the same F-score in one division, for searches;
* :func:`labels_for` - ground-truth labels ``{trace_id: label}`` aligned with a trace table's rows;
* :func:`match_clusters` - Section 4.3's scoring of clusters of requests against degradations.

Numpy only: the patterns analysis, the report and the demo import this module.

**Matching clusters.** Cortellessa and Traini score every approach, pattern search and clustering alike, by the clusters
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
   Systems", ICPE 2020, Section 4.3 and eqs. 4-5. https://doi.org/10.1145/3358960.3379126
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import ParameterError

__all__ = ["ClusterMatch", "f_score", "f_score_from_counts", "labels_for", "match_clusters", "precision_recall_f"]


# --------------------------------------------------------------------------------------------
# Precision, recall, F-score: the one home of these rules (eqs. 4-5 of [1]_)
# --------------------------------------------------------------------------------------------


def f_score(precision, recall):
    """Harmonic mean of precision and recall, ``2 p r / (p + r)`` (eq. 5 of [1]_).

    Conventions: 0 where both are 0; NaN where either is NaN.

    Parameters
    ----------
    precision, recall : float or array-like of float (broadcastable)
        In ``[0, 1]``, or NaN.

    Returns
    -------
    float or ndarray of float
        A Python float when both arguments are scalars.

    See Also
    --------
    precision_recall_f : All three from true/false positive counts.
    f_score_from_counts : The same score in one rounding, for searches over many candidates.

    Examples
    --------
    >>> f_score(1.0, 0.5)
    0.6666666666666666
    >>> f_score([0.0, 0.5], [0.0, 0.5]).tolist()
    [0.0, 0.5]
    """
    p = np.asarray(precision, dtype=np.float64)
    r = np.asarray(recall, dtype=np.float64)
    total = p + r
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(total == 0, 0.0, 2 * p * r / np.where(total == 0, 1.0, total))
    return float(out) if out.ndim == 0 else out


def precision_recall_f(tp, fp, n_positives, *, no_positives: float = 0.0):
    """Precision ``tp / (tp + fp)``, recall ``tp / n_positives`` and their F-score (eqs. 4-5 of [1]_).

    Conventions for 0/0: the precision is 0 when nothing is predicted (``tp + fp == 0``); the
    recall is ``no_positives`` when there is no positive; the F-score follows :func:`f_score`
    (0 when both are 0, so 0 wherever ``tp == 0`` and the recall is not NaN).

    Parameters
    ----------
    tp, fp : int or array-like of int (broadcastable)
        True positives (predicted and positive) and false positives (predicted, not positive),
        ``>= 0``.
    n_positives : int or array-like of int
        All positives, ``>= tp``.
    no_positives : float, default=0.0
        The recall when ``n_positives == 0``: 0 for a pattern's quality (a pattern of an empty
        latency interval explains nothing), NaN for :func:`match_clusters` (nothing to recover).

    Returns
    -------
    precision, recall, f_score : float or ndarray of float
        Python floats when every argument is a scalar.

    See Also
    --------
    f_score_from_counts : The F-score alone, in one rounding.

    Examples
    --------
    >>> precision_recall_f(1, 1, 4)
    (0.5, 0.25, 0.3333333333333333)
    >>> precision_recall_f(0, 0, 0, no_positives=float("nan"))
    (0.0, nan, nan)
    """
    tp = np.asarray(tp, dtype=np.float64)
    predicted = tp + np.asarray(fp, dtype=np.float64)
    n_positives = np.asarray(n_positives, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted > 0, tp / np.where(predicted > 0, predicted, 1.0), 0.0)
        recall = np.where(n_positives > 0, tp / np.where(n_positives > 0, n_positives, 1.0), no_positives)
    f = f_score(precision, recall)
    if precision.ndim == 0 and recall.ndim == 0:
        return float(precision), float(recall), f
    return precision, recall, f


def f_score_from_counts(tp, fp, n_positives):
    """The F-score of :func:`precision_recall_f` as ``2 tp / (tp + fp + n_positives)``; 0 where ``tp == 0``.

    With precision ``tp / (tp + fp)`` and recall ``tp / n_positives`` the harmonic mean (eq. 5 of
    [1]_) simplifies to this: one division instead of three, which is what the pattern searches
    evaluate on every candidate. It may differ from :func:`f_score` of the rounded precision and
    recall in the last bit, so a result reports :func:`precision_recall_f` and a search compares
    candidates with this. Counts up to 2**53 are exact in float64.

    Parameters
    ----------
    tp, fp, n_positives : int or array-like of int (broadcastable)
        As in :func:`precision_recall_f`.

    Returns
    -------
    float or ndarray of float
        A Python float when every argument is a scalar.

    Examples
    --------
    >>> f_score_from_counts(8, 2, 10)
    0.8
    >>> f_score_from_counts([0, 1, 2], [0, 1, 0], 2).tolist()
    [0.0, 0.5, 1.0]
    """
    tp = np.asarray(tp, dtype=np.float64)
    denominator = tp + np.asarray(fp, dtype=np.float64) + np.asarray(n_positives, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(tp > 0, 2.0 * tp / np.where(denominator > 0, denominator, 1.0), 0.0)
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------------------------
# Ground truth
# --------------------------------------------------------------------------------------------


def labels_for(table, labels_by_trace, *, missing: str = "none") -> np.ndarray:
    """Ground-truth labels aligned with the rows of a trace table, by trace id.

    Parameters
    ----------
    table : TraceTable, polars.DataFrame or sequence of str
        A trace table (or its frame, with a ``trace_id`` column), or the trace ids themselves.
    labels_by_trace : mapping of str to str or None
        ``{trace_id: label}``, e.g. ``{trace_id: "A1" | "A2" | None}`` (``None``: not affected),
        as :meth:`~tracesleuth.evaluation.eshopper.EShopperSession.label_map` gives.
    missing : {"none", "raise"}, default="none"
        A trace id not in ``labels_by_trace``: labelled ``None`` (not affected), or an error.

    Returns
    -------
    ndarray of object, shape (n_rows,)
        The label of each row's trace, ``None`` when unlabelled.

    Raises
    ------
    ParameterError
        With ``missing="raise"``, when a trace id is not in ``labels_by_trace``; or when
        ``missing`` is neither choice.

    Examples
    --------
    >>> labels_for(["t1", "t2", "t3"], {"t1": "A1", "t2": None}).tolist()
    ['A1', None, None]
    """
    if missing not in ("none", "raise"):
        raise ParameterError(f"The 'missing' parameter of labels_for must be one of 'none', 'raise'. "
                             f"Got {missing!r} instead.")
    frame = getattr(table, "frame", table)
    ids = frame["trace_id"].to_list() if hasattr(frame, "columns") else list(frame)
    if missing == "raise":
        unknown = [t for t in ids if t not in labels_by_trace]
        if unknown:
            raise ParameterError(f"labels_for: {len(unknown)} trace ids are not in this session's ground truth, "
                                 f"e.g. {unknown[0]!r}.")
    get = labels_by_trace.get
    return np.array([get(t) for t in ids], dtype=object)


# --------------------------------------------------------------------------------------------
# Clusters against injected degradations (Section 4.3 of [1]_)
# --------------------------------------------------------------------------------------------


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
        f = f_score_from_counts(inter, sizes - inter, n_pos)
        best = int(np.argmax(f))
        matched[name], match_f[name] = ids[best], float(f[best])
        correct |= masks[best] & pos
        n_clustered += int(sizes[best])
    n_affected = int(np.isin(t, names).sum()) if names else 0
    n_correct = int(correct.sum())
    precision, recall, f = precision_recall_f(n_correct, n_clustered - n_correct, n_affected, no_positives=float("nan"))
    return ClusterMatch(precision=precision, recall=recall, f_score=f,
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
