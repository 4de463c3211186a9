"""Bad input in the JSON and protobuf formats: every problem is reported with file, record and
field, and everything else is read."""

from __future__ import annotations

import orjson
import pytest
from google.protobuf.json_format import MessageToJson

import pyarrow.compute as pc

from test_contract import T2, comparable, contract_trace
from tracesleuth import schema as S
from tracesleuth.errors import NoSpansError
from tracesleuth.io import RejectLog, iter_span_batches, read_spans
from tracesleuth.io import _jsondoc
from tracesleuth.io._builder import MAX_ATTRIBUTE_CHARS
from writers import (otlp_json_requests, otlp_proto_requests, write_jaeger_json, write_otlp_json,
                     write_otlp_proto, write_zipkin_json)

N = 12  # spans in the contract trace


def read_all(path, **kwargs):
    """(list of span rows, RejectLog) without raising when nothing could be read."""
    log = RejectLog()
    rows = [r for b in iter_span_batches(path, log=log, **kwargs) for r in b.to_pylist()]
    return rows, log


def entries(log):
    return [dict(zip(S.REJECT_SCHEMA.names, r)) for r in log.rows]


def only(log, **match):
    found = [e for e in entries(log) if all(e[k] == v for k, v in match.items())]
    assert len(found) == 1, entries(log)
    return found[0]


def otlp_lines(tmp_path, mutate=None, name="t.jsonl"):
    """The contract trace as OTLP JSON lines (one span per line), optionally mutated:
    ``mutate(docs)`` edits the parsed requests in place."""
    docs = otlp_json_requests(contract_trace().to_pylist(), spans_per_request=1)
    if mutate:
        mutate(docs)
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs))
    return path


def first_span(docs, i=0):
    return docs[i]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]


SPAN0 = "resourceSpans[0].scopeSpans[0].spans[0]"


# -- OTLP JSON ------------------------------------------------------------------------------------
def test_otlp_malformed_line_is_rejected_and_the_rest_read(tmp_path):
    path = otlp_lines(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][: lines[1].index(b'"spanId"') + 20] + b"\n"  # line 2 cut inside its span
    lines.insert(3, b"\n")  # a blank line is no record but still counts as a line
    path.write_bytes(b"".join(lines))
    rows, log = read_all(path)
    assert len(rows) == N - 1
    e = only(log, record=2)
    assert e["source"] == str(path) and "malformed JSON at byte" in e["reason"] and e["spans"] == 1
    assert log.spans_rejected == 1


@pytest.mark.parametrize("edit, field, reason", [
    (lambda s: s.update(traceId=12345), "traceId", "must be a string"),
    (lambda s: s.pop("spanId"), "spanId", "missing"),
    (lambda s: s.update(name=["x"]), "name", "must be a string"),
    (lambda s: s.update(kind=[2]), "kind", "must be an integer"),
    (lambda s: s.update(attributes="x"), "attributes", "must be a list"),
    (lambda s: s["attributes"].append({"key": "n", "value": {"intValue": "12a"}}),
     "attributes[1].value.intValue", "must be an integer"),
    (lambda s: s["attributes"].append({"key": 5, "value": {"stringValue": "v"}}), "attributes[1].key",
     "must be a string"),
    (lambda s: s.update(status={"code": [2]}), "status.code", "must be 0, 1, 2"),
    (lambda s: s["attributes"][0].update(value={"doubleValue": "fast"}), "attributes[0].value.doubleValue",
     "must be a number"),
])
def test_otlp_wrong_types_reject_the_span_with_its_field(tmp_path, edit, field, reason):
    def mutate(docs):
        span = first_span(docs, 1)
        span["attributes"] = [{"key": "ok", "value": {"boolValue": True}}]
        edit(span)
    rows, log = read_all(otlp_lines(tmp_path, mutate))
    assert len(rows) == N - 1
    e = only(log, record=2)
    assert e["field"] == f"{SPAN0}.{field}" and reason in e["reason"] and e["spans"] == 1


