"""Evaluation harnesses: simulated sessions with ground truth, and the papers' metrics.

* :mod:`.eshopper` - :func:`simulate_eshopper`, E-Shopper homepage sessions with injected latency
  degradations (Cortellessa & Traini, ICPE 2020, Sections 4.2-4.3), spans and ground truth apart;
* :mod:`.metrics` - :func:`match_clusters`, best-matching cluster per degradation, precision,
  recall and F-score (Section 4.3);
* :mod:`.patterns` - :func:`evaluate_patterns`, the paper's experiment for every solver, and
  :func:`render` for tables like its Tables 2 and 3.

:mod:`.metrics` and :mod:`.patterns` are imported on first use (PEP 562): :mod:`.patterns` pulls
in the analysis (scikit-learn among others), which the live demo's service and load-generator
processes, importing :mod:`.eshopper` only, must not pay for at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .eshopper import Degradation, EShopperSession, simulate_eshopper

if TYPE_CHECKING:
    from .metrics import ClusterMatch, match_clusters
    from .patterns import PatternsEvaluation, evaluate_patterns, evaluate_session, render

#: Public names imported lazily, and the submodule each comes from.
_LAZY = {
    "ClusterMatch": "metrics", "match_clusters": "metrics",
    "PatternsEvaluation": "patterns", "evaluate_patterns": "patterns", "evaluate_session": "patterns",
    "render": "patterns",
}

__all__ = [
    "ClusterMatch", "Degradation", "EShopperSession", "PatternsEvaluation", "evaluate_patterns",
    "evaluate_session", "match_clusters", "render", "simulate_eshopper",
]


def __getattr__(name: str):
    if name in ("metrics", "patterns"):      # the submodules themselves, as an eager import gave them
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value             # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
