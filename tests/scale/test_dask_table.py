"""The trace table built on Dask equals the in-process one: frame, endpoint, operations, assembly
report, dropped attributes and call view; on TrainTicket and on a synthetic store of many parts,
whatever the partitioning; and a worker killed mid-run changes nothing."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import polars as pl
import pytest

from tracesleuth.model import build_trace_table
from tracesleuth.model.attributes import (attribute_summary, choose_columns, entry_attribute_columns,
                                          merge_attribute_summaries)
from tracesleuth.scale import dask_trace_table
from tracesleuth.scale.table import shuffle_by_trace

pytestmark = pytest.mark.dask  # a LocalCluster of worker processes (tests/scale/conftest.py)

ENDPOINT = "ts-travel-service:/api/v1/travelservice/trips/left"


def test_trainticket_table_is_the_in_process_table(cluster, trainticket_store, assert_same):
    spans = trainticket_store.read_spans()
    for endpoint in (None, ENDPOINT):
        with dask_trace_table(trainticket_store.path, endpoint, scheduler=cluster, partition_spans=60_000) as table:
            assert table.n_spans == spans.num_rows and len(table.parts) > 1
            assert_same(table, build_trace_table(spans, endpoint))


def test_synthetic_store_of_many_parts_any_partitioning(cluster, synthetic_store, assert_same):
    spans = synthetic_store.read_spans()
    part = np.repeat(np.arange(len(synthetic_store.span_files())),
                     [pl.scan_parquet(f).select(pl.len()).collect().item() for f in synthetic_store.span_files()])
    parts_per_trace = pl.DataFrame({"t": spans.column("trace_id").to_pylist(), "p": part}).group_by("t").agg(
        pl.col("p").n_unique())["p"]
    assert (parts_per_trace > 1).sum() > 10  # traces to be put together by the shuffle
    reference = build_trace_table(spans)
    assert reference.numeric_attribute_columns and reference.categorical_columns  # attributes are exercised
    assert ("session.id", "identifier") in reference.dropped_attributes
    for partition_spans in (4_000, 25_000, 1_000_000):
        with dask_trace_table(synthetic_store.path, scheduler=cluster, partition_spans=partition_spans) as table:
            assert_same(table, reference, calls=partition_spans == 4_000)
    # Other endpoints and a period, from one shuffle.
    low = int(spans.column("start_ns").to_numpy().min()) + 3_600_000_000_000 // 2
    period = (low, low + 3_600_000_000_000)  # straddles two hour partitions
    from tracesleuth.model.table import traces_starting_between

    with shuffle_by_trace(synthetic_store.path, scheduler=cluster, partition_spans=8_000) as partitions:
        assert partitions.endpoints == reference.endpoints
        assert_same(partitions.table("frontend:POST /cart"), build_trace_table(spans, "frontend:POST /cart"),
                    calls=False)
    with shuffle_by_trace(synthetic_store.path, scheduler=cluster, period=period) as partitions:
        assert_same(partitions.table(), build_trace_table(traces_starting_between(spans, *period)), calls=False)


def test_the_threaded_scheduler_builds_the_same_table(synthetic_store, assert_same):
    spans = synthetic_store.read_spans()
    with dask_trace_table(synthetic_store.path, partition_spans=10_000) as table:  # threads, no cluster
        assert_same(table, build_trace_table(spans), calls=False)
        workdir = table.workdir
    assert not workdir.exists()  # closed: the work directory is gone


def test_attribute_columns_chosen_over_partitions_equal_those_chosen_at_once(synthetic_store):
    """The summaries of any split of the requests merge into the same choice (and columns)."""
    entry = build_trace_table(synthetic_store.read_spans())
    attributes = synthetic_store.read_spans().column("attributes")
    rng = np.random.default_rng(0)
    whole = choose_columns(attribute_summary(attributes, 50), 50)
    assert whole.dropped == entry.dropped_attributes
    for max_categories in (1, 2, 50):
        cuts = np.sort(rng.choice(len(attributes), size=7, replace=False))
        pieces = [attributes.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, len(attributes)])]
        merged = merge_attribute_summaries([attribute_summary(p, max_categories) for p in pieces], max_categories)
        assert choose_columns(merged, max_categories) == choose_columns(attribute_summary(attributes, max_categories),
                                                                        max_categories)
    frame, dropped = entry_attribute_columns(attributes, 50)
    assert dropped == whole.dropped and frame.width == len(whole.categorical) + len(whole.numeric)


def test_a_worker_killed_mid_run_gives_the_same_table(cluster, synthetic_store, assert_same):
    """A worker process killed while the requests are built: Dask runs its tasks again elsewhere
    (the nanny restarts it) and the table is the same."""
    reference = build_trace_table(synthetic_store.read_spans())
    pids = list(cluster.client.run(os.getpid).values())
    killed = threading.Event()

    def on_progress(label: str, done: int, total: int) -> None:
        if label == "building the requests" and done == 1 and not killed.is_set():
            killed.set()
            os.kill(pids[0], signal.SIGKILL)

    cluster.on_progress = on_progress
    try:
        with dask_trace_table(synthetic_store.path, scheduler=cluster, partition_spans=3_000) as table:
            assert killed.is_set()
            assert_same(table, reference, calls=False)
    finally:
        cluster.on_progress = None
    cluster.client.wait_for_workers(2, timeout=120)
    assert len(cluster.client.run(os.getpid)) == 2


@pytest.mark.parametrize("partition_spans", [0, -5])
def test_partition_spans_must_be_positive(synthetic_store, partition_spans):
    from tracesleuth.errors import ParameterError

    with pytest.raises(ParameterError, match="partition_spans"):
        dask_trace_table(synthetic_store.path, partition_spans=partition_spans)


def test_the_table_as_a_dask_dataframe_and_parquet(tmp_path, synthetic_store):
    reference = build_trace_table(synthetic_store.read_spans())
    with dask_trace_table(synthetic_store.path, partition_spans=20_000) as table:
        frame = table.frame
        assert frame.npartitions == len(table.parts) and list(frame.columns) == reference.frame.columns
        assert int(frame["latency_ns"].sum().compute()) == int(reference.frame["latency_ns"].sum())
        out = table.to_parquet(tmp_path / "table.parquet")
    again = pl.read_parquet(out).sort(["start_ns", "trace_id", "span_id"])
    assert again.equals(reference.frame)


def test_the_error_rule_and_exception_types_on_dask_are_those_in_process(cluster, events_store, assert_same):
    """Exceptions recorded as events fail their requests and name their types in the call view,
    on Dask as in process, a part of the store written before events were kept included."""
    from tracesleuth import schema as S

    spans = events_store.read_spans()
    assert spans.column(S.EVENTS).null_count > 0  # the old part's spans
    reference = build_trace_table(spans)
    by_status = pl.from_arrow(S.plain_spans(spans.select([S.TRACE_ID, S.STATUS]))).group_by(S.TRACE_ID).agg(
        (pl.col(S.STATUS) == "error").any().alias("status_error"))
    errors = reference.frame.select(S.TRACE_ID, S.ERROR).join(by_status, on=S.TRACE_ID)
    assert errors.filter(pl.col(S.ERROR) & ~pl.col("status_error")).height > 10  # failed by an exception only
    calls = reference.calls()
    assert set(calls[S.EXCEPTION_TYPE].drop_nulls().unique()) == {"KeyError", "TimeoutError"}
    with dask_trace_table(events_store.path, scheduler=cluster, partition_spans=5_000) as table:
        assert len(table.parts) > 1
        assert_same(table, reference)


def test_diagnosis_spans_and_requests_on_the_cluster_are_the_in_process_ones(cluster, logged_store,
                                                                               assert_same_telemetry):
    """``diagnose --scheduler``'s frames built by worker processes (the tasks and their frames
    pickled) equal the in-process ones, log records included."""
    from tracesleuth.analyses.diagnose.telemetry import Telemetry, read_store
    from tracesleuth.scale.telemetry import partitioned_telemetry
    from tracesleuth.units import parse_instant

    at = parse_instant("2023-01-29T08:53:00", "--at")
    reference = Telemetry.from_tables(*read_store(logged_store.path, around_ns=(at, at)))
    built = partitioned_telemetry(logged_store.path, scheduler=cluster, around_ns=(at, at), partition_spans=8_000)
    assert_same_telemetry(built, reference)