def test_otlp_bad_ids_and_times_are_rejected_by_the_shared_checks(tmp_path):
    def mutate(docs):
        first_span(docs, 0)["traceId"] = "not-hex-not-base64!"
        first_span(docs, 1)["parentSpanId"] = "zz"
        first_span(docs, 2).pop("endTimeUnixNano")
        first_span(docs, 3)["startTimeUnixNano"] = {"t": 1}
    rows, log = read_all(otlp_lines(tmp_path, mutate))
    assert len(rows) == N - 4
    assert only(log, record=1)["field"] == S.TRACE_ID
    assert only(log, record=2)["field"] == S.PARENT_SPAN_ID
    assert only(log, record=3)["field"] == S.END_NS
    assert only(log, record=4)["field"] == S.START_NS


def test_otlp_negative_duration(tmp_path):
    def mutate(docs):
        s = first_span(docs, 4)
        s["startTimeUnixNano"], s["endTimeUnixNano"] = s["endTimeUnixNano"], s["startTimeUnixNano"]
    rows, log = read_all(otlp_lines(tmp_path, mutate))
    assert len(rows) == N - 1
    e = only(log, record=5)
    assert e["field"] == S.END_NS and "negative duration" in e["reason"]


def test_otlp_huge_attribute_value_is_cut_and_reported(tmp_path):
    def mutate(docs):
        first_span(docs, 0)["attributes"].append({"key": "blob", "value": {"stringValue": "x" * 100_000}})
    rows, log = read_all(otlp_lines(tmp_path, mutate))
    assert len(rows) == N and log.spans_rejected == 0
    e = only(log, record=1)
    assert e["field"] == "attributes.blob" and e["spans"] == 0
    blob = [a for a in rows[0]["attributes"] if a["key"] == "blob"][0]
    assert len(blob["str"]) == MAX_ATTRIBUTE_CHARS


def test_otlp_non_utf8_text_is_kept_with_a_warning(tmp_path):
    path = otlp_lines(tmp_path)
    data = path.read_bytes().replace("naïve".encode(), b"na\xefve", 1)  # a Latin-1 byte in UTF-8 text
    path.write_bytes(data)
    line = data[: data.index(b"na\xefve")].count(b"\n") + 1
    rows, log = read_all(path)
    assert len(rows) == N and log.spans_rejected == 0
    e = only(log, spans=0)
    assert e["record"] == line and "invalid UTF-8" in e["reason"]
    assert e["field"].endswith("attributes[0].value.stringValue")
    value = [a["str"] for r in rows for a in r["attributes"] if a["key"] == "unicode"][0]
    assert value.startswith("na\ufffd")


def test_otlp_unknown_status_code_is_a_warning(tmp_path):
    rows, log = read_all(otlp_lines(tmp_path, lambda docs: first_span(docs, 0).update(status={"code": 7})))
    assert len(rows) == N and rows[0]["status"] == "unset"
    assert only(log, record=1)["field"] == "status.code"


def test_otlp_line_without_resource_spans(tmp_path):
    path = otlp_lines(tmp_path)
    path.write_bytes(path.read_bytes() + b'{"resourceSpans": 3}\n[1, 2]\n')
    rows, log = read_all(path)
    assert len(rows) == N
    assert only(log, record=N + 1)["field"] == "resourceSpans"
    assert "JSON object" in only(log, record=N + 2)["reason"]


def test_otlp_protobuf_json_mapping_is_accepted(tmp_path):
    """``MessageToJson``: base64 ids, enum names, int64 as strings; camelCase and snake_case."""
    msgs = otlp_proto_requests(contract_trace().to_pylist(), spans_per_request=2)
    for snake in (False, True):
        lines = [orjson.dumps(orjson.loads(MessageToJson(m, preserving_proto_field_name=snake))) for m in msgs]
        path = tmp_path / f"mapping{snake}.json"
        path.write_bytes(b"\n".join(lines))
        result = read_spans(path)
        assert result.spans_rejected == 0 and result.rejects.num_rows == 0
        assert comparable(result.spans, "otlp-json") == comparable(contract_trace(), "otlp-json")


def test_otlp_body_truncated_is_salvaged_up_to_the_break(tmp_path):
    path = write_otlp_json(contract_trace(), tmp_path / "body.json", body=True)
    data = path.read_bytes()
    marker = b'"spanId": "00000000000000c1"'  # the one span of the 3rd resource (payment)
    cut = data.index(marker) + len(marker)
    path.write_bytes(data[:cut])
    rows, log = read_all(path)
    assert sorted({r["service"] for r in rows}) == ["checkout", "frontend"] and len(rows) == 10
    e = only(log, record=3)
    assert f"malformed JSON at byte {cut}" in e["reason"] and e["spans"] == 1 and e["field"] is None


