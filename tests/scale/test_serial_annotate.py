"""Performance annotations from a span store built partition by partition (``--scheduler``): the
calls' span attributes (the annotations' features, memory) are read in each partition, where the
spans are, and the measurements, derived annotations, checks and predictions equal the in-process
ones; the command's mistakes are one line, exit code 2."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tracesleuth.analyses.annotate.measurements import measurements_from_tables, span_measures
from tracesleuth.cli import main
from tracesleuth.model import build_trace_table, root_tables

from tracesleuth.scale.table import in_request_order_from_files, shuffle_by_trace


@pytest.mark.parametrize("partition_spans", [500, 1_000_000])
def test_measurements_with_features_equal_in_process(serial, annotated_stores, partition_spans):
    store = annotated_stores[0]
    spans = store.read_spans()
    reference = build_trace_table(spans)
    with shuffle_by_trace(store.path, scheduler=serial, partition_spans=partition_spans) as partitions:
        assert len(partitions.files) == -(-spans.num_rows // partition_spans)
        tables, _ = root_tables(partitions, build=lambda p, e: p.table(e).to_trace_table())
        calls = tables[0].calls(span_columns=span_measures)
        assert calls.equals(reference.calls(span_columns=span_measures))
        frame = measurements_from_tables(tables)
    expected = measurements_from_tables(root_tables(spans)[0])
    assert frame.equals(expected)
    assert {"feature[depth(path)]", "feature[size(entries)]", "feature[length(path)]"} <= set(frame.columns)
    assert frame["memory"].drop_nulls().len() > 0
    assert calls.columns[:19] == reference.calls().columns  # the call view's own columns first


def test_a_partition_without_an_attribute_gets_nulls(tmp_path):
    """Pieces of a call view with different span columns (a partition whose spans lack an attribute)
    read back as one frame: every column, null where a piece had none, in request order."""
    from tracesleuth.model.flows import CALL_SCHEMA

    def piece(requests, **extra) -> pl.DataFrame:
        frame = pl.DataFrame({name: pl.Series(name, [None] * len(requests), dtype=dtype)
                              for name, dtype in CALL_SCHEMA.items()}).with_columns(pl.Series("request", requests))
        return frame.with_columns(*(pl.Series(k, v, dtype=pl.Float64) for k, v in extra.items()))

    paths = [tmp_path / "a.arrow", tmp_path / "b.arrow"]
    piece([2, 0], **{"feature[x]": [2.0, 0.0]}).write_ipc(paths[0])
    piece([1], memory=[5.0]).write_ipc(paths[1])
    frame = in_request_order_from_files(paths)
    assert frame.columns == [*CALL_SCHEMA, "feature[x]", "memory"]
    assert frame["request"].to_list() == [0, 1, 2]
    assert frame["feature[x]"].to_list() == [0.0, None, 2.0] and frame["memory"].to_list() == [None, 5.0, None]


def _json(capsys, *argv) -> dict:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    doc = json.loads(out)
    for volatile in ("seconds", "output"):
        doc.pop(volatile, None)
    return doc


def test_annotate_json_equal_in_process(capsys, tmp_path, annotated_stores):
    derive, check = (str(s.path) for s in annotated_stores)
    derived, docs = {}, {}
    for how, extra in (("in-process", ()), ("serial", ("--scheduler", "serial"))):
        derived[how] = tmp_path / f"{how}.yaml"
        docs[how] = _json(capsys, "annotate", "derive", derive, "-o", str(derived[how]), *extra)
    reference = docs["in-process"]
    assert docs["serial"] == reference
    assert derived["serial"].read_text() == derived["in-process"].read_text()
    assert {"depth(path)", "size(entries)"} <= set(reference["features"])
    assert "correlated" in reference["kinds"]
    annotations = str(derived["in-process"])
    for argv in (["annotate", "check", annotations, check],
                 ["annotate", "predict", annotations, check, "--change", "files:FileStore.delete+2ms"],
                 ["analyze", check, "--only", "annotate", "--annotations", annotations, "-o", str(tmp_path / "r.html")]):
        in_process = _json(capsys, *argv)
        served = _json(capsys, *argv, "--scheduler", "serial")
        if argv[0] == "analyze":
            for doc in (in_process, served):
                doc.pop("report")
                doc["analyses"]["annotate"].pop("seconds")
        assert served == in_process, argv[:2]
    assert np.isfinite(in_process["analyses"]["annotate"]["pass_rate"])
    assert not [p for p in annotated_stores[0].path.parent.iterdir() if "tracesleuth-work" in p.name]


@pytest.mark.parametrize("args, words", [
    (["check", "{a}", "{spans}", "--scheduler", "serial"], "tracesleuth ingest"),
    (["derive", "{store}", "--scheduler", "serial", "--format", "parquet"], "--format"),
    (["predict", "{a}", "{store}", "{store}", "-c", "files:*+1ms", "--scheduler", "serial"], "one span store"),
])
def test_mistakes_are_one_line(capsys, tmp_path, annotated_stores, args, words):
    store = annotated_stores[1]
    spans = tmp_path / "spans.parquet"
    import pyarrow.parquet as pq

    pq.write_table(store.read_spans(), spans)
    annotations = tmp_path / "a.yaml"
    annotations.write_text("annotations:\n- {operation: 'files:FileStore.delete', metric: time, kind: constant, "
                           "value: 1000000, sd: 1000}\n")
    argv = ["annotate"] + [a.format(a=annotations, spans=spans, store=store.path) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err
