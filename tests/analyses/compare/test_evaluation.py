"""The compare evaluation protocol: simulated scenarios and one real TrainTicket fault."""

from __future__ import annotations

import json

import pytest

from tracesleuth.evaluation.protocols.compare import (CompareEvaluation, evaluate, evaluate_real, evaluate_simulated,
                                                     list_faults, per_fault_type)


def test_evaluate_quick_scores_in_unit_interval(tmp_path):
    ev = evaluate(quick=True, data_dir=tmp_path / "absent")
    assert isinstance(ev, CompareEvaluation)
    assert ev.simulated.height == 6 and ev.real.height == 0
    assert any("skipped" in n for n in ev.notes)
    assert ev.scores and all(0.0 <= v <= 1.0 for v in ev.scores.values())
    assert ev.scores["anchor_simulated_top1"] >= 0.5  # the latency scenarios at least
    json.dumps(ev.to_dict())
    assert "Simulated scenarios" in ev.describe()
    assert ev.to_frame().height == 6
    assert "simulated_top1" in ev.scores


def test_simulated_rows():
    rows = evaluate_simulated(seeds=1, n_requests=300, kinds=("slowed-handler", "network-delay"))
    assert rows["kind"].to_list() == ["slowed-handler", "network-delay"]
    assert rows["anchor_hit"].all()
    assert rows["estimator_hit"].is_not_null().all(), rows["note"].to_list()


def test_estimator_ranks_simulated_latency_changes_first():
    rows = evaluate_simulated(seeds=2, n_requests=600, kinds=("slowed-handler", "network-delay", "early-return"))
    assert rows["estimator_hit"].all(), rows.select("kind", "injected", "estimator_top", "note").rows()


@pytest.mark.parametrize("kind", ["new-slow-path", "reroute", "workload-mix"])
def test_estimator_ranks_simulated_structural_changes_first(kind):
    rows = evaluate_simulated(seeds=2, n_requests=600, kinds=(kind,))
    assert rows["estimator_hit"].all(), rows.select("kind", "injected", "estimator_top", "note").rows()


def test_fault_list_windows(shared_data):
    faults = list_faults(shared_data / "nezha")
    tt = [f for f in faults if f.system == "trainticket"]
    assert len(tt) == 28
    assert {f.fault_type for f in tt} == {"return", "exception", "cpu_contention"}
    first = tt[0]
    assert first.service == "ts-contacts-service"
    assert [p.name for p in first.problem_files] == ["08_44_trace.csv.gz", "08_45_trace.csv.gz"]
    assert first.baseline_files[0].parent.name == "fault_free"
    ob = [f for f in faults if f.system == "onlineboutique"]
    assert ob and all(f.baseline_files[0].name[:5] == f.inject_time[11:16].replace(":", "_") for f in ob)


def test_real_evaluation_on_one_trainticket_fault(shared_data):
    faults = [f for f in list_faults(shared_data / "nezha", systems=("trainticket",))
              if f.fault_type == "cpu_contention"][:1]
    real = evaluate_real(shared_data / "nezha", faults=faults)
    assert real.height == 1
    row = real.row(0, named=True)
    assert row["service"] == "ts-contacts-service" and row["endpoints"] >= 1
    assert row["anchor_rank"] == 1
    table = per_fault_type(real)
    assert table.select("faults", "anchor_top1", "anchor_top3").row(0) == (1, 1, 1)
    assert row["estimator_top3"], row["note"]  # the estimator ranked some service


def test_trainticket_cpu_contention_names_the_throttled_service_first(shared_data):
    """13:31 contacts: a few calls paused ~100 ms; order-service's drift adds more time, less relatively."""
    fault = next(f for f in list_faults(shared_data / "nezha", systems=("trainticket",))
                 if f.inject_time == "2023-01-29 13:31:54")
    row = evaluate_real(shared_data / "nezha", faults=[fault]).row(0, named=True)
    assert row["estimator_rank"] == 1, row
    assert row["injected_evidence"].startswith("score ") and "x" in row["injected_evidence"]
    assert row["top_evidence"].startswith("ts-contacts-service: ")


def test_adjacent_baseline_protocol(shared_data):
    from tracesleuth.errors import ParameterError
    from tracesleuth.evaluation.nezha import adjacent_baseline

    fault = list_faults(shared_data / "nezha", systems=("trainticket",))[0]
    assert adjacent_baseline(fault).baseline_files == (fault.inject_file,)
    real = evaluate_real(shared_data / "nezha", faults=[fault], baseline="adjacent")
    assert real.height == 1 and real["endpoints"][0] >= 1
    with pytest.raises(ParameterError, match="'baseline'"):
        evaluate_real(shared_data / "nezha", faults=[fault], baseline="later")


def test_real_data_comparison_is_bit_for_bit_reproducible(shared_data):
    """Polars sums floats in an order that may change between runs; the analysis must not."""
    from tracesleuth.analyses.compare.endpoints import compare_endpoints
    from tracesleuth.evaluation.protocols.compare import _spans

    fault = list_faults(shared_data / "nezha", systems=("trainticket",))[0]
    problem, baseline = _spans(fault.problem_files), _spans(fault.baseline_files)
    runs = [compare_endpoints(problem, baseline, random_state=0).to_dict() for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
