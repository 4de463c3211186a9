"""The store's Hive partitions by hour: where spans go, what other readers see, old flat stores,
and the collector's conversion of a segment that spans several hours across a crash."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from spans import span, table
from tracesleuth import schema as S
from tracesleuth.io.store import MANIFEST, MAX_OPEN_PARTITIONS, PARTITION_NS, SpanStore, partition_name

HOUR_MS = 3_600_000
BASE_MS = 1_675_000_800_000  # 2023-01-29T14:00:00Z


def _spans(hours: list[int]) -> pa.Table:
    """One span per entry, starting 1 ms into the given hour after BASE_MS."""
    return table(span(f"{i // 3 + 1:x}", f"{i + 1:x}", None, "svc", "op", h * HOUR_MS + 1, h * HOUR_MS + 2,
                      base_ms=BASE_MS) for i, h in enumerate(hours))


def _hours_of(path) -> set:
    return set((pq.read_table(path).column(S.START_NS).to_numpy() // PARTITION_NS).tolist())


def test_spans_go_to_the_hour_they_start_in(tmp_path):
    hours = [0, 1, 0, 2, 1, 0, 25]  # interleaved, and one a day later
    store = SpanStore(tmp_path / "s")
    assert store.layout == "hour" and store.manifest()["version"] == 2
    parts = store.append_spans(_spans(hours).to_batches(max_chunksize=2))
    folders = sorted(p.parent.relative_to(store.path).as_posix() for p in parts)
    assert folders == ["spans/date=2023-01-29/hour=14", "spans/date=2023-01-29/hour=15",
                       "spans/date=2023-01-29/hour=16", "spans/date=2023-01-30/hour=15"]
    assert sorted(p.name for p in parts) == [f"part-{k:06d}.parquet" for k in range(4)]  # one numbering
    for part in parts:  # every span of a partition starts in its hour
        (hour,) = _hours_of(part)
        assert part.parent.relative_to(store.path / "spans").as_posix() == partition_name(hour)
    assert store.read_spans().num_rows == len(hours)
    assert store.span_files() == sorted(parts)  # in time order


def test_other_readers_see_the_partition_columns(tmp_path):
    store = SpanStore(tmp_path / "s")
    store.append_spans(_spans([0, 0, 1]).to_batches())
    data = ds.dataset(store.path / "spans", format="parquet", partitioning="hive").to_table()
    assert data.num_rows == 3 and {"date", "hour"} <= set(data.column_names)
    assert sorted(data.column("hour").to_pylist()) == [14, 14, 15]  # (pyarrow infers ints)
    assert data.select(list(S.SPAN_SCHEMA.names)).schema.equals(S.SPAN_SCHEMA, check_metadata=False)


def test_many_hours_at_once_lose_nothing(tmp_path):
    rng = np.random.default_rng(0)
    hours = rng.integers(0, 3 * MAX_OPEN_PARTITIONS, 500).tolist()
    spans = _spans(hours)
    store = SpanStore(tmp_path / "s")
    parts = store.append_spans(spans.to_batches(max_chunksize=7))
    assert all(len(_hours_of(p)) == 1 for p in parts)
    stored = store.read_spans(dictionary=False)
    assert sorted(stored.column(S.SPAN_ID).to_pylist()) == sorted(spans.column(S.SPAN_ID).to_pylist())
    numbers = sorted(int(p.stem.split("-")[1]) for p in parts)
    assert numbers == list(range(len(parts)))  # numbers unique across partitions


def test_a_flat_store_of_version_1_stays_readable_and_flat(tmp_path):
    old = tmp_path / "old"
    (old / "spans").mkdir(parents=True)
    (old / "rejects").mkdir()
    (old / MANIFEST).write_text(json.dumps({"version": 1, "created": 0, "ingests": []}))
    pq.write_table(_spans([0, 1]), old / "spans" / "part-000000.parquet")
    store = SpanStore(old)
    assert store.layout == "flat" and store.read_spans().num_rows == 2
    more = store.append_spans(_spans([3]).to_batches())
    assert [p.relative_to(old).as_posix() for p in more] == ["spans/part-000001.parquet"]
    assert store.read_spans().num_rows == 3 and json.loads((old / MANIFEST).read_text())["version"] == 1


def test_a_segment_over_two_hours_is_converted_once_across_a_crash(tmp_path):
    from tracesleuth.collector._flush import SegmentPartStore, convert_segment
    from tracesleuth.collector._wal import encode_record, segment_name

    store = SegmentPartStore(tmp_path / "store")
    (store.path / "wal").mkdir()
    spans = _spans([1, 0, 1, 0, 0])
    path = store.path / "wal" / f"{segment_name(5)}.wal"
    path.write_bytes(encode_record(spans, S.REJECT_SCHEMA.empty_table()))
    saved = path.read_bytes()
    first = convert_segment(store, path)
    assert first.spans == 5 and not first.already_done
    parts = store.span_files()
    assert [p.name for p in parts] == ["part-000000-seg-000000000005.parquet", "part-000001-seg-000000000005.parquet"]
    parts[1].unlink()  # as if the crash came between the two partitions' parts
    path.write_bytes(saved)
    again = convert_segment(store, path)
    assert (again.spans, again.already_done) == (2, False)  # only the missing hour
    path.write_bytes(saved)
    assert convert_segment(store, path).already_done
    assert sorted(store.read_spans(dictionary=False).column(S.SPAN_ID).to_pylist()) == sorted(
        spans.column(S.SPAN_ID).to_pylist())
