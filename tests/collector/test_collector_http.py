"""The receiver's HTTP contract, in process (Starlette's test client runs the app's lifespan, so
the store, the WAL and the flusher are real): OTLP protobuf and JSON, Zipkin, partial success,
every refusal (400/401/404/405/413/415/429) and its counter in /stats."""

from __future__ import annotations

import gzip
import zlib

import orjson
import pyarrow.compute as pc
import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from receiver_support import json_request, json_span, proto_request
from starlette.testclient import TestClient

from tracesleuth import schema as S
from tracesleuth.collector import create_app, serve
from tracesleuth.errors import ParameterError
from tracesleuth.io import read_spans
from tracesleuth.io.store import SpanStore

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}
T0 = 1_700_000_000_000_000_000


@pytest.fixture
def store(tmp_path):
    return tmp_path / "spans.store"


def _client(store, **settings) -> TestClient:
    return TestClient(create_app(store, **settings), raise_server_exceptions=True)


def _ids(table) -> set:
    return set(zip(table.column(S.TRACE_ID).to_pylist(), table.column(S.SPAN_ID).to_pylist()))


# -- accepted uploads ------------------------------------------------------------------------
def test_otlp_protobuf_gzip_stored_with_its_fields(store):
    body, valid = proto_request(64, seed=1)
    with _client(store) as client:
        r = client.post("/v1/traces", content=gzip.compress(body), headers={**PB, "Content-Encoding": "gzip"})
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/x-protobuf"
        assert not ExportTraceServiceResponse.FromString(r.content).HasField("partial_success")
    spans = read_spans(str(store)).spans  # the app's shutdown converted every segment into parts
    assert _ids(spans) == set(valid)
    row = spans.filter(pc.is_null(spans.column(S.PARENT_SPAN_ID))).slice(0, 1).to_pylist()[0]
    assert (row[S.SERVICE], row[S.OPERATION], row[S.KIND], row[S.INSTANCE]) == ("checkout", "GET /cart", "server",
                                                                               "host-1")
    assert row[S.END_NS] - row[S.START_NS] == 50_000
    assert {"key": "seq", "str": None, "int": 0, "float": None, "bool": None} in row[S.ATTRIBUTES]
    assert not list((store / "wal").glob("seg-*.wal"))


def test_otlp_protobuf_request_not_starting_with_resource_spans(store):
    """A valid request may carry another field (unknown to this version) before resource_spans;
    every span is still read (the reader tells a raw request by its first byte)."""
    body, valid = proto_request(16, seed=13)
    with _client(store) as client:
        r = client.post("/v1/traces", content=b"\x50\x01" + body, headers=PB)  # field 10, varint 1, first
        assert r.status_code == 200 and r.content == b""
    assert _ids(read_spans(str(store)).spans) == set(valid)


def test_otlp_protobuf_deflate_is_accepted(store):
    """``deflate`` as the SDK exporter sends it (zlib format), and as raw deflate."""
    body, valid = proto_request(16, seed=2)
    body2, valid2 = proto_request(16, seed=12)
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    with _client(store) as client:
        r = client.post("/v1/traces", content=zlib.compress(body), headers={**PB, "Content-Encoding": "deflate"})
        assert r.status_code == 200
        r = client.post("/v1/traces", content=raw.compress(body2) + raw.flush(),
                        headers={**PB, "Content-Encoding": "deflate"})
        assert r.status_code == 200
    assert _ids(read_spans(str(store)).spans) == set(valid) | set(valid2)


def test_otlp_json_body(store):
    tid = "5B8EFFF798038103D269B633813FC60C"
    body = json_request([json_span(tid, "EEE19B7EC3C1B173", "GET /", T0, T0 + 2_000_000),
                         json_span(tid, "EEE19B7EC3C1B174", "SELECT", T0 + 10, T0 + 900, parent="EEE19B7EC3C1B173",
                                   attributes={"db.system": "postgresql", "db.rows": 3})])
    with _client(store) as client:
        r = client.post("/v1/traces", content=body, headers={"Content-Type": "application/json; charset=utf-8"})
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        assert r.json() == {}
    spans = read_spans(str(store)).spans.sort_by(S.START_NS).to_pylist()
    assert [s[S.SPAN_ID] for s in spans] == ["eee19b7ec3c1b173", "eee19b7ec3c1b174"]
    assert spans[1][S.PARENT_SPAN_ID] == "eee19b7ec3c1b173" and spans[1][S.SERVICE] == "frontend"
    assert spans[0][S.TRACE_ID] == tid.lower()


