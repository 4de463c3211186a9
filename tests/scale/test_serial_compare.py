"""The comparison on tables built partition by partition: each period's call view reduced per
partition (:mod:`tracesleuth.analyses.compare.calls`) gives the in-process result."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tracesleuth.analyses.compare import RequestFlowComparison
from tracesleuth.analyses.compare.synthetic import ENDPOINT, simulate_scenario
from tracesleuth.io.store import SpanStore
from tracesleuth.scale import dask_trace_table


def _store(path, spans) -> SpanStore:
    store = SpanStore(path)
    store.append_spans(spans.to_batches(2_000), part_spans=2_000)
    return SpanStore(path, create=False)


@pytest.mark.parametrize("kind", ["slowed-handler", "early-return", "reroute", "new-slow-path"])
def test_the_comparison_reduced_per_partition_is_the_in_process_one(serial, tmp_path, kind, monkeypatch):
    from tracesleuth.analyses.compare import calls as calls_module
    from tracesleuth.analyses.compare.pooled import spill_series

    spilled = []
    monkeypatch.setattr(calls_module, "spill_series", lambda series, path: spilled.append(path) or spill_series(series, path))
    scenario = simulate_scenario(kind, n_requests=1_500, random_state=7)
    reference = RequestFlowComparison(random_state=0).fit(*scenario.tables())
    stores = [_store(tmp_path / name, spans) for name, spans in (("problem", scenario.problem),
                                                                 ("baseline", scenario.baseline))]
    with (dask_trace_table(stores[0].path, ENDPOINT, scheduler=serial, partition_spans=6_000) as problem,
          dask_trace_table(stores[1].path, ENDPOINT, scheduler=serial, partition_spans=6_000) as baseline):
        assert len(problem.parts) > 2 and len(baseline.parts) > 2
        tables = problem.to_trace_table(), baseline.to_trace_table()
        found = RequestFlowComparison(random_state=0).fit(*tables)
        assert all("calls" not in t._cache for t in tables)  # the views were reduced on the workers
        # Each partition's series went to disk and were ranked from there; nothing is left behind.
        assert len(spilled) >= len(problem.parts) + len(baseline.parts)
        assert not list(problem.workdir.glob("spill-*")) and not list(baseline.workdir.glob("spill-*"))
    assert found.result_.to_dict() == reference.result_.to_dict()
    assert found.categories_.equals(reference.categories_)
    # In this process, tables larger than a partition reduce their views partition by partition.
    pieces = RequestFlowComparison(random_state=0).fit(*(replace(t, partition_spans=6_000) for t in scenario.tables()))
    assert pieces.result_.to_dict() == reference.result_.to_dict()
    result = reference.result_
    assert result.significant and result.service_calls
    if kind != "new-slow-path":  # explained mutations (edges, operations from the kept calls)
        assert any(m.operations for m in result.mutations)
    if kind == "slowed-handler":
        assert result.pooled and any(m.edges for m in result.mutations)
    if kind == "early-return":
        assert result.call_drops


def test_series_ranked_from_disk_bucket_by_bucket_are_the_series_ranked_whole(tmp_path):
    """The pooled tests of series written to disk in pieces (:class:`SpilledSeries`, one period or
    both) are those of the series in memory, to the bit."""
    from tracesleuth.analyses.compare.pooled import (SpilledSeries, _per_stratum, call_counts_of, pooled_from,
                                                     series_of, spill_series, with_children)

    scenario = simulate_scenario("slowed-handler", n_requests=1_500, random_state=3)
    problem, baseline = (with_children(t.calls()) for t in scenario.tables())
    series = {name: series_of(calls) for name, calls in (("b", baseline), ("p", problem))}

    def spilled(name: str) -> SpilledSeries:
        frame = series[name]
        cuts = [0, frame.height // 3, 2 * frame.height // 3, frame.height]
        return SpilledSeries(tuple(spill_series(frame[a:b], tmp_path / f"{name}-{k}.arrow")
                                   for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))))

    whole = _per_stratum(series["b"], series["p"])
    assert whole.height > 10
    for base, prob in ((spilled("b"), spilled("p")), (series["b"], spilled("p"))):
        assert _per_stratum(base, prob).equals(whole)
    kwargs = dict(alpha=0.05, correction="holm", min_calls=5)
    counts = call_counts_of(baseline), call_counts_of(problem)
    assert pooled_from(spilled("b"), spilled("p"), *counts, **kwargs) == pooled_from(series["b"], series["p"], *counts,
                                                                                       **kwargs)
