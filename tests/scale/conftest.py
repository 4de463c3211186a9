"""A LocalCluster shared by the scale-out tests (two small worker processes, generous timeouts:
the tests must hold on a busy 2-core machine), and the stores they read."""

from __future__ import annotations

import ast
import subprocess
import sys

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
def serial():
    """A :class:`tracesleuth.scale.Scheduler` that runs every task here, one after another."""
    from tracesleuth.scale import connect

    with connect("serial") as scheduler:
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


@pytest.fixture(scope="session")
def annotated_stores(tmp_path_factory):
    """Two stores of the planted file service (:mod:`tracesleuth.analyses.annotate.synthetic`), whose
    spans carry numeric attributes (features, memory), in parts of 700 spans: 600 requests to derive
    annotations from, and 600 others with 1.5 ms more on two operations to check them against."""
    from tracesleuth.analyses.annotate.synthetic import planted_spans

    stores = []
    for name, seed, delay_ns in (("derive", 1, 0), ("check", 2, 1_500_000)):
        store = SpanStore(tmp_path_factory.mktemp(name) / "store")
        store.append_spans(planted_spans(600, random_state=seed, delay_ns=delay_ns).to_batches(700), part_spans=700)
        stores.append(SpanStore(store.path, create=False))
    return tuple(stores)


@pytest.fixture(scope="session")
def events_store(tmp_path_factory):
    """A synthetic store whose spans carry events (typed and untyped exceptions, plain events),
    status messages and links, in several parts of which one was written before events were kept
    (no status message, events or links columns)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tracesleuth import schema as S
    from tracesleuth.scale.synthetic import synthetic_batches

    spans = pa.Table.from_batches(list(synthetic_batches(1_500, seed=5, hours=1)))
    rng = np.random.default_rng(5)
    rows = spans.select([S.START_NS, S.STATUS]).to_pylist()
    kinds = ["KeyError", "TimeoutError", None]
    events, messages = [], []
    for r in rows:
        draw = rng.random()
        exc = {"time_ns": r[S.START_NS] + 1_000, "name": S.EXCEPTION_EVENT, S.ATTRIBUTES: (
            [] if (kind := kinds[int(rng.integers(3))]) is None else
            [{"key": S.ATTR_EXCEPTION_TYPE, "str": kind, "int": None, "float": None, "bool": None}])}
        plain = {"time_ns": r[S.START_NS] + 500, "name": "retry", S.ATTRIBUTES: []}
        events.append([exc] if draw < 0.04 else [plain, exc] if draw < 0.06 else [plain] if draw < 0.1 else [])
        messages.append("failed" if r[S.STATUS] == "error" else None)
    spans = spans.set_column(spans.column_names.index(S.EVENTS), S.EVENTS, pa.array(events, pa.list_(S.EVENT_TYPE)))
    spans = spans.set_column(spans.column_names.index(S.STATUS_MESSAGE), S.STATUS_MESSAGE, pa.array(messages, pa.string()))
    store = SpanStore(tmp_path_factory.mktemp("events") / "store")
    store.append_spans(spans.to_batches(4_000), part_spans=4_000)
    old = store.span_files()[1]
    pq.write_table(pq.read_table(old).drop_columns(list(S.LATER_SPAN_COLUMNS)), old)
    return SpanStore(store.path, create=False)


@pytest.fixture(scope="session")
def assert_same():
    """``assert_same(table, reference, calls=True)``: a table built partition by partition (Dask or
    serial), collected, equals the in-process ``reference``: frame, schema, endpoint, operations,
    assembly report, root endpoints, dropped attributes and (with ``calls``) call view."""

    def check(table, reference, *, calls: bool = True) -> None:
        collected = table.to_trace_table()
        assert collected.frame.equals(reference.frame), "the tables differ"
        assert collected.frame.schema == reference.frame.schema
        assert (collected.endpoint, collected.operations) == (reference.endpoint, reference.operations)
        assert collected.assembly == reference.assembly
        assert collected.endpoints == reference.endpoints
        assert collected.dropped_attributes == reference.dropped_attributes
        if calls:
            assert collected.calls().equals(reference.calls())

    return check


#: The minutes of TrainTicket's 2023-01-29 the logged store holds (traces and their log records;
#: a fault injected at 08:43:04, another at 08:52:06).
LOGGED_MINUTES = ("08_43", "08_44", "08_45", "08_52", "08_53")


@pytest.fixture
def dask_modules_after():
    """``dask_modules_after(code)``: run the Python statements ``code`` in a new interpreter and
    return the Dask modules it imported (``serial`` must import none)."""

    def run(code: str) -> list[str]:
        probe = (code + "\nimport sys\nprint(sorted(m for m in sys.modules "
                 "if m.split('.')[0] in ('dask', 'distributed')), file=sys.stderr)")
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        return ast.literal_eval(out.stderr.strip().splitlines()[-1])

    return run


@pytest.fixture(scope="session")
def logged_store(tmp_path_factory, shared_data):
    """Five minutes of the TrainTicket day, spans and log records (14,706), in a store."""
    from tracesleuth.ingest import ingest

    day = shared_data / "nezha/trainticket/2023-01-29"
    path = tmp_path_factory.mktemp("logged") / "store"
    ingest([str(day / f"trace/{m}_trace.csv.gz") for m in LOGGED_MINUTES]
           + [str(day / f"log/{m}_log.csv.gz") for m in LOGGED_MINUTES], path)
    store = SpanStore(path, create=False)
    assert store.log_files()
    return store


@pytest.fixture(scope="session")
def incident_store(tmp_path_factory):
    """A seeded incident (exceptions in ``db`` from 400 s on, 2026-01-01T00:00), spans only."""
    import pyarrow.parquet as pq

    from tracesleuth.analyses.diagnose.synthetic import incident_spans
    from tracesleuth.ingest import ingest

    base = tmp_path_factory.mktemp("incident")
    pq.write_table(incident_spans(fault="exception", service="db", random_state=5), base / "spans.parquet")
    ingest([str(base / "spans.parquet")], base / "store")
    store = SpanStore(base / "store", create=False)
    assert not store.log_files()
    return store


@pytest.fixture(scope="session")
def assert_same_telemetry():
    """``assert_same_telemetry(built, reference)``: two diagnosis telemetries hold equal frames
    (spans, requests, log records; schema and row order included)."""

    def check(built, reference) -> None:
        assert built.spans.equals(reference.spans), "the spans differ"
        assert built.spans.schema == reference.spans.schema
        assert built.requests.equals(reference.requests), "the requests differ"
        assert built.requests.schema == reference.requests.schema
        assert (built.logs is None) == (reference.logs is None)
        if reference.logs is not None:
            assert built.logs.equals(reference.logs) and built.logs.schema == reference.logs.schema

    return check
