"""Huge values and malformed times and ids through the collector (in process: Starlette's test
client runs the app's lifespan, so the store, the WAL and the flusher are real): a span over
OpenTelemetry's span limits is stored cut, and the client and the store are told what was kept;
a negative time is a rejected span (partial success); a padded id is a warning with its count."""

from __future__ import annotations

import gzip

import orjson
import pytest
from starlette.testclient import TestClient

from tracesleuth import schema as S
from tracesleuth.collector import create_app
from tracesleuth.io import read_spans

JS = {"Content-Type": "application/json"}
T0 = 1_700_000_000_000_000_000
TID = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture
def store(tmp_path):
    return tmp_path / "spans.store"


def _otlp(spans: list[dict], service: str = "frontend") -> bytes:
    return orjson.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "tests"}, "spans": spans}]}]})


def _span(span_id: str, name: str = "GET /", start: int = T0, end: int = T0 + 1000, attributes=()) -> dict:
    return {"traceId": TID, "spanId": span_id, "name": name, "kind": 2,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(end), "attributes": list(attributes)}


def _rejects(store) -> list[dict]:
    return read_spans(str(store)).rejects.to_pylist()


def test_collector_cuts_the_measured_case_and_says_so(store):
    """Issue 14: a 100,018-character service name and 100,000 attributes on one span."""
    attributes = [{"key": f"k{j}", "value": {"intValue": str(j)}} for j in range(100_000)]
    body = gzip.compress(_otlp([_span("b7ad6b7169203331", "n" * 5000, attributes=attributes)], "s" * 100_018))
    with TestClient(create_app(store)) as client:
        r = client.post("/v1/traces", content=body, headers={**JS, "Content-Encoding": "gzip"})
        assert r.status_code == 200
        partial = r.json()["partialSuccess"]  # nothing rejected, but the client is told what was cut
        assert partial.get("rejectedSpans", "0") == "0"
        message = partial["errorMessage"]
        assert message.startswith("all 1 span(s) accepted, ") and "service name cut to its first 256" in message
        stats = client.get("/stats").json()
    assert (stats["spans"]["received"], stats["spans"]["acknowledged"], stats["spans"]["rejected"]) == (1, 1, 0)
    (row,) = read_spans(str(store)).spans.to_pylist()
    assert (len(row[S.SERVICE]), len(row[S.OPERATION]), len(row[S.ATTRIBUTES])) == (256, 1024, 128)
    cuts = {r["field"]: r for r in _rejects(store)}
    assert {f: (r["spans"], r["reason"]) for f, r in cuts.items() if f in (S.SERVICE, S.OPERATION, S.ATTRIBUTES)} == {
        S.SERVICE: (0, "service name cut to its first 256 characters"),
        S.OPERATION: (0, "operation name cut to its first 1024 characters"),
        S.ATTRIBUTES: (0, "attribute list cut to its first 128 attributes")}
    assert cuts[S.SERVICE]["excerpt"].startswith("100018 characters: sss")
    assert cuts[S.ATTRIBUTES]["excerpt"] == "100001 attributes"


def test_collector_rejects_negative_times_and_reports_padded_ids(store):
    body = _otlp([_span("b7ad6b7169203331"), _span("b7ad6b7169203332", start=-1, end=5),
                  {**_span("b7ad6b7169203333"), "parentSpanId": "0331"}])
    with TestClient(create_app(store)) as client:
        r = client.post("/v1/traces", content=body, headers=JS)
        assert r.status_code == 200
        partial = r.json()["partialSuccess"]
        assert partial["rejectedSpans"] == "1" and "negative timestamp" in partial["errorMessage"]
        stats = client.get("/stats").json()
    assert (stats["spans"]["received"], stats["spans"]["acknowledged"], stats["spans"]["rejected"]) == (3, 2, 1)
    spans = read_spans(str(store)).spans.to_pylist()
    assert sorted(s[S.SPAN_ID] for s in spans) == ["b7ad6b7169203331", "b7ad6b7169203333"]
    assert [s[S.PARENT_SPAN_ID] for s in spans if s[S.SPAN_ID].endswith("3")] == ["0000000000000331"]
    rows = {(r["field"], r["spans"]): r["reason"] for r in _rejects(store)}
    assert rows[(S.START_NS, 1)].startswith("negative timestamp")
    assert rows[(S.PARENT_SPAN_ID, 0)] == "1 parent span id(s) shorter than 16 hexadecimal digits left-padded with zeros"


