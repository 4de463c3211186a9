"""The diagnosis on shops it was not built on (:func:`random_incident`): 6-14 services in a random call
graph, operations, instances, asynchronous edges, a bystander that fails all along and a change of
load, over many seeds per fault (floors, not one lucky shop)."""

from __future__ import annotations

import polars as pl
import pytest

from tracesleuth.analyses.diagnose import Diagnosis
from tracesleuth.analyses.diagnose.synthetic import (INSTANCE_FAULTS, RANDOM_FAULTS, random_incident,
                                                     score_random_incidents)
from tracesleuth.errors import ParameterError

#: Culprit first of 30 seeds (measured on 30 seeds each: 30 for every fault; "instance-delay", one
#: slowed instance of two or three 50 s after its onset, had 14, with "no change in the store" for
#: 12, before the onset search read the problem period after the moment, and 27 before the self-time
#: family tested each instance's own time).
#: "tail" (5-20% of the culprit's calls 5-20 times slower) measured 25 (5 with no answer): 10 with the
#: shift test alone (12 with no answer), 17 with the self-time family's tail test, 25 with the onset's
#: slow shares too; "ramp" 30 (29 before the slow shares), "error-status" 30; "timeout" 29 (5, and a
#: wrong service named on 21, before a call that gave up pointed at the callee that outlived it);
#: "unavailable" (20-100% of the calls into the culprit refused, its messages never consumed) 28, 2
#: with no answer (0, and the caller named on 27, before an unanswered call counted against the
#: service its answered calls went to); "log-error" 30;
#: "instance-exception" 30, the failing instance first 30 (14 before the instances' error test).
FLOORS = {"delay": 28, "network": 28, "exception": 28, "early-return": 28, "instance-delay": 28, "tail": 22,
          "ramp": 28, "error-status": 28, "timeout": 27, "unavailable": 27, "log-error": 28,
          "instance-exception": 28}


@pytest.mark.parametrize("fault", RANDOM_FAULTS)
def test_random_shops_floor(fault):
    scores = score_random_incidents(fault, seeds=30)
    assert scores["first"] >= FLOORS[fault], scores
    assert scores["wrong_named"] == 0   # measured 0 of 360
    if fault in INSTANCE_FAULTS:   # measured: the faulty instance first whenever its service is
        assert scores["instance_first"] == scores["first"]


#: With the shops' log records (a caller whose call failed logs it half the time, a noisy service
#: logs errors all along, every operation runs its own statements), measured on 30 seeds: exception
#: 30, timeout 27 and unavailable 29 (the caller named on 9 and 20 before records above a call that
#: timed out or was never answered counted as that error on its way up).
LOG_FLOORS = {"exception": 28, "timeout": 24, "unavailable": 27}


@pytest.mark.parametrize("fault", sorted(LOG_FLOORS))
def test_random_shops_with_log_records_floor(fault):
    scores = score_random_incidents(fault, seeds=30, logs=True)
    assert scores["first"] >= LOG_FLOORS[fault], scores
    assert scores["wrong_named"] == 0   # measured 0 of 90


#: Shops whose spans make their calls at once (a fan-out), measured on 30 seeds: delay 30,
#: instance-delay 30 (the slowed instance first 30) and ramp 30; with the calls' sum taken as the time
#: they cover, not their union, 29 (instance 28) and 29.
PARALLEL_FLOORS = {"delay": 28, "instance-delay": 28, "ramp": 28}


@pytest.mark.parametrize("fault", sorted(PARALLEL_FLOORS))
def test_random_shops_with_calls_made_at_once_floor(fault):
    scores = score_random_incidents(fault, seeds=30, parallel=True)
    assert scores["first"] >= PARALLEL_FLOORS[fault], scores
    assert scores["wrong_named"] == 0
    if fault in INSTANCE_FAULTS:
        assert scores["instance_first"] == scores["first"]


#: Shops whose services' clocks are off by a constant each, up to 50 ms, measured on 30 seeds:
#: delay 30, network 30 and ramp 30 (before the diagnosis put the times on one clock: 29 with a wrong
#: service named, 28, and 29 with a wrong service named).
SKEW_FLOORS = {"delay": 28, "network": 28, "ramp": 28}


@pytest.mark.parametrize("fault", sorted(SKEW_FLOORS))
def test_random_shops_on_skewed_clocks_floor(fault):
    scores = score_random_incidents(fault, seeds=30, skew_ms=50.0)
    assert scores["first"] >= SKEW_FLOORS[fault], scores
    assert scores["wrong_named"] == 0


def test_skewed_clocks_move_each_services_times_by_one_constant():
    plain, skewed = (pl.from_arrow(random_incident("delay", n_requests=60, skew_ms=s, random_state=4).spans)
                     for s in (0.0, 50.0))
    shift = (skewed["start_ns"] - plain["start_ns"]).alias("shift")
    per_service = pl.DataFrame({"service": plain["service"], "shift": shift}).group_by("service").agg(
        pl.col("shift").n_unique().alias("n"), pl.col("shift").first().abs().alias("size"))
    assert (per_service["n"] == 1).all() and (per_service["size"] <= 50 * 10**6).all()
    assert per_service.filter(pl.col("service") == "service-00")["size"].item() == 0
    assert (per_service["size"] > 0).sum() == per_service.height - 1
    assert (skewed["end_ns"] - skewed["start_ns"]).equals(plain["end_ns"] - plain["start_ns"])


