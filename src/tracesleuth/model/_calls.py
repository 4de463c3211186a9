"""Which child spans are synchronous calls: the rule written once.

A child span is **synchronous** when its parent waits for it, so that its time is part of the
parent's duration: it is subtracted from the parent's exclusive (self) time, it is a candidate
for clock-skew correction, and it lies on the parent's critical path. A child is
**asynchronous** when

1. its kind is producer or consumer (:data:`~tracesleuth.schema.ASYNC_KINDS`): a message, whose
   sender does not wait for its processing;
2. its relation to the parent is ``FOLLOWS_FROM`` (OpenTracing; Jaeger's references): declared
   asynchronous by the instrumentation;
3. it ends after its parent (the timing test, on clock-skew-corrected times): work that outlives
   its caller cannot have been waited for - except, when the parents' kinds are given, a server
   span under a client span: the server side of a call closes its span after it has sent the
   response, which the client may already have read (in the live demo 14% of these server spans
   end after their client span, by up to 100 ms on a busy machine), so its late end is no sign
   that nobody waited for it.

Tests 1-2 are declarations, test 3 needs corrected times, so the clock-skew step (which decides
itself whether a late child is skew) uses the declarations alone.

References
----------
V. Cortellessa and L. Traini, "Detecting Latency Degradation Patterns in Service-based Systems",
ICPE 2020, Section 4.2 (exclusive "pure" execution times). https://doi.org/10.1145/3358960.3379126
OpenTracing specification, "References between Spans" (``ChildOf`` and ``FollowsFrom``).
"""

from __future__ import annotations

import numpy as np

from .. import schema as S

__all__ = ["synchronous_children"]

#: Asynchronous kind by kind code (the index of the kind in :data:`~tracesleuth.schema.SPAN_KINDS`).
_ASYNC_BY_CODE = np.isin(np.array(S.SPAN_KINDS), S.ASYNC_KINDS)


def synchronous_children(kind, follows_from, *, end_ns=None, parent_end_ns=None, parent_kind=None) -> np.ndarray:
    """Mask of the spans that are synchronous children by the rule of this module.

    Parameters
    ----------
    kind : array-like of shape (n_spans,)
        Span kinds, either names (``"server"``, ``"producer"``, ...) or int kind codes, the
        index in :data:`~tracesleuth.schema.SPAN_KINDS` (``SpanCodes.kind``).
    follows_from : array-like of bool, shape (n_spans,)
        The ``follows_from`` column.
    end_ns, parent_end_ns : array-like of int, shape (n_spans,), optional
        End of each span and of its parent, in ns after clock-skew correction. Given, a child
        that ends after its parent is asynchronous (test 3); omitted, only the declarations count.
    parent_kind : array-like of shape (n_spans,), optional
        Kind of each span's parent (names or codes, as ``kind``). Given, a server span whose
        parent is a client span passes test 3 (see the module's docstring).

    Returns
    -------
    ndarray of bool, shape (n_spans,)
        True where the span, as a child, is synchronous. Whether the span has a parent at all is
        the caller's to check (a root is nobody's child).

    Examples
    --------
    >>> synchronous_children(["client", "producer", "server", "internal"], [False, False, True, False],
    ...                      end_ns=[5, 5, 5, 9], parent_end_ns=[6, 6, 6, 6]).tolist()
    [True, False, False, False]
    """
    kind = np.asarray(kind)
    if np.issubdtype(kind.dtype, np.integer):
        asynchronous = _ASYNC_BY_CODE[kind]
    else:
        asynchronous = np.isin(kind, S.ASYNC_KINDS)
    sync = ~asynchronous & ~np.asarray(follows_from, dtype=bool)
    if end_ns is not None or parent_end_ns is not None:
        in_time = np.asarray(end_ns) <= np.asarray(parent_end_ns)
        if parent_kind is not None:
            in_time |= (_kind_names(kind) == "server") & (_kind_names(parent_kind) == "client")
        sync &= in_time
    return sync


def _kind_names(kind) -> np.ndarray:
    """Span kinds as names, from names or kind codes."""
    kind = np.asarray(kind)
    return np.asarray(S.SPAN_KINDS)[kind] if np.issubdtype(kind.dtype, np.integer) else kind
