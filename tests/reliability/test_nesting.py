"""Deep nesting, per format and in the collector: the record nested beyond the limit is rejected
with its depth and byte offset, the others are read, nothing raises, and memory stays linear in
the input (measured in a subprocess, under an address-space limit, by its peak resident size)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from tracesleuth.io import MAX_DEPTH, RejectLog, iter_span_batches
from tracesleuth.io._jsondoc import NESTED_TOO_DEEP, DepthScanner, cut_deep_records, max_depth

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collector"))

T0 = 1_700_000_000_000_000_000


# -- documents ---------------------------------------------------------------------------------
def _deep_array(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _otlp_rs(i: int, extra: str = "") -> str:
    span = {"traceId": f"{i + 1:032x}", "spanId": f"{i + 1:016x}", "name": "op", "kind": 2,
            "startTimeUnixNano": str(T0), "endTimeUnixNano": str(T0 + 1000)}
    rs = json.dumps({"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                     "scopeSpans": [{"spans": [span]}]})
    return rs[:-1] + (f',"x":{extra}' if extra else "") + "}"


def _deep_any_value(levels: int) -> str:
    return '{"arrayValue":{"values":[' * levels + '{"stringValue":"x"}' + "]}}" * levels


def otlp_body(depth: int) -> bytes:
    """An OTLP JSON body (pretty: not one line) whose 2nd resourceSpans element is nested ``depth`` deep."""
    return ('{\n"resourceSpans": [\n' + _otlp_rs(0) + ",\n" + _otlp_rs(1, _deep_array(depth - 4)) + ",\n"
            + _otlp_rs(2) + "\n]\n}\n").encode()


def otlp_lines(depth: int) -> bytes:
    """Collector file-exporter lines; the 2nd holds an attribute value nested ``depth`` deep."""
    good = lambda i: '{"resourceSpans":[' + _otlp_rs(i) + "]}"  # noqa: E731
    deep_rs = _otlp_rs(1).replace('{"stringValue": "svc"}', _deep_any_value(max((depth - 9) // 3, 1)))
    return (good(0) + "\n" + '{"resourceSpans":[' + deep_rs + "]}\n" + good(2) + "\n").encode()


def _zipkin_span(i: int, tags: str = '{"k":"v"}') -> str:
    return (f'{{"traceId":"{i + 1:032x}","id":"{i + 1:016x}","name":"op","timestamp":1700000000000000,'
            f'"duration":5,"localEndpoint":{{"serviceName":"s"}},"tags":{tags}}}')


def zipkin(depth: int) -> bytes:
    """Zipkin v2 spans; the 2nd has a tag value nested ``depth`` deep."""
    return ("[" + _zipkin_span(0) + "," + _zipkin_span(1, '{"t":' + _deep_object(depth - 3) + "}") + ","
            + _zipkin_span(2) + "]").encode()


def _jaeger_trace(i: int, tags: str = "[]") -> dict | str:
    tid = f"{i + 1:032x}"
    return (f'{{"traceID":"{tid}","spans":[{{"traceID":"{tid}","spanID":"{i + 1:016x}","operationName":"op",'
            f'"references":[],"startTime":1700000000000000,"duration":5,"processID":"p1","tags":{tags}}}],'
            f'"processes":{{"p1":{{"serviceName":"s","tags":[]}}}}}}')


def jaeger(depth: int) -> bytes:
    """A Jaeger document; the 2nd trace's span has a tag value nested ``depth`` deep."""
    deep_tag = '[{"key":"t","type":"string","value":' + _deep_array(depth - 6) + "}]"
    return ('{"data":[' + _jaeger_trace(0) + "," + _jaeger_trace(1, deep_tag) + "," + _jaeger_trace(2)
            + "]}").encode()


DOCUMENTS = {"otlp-json body": otlp_body, "otlp-json lines": otlp_lines, "zipkin-json": zipkin,
             "jaeger-json": jaeger}


