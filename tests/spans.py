"""Building small span tables by hand for tests."""

from __future__ import annotations

import pyarrow as pa

from tracesleuth import schema as S

MS = 1_000_000


def span(trace, span_id, parent, service, operation, start_ms, end_ms, *, kind="server", instance=None,
         status="unset", follows_from=False, attributes=None, base_ms=1_700_000_000_000):
    """One span as a dict in SPAN_SCHEMA; times in ms relative to an arbitrary epoch."""
    return {
        S.TRACE_ID: trace.rjust(32, "0"), S.SPAN_ID: span_id.rjust(16, "0"),
        S.PARENT_SPAN_ID: parent.rjust(16, "0") if parent else None,
        S.SERVICE: service, S.OPERATION: operation, S.INSTANCE: instance, S.KIND: kind,
        S.START_NS: int((base_ms + start_ms) * MS), S.END_NS: int((base_ms + end_ms) * MS),
        S.STATUS: status, S.FOLLOWS_FROM: follows_from,
        S.ATTRIBUTES: [{"key": k, "str": v if isinstance(v, str) else None,
                        "int": v if isinstance(v, int) and not isinstance(v, bool) else None,
                        "float": v if isinstance(v, float) else None,
                        "bool": v if isinstance(v, bool) else None} for k, v in (attributes or {}).items()],
    }


def table(rows) -> pa.Table:
    """A SPAN_SCHEMA table from :func:`span` dicts."""
    return pa.Table.from_pylist(list(rows), schema=S.SPAN_SCHEMA)
