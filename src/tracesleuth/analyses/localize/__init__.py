"""Root-cause localization (Mi et al., Sci China Inf Sci 2012): anomalous methods and their instances.

From one period's traces, no baseline: :class:`RootCauseLocalization` (``fit(table or tables)``)
and its frozen :class:`LocalizationResult` of ranked :class:`MethodSuspect`,
:class:`InstanceSuspect` and :class:`ServiceSuspect` entries.
"""

from ..._lazy import lazy_exports

__all__ = ["ClusterSummary", "InstanceSuspect", "LocalizationResult", "MethodSuspect", "RootCauseLocalization",
           "ServiceSuspect"]

# Imported on first use: the CLI registers this analysis's command without importing scipy.
__getattr__, __dir__ = lazy_exports(__name__, {
    **{name: f".analysis:{name}" for name in ("ClusterSummary", "LocalizationResult", "MethodSuspect",
                                              "RootCauseLocalization", "ServiceSuspect")},
    "InstanceSuspect": ".instances:InstanceSuspect",
})