def test_otlp_json_partial_success(store):
    tid = "0af7651916cd43dd8448eb211c80319c"
    body = json_request([json_span(tid, "b7ad6b7169203331", "ok", T0, T0 + 5),
                         json_span("not-hex", "b7ad6b7169203332", "bad id", T0, T0 + 5),
                         json_span(tid, "b7ad6b7169203333", "backwards", T0 + 5, T0)])
    with _client(store) as client:
        r = client.post("/v1/traces", content=body, headers=JS)
        assert r.status_code == 200
        partial = r.json()["partialSuccess"]
        assert partial["rejectedSpans"] == "2"
        assert "2 of 3 span(s) rejected" in partial["errorMessage"]
        assert "trace_id" in partial["errorMessage"] and "negative duration" in partial["errorMessage"]
        stats = client.get("/stats").json()
    spans = stats["spans"]
    assert (spans["received"], spans["acknowledged"], spans["rejected"]) == (3, 1, 2)
    assert {r["reason"] for r in stats["rejections"]} >= {"negative duration (end before start)"}
    result = read_spans(str(store))
    assert result.spans.column(S.SPAN_ID).to_pylist() == ["b7ad6b7169203331"]
    assert result.spans_rejected == 2
    assert all(src.startswith("collect otlp #1 from ") for src in result.rejects.column("source").to_pylist())


def test_otlp_protobuf_partial_success(store):
    body, valid = proto_request(24, seed=3, bad={3: "short_trace_id", 10: "end_before_start"})
    with _client(store) as client:
        r = client.post("/v1/traces", content=body, headers=PB)
        assert r.status_code == 200
        resp = ExportTraceServiceResponse.FromString(r.content)
        assert resp.partial_success.rejected_spans == 2
        assert "2 of 24 span(s) rejected" in resp.partial_success.error_message
    assert _ids(read_spans(str(store)).spans) == set(valid)


def test_warnings_only_partial_success_rejects_nothing(store):
    """OTLP spec: a warning is a partial_success with rejected_spans 0 and a message."""
    tid = "0af7651916cd43dd8448eb211c80319c"
    body = json_request([json_span(tid, "b7ad6b7169203331", "big", T0, T0 + 5, attributes={"blob": "x" * 5000})])
    with _client(store) as client:
        r = client.post("/v1/traces", content=body, headers=JS)
        partial = r.json()["partialSuccess"]
        assert r.status_code == 200 and partial["rejectedSpans"] == "0"
        assert "all 1 span(s) accepted, 1 warning(s)" in partial["errorMessage"]
    assert read_spans(str(store)).spans.num_rows == 1


def test_zipkin_v2_body_is_accepted_like_the_file_reader_reads_it(store, shared_data):
    path = shared_data / "zipkin-lens" / "yelp.json"
    with _client(store) as client:
        r = client.post("/api/v2/spans", content=path.read_bytes(), headers=JS)
        assert r.status_code == 202 and r.content == b""
    received = S.plain_spans(read_spans(str(store)).spans)
    expected = read_spans(str(path)).spans
    assert received.num_rows == expected.num_rows == len(orjson.loads(path.read_bytes()))
    key = [(S.TRACE_ID, "ascending"), (S.SPAN_ID, "ascending"), (S.START_NS, "ascending"), (S.KIND, "ascending")]
    assert received.sort_by(key).equals(expected.sort_by(key))


