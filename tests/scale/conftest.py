"""A LocalCluster shared by the scale-out tests (two small worker processes, generous timeouts:
the tests must hold on a busy 2-core machine), and the stores they read."""

from __future__ import annotations

import pytest

from tracesleuth.io.store import SpanStore

NEZHA = "nezha/trainticket/2023-01-29/trace"


@pytest.fixture(scope="session")
def cluster():
    """A :class:`tracesleuth.scale.Scheduler` on a LocalCluster of 2 worker processes of 1 thread."""
    from tracesleuth.scale import connect

    with connect("local", n_workers=2, memory_limit=2 * 2**30) as scheduler:
        yield scheduler


@pytest.fixture(scope="session")
def trainticket_store(tmp_path_factory, shared_data):
    """The TrainTicket day (328,848 spans) ingested into a store (Hive partitions by hour)."""
    from tracesleuth.ingest import ingest

    path = tmp_path_factory.mktemp("trainticket") / "store"
    ingest([str(shared_data / NEZHA)], path)
    return SpanStore(path, create=False)


@pytest.fixture(scope="session")
def synthetic_store(tmp_path_factory):
    """60,000 synthetic spans over 3 hours in 15 parts (3 Hive partitions); some traces' spans in
    several parts."""
    from tracesleuth.scale.synthetic import write_synthetic_store

    made = write_synthetic_store(tmp_path_factory.mktemp("synthetic") / "store", 60_000, seed=3, part_spans=3_000,
                                 chunk_traces=800)
    assert made.parts >= 12
    return SpanStore(made.path, create=False)
