"""The log readers on real recorded logs: the Nezha TrainTicket log CSV of 2023-01-29 (MIT,
../shared/data/nezha): 48 one-minute files in ``log/`` and the fault-free minute in
``fault_free_log/``."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from tracesleuth import schema as S
from tracesleuth.io import read_logs, read_spans

DAY = "nezha/trainticket/2023-01-29"
#: Records in log/ (the data README's count) and what the fault-free minute adds.
LOG_RECORDS, FAULT_FREE_RECORDS = 104_200, 2_489
#: Records whose TimeUnixNano is an overflowed -6795364578871345152 (ERROR records of ts-travel2
#: at 09:20-09:21): their time comes from the Timestamp column.
OVERFLOWED_TIMES = 45


@pytest.fixture(scope="module")
def day(shared_data):
    return read_logs([shared_data / DAY / "log", shared_data / DAY / "fault_free_log"])


def test_every_record_is_read_with_its_trace_context(day, shared_data):
    assert len(day.formats) == 49 and set(day.formats.values()) == {"nezha-log-csv"}
    assert day.n_records == LOG_RECORDS + FAULT_FREE_RECORDS and day.records_rejected == 0
    assert day.damaged_files == ()
    logs = day.logs
    assert logs.column(S.TRACE_ID).null_count == 0 and logs.column(S.SPAN_ID).null_count == 0
    fault_free = str(shared_data / DAY / "fault_free_log" / "08_50_log.csv.gz")
    rejects = day.rejects.to_pylist()
    assert sum(r["source"] != fault_free and r["field"] == "TimeUnixNano" for r in rejects) == OVERFLOWED_TIMES
    assert {r["field"] for r in rejects} <= {"TimeUnixNano", S.TIME_NS}  # and the "no time zone" counts
    assert all(r["spans"] == 0 for r in rejects)  # warnings only: nothing lost
    assert fault_free in day.formats


def test_services_levels_and_attributes(day):
    logs = day.logs
    services = set(logs.column(S.SERVICE).unique().to_pylist())
    assert len(services) == 27 and all(s.startswith("ts-") and s.endswith("-service") for s in services)
    counts = dict(zip(*[c.to_pylist() for c in logs.group_by(S.SEVERITY_TEXT).aggregate(
        [(S.SEVERITY_TEXT, "count")]).columns]))
    assert counts == {"INFO": 101_687, "WARN": 4_084, "ERROR": 918}
    assert pc.sum(pc.greater_equal(logs.column(S.SEVERITY_NUMBER), S.SEVERITY_ERROR)).as_py() == 918
    first = logs.slice(0, 1).to_pylist()[0]
    assert first[S.INSTANCE].startswith(first[S.SERVICE] + "-")
    assert {a["key"] for a in first[S.ATTRIBUTES]} == {"log.iostream", "k8s.container.name", "host.ip"}
    assert not pc.any(pc.ends_with(logs.column(S.BODY), "\n")).as_py()
    times = logs.column(S.TIME_NS)
    assert pc.min(times).as_py() > 1_674_900_000 * 10**9 and pc.max(times).as_py() < 1_675_100_000 * 10**9


@pytest.mark.parametrize("logs_dir, traces_dir, expected", [("log", "trace", LOG_RECORDS),
                                                             ("fault_free_log", "fault_free", FAULT_FREE_RECORDS)])
def test_every_record_joins_a_span_of_its_minute(shared_data, logs_dir, traces_dir, expected):
    folder = shared_data / DAY
    logs = read_logs(folder / logs_dir).logs
    minutes = sorted(f.name.split("_log")[0] for f in (folder / logs_dir).glob("*.csv.gz"))
    spans = read_spans([folder / traces_dir / f"{m}_trace.csv.gz" for m in minutes]).spans
    keys = set(zip(spans.column(S.TRACE_ID).to_pylist(), spans.column(S.SPAN_ID).to_pylist()))
    pairs = zip(logs.column(S.TRACE_ID).to_pylist(), logs.column(S.SPAN_ID).to_pylist())
    assert logs.num_rows == expected and sum(p in keys for p in pairs) == expected
