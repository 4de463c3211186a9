"""Building small span tables by hand for tests."""

from __future__ import annotations

import pyarrow as pa

from tracesleuth import schema as S

MS = 1_000_000
US = 1_000


def typed_attributes(attributes: dict | None) -> list[dict]:
    """``{key: value}`` as entries of :data:`tracesleuth.schema.ATTRIBUTE_TYPE`."""
    return [{"key": k, "str": v if isinstance(v, str) else None,
             "int": v if isinstance(v, int) and not isinstance(v, bool) else None,
             "float": v if isinstance(v, float) else None,
             "bool": v if isinstance(v, bool) else None} for k, v in (attributes or {}).items()]


def event(name, at_ms, attributes=None, *, base_ms=1_700_000_000_000):
    """One span event (:data:`tracesleuth.schema.EVENT_TYPE`); time in ms like :func:`span`'s."""
    return {"time_ns": int(base_ms) * MS + int(round(at_ms * MS)), "name": name, S.ATTRIBUTES: typed_attributes(attributes)}


def link(trace, span_id, attributes=None):
    """One span link (:data:`tracesleuth.schema.LINK_TYPE`), ids padded as :func:`span`'s."""
    return {S.TRACE_ID: trace.rjust(32, "0"), S.SPAN_ID: span_id.rjust(16, "0"),
            S.ATTRIBUTES: typed_attributes(attributes)}


def span(trace, span_id, parent, service, operation, start_ms, end_ms, *, kind="server", instance=None,
         status="unset", follows_from=False, attributes=None, base_ms=1_700_000_000_000, status_message=None,
         events=(), links=()):
    """One span as a dict in SPAN_SCHEMA; times in ms relative to an arbitrary epoch; ``events``
    from :func:`event`, ``links`` from :func:`link`."""
    return {
        S.TRACE_ID: trace.rjust(32, "0"), S.SPAN_ID: span_id.rjust(16, "0"),
        S.PARENT_SPAN_ID: parent.rjust(16, "0") if parent else None,
        S.SERVICE: service, S.OPERATION: operation, S.INSTANCE: instance, S.KIND: kind,
        S.START_NS: int((base_ms + start_ms) * MS), S.END_NS: int((base_ms + end_ms) * MS),
        S.STATUS: status, S.FOLLOWS_FROM: follows_from,
        S.ATTRIBUTES: typed_attributes(attributes),
        S.STATUS_MESSAGE: status_message, S.EVENTS: list(events), S.LINKS: list(links),
    }


def table(rows) -> pa.Table:
    """A SPAN_SCHEMA table from :func:`span` dicts."""
    return pa.Table.from_pylist(list(rows), schema=S.SPAN_SCHEMA)
