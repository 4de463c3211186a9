"""The ``serial`` scheduler: a span store's trace table built partition by partition in this
process, without Dask (the spans split by trace id on disk first), equals the in-process table:
frame, endpoint, operations, assembly report, dropped attributes and call view, whatever the
partitioning; its analyses' JSON equals the in-process JSON; nothing is left behind."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from tracesleuth.model import build_trace_table
from tracesleuth.model.table import traces_starting_between
from tracesleuth.scale import dask_trace_table
from tracesleuth.scale.table import shuffle_by_trace

HOUR_NS = 3_600_000_000_000


@pytest.mark.parametrize("partition_spans", [3_000, 25_000, 1_000_000])
def test_any_partitioning_gives_the_in_process_table_and_calls(serial, synthetic_store, partition_spans,
                                                               assert_same):
    reference = build_trace_table(synthetic_store.read_spans())
    with dask_trace_table(synthetic_store.path, scheduler=serial, partition_spans=partition_spans) as table:
        assert len(table.by_trace) == -(-table.n_spans // partition_spans)  # every partition holds traces
        assert_same(table, reference)
        workdir = table.workdir
    assert not workdir.exists()


def test_a_projection_of_the_call_view_reads_only_its_columns_and_is_not_kept(serial, synthetic_store):
    reference = build_trace_table(synthetic_store.read_spans())
    columns = ["gap_ns", "request", "operation_key", "span_id"]  # any order, as asked
    with dask_trace_table(synthetic_store.path, scheduler=serial, partition_spans=8_000) as table:
        collected = table.to_trace_table()
        projected = collected.calls(columns=columns)
        assert projected.equals(reference.calls(columns=columns))
        assert projected.columns == columns and "calls" not in collected._cache
        assert collected.calls().equals(reference.calls())          # the whole view, kept
        assert collected.calls(columns=columns).equals(projected)   # now a selection of it
        with pytest.raises(ValueError, match="not columns of the call view"):
            table.calls(collected.part_of_row, collected.frame, columns=["no_such_column"])


def _service_counts(calls):
    return calls.group_by("service", "flag").len()


def test_a_reduction_of_the_call_view_runs_per_partition_and_adds_up(serial, synthetic_store):
    """``map_calls``: each partition's calls (whole requests, with the per-request columns asked
    for) reduced where they are built; the pieces add up to the in-process view's reduction."""
    reference = build_trace_table(synthetic_store.read_spans())
    flags = pl.DataFrame({"flag": np.arange(reference.n_requests) % 3 == 0})
    want = _service_counts(reference.calls().with_columns(flags["flag"].gather(reference.calls()["request"])))
    with dask_trace_table(synthetic_store.path, scheduler=serial, partition_spans=8_000) as table:
        collected = table.to_trace_table()
        pieces = collected.map_calls(_service_counts, columns=["request", "service"], request_columns=flags)
        assert len(pieces) == len(table.parts) > 1 and "calls" not in collected._cache
        got = pl.concat(pieces).group_by("service", "flag").agg(pl.col("len").sum())
        assert got.sort("service", "flag").equals(want.sort("service", "flag"))
        whole = collected.calls()  # kept: one piece from here on
        assert len(collected.map_calls(len)) == 1 and collected.map_calls(len)[0] == whole.height
    (alone,) = reference.map_calls(_service_counts, columns=["service"], request_columns=flags)
    assert alone.sort("service", "flag").equals(want.sort("service", "flag"))
    # In this process too, a table larger than a partition is reduced partition by partition,
    # its view never whole nor kept; each request's calls in one piece, in the view's order.
    pieces = replace(reference, partition_spans=8_000).map_calls(lambda calls: calls)
    assert len(pieces) > 1 and pl.concat(pieces).sort("request", maintain_order=True).equals(reference.calls())


def test_other_endpoints_and_a_period_from_one_split(serial, synthetic_store, assert_same):
    spans = synthetic_store.read_spans()
    with shuffle_by_trace(synthetic_store.path, scheduler=serial, partition_spans=8_000) as partitions:
        assert partitions.endpoints == build_trace_table(spans).endpoints
        assert_same(partitions.table("frontend:POST /cart"), build_trace_table(spans, "frontend:POST /cart"))
    low = int(spans.column("start_ns").to_numpy().min()) + HOUR_NS // 2
    period = (low, low + HOUR_NS)  # straddles two hour partitions
    with shuffle_by_trace(synthetic_store.path, scheduler=serial, period=period, partition_spans=8_000) as partitions:
        assert_same(partitions.table(), build_trace_table(traces_starting_between(spans, *period)))


