"""Bad input in the log formats: every problem is reported with file, record and field, a record
is rejected only when it has no time (it cannot be placed), and everything else is kept:
``records in = records read + records rejected``."""

from __future__ import annotations

import gzip

import orjson
import pyarrow as pa
import pytest

from log_writers import encode, write_logs
from test_bad_input import entries, only
from test_logs_contract import CART, T0_NS, T1, contract_logs, log_record
from tracesleuth import schema as S
from tracesleuth.errors import NoLogsError, ParameterError, TraceFormatError
from tracesleuth.io import LogLimits, RejectLog, iter_log_batches, read_logs
from tracesleuth.io._logs import NO_TRACE_CONTEXT

HEADER = "Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log\n"


def read_all(path, **kwargs):
    """(list of record rows, RejectLog) without raising when nothing could be read."""
    log = RejectLog()
    rows = [r for b in iter_log_batches(path, log=log, **kwargs) for r in b.to_pylist()]
    return rows, log


def nezha_line(log: str, *, time="1674981742383150913", trace=T1, span="00f067aa0ba902b7", pod=CART) -> str:
    import csv
    import io

    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(
        ["2023-01-29T08:42:22.383150913Z", time, "33.33.33.116", pod, "server", trace, span, log])
    return out.getvalue()


def runtime_json(text: str) -> str:
    return orjson.dumps({"log": text + "\n", "stream": "stdout", "time": "2023-01-29T08:42:22.383Z"}).decode()


def test_a_record_without_trace_context_is_kept_and_counted(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"time": "2024-05-01T10:00:00Z", "msg": "started"}\n'
                    '{"time": "2024-05-01T10:00:01Z", "msg": "ready", "trace_id": "0000000000000000"}\n'
                    f'{{"time": "2024-05-01T10:00:02Z", "msg": "x", "trace_id": "{T1}"}}\n')
    rows, log = read_all(path)
    assert [r[S.TRACE_ID] for r in rows] == [None, None, T1]  # all zeros: no trace context (W3C)
    e = only(log, field=S.TRACE_ID)
    assert e["reason"] == f"2 record(s) {NO_TRACE_CONTEXT}" and e["record"] == 1 and e["spans"] == 0


@pytest.mark.parametrize("fmt", ["json-lines-logs", "nezha-log-csv"])
def test_invalid_ids_are_dropped_from_a_kept_record_with_a_warning(tmp_path, fmt):
    if fmt == "nezha-log-csv":
        path = tmp_path / "n.csv"
        path.write_text(HEADER + nezha_line(runtime_json("16:42:22.383 INFO a"), trace="not-an-id",
                                            span="12345678901234567"))
    else:
        path = tmp_path / "n.jsonl"
        path.write_text('{"time": 1714557600, "msg": "a", "trace_id": "not-an-id", "span_id": "12345678901234567"}\n')
    rows, log = read_all(path)
    assert len(rows) == 1 and rows[0][S.TRACE_ID] is None and rows[0][S.SPAN_ID] is None
    trace = only(log, field=S.TRACE_ID, excerpt="not-an-id")
    assert trace["record"] == (2 if fmt == "nezha-log-csv" else 1) and trace["spans"] == 0
    assert "kept without it" in trace["reason"]
    assert only(log, field=S.SPAN_ID)["excerpt"] == "12345678901234567"
    assert log.spans_rejected == 0


def test_a_log_column_that_is_not_json_is_kept_as_its_raw_text(tmp_path):
    path = tmp_path / "n.csv"
    path.write_text(HEADER + nezha_line("16:42:22.383 ERROR plain text, not the runtime's JSON")
                    + nezha_line(runtime_json("16:42:22.384 INFO fine")) + nezha_line('{"stream": "stdout"}'))
    rows, log = read_all(path)
    assert [r[S.BODY] for r in rows] == ["16:42:22.383 ERROR plain text, not the runtime's JSON",
                                         "16:42:22.384 INFO fine", '{"stream": "stdout"}']
    assert [r[S.SEVERITY_NUMBER] for r in rows] == [S.SEVERITY_ERROR, 9, 0]
    warned = [e for e in entries(log) if e["field"] == "Log"]
    assert [e["record"] for e in warned] == [2, 4] and all(e["spans"] == 0 for e in warned)
    assert "kept as its raw text" in warned[0]["reason"]


def test_invalid_utf8_is_replaced_not_lost(tmp_path):
    path = tmp_path / "n.csv"
    path.write_bytes(HEADER.encode() + nezha_line(runtime_json("16:42:22.383 INFO caf\x00")).encode()
                     .replace(b"caf\\u0000", b"caf\xff")
                     + nezha_line(runtime_json("ok"), pod="pod\x01").encode().replace(b"pod\x01", b"pod\xfe"))
    rows, log = read_all(path)
    assert [r[S.BODY] for r in rows] == ["16:42:22.383 INFO caf\ufffd", "ok"]
    assert rows[1][S.INSTANCE] == "pod\ufffd"
    assert {e["field"] for e in entries(log)} == {"Log", "PodName"} and log.spans_rejected == 0


