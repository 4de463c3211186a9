"""Test-only writers: a canonical log-record table (:data:`tracesleuth.schema.LOG_SCHEMA`) written
in each log format, the way the real producers write it.

OTLP groups records by resource (``service.name`` and the instance as ``k8s.pod.name``); the
JSON-lines writer writes the record's fields under the names a structured logger uses (``time``
as RFC 3339 with nanoseconds, ``level``, ``msg``, ``trace_id``, ``span_id``, ``service.name``,
``k8s.pod.name``) and its attributes as members; the Nezha CSV writer writes the container
runtime's JSON line with the body, and the attributes it has columns for.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pyarrow as pa
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracesleuth import schema as S
from writers import attribute_value, proto_any_value

LOG_FORMATS = ("otlp-logs-json", "otlp-logs-json-body", "otlp-logs-proto", "otlp-logs-proto-prefixed",
               "json-lines-logs", "nezha-log-csv")
#: Attributes the Nezha log CSV has columns for (Node, Container, and the stream in ``Log``).
NEZHA_ATTRIBUTES = ("host.ip", "k8s.container.name", "log.iostream")
#: Resource attributes the OTLP writers use for service and instance.
RESOURCE_KEYS = (S.ATTR_SERVICE_NAME, S.ATTR_K8S_POD_NAME)


def rfc3339(ns: int) -> str:
    moment = datetime.fromtimestamp(ns // 1_000_000_000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % 1_000_000_000:09d}Z"


def _attrs(row: dict) -> list[tuple[str, object]]:
    return [(a["key"], attribute_value(a)) for a in row[S.ATTRIBUTES] or []]


def otlp_logs_request(rows: list[dict]) -> ExportLogsServiceRequest:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r[S.SERVICE], r[S.INSTANCE])].append(r)
    req = ExportLogsServiceRequest()
    for (service, instance), members in groups.items():
        rl = req.resource_logs.add()
        rl.resource.attributes.add(key=S.ATTR_SERVICE_NAME, value=AnyValue(string_value=service))
        if instance is not None:
            rl.resource.attributes.add(key=S.ATTR_K8S_POD_NAME, value=AnyValue(string_value=instance))
        scope = rl.scope_logs.add()
        scope.scope.name = "tests"
        for r in members:
            lr = scope.log_records.add(time_unix_nano=r[S.TIME_NS], observed_time_unix_nano=r[S.TIME_NS] + 1000,
                                       severity_number=r[S.SEVERITY_NUMBER], severity_text=r[S.SEVERITY_TEXT] or "")
            if r[S.BODY] is not None:
                lr.body.string_value = r[S.BODY]
            if r[S.TRACE_ID]:
                lr.trace_id = bytes.fromhex(r[S.TRACE_ID])
            if r[S.SPAN_ID]:
                lr.span_id = bytes.fromhex(r[S.SPAN_ID])
            for k, v in _attrs(r):
                lr.attributes.add(key=k, value=proto_any_value(v))
    return req


def _otlp_json(req: ExportLogsServiceRequest) -> dict:
    """The OTLP JSON encoding: as protobuf's JSON mapping, but ids in hexadecimal."""
    doc = MessageToDict(req)
    for rl, src in zip(doc.get("resourceLogs", []), req.resource_logs):
        for sl, ssrc in zip(rl.get("scopeLogs", []), src.scope_logs):
            for lr, lsrc in zip(sl.get("logRecords", []), ssrc.log_records):
                if lsrc.trace_id:
                    lr["traceId"] = lsrc.trace_id.hex()
                if lsrc.span_id:
                    lr["spanId"] = lsrc.span_id.hex()
    return doc


def json_line(row: dict) -> dict:
    out = {"time": rfc3339(row[S.TIME_NS]), "msg": row[S.BODY], "service.name": row[S.SERVICE]}
    if row[S.SEVERITY_TEXT] is not None:
        out["level"] = row[S.SEVERITY_TEXT]
    if row[S.TRACE_ID]:
        out["trace_id"] = row[S.TRACE_ID]
    if row[S.SPAN_ID]:
        out["span_id"] = row[S.SPAN_ID]
    if row[S.INSTANCE] is not None:
        out[S.ATTR_K8S_POD_NAME] = row[S.INSTANCE]
    out.update(_attrs(row))
    return out


def nezha_rows(rows: list[dict]) -> list[list[str]]:
    out = []
    for r in rows:
        attrs = dict(_attrs(r))
        log = {"log": (r[S.BODY] or "") + "\n", "stream": attrs.get("log.iostream", "stdout"),
               "time": rfc3339(r[S.TIME_NS])}
        out.append([rfc3339(r[S.TIME_NS]), str(r[S.TIME_NS]), attrs.get("host.ip", ""), r[S.INSTANCE] or "",
                    attrs.get("k8s.container.name", ""), r[S.TRACE_ID] or "", r[S.SPAN_ID] or "",
                    orjson.dumps(log).decode()])
    return out


def encode(fmt: str, logs: pa.Table) -> bytes:
    """``logs`` in format ``fmt`` (one of :data:`LOG_FORMATS`), as bytes."""
    rows = logs.to_pylist()
    if fmt == "otlp-logs-json":  # the file exporter: one request per line, two records per request
        return b"".join(orjson.dumps(_otlp_json(otlp_logs_request(rows[i:i + 2]))) + b"\n"
                        for i in range(0, len(rows), 2))
    if fmt == "otlp-logs-json-body":
        return orjson.dumps(_otlp_json(otlp_logs_request(rows)), option=orjson.OPT_INDENT_2)
    if fmt == "otlp-logs-proto":
        return otlp_logs_request(rows).SerializeToString()
    if fmt == "otlp-logs-proto-prefixed":
        out = b""
        for i in range(0, len(rows), 3):
            data = otlp_logs_request(rows[i:i + 3]).SerializeToString()
            out += len(data).to_bytes(4, "big") + data
        return out
    if fmt == "json-lines-logs":
        return b"".join(orjson.dumps(json_line(r)) + b"\n" for r in rows)
    if fmt == "nezha-log-csv":
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(["Timestamp", "TimeUnixNano", "Node", "PodName", "Container", "TraceID", "SpanID", "Log"])
        writer.writerows(nezha_rows(rows))
        return text.getvalue().encode()
    raise ValueError(fmt)


def write_logs(fmt: str, logs: pa.Table, path: Path, *, compress: bool = False) -> Path:
    data = encode(fmt, logs)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path
