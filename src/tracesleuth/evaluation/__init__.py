"""Evaluation harness shared by the analyses: simulators with ground truth, and the metrics.

* :mod:`.eshopper` - :func:`simulate_eshopper`, E-Shopper homepage sessions with injected latency
  degradations (Cortellessa & Traini, ICPE 2020, Sections 4.2-4.3), spans and ground truth apart;
* :mod:`.metrics` - precision, recall and F-score, and :func:`match_clusters` (best-matching
  cluster per degradation, Section 4.3).

Each analysis registers its own evaluation protocol (simulate with ground truth, then score) in
:mod:`tracesleuth.analyses`; ``tracesleuth evaluate NAME`` runs it. :mod:`.metrics` is imported on
first use (PEP 562): the live demo's service and load-generator processes import :mod:`.eshopper`
only and must not pay for more at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .eshopper import Degradation, EShopperSession, simulate_eshopper

if TYPE_CHECKING:
    from .metrics import ClusterMatch, match_clusters

#: Public names imported lazily, and the submodule each comes from.
_LAZY = {"ClusterMatch": "metrics", "match_clusters": "metrics"}

__all__ = ["ClusterMatch", "Degradation", "EShopperSession", "match_clusters", "simulate_eshopper"]


def __getattr__(name: str):
    if name == "metrics":      # the submodule itself, as an eager import gave it
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value             # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