def test_unknown_severity_text_is_kept_with_one_counted_warning_per_value(tmp_path):
    path = tmp_path / "a.jsonl"
    lines = [{"time": 1714557600 + i, "msg": "m", "level": level}
             for i, level in enumerate(["LOUD", "info", "LOUD", "quiet", "LOUD", "SEVERE", "fine", "DPanic"])]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    rows, log = read_all(path)
    assert [r[S.SEVERITY_NUMBER] for r in rows] == [0, 9, 0, 0, 0, 17, 6, 18]
    assert [r[S.SEVERITY_TEXT] for r in rows] == [x["level"] for x in lines]
    loud = only(log, excerpt="LOUD")
    assert loud["record"] == 1 and loud["field"] == S.SEVERITY_TEXT and "3 record(s)" in loud["reason"]
    assert only(log, excerpt="quiet")["record"] == 4


def test_a_megabyte_body_is_cut_to_the_limit_and_counted(tmp_path):
    big = "x" * (1 << 20)
    path = tmp_path / "a.jsonl"
    path.write_bytes(orjson.dumps({"time": 1714557600, "msg": big, "k": "v" * 5000}) + b"\n")
    rows, log = read_all(path)
    assert len(rows[0][S.BODY]) == LogLimits().max_body_chars
    body = only(log, field=S.BODY)
    assert body["spans"] == 0 and body["excerpt"].startswith(f"{len(big)} characters")
    assert only(log, field="attributes.k")["reason"] == "attribute value cut to its first 4096 characters"
    rows, log = read_all(path, limits=LogLimits(max_body_chars=10, max_attribute_value_chars=None))
    assert rows[0][S.BODY] == "x" * 10 and len(rows[0][S.ATTRIBUTES][0]["str"]) == 5000


