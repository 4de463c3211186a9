"""``--scheduler`` on the command line: the same JSON as in-process; bad input (a part of another
schema, a missing part, a scheduler that cannot be reached, trace files instead of a store) is one
line naming the part or the address, exit code 2, and nothing written."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracesleuth.cli import main
from tracesleuth.io.store import SpanStore

pytestmark = pytest.mark.dask  # a LocalCluster of worker processes (tests/scale/conftest.py)


def run(capsys, *argv) -> tuple[int, dict | None, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    doc = json.loads(captured.out) if "--json" in argv and captured.out.strip() else None
    return code, doc, captured.err


@pytest.fixture
def store_copy(tmp_path, synthetic_store):
    path = tmp_path / "store"
    shutil.copytree(synthetic_store.path, path)
    return SpanStore(path, create=False)


def _left_over(store) -> list:
    return [p.name for p in store.path.parent.iterdir() if "tracesleuth-work" in p.name]


def test_table_and_patterns_json_equal_in_process(tmp_path, capsys, synthetic_store):
    store = str(synthetic_store.path)
    _, ref, _ = run(capsys, "table", store, "--json")
    code, doc, err = run(capsys, "table", store, "--json", "--scheduler", "threads", "-o", str(tmp_path / "t.parquet"))
    assert code == 0 and doc.pop("scheduler")["name"] == "threads"
    assert {k: v for k, v in doc.items() if k != "output"} == {k: v for k, v in ref.items() if k not in
                                                              ("output", "scheduler")}
    assert pl.read_parquet(tmp_path / "t.parquet").height == ref["requests"]
    _, ref, _ = run(capsys, "patterns", store, "--json", "--seed", "2")
    code, doc, _ = run(capsys, "patterns", store, "--json", "--seed", "2", "--scheduler", "threads")
    assert code == 0 and ref.pop("seconds") and doc.pop("seconds") and doc == ref
    assert not _left_over(synthetic_store)


def test_diagnose_json_equals_in_process(capsys, monkeypatch, logged_store):
    import tracesleuth.scale.telemetry as by_partitions

    monkeypatch.setattr(by_partitions, "PARTITION_SPANS", 8_000)  # split, on Dask's threads
    store = str(logged_store.path)
    _, ref, _ = run(capsys, "diagnose", store, "--at", "2023-01-29T08:53:00", "--json")
    code, doc, _ = run(capsys, "diagnose", store, "--at", "2023-01-29T08:53:00", "--json", "--scheduler", "threads")
    assert code == 0 and ref["services"] and doc == ref
    assert not _left_over(logged_store)


def test_annotate_check_json_equals_in_process(tmp_path, capsys, annotated_stores):
    derive, check = (str(s.path) for s in annotated_stores)
    annotations = tmp_path / "a.yaml"
    assert main(["annotate", "derive", derive, "-o", str(annotations)]) == 0
    capsys.readouterr()
    _, ref, _ = run(capsys, "annotate", "check", str(annotations), check, "--json")
    code, doc, _ = run(capsys, "annotate", "check", str(annotations), check, "--json", "--scheduler", "threads")
    assert code == 0 and doc == ref and "size(entries)" in doc["features"]
    assert not _left_over(annotated_stores[1])


def test_table_on_a_local_cluster_prints_the_dashboard(tmp_path, capsys, trainticket_store):
    out = tmp_path / "table.parquet"
    code = main(["table", str(trainticket_store.path), "--scheduler", "local", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0 and "Dask dashboard: http" in captured.err and "Wrote" in captured.out
    from tracesleuth.model import build_trace_table

    reference = build_trace_table(trainticket_store.read_spans())
    assert pl.read_parquet(out).sort(["start_ns", "trace_id", "span_id"]).equals(reference.frame)


def test_a_part_of_another_schema_is_named_and_nothing_is_written(tmp_path, capsys, store_copy):
    part = store_copy.span_files()[3]
    bad = pq.read_table(part)
    bad = bad.set_column(bad.column_names.index("start_ns"), "start_ns", bad.column("start_ns").cast(pa.string()))
    pq.write_table(bad, part)
    out = tmp_path / "t.parquet"
    code, _, err = run(capsys, "table", str(store_copy.path), "--scheduler", "threads", "-o", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(part) in err and "start_ns" in err and "string" in err
    assert not out.exists() and not _left_over(store_copy)


def test_a_missing_part_is_named(capsys, tmp_path):
    from tracesleuth.scale.synthetic import write_synthetic_store
    from tracesleuth.ingest import ingest

    source = write_synthetic_store(tmp_path / "source", 5_000, part_spans=1_000, chunk_traces=100)
    store = tmp_path / "store"  # an ingest records its parts in the manifest
    ingest([str(f) for f in SpanStore(source.path).span_files()], store, format="parquet")
    gone = SpanStore(store).span_files()[1]
    gone.unlink()
    code, doc, _ = run(capsys, "patterns", str(store), "--scheduler", "threads", "--json")
    assert code == 2 and doc["type"] == "TraceFormatError"
    assert str(gone) in doc["error"] and "missing" in doc["error"]


def test_a_scheduler_that_cannot_be_reached_is_named(capsys, monkeypatch, synthetic_store):
    import tracesleuth.scale.cluster as cluster

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 2)
    code, _, err = run(capsys, "table", str(synthetic_store.path), "--scheduler", "tcp://127.0.0.1:9")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "tcp://127.0.0.1:9" in err


@pytest.mark.parametrize("argv, words", [
    (["--scheduler", "threads", "--format", "parquet"], "--format"),
    (["--sample", "100"], "--scheduler"),
])
def test_usage_mistakes(capsys, synthetic_store, argv, words):
    code, _, err = run(capsys, "patterns", str(synthetic_store.path), *argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_trace_files_are_not_a_store(capsys, shared_data):
    src = shared_data / "nezha/trainticket/2023-01-29/trace/08_43_trace.csv.gz"
    code, _, err = run(capsys, "table", str(src), "--scheduler", "threads")
    assert code == 2 and "tracesleuth ingest" in err


def test_without_dask_the_message_says_how_to_install_it(capsys, monkeypatch, synthetic_store):
    import sys

    monkeypatch.setitem(sys.modules, "dask.dataframe", None)  # as if Dask were not installed
    code, _, err = run(capsys, "table", str(synthetic_store.path), "--scheduler", "threads")
    assert code == 2 and "tracesleuth[dask]" in err and len(err.strip().splitlines()) == 1
