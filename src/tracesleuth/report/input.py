"""The "about the input" report section: what was read, rejected and repaired before any analysis."""

from __future__ import annotations

import pyarrow as pa

from ..units import format_duration_ns
from ..io import rejects_by_reason
from .document import Code, KeyValues, Section, Table, Text

__all__ = ["input_section"]

#: Reject reasons and examples listed at most.
MAX_REJECT_ROWS = 10
#: Characters of a rejected record's excerpt shown at most.
MAX_EXCERPT = 160

_REPAIRS = (
    ("exact_duplicates", "exact duplicate spans removed"),
    ("shared_spans_split", "shared client/server span ids split (Zipkin)"),
    ("conflicting_ids_renamed", "other duplicate span ids renamed"),
    ("orphan_spans", "orphan spans (parent not in the trace; kept as subtree roots)"),
    ("cycle_spans", "spans on a parent cycle (cut; kept as orphans)"),
    ("traces_without_root", "traces without a root span"),
    ("traces_with_several_roots", "traces with several roots (roots plus orphans)"),
    ("skew_corrected_spans", "clock-skew corrections (spans moved into their parent)"),
    ("skew_shifted_spans", "spans shifted by a clock-skew correction (with their descendants)"),
)


def _reject_summary(rejects: pa.Table) -> tuple[list, list]:
    if rejects is None or rejects.num_rows == 0:
        return [], []
    reasons = rejects_by_reason(rejects)[:MAX_REJECT_ROWS]
    examples = []
    for r in rejects.slice(0, MAX_REJECT_ROWS).to_pylist():
        excerpt = r.get("excerpt") or ""
        if len(excerpt) > MAX_EXCERPT:
            excerpt = excerpt[:MAX_EXCERPT - 1] + "…"
        examples.append([Code(f"{r['source']}:{r['record']}"), r.get("field"), r["reason"],
                         Code(excerpt) if excerpt else None])
    return [[r["reason"], r["records"], r["spans"]] for r in reasons], examples


def input_section(spans, table) -> Section:
    """Traces, spans, rejected records and trace-assembly repairs of the analysed input.

    Parameters
    ----------
    spans : pyarrow.Table, polars.DataFrame or SpanReadResult
        The spans analysed; a :class:`~tracesleuth.io.SpanReadResult` also carries the records
        rejected while reading and the format of each file.
    table : TraceTable
        Its ``assembly`` report gives the repairs (duplicates, orphans, clock skew).

    Returns
    -------
    Section
    """
    a = table.assembly
    frame = table.frame
    rejects = getattr(spans, "rejects", None)
    formats = getattr(spans, "formats", None)
    items: list = []
    if formats:
        by_format: dict[str, int] = {}
        for f in formats.values():
            by_format[f] = by_format.get(f, 0) + 1
        items.append(("sources", ", ".join(f"{k} ({v} file{'s' if v > 1 else ''})"
                                           for k, v in sorted(by_format.items()))))
    accepted = getattr(spans, "n_spans", None)
    if accepted is None:
        accepted = spans.num_rows if isinstance(spans, pa.Table) else getattr(spans, "height", None)
    items.append(("spans read", accepted))
    rejected = getattr(spans, "spans_rejected", None)
    items.append(("spans rejected", rejected if rejected is not None else "not recorded (spans given as a table)"))
    items += [
        ("traces (after assembly)", a.traces),
        ("spans (after assembly)", a.spans),
        ("endpoint", Code(table.endpoint)),
        ("requests to the endpoint", table.n_requests),
        ("operations called by the requests", len(table.operations)),
    ]
    if "signature" in frame.columns:
        items.append(("call structures", frame["signature"].n_unique()))
    if "incomplete" in frame.columns:
        items.append(("requests with an incomplete trace", int(frame["incomplete"].fill_null(False).sum())))
    if "error" in frame.columns:
        items.append(("requests with an error span", int(frame["error"].fill_null(False).sum())))
    section = Section("About the input", key="input")
    section.add(KeyValues(items))
    if len(table.endpoints) > 1:
        shown = list(table.endpoints.items())[:MAX_REJECT_ROWS]
        section.add(Table(["root operation", "traces"], [[Code(k), v] for k, v in shown],
                          caption=f"Root operations ({len(table.endpoints)}; the analysis used {table.endpoint})"))

    repairs = [[label, getattr(a, key)] for key, label in _REPAIRS]
    section.add(Table(["trace assembly repair", "count"], repairs,
                      caption=f"Largest clock-skew correction: {format_duration_ns(a.max_abs_skew_ns)}"))
    if a.skew_by_service:
        pairs = sorted(a.skew_by_service.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_REJECT_ROWS]
        section.add(Table(["caller -> callee", "clock-skew corrections"], [[Code(k), v] for k, v in pairs]))

    reasons, examples = _reject_summary(rejects)
    if reasons:
        section.add(Table(["reject or warning", "records", "spans lost"], reasons,
                          caption="Records rejected (or accepted with a warning) while reading"))
        section.add(Table(["where", "field", "reason", "excerpt"], examples,
                          caption=f"First {len(examples)} rejected records"))
    elif rejects is not None:
        section.add(Text("No record was rejected while reading."))
    return section
