"""Performance annotations: the model, the file format, derivation, checking and measurements."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from tracesleuth import schema as S
from tracesleuth.analyses.annotate.check import check_annotation, windows
from tracesleuth.analyses.annotate.derive import derive_annotation
from tracesleuth.analyses.annotate.fileformat import (AnnotationFileError, AnnotationSet, load_annotations,
                                                      save_annotations)
from tracesleuth.analyses.annotate.measurements import feature_column, measurements_from_tables
from tracesleuth.analyses.annotate.model import (Cluster, ClusteredAnnotation, ConstantAnnotation,
                                                 CorrelatedAnnotation, format_value)
from tracesleuth.analyses.annotate.synthetic import planted_spans
from tracesleuth.instrument import ARGUMENT_PREFIX, MEMORY_ATTRIBUTE
from tracesleuth.model import build_trace_table

DELETE = CorrelatedAnnotation("files:delete", "time", 500, feature="depth(path)", coefficients=(0.0, 2e6), sd=1e6,
                              correlation=0.9, relative_error=0.1, feature_range=(1.0, 9.0))
OWNER = ClusteredAnnotation("files:owner", "time", 300, clusters=(Cluster(2e5, 2e4, 0.7), Cluster(2e6, 2e5, 0.3)))
MEMORY = ConstantAnnotation("files:owner", "memory", 300, value=512.0, sd=0.0)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------

def test_human_readable_forms():
    assert DELETE.text() == "files:delete: time ~ Normal(2 ms × depth(path), sd 1 ms)"
    assert OWNER.text() == "files:owner: time ~ 70% Normal(200 µs, sd 20 µs) | 30% Normal(2 ms, sd 200 µs)"
    assert MEMORY.text() == "files:owner: memory = 512 B (constant)"
    quad = CorrelatedAnnotation("a:b", "time", 10, feature="size(x)", coefficients=(1e3, -500.0, 80.0), sd=10.0)
    assert quad.text() == "a:b: time ~ Normal(1 µs - 500 ns × size(x) + 80 ns × size(x)², sd 10 ns)"
    assert format_value(3 * 2**20, "bytes") == "3 MiB"


def test_distributions_invert_and_clip_at_zero():
    x = np.array([1.0, 5.0, 9.0])
    u = np.array([0.1, 0.5, 0.9])
    assert np.allclose(DELETE.cdf(DELETE.ppf(u, x), x), u)
    y = np.linspace(0, 3e6, 50)
    cdf = OWNER.cdf(y)
    assert (np.diff(cdf) >= 0).all() and cdf[-1] > 0.99
    assert np.allclose(OWNER.cdf(OWNER.ppf(u)), u, atol=1e-3)
    assert (DELETE.ppf(np.array([1e-9]), np.array([0.0])) == 0).all()
    rng = np.random.default_rng(0)
    draws = OWNER.sample(rng, size=20_000)
    assert abs((draws > 1e6).mean() - 0.3) < 0.02
    assert np.isclose(OWNER.expected()[0], 0.7 * 2e5 + 0.3 * 2e6)


# ---------------------------------------------------------------------------------------------
# The file format
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_files_round_trip(tmp_path, suffix):
    original = AnnotationSet(annotations=(DELETE, OWNER, MEMORY), source="run.jsonl", settings={"min_samples": 10})
    path = save_annotations(original, tmp_path / f"a{suffix}")
    loaded = load_annotations(path)
    assert loaded.annotations == tuple(sorted(original.annotations, key=lambda a: a.key))
    assert loaded.settings == {"min_samples": 10} and loaded.source == "run.jsonl"
    if suffix == ".yaml":
        assert "# files:delete: time ~ Normal(2 ms × depth(path), sd 1 ms)" in path.read_text()
    else:
        json.loads(path.read_text())


def _error(tmp_path, text: str) -> AnnotationFileError:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(AnnotationFileError) as info:
        load_annotations(path)
    return info.value


GOOD = """format: tracesleuth-annotations/1
annotations:
- operation: files:delete
  metric: time
  kind: correlated
  feature: depth(path)
  coefficients: [0, 2000000]
  sd: 1000000
