"""Field mapping details of each format that the shared contract trace does not exercise."""

from __future__ import annotations

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

from test_contract import comparable, contract_trace
from tracesleuth.io import read_spans
from writers import write_otlp_json

TID, SID, PID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "53995c3f42cd8ad8"


def attrs_of(row) -> dict:
    return {a["key"]: next((a[f] for f in ("str", "int", "float", "bool") if a[f] is not None), None)
            for a in row["attributes"]}


def otlp_doc(span_extra=None, resource_attrs=None, span_attrs=None) -> dict:
    span = {"traceId": TID, "spanId": SID, "name": "op", "kind": 2, "startTimeUnixNano": "1000",
            "endTimeUnixNano": "2000", "attributes": span_attrs or []}
    span.update(span_extra or {})
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}, *(resource_attrs or [])]},
        "scopeSpans": [{"spans": [span]}]}]}


def read_one(tmp_path, data: bytes, name="one.json"):
    path = tmp_path / name
    path.write_bytes(data)
    result = read_spans(path)
    assert result.n_spans == 1, result.rejects.to_pylist()
    return result.spans.to_pylist()[0], result


def test_otlp_json_integer_times_and_enum_names(tmp_path):
    expected = contract_trace()
    path = write_otlp_json(expected, tmp_path / "ints.json", int_times=True)
    text = path.read_bytes()
    for code, name in ((2, "SPAN_KIND_SERVER"), (3, "SPAN_KIND_CLIENT"), (4, "SPAN_KIND_PRODUCER")):
        text = text.replace(b'"kind":%d' % code, b'"kind":"%s"' % name.encode())
    text = text.replace(b'"status":{"code":2}', b'"status":{"code":"STATUS_CODE_ERROR"}')
    path.write_bytes(text)
    result = read_spans(path)
    assert result.spans_rejected == 0
    assert comparable(result.spans, "otlp-json") == comparable(expected, "otlp-json")


def test_structured_attribute_values_are_json_text_in_json_and_protobuf(tmp_path):
    json_attrs = [
        {"key": "list", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"},
                                                            {"doubleValue": "NaN"}]}}},
        {"key": "map", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": True}}]}}},
        {"key": "raw", "value": {"bytesValue": "AAEC"}},
        {"key": "empty", "value": {}},
        {"key": "inf", "value": {"doubleValue": "-Infinity"}},
    ]
    row, _ = read_one(tmp_path, orjson.dumps(otlp_doc(span_attrs=json_attrs)))
    got = attrs_of(row)
    assert got["list"] == '["a",2,null]'  # NaN has no JSON text: null
    assert got["map"] == '{"k":true}' and got["raw"] == "AAEC" and got["inf"] == float("-inf")
    assert "empty" not in got
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="svc")))
    span = rs.scope_spans.add().spans.add(trace_id=bytes.fromhex(TID), span_id=bytes.fromhex(SID), name="op",
                                          start_time_unix_nano=1000, end_time_unix_nano=2000)
    span.attributes.extend([
        KeyValue(key="list", value=AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="a"),
                                                                          AnyValue(int_value=2)]))),
        KeyValue(key="map", value=AnyValue(kvlist_value=KeyValueList(values=[
            KeyValue(key="k", value=AnyValue(bool_value=True))]))),
        KeyValue(key="raw", value=AnyValue(bytes_value=b"\x00\x01\x02")),
    ])
    row, _ = read_one(tmp_path, request.SerializeToString(), "one.bin")
    assert attrs_of(row) == {"list": '["a",2]', "map": '{"k":true}', "raw": "AAEC", "service.name": "svc"}


def test_otlp_resource_attributes_instance_clash_and_links(tmp_path):
    resource = [{"key": "host.name", "value": {"stringValue": "node-1"}},
                {"key": "k8s.pod.name", "value": {"stringValue": "svc-7d9f8-x2k4q"}},
                {"key": "team", "value": {"stringValue": "resource"}}]
    span_attrs = [{"key": "team", "value": {"stringValue": "span"}}]
    links = {"links": [{"traceId": TID, "spanId": PID}], "parentSpanId": ""}
    row, _ = read_one(tmp_path, orjson.dumps(otlp_doc(links, resource, span_attrs)))
    assert row["instance"] == "svc-7d9f8-x2k4q"  # k8s.pod.name is preferred to host.name
    assert attrs_of(row) == {"team": "span", "service.name": "svc", "host.name": "node-1",
                             "k8s.pod.name": "svc-7d9f8-x2k4q"}
    assert row["parent_span_id"] is None  # a link is not a parent
    assert row["kind"] == "server" and row["start_ns"] == 1000 and row["end_ns"] == 2000


def test_jaeger_instance_tags_typed_tags_and_status(tmp_path):
    doc = {"data": [{"traceID": TID, "processes": {
        "p1": {"serviceName": "svc", "tags": [{"key": "ip", "type": "string", "value": "10.1.1.1"},
                                             {"key": "hostname", "type": "string", "value": "host-1"},
                                             {"key": "jaeger.version", "type": "string", "value": "Go-2.30"}]}},
        "spans": [{"traceID": TID, "spanID": SID, "operationName": "op", "references": [],
                   "startTime": 5, "duration": 7, "processID": "p1", "tags": [
                       {"key": "n", "type": "int64", "value": 3}, {"key": "f", "type": "float64", "value": 2},
                       {"key": "b", "type": "bool", "value": "true"}, {"key": "bin", "type": "binary", "value": "AAEC"},
                       {"key": "span.kind", "type": "string", "value": "producer"},
                       {"key": "error", "type": "bool", "value": True},
                       {"key": "hostname", "type": "string", "value": "span-wins"}]}]}]}
    row, _ = read_one(tmp_path, orjson.dumps(doc))
    assert row["instance"] == "host-1" and row["service"] == "svc"
    assert row["kind"] == "producer" and row["status"] == "error"
    assert row["start_ns"] == 5000 and row["end_ns"] == 12000  # microseconds in, nanoseconds out
    assert attrs_of(row) == {"n": 3, "f": 2.0, "b": True, "bin": "AAEC", "hostname": "span-wins",
                             "ip": "10.1.1.1", "jaeger.version": "Go-2.30"}


def test_zipkin_endpoints_tags_and_status(tmp_path):
    span = {"traceId": TID[16:], "id": SID, "name": "get", "timestamp": 10, "duration": 3, "kind": "CLIENT",
            "localEndpoint": {"serviceName": "svc", "ipv6": "::1", "port": 8080},
            "remoteEndpoint": {"serviceName": "db"},
            "tags": {"otel.status_code": "ERROR", "http.status_code": "500"}, "shared": False}
    row, _ = read_one(tmp_path, orjson.dumps([span]))
    assert row["trace_id"] == "0" * 16 + TID[16:] and row["instance"] == "[::1]:8080"
    assert row["status"] == "error" and row["kind"] == "client"
    assert attrs_of(row) == {"http.status_code": "500", "peer.service": "db"}
    assert (row["start_ns"], row["end_ns"]) == (10_000, 13_000)
