"""Which service: services' times, calls made, the score rule and the merge over endpoints."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tracesleuth.analyses.compare import RequestFlowComparison
from tracesleuth.analyses.compare.analysis import ComparisonResult
from tracesleuth.analyses.compare.endpoints import merge_services
from tracesleuth.analyses.compare.pooled import ServiceTime, _attributed, pooled_changes
from tracesleuth.report.sections.compare import flow_graph_figure
from tracesleuth.analyses.compare.services import ServiceSuspect, rank_services
from tracesleuth.analyses.compare.synthetic import simulate_scenario
from tracesleuth.errors import ParameterError


def _gap_strata(edges: dict) -> pl.DataFrame:
    """Gap strata of :func:`_per_stratum`'s shape: ``{(caller, callee): (baseline mean, problem mean)}``, 10
    calls a side each."""
    return pl.DataFrame([{"kind": "gap", "service": callee, "caller": caller, "key": f"{caller} -> {callee}",
                          "stratum": 0, "m": 10.0, "n": 10.0, "mean_b": b, "mean_p": p}
                         for (caller, callee), (b, p) in edges.items()])


def _owners(parts: pl.DataFrame) -> dict:
    return {(r["caller"], r["service"], r["owner"]): round(r["share"], 3) for r in parts.iter_rows(named=True)}


def test_a_gap_rise_a_caller_shows_on_every_callee_is_the_callers():
    """A CPU-starved caller: its client side is slow on every call it makes, whoever it calls."""
    parts = _owners(_attributed(_gap_strata({("web", "a"): (1.0, 10.0), ("web", "b"): (1.0, 10.0),
                                             ("web", "c"): (1.0, 10.0)})))
    assert parts[("web", "a", "web")] == 1.0 and parts[("web", "a", "a")] == 0.0


def test_a_gap_rise_into_one_callee_stays_the_callees():
    """Network delay into one service: the caller's other calls did not slow."""
    parts = _owners(_attributed(_gap_strata({("web", "a"): (1.0, 21.0), ("web", "b"): (1.0, 1.0),
                                             ("web", "c"): (1.0, 1.0)})))
    assert parts[("web", "a", "a")] == 1.0 and ("web", "a", "web") not in parts
    # a caller that calls one service only: the callee's, by the convention
    parts = _owners(_attributed(_gap_strata({("web", "a"): (1.0, 21.0)})))
    assert parts == {("web", "a", "a"): 1.0}


def test_severity_is_the_relative_rise_and_describes_itself():
    t = ServiceTime(service="s", added_ns=3e6, expected_ns=1e6, baseline_calls=10, problem_calls=12, exceedances=4,
                    p_value=0.2, auc=0.7)
    assert t.severity == 3.0 and t.to_dict()["severity"] == 3.0
    assert "x4 its baseline speed" in t.describe() and "p=0.2" in t.describe()
    assert ServiceTime("s", 1.0, 0.0, 1, 1, 0, 1.0, 0.5).severity == 1.0  # expected counted at least 1 ns


def test_calls_made_find_an_early_return_and_ignore_a_workload_mix_change():
    early = simulate_scenario("early-return", n_requests=600, random_state=4)
    problem, baseline = early.tables()
    found = pooled_changes(baseline.calls(), problem.calls(), alpha=0.05, correction="holm", min_calls=5)
    assert found.call_drops and found.call_drops[0].service == early.injected
    assert 0.5 < found.call_drops[0].drop <= 1.0 and found.call_drops[0].p_value < 0.05
    mix = simulate_scenario("workload-mix", n_requests=600, random_state=4)
    problem, baseline = mix.tables()
    found = pooled_changes(baseline.calls(), problem.calls(), alpha=0.05, correction="holm", min_calls=5)
    assert found.call_drops == ()  # the mix reweights call counts the operations already had