def _read(path) -> tuple[list[dict], RejectLog]:
    log = RejectLog()
    return [r for b in iter_span_batches(path, log=log) for r in b.to_pylist()], log


# -- the scanner ---------------------------------------------------------------------------------
def test_depth_ignores_brackets_in_strings_and_escapes():
    doc = b'{"a": "[[[{{", "b": ["\\"]]", [1]], "c": "\\\\"}'
    assert max_depth(doc) == (3, doc.index(b"[1]"))
    whole_positions, whole_depths = DepthScanner().feed(doc)
    for cuts in ([7, 21, 22], [20, 21, 40], [1, 2, 3]):  # pieces end inside strings and escapes
        scanner, got, start = DepthScanner(), [], 0
        for end in cuts + [len(doc)]:
            positions, depths = scanner.feed(doc[start:end])
            got += [(int(p) + start, int(d)) for p, d in zip(positions, depths)]
            start = end
        assert got == list(zip(whole_positions.tolist(), whole_depths.tolist()))


def test_cut_deep_records_keeps_offsets_and_the_other_records():
    doc = b'[{"a":1},' + _deep_array(MAX_DEPTH + 5).encode() + b',{"b":2}]'
    text, cut = cut_deep_records(doc, 2, (b'"a"',))
    assert len(text) == len(doc) and len(cut) == 1
    parsed = orjson.loads(text)
    assert parsed[0] == {"a": 1} and parsed[2] == {"b": 2} and parsed[1] in cut
    assert cut[parsed[1]].depth == MAX_DEPTH + 6 and cut[parsed[1]].offset == doc.index(b"[", 9) + MAX_DEPTH - 1


