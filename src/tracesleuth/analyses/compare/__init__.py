"""Request-flow comparison (Spectroscope; Sambasivan et al., NSDI 2011).

What changed between a baseline and a problem period, and which service it points to:
:class:`RequestFlowComparison` (``fit(problem, baseline)``) and its frozen
:class:`ComparisonResult` of ranked :class:`ServiceSuspect` and :class:`Mutation` entries.
"""

from ..._lazy import lazy_exports

__all__ = ["ComparisonResult", "EdgeChange", "Mutation", "OperationChange", "Precursor", "RequestFlowComparison",
           "ServiceSuspect"]

# Imported on first use: the CLI registers this analysis's command without importing scipy.
__getattr__, __dir__ = lazy_exports(__name__, {
    "ComparisonResult": ".analysis:ComparisonResult", "RequestFlowComparison": ".analysis:RequestFlowComparison",
    **{name: f".mutations:{name}" for name in ("EdgeChange", "Mutation", "OperationChange", "Precursor")},
    "ServiceSuspect": ".services:ServiceSuspect",
})
