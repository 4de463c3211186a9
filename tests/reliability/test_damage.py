"""Damaged input: a small file of each format, plain and gzip, cut at many byte offsets.

For every cut: no exception escapes the reader; the spans read plus the spans rejected are the
spans whose records began before the cut (counted, as the readers count spans in bytes they
cannot parse, by the format's once-per-span member name); every record wholly before the cut is
read; a gzip file cut before its end is listed as damaged, with the byte offset in its reject.
The cuts are drawn by hypothesis (seeded: see ``tests/conftest.py``).
"""

from __future__ import annotations

import gzip
import re
import tempfile
import zlib
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracesleuth.io import RejectLog, iter_span_batches

N_RECORDS = 6


def _zipkin_span(i: int) -> dict:
    return {"traceId": f"{i // 2 + 1:032x}", "id": f"{i + 1:016x}", "name": f"op{i}", "kind": "SERVER",
            "timestamp": 1_700_000_000_000_000 + i, "duration": 10 + i,
            "localEndpoint": {"serviceName": f"svc{i % 3}"}, "tags": {"http.method": "GET", "n": str(i)}}


def _otlp_request(i: int) -> dict:
    spans = [{"traceId": f"{i + 1:032x}", "spanId": f"{2 * i + k + 1:016x}", "name": f"op{k}", "kind": 2,
              "startTimeUnixNano": str(1_700_000_000_000_000_000 + k), "endTimeUnixNano": str(1_700_000_000_000_001_000 + k),
              "attributes": [{"key": "http.method", "value": {"stringValue": "GET"}}]} for k in range(2)]
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": f"s{i}"}}]},
                               "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}


def _jaeger_trace(i: int) -> dict:
    tid = f"{i + 1:032x}"
    spans = [{"traceID": tid, "spanID": f"{2 * i + k + 1:016x}", "operationName": f"op{k}",
              "references": [] if k == 0 else [{"refType": "CHILD_OF", "traceID": tid, "spanID": f"{2 * i + 1:016x}"}],
              "startTime": 1_700_000_000_000_000 + k, "duration": 5, "processID": "p1",
              "tags": [{"key": "span.kind", "type": "string", "value": "server"}]} for k in range(2)]
    return {"traceID": tid, "spans": spans, "processes": {"p1": {"serviceName": f"s{i}", "tags": []}}}


def _csv() -> tuple[bytes, list[tuple[int, int, int]]]:
    header = b"trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\n"
    out, ranges = header, []
    for i in range(N_RECORDS):
        line = (f"{i + 1:032x},{i + 1:016x},,svc{i % 3},op{i},{1_700_000_000_000_000_000 + i},"
                f"{1_700_000_000_000_000_500 + i}\n").encode()
        ranges.append((len(out), len(out) + len(line), 1))
        out += line
    return out, ranges


def _json_array(items: list[dict], spans_per: int, pretty: bool = False) -> tuple[bytes, list[tuple[int, int, int]]]:
    """``[a, b, ...]`` and the byte range and span count of each element."""
    out, ranges = b"[", []
    for i, item in enumerate(items):
        if i:
            out += b",\n" if pretty else b","
        encoded = orjson.dumps(item, option=orjson.OPT_INDENT_2 if pretty else 0)
        ranges.append((len(out), len(out) + len(encoded), spans_per))
        out += encoded
    return out + b"]", ranges


def _files() -> dict[str, tuple[bytes, list[tuple[int, int, int]], bytes, str]]:
    """Format -> (bytes, [(start, end, spans) of each record], once-per-span key, span-id field)."""
    zipkin, zr = _json_array([_zipkin_span(i) for i in range(N_RECORDS)], 1)
    jaeger_list, jr = _json_array([_jaeger_trace(i) for i in range(N_RECORDS)], 2)
    jaeger = b'{"data":' + jaeger_list + b"}"
    jr = [(a + 8, b + 8, n) for a, b, n in jr]
    lines, lr = b"", []
    for i in range(N_RECORDS):
        line = orjson.dumps(_otlp_request(i)) + b"\n"
        lr.append((len(lines), len(lines) + len(line), 2))
        lines += line
    body_rs, br = _json_array([_otlp_request(i)["resourceSpans"][0] for i in range(N_RECORDS)], 2, pretty=True)
    body = b'{\n"resourceSpans": ' + body_rs + b"\n}\n"
    br = [(a + 19, b + 19, n) for a, b, n in br]
    csv, cr = _csv()
    return {"zipkin-json": (zipkin, zr, b'"traceId"', "span_id"),
            "jaeger-json": (jaeger, jr, b'"operationName"', "span_id"),
            "otlp-json lines": (lines, lr, b'"spanId"', "span_id"),
            "otlp-json body": (body, br, b'"spanId"', "span_id"),
            "csv": (csv, cr, None, "span_id")}


FILES = _files()


def test_the_files_are_what_the_test_thinks():
    for name, (data, ranges, key, _) in FILES.items():
        spans, log, damaged = _read(data, name)
        assert len(spans) == sum(n for _, _, n in ranges) and log.rows == [] and damaged == [], name
        for start, end, _ in ranges:
            assert data[start:start + 1] in (b"{", b"0"), (name, data[start:end])


