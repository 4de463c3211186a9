"""Evaluation harnesses: simulated sessions with ground truth, and the papers' metrics.

* :mod:`.eshopper` - :func:`simulate_eshopper`, E-Shopper homepage sessions with injected latency
  degradations (Cortellessa & Traini, ICPE 2020, Sections 4.2-4.3), spans and ground truth apart;
* :mod:`.metrics` - :func:`match_clusters`, best-matching cluster per degradation, precision,
  recall and F-score (Section 4.3);
* :mod:`.patterns` - :func:`evaluate_patterns`, the paper's experiment for every solver, and
  :func:`render` for tables like its Tables 2 and 3.
"""

from .eshopper import Degradation, EShopperSession, simulate_eshopper
from .metrics import ClusterMatch, match_clusters
from .patterns import PatternsEvaluation, evaluate_patterns, evaluate_session, render

__all__ = [
    "ClusterMatch", "Degradation", "EShopperSession", "PatternsEvaluation", "evaluate_patterns",
    "evaluate_session", "match_clusters", "render", "simulate_eshopper",
]
