"""The demo and the simulator share one definition; settings are checked at the boundary."""

from __future__ import annotations

import numpy as np
import pytest

from tracesleuth.cli import main
from tracesleuth.demo import (
    BAGGAGE_KEYS,
    DEFAULT_INSTANCES,
    LIVE_SERVICE,
    LIVE_SERVICES,
    DemoResult,
    LiveDegradation,
    run_demo,
    run_incident,
)
from tracesleuth.demo._catalog import DATABASE_SERVICES, QUERIES, create_databases, query_parameters
from tracesleuth.demo._protocol import DemoConfig, ExportSettings, child_environment, describe_live, live_rpc
from tracesleuth.demo._run import STOP_WAVES
from tracesleuth.errors import ParameterError
from tracesleuth.evaluation.eshopper import (
    ASYNC_RPCS,
    FIRST_CALL,
    HOMEPAGE_CALLS,
    RPCS,
    SERVICES,
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


def test_the_live_shop_deploys_the_call_tree_on_6_services():
    # The simulator stays the paper's E-Shopper: 13 calls of 8 RPCs among 5 services.
    assert len(HOMEPAGE_CALLS) == 13 and len(RPCS) == 8 and len(SERVICES) == 5
    assert LIVE_SERVICES == ("web-service", "items-service", "account-service", "cart-service",
                             "categories-service", "recommendation-service")
    # Every RPC (hence every call) is served by exactly one live service.
    assert set(LIVE_SERVICE) == set(RPCS) and set(LIVE_SERVICE.values()) == set(LIVE_SERVICES)
    served = {s: sorted(r.split(":")[1] for r in RPCS if LIVE_SERVICE[r] == s) for s in LIVE_SERVICES}
    assert served["items-service"] == ["findfeaturesitems", "finditems"]
    assert served["recommendation-service"] == ["getrecommended"]
    assert sum(map(len, served.values())) == len(RPCS)
    assert all(LIVE_SERVICE[r] == r.split(":")[0] for r in RPCS if r != "items-service:getrecommended")
    assert live_rpc("items-service:getrecommended") == "recommendation-service:getrecommended"
    assert [live_rpc(r) for r in RPCS if r != "items-service:getrecommended"] == \
        [r for r in RPCS if r != "items-service:getrecommended"]
    # Default deployment: 7 processes, items-service twice; every live service is stopped after
    # each of its callers.
    assert list(DEFAULT_INSTANCES) == list(LIVE_SERVICES) and sum(DEFAULT_INSTANCES.values()) == 7
    assert DEFAULT_INSTANCES["items-service"] == 2
    assert sorted(s for wave in STOP_WAVES for s in wave) == sorted(LIVE_SERVICES)
    wave_of = {s: k for k, wave in enumerate(STOP_WAVES) for s in wave}
    for c in HOMEPAGE_CALLS[1:]:
        caller, callee = LIVE_SERVICE[HOMEPAGE_CALLS[c.parent].rpc], LIVE_SERVICE[c.rpc]
        assert wave_of[caller] < wave_of[callee], (caller, callee)


def test_descriptions_use_the_live_names():
    d = Degradation("A1", ("cart-service:getcart", "items-service:getrecommended"),
                    deviating_rpc="items-service:getrecommended", async_rpc="items-service:findfeaturesitems")
    text = describe_live(d)
    assert text == ("A1 (type 2): +50 ms in cart-service:getcart, recommendation-service:getrecommended; "
                    "noise 1: recommendation-service:getrecommended +60 ms in ~half; "
                    "noise 2: items-service:findfeaturesitems +100 ms in ~half")
    live = LiveDegradation(d)
    assert (live.name, live.type, live.noised, live.describe()) == ("A1", 2, True, text)
    assert live.to_dict() == {"name": "A1", "rpcs": ["cart-service:getcart", "recommendation-service:getrecommended"],
                              "deviating_rpc": "recommendation-service:getrecommended",
                              "async_rpc": "items-service:findfeaturesitems"}
    for seed in range(20):
        for g in draw_degradations(noised=True, random_state=seed):
            text = describe_live(g)
            assert "items-service:getrecommended" not in text
            assert text.count("recommendation-service") == g.describe().count("items-service:getrecommended")


def test_demo_result_shows_live_names(tmp_path):
    d = Degradation("A1", ("items-service:getrecommended",))
    result = DemoResult(workdir=tmp_path, store_path=tmp_path, labels_path=tmp_path, injections_path=tmp_path,
                        report_path=tmp_path, requests_sent=1, requests_completed=1, requests_failed=0,
                        requests_analysed=1, spans_stored=38, affected={"A1": 0}, degradations=(LiveDegradation(d),),
                        endpoint="web-service:gethome", interval=None, match_f_scores={}, matched={},
                        recovered_patterns={}, precision=0.0, recall=0.0, f_score=0.0, timings={}, seed=0,
                        rate_per_s=1.0, duration_s=1.0, noised=False)
    [doc] = result.to_dict()["degradations"]
    assert doc == {"name": "A1", "rpcs": ["recommendation-service:getrecommended"], "deviating_rpc": None,
                   "async_rpc": None, "type": 1,
                   "description": "A1 (type 1): +50 ms in recommendation-service:getrecommended"}


def test_injections_name_the_live_services(tmp_path):
    from tracesleuth.demo.loadgen import LoadGenerator, _Sent

    degradations = (Degradation("A1", ("items-service:getrecommended", "cart-service:getcart"),
                                deviating_rpc="items-service:getrecommended", async_rpc="items-service:finditems"),
                    Degradation("A2", ("account-service:getprofile",)))
    config = DemoConfig(seed=0, collector_url="http://127.0.0.1:9", instances={}, degradations=degradations,
                        n_requests=3, rate_per_s=1.0, labels_path=str(tmp_path / "labels.csv"),
                        injections_path=str(tmp_path / "injections.csv"))
    gen = LoadGenerator(config)
    try:
        gen.sent = [_Sent(0, "A1", "deviation+async", 0, trace_id="a" * 32),
                    _Sent(1, None, "", 0, trace_id="b" * 32), _Sent(2, "A2", "", 0, trace_id="c" * 32)]
        gen.write()
    finally:
        gen.provider.shutdown()
    import polars as pl

    rows = pl.read_csv(config.injections_path).select("degradation", "service", "operation", "call", "noise").rows()
    assert rows == [("A1", "recommendation-service", "getrecommended", 10, "deviation"),
                    ("A1", "cart-service", "getcart", 4, None),
                    ("A1", "items-service", "finditems", 1, "async"),
                    ("A2", "account-service", "getprofile", 3, None)]


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
    # Every live service but the gateway owns a database; QUERIES is keyed by live RPC.
    assert set(paths) == set(DATABASE_SERVICES) == set(LIVE_SERVICES) - {"web-service"}
    assert set(QUERIES) == {live_rpc(r) for r in RPCS if r != "web-service:gethome"}
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
    import typer

    from tracesleuth.cli.app import app
    from tracesleuth.demo import DEFAULT_DURATION_S, DEFAULT_RATE_PER_S

    assert main(["demo", "--help"]) == 0
    assert "--noised" in capsys.readouterr().out
    assert main(["demo", "--rate", "0"]) == 2
    assert "rate_per_s" in capsys.readouterr().err
    for argv, words in ((["demo", "--incident", "cart-service", "--noised"], "--noised and --interval"),
                        (["demo", "--fault", "network-delay"], "add --incident SERVICE"),
                        (["demo", "--incident", "shipping-service"], "'service' parameter of run_incident"),
                        (["demo", "--incident", "web-service"], "'service' parameter of run_incident"),
                        (["demo", "--incident", "cart-service", "--fault", "crash"], "'fault' parameter"),
                        (["demo", "--incident", "cart-service", "--fault-delay", "20"], "Cannot read duration"),
                        (["demo", "--fault-share", "0.3"], "add --incident SERVICE"),
                        (["demo", "--incident", "cart-service", "--fault-share", "0.3"], "--fault-share sets the share"),
                        (["demo", "--incident", "cart-service", "--fault", "exception", "--fault-delay", "5ms"],
                         "--fault-delay sets the delay"),
                        (["demo", "--incident", "cart-service", "--fault", "cpu-burn", "--fault-share", "1.5"],
                         "'share' parameter of run_incident")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, (argv, err)
    # The command's defaults are the library's.
    params = {p.name: p.default for p in typer.main.get_command(app).commands["demo"].params}
    assert (params["duration"], params["rate"]) == (DEFAULT_DURATION_S, DEFAULT_RATE_PER_S)


def test_incident_settings_are_checked_before_anything_starts(tmp_path):
    for kwargs, name in (({"fault": "x"}, "fault"), ({"delay_ns": 10}, "delay_ns"), ({"duration_s": 0}, "duration_s"),
                         ({"fault": "exception", "share": 0}, "share"), ({"fault": "cpu-burn", "share": 2}, "share")):
        with pytest.raises(ParameterError, match=f"'{name}' parameter of run_incident"):
            run_incident("cart-service", workdir=tmp_path / "run", **kwargs)
        assert not (tmp_path / "run").exists()


def test_the_faults_describe_themselves():
    from tracesleuth.demo import CODE_FAULTS, DELAY_FAULTS, FAULT_KINDS, SHARE_FAULTS, Fault

    assert set(FAULT_KINDS) == {"slow-handler", "network-delay", "exception", "early-return", "cpu-burn"}
    assert set(DELAY_FAULTS) | set(SHARE_FAULTS) == set(FAULT_KINDS) and set(CODE_FAULTS) < set(SHARE_FAULTS)
    words = {kind: Fault("cart-service", kind, 20_000_000 if kind in DELAY_FAULTS else 0,
                         1.0 if kind in DELAY_FAULTS else 0.25).describe() for kind in FAULT_KINDS}
    assert words["slow-handler"] == "+20 ms in every handler of cart-service (a slower handler)"
    assert words["network-delay"] == "+20 ms of network delay on every call into cart-service"
    assert words["exception"].startswith("an exception in the handler of cart-service for 25% of its requests")
    assert words["early-return"].startswith("an early return in the handler of cart-service for 25% of its requests")
    assert words["cpu-burn"] == "a busy thread burning 25% of a core in every instance of cart-service"
    assert Fault("cart-service", "exception", 0, 0.25).to_dict()["share"] == 0.25


def test_marking_is_checked():
    with pytest.raises(ParameterError, match="p_affected"):
        draw_marking(10, p_affected=0.6)
    m = draw_marking(2000, random_state=5)
    share = np.bincount(m.degradation + 1, minlength=3) / 2000
    assert abs(share[1] - 0.1) < 0.03 and abs(share[2] - 0.1) < 0.03


def test_recommendations_are_a_copy_of_the_best_rated_items(tmp_path):
    import sqlite3

    paths = create_databases(tmp_path, seed=3)
    items = sqlite3.connect(paths["items-service"])
    recs = sqlite3.connect(paths["recommendation-service"])
    try:
        for user, rank in ((17, 0), (17, 1), (1234, 1)):
            rpc = "recommendation-service:getrecommended"
            got = recs.execute(QUERIES[rpc], query_parameters(rpc, user=user, rank=rank)).fetchall()
            category, offset = query_parameters(rpc, user=user, rank=rank)
            expected = items.execute("SELECT id, name, price_cents, rating FROM items WHERE category_id = ? "
                                     "ORDER BY rating DESC, id LIMIT 3 OFFSET ?", (category, offset)).fetchall()
            assert got == expected and len(got) == 3
    finally:
        items.close()
        recs.close()


def test_service_processes_do_not_import_the_analysis():
    """A service or load-generator process imports the simulator's definitions, not scikit-learn
    (``tracesleuth.evaluation`` imports its analysis modules lazily)."""
    import subprocess
    import sys

    code = ("import sys, tracesleuth.demo.service, tracesleuth.demo.loadgen; "
            "print(sorted(m for m in ('sklearn', 'scipy', 'tracesleuth.evaluation.protocols.patterns', "
            "'tracesleuth.analyses.patterns') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    import tracesleuth.evaluation as evaluation

    assert all(callable(getattr(evaluation, name)) for name in evaluation.__all__)
    assert evaluation.metrics.match_clusters is evaluation.match_clusters
    with pytest.raises(AttributeError):
        evaluation.no_such_name
