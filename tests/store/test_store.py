"""The span store's writing: parts, row groups, and what an error leaves behind."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spans import span, table
from tracesleuth import schema as S
from tracesleuth.io.store import SpanStore


def _spans(n: int) -> pa.Table:
    return table([span(f"{i // 4 + 1:032x}", f"{i + 1:016x}", None, "svc", f"op{i % 3}", i, i + 1)
                  for i in range(n)])


def test_parts_and_row_groups(tmp_path, monkeypatch):
    import tracesleuth.io.store as store_module

    monkeypatch.setattr(store_module, "ROW_GROUP_SPANS", 10)
    spans = _spans(95)
    store = SpanStore(tmp_path / "s")
    parts = store.append_spans(spans.to_batches(max_chunksize=7), part_spans=40)
    assert [p.name for p in parts] == ["part-000000.parquet", "part-000001.parquet", "part-000002.parquet"]
    sizes = [pq.ParquetFile(p).metadata.num_rows for p in parts]
    assert sum(sizes) == 95 and all(s >= 40 for s in sizes[:-1])
    assert all(pq.ParquetFile(p).metadata.num_row_groups >= 2 for p in parts[:-1])
    assert store.read_spans(dictionary=False).equals(spans.cast(S.SPAN_SCHEMA))
    stored = store.read_spans()  # the name columns dictionary-encoded, the same values
    assert stored.schema == S.DICTIONARY_SPAN_SCHEMA and S.plain_spans(stored).equals(spans.cast(S.SPAN_SCHEMA))
    more = store.append_spans(_spans(3).to_batches())
    assert [p.name for p in more] == ["part-000003.parquet"]


def test_an_error_while_reading_keeps_finished_parts_and_drops_the_unfinished_one(tmp_path):
    spans = _spans(50)

    def batches():
        yield from spans.slice(0, 30).to_batches(max_chunksize=10)
        raise RuntimeError("reader failed")

    store = SpanStore(tmp_path / "s")
    with pytest.raises(RuntimeError, match="reader failed"):
        store.append_spans(batches(), part_spans=20)
    files = sorted(p.name for p in (tmp_path / "s" / "spans").rglob("*") if p.is_file())
    assert files == ["part-000000.parquet"]  # the second part was not finished: no file, no temp
    assert store.read_spans().num_rows == 20