def _time(service, severity, p, calls=20):
    return ServiceTime(service=service, added_ns=severity * 1e6, expected_ns=1e6, baseline_calls=calls,
                       problem_calls=calls, exceedances=1, p_value=p, auc=0.6)


def test_a_rise_counts_when_significant_or_from_a_doubling():
    ranked = rank_services((), endpoint="web:GET /", errors_baseline=None, errors_problem=None, n_baseline=10,
                           n_problem=10, alpha=0.05, service_times=(
                               _time("throttled", 9.0, 0.3), _time("busy", 0.4, 1e-6), _time("noise", 0.3, 0.4)))
    assert [s.service for s in ranked] == ["throttled", "busy"]
    assert ranked[0].score == pytest.approx(0.9) and ranked[0].severity == 9.0
    assert "not significant" in ranked[0].evidence[0] and "not significant" not in ranked[1].evidence[0]
    strict = rank_services((), endpoint="web:GET /", errors_baseline=None, errors_problem=None, n_baseline=10,
                           n_problem=10, alpha=0.05, service_times=(_time("throttled", 9.0, 0.3),),
                           min_rise=float("inf"))
    assert strict == ()
    assert RequestFlowComparison(min_rise=1e9).get_params()["min_rise"] == 1e9
    with pytest.raises(ParameterError, match="'min_rise'"):
        RequestFlowComparison(min_rise=0.0).fit(None, None)


def _result(suspects, calls):
    return ComparisonResult(significant=True, reason=None, endpoint="e", n_baseline=1, n_problem=1,
                            services=tuple(ServiceSuspect(service=s, score=v, evidence=()) for s, v in suspects),
                            service_calls=tuple(calls.items()))


def test_each_service_is_scored_at_its_home_endpoint():
    """A small endpoint's noisy view of a service loses to the endpoint that holds most of its calls."""
    results = {"root": _result([("a", 0.9), ("b", 0.2)], {"a": 100, "b": 500, "c": 300}),
               "inner": _result([("b", 0.95), ("c", 0.8)], {"b": 40, "c": 30})}
    assert merge_services(results) == [("a", 0.9, "root"), ("b", 0.2, "root")]


def test_flow_graph_figure_draws_mutation_beside_precursor():
    sc = simulate_scenario("early-return", n_requests=600, random_state=4)
    problem, baseline = sc.tables()
    r = RequestFlowComparison(random_state=0).fit(problem, baseline).result_
    m = next(m for m in r.mutations if m.kind == "structural")
    # the mutation lost a subtree: marked on the precursor's side, the divergence on the mutation's
    assert m.graph.changed == () and m.precursor_graph.changed and m.graph.divergence is not None
    assert len(m.graph.keys) == len(m.precursor_graph.keys) - len(m.precursor_graph.changed)
    fig = flow_graph_figure(m)
    assert len(fig.layout.annotations) == 2  # two titled subplots
    json.dumps(m.to_dict())
    assert r.services[0].service == sc.injected
    rt = next((m for m in r.mutations if m.kind == "response-time"), None)
    assert rt is None or rt.precursor_graph is None


@pytest.mark.parametrize("seed", [0, 1])
def test_stationary_periods_rank_no_service(seed):
    """Halves of one period: the services' times move by percents, not folds, and nothing is significant."""
    sc = simulate_scenario("slowed-handler", n_requests=800, random_state=seed)
    _, baseline = sc.tables()
    frame = baseline.frame
    ids = frame["trace_id"].to_numpy()[np.random.default_rng(seed).permutation(frame.height)[:frame.height // 2]]
    from tracesleuth.model import build_trace_table
    spans = pl.from_arrow(baseline.spans)
    a = build_trace_table(spans.filter(pl.col("trace_id").is_in(ids)).to_arrow())
    b = build_trace_table(spans.filter(~pl.col("trace_id").is_in(ids)).to_arrow())
    r = RequestFlowComparison(random_state=0).fit(b, a).result_
    assert r.services == (), r.describe()
