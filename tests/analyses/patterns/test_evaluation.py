"""The Section 4 evaluation harness (Cortellessa & Traini, ICPE 2020): rows, summary, rendering,
determinism, the paper's protocol, and quality floors on a few seeded sessions."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tracesleuth.errors import EmptyDataError, ParameterError
from tracesleuth.evaluation.eshopper import simulate_eshopper
from tracesleuth.analyses.metrics import match_clusters
from tracesleuth.evaluation.protocols.patterns import (
    CLUSTERING_METHODS, SOLVERS, PatternsEvaluation, _simulate, evaluate_patterns, evaluate_session, render,
)
from tracesleuth.model import build_trace_table
from tracesleuth.analyses.patterns.clustering import cluster_degraded

FAST = ("kmeans", "hierarchical")


#: Requests of each session of ``small``: its tests check the evaluation's structure (rows, summary,
#: rendering), not its scores; 200 takes a quarter of 400's time (3.9 s against 14.6 s, measured).
SMALL_REQUESTS = 200


@pytest.fixture(scope="module")
def small() -> PatternsEvaluation:
    return evaluate_patterns(sessions=3, solvers=CLUSTERING_METHODS, n_requests=SMALL_REQUESTS, random_state=1)


def test_one_row_per_session_and_solver(small):
    rows = small.to_frame()
    assert rows.height == 3 * 3
    assert rows.select("session", "solver").rows() == [(s, m) for s in range(3) for m in CLUSTERING_METHODS]
    for c in ("f_score", "precision", "recall"):
        assert rows[c].is_between(0.0, 1.0).all()
    assert (rows["time_s"] > 0).all()
    assert (rows["n_requests"] == SMALL_REQUESTS).all()
    assert (rows["n_degraded"] >= rows["n_affected"]).all()      # [L_min, L_max] holds every affected request
    assert (rows["interval_low_ns"] < rows["interval_high_ns"]).all()
    assert rows["types"].str.contains(r"^[123]\+[123]$").all()


def test_summary_is_the_mean_and_std_of_the_rows(small):
    summary = small.summary()
    assert summary["solver"].to_list() == list(CLUSTERING_METHODS)
    rows = small.to_frame()
    for solver in CLUSTERING_METHODS:
        f = rows.filter(pl.col("solver") == solver)["f_score"].to_numpy()
        s = summary.filter(pl.col("solver") == solver)
        assert s["f_score_mean"][0] == pytest.approx(f.mean())
        assert s["f_score_std"][0] == pytest.approx(f.std(ddof=1))
        assert small.mean(solver) == pytest.approx(f.mean())
    with pytest.raises(ParameterError, match="'solver'"):
        small.mean("ga")
    with pytest.raises(ParameterError, match="'metric'"):
        small.mean("kmeans", "accuracy")


def test_to_dict_is_json_and_complete(small):
    d = small.to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text)["settings"] == {
        "noised": False, "sessions": 3, "n_requests": SMALL_REQUESTS, "random_state": 1,
        "solvers": list(CLUSTERING_METHODS), "interval": "affected", "k_select": "truth",
        "simulator": "eshopper", "estimator_params": {}}
    assert len(d["sessions"]) == 9 and len(d["summary"]) == 3


def test_result_is_frozen_and_to_frame_is_a_copy(small):
    with pytest.raises(AttributeError):
        small.noised = True
    frame = small.to_frame()
    frame = frame.with_columns(pl.lit(0.0).alias("f_score"))
    assert small.to_frame()["f_score"].sum() > 0


def test_render_tables_like_the_paper(small):
    sessions = render(small, table="sessions")
    lines = sessions.splitlines()
    assert lines[0].startswith(f"eshopper: normal sessions (3 x {SMALL_REQUESTS} requests")
    assert "Kmeans" in lines[1] and "Hierarchical" in lines[1] and "Mean shift" in lines[1]
    assert lines[2].split() == ["ID"] + ["F-score", "Prec", "Recall"] * 3
    assert [ln.split()[0] for ln in lines[4:]] == ["0", "1", "2", "mean", "std"]
    time_table = render(small, small, table="time")
    assert "time mean (s)" in time_table and time_table.count("eshopper, affected, normal") == 2
    summary = render(small)
    assert "±" in summary and "F-score" in summary
    with pytest.raises(ParameterError, match="'table'"):
        render(small, table="figure")
    with pytest.raises(ParameterError):
        render()


def test_same_seed_same_scores():
    a = evaluate_patterns(sessions=2, solvers=FAST, n_requests=300, random_state=5, noised=True)
    b = evaluate_patterns(sessions=2, solvers=FAST, n_requests=300, random_state=5, noised=True)
    cols = ["session", "solver", "f_score", "precision", "recall", "n_degraded", "degradations", "matched"]
    assert a.to_frame().select(cols).equals(b.to_frame().select(cols))


def test_normal_and_noised_runs_are_paired():
    a = evaluate_patterns(sessions=2, solvers=("hierarchical",), n_requests=300, random_state=9)
    b = evaluate_patterns(sessions=2, solvers=("hierarchical",), n_requests=300, random_state=9, noised=True)
    # same degradations per session; the noised run adds the noises to their description
    for x, y in zip(a.to_frame()["degradations"], b.to_frame()["degradations"]):
        for da, db in zip(x.split("; A"), y.split("; A")):
            assert db.startswith(da.split(";")[0])
        assert "noise 1" in y and "noise 2" in y and "noise" not in x


def test_the_harness_scores_as_match_clusters_with_the_papers_choice_of_k():
    session = simulate_eshopper(n_requests=500, noised=True, random_state=3)
    (row,) = evaluate_session(session, solvers=("kmeans",), random_state=0)
    table = build_trace_table(session.spans)
    truth = session.labels_for(table.frame["trace_id"].to_list())
    latency = table.frame["latency_ns"].to_numpy()
    affected = np.array([t is not None for t in truth])
    inside = (latency >= latency[affected].min()) & (latency <= latency[affected].max())
    X = table.frame.select(table.continuous_columns).to_numpy().astype(float)
    best = -1.0
    for k in range(2, 7):
        labels = np.full(len(truth), -1)
        labels[inside] = cluster_degraded(X[inside], method="kmeans", random_state=0, k_range=[k])
        best = max(best, match_clusters(truth, labels).f_score)
    assert row["f_score"] == pytest.approx(best)
    assert row["n_degraded"] == int(inside.sum())


def test_automatic_interval_and_silhouette_options_run():
    ev = evaluate_patterns(sessions=2, solvers=FAST, n_requests=400, random_state=2, interval="auto",
                           k_select="silhouette")
    rows = ev.to_frame()
    assert rows.height == 4 and rows["interval_low_ns"].null_count() == 0
    assert ev.interval == "auto" and ev.k_select == "silhouette"
    assert ev.summary()["f_score_mean"].min() > 0.5


def test_session_without_affected_requests_has_no_paper_interval():
    session = simulate_eshopper(n_requests=200, random_state=0, p_affected=0.0)
    with pytest.raises(EmptyDataError, match="no affected request"):
        evaluate_session(session, solvers=FAST)


@pytest.mark.parametrize("kwargs, match", [
    ({"solvers": ("kmeans", "dbscan")}, "'solvers'"),
    ({"solvers": ()}, "'solvers'"),
    ({"solvers": ("kmeans", "kmeans")}, "'solvers'"),
    ({"sessions": 0}, "'sessions'"),
    ({"interval": "paper"}, "'interval'"),
    ({"k_select": "elbow"}, "'k_select'"),
])
def test_bad_settings(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        evaluate_patterns(**{"sessions": 1, "n_requests": 100, "solvers": FAST, **kwargs})


def test_quality_floors_normal_sessions():
    """Section 4.6: in normal sessions every approach but mean shift finds near-optimal clusters."""
    ev = evaluate_patterns(sessions=3, solvers=("ga", "bnb", "kmeans", "hierarchical"), n_requests=1000,
                           random_state=0)
    for solver in ev.solvers:
        assert ev.mean(solver) >= 0.95, solver


def test_quality_floors_noised_sessions():
    """Section 4.6: under noise the pattern search keeps its F-score, the clustering baselines
    lose recall (the asynchronous noise splits each degradation in two)."""
    ev = evaluate_patterns(sessions=3, solvers=("ga", "kmeans", "hierarchical"), n_requests=1000,
                           random_state=0, noised=True)
    assert ev.mean("ga") >= 0.9
    for baseline in ("kmeans", "hierarchical"):
        assert ev.mean("ga") > ev.mean(baseline)
        assert ev.mean(baseline, "precision") > ev.mean(baseline, "recall")


def test_all_solvers_are_known():
    assert SOLVERS == ("ga", "bnb", "kmeans", "hierarchical", "meanshift")


def test_benchmark_script_runs_in_process(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_evaluation.py"
    spec = importlib.util.spec_from_file_location("bench_evaluation", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    status = bench.main(["--sessions", "1", "--n-requests", "300", "--solvers", "ga,kmeans", "--json", "--check"])
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"normal", "noised", "targets"}
    assert out["noised"]["settings"]["noised"] is True
    assert status == (0 if all(t["met"] for t in out["targets"].values()) else 1)


@pytest.mark.parametrize("index", [1, 4, 24, 26])
def test_one_cause_cut_in_halves_is_one_sub_interval(index):
    """Sessions (of ``random_state=0``) where the finer split points cut one degradation's latency
    band in halves that a chance difference of another operation told apart (F 0.84-0.86 before
    the merging rule compared the two halves' requests): with the default settings each
    degradation is one sub-interval again."""
    seq = np.random.SeedSequence(0).spawn(index + 1)[index]
    session = simulate_eshopper(n_requests=1000, random_state=seq)
    (row,) = evaluate_session(session, solvers=("ga",), random_state=int(seq.generate_state(1)[0]))
    assert row["f_score"] >= 0.95, row


def _with_and_without(index: int, refinement: str) -> tuple[dict, dict]:
    """GA scores of harder-simulator session ``index`` (noised, ``random_state=0``, automatic
    interval) with the default settings and with ``refinement`` switched off."""
    seq = np.random.SeedSequence(0).spawn(index + 1)[index]
    session = _simulate("bookshop", 1000, True, seq)
    seed = int(seq.generate_state(1)[0])
    (on,) = evaluate_session(session, solvers=("ga",), interval="auto", random_state=seed)
    (off,) = evaluate_session(session, solvers=("ga",), interval="auto", random_state=seed,
                              estimator_params={refinement: False})
    return on, off


@pytest.mark.parametrize("index", [4, 8, 14, 25])
def test_two_causes_in_one_sub_interval_are_split(index):
    """Harder-simulator sessions (noised, ``random_state=0``) where one pattern covered two causes
    whose latencies overlap: a degradation delaying reviews:TopReviews among others and that
    operation's normal cache misses, or two degradations sharing an operation (F 0.65-0.81 with
    one pattern per sub-interval). ``split_causes`` splits such a pattern on the operation that
    tells the causes apart; without it the session scores as before."""
    split, whole = _with_and_without(index, "split_causes")
    assert split["f_score"] >= 0.94 and whole["f_score"] <= 0.85, (split, whole)
    assert split["n_clusters"] > whole["n_clusters"]


@pytest.mark.parametrize("index", [1, 13, 17, 21])
def test_slow_for_two_causes_on_one_operation_takes_the_faster_label(index):
    """Harder-simulator sessions (noised, ``random_state=0``) where requests of a degradation that
    also hit reviews:TopReviews' slow normal mode landed in a slower sub-interval whose pattern
    names that operation (alone, or with the degradation's own condition): F 0.93-0.97 when the
    slower cause had to be on an operation the faster pattern does not name. ``compound_labels``
    now counts a slow mode of an operation the faster cause delays too, and keeps a condition both
    patterns share in the fit (measured 0.947-0.990); without it the sessions score lower."""
    moved, kept = _with_and_without(index, "compound_labels")
    assert moved["f_score"] >= 0.94 and moved["f_score"] > kept["f_score"], (moved, kept)


def test_harder_simulator_automatic_interval_meets_its_target():
    """Issue 29 target: on 30 noised sessions of the harder simulator (``random_state=0``), the GA
    with the automatic interval and the default settings reaches a mean F-score of at least 0.98
    and at least 0.93 in every session (measured: mean 0.9803, min 0.9467)."""
    ev = evaluate_patterns(sessions=30, noised=True, simulator="bookshop", interval="auto", solvers=("ga",),
                           random_state=0)
    f = ev.rows["f_score"].to_numpy()
    assert f.mean() >= 0.98 and f.min() >= 0.93, ev.rows.select("session", "f_score", "degradations").rows()