"""


def test_bad_files_name_the_line_and_field(tmp_path):
    assert len(load_annotations((tmp_path / "g.yaml", (tmp_path / "g.yaml").write_text(GOOD))[0])) == 1
    e = _error(tmp_path, GOOD.replace("kind: correlated", "kind: linear"))
    assert (e.line, e.field) == (5, "kind") and "linear" in str(e) and "bad.yaml, line 5" in str(e)
    e = _error(tmp_path, GOOD.replace("  sd: 1000000\n", "  sd: -1\n"))
    assert (e.line, e.field) == (8, "sd") and "negative" in str(e)
    e = _error(tmp_path, GOOD.replace("  sd: 1000000\n", ""))
    assert e.field == "sd" and "missing" in str(e)
    e = _error(tmp_path, GOOD.replace("coefficients: [0, 2000000]", "coefficients: [0, 2000000"))
    assert "syntax error" in str(e) and e.line is not None
    e = _error(tmp_path, GOOD.replace("  sd: 1000000\n", "  sd: 1000000\n  slope: 3\n"))
    assert (e.line, e.field) == (9, "slope")
    e = _error(tmp_path, GOOD + GOOD.split("annotations:\n")[1])
    assert "twice" in str(e) and e.line == 9
    e = _error(tmp_path, GOOD.replace("metric: time", "metric: latency"))
    assert e.field == "metric" and e.line == 4
    e = _error(tmp_path, "just text")
    assert e.line == 1
    with pytest.raises(AnnotationFileError, match="cannot be read"):
        load_annotations(tmp_path / "missing.yaml")


# ---------------------------------------------------------------------------------------------
# Derivation
# ---------------------------------------------------------------------------------------------

def test_derivation_finds_each_kind():
    rng = np.random.default_rng(1)
    depth = rng.integers(1, 10, 600).astype(float)
    noise = rng.normal(0, 1e5, 600)
    d = derive_annotation("f:delete", "time", 2e6 * depth + noise, {"depth(path)": depth, "n": rng.random(600)})
    assert (d.annotation.kind, d.annotation.feature, d.annotation.degree) == ("correlated", "depth(path)", 1)
    assert abs(d.annotation.coefficients[1] - 2e6) < 5e4 and abs(d.annotation.sd - 1e5) < 1e4
    n = np.exp(rng.uniform(0, np.log(300), 600))
    d = derive_annotation("f:propfind", "time", 80 * n ** 2 + 500 * n + rng.normal(0, 1e3, 600), {"size(e)": n})
    assert (d.annotation.kind, d.annotation.degree) == ("correlated", 2)
    d = derive_annotation("f:owner", "memory", np.full(100, 512.0), {"length(path)": rng.random(100)})
    assert d.annotation.kind == "constant" and d.annotation.value == 512
    y = np.r_[rng.normal(1e6, 5e4, 300), rng.normal(4e6, 3e5, 200)]
    d = derive_annotation("f:mkcol", "time", y, {"length(path)": rng.random(500)})
    assert d.annotation.kind == "clustered" and [round(c.weight, 1) for c in d.annotation.clusters] == [0.6, 0.4]


def test_bad_measurements_are_named_and_left_out():
    d = derive_annotation("f:one", "time", np.array([5.0]), {})
    assert d.annotation is None and (d.reason.kind, d.reason.n_measurements, d.reason.min_samples) == (
        "too_few_measurements", 1, 10)
    assert str(d.reason) == "1 measurement; at least 10 are needed"
    y = np.r_[np.full(20, 1e6) + np.arange(20) * 1e5, [np.nan, -5.0, np.inf]]
    d = derive_annotation("f:bad", "time", y, {})
    assert d.annotation is not None and d.annotation.n_samples == 20
    assert [(n.kind, n.operation, n.metric, n.n_bad, n.n_measurements) for n in d.notes] == [
        ("bad_measurements", "f:bad", "time", 3, 23)]


def test_features_constant_or_missing_in_some_calls_are_not_candidates():
    rng = np.random.default_rng(2)
    x = rng.integers(1, 10, 200).astype(float)
    y = 1e6 * x + rng.normal(0, 1e4, 200)
    patchy = x.copy()
    patchy[:30] = np.nan
    d = derive_annotation("f:op", "time", y, {"size(a)": patchy, "const": np.ones(200)})
    assert d.annotation.kind == "clustered" or d.annotation.feature != "size(a)"
    (missing,) = [n for n in d.notes if n.kind == "feature_missing"]
    assert (missing.operation, missing.feature, missing.n_missing, missing.n_calls) == ("f:op", "size(a)", 30, 200)
    assert "const" not in d.correlations
    (constant,) = [n for n in d.notes if n.kind == "feature_constant"]
    assert (constant.feature, constant.value) == ("const", 1.0)
    d = derive_annotation("f:op", "time", y, {"size(a)": patchy}, feature_coverage=0.8)
    assert d.annotation.kind == "correlated" and d.annotation.n_samples == 170


def test_outliers_are_set_aside_from_the_fit_unless_asked_not_to():
    rng = np.random.default_rng(3)
    x = rng.integers(1, 20, 1000).astype(float)
    y = 10_000 * x + rng.normal(0, 2_000, 1000)
    y[rng.choice(1000, 8, replace=False)] = 5e6  # preempted calls
    d = derive_annotation("f:op", "time", y, {"n": x})
    assert d.annotation.kind == "correlated" and d.annotation.n_outliers == 8
    assert derive_annotation("f:op", "time", y, {"n": x}, outlier_fence=None).annotation.kind == "clustered"


# ---------------------------------------------------------------------------------------------
# Checking
# ---------------------------------------------------------------------------------------------

def _frame(y, depth=None) -> pl.DataFrame:
    data = {"time": np.asarray(y, dtype=np.int64)}
    if depth is not None:
        data[feature_column("depth(path)")] = np.asarray(depth, dtype=np.float64)
    return pl.DataFrame(data)


def test_windows_cut_the_calls_in_time_order():
    assert [(s.start, s.stop) for s in windows(95, 30)] == [(0, 30), (30, 60), (60, 95)]
    assert [(s.start, s.stop) for s in windows(12, 30)] == [(0, 12)]
    assert windows(3, 30) == []


def test_assertions_pass_on_the_annotated_distribution_and_fail_when_it_shifts():
    rng = np.random.default_rng(4)
    depth = rng.integers(1, 10, 3000)
    y = 2e6 * depth + rng.normal(0, 1e6, 3000)
    y[::250] = 9e7  # a preempted call now and then: one point of a window
    same = check_annotation(DELETE, _frame(np.maximum(y, 0), depth))
    assert same.n_windows == 100 and same.pass_share >= 0.95 and same.holds
    slow = check_annotation(DELETE, _frame(np.maximum(y, 0) + 2e6, depth))
    assert slow.pass_share < 0.05 and not slow.holds and slow.distance > 1.0
    assert slow.observed_median > slow.expected_median


def test_clustered_and_exact_constant_annotations():
    rng = np.random.default_rng(5)
    y = np.where(rng.random(600) < 0.7, rng.normal(2e5, 2e4, 600), rng.normal(2e6, 2e5, 600))
    assert check_annotation(OWNER, _frame(y)).holds
    assert not check_annotation(OWNER, _frame(y + 1e6)).holds
    exact = check_annotation(MEMORY, pl.DataFrame({"memory": np.full(60, 512)}))
    assert exact.holds and exact.pass_share == 1.0
    assert not check_annotation(MEMORY, pl.DataFrame({"memory": np.r_[np.full(59, 512), [520]]})).holds


def test_what_cannot_be_checked_says_why():
    none = check_annotation(DELETE, _frame([], []).head(0))
    assert not none.checked and none.holds is None and none.note.kind == "no_calls"
    missing = check_annotation(DELETE, _frame(np.full(50, 1e6)))
    assert not missing.checked and missing.n_unusable == 50
    assert (missing.note.kind, missing.note.feature, missing.note.n_calls) == ("feature_in_no_call", "depth(path)", 50)
    assert missing.to_dict()["note"]["kind"] == "feature_in_no_call"


# ---------------------------------------------------------------------------------------------
# Measurements from traces
# ---------------------------------------------------------------------------------------------

def test_measurements_carry_metrics_memory_and_numeric_attribute_features():
    table = build_trace_table(planted_spans(60, random_state=0))
    frame = measurements_from_tables(table)
    assert frame.height == table.calls().height
    assert {feature_column("depth(path)"), feature_column("size(entries)"), feature_column("length(path)")} <= set(
        frame.columns)
    propfind = frame.filter(pl.col(S.OPERATION_KEY) == "files:FileStore.propfind")
    assert (propfind["memory"] == 1024 + 200 * propfind[feature_column("size(entries)")].cast(pl.Int64)).all()
    roots = frame.filter(pl.col(S.PARENT_SPAN_ID).is_null())
    assert roots.height == 60 and (roots[S.OPERATION_KEY] == "files:WebDAV.request").all()


def test_text_numbers_are_features_and_identifiers_are_not():
    spans = planted_spans(20, random_state=0)
    attrs = spans.column(S.ATTRIBUTES).to_pylist()
    extra = [{"key": k, "str": v, "int": None, "float": None, "bool": None}
             for k, v in (("db.rows", "12"), ("server.port", "8080"), ("http.response.status_code", "200"))]
    spans = spans.set_column(spans.schema.get_field_index(S.ATTRIBUTES), S.ATTRIBUTES,
                             pa.array([a + extra for a in attrs], type=spans.schema.field(S.ATTRIBUTES).type))
    frame = measurements_from_tables(build_trace_table(spans))
    assert feature_column("db.rows") in frame.columns
    assert feature_column("server.port") not in frame.columns
    assert feature_column("http.response.status_code") not in frame.columns
    assert feature_column(MEMORY_ATTRIBUTE) not in frame.columns and ARGUMENT_PREFIX not in "".join(frame.columns)
