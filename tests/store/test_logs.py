"""Logs in the store: a second table partitioned like the spans, written in the ingest's
transaction, templated with the store's miner, read by span, service and period; ``info`` counts
them (records, joined to a span of the store, rejected, templates)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracesleuth import schema as S
from tracesleuth.cli import main
from tracesleuth.errors import TraceFormatError
from tracesleuth.ingest import IngestInterrupted, file_kinds, ingest
from tracesleuth.io import read_logs
from tracesleuth.io.store import LOGS, STAGING, TEMPLATES, SpanStore, Transaction, is_store

NEZHA = "nezha/trainticket/2023-01-29"
T0_NS = 1_674_981_742_000_000_000  # 2023-01-29T08:42:22Z
SPAN_HEADER = "TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration\n"
LOG_HEADER = "Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log\n"


def _log_row(k: int, trace: str, span_id: str, text: str, pod: str = "ts-travel-service-64469b5b48-25zj6") -> str:
    body = json.dumps({"log": f"16:42:22.382 INFO  t.s.TravelServiceImpl#532 {text}\n", "stream": "stdout",
                       "time": "2023-01-29T08:42:22.383150913Z"}).replace('"', '""')
    return f'2023-01-29T08:42:22.38315091{k}Z,{T0_NS + k},33.33.33.116,{pod},server,{trace},{span_id},"{body}"\n'


def _small_day(folder):
    """One span file and one log file in one directory: three records of the one span, one of a
    span the store does not have, one without trace context."""
    folder.mkdir()
    trace, span_id = "ffc8ca7e4c8f06c75142c880d5595d96", "439bc949a9eeb0cc"
    (folder / "08_43_trace.csv").write_text(
        SPAN_HEADER + f"{trace},{span_id},root,ts-travel-service-64469b5b48-25zj6,/api,{T0_NS},{T0_NS + 5000},5\n")
    (folder / "08_43_log.csv").write_text(LOG_HEADER + "".join([
        _log_row(1, trace, span_id, "Route is: Route(id=1234, distance=50)"),
        _log_row(2, trace, span_id, "Route is: Route(id=5678, distance=75)"),
        _log_row(3, trace, span_id, "Routes Response is : Response(status=1, msg=Success)"),
        _log_row(4, "0123456789abcdef0123456789abcdef", "0123456789abcdef", "Route is: Route(id=99, stations=[])"),
        _log_row(5, "", "", "Scheduled refresh done in 12 ms"),
    ]))
    return folder


def test_spans_and_logs_of_one_directory_go_in_one_ingest(tmp_path, capsys):
    src = _small_day(tmp_path / "in")
    assert file_kinds([src / "08_43_trace.csv", src / "08_43_log.csv"]) == {
        str(src / "08_43_trace.csv"): "spans", str(src / "08_43_log.csv"): "logs"}
    summary = ingest(str(src), tmp_path / "s")
    assert (summary.spans_read, summary.logs_read, summary.logs_rejected) == (1, 5, 0)
    assert summary.log_formats == {str(src / "08_43_log.csv"): "nezha-log-csv"} and len(summary.log_parts) == 1
    assert summary.log_parts[0].startswith("logs/date=2023-01-29/hour=08/part-")
    store = SpanStore(tmp_path / "s", create=False)
    logs = store.read_logs()
    assert logs.num_rows == 5 and logs.schema == S.LOG_SCHEMA and logs.column(S.TEMPLATE_ID).null_count == 0
    ids = logs.column(S.TEMPLATE_ID).to_pylist()
    assert ids[0] == ids[1] != ids[2]  # the same statement, its variables masked; another statement
    assert store.log_templates().num_rows == summary.templates >= 3
    # bad input kept and counted: a log whose span is not in the store, a log without trace context
    assert store.log_summary() == {"records": 5, "joined": 3, "rejected": 0, "templates": summary.templates}
    assert main(["info", str(tmp_path / "s"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["logs"] == {"records": 5, "joined": 3, "rejected": 0, "templates": summary.templates}
    assert main(["info", str(tmp_path / "s")]) == 0
    assert "logs: 5 records, 3 written in a span of the input (60.0%), 2 not, 0 rejected" in capsys.readouterr().out
    assert read_logs(tmp_path / "s").logs.equals(logs)  # tracesleuth.io.read_logs of a store: the store's


def test_file_kinds_sniff_the_head_as_the_readers_see_it(tmp_path):
    import gzip
    from pathlib import Path

    from tracesleuth.io._source import head_bytes, open_binary, peek

    src = _small_day(tmp_path / "in")
    text = (src / "08_43_log.csv").read_bytes() * 400  # > 64 KiB
    (tmp_path / "big.csv.gz").write_bytes(gzip.compress(text))
    (tmp_path / "cut.csv.gz").write_bytes(gzip.compress(text)[:300])
    for f in (src / "08_43_log.csv", tmp_path / "big.csv.gz", tmp_path / "cut.csv.gz"):
        with open_binary(Path(f)) as stream:
            head, _ = peek(stream)
        assert head_bytes(f) == head
    assert set(file_kinds([tmp_path / "big.csv.gz", tmp_path / "cut.csv.gz"]).values()) == {"logs"}


def test_info_on_files_counts_the_log_files_among_them(tmp_path, capsys):
    src = _small_day(tmp_path / "in")
    assert main(["info", str(src), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["logs"] == {"records": 5, "joined": 3, "rejected": 0, "templates": None}  # files: not templated
    assert doc["spans"] == 1


def test_read_logs_by_span_service_and_period(tmp_path):
    store = SpanStore(tmp_path / "s")
    rng = np.random.default_rng(0)
    n = 600
    times = T0_NS + np.sort(rng.integers(0, 3 * 3_600_000_000_000, n))  # three hours
    spans = [f"{k % 50 + 1:016x}" for k in range(n)]
    logs = pa.table({S.TIME_NS: times, S.TRACE_ID: [f"{k % 50 + 1:032x}" for k in range(n)], S.SPAN_ID: spans,
                     S.SERVICE: [f"svc-{k % 3}" for k in range(n)], S.INSTANCE: [None] * n,
                     S.SEVERITY_NUMBER: pa.array([9] * n, pa.int32()), S.SEVERITY_TEXT: ["INFO"] * n,
                     S.BODY: [f"line {k}" for k in range(n)], S.ATTRIBUTES: pa.nulls(n, S.LOG_SCHEMA.field(S.ATTRIBUTES).type),
                     S.TEMPLATE_ID: pa.array([1] * n, pa.int64())}, schema=S.LOG_SCHEMA)
    parts = store.append_logs(logs.to_batches(max_chunksize=64))
    assert len({p.parent for p in parts}) == 4  # 08:42 + 3 h spans four hour partitions
    whole = store.read_logs()
    assert whole.num_rows == n
    wanted = spans[:5]
    of_spans = store.read_logs(span_ids=pa.array(wanted).dictionary_encode())  # (as the store reads ids)
    assert store.read_logs(span_ids=wanted).equals(of_spans)
    assert of_spans.num_rows == sum(s in wanted for s in spans) > 0
    assert set(of_spans.column(S.SPAN_ID).to_pylist()) == set(wanted)
    lo, hi = int(times[100]), int(times[250])
    window = store.read_logs(services=["svc-1"], start_ns=lo, end_ns=hi, columns=[S.TIME_NS, S.BODY])
    expected = whole.filter(pc.and_(pc.and_(pc.greater_equal(whole[S.TIME_NS], lo), pc.less(whole[S.TIME_NS], hi)),
                                    pc.equal(whole[S.SERVICE], "svc-1")))
    assert window.column_names == [S.TIME_NS, S.BODY] and window.num_rows == expected.num_rows > 0
    assert window.column(S.BODY).to_pylist() == expected.column(S.BODY).to_pylist()
    assert store.read_logs(start_ns=int(times[-1]) + 1).num_rows == 0
    with pytest.raises(TraceFormatError, match="no such log column"):
        store.read_logs(columns=["message"])


def test_a_store_without_logs_says_so(tmp_path, capsys):
    src = tmp_path / "a.csv"
    src.write_text("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\na1,01,,web,home,100,200\n")
    ingest(str(src), tmp_path / "s")
    assert SpanStore(tmp_path / "s").log_summary() == {"records": 0, "joined": 0, "rejected": 0, "templates": 0}
    assert main(["info", str(tmp_path / "s")]) == 0
    assert "logs: none recorded" in capsys.readouterr().out


def test_an_interrupted_ingest_of_logs_commits_neither_logs_nor_templates(tmp_path):
    src = _small_day(tmp_path / "in")
    ingest(str(src / "08_43_trace.csv"), tmp_path / "s")
    store = SpanStore(tmp_path / "s", create=False)

    def stop(batch):
        raise KeyboardInterrupt

    with pytest.raises(IngestInterrupted, match="nothing committed"):
        ingest(str(src), store, on_batch=stop, force=True)
    assert store.log_files() == [] and not (store.path / TEMPLATES).exists()
    assert not (store.path / STAGING).exists()


def test_ingests_template_one_after_another(tmp_path):
    src = _small_day(tmp_path / "in")
    first = Transaction(tmp_path / "s")
    first.begin()
    mine = first.templates()
    log_batches = read_logs(str(src / "08_43_log.csv")).logs.to_batches()
    from tracesleuth.io.store import with_templates as _with_templates

    first.append(LOGS, [_with_templates(b, mine) for b in log_batches])
    seen = {}

    def second():  # waits for the templates lock, then loads what the first committed
        other = Transaction(tmp_path / "s")
        other.begin()
        seen["templates"] = other.templates().templates().num_rows
        other.abort()

    waiter = threading.Thread(target=second)
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive() and "templates" not in seen  # blocked while the first templates
    first.commit({"paths": ["x"], "spans_read": 0, "spans_rejected": 0, "logs_read": 5})
    waiter.join(30)
    assert seen["templates"] == mine.templates().num_rows > 0
    assert is_store(tmp_path / "s") and (tmp_path / "s" / TEMPLATES).exists()


def test_the_nezha_day_spans_and_logs_together(tmp_path, shared_data, capsys):
    """The TrainTicket day: traces, logs, the fault-free minute and its logs, in one ingest;
    every log record joins a span of the store, none is rejected."""
    day = shared_data / NEZHA
    parts = [day / "trace", day / "log", day / "fault_free", day / "fault_free_log"]
    summary = ingest([str(p) for p in parts], tmp_path / "s")
    in_files = read_logs(str(day / "log")).n_records
    fault_free = read_logs(str(day / "fault_free_log")).n_records
    assert in_files == 104_200 and fault_free > 0
    assert summary.logs_read == in_files + fault_free and summary.logs_rejected == 0
    assert main(["info", str(tmp_path / "s"), "--json"]) == 0
    logs = json.loads(capsys.readouterr().out)["logs"]
    assert logs["records"] == logs["joined"] == in_files + fault_free and logs["rejected"] == 0
    assert 0 < logs["templates"] < logs["records"] // 10  # statements, not records
    with pytest.raises(Exception, match="already in the store"):  # the same day again: nothing new
        ingest([str(p) for p in parts], tmp_path / "s")
    assert SpanStore(tmp_path / "s").log_summary()["records"] == in_files + fault_free