def test_zipkin_bad_spans_are_counted_and_the_rest_accepted(store):
    spans = [{"traceId": "463ac35c9f6413ad", "id": "a2fb4a1d1a96d312", "name": "get", "timestamp": 1_700_000_000_000_000,
              "duration": 1200, "kind": "SERVER", "localEndpoint": {"serviceName": "api"}},
             {"traceId": "463ac35c9f6413ad", "id": "a2fb4a1d1a96d313", "parentId": "a2fb4a1d1a96d312",
              "name": "fragment without timing", "localEndpoint": {"serviceName": "api"}}]
    with _client(store) as client:
        r = client.post("/api/v2/spans", content=gzip.compress(orjson.dumps(spans)),
                        headers={**JS, "Content-Encoding": "gzip"})
        assert r.status_code == 202
        stats = client.get("/stats").json()
    assert (stats["spans"]["received"], stats["spans"]["acknowledged"], stats["spans"]["rejected"]) == (2, 1, 1)
    assert stats["requests"]["zipkin"] == 1 and stats["bytes"]["decompressed"] == len(orjson.dumps(spans))
    result = read_spans(str(store))
    assert result.spans.column(S.SPAN_ID).to_pylist() == ["a2fb4a1d1a96d312"]
    assert result.rejects.column("field").to_pylist() == ["timestamp"]


def test_empty_request_is_a_success(store):
    with _client(store) as client:
        assert client.post("/v1/traces", content=b"", headers=PB).status_code == 200
        assert client.post("/v1/traces", content=b"{}", headers=JS).json() == {}
        assert client.post("/api/v2/spans", content=b"[]", headers=JS).status_code == 202
    assert SpanStore(store).span_files() == []


# -- refusals -------------------------------------------------------------------------------
@pytest.mark.parametrize("path, headers, body, needle", [
    ("/v1/traces", PB, b"\x0a\xff\xff\xff\x0f garbage", "not a protobuf-encoded OTLP ExportTraceServiceRequest"),
    ("/v1/traces", JS, b'{"resourceSpans": [', "malformed JSON"),
    ("/v1/traces", JS, b"[]", "Zipkin v2 span lists go to POST /api/v2/spans"),
    ("/v1/traces", JS, b'{"resourceSpans": 3}', "resourceSpans must be a list"),
    ("/v1/traces", {**PB, "Content-Encoding": "gzip"}, b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 20, "corrupt gzip data"),
    ("/v1/traces", {**PB, "Content-Encoding": "gzip"}, gzip.compress(b"\x0a\x00" * 100, mtime=0)[:-12], "cut short"),
    ("/api/v2/spans", JS, b'{"resourceSpans": []}', "OTLP JSON goes to POST /v1/traces"),
    ("/api/v2/spans", JS, b"not json", "malformed JSON"),
])
def test_malformed_bodies_are_400_and_store_nothing(store, path, headers, body, needle):
    with _client(store) as client:
        r = client.post(path, content=body, headers=headers)
        assert r.status_code == 400
        assert needle in _error_message(r)
        assert client.get("/stats").json()["errors"]["bad_request"] == 1
        assert client.get("/healthz").status_code == 200  # still serving
    assert SpanStore(store).span_files() == []


def _error_message(r) -> str:
    """The message of an error answer: a google.rpc.Status in the request's encoding (OTLP spec,
    "Failures"), or text for the other routes."""
    ctype = r.headers["content-type"]
    if ctype == "application/x-protobuf":
        return Status.FromString(r.content).message
    if ctype == "application/json":
        return r.json()["message"]
    return r.text


def test_unknown_route_404_and_wrong_method_405(store):
    with _client(store) as client:
        r = client.post("/v1/metrics", content=b"", headers=PB)
        assert r.status_code == 404 and "POST /v1/traces and POST /v1/logs" in r.text
        r = client.get("/v1/traces")
        assert r.status_code == 405 and r.headers["allow"] == "POST"
        errors = client.get("/stats").json()["errors"]
    assert errors == {"not_found": 1, "method_not_allowed": 1}


def test_oversized_bodies_are_413(store):
    limit = 4096
    body, _ = proto_request(64, seed=4)
    assert len(body) > limit
    bomb = gzip.compress(b"\x0a\x00" * 100_000)  # 200 kB once decompressed, a few hundred bytes sent
    assert len(bomb) < limit
    with _client(store, max_body_bytes=limit) as client:
        r = client.post("/v1/traces", content=body, headers=PB)
        assert r.status_code == 413 and "exceeds the limit of 4,096 bytes" in _error_message(r)
        r = client.post("/v1/traces", content=bomb, headers={**PB, "Content-Encoding": "gzip"})
        assert r.status_code == 413 and "decompresses to more than" in _error_message(r)
        small, valid = proto_request(4, seed=5)
        assert client.post("/v1/traces", content=small, headers=PB).status_code == 200
        stats = client.get("/stats").json()
    assert stats["errors"] == {"payload_too_large": 2}
    assert _ids(read_spans(str(store)).spans) == set(valid)