def _read(data: bytes, name: str, *, gz: bool = False) -> tuple[list[dict], RejectLog, list]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("f.csv" if name == "csv" else "f.json")
        path.write_bytes(data)
        log, damaged = RejectLog(), []
        spans = [r for b in iter_span_batches(path, log=log, damaged=damaged) for r in b.to_pylist()]
    return spans, log, damaged


def _decompressible_prefix(data: bytes) -> bytes:
    """What zlib can decompress of a (cut) gzip stream: the reference for the reader."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        return d.decompress(data) + d.flush()
    except zlib.error:
        return b""  # not reached for a cut (only for corrupt data)


def _expected(name: str, prefix: bytes) -> tuple[int, set[str]]:
    """Spans to account for (read + rejected) in ``prefix``, and the span ids of the records
    wholly in it (which must be read)."""
    data, ranges, key, _ = FILES[name]
    assert data.startswith(prefix)
    whole = [(a, b) for a, b, _ in ranges if b <= len(prefix)]
    ids: set[str] = set()
    for a, b in whole:
        record = data[a:b]
        if name == "csv":
            ids.add(record.split(b",")[1].decode())
        else:
            ids.update(m.decode() for m in re.findall(rb'"(?:spanId|spanID|id)":\s*"([0-9a-f]{16})"', record))
    if name == "csv":
        header_end = data.index(b"\n") + 1
        started = sum(1 for a, _, _ in ranges if a < len(prefix)) if len(prefix) >= header_end else 0
        return started, ids
    return len(re.findall(re.escape(key) + rb"\s*:", prefix)), ids


def _check(name: str, prefix: bytes, spans: list[dict], log: RejectLog) -> None:
    accounted, must_read = _expected(name, prefix)
    read_ids = {s["span_id"] for s in spans}
    assert must_read <= read_ids, (name, len(prefix), sorted(must_read - read_ids), log.rows)
    if name == "csv" or len(prefix) > 0:
        assert len(spans) + log.spans_rejected == accounted, (name, len(prefix), len(spans), log.rows)


@pytest.mark.parametrize("name", sorted(FILES))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_file_cut_anywhere_keeps_every_record_before_the_cut(name, data):
    whole = FILES[name][0]
    cut = data.draw(st.integers(0, len(whole)), label="cut")
    prefix = whole[:cut]
    spans, log, _ = _read(prefix, name)
    _check(name, prefix, spans, log)


@pytest.mark.parametrize("name", sorted(FILES))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_gzip_file_cut_anywhere_keeps_every_record_before_the_cut(name, data):
    whole = gzip.compress(FILES[name][0], compresslevel=6, mtime=0)
    cut = data.draw(st.integers(2, len(whole)), label="cut")  # 2: the magic bytes
    prefix = _decompressible_prefix(whole[:cut])
    spans, log, damaged = _read(whole[:cut], name, gz=True)
    _check(name, prefix, spans, log)
    if cut < len(whole):
        assert damaged == [damaged[0]] and damaged[0].endswith(("f.json", "f.csv")), log.rows
        stopped = [r for r in log.rows if r[1] == 0 and "truncated gzip stream at byte" in r[3]]
        assert len(stopped) == 1 and f"at byte {cut}" in stopped[0][3], log.rows
    else:
        assert damaged == [] and log.rows == []


def test_a_large_csv_gzip_cut_at_90_percent_keeps_its_rows():
    """The case measured in issue 14: everything before the cut was lost, uncounted."""
    header = b"trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\n"
    rows = b"".join(f"{i + 1:032x},{i + 1:016x},,svc{i % 7},op{i % 13},{1_700_000_000_000_000_000 + i},"
                    f"{1_700_000_000_000_000_900 + i}\n".encode() for i in range(50_000))
    whole = gzip.compress(header + rows, mtime=0)
    cut = whole[: int(len(whole) * 0.9)]
    prefix = _decompressible_prefix(cut)
    complete = prefix.count(b"\n") - 1
    spans, log, damaged = _read(cut, "csv", gz=True)
    assert len(spans) == complete > 40_000
    assert log.spans_rejected == (0 if prefix.endswith(b"\n") else 1) and len(damaged) == 1


def test_corrupt_gzip_keeps_what_comes_before_the_damage():
    data = FILES["otlp-json lines"][0] * 50
    whole = bytearray(gzip.compress(data, compresslevel=1, mtime=0))
    at = len(whole) * 2 // 3
    whole[at:at + 40] = bytes(40)
    spans, log, damaged = _read(bytes(whole), "otlp-json lines", gz=True)
    assert len(spans) > 0 and len(damaged) == 1
    # zlib tells corrupt data where it can (else the damaged stream ends early, or its CRC fails)
    assert any(r[1] == 0 and re.search(r"(corrupt gzip data|truncated gzip stream) at byte \d+", r[3])
               for r in log.rows), log.rows


@pytest.mark.parametrize("content, says", [
    (b"[]", "an empty JSON array: no spans"),
    (b"[ \n ]\n", "an empty JSON array: no spans"),
    (b'{"resourceSpans": []}', "OTLP requests without spans: no spans"),
    (b'{"data": []}', "a Jaeger document without traces: no spans"),
])
def test_a_file_without_spans_says_what_it_is(tmp_path, content, says):
    from tracesleuth.errors import NoSpansError
    from tracesleuth.io import read_spans

    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(NoSpansError, match=re.escape(f"{path} (record 0): {says}")):
        read_spans(path)
