"""Whether a live run is a result: its load, failures and queueing (RunHealth), and the one rule
that turns them and the scores into an outcome and an exit code."""

from __future__ import annotations

import os

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tracesleuth.demo import EXIT_BROKEN, EXIT_NOT_RECOVERED, RECOVERY_F_SCORE, DemoResult, Fault, IncidentResult
from tracesleuth.demo._health import (MAX_FAILED_SHARE, MIN_RATE_SHARE, achieved_rate, assess_run, blurred_requests,
                                      modelled_quantiles_ns)

MS = 1_000_000


def _health(**changes):
    m50, _ = modelled_quantiles_ns(0)
    base = dict(planned=960, sent=960, completed=960, failed=0, analysed=960, lost=0, rate_per_s=8.0,
                achieved_rate_per_s=8.0, undegraded_latency_ns=np.random.default_rng(0).normal(m50, 3 * MS, 800),
                seed=0, cpu_cores=0.4)
    return assess_run(**(base | changes))


def test_a_run_that_kept_up_is_healthy():
    h = _health()
    assert h.ok and h.broken == () and h.overloaded is None and h.reason() is None
    assert "960 of 960 requests sent at 8.00/s" in h.load_words() and "0.40 of" in h.load_words()
    d = h.to_dict()
    assert d["ok"] and d["thresholds"]["max_failed_share"] == MAX_FAILED_SHARE


@pytest.mark.parametrize("changes, words", [
    ({"failed": 20, "completed": 940}, "20 of 960 requests failed"),
    ({"achieved_rate_per_s": 8.0 * MIN_RATE_SHARE - 0.1}, "where 8/s was asked"),
    ({"sent": 900, "completed": 900, "analysed": 900}, "sent 900 of 960 requests"),
    ({"lost": 30}, "the traces of 30 of 960 answered requests did not reach the store"),
])
def test_a_broken_load_is_named(changes, words):
    h = _health(**changes, load_average=9.8)
    assert h.broken and not h.ok and words in h.reason()
    assert "Try a lower --rate" in h.reason() and "could not keep up with 8 requests/s" in h.reason()
    assert "the demo used 0.40 of its" in h.reason() and "load average was 9.8" in h.reason()


def test_queueing_beyond_the_modelled_times_is_an_overload():
    slow = _health(undegraded_latency_ns=np.random.default_rng(0).normal(300, 50, 800) * MS)
    assert not slow.broken and slow.overloaded and "queueing" in slow.overloaded
    spread = _health(undegraded_latency_ns=np.r_[np.full(700, 52 * MS), np.full(100, 400 * MS)])
    assert spread.overloaded
    busy = _health(load_average=os.cpu_count() + 3.5)
    assert not busy.broken and "the machine was busy: its load average was" in busy.overloaded
    assert _health(load_average=0.5).ok


