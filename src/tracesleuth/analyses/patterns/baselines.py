"""The paper's clustering baselines as an estimator of their own: :class:`DegradedClusters`.

Cortellessa & Traini (Section 4.5) compare their patterns with K-means, hierarchical clustering
and mean shift run on the degraded requests' exclusive times
(:func:`~tracesleuth.analyses.patterns.clustering.cluster_degraded`). A cluster is not a pattern:
it names no condition and labels no request outside the interval it was fitted on, so this
estimator has no ``predict``. It chooses the degraded interval as
:class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns` does (the same stages,
:mod:`.stages`) and gives the same result object, one "sub-interval" per cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import EmptyDataError, ParameterError
from ...units import format_duration_ns
from .._contract import NONE, Analysis, Constraint, InstanceOf, Interval, Options, Seed, Strings
from ._data import exclusive_matrix, read_table
from ._model import LatencyInterval
from .clustering import CLUSTERING_METHODS, DEFAULT_K_RANGE, cluster_degraded
from .notes import KRangeCut, NoDegradation
from .results import DegradationPatternsResult, SubIntervalPattern
from .stages import DensitySplitPoints, GivenInterval, PaperInterval, RobustInterval, no_degradation

__all__ = ["DegradedClusters"]


@dataclass(frozen=True)
class _KRange(Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, range) and len(value) > 0 and value.start >= 2 and value.step >= 1

    def describe(self) -> str:
        return "a non-empty increasing range of ints >= 2"


class DegradedClusters(Analysis):
    """Cluster the degraded requests by their exclusive times (the paper's baselines, Section 4.5).

    Parameters
    ----------
    method : {"kmeans", "hierarchical", "meanshift"}, default="kmeans"
        :func:`~tracesleuth.analyses.patterns.clustering.cluster_degraded`'s method.
    interval : str, (int, int), LatencyInterval or None, default=None
        The degraded interval, as :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns`;
        None: chosen by ``interval_rule``.
    interval_rule : {"robust", "paper"}, default="robust"
    tail_z : float, default=2.0
    k_range : range, default=range(2, 7)
        Numbers of clusters tried by ``"kmeans"`` and ``"hierarchical"`` (the best by silhouette).
    min_support : int, default=15
        An interval holding fewer requests is no degradation to explain.
    max_split_points : int, default=4
    bandwidth_quantile, split_bandwidth_quantile, min_bin_fraction : float
        Mean shift of the latencies (the automatic interval and its split points).
    random_state : int, numpy Generator or None, default=None

    Attributes
    ----------
    result_ : DegradationPatternsResult
        ``sub_intervals``: one per cluster, in order of median latency, ``pattern`` None.
    labels_ : ndarray of int64, shape (n_requests,)
        The cluster of each degraded request; -1 outside the interval.
    interval_ : LatencyInterval or None
    split_points_ : ndarray of int64

    Raises
    ------
    ParameterError
        A setting out of range, or ``k_range`` with no feasible number of clusters.
    EmptyDataError
        An empty table, or no ``exclusive_ns[...]`` column.

    Examples
    --------
    >>> from tracesleuth.analyses.patterns.baselines import DegradedClusters
    >>> from tracesleuth.analyses.patterns.synthetic import make_degraded_session
    >>> session = make_degraded_session(1000, random_state=1)
    >>> model = DegradedClusters(method="kmeans", random_state=0).fit(session.frame)
    >>> model.result_.found, all(s.pattern is None for s in model.result_.sub_intervals)
    (True, True)
    """

    def __init__(self, *, method: str = "kmeans", interval: Any = None, interval_rule: str = "robust",
                 tail_z: float = 2.0, k_range: range = DEFAULT_K_RANGE, min_support: int = 15,
                 max_split_points: int = 4, bandwidth_quantile: float = 0.3,
                 split_bandwidth_quantile: float | None = 0.1, min_bin_fraction: float = 0.01,
                 attributes: Any = None, random_state: Any = None):
        self.method = method
        self.interval = interval
        self.interval_rule = interval_rule
        self.tail_z = tail_z
        self.k_range = k_range
        self.min_support = min_support
        self.max_split_points = max_split_points
        self.bandwidth_quantile = bandwidth_quantile
        self.split_bandwidth_quantile = split_bandwidth_quantile
        self.min_bin_fraction = min_bin_fraction
        self.attributes = attributes
        self.random_state = random_state

    _constraints = {
        "method": [Options(CLUSTERING_METHODS)],
        "interval": [InstanceOf((None, str, tuple, list, LatencyInterval),
                                "None, 'A:B' (e.g. '350ms:700ms'), (low_ns, high_ns) or a LatencyInterval")],
        "interval_rule": [Options(("robust", "paper"))],
        "tail_z": [Interval(float, 0.0, None, closed="neither")],
        "k_range": [_KRange()],
        "min_support": [Interval(int, 1, None)],
        "max_split_points": [Interval(int, 0, None)],
        "bandwidth_quantile": [Interval(float, 0.0, 1.0, closed="right")],
        "split_bandwidth_quantile": [NONE, Interval(float, 0.0, 1.0, closed="right")],
        "min_bin_fraction": [Interval(float, 0.0, 1.0)],
        "attributes": [NONE, Strings()],
        "random_state": [Seed()],
    }

    def fit(self, table: Any) -> "DegradedClusters":
        """Choose the interval and cluster its requests; every fitted attribute set together."""
        return super().fit(table)

    def _fit(self, table: Any) -> dict[str, Any]:
        data = read_table(table, attributes=self.attributes, categorical=False)
        out: dict[str, Any] = {"labels_": np.full(data.frame.height, -1, dtype=np.int64), "interval_": None,
                               "split_points_": np.empty(0, dtype=np.int64)}
        ms = {"quantile": float(self.bandwidth_quantile), "min_bin_fraction": float(self.min_bin_fraction)}
        rule = (GivenInterval(self.interval) if self.interval is not None else
                PaperInterval(**ms) if self.interval_rule == "paper" else RobustInterval(float(self.tail_z), **ms))
        chosen = rule.choose(data.latency)
        interval = None if isinstance(chosen, NoDegradation) else chosen.interval
        why = chosen if interval is None else no_degradation(interval, data.latency, int(self.min_support))
        source = None if interval is None else ("given" if self.interval is not None else "automatic")
        if why is not None:
            out["interval_"] = interval
            out["result_"] = DegradationPatternsResult(
                found=False, solver=self.method, n_requests=int(data.latency.size), reason=why, interval=interval,
                interval_source=source, notes=tuple(data.notes),
                n_positives=0 if interval is None else int(interval.contains(data.latency).sum()))
            return out
        quantile = self.bandwidth_quantile if self.split_bandwidth_quantile is None else self.split_bandwidth_quantile
        bounds, notes = DensitySplitPoints(int(self.max_split_points), int(self.min_support), float(quantile),
                                           float(self.min_bin_fraction)).bounds(data.latency, interval)
        data.notes.extend(list(chosen.notes) + notes)
        positives = interval.contains(data.latency)
        X, names = exclusive_matrix(data, positives)
        if X.shape[1] == 0:
            raise EmptyDataError("No exclusive_ns[...] column to cluster the degraded requests on.")
        labels = self._cluster(X, interval, data.notes)
        subs, relabel = self._clusters(labels, data.latency[positives])
        all_labels = np.full(data.latency.size, -1, dtype=np.int64)
        all_labels[positives] = relabel
        out["labels_"][data.rows] = all_labels
        out.update(interval_=interval, split_points_=bounds)
        out["result_"] = DegradationPatternsResult(
            found=True, solver=self.method, n_requests=int(data.latency.size), interval=interval,
            interval_source=source, interval_reason=chosen.reason, split_points=tuple(int(b) for b in bounds),
            sub_intervals=tuple(subs), score=None, n_positives=int(positives.sum()), attributes=tuple(names),
            notes=tuple(data.notes))
        return out

    def _cluster(self, X: np.ndarray, interval: LatencyInterval, notes: list) -> np.ndarray:
        n_deg = X.shape[0]
        k_range = self.k_range
        if self.method in ("kmeans", "hierarchical"):
            feasible = range(k_range.start, min(k_range.stop, n_deg), k_range.step)
            if len(feasible) == 0:
                raise ParameterError(
                    f"The 'k_range' parameter of DegradedClusters allows no number of clusters for the {n_deg} "
                    f"request(s) in {interval.describe()} (k must be < {n_deg}). Got {k_range!r} instead.")
            if feasible != k_range:
                notes.append(KRangeCut(repr(k_range), repr(feasible), n_deg))
            k_range = feasible
        seed = self.random_state
        if isinstance(seed, np.random.Generator):
            seed = int(seed.integers(2**31 - 1))
        return np.asarray(cluster_degraded(X, method=self.method, random_state=seed, k_range=k_range))

    def _clusters(self, labels: np.ndarray, latency: np.ndarray) -> tuple[list[SubIntervalPattern], np.ndarray]:
        """One entry per cluster in order of median latency, and the labels renumbered so."""
        relabel = np.full(labels.shape, -1, dtype=np.int64)
        clusters = sorted((c for c in np.unique(labels) if c >= 0),
                          key=lambda c: (float(np.median(latency[labels == c])), int(c)))
        subs = []
        for index, c in enumerate(clusters):
            members = labels == c
            relabel[members] = index
            lat, size = latency[members], int(members.sum())
            subs.append(SubIntervalPattern(
                index, int(lat.min()), int(lat.max()) + 1, None,
                f"cluster {index}: {size} degraded request(s) ({self.method}), latency "
                f"{format_duration_ns(np.median(lat))} median", None, None, None, None, None, size, size, None))
        return subs, relabel
