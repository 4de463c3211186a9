"""The log reader contract, once for every log format: the same hand-made records written in each
format read back as the same log table (on what the format can express), whatever the file is
called and whether it is gzipped; span and log files in one directory are each read by their own
reader, and neither loses or rejects anything.

What each format can express (the rest is compared as the reader must fill it in):

======================= ===============================================================================
otlp-logs-json, -proto  everything; the resource's ``service.name`` and ``k8s.pod.name`` come back
                        among the attributes too
json-lines-logs         everything but the severity number, which is that of the text (``level``)
nezha-log-csv           time, ids, body, instance (``PodName``) and service (the pod name without its
                        Kubernetes suffix), the severity of the level at the start of the body, and
                        the attributes ``host.ip``, ``k8s.container.name``, ``log.iostream``
======================= ===============================================================================
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from log_writers import LOG_FORMATS, NEZHA_ATTRIBUTES, RESOURCE_KEYS, encode, write_logs
from test_contract import contract_trace
from tracesleuth import schema as S
from tracesleuth.errors import NoLogsError, NoSpansError
from tracesleuth.io import (LOG_FILE_NOTE, LOG_FORMATS as READER_LOG_FORMATS, SPAN_FILE_NOTE, detect_format,
                            is_log_format, read_logs, read_spans)
from tracesleuth.io._logs import NO_TRACE_CONTEXT, severity_number
from writers import attribute_value, write

DETECTED = {"otlp-logs-json-body": "otlp-logs-json", "otlp-logs-proto-prefixed": "otlp-logs-proto"}
T1, T2 = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
T0_NS = 1_674_981_742_383_150_913  # 2023-01-29T08:42:22.383150913Z
CART, PAY = "cart-5dc8d4f9fd-46997", "payment-64469b5b48-25zj6"


def _attr(key, value) -> dict:
    entry = {"key": key, "str": None, "int": None, "float": None, "bool": None}
    entry[{bool: "bool", int: "int", float: "float", str: "str"}[type(value)]] = value
    return entry


def log_record(time_ns, trace_id, span_id, service, instance, level, body, **attributes) -> dict:
    """One canonical record: the severity number is the level's, the body starts with the clock
    time and the level as Logback writes them (so every format can express the severity)."""
    attrs = {"host.ip": "33.33.33.116", "k8s.container.name": "server", "log.iostream": "stdout", **attributes}
    clock = f"16:42:{22 + (time_ns - T0_NS) // 10**9:02d}.383"
    return {S.TIME_NS: time_ns, S.TRACE_ID: trace_id, S.SPAN_ID: span_id, S.SERVICE: service, S.INSTANCE: instance,
            S.SEVERITY_NUMBER: severity_number(level) if level else 0, S.SEVERITY_TEXT: level,
            S.BODY: f"{clock} {level} {body}" if level else body,
            S.ATTRIBUTES: [_attr(k, v) for k, v in attrs.items()], S.TEMPLATE_ID: None}


def contract_logs() -> pa.Table:
    """A checkout's log records: INFO, WARN and ERROR lines of two services in two traces, a
    record without trace context (a startup line), one without a level, unicode, typed attributes."""
    return pa.Table.from_pylist([
        log_record(T0_NS, T1, "00f067aa0ba902b7", "cart", CART, "INFO", "c.CartController#53 add item 42",
                   **{"code.lineno": 53, "app.cache_hit": True}),
        log_record(T0_NS + 1_000, T1, "00f067aa0ba902b7", "cart", CART, "WARN", "c.CartService#120 slow: 350 ms",
                   **{"app.ratio": 0.25}),
        log_record(T0_NS + 2_000_000, T1, "b7ad6b7169203331", "payment", PAY, "ERROR",
                   "p.PaymentService#77 charge failed: timeout", **{"exception.type": "TimeoutError"}),
        log_record(T0_NS + 3_000_000_000, T2, "53995c3f42cd8ad8", "payment", PAY, "INFO",
                   "p.PaymentService#60 naïve ☃ ok"),
        log_record(T0_NS - 5_000_000_000, None, None, "cart", CART, "INFO", "c.Application#12 started in 3.2 s"),
        log_record(T0_NS + 4_000_000_000, T2, "53995c3f42cd8ad8", "payment", PAY, None,
                   "\tat p.Retry.run(Retry.java:9)"),
    ], schema=S.LOG_SCHEMA)


def comparable(tbl: pa.Table, fmt: str) -> list[dict]:
    """Rows sorted by time, reduced to what ``fmt`` can express (module docstring)."""
    out = []
    for r in tbl.to_pylist():
        r = dict(r)
        attrs = [(a["key"], attribute_value(a)) for a in r.pop(S.ATTRIBUTES) or []]
        attrs = [kv for kv in attrs if kv[0] not in RESOURCE_KEYS]
        if fmt == "nezha-log-csv":
            attrs = [kv for kv in attrs if kv[0] in NEZHA_ATTRIBUTES]
        r[S.ATTRIBUTES] = sorted(attrs)
        out.append(r)
    return sorted(out, key=lambda r: r[S.TIME_NS])


CASES = [pytest.param(fmt, compress, id=f"{fmt}-{'gzip' if compress else 'plain'}")
         for fmt in LOG_FORMATS for compress in (False, True)]


@pytest.mark.parametrize("fmt, compress", CASES)
def test_same_records_read_the_same_in_every_format(tmp_path, fmt, compress):
    expected = contract_logs()
    # A misleading name: the format must be told from the content.
    path = write_logs(fmt, expected, tmp_path / "traces.csv.json", compress=compress)
    result = read_logs(path)
    assert result.formats == {str(path): DETECTED.get(fmt, fmt)}
    assert result.records_rejected == 0 and result.damaged_files == ()
    # the only entry: the startup record has no trace context (kept, counted once per file)
    assert [(r["reason"], r["spans"]) for r in result.rejects.to_pylist()] == [(f"1 record(s) {NO_TRACE_CONTEXT}", 0)]
    assert result.logs.schema == S.LOG_SCHEMA
    assert comparable(result.logs, fmt) == comparable(expected, fmt)


@pytest.mark.parametrize("fmt", LOG_FORMATS)
def test_log_format_is_told_from_content(fmt):
    head = encode(fmt, contract_logs())[:1 << 16]
    detected = detect_format(head)
    assert detected == DETECTED.get(fmt, fmt) and is_log_format(detected)
    assert detected in READER_LOG_FORMATS


def test_span_formats_are_not_log_formats(tmp_path):
    for fmt in ("otlp-json", "otlp-proto", "otlp-proto-prefixed", "jaeger-json", "zipkin-json", "csv"):
        path = write(fmt, contract_trace(), tmp_path / f"x.{fmt}")
        assert not is_log_format(detect_format(path.read_bytes()[:1 << 16])), fmt


def test_a_directory_of_spans_and_logs_loses_and_rejects_nothing(tmp_path):
    spans, logs = contract_trace(), contract_logs()
    span_files = [write(f, spans, tmp_path / f"s{i}.bin", compress=bool(i % 2))
                  for i, f in enumerate(("otlp-json", "otlp-proto", "csv"))]
    log_files = [write_logs(f, logs, tmp_path / f"l{i}.bin", compress=bool(i % 2))
                 for i, f in enumerate(("otlp-logs-json", "otlp-logs-proto", "json-lines-logs", "nezha-log-csv"))]
    read = read_spans(tmp_path)
    assert read.n_spans == len(span_files) * spans.num_rows and read.spans_rejected == 0
    assert set(read.formats) == {str(p) for p in span_files}
    notes = {(r["source"], r["reason"], r["spans"]) for r in read.rejects.to_pylist()}
    assert notes == {(str(p), LOG_FILE_NOTE.format(format=detect_format(_head(p))), 0) for p in log_files}
    read_l = read_logs(tmp_path)
    assert read_l.n_records == len(log_files) * logs.num_rows and read_l.records_rejected == 0
    assert set(read_l.formats) == {str(p) for p in log_files}
    notes = {(r["source"], r["reason"], r["spans"]) for r in read_l.rejects.to_pylist()
             if NO_TRACE_CONTEXT not in r["reason"]}
    assert notes == {(str(p), SPAN_FILE_NOTE.format(format=detect_format(_head(p))), 0) for p in span_files}


def _head(path) -> bytes:
    import gzip

    data = path.read_bytes()
    return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)[:1 << 16]


def test_only_the_other_kind_raises_with_the_note(tmp_path):
    write_logs("json-lines-logs", contract_logs(), tmp_path / "a.log")
    with pytest.raises(NoSpansError, match="a log file"):
        read_spans(tmp_path)
    (tmp_path / "b").mkdir()
    write("otlp-json", contract_trace(), tmp_path / "b" / "t.json")
    with pytest.raises(NoLogsError, match="a span file"):
        read_logs(tmp_path / "b")


def test_a_span_store_reads_its_logs_when_it_keeps_them(tmp_path):
    from tracesleuth.ingest import ingest
    from tracesleuth.io import store

    if not hasattr(store.SpanStore, "read_logs"):
        pytest.skip("the span store does not keep log records yet (SpanStore.read_logs)")
    (tmp_path / "in").mkdir()
    files = [write("otlp-json", contract_trace(), tmp_path / "in" / "t.json"),
             write_logs("json-lines-logs", contract_logs(), tmp_path / "in" / "l.jsonl")]
    assert all(f.exists() for f in files)
    ingest(tmp_path / "in", tmp_path / "store")
    result = read_logs(tmp_path / "store")
    assert result.formats == {str(tmp_path / "store"): "store"}
    assert result.n_records == contract_logs().num_rows
