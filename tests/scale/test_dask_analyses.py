"""The analyses on a Dask-built table: the in-process results (same seed); the sampled patterns'
scores counted exactly on every request."""

from __future__ import annotations

import numpy as np
import pytest

from tracesleuth.analyses.localize import RootCauseLocalization
from tracesleuth.analyses.patterns import LatencyDegradationPatterns
from tracesleuth.model import build_trace_table, root_tables
from tracesleuth.scale import dask_trace_table
from tracesleuth.scale.analyses import dkw_epsilon, fit_patterns, on_workers
from tracesleuth.scale.synthetic import DEGRADED_OPERATION
from tracesleuth.scale.table import shuffle_by_trace

pytestmark = pytest.mark.dask  # a LocalCluster of worker processes (tests/scale/conftest.py)


def test_patterns_on_dask_are_the_in_process_patterns(cluster, synthetic_store):
    reference = LatencyDegradationPatterns(random_state=3).fit(build_trace_table(synthetic_store.read_spans()))
    assert reference.result_.found and DEGRADED_OPERATION in reference.result_.sub_intervals[0].words
    with dask_trace_table(synthetic_store.path, scheduler=cluster, partition_spans=10_000) as table:
        est = LatencyDegradationPatterns(random_state=3)
        labels, requests, result = fit_patterns(est, table)
    assert est.result_.to_dict() == reference.result_.to_dict() == result.to_dict()
    assert np.array_equal(labels, reference.labels_) and requests.height == len(labels)


def test_sampled_patterns_are_scored_on_every_request(cluster, synthetic_store):
    full = build_trace_table(synthetic_store.read_spans())
    with dask_trace_table(synthetic_store.path, scheduler=cluster, partition_spans=10_000) as table:
        est = LatencyDegradationPatterns(random_state=0)
        before = dict(est.__dict__)
        labels, requests, result = fit_patterns(est, table, sample=2_000, random_state=1)
    assert est.result_ is not result and est.result_.n_requests == 2_000  # the estimator keeps the sample's fit
    assert {k for k in est.__dict__ if k not in before} == {"labels_", "result_", "interval_", "split_points_",
                                                            "encodings_", "refinements_"}
    assert result.found and result.n_requests == full.n_requests and len(labels) == full.n_requests
    assert requests["trace_id"].to_list() == full.frame["trace_id"].to_list()  # table order
    latency = full.frame["latency_ns"].to_numpy()
    scored = np.ones(latency.size, dtype=bool)  # the requests the scores leave out (uncertain_z)
    if result.uncertain_ns is not None:
        scored = ~((latency >= result.uncertain_ns) & (latency < result.interval.low_ns))
    for s in result.sub_intervals:  # the scores are the exact ones, counted on the whole table here
        inside = (latency >= s.low_ns) & (latency < s.high_ns)
        satisfied = s.pattern.satisfied_by(full.frame)
        assert (s.tp, s.fp, s.n_positives) == ((satisfied & inside).sum(), (satisfied & ~inside & scored).sum(),
                                               inside.sum())
    main = max(result.sub_intervals, key=lambda s: s.n_positives)
    assert main.f_score > 0.9 and DEGRADED_OPERATION in main.words
    (note,) = result.notes_of("sample_scored")
    assert (note.sample, note.n_requests, note.random_state) == (2_000, full.n_requests, 1)
    assert note.epsilon == dkw_epsilon(2_000) and note.f_all == tuple(s.f_score for s in result.sub_intervals)
    assert np.array_equal(labels, est.predict(full))  # the workers' labels are the estimator's predict


def test_a_part_is_labelled_and_scored_with_the_estimators_rules(tmp_path):
    """What the workers do with a sampled result (``_count_part``): the estimator's labels,
    compound rules included, and its scores, the uncertain requests left out."""
    import polars as pl

    from tracesleuth.scale.analyses import _count_part

    ms = 1_000_000
    rng = np.random.default_rng(1)
    n = 3000
    degraded, miss = rng.random(n) < 0.15, rng.random(n) < 0.08
    a = np.round((rng.normal(20, 1, n) + 40 * degraded) * ms).astype(np.int64)
    b = np.round((rng.normal(30, 1, n) + rng.lognormal(np.log(110), 0.2, n) * miss) * ms).astype(np.int64)
    c = np.round(rng.lognormal(np.log(10), 0.3, n) * ms).astype(np.int64)
    frame = pl.DataFrame({"trace_id": [f"{i:032x}" for i in range(n)], "span_id": [f"{i:016x}" for i in range(n)],
                          "start_ns": np.arange(n, dtype=np.int64), "latency_ns": a + b + c,
                          "exclusive_ns[svc:a]": a, "exclusive_ns[svc:b]": b, "exclusive_ns[svc:c]": c})
    model = LatencyDegradationPatterns(random_state=0, generations=120).fit(frame)
    result = model.result_
    assert any(rule.carries for rule in result.compound) and result.uncertain_ns is not None
    frame.write_parquet(tmp_path / "part.parquet")
    counted = _count_part(tmp_path / "part.parquet", model, result)
    assert np.array_equal(counted["labels"], model.labels_)
    assert counted["counts"].tolist() == [[s.tp, s.tp + s.fp, s.n_positives] for s in result.sub_intervals]


