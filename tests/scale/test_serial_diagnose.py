"""``diagnose --scheduler``: the diagnosis's spans and requests built partition by partition
(:mod:`tracesleuth.scale.telemetry`) equal the in-process ones, frame for frame and row for row,
whatever the partitioning; with log records and without, with traces cut by the range read; its
``--json`` equals the in-process JSON; nothing is left behind; mistakes are one line, exit 2."""

from __future__ import annotations

import json

import pytest

from tracesleuth.analyses.diagnose import telemetry as T
from tracesleuth.analyses.diagnose.telemetry import Telemetry, read_store
from tracesleuth.cli import main

from tracesleuth.scale.telemetry import partitioned_telemetry
from tracesleuth.units import parse_instant

#: A moment inside the incident of the logged store (tests/scale/conftest.py; injected at 08:52:06).
LOGGED_AT = "2023-01-29T08:53:00"
#: A moment inside the incident of the incident store (from 400 s on).
INCIDENT_AT = "2026-01-01T00:07:30"


def _left_over(store) -> list:
    return [p.name for p in store.path.parent.iterdir() if "tracesleuth-work" in p.name]


@pytest.mark.parametrize("partition_spans", [2_000, 1_000_000])  # split; one partition, read directly
def test_logged_store_any_partitioning(serial, logged_store, partition_spans, assert_same_telemetry):
    at = parse_instant(LOGGED_AT, "--at")
    reference = Telemetry.from_tables(*read_store(logged_store.path, around_ns=(at, at)))
    built = partitioned_telemetry(logged_store.path, scheduler=serial, around_ns=(at, at),
                                  partition_spans=partition_spans)
    assert reference.logs is not None and reference.logs.height > 10_000
    assert built.spans.height == reference.spans.height > 20_000
    assert_same_telemetry(built, reference)
    assert not _left_over(logged_store)


def test_whole_store_with_exceptions_and_a_part_written_before_events_were_kept(serial, events_store,
                                                                                assert_same_telemetry):
    reference = Telemetry.from_tables(*read_store(events_store.path))
    assert reference.spans["exception_type"].is_not_null().sum() > 10 and reference.logs is None
    for partition_spans in (5_000, None):
        assert_same_telemetry(partitioned_telemetry(events_store.path, scheduler=serial,
                                                    partition_spans=partition_spans), reference)


def test_traces_cut_by_the_range_read_are_cut_the_same_way(serial, synthetic_store, monkeypatch,
                                                           assert_same_telemetry):
    """The range read starts and ends inside traces (they lose their first or their last spans; a
    cut trace's first remaining span is its root, as in-process), in the middle of the store's
    hours."""
    import polars as pl

    spans = pl.from_arrow(synthetic_store.read_spans(dictionary=False).select(["trace_id", "start_ns"]))
    traces = spans.group_by("trace_id").agg(pl.col("start_ns").min().alias("a"), pl.col("start_ns").max().alias("b"))
    first = int(traces["a"].min())
    later = traces.filter((pl.col("a") > first + 100 * 60 * 10**9) & (pl.col("b") > pl.col("a"))).sort("a").row(0)
    high = (later[1] + later[2]) // 2 + 1   # inside a trace of the third hour
    at = high - T.AFTER_S * 10**9

    def straddled(low):
        return traces.filter((pl.col("a") < low) & (pl.col("b") >= low)).height

    history_s = next(h for h in range(40 * 60, 80 * 60) if straddled(at - h * 10**9))
    monkeypatch.setattr(T, "HISTORY_S", history_s)
    low, high = T.read_range((at, at))
    assert first < low and straddled(low) and straddled(high)
    reference = Telemetry.from_tables(*read_store(synthetic_store.path, around_ns=(at, at)))
    assert_same_telemetry(partitioned_telemetry(synthetic_store.path, scheduler=serial, around_ns=(at, at),
                                                partition_spans=4_000), reference)


@pytest.mark.parametrize("partition_spans", [None, 3_000])  # the store read as one partition; split
@pytest.mark.parametrize("store, at", [("logged_store", LOGGED_AT), ("incident_store", INCIDENT_AT)])
def test_diagnose_json_equals_in_process(capsys, request, monkeypatch, store, at, partition_spans):
    import tracesleuth.scale.telemetry as by_partitions

    store = request.getfixturevalue(store)
    if partition_spans:
        monkeypatch.setattr(by_partitions, "PARTITION_SPANS", partition_spans)

    def run(*extra) -> dict:
        code = main(["diagnose", str(store.path), "--at", at, "--json", *extra])
        out = capsys.readouterr().out
        assert code == 0, out
        return json.loads(out)

    reference = run()
    assert reference["services"]
    assert run("--scheduler", "serial") == reference
    assert not _left_over(store)


def test_diagnose_with_a_problem_period_given(capsys, logged_store):
    argv = ["diagnose", str(logged_store.path), "--time", "2023-01-29T08:52:10/2023-01-29T08:53:05", "--json"]
    assert main(argv) == 0
    reference = capsys.readouterr().out
    assert main([*argv, "--scheduler", "serial"]) == 0
    assert capsys.readouterr().out == reference


@pytest.mark.parametrize("argv, words", [
    (["--scheduler", ""], "--scheduler"),
    (["--at", "2020-01-01T00:00", "--scheduler", "serial"], "outside the store"),
])
def test_mistakes_are_one_line_and_exit_2(capsys, incident_store, argv, words):
    code = main(["diagnose", str(incident_store.path), *argv])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_not_a_store_is_named(capsys, tmp_path):
    assert main(["diagnose", str(tmp_path), "--scheduler", "serial"]) == 2
    assert "not a span store" in capsys.readouterr().err


def test_serial_diagnose_runs_without_dask(incident_store, dask_modules_after):
    """Nothing of Dask is imported by ``diagnose --scheduler serial``."""
    assert dask_modules_after(f"from tracesleuth.cli import main\n"
                              f"assert main(['diagnose', {str(incident_store.path)!r}, '--at', {INCIDENT_AT!r}, "
                              f"'--scheduler', 'serial', '--json']) == 0") == []


def test_analyze_at_json_equals_in_process(capsys, tmp_path, monkeypatch, logged_store):
    """``analyze --at --scheduler``: the diagnosis from the partitions, the problem period's table and
    the baseline's (two stretches of traffic here: a period of several ranges) from the store."""
    import tracesleuth.scale.telemetry as by_partitions

    monkeypatch.setattr(by_partitions, "PARTITION_SPANS", 8_000)
    def run(*extra) -> dict:
        code = main(["analyze", str(logged_store.path), "--at", LOGGED_AT, "--only", "compare", "--json",
                     "-o", str(tmp_path / "r.html"), *extra])
        out = capsys.readouterr().out
        assert code == 0, out
        doc = json.loads(out)
        doc["analyses"]["compare"].pop("seconds")
        return doc

    reference = run()
    assert reference["diagnosis"]["baseline"]["stretches"] == 2 and reference["analyses"]["compare"]["services"]
    assert run("--scheduler", "serial") == reference
    assert not _left_over(logged_store)