def test_unsupported_media_is_415(store):
    with _client(store) as client:
        r = client.post("/v1/traces", content=b"{}", headers={"Content-Type": "text/plain"})
        assert r.status_code == 415 and "'text/plain' is not accepted" in _error_message(r)
        r = client.post("/v1/traces", content=b"{}", headers={**JS, "Content-Encoding": "br"})
        assert r.status_code == 415 and "Content-Encoding 'br'" in _error_message(r)
        r = client.post("/api/v2/spans", content=b"\x0a", headers=PB)
        assert r.status_code == 415
        assert client.get("/stats").json()["errors"] == {"unsupported_media_type": 3}


def test_bearer_token(store):
    body, valid = proto_request(8, seed=6)
    with _client(store, token="s3cret") as client:
        r = client.post("/v1/traces", content=body, headers=PB)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        assert "bearer token" in _error_message(r)
        assert client.post("/v1/traces", content=body, headers={**PB, "Authorization": "Bearer wrong"}).status_code == 401
        assert client.post("/api/v2/spans", content=b"[]", headers=JS).status_code == 401
        assert client.get("/stats").status_code == 401
        assert client.get("/healthz").status_code == 200
        assert client.post("/v1/traces", content=body, headers={**PB, "Authorization": "Bearer s3cret"}).status_code == 200
        stats = client.get("/stats", headers={"Authorization": "bearer s3cret"}).json()
    assert stats["errors"] == {"unauthorized": 4}
    assert _ids(read_spans(str(store)).spans) == set(valid)


def test_wal_backlog_is_429_with_retry_after(store):
    """Spans arriving faster than the flusher stores them: once the unconverted log reaches
    max_wal_bytes, uploads are refused with 429 + Retry-After (retryable per the OTLP spec)
    until the flusher catches up."""
    body, valid = proto_request(32, seed=7)
    with _client(store, max_wal_bytes=1, flush_interval_seconds=3600, retry_after_seconds=2) as client:
        assert client.post("/v1/traces", content=body, headers=PB).status_code == 200
        r = client.post("/v1/traces", content=proto_request(32, seed=8)[0], headers=PB)
        assert r.status_code == 429 and r.headers["retry-after"] == "2"
        assert "faster than they are written" in _error_message(r)
        app_collector = client.app.state.collector
        assert app_collector.flusher.flush()  # the flusher catches up
        body9, valid9 = proto_request(32, seed=9)
        assert client.post("/v1/traces", content=body9, headers=PB).status_code == 200
        stats = client.get("/stats").json()
    assert stats["errors"] == {"too_many_requests": 1} and stats["throttled"] == {"wal_backlog": 1}
    assert _ids(read_spans(str(store)).spans) == set(valid) | set(valid9)


def test_settings_are_checked(store):
    with pytest.raises(ParameterError, match=r"The 'max_body_bytes' parameter of the collector must be an int in the "
                                             r"range \[1, inf\)\. Got 0 instead\."):
        create_app(store, max_body_bytes=0)
    with pytest.raises(ParameterError, match="'flush_interval_seconds'"):
        create_app(store, flush_interval_seconds=float("nan"))
    with pytest.raises(ParameterError, match="'token'"):
        create_app(store, token="has space")
    with pytest.raises(ParameterError, match=r"The 'port' parameter of serve must be an int in the range \[0, 65535\]"):
        serve(store, port=70000)
    with pytest.raises(ParameterError, match="'log_level'"):
        serve(store, port=0, log_level="loud")
    assert not store.exists()


def test_spans_that_cannot_be_made_durable_are_503_retryable(store):
    """When the write-ahead log cannot take a request (here: already closed), the client is told
    to retry (503 + Retry-After), never 200."""
    body, _ = proto_request(8, seed=14)
    with _client(store) as client:
        client.app.state.collector.wal.close()
        r = client.post("/v1/traces", content=body, headers=PB)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert "could not be made durable" in _error_message(r)
        stats = client.get("/stats").json()
    assert stats["errors"] == {"wal_unavailable": 1} and stats["spans"]["acknowledged"] == 0
    assert SpanStore(store).span_files() == []