def test_the_diagnosis_says_when_it_put_spans_back_on_their_callers_clock():
    notes = {}
    for skew in (0.0, 50.0):
        incident = random_incident("delay", skew_ms=skew, random_state=5)
        result = Diagnosis(at=incident.at_ns).fit(incident.spans).result_
        notes[skew] = [n for n in result.notes if n.kind == "clock_skew"]
    assert notes[0.0] == []
    (note,) = notes[50.0]
    assert 0 < note.shifted < note.spans and 0 < note.max_abs_ns <= 100 * 10**6
    assert "Clock skew" in note.describe()


def test_parallel_calls_overlap_and_keep_the_draws():
    """``parallel`` moves the calls' start times only: the same spans, services and ends of the
    entry's own work; a span's synchronous calls start together."""
    seq, par = (pl.from_arrow(random_incident("delay", n_requests=60, parallel=p, random_state=3).spans)
                for p in (False, True))
    assert seq.select("trace_id", "span_id", "service", "operation").equals(
        par.select("trace_id", "span_id", "service", "operation"))
    calls = par.filter(pl.col("kind") == "client").group_by("trace_id", "parent_span_id").agg(
        pl.col("start_ns").n_unique().alias("starts"), pl.len().alias("calls"))
    assert calls.filter(pl.col("calls") > 1).height > 0
    assert (calls["starts"] == 1).all()   # every span's synchronous calls start at once


def test_random_incident_writes_log_records_of_its_own():
    """The log records come from a generator of their own (the spans are those drawn without), join
    their spans, and a log-only fault's records show the culprit's new error-level statement."""
    plain = random_incident("exception", random_state=4)
    logged = random_incident("exception", logs=True, random_state=4)
    assert plain.logs is None and plain.spans.equals(logged.spans)
    logs = pl.from_arrow(logged.logs)
    assert logs.height > logged.spans.num_rows / 2
    assert logs["span_id"].is_in(pl.from_arrow(logged.spans)["span_id"].implode()).all()
    quiet = random_incident("log-error", random_state=4)
    records = pl.from_arrow(quiet.logs)
    new = (records.filter(pl.col("severity_number") >= 17).group_by("template_id")
           .agg(pl.col("time_ns").min(), pl.col("service").first(), pl.len())
           .filter(pl.col("time_ns") >= quiet.onset_ns)
           .sort("len", descending=True))
    assert new["service"][0] == quiet.culprit and new["len"][0] > 10 * new["len"][1:].sum(), new
    logged_on = records.filter(pl.col("template_id") == new["template_id"][0])["span_id"]
    spans = pl.from_arrow(quiet.spans).filter(pl.col("span_id").is_in(logged_on.implode()))
    assert spans.height == logged_on.n_unique() and (spans["status"] != "error").all()   # only the logs show it


def test_random_incident_is_seeded_and_checks_its_settings():
    a, b = random_incident("exception", random_state=3), random_incident("exception", random_state=3)
    assert a.spans.equals(b.spans) and a.culprit == b.culprit and a.culprit != "service-00"
    spans = pl.from_arrow(a.spans)
    assert a.culprit in spans["service"].to_list() and spans["trace_id"].n_unique() > 1000
    slowed = random_incident("instance-delay", random_state=3)
    assert slowed.instance is not None and slowed.instance.startswith(slowed.culprit)
    with pytest.raises(ParameterError, match="fault must be one of"):
        random_incident("meteor")
    with pytest.raises(ParameterError, match="at least 3"):
        random_incident("delay", n_services=2)


def test_one_slowed_instance_is_its_own_self_time_item():
    incident = random_incident("instance-delay", random_state=15)   # service-12-0 of three, x1.74
    result = Diagnosis(at=incident.at_ns).fit(pl.from_arrow(incident.spans)).result_
    top = result.services[0]
    assert top.service == incident.culprit and top.instances == (incident.instance,)
    assert top.evidence[0].family == "self_time" and top.evidence[0].item.endswith(f" on {incident.instance}")


def test_an_unavailable_callee_behind_client_spans_named_by_the_method_only():
    """Client spans named "GET" whatever they call (OpenTelemetry's HTTP client spans since semantic
    conventions 1.21): the refused calls are told apart by their ``server.address``. Measured on 20
    seeds: the culprit first on 18 (2 with no answer), the caller named on none; 0 and 19 without
    the peer."""
    import collections

    from tracesleuth.errors import EmptyDataError

    counts = collections.Counter()
    for seed in range(20):
        incident = random_incident("unavailable", random_state=seed)
        client = pl.col("kind").cast(pl.String) == "client"
        spans = pl.from_arrow(incident.spans).with_columns(
            pl.when(client).then(pl.lit("GET")).otherwise(pl.col("operation").cast(pl.String)).alias("operation"))
        try:
            result = Diagnosis(at=incident.at_ns).fit(spans).result_
        except EmptyDataError:
            continue
        right = result.services[0].service == incident.culprit
        counts["first"] += right
        counts["wrong_named"] += result.verdict == "named" and not right
    assert counts["first"] >= 16 and counts["wrong_named"] == 0, counts
