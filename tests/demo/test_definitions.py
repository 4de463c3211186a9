"""The demo and the simulator share one definition; settings are checked at the boundary."""

from __future__ import annotations

import numpy as np
import pytest

from tracesleuth.cli import main
from tracesleuth.demo import BAGGAGE_KEYS, run_demo
from tracesleuth.demo._catalog import QUERIES, create_databases, query_parameters
from tracesleuth.demo._protocol import DemoConfig, ExportSettings, child_environment
from tracesleuth.errors import ParameterError
from tracesleuth.evaluation.eshopper import (
    ASYNC_RPCS,
    FIRST_CALL,
    HOMEPAGE_CALLS,
    SYNC_RPCS,
    Degradation,
    draw_degradations,
    draw_marking,
    simulate_eshopper,
)


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("noised", [False, True])
def test_demo_marks_and_degrades_requests_as_the_simulator(seed, noised):
    n = 400
    session = simulate_eshopper(n_requests=n, noised=noised, random_state=seed)
    degradations = draw_degradations(noised=noised, random_state=seed)
    assert degradations == session.degradations
    assert len({d.type for d in degradations}) == 2 and all(set(d.rpcs) <= set(SYNC_RPCS) for d in degradations)
    marking = draw_marking(n, random_state=seed)
    names = [degradations[k].name if k >= 0 else None for k in marking.degradation]
    assert names == session.labels["degradation"].to_list()
    # Every delay the simulator injected is what Degradation.delays_ns gives for that request.
    expected = []
    for i, tid in enumerate(session.labels["trace_id"].to_list()):
        k = marking.degradation[i]
        if k >= 0:
            for x in degradations[k].delays_ns(deviate=bool(marking.deviate[i]), async_hit=bool(marking.async_hit[i])):
                expected.append((tid, degradations[k].name, x.call, x.delay_ns, x.noise))
    got = [tuple(r) for r in session.injections.select("trace_id", "degradation", "call", "delay_ns", "noise").rows()]
    assert sorted(got) == sorted(expected)


def test_delays_hit_the_first_call_of_each_rpc_and_total_type_times_50ms():
    d = Degradation("A1", ("categories-service:getcategory", "account-service:getprofile"),
                    deviating_rpc="account-service:getprofile", async_rpc=ASYNC_RPCS[1])
    plain = d.delays_ns()
    assert [x.call for x in plain] == [FIRST_CALL[r] for r in d.rpcs]
    assert sum(x.delay_ns for x in plain) == d.type * 50_000_000
    noisy = d.delays_ns(deviate=True, async_hit=True)
    assert [(x.delay_ns // 1_000_000, x.noise) for x in noisy] == [(50, ""), (60, "deviation"), (100, "async")]
    assert HOMEPAGE_CALLS[noisy[-1].call].asynchronous
    unnoised = Degradation("A2", ("cart-service:getcart",))
    assert [x.delay_ns for x in unnoised.delays_ns(deviate=True, async_hit=True)] == [50_000_000]


def test_config_round_trip(tmp_path):
    cfg = DemoConfig(seed=3, collector_url="http://127.0.0.1:1", instances={"web-service": ["http://127.0.0.1:2"]},
                     degradations=draw_degradations(noised=True, random_state=3), n_requests=10, rate_per_s=2.5,
                     databases={"cart-service": "x.sqlite"}, export=ExportSettings(schedule_delay_millis=200))
    assert DemoConfig.read(cfg.write(tmp_path / "c.json")) == cfg


def test_children_do_not_inherit_otel_settings(monkeypatch):
    monkeypatch.setenv("OTEL_PROPAGATORS", "b3")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST", "baggage")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    env = child_environment()
    assert not [k for k in env if k.startswith("OTEL_") and k != "OTEL_SEMCONV_STABILITY_OPT_IN"]
    assert env["OTEL_SEMCONV_STABILITY_OPT_IN"] == "http"


def test_baggage_keys_are_namespaced():
    assert all(k.startswith("tracesleuth.") for k in BAGGAGE_KEYS)


def test_databases_answer_every_query(tmp_path):
    import sqlite3

    paths = create_databases(tmp_path, seed=0)
    assert create_databases(tmp_path / "again", seed=0).keys() == paths.keys()
    for rpc, sql in QUERIES.items():
        con = sqlite3.connect(paths[rpc.split(":")[0]])
        try:
            rows = con.execute(sql, query_parameters(rpc, user=17, rank=1)).fetchall()
        finally:
            con.close()
        assert rows, rpc


@pytest.mark.parametrize("kwargs, name", [
    ({"duration_s": 0}, "duration_s"), ({"rate_per_s": -1}, "rate_per_s"), ({"seed": -1}, "seed"),
    ({"interval": "all"}, "interval"), ({"instances": {"web-service": 1}}, "instances"),
    ({"generations": 0}, "generations"),
])
def test_settings_are_checked_before_anything_starts(tmp_path, kwargs, name):
    with pytest.raises(ParameterError, match=f"'{name}' parameter of run_demo"):
        run_demo(workdir=tmp_path / "run", **kwargs)
    assert not (tmp_path / "run").exists()


def test_a_workdir_holding_a_run_is_refused(tmp_path):
    (tmp_path / "store").mkdir()
    with pytest.raises(ParameterError, match="already holds"):
        run_demo(workdir=tmp_path, duration_s=1)


def test_cli_demo_help_and_bad_settings(capsys):
    assert main(["demo", "--help"]) == 0
    assert "--noised" in capsys.readouterr().out
    assert main(["demo", "--rate", "0"]) == 2
    assert "rate_per_s" in capsys.readouterr().err


def test_marking_is_checked():
    with pytest.raises(ParameterError, match="p_affected"):
        draw_marking(10, p_affected=0.6)
    m = draw_marking(2000, random_state=5)
    share = np.bincount(m.degradation + 1, minlength=3) / 2000
    assert abs(share[1] - 0.1) < 0.03 and abs(share[2] - 0.1) < 0.03