def test_limits_from_the_opentelemetry_environment():
    env = {"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT": "3", "OTEL_ATTRIBUTE_COUNT_LIMIT": "99",
           "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "10"}
    limits = LogLimits.from_environment(env)
    assert (limits.max_attributes, limits.max_attribute_value_chars) == (3, 10)
    assert LogLimits.from_environment({}) == LogLimits()
    with pytest.raises(ParameterError, match="OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT"):
        LogLimits.from_environment({"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT": "many"})
    with pytest.raises(ParameterError, match="'max_body_chars' parameter of LogLimits"):
        LogLimits(max_body_chars=0)


def test_attribute_count_limit_applies(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(orjson.dumps({"time": 1714557600, "msg": "m", **{f"k{i}": i for i in range(10)}}) + b"\n")
    rows, log = read_all(path, limits=LogLimits(max_attributes=4))
    assert [a["key"] for a in rows[0][S.ATTRIBUTES]] == ["k0", "k1", "k2", "k3"]
    assert only(log, field=S.ATTRIBUTES)["reason"] == "attribute list cut to its first 4 attributes"


@pytest.mark.parametrize("fmt", ["json-lines-logs", "nezha-log-csv", "otlp-logs-json"])
def test_a_record_without_time_is_rejected_and_counted(tmp_path, fmt):
    path = tmp_path / "x"
    if fmt == "json-lines-logs":
        path.write_text('{"msg": "no time"}\n{"time": "yesterday", "msg": "no time either"}\n'
                        '{"time": 1714557600, "msg": "ok"}\n')
        bad = [1, 2]
    elif fmt == "nezha-log-csv":
        path.write_text(HEADER + nezha_line(runtime_json("a"), time="").replace("2023-01-29T08:42:22.383150913Z", "", 1)
                        + nezha_line(runtime_json("b")))
        bad = [2]
    else:
        records = [{"body": {"stringValue": "no time"}}, {"timeUnixNano": "5", "body": {"stringValue": "ok"}}]
        doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}
        path.write_bytes(orjson.dumps(doc) + b"\n")
        bad = [1]
    result = read_logs(path)
    rejected = [e for e in result.rejects.to_pylist() if e["spans"]]
    assert [e["record"] for e in rejected] == bad and all(e["field"] == S.TIME_NS for e in rejected)
    assert result.records_rejected == len(bad) and result.n_records == 1


def test_a_negative_time_unix_nano_reads_the_timestamp_column(tmp_path):
    # the Nezha day has 45 ERROR records with TimeUnixNano -6795364578871345152
    path = tmp_path / "n.csv"
    path.write_text(HEADER + nezha_line(runtime_json("16:42:22.383 ERROR x"), time="-6795364578871345152")
                    .replace("2023-01-29T08:42:22.383150913Z", "2023-01-29T09:20:29.295"))
    result = read_logs(path)
    assert result.logs.column(S.TIME_NS).to_pylist() == [1674984029295000000]
    reasons = sorted(e["reason"] for e in result.rejects.to_pylist())
    assert reasons == ["1 record(s) with a time without a time zone: read as UTC",
                       "TimeUnixNano '-6795364578871345152' is not a time: the Timestamp column read instead"]


def test_a_truncated_gzip_keeps_the_records_before_the_damage(tmp_path):
    logs = pa.concat_tables([contract_logs()] * 400)
    for fmt in ("nezha-log-csv", "json-lines-logs", "otlp-logs-json"):
        data = gzip.compress(encode(fmt, logs))
        path = tmp_path / f"{fmt}.gz"
        path.write_bytes(data[: len(data) * 2 // 3])
        result = read_logs(path)
        assert result.damaged_files == (str(path),), fmt
        assert 0 < result.n_records < logs.num_rows, fmt
        assert any("truncated gzip stream" in e["reason"] for e in result.rejects.to_pylist()), fmt


def test_malformed_lines_are_rejected_with_their_records(tmp_path):
    good = encode("otlp-logs-json", contract_logs()).split(b"\n")
    path = tmp_path / "o.jsonl"
    path.write_bytes(good[0] + b"\n" + good[1][:-20] + b"\n" + b"\n".join(good[2:]))
    result = read_logs(path)
    bad = [e for e in result.rejects.to_pylist() if e["spans"]]
    assert len(bad) == 1 and bad[0]["record"] == 2 and bad[0]["spans"] == 2  # two records per line
    assert result.n_records + result.records_rejected == contract_logs().num_rows
    path = tmp_path / "j.jsonl"
    path.write_text('{"time": 1, "msg": "a"}\nnot json\n[1, 2]\n{"time": 2, "msg": "b"}\n')
    result = read_logs(path)
    assert [(e["record"], e["spans"]) for e in result.rejects.to_pylist() if e["spans"]] == [(2, 1), (3, 1)]


def test_a_corrupt_protobuf_record_is_rejected_alone(tmp_path):
    data = encode("otlp-logs-proto-prefixed", contract_logs())  # two requests of 3 records
    first = int.from_bytes(data[:4], "big")
    broken = data[:4] + data[4:4 + first // 2] + b"\xff" * (first - first // 2) + data[4 + first:]
    path = tmp_path / "p.bin"
    path.write_bytes(broken)
    result = read_logs(path)
    # the intact request is read; the broken one is rejected with the records identifiable in its
    # bytes (those the damage hides cannot be counted)
    assert result.n_records == 3 and 1 <= result.records_rejected <= 3
    assert {e["record"] for e in result.rejects.to_pylist() if e["spans"]} == {1}


def test_severity_number_out_of_range_reads_the_text(tmp_path):
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"timeUnixNano": "5", "severityNumber": 99, "severityText": "WARN"},
        {"timeUnixNano": "6", "severityNumber": "SEVERITY_NUMBER_ERROR2"}]}]}]}
    path = tmp_path / "o.json"
    path.write_bytes(orjson.dumps(doc) + b"\n")
    rows, log = read_all(path)
    assert [r[S.SEVERITY_NUMBER] for r in rows] == [13, 18]
    assert "outside 0-24" in only(log, field=S.SEVERITY_NUMBER)["reason"]


def test_nothing_readable_raises_naming_the_problems(tmp_path):
    (tmp_path / "e.jsonl").write_text("")
    (tmp_path / "f.jsonl").write_text('{"msg": "no time"}\n')
    with pytest.raises(NoLogsError, match="empty file"):
        read_logs(tmp_path)
    with pytest.raises(TraceFormatError, match="unknown log format"):
        read_logs(tmp_path, format="csv")


def test_a_short_csv_row_is_rejected_with_its_line(tmp_path):
    path = tmp_path / "n.csv"
    path.write_text(HEADER + nezha_line(runtime_json("a")) + "only,three,fields\n" + nezha_line(runtime_json("b")))
    result = read_logs(path)
    assert result.n_records == 2 and result.records_rejected == 1
    assert [e["record"] for e in result.rejects.to_pylist() if e["spans"]] == [3]


def test_records_without_time_zone_are_counted_once(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"asctime": "2024-05-01 10:00:00,123", "message": "a"}\n'
                    '{"asctime": "2024-05-01 10:00:01,123", "message": "b"}\n')
    rows, log = read_all(path)
    assert [r[S.TIME_NS] for r in rows] == [1714557600123000000, 1714557601123000000]
    assert only(log, field=S.TIME_NS)["reason"] == "2 record(s) with a time without a time zone: read as UTC"


def test_unjoinable_records_count_in_the_contract_table(tmp_path):
    # a record of the contract table without trace context, read from every format, is one warning
    write_logs("json-lines-logs", pa.Table.from_pylist([log_record(T0_NS, None, None, "cart", CART, "INFO", "x")],
                                                       schema=S.LOG_SCHEMA), tmp_path / "a")
    result = read_logs(tmp_path / "a")
    assert result.n_records == 1 and result.rejects.num_rows == 1
