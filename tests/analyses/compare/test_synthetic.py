"""The simulated scenarios carry the ground truth they promise, and the anchor rule on them."""

from __future__ import annotations

import polars as pl
import pytest

from tracesleuth.analyses.compare._baseline_rule import rank_services_by_rise
from tracesleuth.analyses.compare.synthetic import (ENDPOINT, SCENARIOS, planted_case, simulate_scenario,
                                                    top_service_hit)
from tracesleuth.errors import ParameterError
from tracesleuth.schema import SPAN_SCHEMA


def _tables(kind, seed=0, n=400):
    sc = simulate_scenario(kind, n_requests=n, random_state=seed)
    problem, baseline = sc.tables()
    return sc, problem, baseline


def _mean(calls: pl.DataFrame, column: str, **where) -> float:
    for k, v in where.items():
        calls = calls.filter(pl.col(k) == v)
    return float(calls[column].mean())


@pytest.mark.parametrize("kind", SCENARIOS)
def test_periods_have_schema_volumes_and_one_endpoint(kind):
    sc, problem, baseline = _tables(kind)
    assert sc.problem.schema.equals(SPAN_SCHEMA) and sc.baseline.schema.equals(SPAN_SCHEMA)
    assert (sc.n_problem, sc.n_baseline) == (400, 600)
    assert problem.n_requests == 400 and baseline.n_requests == 600
    assert problem.endpoint == baseline.endpoint == ENDPOINT
    assert not problem.frame["incomplete"].any() and not baseline.frame["incomplete"].any()
    # the baseline period ends before the problem period starts
    assert baseline.frame["start_ns"].max() < problem.frame["start_ns"].min()


def test_same_seed_same_scenario_and_bad_kind():
    a = simulate_scenario("reroute", n_requests=100, random_state=3)
    b = simulate_scenario("reroute", n_requests=100, random_state=3)
    assert a.problem.equals(b.problem) and a.baseline.equals(b.baseline) and a.injected == b.injected
    with pytest.raises(ParameterError, match="'kind'"):
        simulate_scenario("no-such-change")
    with pytest.raises(ParameterError, match="'n_requests'"):
        simulate_scenario("reroute", n_requests=0)


def test_slowed_handler_slows_only_the_server_spans_of_the_service():
    sc, problem, baseline = _tables("slowed-handler")
    p, b = problem.calls(), baseline.calls()
    rise = _mean(p, "exclusive_ns", service=sc.injected, kind="server") - _mean(
        b, "exclusive_ns", service=sc.injected, kind="server")
    assert 17e6 < rise < 23e6  # 20 ms
    assert abs(_mean(p, "gap_ns", server_service=sc.injected) - _mean(b, "gap_ns", server_service=sc.injected)) < 1e5


def test_network_delay_grows_the_gap_not_the_server_span():
    sc, problem, baseline = _tables("network-delay", seed=1)
    p, b = problem.calls(), baseline.calls()
    gap_rise = _mean(p, "gap_ns", server_service=sc.injected) - _mean(b, "gap_ns", server_service=sc.injected)
    assert 19e6 < gap_rise < 21e6
    server = lambda c: _mean(c, "duration_ns", service=sc.injected, kind="server")  # noqa: E731
    assert abs(server(p) - server(b)) < 0.2 * server(b)
    # every client span calling the service is longer than its server span by the delay
    into = p.filter(pl.col("server_service") == sc.injected)
    assert (into["gap_ns"] > 20_000_000).all()


def test_new_slow_path_is_a_new_category_through_the_service():
    sc, problem, baseline = _tables("new-slow-path", seed=2)
    new = set(problem.frame["signature"]) - set(baseline.frame["signature"])
    assert len(new) == 1 and f"{sc.injected}:" in next(iter(new))
    rows = problem.frame.filter(pl.col("signature").is_in(list(new)))
    assert set(rows["trace_id"]) == set(sc.affected_traces)


def test_reroute_sends_calls_to_a_service_absent_from_the_baseline():
    sc, problem, baseline = _tables("reroute", seed=4)
    source = sc.details["rerouted_from"]
    assert sc.injected == f"{source}-legacy"
    p, b = problem.calls(), baseline.calls()
    assert sc.injected not in set(b["service"]) and sc.injected in set(p["service"])
    share = p.filter(pl.col("service") == sc.injected).height / p.filter(
        pl.col("service").is_in([source, sc.injected])).height
    assert 0.6 < share < 0.8


def test_early_return_drops_the_subtree_and_marks_an_error():
    sc, problem, baseline = _tables("early-return", seed=0)
    p, b = problem.calls(), baseline.calls()
    spans = p.filter(pl.col("service") == sc.injected, pl.col("kind") == "server")
    early = spans.filter(pl.col("error"))
    assert early.height > 0.6 * spans.height
    children = p.filter(pl.col("parent_span_id").is_in(early["span_id"].implode()))
    assert children.height == 0  # the subtree is missing
    assert not b["error"].any()
    full = spans.filter(~pl.col("error"))
    assert p.filter(pl.col("parent_span_id").is_in(full["span_id"].implode())).height > 0
    affected = problem.frame.filter(pl.col("trace_id").is_in(list(sc.affected_traces)))
    assert affected["error"].all()


def test_workload_mix_changes_shares_not_times():
    sc, problem, baseline = _tables("workload-mix", n=2000)
    share = lambda t: float(t.frame["signature"].str.contains("checkout:PlaceOrder").mean())  # noqa: E731
    assert share(baseline) == pytest.approx(0.15, abs=0.03) and share(problem) == pytest.approx(0.35, abs=0.03)
    p, b = problem.calls(), baseline.calls()
    for service in ("payment", "catalog"):
        assert _mean(p, "exclusive_ns", service=service) == pytest.approx(_mean(b, "exclusive_ns", service=service),
                                                                          rel=0.1)
    assert not sc.affected_traces
    assert top_service_hit(sc, []) and top_service_hit(sc, ["shipping"]) and not top_service_hit(sc, ["catalog"])


@pytest.mark.parametrize("kind", ["slowed-handler", "network-delay", "new-slow-path"])
def test_anchor_rule_finds_latency_changes(kind):
    for seed in range(3):
        sc, problem, baseline = _tables(kind, seed=seed)
        ranked = rank_services_by_rise(problem, baseline)
        assert ranked[0][0] == sc.injected, (kind, seed, ranked[:3])
        scores = [s for _, s in ranked]
        assert scores == sorted(scores, reverse=True)


def test_anchor_rule_sees_nothing_between_identical_periods():
    sc, problem, _ = _tables("slowed-handler")
    ranked = rank_services_by_rise(problem, problem)
    assert all(score == 0 for _, score in ranked)


def test_planted_case_shape():
    case = planted_case(0)
    problem, baseline = case.args
    assert problem.n_requests == 600 and baseline.n_requests == 900
    assert case.floor == 1.0 and case.settings == {"random_state": 0}
