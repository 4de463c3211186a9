"""The rules every log reader shares: severity names and numbers, timestamps as loggers write
them, and telling OTLP log requests from span requests by content."""

from __future__ import annotations

import pyarrow as pa
import pytest

from log_writers import encode
from test_logs_contract import contract_logs
from tracesleuth import schema as S
from tracesleuth.io import detect_format, severity_number
from tracesleuth.io._logs import SEVERITY_BY_NAME, epoch_ns, severity_from_text, time_ns


@pytest.mark.parametrize("text, number", [
    ("TRACE", 1), ("finest", 1), ("DEBUG", 5), ("Verbose", 5), ("FINER", 5), ("fine", 6), ("CONFIG", 7),
    ("INFO", 9), ("information", 9), ("Informational", 9), ("NOTICE", 10), ("WARN", 13), ("warning", 13),
    ("WRN", 13), ("ERROR", 17), ("err", 17), ("SEVERE", 17), ("CRIT", 18), ("DPANIC", 18), ("PANIC", 19),
    ("ALERT", 19), ("CRITICAL", 21), ("FATAL", 21), ("emerg", 21), ("INFO3", 11), ("ERROR4", 20),
    ("SEVERITY_NUMBER_WARN2", 14), ("SEVERITY_NUMBER_UNSPECIFIED", 0), ("NOTSET", 0), ("17", 17), (24, 24),
    (" Error ", 17), ("LOUD", None), ("25", None), (30, None), ("", None), (True, None), (None, None),
])
def test_severity_numbers_follow_the_opentelemetry_table(text, number):
    assert severity_number(text) == number


def test_every_name_maps_into_a_level():
    assert all(0 <= n <= 24 for n in SEVERITY_BY_NAME.values())
    assert severity_number("ERROR") == S.SEVERITY_ERROR


def test_level_written_at_the_start_of_a_message():
    got = severity_from_text(pa.array([
        "16:43:25.207 INFO  t.s.TravelServiceImpl#457 x", "2023-01-29 08:42:22,383 WARNING cart: x",
        "2023-01-29T08:42:22.383Z [ERROR] x", "08:42:22 hello world", "INFO without a time", None])).to_pylist()
    assert got == ["INFO", "WARNING", "ERROR", None, None, None]


@pytest.mark.parametrize("value, ns, naive", [
    ("2023-01-29T08:42:22.383150913Z", 1674981742383150913, False),
    ("2023-01-29T09:42:22.5+01:00", 1674981742500000000, False),
    ("2023-01-29T09:42:22.5+0100", 1674981742500000000, False),
    ("2023-01-29 08:42:22,383", 1674981742383000000, True),
    ("2023-01-29T08:42Z", 1674981720000000000, False),
    (1674981742, 1674981742000000000, False), (1674981742.383, 1674981742383000000, False),
    (1674981742383, 1674981742383000000, False), (1674981742383150, 1674981742383150000, False),
    (1674981742383150913, 1674981742383150913, False), ("1674981742383", 1674981742383000000, False),
    ("yesterday", None, False), (-5, None, False), (True, None, False), ("2023-13-45T00:00:00Z", None, False),
])
def test_times_as_loggers_write_them(value, ns, naive):
    assert time_ns(value) == (ns, naive)


def test_epoch_units_do_not_overlap():
    # the earliest plausible date (1973) in each unit is above the previous unit's range
    assert epoch_ns(99_999_999_999) == 99_999_999_999 * 10**9
    assert epoch_ns(100_000_000_000) == 100_000_000_000 * 10**6


@pytest.mark.parametrize("fmt", ["otlp-logs-proto", "otlp-logs-proto-prefixed"])
def test_log_requests_are_told_from_span_requests(fmt):
    data = encode(fmt, contract_logs())
    assert detect_format(data) == "otlp-logs-proto"
    rows = contract_logs().to_pylist()
    for r in rows:  # a record without a time opens with its severity number or a later field
        r[S.TIME_NS] = 0
    assert detect_format(encode(fmt, pa.Table.from_pylist(rows, schema=S.LOG_SCHEMA))) == "otlp-logs-proto"