def test_a_period_of_several_ranges(serial, synthetic_store, assert_same):
    """A period of stretches (a diagnosis's baseline that skips an incident): the traces that start in
    any of them, as the ranges' selections concatenated in-process."""
    import pyarrow as pa

    spans = synthetic_store.read_spans()
    first = int(spans.column("start_ns").to_numpy().min())
    ranges = ((first + HOUR_NS // 4, first + HOUR_NS // 2), (first + 5 * HOUR_NS // 4, first + 2 * HOUR_NS))
    reference = build_trace_table(pa.concat_tables([traces_starting_between(spans, *r) for r in ranges]))
    with dask_trace_table(synthetic_store.path, scheduler=serial, period=ranges, partition_spans=8_000) as table:
        assert_same(table, reference)


def test_light_partitions_carry_the_events_not_the_attributes_and_build_no_table(serial, events_store):
    import pyarrow as pa

    from tracesleuth import schema as S
    from tracesleuth.errors import ParameterError

    with shuffle_by_trace(events_store.path, scheduler=serial, light=True, partition_spans=5_000) as partitions:
        spans = pa.concat_tables([pa.ipc.open_file(f).read_all() for f in partitions.files])
        assert spans.schema.equals(S.SPAN_SCHEMA) and spans.num_rows == events_store.read_spans().num_rows
        for name in (S.ATTRIBUTES, S.STATUS_MESSAGE, S.LINKS):
            assert spans.column(name).null_count == spans.num_rows
        assert spans.column(S.EVENTS).null_count < spans.num_rows
        with pytest.raises(ParameterError, match="without the spans' attributes"):
            partitions.table()


def test_exceptions_and_a_part_written_before_events_were_kept(serial, events_store, assert_same):
    reference = build_trace_table(events_store.read_spans())
    with dask_trace_table(events_store.path, scheduler=serial, partition_spans=5_000) as table:
        assert len(table.parts) > 1
        assert_same(table, reference)


def test_serial_runs_without_dask(synthetic_store, dask_modules_after):
    """Nothing of Dask is imported: ``serial`` is for a machine without it too."""
    assert dask_modules_after(f"from tracesleuth.scale import connect, dask_trace_table\n"
                              f"with connect('serial') as s, dask_trace_table({str(synthetic_store.path)!r}, "
                              f"scheduler=s, partition_spans=10_000) as t:\n    t.to_trace_table().calls()") == []


def test_a_part_that_cannot_be_read_is_named_and_nothing_is_left(serial, tmp_path, synthetic_store):
    import shutil

    from tracesleuth.errors import TraceFormatError

    store = tmp_path / "store"
    shutil.copytree(synthetic_store.path, store)
    part = sorted(store.rglob("*.parquet"))[5]
    part.write_bytes(part.read_bytes()[:-200])  # a torn footer
    with pytest.raises(TraceFormatError, match=part.name):
        dask_trace_table(store, scheduler=serial)
    assert not [p for p in tmp_path.iterdir() if "tracesleuth-work" in p.name]


@pytest.mark.parametrize("command", [
    ["localize"], ["compare", "{store}", "--baseline-time", "{a}/{b}", "--problem-time", "{b}/{c}"], ["table"],
    ["paths"]])
def test_commands_json_equal_in_process(capsys, synthetic_store, command):
    from tracesleuth.cli import main

    start = int(synthetic_store.read_spans().column("start_ns").to_numpy().min()) // 10**9
    if "{store}" not in command:
        command = [command[0], "{store}", *command[1:]]
    argv = [c.format(a=start, b=start + 5400, c=start + 10800, store=synthetic_store.path) for c in command]

    def run(*extra) -> dict:
        code = main([*argv, "--json", *extra])
        out = capsys.readouterr().out
        assert code == 0, out
        doc = json.loads(out)
        for volatile in ("seconds", "scheduler", "output"):
            doc.pop(volatile, None)
        return doc

    assert run("--scheduler", "serial") == run()
    assert not [p for p in synthetic_store.path.parent.iterdir() if "tracesleuth-work" in p.name]


def test_a_part_that_disappears_during_the_split_is_named_and_nothing_is_left(serial, tmp_path, synthetic_store,
                                                                              monkeypatch):
    import shutil

    import tracesleuth.scale.table as table_module
    from tracesleuth.errors import TraceFormatError

    store = tmp_path / "store"
    shutil.copytree(synthetic_store.path, store)
    gone = sorted(store.rglob("*.parquet"))[-1]
    read = table_module.read_part

    def read_then_delete(path, row_group=None, **options):
        gone.unlink(missing_ok=True)  # another process removed a part after the check, mid-run
        return read(path, row_group, **options)

    monkeypatch.setattr(table_module, "read_part", read_then_delete)
    with pytest.raises(TraceFormatError, match=gone.name):
        dask_trace_table(store, scheduler=serial, partition_spans=5_000)
    assert not [p for p in tmp_path.iterdir() if "tracesleuth-work" in p.name]


def test_localization_reads_a_large_table_partition_by_partition_in_this_process(synthetic_store):
    from tracesleuth.analyses.localize import RootCauseLocalization

    table = build_trace_table(synthetic_store.read_spans())
    reference = RootCauseLocalization(random_state=0).fit(table).result_
    pieces = replace(table, partition_spans=8_000)
    assert len(pieces.map_calls(len)) > 1
    assert RootCauseLocalization(random_state=0).fit(pieces).result_.to_dict() == reference.to_dict()
    assert "calls" not in pieces._cache