# -- every reader ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(DOCUMENTS))
@pytest.mark.parametrize("depth", [MAX_DEPTH - 4, MAX_DEPTH + 2, 1_000, 1_030, 100_000])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_deep_records_are_rejected_and_the_others_read(tmp_path, name, depth, gz):
    data = DOCUMENTS[name](depth)
    path = tmp_path / ("doc.json.gz" if gz else "doc.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    spans, log = _read(path)
    ids = sorted(s["span_id"] for s in spans)
    if max_depth(data)[0] <= MAX_DEPTH:
        assert len(ids) == 3 and log.spans_rejected == 0, log.rows
        return
    assert ids == [f"{1:016x}", f"{3:016x}"], log.rows
    deep = [r for r in log.rows if r[3].startswith(NESTED_TOO_DEEP)]
    assert len(deep) == 1 and deep[0][4] == 1 and f"beyond the limit of {MAX_DEPTH}" in deep[0][3], log.rows
    assert log.spans_rejected == 1


def test_a_streamed_document_stops_at_the_deep_record(tmp_path, monkeypatch):
    from tracesleuth.io import _jsondoc

    monkeypatch.setattr(_jsondoc, "MAX_DOCUMENT_BYTES", 256)  # the streaming path
    path = tmp_path / "doc.json"
    path.write_bytes(zipkin(50_000))
    spans, log = _read(path)
    assert [s["span_id"] for s in spans] == [f"{1:016x}"]
    (row,) = [r for r in log.rows if r[3].startswith(NESTED_TOO_DEEP)]
    assert row[4] == 2 and "the rest of the file was not read" in row[3]


def _proto(depth: int) -> bytes:
    """A raw ExportTraceServiceRequest; its 2nd ResourceSpans has an attribute value whose
    ``array_value`` nests ``depth`` times (built as bytes: the library would recurse)."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b, n = n & 0x7F, n >> 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def ld(field: int, payload: bytes) -> bytes:
        return varint(field << 3 | 2) + varint(len(payload)) + payload

    inner, headers = ld(1, b"x"), []
    size = len(inner)
    for _ in range(depth):
        for field in (1, 5):  # ArrayValue.values, AnyValue.array_value
            h = varint(field << 3 | 2) + varint(size)
            size += len(h)
            headers.append(h)
    deep = b"".join(reversed(headers)) + inner

    def rs(value: bytes, i: int) -> bytes:
        span = (ld(1, bytes(15) + b"\x01") + ld(2, bytes(7) + bytes([i + 1])) + ld(5, b"op")
                + b"\x39" + T0.to_bytes(8, "little") + b"\x41" + (T0 + 1000).to_bytes(8, "little"))
        res = ld(1, ld(1, b"service.name") + ld(2, ld(1, b"svc"))) + ld(1, ld(1, b"k") + ld(2, value))
        return ld(1, ld(1, res) + ld(2, ld(2, span)))

    return rs(ld(1, b"v"), 0) + rs(deep, 1) + rs(ld(1, b"v"), 2)


@pytest.mark.parametrize("depth", [10, 60, 100_000])
def test_protobuf_nesting_beyond_its_limit_is_a_clean_reject(tmp_path, depth):
    path = tmp_path / "req.bin"
    path.write_bytes(_proto(depth))
    spans, log = _read(path)
    if depth == 10:
        assert len(spans) == 3 and log.rows == []
        return
    assert sorted(s["span_id"] for s in spans) == [f"{1:016x}", f"{3:016x}"]
    (row,) = log.rows
    assert row[3].startswith(NESTED_TOO_DEEP) and row[4] == 1


# -- the collector -----------------------------------------------------------------------------
@pytest.mark.parametrize("route, ctype, body", [
    ("/v1/traces", "application/json", lambda d: otlp_lines(d).split(b"\n")[1]),
    ("/v1/traces", "application/json", lambda d: otlp_body(d)),
    ("/api/v2/spans", "application/json", zipkin),
    ("/v1/traces", "application/x-protobuf", _proto),
], ids=["otlp-json-line", "otlp-json-body", "zipkin", "otlp-proto"])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 10, 1_000, 100_000])
def test_the_collector_answers_400_with_a_status_and_counts_it(tmp_path, route, ctype, body, depth):
    from google.rpc.status_pb2 import Status

    from tracesleuth.collector import create_app

    with TestClient(create_app(tmp_path / "store"), raise_server_exceptions=True) as client:
        r = client.post(route, content=body(depth), headers={"Content-Type": ctype})
        assert r.status_code == 400, r.text
        if route == "/v1/traces":
            message = (Status.FromString(r.content).message if ctype.endswith("protobuf")
                       else orjson.loads(r.content)["message"])
            assert NESTED_TOO_DEEP in message and orjson.loads(r.content if not ctype.endswith("protobuf")
                                                                else b"{}") is not None
        else:
            assert NESTED_TOO_DEEP in r.text
        stats = client.get("/stats").json()
        assert stats["errors"].get("nesting_too_deep") == 1
        assert stats["responses"]["400"] == 1


# -- memory ------------------------------------------------------------------------------------
_MEASURE = textwrap.dedent("""
    import resource, sys
    limit = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from tracesleuth.io import RejectLog, iter_span_batches
    log = RejectLog()
    n = sum(b.num_rows for b in iter_span_batches(sys.argv[1], log=log))
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
    print(n, log.spans_rejected, hwm * 1024)
""")


@pytest.mark.parametrize("name, size, depth", [
    ("otlp-json body", 64 << 10, 32_000),
    ("otlp-json body", 200 << 10, 100_000),
    ("zipkin-json", 200 << 10, 100_000 // 2),  # '{"a":' is 5 bytes a level
    ("otlp-json lines", 200 << 10, 100_000),
    ("jaeger-json", 200 << 10, 100_000),
])
def test_memory_stays_linear_in_the_input(tmp_path, name, size, depth):
    data = DOCUMENTS[name](depth)
    path = tmp_path / "deep.json"
    path.write_bytes(data)
    budget = 50 * len(data) + (300 << 20)
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(path), str(4 << 30)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    n, rejected, peak = map(int, out.stdout.split())
    assert n == 2 and rejected == 1
    assert peak < budget, f"peak {peak / 2**20:.0f} MB for {len(data)} bytes"
