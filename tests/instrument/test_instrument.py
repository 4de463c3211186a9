"""The collection side of performance annotations: argument features, the wrapper, the recorders."""

from __future__ import annotations

import asyncio
import math
import threading
import types

import numpy as np
import polars as pl
import pytest

from tracesleuth.instrument import (ARGUMENT_PREFIX, MEMORY_ATTRIBUTE, FileRecorder, OtelRecorder, argument_features,
                                    feature_of_attribute, instrument_module, measured, set_recorder,
                                    uninstrument_module)
from tracesleuth.io import read_spans


def spans_of(path) -> pl.DataFrame:
    result = read_spans(str(path))
    assert result.spans_rejected == 0
    return pl.from_arrow(result.spans)


def attrs(frame: pl.DataFrame, operation: str) -> list[dict]:
    rows = frame.filter(pl.col("operation") == operation).sort("start_ns")["attributes"].to_list()
    return [{a["key"]: a["int"] if a["int"] is not None else a["float"] for a in row
             if a["key"].startswith("tracesleuth.")} for row in rows]


# ---------------------------------------------------------------------------------------------
# Features (the paper's heuristics)
# ---------------------------------------------------------------------------------------------

def test_numbers_give_their_value_collections_their_size():
    f = argument_features(("a", "b", "c", "d", "e", "g"), (3, 2.5, True, [1, 2, 3], {"k": 1}, b"xyz"), {})
    assert f == {ARGUMENT_PREFIX + "a.value": 3, ARGUMENT_PREFIX + "b.value": 2.5, ARGUMENT_PREFIX + "c.value": 1,
                 ARGUMENT_PREFIX + "d.size": 3, ARGUMENT_PREFIX + "e.size": 1, ARGUMENT_PREFIX + "g.size": 3}


def test_non_finite_numbers_and_plain_objects_give_nothing():
    class Broken:
        def __len__(self):
            raise RuntimeError("no length")

    assert argument_features(("a", "b", "c", "d"), (math.nan, math.inf, object(), Broken()), {}) == {}


def test_numpy_scalars_and_extra_positional_and_keyword_arguments():
    f = argument_features(("x",), (np.int64(7), np.float32(0.5)), {"items": (1, 2)})
    assert f == {ARGUMENT_PREFIX + "x.value": 7, ARGUMENT_PREFIX + "arg1.value": 0.5, ARGUMENT_PREFIX + "items.size": 2}


