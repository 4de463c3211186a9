"""The root-cause localization's decisions and caveats, as records (the analyses' one
:class:`~tracesleuth.analyses._notes.Note` base: ``kind``, the numbers, ``describe()``).

Notes (``LocalizationResult.notes``: what was not analysed, and why):

=========================== ===============================================================
kind                        decision
=========================== ===============================================================
``minor_clusters_left_out`` :class:`MinorClustersLeftOut` - minor clusters not analysed
``instances_unknown``       :class:`InstancesUnknown` - calls without an instance left out
``instances_alike``         :class:`InstancesAlike` - instances that cannot be told apart
``no_cluster_split``        :class:`NoClusterSplit` - no major cluster could be split
``clusters_skipped``        :class:`ClustersSkipped` - some major clusters not split or tested
``clusters_too_small``      :class:`ClustersTooSmall` - clusters split on a part of their methods
=========================== ===============================================================

Caveats (``LocalizationResult.caveats``: why the top answer may mislead):

=========================== ===============================================================
``weak_change``             :class:`WeakChange` - the top rise is significant on its own only
``one_cluster_only``        :class:`OneClusterOnly` - the top method anomalous in one cluster
``faster_when_anomalous``   :class:`FasterWhenAnomalous` - an inverted split
=========================== ===============================================================

Why one major cluster was not split or tested (``ClusterSummary.note``, its row of the clusters
table; :class:`ClusterNotTested`): ``too_few_to_split``, ``constant_latencies``,
``zero_robust_covariance``, ``no_residual_variance``, ``too_few_anomalous``,
``almost_all_anomalous``, ``false_alarms_only``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .._notes import Note

__all__ = ["AlmostAllAnomalous", "ClusterNotTested", "ClustersSkipped", "ClustersTooSmall", "ConstantLatencies",
           "FalseAlarmsOnly", "FasterWhenAnomalous", "InstancesAlike", "InstancesUnknown", "MinorClustersLeftOut",
           "NoClusterSplit", "NoResidualVariance", "OneClusterOnly", "TooFewAnomalous", "TooFewToSplit", "WeakChange",
           "ZeroRobustCovariance"]


@dataclass(frozen=True)
class MinorClustersLeftOut(Note):
    """Minor clusters (call sequences too rare to analyse) not merged into a major one, so not
    analysed: cluster adjustment is off, or no major cluster holds all their methods.

    Attributes
    ----------
    n_requests : int
    n_clusters : int
    adjusted : bool
        Whether cluster adjustment (``adjust_clusters``) was on.
    """

    kind: ClassVar[str] = "minor_clusters_left_out"
    n_requests: int
    n_clusters: int
    adjusted: bool

    def describe(self) -> str:
        why = "no major cluster's methods are all in theirs" if self.adjusted else "cluster adjustment is off"
        return f"{self.n_requests:,} requests in {self.n_clusters:,} minor clusters are not analysed: {why}."


@dataclass(frozen=True)
class InstancesUnknown(Note):
    """Calls of a top method in anomalous requests without an instance (neither theirs nor their
    server span's): left out of its instance comparison (Algorithm 2).

    Attributes
    ----------
    operation_key : str
    n_without : int
        Calls without an instance.
    n_calls : int
        Its calls in the anomalous requests.
    """

    kind: ClassVar[str] = "instances_unknown"
    operation_key: str
    n_without: int
    n_calls: int

    def describe(self) -> str:
        return (f"{self.n_without:,} of {self.n_calls:,} calls of {self.operation_key} in anomalous requests have no "
                "instance: left out of its instance comparison.")


#: Why no instance of a method can stand out (:class:`InstancesAlike`'s ``reason``), in words.
INSTANCE_REASONS = {
    "no_known_instance": "no call of it in the anomalous requests has a known instance",
    "one_instance": "it ran on one instance only",
    "two_instances": "it ran on two instances: their dissimilarity ratios are equal by symmetry",
    "same_histograms": "its latency histograms are the same on every instance",
}


@dataclass(frozen=True)
class InstancesAlike(Note):
    """No instance of the top method can stand out (Algorithm 2's dissimilarity ratios cannot
    tell them apart).

    Attributes
    ----------
    operation_key : str
    reason : {"no_known_instance", "one_instance", "two_instances", "same_histograms"}
        See :data:`INSTANCE_REASONS`.
    n_instances : int
    """

    kind: ClassVar[str] = "instances_alike"
    operation_key: str
    reason: str
    n_instances: int

    def describe(self) -> str:
        return f"Instances of {self.operation_key} cannot be told apart: {INSTANCE_REASONS[self.reason]}."


@dataclass(frozen=True)
class NoClusterSplit(Note):
    """No major cluster could be split into normal and anomalous requests; the reason is the
    first one's (its row of the clusters table: a :class:`ClusterNotTested`).

    Attributes
    ----------
    cluster : int
    reason_kind : str
        The first cluster's :class:`ClusterNotTested` kind.
    reason : str
        ... in words.
    """

    kind: ClassVar[str] = "no_cluster_split"
    cluster: int
    reason_kind: str
    reason: str

    def describe(self) -> str:
        return f"No major cluster could be split: {self.reason}."


@dataclass(frozen=True)
class ClustersSkipped(Note):
    """Some major clusters were not split or tested (the others were); each one's reason is in
    the clusters table.

    Attributes
    ----------
    n_skipped : int
    n_clusters : int
        Major clusters.
    """

    kind: ClassVar[str] = "clusters_skipped"
    n_skipped: int
    n_clusters: int

    def describe(self) -> str:
        return (f"{self.n_skipped} of {self.n_clusters} major clusters were not split or tested (the clusters table "
                "says why).")


@dataclass(frozen=True)
class ClustersTooSmall(Note):
    """Most major clusters have too few requests for their methods: they were split on their most
    variable methods only, or not at all, so a slow method among the others goes unseen.

    Attributes
    ----------
    n_small : int
    n_clusters : int
        Major clusters.
    median_requests : int
        Median requests of the small clusters.
    median_methods : int
        Median methods of the small clusters.
    """

    kind: ClassVar[str] = "clusters_too_small"
    n_small: int
    n_clusters: int
    median_requests: int
    median_methods: int

    def describe(self) -> str:
        return (f"{self.n_small} of {self.n_clusters} major clusters have too few requests for their methods "
                f"(median {self.median_requests:,} requests for {self.median_methods:,} methods): they were split on "
                "their most variable methods only, or not at all, and a slow method among the others goes unseen. "
                "A longer window gives each call sequence more requests.")


@dataclass(frozen=True)
class WeakChange(Note):
    """Caveat: the rise the top service's rank comes from is significant on its own, not for the
    family of series tested in the window; its size ranks it first.

    Attributes
    ----------
    key : str
        The series (an operation or edge).
    n_calls : int
        Its calls before and after the change.
    p_value, p_family : float
        Its own p-value and the family's (corrected over ``n_series``).
    n_series : int
    """

    kind: ClassVar[str] = "weak_change"
    key: str
    n_calls: int
    p_value: float
    p_family: float
    n_series: int

    def describe(self) -> str:
        return (f"Weak evidence: the rise of {self.key} ({self.n_calls:,} calls) is significant only on its own "
                f"(p = {self.p_value:.2g}), not for the {self.n_series:,} series of the window (p = "
                f"{self.p_family:.2g}): its size ranks it first. A longer window gives it more calls.")


@dataclass(frozen=True)
class OneClusterOnly(Note):
    """Caveat: the top method is anomalous in one cluster only, of several that were split.

    Attributes
    ----------
    operation_key : str
    n_split : int
        Clusters split (with principal components).
    """

    kind: ClassVar[str] = "one_cluster_only"
    operation_key: str
    n_split: int

    def describe(self) -> str:
        return "Weak evidence: the top method is anomalous in one cluster only."


@dataclass(frozen=True)
class FasterWhenAnomalous(Note):
    """Caveat: the top method is faster in the anomalous requests than in the normal ones - the
    change probably affects most requests of the period (the "normal" ones).

    Attributes
    ----------
    operation_key : str
    anomalous_median_ns, normal_median_ns : float
    """

    kind: ClassVar[str] = "faster_when_anomalous"
    operation_key: str
    anomalous_median_ns: float
    normal_median_ns: float

    def describe(self) -> str:
        return (f"{self.operation_key} is faster in the anomalous requests than in the normal ones: the change "
                "probably affects most requests of this period (the 'normal' ones). To see it as a slowdown, compare "
                "with a period before it (tracesleuth compare).")


# --- why one major cluster was not split or tested (``ClusterSummary.note``, a row of the clusters table) ---


@dataclass(frozen=True)
class ClusterNotTested(Note):
    """Base of the reasons one major cluster was not split into normal and anomalous requests
    (:func:`~.spe.spe_split`, Section 4.2.2) or its principal methods not tested."""

    kind: ClassVar[str] = "cluster_not_tested"


@dataclass(frozen=True)
class TooFewToSplit(ClusterNotTested):
    """Fewer requests than the split needs (``min_requests`` of :func:`~.spe.spe_split`)."""

    kind: ClassVar[str] = "too_few_to_split"
    n_requests: int
    min_requests: int

    def describe(self) -> str:
        return f"{self.n_requests} requests: too few to split (at least {self.min_requests} needed)"


@dataclass(frozen=True)
class ConstantLatencies(ClusterNotTested):
    """Every method's latency is the same in all the cluster's requests: no variance to model."""

    kind: ClassVar[str] = "constant_latencies"
    n_requests: int

    def describe(self) -> str:
        return "every method's latency is the same in all its requests: nothing anomalous"


@dataclass(frozen=True)
class ZeroRobustCovariance(ClusterNotTested):
    """The robust covariance (most requests take the same latencies) is zero: no normal subspace."""

    kind: ClassVar[str] = "zero_robust_covariance"
    n_requests: int

    def describe(self) -> str:
        return (f"the robust covariance of its {self.n_requests} requests is zero (most of them take the same "
                "latencies): no normal subspace to measure from")


@dataclass(frozen=True)
class NoResidualVariance(ClusterNotTested):
    """The kept principal components explain all the variance: no request can stand out of them
    (the Q-statistic's residual subspace is empty)."""

    kind: ClassVar[str] = "no_residual_variance"
    n_components: int

    def describe(self) -> str:
        return f"{self.n_components} components explain all the variance: no request stands out of them"


@dataclass(frozen=True)
class TooFewAnomalous(ClusterNotTested):
    """Fewer anomalous requests than the Mann-Whitney tests need (``MIN_ANOMALOUS``)."""

    kind: ClassVar[str] = "too_few_anomalous"
    n_anomalous: int
    min_anomalous: int

    def describe(self) -> str:
        return f"{self.n_anomalous} anomalous requests: too few to test (at least {self.min_anomalous} needed)"


@dataclass(frozen=True)
class AlmostAllAnomalous(ClusterNotTested):
    """Almost every request is anomalous: no normal set to compare with."""

    kind: ClassVar[str] = "almost_all_anomalous"
    n_anomalous: int
    n_requests: int

    def describe(self) -> str:
        return "almost every request is anomalous: no normal set to compare with"


@dataclass(frozen=True)
class FalseAlarmsOnly(ClusterNotTested):
    """No more anomalous requests than the thresholds' false alarms (``alarm_test``: a one-sided
    binomial test of the anomalous share against ``expected_share`` at ``test_level``)."""

    kind: ClassVar[str] = "false_alarms_only"
    n_anomalous: int
    n_requests: int
    expected_share: float
    p_value: float

    def describe(self) -> str:
        return (f"{self.n_anomalous:,} of {self.n_requests:,} requests anomalous: no more than the thresholds' false "
                f"alarms ({self.expected_share:.1%} expected, binomial p = {self.p_value:.2f}); not tested")
