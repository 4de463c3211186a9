"""The default of ``--scheduler`` (:func:`tracesleuth.cli._common.choose_scheduler`): one span store
holding more spans than one partition is read partition by partition in this process (``serial``),
with the JSON of ``--scheduler whole``; trace files, a store within one partition, and a store
given ``--format`` are read whole. The partition is made small here (10,000 spans: the synthetic
store holds about 60,000) so that a small store is "large"."""

from __future__ import annotations

import json

import pytest

from tracesleuth.cli import main
from tracesleuth.cli._common import choose_scheduler

SMALL_PARTITION = 10_000


@pytest.fixture
def small_partitions(monkeypatch):
    """:data:`~tracesleuth.model.table.PARTITION_SPANS` of 10,000 spans for the test."""
    import tracesleuth.model.table as table

    monkeypatch.setattr(table, "PARTITION_SPANS", SMALL_PARTITION)


def _json(capsys, *argv) -> dict:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_the_rule(synthetic_store, monkeypatch):
    import tracesleuth.model.table as table

    store = synthetic_store.path
    part = synthetic_store.span_files()[0]
    n_spans = synthetic_store.count_spans()
    assert n_spans == synthetic_store.read_spans().num_rows
    assert choose_scheduler([store], None) is None  # within one partition (500,000 spans)
    monkeypatch.setattr(table, "PARTITION_SPANS", SMALL_PARTITION)
    assert choose_scheduler([store], None) == "serial"
    assert choose_scheduler([store], "whole") is None
    assert choose_scheduler([store], "threads") == "threads"  # a scheduler given is kept
    assert choose_scheduler([part], None) is None  # a trace file
    assert choose_scheduler([store, store], None) is None  # not one store
    assert choose_scheduler([store], None, "parquet") is None  # --format: as before, read whole
    assert choose_scheduler([store], None, None, "canonical") is None
    # diagnose counts only the store's hours it reads: none of 1970's
    assert choose_scheduler([store], None, period=(0, 3600 * 10**9)) is None
    monkeypatch.setattr(table, "PARTITION_SPANS", n_spans)
    assert choose_scheduler([store], None) is None  # exactly one partition


def test_a_large_store_is_read_by_partitions_with_the_json_of_whole(capsys, synthetic_store, small_partitions):
    store = str(synthetic_store.path)
    default, whole = _json(capsys, "table", store), _json(capsys, "table", store, "--scheduler", "whole")
    assert default.pop("scheduler")["name"] == "serial"
    assert whole.pop("scheduler") is None
    assert default == whole
    assert not [p for p in synthetic_store.path.parent.iterdir() if "tracesleuth-work" in p.name]


def test_trace_files_and_a_small_store_are_read_whole(capsys, synthetic_store, monkeypatch):
    assert _json(capsys, "table", str(synthetic_store.path))["scheduler"] is None  # about 60,000 spans: one partition
    import tracesleuth.model.table as table

    monkeypatch.setattr(table, "PARTITION_SPANS", 1_000)
    part = synthetic_store.span_files()[0]  # 3,000 spans, read as a trace file
    assert _json(capsys, "table", str(part))["scheduler"] is None
    assert _json(capsys, "table", str(synthetic_store.path), "--format", "parquet")["scheduler"] is None


def test_the_default_table_file_is_one_file_as_read_whole(tmp_path, capsys, synthetic_store, small_partitions):
    import polars as pl

    default, whole = tmp_path / "default.parquet", tmp_path / "whole.parquet"
    _json(capsys, "table", str(synthetic_store.path), "-o", str(default))
    _json(capsys, "table", str(synthetic_store.path), "-o", str(whole), "--scheduler", "whole")
    assert default.is_file() and pl.read_parquet(default).equals(pl.read_parquet(whole))


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_scheduler_is_one_line_naming_the_values_and_exit_2(capsys, synthetic_store, value):
    code = main(["table", str(synthetic_store.path), "--scheduler", value])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert all(word in err for word in ("--scheduler", "whole", "serial", "local", "threads"))


def test_localize_by_default_gives_the_json_of_whole(capsys, synthetic_store, small_partitions):
    store = str(synthetic_store.path)
    default, whole = _json(capsys, "localize", store), _json(capsys, "localize", store, "--scheduler", "whole")
    default.pop("seconds"), whole.pop("seconds")
    assert default == whole


def test_all_endpoints_reads_a_large_store_whole_and_says_so(capsys, synthetic_store, small_partitions):
    start = int(synthetic_store.read_spans().column("start_ns").to_numpy().min()) // 10**9
    argv = ["compare", str(synthetic_store.path), "--all-endpoints", "--baseline-time", f"{start}/{start + 5400}",
            "--problem-time", f"{start + 5400}/{start + 10800}"]
    default, whole = _json(capsys, *argv), _json(capsys, *argv, "--scheduler", "whole")
    assert len(default.pop("notes")) == 1 and "notes" not in whole
    default.pop("seconds"), whole.pop("seconds")
    assert default == whole
    assert main(argv) == 0
    assert "note: --all-endpoints runs in this process only" in capsys.readouterr().out
