"""Which instances of an anomalous method misbehave: Algorithm 2 of Mi et al. 2012 (Section 5).

For one method, its latencies in the anomalous requests are grouped by instance; each instance's
latencies become a histogram of ``n_bins`` equal-width bins over the range common to all of them
(equation 2: each bin's share of the instance's calls); every pair of instances is compared by the
square root of their Jensen-Shannon divergence (equations 3-4, natural logarithm; the paper's
text measures similarity by "the square roots of JSD", which is a metric, while equation 3
writes the divergence itself), computed by :func:`scipy.spatial.distance.jensenshannon`. Empty
bins need no care: a bin empty in one histogram contributes ``0 ln 0 = 0`` to its KL term, and
the mixture ``v`` is positive wherever either histogram is, so no term divides by zero. An
instance's *dissimilarity ratio* (equation 5) is its summed divergence to the others over the
sum for all instances.

**Which instances stand out** (the paper leaves it to the eye, Figure 9). If ``r`` of ``N``
instances behave alike and the others alike but differently, the ``r`` have ratio ``1/(2r)`` and
the others ``1/(2(N - r))``: the minority stands out by the factor ``(N - r)/r``. An instance
stands out when its ratio is at least ``factor`` (default 1.5) times the median ratio; this
needs three instances or more: with two, both ratios are 1/2 whatever their latencies
(the divergence is symmetric), and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.spatial.distance import jensenshannon

from .notes import InstancesAlike

__all__ = ["InstanceSuspect", "dissimilarity_ratios"]


@dataclass(frozen=True)
class InstanceSuspect:
    """One instance of an anomalous method.

    Attributes
    ----------
    operation_key : str
        The method.
    instance : str
    dissimilarity_ratio : float
        Equation 5, in [0, 1]; the ratios of one method's instances sum to 1. Higher = more
        suspicious.
    stands_out : bool
        The ratio is at least ``instance_factor`` times the median (module docstring).
    n_calls : int
        The method's calls on the instance in the anomalous requests.
    median_ns : float
        Their median latency, ns.
    """

    operation_key: str
    instance: str
    dissimilarity_ratio: float
    stands_out: bool
    n_calls: int
    median_ns: float

    def to_dict(self) -> dict:
        return {"operation_key": self.operation_key, "instance": self.instance,
                "dissimilarity_ratio": self.dissimilarity_ratio, "stands_out": self.stands_out,
                "n_calls": self.n_calls, "median_ns": self.median_ns}


def dissimilarity_ratios(operation_key: str, latencies: pl.DataFrame, *, n_bins: int, factor: float
                         ) -> tuple[list[InstanceSuspect], InstancesAlike | None]:
    """Algorithm 2 for one method.

    Parameters
    ----------
    operation_key : str
    latencies : polars.DataFrame
        Columns ``instance`` (String, not null) and ``latency`` (ns): the method's calls in the
        anomalous requests.
    n_bins : int
        Bins per histogram (the paper's ``binNum``).
    factor : float
        Stand-out factor over the median ratio.

    Returns
    -------
    (list of InstanceSuspect, InstancesAlike or None)
        The instances, highest ratio first (ties: by name); and why none can stand out, when
        so (a :class:`~.notes.InstancesAlike` note: one instance, two instances, identical
        histograms).
    """
    groups = latencies.group_by("instance").agg(pl.col("latency")).sort("instance")
    names = groups["instance"].to_list()
    samples = [np.asarray(v, dtype=np.float64) for v in groups["latency"].to_list()]
    if not names:
        return [], InstancesAlike(operation_key, "no_known_instance", 0)
    low = min(float(s.min()) for s in samples)
    high = max(float(s.max()) for s in samples)
    if high <= low:
        high = low + 1.0  # one common value: a single full bin for every instance
    hists = np.array([np.histogram(s, bins=n_bins, range=(low, high))[0] / len(s) for s in samples])
    n = len(names)
    dissim = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            dissim[i, j] = dissim[j, i] = jensenshannon(hists[i], hists[j])
    sums = dissim.sum(axis=1)
    total = sums.sum()
    ratios = sums / total if total > 0 else np.full(n, 1.0 / n)
    reason = "one_instance" if n == 1 else "two_instances" if n == 2 else "same_histograms" if total == 0 else None
    note = None if reason is None else InstancesAlike(operation_key, reason, n)
    median = float(np.median(ratios))
    out = [InstanceSuspect(operation_key=operation_key, instance=name, dissimilarity_ratio=float(r),
                           stands_out=bool(note is None and r >= factor * median),
                           n_calls=len(s), median_ns=float(np.median(s)))
           for name, r, s in zip(names, ratios, samples)]
    out.sort(key=lambda x: (-x.dissimilarity_ratio, x.instance))
    return out, note