def test_sample_needs_a_dask_table_and_a_pattern_solver(synthetic_store):
    from tracesleuth.analyses.patterns.baselines import DegradedClusters
    from tracesleuth.errors import ParameterError

    table = build_trace_table(synthetic_store.read_spans())
    with pytest.raises(ParameterError, match="--scheduler"):
        fit_patterns(LatencyDegradationPatterns(), table, sample=100)
    with dask_trace_table(synthetic_store.path, partition_spans=30_000) as dask_table:
        with pytest.raises(ParameterError, match="kmeans"):
            fit_patterns(DegradedClusters(method="kmeans"), dask_table, sample=100)


def test_localization_with_clusters_on_the_workers_is_the_in_process_one(cluster, trainticket_store):
    window = (1_674_981_780 * 10**9, 1_674_981_960 * 10**9)  # 2023-01-29 08:43 - 08:46 UTC
    from tracesleuth.model.table import traces_starting_between

    tables, _ = root_tables(traces_starting_between(trainticket_store.read_spans(), *window))
    reference = RootCauseLocalization(random_state=0).fit(tables)
    with shuffle_by_trace(trainticket_store.path, scheduler=cluster, period=window) as partitions:
        tables, _ = root_tables(partitions, build=lambda p, e: p.table(e).to_trace_table())
        with on_workers(cluster):
            est = RootCauseLocalization(random_state=0).fit(tables)
    assert est.result_.to_dict() == reference.result_.to_dict()
    assert reference.result_.n_clusters > 1


def test_annotations_from_a_cluster_are_the_in_process_ones(cluster, annotated_stores):
    """The calls' span attributes are read on the workers (the features function travels to
    them); derived annotations and their check equal the in-process ones."""
    from tracesleuth.analyses.annotate import PerformanceAnnotations

    derive, check = annotated_stores
    reference = PerformanceAnnotations(random_state=0).fit(root_tables(derive.read_spans())[0])
    checked = PerformanceAnnotations(annotations=reference.annotations_).fit(root_tables(check.read_spans())[0])
    results = []
    for store, est in ((derive, PerformanceAnnotations(random_state=0)),
                       (check, PerformanceAnnotations(annotations=reference.annotations_))):
        with shuffle_by_trace(store.path, scheduler=cluster, partition_spans=1_000) as partitions:
            tables, _ = root_tables(partitions, build=lambda p, e: p.table(e).to_trace_table())
            results.append(est.fit(tables).result_.to_dict())
    assert results == [reference.result_.to_dict(), checked.result_.to_dict()]
    assert "size(entries)" in results[0]["features"] and results[1]["pass_rate"] < 1


def test_the_comparison_with_call_views_reduced_on_the_workers_is_the_in_process_one(cluster, tmp_path):
    """Each period's calls reduced in worker processes (the reduction and its Categorical names
    pickled back): the in-process comparison."""
    from tracesleuth.analyses.compare import RequestFlowComparison
    from tracesleuth.analyses.compare.synthetic import ENDPOINT, simulate_scenario
    from tracesleuth.io.store import SpanStore

    scenario = simulate_scenario("slowed-handler", n_requests=1_500, random_state=7)
    reference = RequestFlowComparison(random_state=0).fit(*scenario.tables())
    tables = []
    for name, spans in (("problem", scenario.problem), ("baseline", scenario.baseline)):
        SpanStore(tmp_path / name).append_spans(spans.to_batches(2_000), part_spans=2_000)
        tables.append(dask_trace_table(tmp_path / name, ENDPOINT, scheduler=cluster, partition_spans=6_000))
    try:
        assert all(len(t.parts) > 2 for t in tables)
        found = RequestFlowComparison(random_state=0).fit(*(t.to_trace_table() for t in tables))
    finally:
        for t in tables:
            t.close()
    assert found.result_.to_dict() == reference.result_.to_dict()
    assert reference.result_.pooled and any(m.edges for m in reference.result_.mutations)