@pytest.mark.parametrize("writer, cut_after", [
    (lambda t, p: write_otlp_json(t, p, body=True), b'"spanId": "00000000000000c1"'),  # 3rd resource
    (lambda t, p: write_zipkin_json(t, p), b'"id":"00000000000000b1"'),  # 3rd span
    (lambda t, p: write_jaeger_json(t, p), b'"operationName": "ping cache"'),  # 2nd trace
], ids=["otlp-json", "zipkin-json", "jaeger-json"])
def test_large_documents_are_streamed(tmp_path, monkeypatch, writer, cut_after):
    path = writer(contract_trace(), tmp_path / "doc.json")
    in_memory = read_spans(path)
    monkeypatch.setattr(_jsondoc, "MAX_DOCUMENT_BYTES", 256)  # force the streaming path
    streamed = read_spans(path)
    assert streamed.spans.equals(in_memory.spans) and streamed.rejects.num_rows == 0
    # A truncated streamed document keeps its records before the break and reports the break.
    data = path.read_bytes()
    path.write_bytes(data[: data.index(cut_after) + len(cut_after)])
    rows, log = read_all(path)
    assert 0 < len(rows) < N
    broken = [e for e in entries(log) if "malformed JSON at or before byte" in e["reason"]]
    assert len(broken) == 1 and broken[0]["spans"] > 0


# -- whole files ---------------------------------------------------------------------------------
def test_empty_and_unknown_files_are_reported_and_the_rest_read(tmp_path):
    (tmp_path / "empty.json").write_bytes(b"")
    (tmp_path / "blank.json").write_bytes(b" \n\n ")
    (tmp_path / "notes.txt").write_bytes(b"these are not spans\n")
    (tmp_path / "other.json").write_bytes(b'{"hello": "world"}')
    write_otlp_json(contract_trace(), tmp_path / "good.bin")
    rows, log = read_all(tmp_path)
    assert len(rows) == N
    by_file = {e["source"].rsplit("/", 1)[-1]: e for e in entries(log)}
    assert set(by_file) == {"empty.json", "blank.json", "notes.txt", "other.json"}
    assert all(e["record"] == 0 for e in by_file.values())
    assert by_file["empty.json"]["reason"] == "empty file"
    assert "unknown format" in by_file["notes.txt"]["reason"]
    with pytest.raises(NoSpansError, match="empty file"):
        read_spans(tmp_path / "empty.json")


def test_wrong_document_shapes(tmp_path):
    cases = {
        "zipkin-object.json": (b'[{"traceId": "1", "id": "2"}, 5, "x"]', "zipkin-json"),
        "jaeger-data.json": (b'{"data": {"traceID": "1"}, "spans": 1}', "jaeger-json"),
        "otlp-rs.json": (b'{\n "resourceSpans": {"spanId": 1}\n}', "otlp-json"),
    }
    for name, (data, fmt) in cases.items():
        (tmp_path / name).write_bytes(data)
        rows, log = read_all(tmp_path / name)
        assert rows == [] and len(log.rows) >= 1, name
    _, log = read_all(tmp_path / "zipkin-object.json")
    assert {e["record"] for e in entries(log)} == {1, 2, 3}
    _, log = read_all(tmp_path / "jaeger-data.json")
    assert only(log, record=0)["field"] == "data"
    _, log = read_all(tmp_path / "otlp-rs.json")
    assert only(log, record=0)["field"] == "resourceSpans"


# -- Zipkin ---------------------------------------------------------------------------------------
def zipkin_file(tmp_path, mutate):
    path = write_zipkin_json(contract_trace(), tmp_path / "z.json")
    spans = orjson.loads(path.read_bytes())
    mutate(spans)
    path.write_bytes(orjson.dumps(spans))
    return path


