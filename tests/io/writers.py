"""Test-only writers: a canonical span table (:data:`tracesleuth.schema.SPAN_SCHEMA`) written in
each input format, the way the real producers of that format write it.

Resource attributes: OTLP and Jaeger carry per-process attributes apart from the span's. The
writers treat the attributes whose key is in :data:`RESOURCE_KEYS` as the resource's (the
process's, for Jaeger) and group spans by service, instance and those attributes; every other
attribute is the span's. OTLP always writes ``service.name`` as a resource attribute, so a table
whose attributes lack it reads back with it added.

Events, links and status messages are written as each format's producers write them (as
OpenTelemetry's exporters and translators map them): OTLP as they are; Jaeger events as logs
(the name in the ``event`` field, OpenTelemetry's Jaeger mapping), links as ``FOLLOWS_FROM``
references after the parent's, the status message as the ``otel.status_description`` tag; Zipkin
events as annotations (their name as the value: attributes are lost), the status message as the
``error`` tag's text of an error span; CSV only the status message (a plain column).
"""

from __future__ import annotations

import base64
import gzip
import io
from collections import defaultdict
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from tracesleuth import schema as S

RESOURCE_KEYS = frozenset({S.ATTR_SERVICE_NAME, S.ATTR_SERVICE_INSTANCE_ID, S.ATTR_HOST_NAME,
                           S.ATTR_K8S_POD_NAME, S.ATTR_NET_HOST_IP})
