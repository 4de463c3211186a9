"""Evaluation harness shared by the analyses: simulators with ground truth, and the metrics.

* :mod:`.eshopper` - :func:`simulate_eshopper`, E-Shopper homepage sessions with injected latency
  degradations (Cortellessa & Traini, ICPE 2020, Sections 4.2-4.3), spans and ground truth apart;
* ``metrics`` - :mod:`tracesleuth.analyses.metrics` (below the analyses, whose searches rank by
  its F-score), here under its old name: precision, recall and F-score, and
  :func:`match_clusters` (best-matching cluster per degradation, Section 4.3);
* :mod:`.nezha` - the recorded faults of ../shared/data/nezha and their trace windows, for the
  analyses' real-data evaluations.

Each analysis's evaluation protocol (simulate with ground truth, then score) is a module of
:mod:`.protocols`, registered in :mod:`tracesleuth.analyses`; ``tracesleuth evaluate NAME`` runs it. ``metrics`` is imported on
first use (PEP 562): the live demo's service and load-generator processes import :mod:`.eshopper`
only and must not pay for more at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

from .eshopper import Degradation, EShopperSession, simulate_eshopper

if TYPE_CHECKING:
    from ..analyses.metrics import ClusterMatch, match_clusters

__all__ = ["ClusterMatch", "Degradation", "EShopperSession", "match_clusters", "simulate_eshopper"]

__getattr__, __dir__ = lazy_exports(__name__, {"metrics": "..analyses.metrics",
                                              "ClusterMatch": "..analyses.metrics:ClusterMatch",
                                              "match_clusters": "..analyses.metrics:match_clusters"})