def test_zipkin_missing_timestamp_duration_and_bad_fields(tmp_path):
    def mutate(spans):
        spans[0].pop("timestamp")
        spans[1].pop("duration")
        spans[2]["duration"] = -5
        spans[3]["id"] = 77
        spans[4]["tags"] = ["error"]
        spans[5]["timestamp"] = "soon"
    rows, log = read_all(zipkin_file(tmp_path, mutate))
    assert len(rows) == N - 5
    assert only(log, record=1)["field"] == "timestamp"
    warn = only(log, record=2)
    assert warn["field"] == "duration" and warn["spans"] == 0
    assert [r for r in rows if r["span_id"].endswith("a2")][0]["end_ns"] == \
        [r for r in rows if r["span_id"].endswith("a2")][0]["start_ns"]
    assert only(log, record=3)["field"] == S.END_NS
    assert only(log, record=4)["field"] == "id"
    assert only(log, record=5)["field"] == "tags"
    assert only(log, record=6)["field"] == "timestamp"


def test_zipkin_truncated_array(tmp_path):
    path = write_zipkin_json(contract_trace(), tmp_path / "z.json")
    data = path.read_bytes()
    cut = data.index(b'"traceId"', len(data) // 2) + 20
    path.write_bytes(data[:cut])
    rows, log = read_all(path)
    e = only(log, spans=1)
    assert e["record"] == len(rows) + 1 and f"at byte {cut}" in e["reason"]
    assert len(rows) + 1 == data[:cut].count(b'"traceId"')


# -- Jaeger ---------------------------------------------------------------------------------------
def jaeger_file(tmp_path, mutate, **kwargs):
    path = write_jaeger_json(contract_trace(), tmp_path / "j.json", **kwargs)
    doc = orjson.loads(path.read_bytes())
    mutate(doc)
    path.write_bytes(orjson.dumps(doc))
    return path


def test_jaeger_bad_spans_and_processes(tmp_path):
    def mutate(doc):
        spans = doc["data"][0]["spans"]
        spans[0]["processID"] = "p99"
        spans[1]["tags"][0] = {"key": "peer.port", "type": "int64", "value": "eighty"}
        spans[2]["startTime"] = 1.5
        spans[3]["references"] = [{"refType": "CHILD_OF", "traceID": spans[3]["traceID"]}]
        doc["data"][1]["processes"] = []
    rows, log = read_all(jaeger_file(tmp_path, mutate))
    assert len(rows) == N - 4 - 2
    assert only(log, record=1)["field"] == "processID"
    assert only(log, record=2)["field"] == "tags[0].value"
    assert only(log, record=3)["field"] == "startTime"
    assert only(log, record=4)["field"] == "references[0].spanID"
    trace2 = only(log, record=11)
    assert trace2["field"] == "processes" and trace2["spans"] == 2


def test_jaeger_references_and_single_trace(tmp_path):
    def mutate(doc):
        for s in doc["spans"]:
            if s["spanID"].endswith("e2"):
                s["references"] = [{"refType": "FOLLOWS_FROM", "traceID": s["traceID"], "spanID": "e1"},
                                   {"refType": "CHILD_OF", "traceID": "ffff", "spanID": "99"}]  # another trace: a link
    path = write_jaeger_json(contract_trace().filter(pc.field("trace_id") == T2), tmp_path / "j.json",
                             single_trace=True)
    doc = orjson.loads(path.read_bytes())
    mutate(doc)
    path.write_bytes(orjson.dumps(doc))
    result = read_spans(path)
    e2 = [r for r in result.spans.to_pylist() if r["span_id"].endswith("e2")][0]
    assert e2["parent_span_id"] == "00000000000000e1" and e2["follows_from"] is True
    assert result.n_spans == 2 and result.spans["trace_id"][0].as_py() == "00000000000000000af7651916cd43dd"


def test_jaeger_truncated_data_list_keeps_the_traces_before(tmp_path):
    path = write_jaeger_json(contract_trace(), tmp_path / "j.json")
    data = path.read_bytes()
    cut = data.index(b'"operationName": "ping cache"')
    path.write_bytes(data[:cut])
    rows, log = read_all(path)
    assert len(rows) == 10  # the first trace
    e = only(log, record=2)  # the second trace is the broken record
    assert f"at byte {cut}" in e["reason"] and e["spans"] == 1


# -- OTLP protobuf ----------------------------------------------------------------------------------
def test_proto_truncated_length_prefixed_stream(tmp_path):
    path = write_otlp_proto(contract_trace(), tmp_path / "p.bin", prefixed=True, spans_per_message=2)
    data = path.read_bytes()
    first = int.from_bytes(data[:4], "big")
    second = int.from_bytes(data[4 + first:8 + first], "big")
    path.write_bytes(data[: 8 + first + second // 2])
    rows, log = read_all(path)
    assert len(rows) == 2
    e = only(log, record=2)
    assert "cut short" in e["reason"] and e["spans"] >= 1


def test_proto_corrupt_resource_spans_loses_only_its_spans(tmp_path):
    path = write_otlp_proto(contract_trace(), tmp_path / "p.bin")
    data = bytearray(path.read_bytes())
    # The first ResourceSpans: tag 0x0a, a varint length, then its bytes; break its first nested tag.
    length, pos = 0, 1
    shift = 0
    while True:
        b = data[pos]
        length |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if b < 0x80:
            break
    data[pos] = 0xFF
    path.write_bytes(bytes(data))
    rows, log = read_all(path)
    e = only(log, record=1)
    assert e["field"] == "resource_spans" and e["spans"] >= 0
    assert len(rows) + e["spans"] <= N and len(rows) >= N - 6


def test_proto_truncated_raw_request(tmp_path):
    path = write_otlp_proto(contract_trace(), tmp_path / "p.bin")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 10])
    rows, log = read_all(path)
    e = [e for e in entries(log) if "cut short" in e["reason"]]
    assert len(e) == 1 and e[0]["field"] == "resource_spans"
    assert len(rows) + log.spans_rejected == N


@pytest.mark.parametrize("claimed", [1 << 40, (1 << 31) - 2])
def test_proto_length_field_claiming_huge_size_is_reported_not_allocated(tmp_path, claimed):
    """A damaged length varint must not make the reader allocate what it claims (found by the
    property test as a MemoryError)."""
    data = otlp_proto_requests(contract_trace().to_pylist())[0].SerializeToString()
    _, pos = 0, 1
    while data[pos] >= 0x80:
        pos += 1
    varint = bytearray()
    value = claimed
    while True:
        byte, value = value & 0x7F, value >> 7
        varint.append(byte | (0x80 if value else 0))
        if not value:
            break
    path = tmp_path / "p.bin"
    path.write_bytes(data[:1] + bytes(varint) + data[pos + 1:])
    rows, log = read_all(path)
    assert rows == [] and len(log.rows) == 1
    reason = entries(log)[0]["reason"]
    assert ("2 GiB" in reason) if claimed > (1 << 31) else ("cut short" in reason)


def test_proto_length_prefix_beyond_the_message_limit_is_reported(tmp_path):
    path = write_otlp_proto(contract_trace(), tmp_path / "p.bin", prefixed=True)
    data = path.read_bytes()
    path.write_bytes(data + (0xF0000000).to_bytes(4, "big") + b"\x0a\x00")
    rows, log = read_all(path)
    assert len(rows) == N
    (entry,) = entries(log)
    assert "2 GiB" in entry["reason"] and entry["record"] > 1


def test_raw_proto_whose_length_byte_reads_as_json(tmp_path):
    """The tag byte 0x0a is a newline; a first ResourceSpans of 123 bytes then starts with '{' after
    it (found by the property test)."""
    from tracesleuth.io._source import detect_format

    for pad in range(300):
        rows = contract_trace().slice(0, 1).to_pylist()
        rows[0].update(service="s" * (pad + 1), attributes=[], instance=None)
        request = otlp_proto_requests(rows)[0]
        data = request.SerializeToString()
        if data[1:2] == b"{":
            break
    else:
        pytest.fail("no padding gives the wanted length byte")
    assert detect_format(data) == "otlp-proto"
    path = tmp_path / "p.bin"
    path.write_bytes(data)
    rows_read, log = read_all(path)
    assert len(rows_read) == 1 and rows_read[0]["service"] == rows[0]["service"] and not log.rows


def test_integers_beyond_64_bits(tmp_path, monkeypatch):
    big = 123456789012345678901234567890
    tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    otlp = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [{
        "traceId": tid, "spanId": sid, "name": "op", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
        "attributes": [{"key": "list", "value": {"arrayValue": {"values": [{"intValue": str(big)}]}}},
                       {"key": "n", "value": {"intValue": str(big)}}]}]}]}]}
    path = tmp_path / "otlp.json"
    path.write_bytes(orjson.dumps(otlp))
    rows, log = read_all(path)
    assert {a["key"]: a["str"] for a in rows[0]["attributes"]} == {"list": f"[{big}]", "n": str(big)}
    # The streaming parser (yajl) stops at integers beyond 64 bits: the records before are kept.
    monkeypatch.setattr(_jsondoc, "MAX_DOCUMENT_BYTES", 64)
    zipkin = [{"traceId": tid, "id": sid, "timestamp": 1, "duration": 2},
              {"traceId": tid, "id": sid, "timestamp": big, "duration": 2}]
    path = tmp_path / "zipkin.json"
    path.write_text(__import__("json").dumps(zipkin))
    rows, log = read_all(path)
    assert len(rows) == 1 and "integer overflow" in only(log, record=2)["reason"]