def test_zipkin_post_is_limited_like_a_file(store):
    spans = [{"traceId": "463ac35c9f6413ad", "id": "a2fb4a1d1a96d312", "name": "get", "timestamp": 1_700_000_000_000_000,
              "duration": 1200, "kind": "SERVER", "localEndpoint": {"serviceName": "api" * 100},
              "tags": {f"t{j:03d}": "v" * (5000 if j == 0 else 1) for j in range(300)}},
             {"traceId": "463ac35c9f6413ad", "id": "a2fb4a1d1a96d313", "name": "get", "timestamp": -5,
              "duration": 1, "localEndpoint": {"serviceName": "api"}}]
    with TestClient(create_app(store)) as client:
        assert client.post("/api/v2/spans", content=orjson.dumps(spans), headers=JS).status_code == 202
        stats = client.get("/stats").json()
    assert (stats["spans"]["received"], stats["spans"]["acknowledged"], stats["spans"]["rejected"]) == (2, 1, 1)
    (row,) = read_spans(str(store)).spans.to_pylist()
    assert row[S.SERVICE] == ("api" * 100)[:256] and len(row[S.ATTRIBUTES]) == 128
    assert max(len(a["str"] or "") for a in row[S.ATTRIBUTES]) == 4096
    reasons = {r["reason"] for r in _rejects(store)}
    assert {"service name cut to its first 256 characters", "attribute list cut to its first 128 attributes",
            "attribute value cut to its first 4096 characters"} <= reasons
    assert any(r.startswith("negative timestamp") for r in reasons)


def test_configured_limits_apply_to_the_collector_and_the_readers(store, tmp_path, monkeypatch):
    """Limits given (or set in the SDK's environment variables) replace the defaults everywhere:
    the collector, ``read_spans`` of trace files and an attribute value cut while it is read."""
    from tracesleuth.io import SpanLimits

    attributes = [{"key": f"k{j}", "value": {"stringValue": "v" * 50}} for j in range(10)]
    body = _otlp([_span("b7ad6b7169203331", attributes=attributes)])
    limits = SpanLimits(max_attributes=4, max_attribute_value_chars=20)
    with TestClient(create_app(store, span_limits=limits)) as client:
        assert client.post("/v1/traces", content=body, headers=JS).status_code == 200
    (row,) = read_spans(str(store)).spans.to_pylist()
    assert [(a["key"], len(a["str"])) for a in row[S.ATTRIBUTES]] == [(f"k{j}", 20) for j in range(4)]

    path = tmp_path / "spans.json"
    path.write_bytes(body)
    assert len(read_spans(path, limits=limits).spans.to_pylist()[0][S.ATTRIBUTES]) == 4
    assert sum(a["key"].startswith("k") for a in read_spans(path).spans.to_pylist()[0][S.ATTRIBUTES]) == 10
    monkeypatch.setenv("OTEL_ATTRIBUTE_COUNT_LIMIT", "3")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "2")  # the span-specific variable wins
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "")  # empty: unset
    result = read_spans(path)
    assert [len(a["str"]) for a in result.spans.to_pylist()[0][S.ATTRIBUTES]] == [50, 50]
    assert "attribute list cut to its first 2 attributes" in {r["reason"] for r in result.rejects.to_pylist()}


@pytest.mark.parametrize("value", ["0", "-3", "ten", "2.5"])
def test_a_bad_limit_variable_is_named(monkeypatch, value):
    from tracesleuth.errors import ParameterError
    from tracesleuth.io import SpanLimits

    monkeypatch.setenv("OTEL_SPAN_LINK_COUNT_LIMIT", value)
    with pytest.raises(ParameterError, match=f"OTEL_SPAN_LINK_COUNT_LIMIT must be a positive integer.*{value!r}"):
        SpanLimits.from_environment()
