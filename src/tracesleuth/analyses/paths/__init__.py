"""Black-box causal paths (Aguilera et al., SOSP 2003): call paths and delays from message logs
without request ids.

:class:`CausalPaths` (``fit(messages)``) with the nesting algorithm (:mod:`.nesting`), its
:class:`PathsResult` of :class:`PathPattern` entries; message logs and traces turned into them
(:mod:`.messages`); :func:`recovery_rate` against known paths.
"""

from ..._lazy import lazy_exports

__all__ = ["CausalPaths", "MESSAGE_SCHEMA", "PathPattern", "PathsResult", "messages_from_tables", "recovery_rate"]

__getattr__, __dir__ = lazy_exports(__name__, {
    **{name: f".analysis:{name}" for name in ("CausalPaths", "PathPattern", "PathsResult", "recovery_rate")},
    **{name: f".messages:{name}" for name in ("MESSAGE_SCHEMA", "messages_from_tables")},
})