def test_corrupt_gzip_is_reported_not_raised(tmp_path):
    import gzip
    lines = b"".join(orjson.dumps(d) + b"\n" for d in otlp_json_requests(contract_trace().to_pylist(),
                                                                         spans_per_request=1)) * 400
    data = bytearray(gzip.compress(lines, compresslevel=1))
    for i in range(len(data) - 400, len(data) - 300):  # damage the end of the deflate stream
        data[i] ^= 0x5A
    path = tmp_path / "late.json.gz"
    path.write_bytes(bytes(data))
    rows, log = read_all(path)
    assert 0 < len(rows) < 400 * N
    assert only(log, record=0)["reason"].startswith("read stopped early")
    data[20:60] = bytes(40)  # damage the start: nothing can be read
    path.write_bytes(bytes(data))
    rows, log = read_all(path)
    assert rows == [] and only(log, record=0)["reason"].startswith("cannot read")


def test_files_read_ahead_on_threads_give_the_serial_result(tmp_path, monkeypatch):
    """Spans, their order, the rejects and the formats of a directory of many small files are
    those of reading the files one after the other."""
    import tracesleuth.io as tio

    paths = []
    for i in range(12):
        kind = i % 4
        path = tmp_path / f"f{i:02d}"
        if kind == 0:
            paths.append(write_otlp_json(contract_trace(), path.with_suffix(".json")))
        elif kind == 1:
            paths.append(write_zipkin_json(contract_trace(), path.with_suffix(".zipkin.json")))
        elif kind == 2:
            p = write_otlp_json(contract_trace(), path.with_suffix(".bad.json"))
            p.write_bytes(p.read_bytes()[:-40])  # truncated last line
            paths.append(p)
        else:
            p = path.with_suffix(".txt")
            p.write_bytes(b"not a trace\n" if i % 8 == 3 else b"")
            paths.append(p)

    def read(path_list):
        log, formats = RejectLog(), {}
        batches = list(iter_span_batches(path_list, log=log, formats=formats))
        return [r for b in batches for r in b.to_pylist()], log.rows, log.spans_read, formats

    threaded = read(tmp_path)
    monkeypatch.setattr(tio, "PREFETCH_MAX_BYTES", -1)  # nothing is small: every file in turn
    serial = read(tmp_path)
    assert threaded == serial
    assert len(threaded[0]) + sum(r[4] for r in threaded[1]) == 9 * N  # 9 files hold spans


def test_otlp_line_blocks_are_whole_lines():
    """Blocks are cut at newlines; a line longer than a block makes the block longer; a last line
    without a newline gets one."""
    import io

    from tracesleuth.io import otlp_json

    lines = [b"x" * (i * 7 % 50) + b"\n" for i in range(300)] + [b"y" * 400 + b"\n", b"last line without newline"]
    data = b"".join(lines)
    blocks = []
    for block, error, cut_off in otlp_json._line_blocks(io.BytesIO(data), 64):
        assert error is None and cut_off == b"" and block.endswith(b"\n")
        blocks.append(bytes(block))
    assert len(blocks) > 10 and any(len(b) > 400 for b in blocks)
    assert b"".join(blocks) == data + b"\n"