def _stalled_run(seed: int, *, stalled: int, on_both: bool = True):
    """1,000 requests, 100 carrying A1 (+50 ms in rpc a) and 100 A2 (+50 ms in a and b: A2's requests
    are slow in a by design, never blurred for A1); ``stalled`` undegraded requests were slowed
    35 ms (past the 25 ms midpoint, by 5 standard deviations) in a, and in b too when ``on_both``;
    40 more slowed 15 ms (short of it, by 5) in both."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(30, 2, 1000) * MS, rng.normal(10, 1, 1000) * MS
    marks = np.array([None] * 1000, dtype=object)
    marks[:100], marks[100:200] = "A1", "A2"
    a[:200] += 50 * MS
    b[100:200] += 50 * MS
    stall = rng.choice(np.arange(200, 1000), stalled + 40, replace=False)
    a[stall[:stalled]] += 35 * MS
    b[stall[:stalled]] += 35 * MS if on_both else 0
    a[stall[stalled:]] += 15 * MS
    b[stall[stalled:]] += 15 * MS
    return blurred_requests({"s:a": a, "s:b": b}, marks, [("A1", ("s:a",)), ("A2", ("s:a", "s:b", "s:gone"))],
                            recovery_f_score=RECOVERY_F_SCORE)


@pytest.mark.parametrize("seed", range(20))
def test_requests_a_slow_spell_made_look_degraded_are_counted(seed):
    """The count is exact over 20 seeds: past the midpoint on every RPC of the degradation is
    blurred, short of it (or past it on only one of two RPCs) is not; the tolerance follows from
    the recovery F-score (2 x 100 x (1 / 0.95 - 1) = 10.5)."""
    a1, a2 = _stalled_run(seed, stalled=12)
    assert (a1.affected, a1.blurred, a1.tolerated, a1.too_many) == (100, 12, 10, True)
    assert (a2.rpcs, a2.blurred, a2.too_many) == (("s:a", "s:b"), 12, True)
    a1, a2 = _stalled_run(seed, stalled=12, on_both=False)
    assert a1.blurred == 12 and a2.blurred == 0
    assert not any(b.too_many for b in _stalled_run(seed, stalled=10))


def test_a_slow_spell_that_blurs_a_degradation_is_an_overload():
    blurred = _stalled_run(0, stalled=12)
    h = _health(blurred=blurred, load_average=0.5)
    assert not h.broken and "queueing made 12 undegraded requests look like A1" in h.overloaded
    assert h.to_dict()["blurred"][0] == {"degradation": "A1", "rpcs": ["s:a"], "affected": 100, "blurred": 12,
                                         "tolerated": 10}
    o = _demo(h, {"A1": 0.94, "A2": 0.99}).outcome()
    assert (o.status, o.exit_code) == ("broken", EXIT_BROKEN) and "A1 (F 0.940)" in o.message
    assert _health(blurred=_stalled_run(0, stalled=10)).ok


def test_achieved_rate():
    scheduled = np.arange(100) * 125 * MS
    assert achieved_rate(scheduled, scheduled + MS, 8.0) == pytest.approx(8.0, rel=0.01)
    late = scheduled + np.arange(100) * 60 * MS                    # falling behind
    assert achieved_rate(scheduled, late, 8.0) < 6
    assert achieved_rate([], [], 8.0) == 0.0


def _demo(health, f_scores) -> DemoResult:
    return DemoResult(workdir=Path("."), store_path=Path("s"), labels_path=Path("l"), injections_path=Path("i"),
                      report_path=Path("r"), requests_sent=960, requests_completed=960, requests_failed=0,
                      requests_analysed=960, spans_stored=0, affected={"A1": 96, "A2": 96}, degradations=(),
                      endpoint="web-service:gethome", interval=None, match_f_scores=f_scores, matched={},
                      recovered_patterns={}, precision=1.0, recall=1.0, f_score=1.0, timings={}, seed=0,
                      rate_per_s=8.0, duration_s=120.0, noised=False, health=health)


def test_outcome_never_presents_a_broken_run_as_a_result():
    good, hit, miss = _health(), {"A1": 0.99, "A2": 0.97}, {"A1": 0.99, "A2": 0.6}
    assert _demo(good, hit).outcome().exit_code == 0
    assert f"F >= {RECOVERY_F_SCORE:g}" in _demo(good, hit).outcome().message
    o = _demo(good, miss).outcome()
    assert (o.status, o.exit_code) == ("not recovered", EXIT_NOT_RECOVERED) and "A2 (F 0.600)" in o.message
    failing = _health(failed=50, completed=910)
    for scores in (hit, miss):                         # a broken load is no result, whatever it scored
        o = _demo(failing, scores).outcome()
        assert (o.status, o.exit_code) == ("broken", EXIT_BROKEN) and "50 of 960 requests failed" in o.message
    busy = _health(undegraded_latency_ns=np.full(800, 400 * MS))
    o = _demo(busy, miss).outcome()
    assert (o.status, o.exit_code) == ("broken", EXIT_BROKEN) and "overloaded" in o.message
    o = _demo(busy, hit).outcome()
    assert o.exit_code == 0 and "although the machine was loaded" in o.message
    d = _demo(busy, miss).to_dict()
    assert d["outcome"]["exit_code"] == EXIT_BROKEN and d["disturbed"] and d["health"]["overloaded"]


def test_incident_outcome():
    fault = Fault("cart-service", "slow-handler", 20 * MS)
    r = IncidentResult(workdir=Path("."), store_path=Path("s"), report_path=Path("r"), labels_paths={}, fault=fault,
                       fault_start_ns=1, requests={"baseline": 480, "problem": 480}, endpoint="web-service:gethome",
                       services=({"service": "cart-service", "score": 1.0, "evidence": ["x"]},), injected_rank=1,
                       significant=True, timings={}, seed=0, rate_per_s=8.0, duration_s=120.0, health=_health())
    assert r.outcome().exit_code == 0 and r.top_service == "cart-service"
    assert "20 ms in every handler of cart-service" in r.to_dict()["fault"]["description"]
    other = replace(r, services=({"service": "account-service", "score": 1.0, "evidence": []},), injected_rank=None)
    o = other.outcome()
    assert o.exit_code == EXIT_NOT_RECOVERED and "cart-service is not suspected" in o.message
    assert "account-service ranks first" in o.message
    assert replace(other, health=_health(failed=30, completed=930)).outcome().exit_code == EXIT_BROKEN


def test_lost_telemetry_is_named_but_decides_nothing():
    from tracesleuth.demo._account import ProcessAccount, SignalAccount
    from tracesleuth.demo._report import live_run_section
    from tracesleuth.report.document import RenderContext

    clean = [ProcessAccount("cart-service", "cart-service-0", SignalAccount(100, 100, 0), SignalAccount(50, 50, 0)),
             ProcessAccount("load-generator", "load-generator-0", SignalAccount(960, 960, 0))]
    lossy = [ProcessAccount("web-service", "web-service-0", SignalAccount(200, 150, 10), SignalAccount(80, 79, 0)),
             *clean]
    hit = {"A1": 0.99, "A2": 0.97}
    h = _health(telemetry=clean)
    assert h.ok and h.telemetry_loss() is None and _demo(h, hit).outcome() == _demo(_health(), hit).outcome()
    assert h.spans == SignalAccount(1060, 1060, 0) and h.logs == SignalAccount(50, 50, 0)
    lost = _health(telemetry=lossy)
    assert lost.ok                                              # no status by itself ...
    o = _demo(lost, hit).outcome()
    assert (o.status, o.exit_code) == ("recovered", 0)
    assert lost.telemetry_loss() in o.message                  # ... but never silent
    assert lost.spans.lost == 50 and lost.spans.dropped == 40 and lost.logs.dropped == 1
    d = _demo(lost, hit).to_dict()["health"]
    assert d["spans"] == {"recorded": 1260, "exported": 1210, "export_failed": 10, "dropped": 40}
    assert d["logs"] == {"recorded": 130, "exported": 129, "export_failed": 0, "dropped": 1}
    assert [p["instance"] for p in d["telemetry"]] == ["cart-service-0", "load-generator-0", "web-service-0"]
    assert d["telemetry"][2]["spans"]["dropped"] == 40 and d["telemetry_loss"] == lost.telemetry_loss()
    assert "40 dropped before export" in lost.telemetry_words()
    html = live_run_section(lost, o).render(RenderContext())
    assert "telemetry lost by web-service-0" in html and "cart-service-0" not in html
    unreported = _health(telemetry=clean, telemetry_unreported=("items-service-1",))
    assert "items-service-1" in unreported.telemetry_loss() and unreported.to_dict()["telemetry_unreported"] == [
        "items-service-1"]
    assert _health().telemetry_words() is None and _health().to_dict()["spans"]["recorded"] == 0
