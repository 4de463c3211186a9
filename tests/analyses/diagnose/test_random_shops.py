"""The diagnosis on shops it was not built on (:func:`random_incident`): 6-14 services in a random call
graph, operations, instances, asynchronous edges, a bystander that fails all along and a change of
load, over many seeds per fault (floors, not one lucky shop)."""

from __future__ import annotations

import polars as pl
import pytest

from tracesleuth.analyses.diagnose import Diagnosis
from tracesleuth.analyses.diagnose.synthetic import RANDOM_FAULTS, random_incident, score_random_incidents
from tracesleuth.errors import ParameterError

#: Culprit first of 30 seeds (measured on 30 seeds each: 30 for every fault; "instance-delay", one
#: slowed instance of two or three 50 s after its onset, had 14, with "no change in the store" for
#: 12, before the onset search read the problem period after the moment, and 27 before the self-time
#: family tested each instance's own time).
#: "tail" (5-20% of the culprit's calls 5-20 times slower) measured 25 (5 with no answer): 10 with the
#: shift test alone (12 with no answer), 17 with the self-time family's tail test, 25 with the onset's
#: slow shares too; "ramp" 30 (29 before the slow shares), "error-status" 30; "timeout" 29 (5, and a
#: wrong service named on 21, before a call that gave up pointed at the callee that outlived it);
#: "unavailable" (20-100% of the calls into the culprit refused) 30 (0, and the caller named on 27,
#: before an unanswered call counted against the service its answered calls went to).
FLOORS = {"delay": 28, "network": 28, "exception": 28, "early-return": 28, "instance-delay": 28, "tail": 22,
          "ramp": 28, "error-status": 28, "timeout": 27, "unavailable": 27}


@pytest.mark.parametrize("fault", RANDOM_FAULTS)
def test_random_shops_floor(fault):
    scores = score_random_incidents(fault, seeds=30)
    assert scores["first"] >= FLOORS[fault], scores
    assert scores["wrong_named"] == 0   # measured 0 of 300
    if fault == "instance-delay":   # measured: the slowed instance first whenever its service is
        assert scores["instance_first"] == scores["first"]


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
