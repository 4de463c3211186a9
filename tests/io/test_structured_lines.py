"""Structured log lines inside a container runtime's record: the program's JSON line is opened.

The lines below have the shapes of Nezha's OnlineBoutique log CSVs (MIT, github.com/IntelligentDDS/
Nezha, ``rca_data/2022-08-2x/log``): logrus (Go: ``message``, ``severity``, ``timestamp``, request
fields), pino (Node.js: ``severity`` or a numeric ``level``, ``time``, ``pid``, ``hostname``,
``name``, ``message``, ``v``), python-json-logger (``timestamp``, ``severity``, ``name``,
``message``), and plain text (adservice, cartservice). Each is written as Docker's json-file
driver wraps it.
"""

from __future__ import annotations

import csv
import io

import orjson
import pyarrow as pa
import pytest

from tracesleuth import schema as S
from tracesleuth.io import read_logs
from tracesleuth.io.json_lines_logs import open_structured

TRACE, SPAN = "04c87ec97bae041b1b15b3c7676a43cc", "989036326b156480"
T0 = 1_661_145_522_996_857_478
#: (pod, the program's line, body expected, severity text expected, severity number expected)
LINES = [
    ("frontend-579b9bff58-t2dbm",
     {"http.req.id": "16fbfb2d", "http.req.method": "GET", "http.resp.status": 500, "http.resp.took_ms": 5408,
      "message": f"TraceID: {TRACE} SpanID: {SPAN} request error", "severity": "error",
      "timestamp": "2022-08-22T05:18:42.996857478Z"},
     f"TraceID: {TRACE} SpanID: {SPAN} request error", "error", S.SEVERITY_ERROR),
    ("currencyservice-cf787dd48-nk84m",
     {"severity": "info", "time": "2022-08-22T05:18:43.066Z", "pid": 1, "hostname": "currencyservice-cf787dd48-nk84m",
      "name": "currencyservice-server", "message": f"TraceID: {TRACE} SpanID: {SPAN} Conversion request successful",
      "v": 1},
     f"TraceID: {TRACE} SpanID: {SPAN} Conversion request successful", "info", 9),
    ("paymentservice-9cdb6588f-554sm",
     {"level": 50, "time": 1661145523066, "msg": "Transaction failed"}, "Transaction failed", "50", 17),
    ("recommendationservice-6cfdd55578-gfj6q",
     {"timestamp": "2022-08-22T05:18:42.908318Z", "severity": "WARNING", "name": "recommendationservice-server",
      "message": "List Recommendations product_ids=['9SIQT8TOJO']"},
     "List Recommendations product_ids=['9SIQT8TOJO']", "WARNING", 13),
    ("adservice-5f6585d649-fnmft", f"TraceID: {TRACE} SpanID: {SPAN} received ad request (context_words=[])",
     f"TraceID: {TRACE} SpanID: {SPAN} received ad request (context_words=[])", None, 0),
    # not a structured line: an object without a message member, and a line that only starts like one
    ("cartservice-579f59597d-wc2lz", {"cart": ["a", "b"]}, '{"cart":["a","b"]}', None, 0),
    ("cartservice-579f59597d-wc2lz", "{not json} GetCartAsync called", "{not json} GetCartAsync called", None, 0),
]


def _nezha_csv(lines) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["Timestamp", "TimeUnixNano", "Node", "PodName", "Container", "TraceID", "SpanID", "Log"])
    for i, (pod, line, *_) in enumerate(lines):
        text = line if isinstance(line, str) else orjson.dumps(line).decode()
        log = {"log": text + "\n", "stream": "stdout", "time": "2022-08-22T05:18:42.90847299Z"}
        writer.writerow(["2022-08-22T05:18:42.9Z", str(T0 + i), "33.33.33.167", pod, "server", TRACE, SPAN,
                         orjson.dumps(log).decode()])
    return out.getvalue().encode()


def _check(logs: pa.Table) -> None:
    rows = logs.sort_by(S.TIME_NS).to_pylist()
    assert len(rows) == len(LINES)
    for row, (_, line, body, text, number) in zip(rows, LINES):
        assert (row[S.BODY], row[S.SEVERITY_TEXT], row[S.SEVERITY_NUMBER]) == (body, text, number)
        attrs = {a["key"]: a for a in row[S.ATTRIBUTES]}
        if isinstance(line, dict) and body != orjson.dumps(line).decode():
            kept = set(line) - {"message", "msg", "severity", "level"}
            assert kept <= set(attrs)  # nothing of the line is lost
    frontend = {a["key"]: a for a in rows[0][S.ATTRIBUTES]}
    assert frontend["http.resp.status"]["int"] == 500 and frontend["timestamp"]["str"].startswith("2022-08-22")


def test_a_nezha_onlineboutique_line_gives_its_message_and_level(tmp_path):
    path = tmp_path / "05_19_log.csv"
    path.write_bytes(_nezha_csv(LINES))
    result = read_logs(path)
    assert result.formats == {str(path): "nezha-log-csv"} and result.records_rejected == 0
    _check(result.logs)
    attrs = {a["key"] for a in result.logs.to_pylist()[0][S.ATTRIBUTES]}
    assert {"log.iostream", "k8s.container.name", "host.ip"} <= attrs


def test_a_docker_json_file_line_read_as_json_lines_is_opened_the_same(tmp_path):
    path = tmp_path / "container.log"
    records = []
    for i, (pod, line, *_) in enumerate(LINES):
        text = line if isinstance(line, str) else orjson.dumps(line).decode()
        records.append(orjson.dumps({"log": text + "\n", "stream": "stdout", "time": f"2022-08-22T05:18:{10 + i}Z",
                                     "trace_id": TRACE, "span_id": SPAN, "service.name": pod.split("-")[0]}))
    path.write_bytes(b"\n".join(records) + b"\n")
    result = read_logs(path)
    assert result.formats == {str(path): "json-lines-logs"} and result.records_rejected == 0
    rows = result.logs.to_pylist()  # in file order: the time is now the line's own (its "timestamp")
    # the runtime's newline stays on a body that is not a structured line (as before)
    got = [(r[S.BODY].rstrip("\n"), r[S.SEVERITY_TEXT], r[S.SEVERITY_NUMBER]) for r in rows]
    assert got == [(body, text, number) for _, _, body, text, number in LINES]


def test_bodies_without_a_structured_line_are_left_alone():
    assert open_structured(pa.array(["16:43:25.207 INFO  t.s.TravelServiceImpl#457 ...", None, "{}", "{oops"])) is None