OTLP_KIND = {"unspecified": 0, "internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
OTLP_STATUS = {"unset": 0, "ok": 1, "error": 2}
ZIPKIN_KIND = {"server": "SERVER", "client": "CLIENT", "producer": "PRODUCER", "consumer": "CONSUMER"}
FORMATS = ("otlp-json", "otlp-json-body", "otlp-proto", "otlp-proto-prefixed", "jaeger-json",
           "zipkin-json", "csv", "parquet")


# -- helpers ----------------------------------------------------------------------------------
def rows_of(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def attribute_value(entry: dict):
    """The one value set in a canonical attribute entry."""
    for f in ("str", "int", "float", "bool"):
        if entry[f] is not None:
            return entry[f]
    return None


def entry_attributes(entry: dict) -> list[tuple[str, object]]:
    """``(key, value)`` of an event's or a link's attributes."""
    return [(a["key"], attribute_value(a)) for a in entry[S.ATTRIBUTES] or []]


def split_attributes(row: dict) -> tuple[list[tuple[str, object]], list[tuple[str, object]]]:
    """``(span attributes, resource attributes)`` of a canonical row, as ``(key, value)``."""
    span, resource = [], []
    for a in row[S.ATTRIBUTES] or []:
        (resource if a["key"] in RESOURCE_KEYS else span).append((a["key"], attribute_value(a)))
    return span, resource


def resource_of(row: dict) -> tuple:
    """The resource a row belongs to: ``service.name`` first, then its resource attributes."""
    _, res = split_attributes(row)
    res = [kv for kv in res if kv[0] != S.ATTR_SERVICE_NAME]
    if row[S.INSTANCE] is not None and not any(k in S.INSTANCE_ATTRIBUTES for k, _ in res):
        res.append((S.ATTR_SERVICE_INSTANCE_ID, row[S.INSTANCE]))
    return ((S.ATTR_SERVICE_NAME, row[S.SERVICE]), *res)


def group_by_resource(rows: list[dict]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[resource_of(r)].append(r)
    return groups


def zipkin_tag(value) -> str:
    """A typed attribute value as a Zipkin tag (Zipkin tags are strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def maybe_gzip(data: bytes, compress: bool) -> bytes:
    return gzip.compress(data) if compress else data


# -- OTLP JSON ----------------------------------------------------------------------------------
def otlp_any_value(value) -> dict:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def otlp_json_span(r: dict, *, int_times: bool = False) -> dict:
    span_attrs, _ = split_attributes(r)
    out = {
        "traceId": r[S.TRACE_ID], "spanId": r[S.SPAN_ID], "parentSpanId": r[S.PARENT_SPAN_ID] or "",
        "name": r[S.OPERATION], "kind": OTLP_KIND[r[S.KIND]],
        "startTimeUnixNano": r[S.START_NS] if int_times else str(r[S.START_NS]),
        "endTimeUnixNano": r[S.END_NS] if int_times else str(r[S.END_NS]),
        "attributes": [{"key": k, "value": otlp_any_value(v)} for k, v in span_attrs],
        "status": {"code": OTLP_STATUS[r[S.STATUS]]} if r[S.STATUS] != "unset" else {},
    }
    if r[S.STATUS_MESSAGE]:
        out["status"]["message"] = r[S.STATUS_MESSAGE]
    if r[S.EVENTS]:
        out["events"] = [{"timeUnixNano": e["time_ns"] if int_times else str(e["time_ns"]), "name": e["name"],
                          "attributes": [{"key": k, "value": otlp_any_value(v)} for k, v in entry_attributes(e)]}
                         for e in r[S.EVENTS]]
    if r[S.LINKS]:
        out["links"] = [{"traceId": ln[S.TRACE_ID], "spanId": ln[S.SPAN_ID],
                         "attributes": [{"key": k, "value": otlp_any_value(v)} for k, v in entry_attributes(ln)]}
                        for ln in r[S.LINKS]]
    return out


def otlp_json_requests(rows: list[dict], *, spans_per_request: int = 1_000_000, int_times: bool = False) -> list[dict]:
    """``ExportTraceServiceRequest`` objects, each with at most ``spans_per_request`` spans."""
    requests = []
    for resource, spans in group_by_resource(rows).items():
        for i in range(0, len(spans), spans_per_request):
            chunk = spans[i:i + spans_per_request]
            requests.append({"resourceSpans": [{
                "resource": {"attributes": [{"key": k, "value": otlp_any_value(v)} for k, v in resource]},
                "scopeSpans": [{"scope": {"name": "tests.writers", "version": "1"},
                                "spans": [otlp_json_span(r, int_times=int_times) for r in chunk]}],
            }]})
    return requests


def write_otlp_json(table: pa.Table, path: Path, *, body: bool = False, spans_per_line: int = 3,
                    int_times: bool = False, compress: bool = False) -> Path:
    """The collector file exporter's layout (one request per line), or with ``body`` one
    pretty-printed OTLP/HTTP JSON body holding every resource."""
    rows = rows_of(table)
    if body:
        requests = otlp_json_requests(rows, int_times=int_times)
        doc = {"resourceSpans": [rs for req in requests for rs in req["resourceSpans"]]}
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    else:
        requests = otlp_json_requests(rows, spans_per_request=spans_per_line, int_times=int_times)
        data = b"".join(orjson.dumps(req) + b"\n" for req in requests)
    path.write_bytes(maybe_gzip(data, compress))
    return path


# -- OTLP protobuf ------------------------------------------------------------------------------
def proto_any_value(value) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=value)


def otlp_proto_requests(rows: list[dict], *, spans_per_request: int = 1_000_000) -> list[ExportTraceServiceRequest]:
    requests = []
    for resource, spans in group_by_resource(rows).items():
        for i in range(0, len(spans), spans_per_request):
            rs = ResourceSpans()
            rs.resource.attributes.extend(KeyValue(key=k, value=proto_any_value(v)) for k, v in resource)
            scope = rs.scope_spans.add()
            scope.scope.name = "tests.writers"
            for r in spans[i:i + spans_per_request]:
                span_attrs, _ = split_attributes(r)
                scope.spans.append(Span(
                    trace_id=bytes.fromhex(r[S.TRACE_ID]), span_id=bytes.fromhex(r[S.SPAN_ID]),
                    parent_span_id=bytes.fromhex(r[S.PARENT_SPAN_ID]) if r[S.PARENT_SPAN_ID] else b"",
                    name=r[S.OPERATION], kind=OTLP_KIND[r[S.KIND]],
                    start_time_unix_nano=r[S.START_NS], end_time_unix_nano=r[S.END_NS],
                    attributes=[KeyValue(key=k, value=proto_any_value(v)) for k, v in span_attrs],
                    status=Status(code=OTLP_STATUS[r[S.STATUS]], message=r[S.STATUS_MESSAGE] or ""),
                    events=[Span.Event(time_unix_nano=e["time_ns"], name=e["name"],
                                       attributes=[KeyValue(key=k, value=proto_any_value(v))
                                                   for k, v in entry_attributes(e)]) for e in r[S.EVENTS] or []],
                    links=[Span.Link(trace_id=bytes.fromhex(ln[S.TRACE_ID]), span_id=bytes.fromhex(ln[S.SPAN_ID]),
                                     attributes=[KeyValue(key=k, value=proto_any_value(v))
                                                 for k, v in entry_attributes(ln)]) for ln in r[S.LINKS] or []],
                ))
            requests.append(ExportTraceServiceRequest(resource_spans=[rs]))
    return requests


def write_otlp_proto(table: pa.Table, path: Path, *, prefixed: bool = False, spans_per_message: int = 3,
                     compress: bool = False) -> Path:
    """One raw ``ExportTraceServiceRequest`` (an OTLP/HTTP body), or with ``prefixed`` the
    collector file exporter's stream: each request after its 4-byte big-endian length."""
    rows = rows_of(table)
    if prefixed:
        msgs = [m.SerializeToString() for m in otlp_proto_requests(rows, spans_per_request=spans_per_message)]
        data = b"".join(len(m).to_bytes(4, "big") + m for m in msgs)
    else:
        merged = ExportTraceServiceRequest()
        for m in otlp_proto_requests(rows):
            merged.resource_spans.extend(m.resource_spans)
        data = merged.SerializeToString()
    path.write_bytes(maybe_gzip(data, compress))
    return path


# -- Jaeger ---------------------------------------------------------------------------------------
def jaeger_tag(key: str, value) -> dict:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    return {"key": key, "type": "string", "value": value}


def _jaeger_id(hex_id: str) -> str:
    """Jaeger writes 64-bit trace ids without the zero high half."""
    return hex_id[16:] if len(hex_id) == 32 and hex_id[:16] == "0" * 16 else hex_id


def write_jaeger_json(table: pa.Table, path: Path, *, single_trace: bool = False, compress: bool = False) -> Path:
    """The Jaeger UI download / query API layout ``{"data": [trace, ...]}`` (one element per
    trace, processes ``p1``, ``p2``, ...), or one trace object with ``single_trace``."""
    traces: dict[str, list[dict]] = defaultdict(list)
    for r in rows_of(table):
        traces[r[S.TRACE_ID]].append(r)
    data = []
    for trace_id, rows in traces.items():
        process_ids: dict[tuple, str] = {}
        processes, spans = {}, []
        for r in rows:
            resource = resource_of(r)
            pid = process_ids.get(resource)
            if pid is None:
                pid = process_ids[resource] = f"p{len(process_ids) + 1}"
                processes[pid] = {"serviceName": r[S.SERVICE],
                                  "tags": [jaeger_tag(k, v) for k, v in resource[1:]]}
            span_attrs, _ = split_attributes(r)
            tags = [jaeger_tag(k, v) for k, v in span_attrs]
            if r[S.KIND] != "unspecified":
                tags.append(jaeger_tag("span.kind", r[S.KIND]))
            if r[S.STATUS] == "error":
                tags.append(jaeger_tag("error", True))
            if r[S.STATUS] != "unset":
                tags.append(jaeger_tag("otel.status_code", r[S.STATUS].upper()))
            if r[S.STATUS_MESSAGE]:
                tags.append(jaeger_tag("otel.status_description", r[S.STATUS_MESSAGE]))
            refs = []
            if r[S.PARENT_SPAN_ID]:
                refs.append({"refType": "FOLLOWS_FROM" if r[S.FOLLOWS_FROM] else "CHILD_OF",
                             "traceID": _jaeger_id(trace_id), "spanID": r[S.PARENT_SPAN_ID]})
            # links after the parent's reference, as FOLLOWS_FROM (their attributes are lost)
            refs += [{"refType": "FOLLOWS_FROM", "traceID": _jaeger_id(ln[S.TRACE_ID]), "spanID": ln[S.SPAN_ID]}
                     for ln in r[S.LINKS] or []]
            logs = [{"timestamp": e["time_ns"] // 1000,
                     "fields": [jaeger_tag("event", e["name"])] + [jaeger_tag(k, v) for k, v in entry_attributes(e)]}
                    for e in r[S.EVENTS] or []]
            spans.append({
                "traceID": _jaeger_id(trace_id), "spanID": r[S.SPAN_ID], "flags": 1,
                "operationName": r[S.OPERATION], "references": refs,
                "startTime": r[S.START_NS] // 1000, "duration": (r[S.END_NS] - r[S.START_NS]) // 1000,
                "tags": tags, "logs": logs, "processID": pid, "warnings": None,
            })
        data.append({"traceID": _jaeger_id(trace_id), "spans": spans, "processes": processes, "warnings": None})
    doc = data[0] if single_trace else {"data": data, "total": 0, "limit": 0, "offset": 0, "errors": None}
    path.write_bytes(maybe_gzip(orjson.dumps(doc, option=orjson.OPT_INDENT_2), compress))
    return path


# -- Zipkin ---------------------------------------------------------------------------------------
def write_zipkin_json(table: pa.Table, path: Path, *, compress: bool = False) -> Path:
    """A Zipkin v2 span list (``POST /api/v2/spans``); the instance ``host:port`` becomes the
    local endpoint's ``ipv4`` and ``port``; typed attributes become string tags."""
    spans = []
    for r in rows_of(table):
        local = {"serviceName": r[S.SERVICE]}
        if r[S.INSTANCE]:
            host, _, port = r[S.INSTANCE].rpartition(":")
            if host and port.isdigit():
                local.update(ipv4=host, port=int(port))
            else:
                local["ipv4"] = r[S.INSTANCE]
        tags = {a["key"]: zipkin_tag(attribute_value(a)) for a in r[S.ATTRIBUTES] or []}
        if r[S.STATUS] == "error":
            tags["error"] = r[S.STATUS_MESSAGE] or ""
        elif r[S.STATUS] == "ok":
            tags["otel.status_code"] = "OK"
        span = {"traceId": _jaeger_id(r[S.TRACE_ID]), "id": r[S.SPAN_ID], "name": r[S.OPERATION],
                "timestamp": r[S.START_NS] // 1000, "duration": (r[S.END_NS] - r[S.START_NS]) // 1000,
                "localEndpoint": local}
        if r[S.PARENT_SPAN_ID]:
            span["parentId"] = r[S.PARENT_SPAN_ID]
        if r[S.KIND] in ZIPKIN_KIND:
            span["kind"] = ZIPKIN_KIND[r[S.KIND]]
        if tags:
            span["tags"] = tags
        if r[S.EVENTS]:
            span["annotations"] = [{"timestamp": e["time_ns"] // 1000, "value": e["name"]} for e in r[S.EVENTS]]
        spans.append(span)
    path.write_bytes(maybe_gzip(orjson.dumps(spans), compress))
    return path


# -- CSV and Parquet --------------------------------------------------------------------------------
def write_csv(table: pa.Table, path: Path, *, compress: bool = False) -> Path:
    """Canonical column names; the attributes, events and links columns are dropped (CSV has no
    nested values)."""
    buf = io.BytesIO()
    pacsv.write_csv(table.drop_columns(list(S.NESTED_SPAN_COLUMNS)), buf)
    path.write_bytes(maybe_gzip(buf.getvalue(), compress))
    return path


def write_parquet(table: pa.Table, path: Path, *, compress: bool = False) -> Path:
    """Canonical columns, attributes, events and links included."""
    buf = io.BytesIO()
    pq.write_table(table, buf)
    path.write_bytes(maybe_gzip(buf.getvalue(), compress))
    return path


def write(fmt: str, table: pa.Table, path: Path, *, compress: bool = False) -> Path:
    """Write ``table`` in ``fmt`` (one of :data:`FORMATS`) to ``path``."""
    if fmt == "otlp-json":
        return write_otlp_json(table, path, compress=compress)
    if fmt == "otlp-json-body":
        return write_otlp_json(table, path, body=True, compress=compress)
    if fmt == "otlp-proto":
        return write_otlp_proto(table, path, compress=compress)
    if fmt == "otlp-proto-prefixed":
        return write_otlp_proto(table, path, prefixed=True, compress=compress)
    if fmt == "jaeger-json":
        return write_jaeger_json(table, path, compress=compress)
    if fmt == "zipkin-json":
        return write_zipkin_json(table, path, compress=compress)
    if fmt == "csv":
        return write_csv(table, path, compress=compress)
    if fmt == "parquet":
        return write_parquet(table, path, compress=compress)
    raise ValueError(f"unknown format {fmt!r}")


def b64(hex_id: str) -> str:
    """An id as base64 (the plain protobuf JSON mapping), for fallback tests."""
    return base64.b64encode(bytes.fromhex(hex_id)).decode()