def test_strings_naming_files_give_size_and_depth_others_their_length(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f.txt").write_bytes(b"x" * 123)
    f = argument_features(("file", "folder", "missing", "empty"), ("a/b/f.txt", "./a/b", "a/none.txt", ""), {})
    assert f == {ARGUMENT_PREFIX + "file.file_size": 123, ARGUMENT_PREFIX + "file.depth": 3,
                 ARGUMENT_PREFIX + "folder.depth": 2, ARGUMENT_PREFIX + "missing.length": 10,
                 ARGUMENT_PREFIX + "empty.length": 0}
    assert argument_features(("p",), (tmp_path / "a" / "b" / "f.txt",), {})[ARGUMENT_PREFIX + "p.file_size"] == 123
    long = "x" * 5000 + "\x00"
    assert argument_features(("s",), (long,), {}) == {ARGUMENT_PREFIX + "s.length": 5001}


def test_feature_names_read_back_from_attribute_keys():
    assert feature_of_attribute(ARGUMENT_PREFIX + "path.depth") == "depth(path)"
    assert feature_of_attribute(ARGUMENT_PREFIX + "n.value") == "n"
    assert feature_of_attribute(ARGUMENT_PREFIX + "n.unknown") is None
    assert feature_of_attribute("db.response.returned_rows") is None


# ---------------------------------------------------------------------------------------------
# The wrapper and the file recorder
# ---------------------------------------------------------------------------------------------

def test_calls_nest_pass_results_and_errors_through_and_are_read_as_spans(tmp_path):
    rec = FileRecorder(tmp_path / "calls.jsonl", service="app", buffer_spans=2)

    @measured(recorder=rec)
    def leaf(n):
        return n * 2

    @measured(recorder=rec)
    def top(items):
        return [leaf(i) for i in items]

    @measured(recorder=rec)
    def fails(x):
        raise KeyError(x)

    assert top([1, 2, 3]) == [2, 4, 6]
    with pytest.raises(KeyError):
        fails(1)
    rec.close()
    spans = spans_of(tmp_path / "calls.jsonl")
    assert spans.height == 5 and set(spans["service"]) == {"app"}
    root = spans.filter(pl.col("operation") == "test_calls_nest_pass_results_and_errors_through_and_are_read_as_spans"
                                                ".<locals>.top")
    assert root.height == 1 and root["parent_span_id"][0] is None
    leaves = spans.filter(pl.col("operation").str.ends_with("leaf"))
    assert (leaves["parent_span_id"] == root["span_id"][0]).all()
    assert (leaves["trace_id"] == root["trace_id"][0]).all()
    assert spans.filter(pl.col("operation").str.ends_with("fails"))["status"][0] == "error"
    assert [a[ARGUMENT_PREFIX + "n.value"] for a in attrs(spans, leaves["operation"][0])] == [1, 2, 3]
    assert (spans["end_ns"] >= spans["start_ns"]).all()


def test_memory_is_the_peak_allocated_during_the_call_children_included(tmp_path):
    rec = FileRecorder(tmp_path / "m.jsonl")

    @measured(recorder=rec, memory=True)
    def allocate(n):
        block = bytearray(n)
        return len(block)

    @measured(recorder=rec, memory=True)
    def parent():
        allocate(200_000)
        return allocate(1_000)

    parent()
    rec.close()
    spans = spans_of(tmp_path / "m.jsonl")
    small, big = sorted(a[MEMORY_ATTRIBUTE] for a in attrs(spans, "test_memory_is_the_peak_allocated_during_the_call_"
                                                                  "children_included.<locals>.allocate"))
    (outer,) = [a[MEMORY_ATTRIBUTE] for a in attrs(spans, "test_memory_is_the_peak_allocated_during_the_call_"
                                                           "children_included.<locals>.parent")]
    assert 1_000 <= small < 50_000 and 200_000 <= big < 260_000 and outer >= big


def test_without_a_recorder_nothing_is_measured_and_set_recorder_applies(tmp_path):
    @measured
    def f(x):
        return x + 1

    assert f(1) == 2
    rec = FileRecorder(tmp_path / "d.jsonl")
    previous = set_recorder(rec)
    try:
        assert f(2) == 3
    finally:
        set_recorder(previous)
    rec.close()
    assert spans_of(tmp_path / "d.jsonl").height == 1


def test_generators_are_refused_and_coroutines_measured(tmp_path):
    with pytest.raises(TypeError, match="generator"):
        @measured
        def gen():
            yield 1

    rec = FileRecorder(tmp_path / "a.jsonl")

    @measured(recorder=rec, memory=True)
    async def wait(seconds):
        await asyncio.sleep(seconds)
        return seconds

    async def both():
        return await asyncio.gather(wait(0.01), wait(0.02))

    assert asyncio.run(both()) == [0.01, 0.02]
    rec.close()
    spans = spans_of(tmp_path / "a.jsonl")
    assert spans.height == 2 and spans["parent_span_id"].is_null().all()
    assert ((spans["end_ns"] - spans["start_ns"]) >= 9_000_000).all()


def test_threads_share_a_recorder(tmp_path):
    rec = FileRecorder(tmp_path / "t.jsonl", buffer_spans=7)

    @measured(recorder=rec)
    def child(i):
        return i

    @measured(recorder=rec)
    def work(k):
        for i in range(50):
            child(i)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rec.close()
    spans = spans_of(tmp_path / "t.jsonl")
    assert spans.height == 4 * 51
    tops = spans.filter(pl.col("parent_span_id").is_null())
    assert tops.height == 4
    children = spans.filter(pl.col("parent_span_id").is_not_null())
    per_parent = children.group_by("parent_span_id").len()
    assert sorted(per_parent["len"].to_list()) == [50] * 4
    assert set(per_parent["parent_span_id"]) == set(tops["span_id"])


# ---------------------------------------------------------------------------------------------
# Module-wide instrumentation
# ---------------------------------------------------------------------------------------------

SOURCE = '''
import os
def helper(n):
    return n
def _private(x):
    return helper(x)
def gen():
    yield 1
class Store:
    def __init__(self, size):
        self.size = size
    def put(self, key, value):
        return helper(len(value))
    @staticmethod
    def make(n):
        return Store(n)
    @classmethod
    def named(cls, name):
        return cls(len(name))
    @property
    def double(self):
        return 2 * self.size
    def __repr__(self):
        return "Store"
'''


def test_instrument_module_wraps_what_the_module_defines_and_undoes_it(tmp_path):
    module = types.ModuleType("shopmod")
    exec(SOURCE, module.__dict__)
    rec = FileRecorder(tmp_path / "mod.jsonl", service="shop")
    wrapped = instrument_module(module, recorder=rec)
    assert wrapped == ["helper", "_private", "Store.__init__", "Store.put", "Store.make", "Store.named"]
    assert instrument_module(module, recorder=rec) == []  # never twice
    store = module.Store.make(3)
    assert store.put("k", [1, 2]) == 2 and store.double == 6 and repr(store) == "Store"
    module.Store.named("abc")
    rec.close()
    spans = spans_of(tmp_path / "mod.jsonl")
    assert sorted(spans["operation"].unique()) == ["Store.__init__", "Store.make", "Store.named", "Store.put", "helper"]
    put = attrs(spans, "Store.put")[0]
    assert put == {ARGUMENT_PREFIX + "key.length": 1, ARGUMENT_PREFIX + "value.size": 2}
    restored = uninstrument_module(module)
    assert set(restored) == {"helper", "_private", "Store.__init__", "Store.put", "Store.make", "Store.named"}
    assert not hasattr(module.helper, "__wrapped__") and module.Store.make(1).size == 1
    assert instrument_module(module, recorder=rec, include=lambda name: name.startswith("Store.p")) == ["Store.put"]


# ---------------------------------------------------------------------------------------------
# OpenTelemetry
# ---------------------------------------------------------------------------------------------

def test_otel_recorder_makes_spans_current_with_the_features_as_attributes():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rec = OtelRecorder(tracer_provider=provider)
    tracer = provider.get_tracer("app")

    @measured(recorder=rec, name="db.query")
    def query(sql, rows):
        return rows

    @measured(recorder=rec, name="handler")
    def handler(items):
        with tracer.start_as_current_span("inner-http"):
            query("select 1", 5)
        raise ValueError("boom")

    with pytest.raises(ValueError):
        handler([1, 2])
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"db.query", "inner-http", "handler"}
    assert spans["db.query"].parent.span_id == spans["inner-http"].context.span_id
    assert spans["inner-http"].parent.span_id == spans["handler"].context.span_id
    assert spans["db.query"].attributes[ARGUMENT_PREFIX + "rows.value"] == 5
    assert spans["db.query"].attributes[ARGUMENT_PREFIX + "sql.length"] == 8
    assert spans["handler"].status.status_code == StatusCode.ERROR
