"""Log templates (Drain3, per service): masking, stable ids, persistence, read-only matching, and
the Nezha TrainTicket log statements (code locations ``Class#line``) as ground truth."""

from __future__ import annotations

import collections
import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracesleuth import schema as S
from tracesleuth.errors import ParameterError
from tracesleuth.io import read_logs
from tracesleuth.io.log_templates import MASK_NUMBER, REST, LogTemplateMiner

DAY = "nezha/trainticket/2023-01-29"
#: Floor on purity: the share of records whose template's records mostly come from their code location.
PURITY_FLOOR = 0.95
#: Ceiling on templates per code location over the day (Drain splits a statement whose messages
#: differ in length; measured 228 templates for 212 locations).
TEMPLATES_PER_LOCATION = 1.15


def table(service, bodies) -> pa.Table:
    services = [service] * len(bodies) if isinstance(service, str) else service
    return pa.table({S.SERVICE: services, S.BODY: bodies})


def test_masks_variables_and_keeps_code_locations():
    miner = LogTemplateMiner()
    masked = miner.mask(pa.array([
        "16:43:25.207 INFO  t.s.TravelServiceImpl#457 TraceID: 4bf92f3577b34da6a3ce929d0e0e4736 order #42 done",
        "user 3f2b5c6e-1d2a-4b5c-8d9e-0f1a2b3c4d5e from 10.0.0.12:8080 took 35ms at 2023-01-29T08:42:22Z v2",
        None,
    ])).to_pylist()
    assert masked == ["t.s.TravelServiceImpl#457 TraceID: <HEX> order #<NUM> done",
                      "user <UUID> from <IP> took <DURATION> at <DATE> v2", ""]


def test_long_messages_are_cut_to_max_tokens():
    miner = LogTemplateMiner(max_tokens=3)
    assert miner.mask(pa.array(["a b c d e", "a b c"])).to_pylist() == [f"a b c {REST}", "a b c"]
    ids = miner.assign(table("s", ["list [1, 2]", "list [1, 2, 3, 4, 5]"])).to_pylist()
    assert ids[0] != ids[1]  # 3 and 5 words: Drain's token counts differ
    ids = miner.assign(table("s", ["x y z 1 2 3", "x y z 4 5 6 7 8"])).to_pylist()
    assert ids[0] == ids[1]


def test_ids_are_stable_per_service_and_learn_as_they_go():
    miner = LogTemplateMiner()
    first = miner.assign(table(["cart", "cart", "pay", "cart"], ["took 35 ms", "cache cold", "took 1 ms", "took 2 ms"]))
    assert first.to_pylist() == [0, 1, 2, 0]  # the same statement in another service: another template
    again = miner.assign(table("cart", ["cache cold", "took 9 ms", "new statement here"]))
    assert again.to_pylist() == [1, 0, 3]
    t = miner.templates()
    assert t.column("template").to_pylist() == ["took <DURATION>", "cache cold", "took <DURATION>",
                                                "new statement here"]
    assert t.column("records").to_pylist() == [3, 2, 1, 1] and t.column(S.SERVICE).to_pylist()[2] == "pay"
    assert miner.n_templates_ == 4


def test_drain_generalizes_a_template_and_keeps_its_id():
    miner = LogTemplateMiner()
    ids = miner.assign(table("s", ["Route is shanghai to suzhou", "Route is nanjing to suzhou"])).to_pylist()
    assert ids == [0, 0]
    assert miner.templates().column("template").to_pylist() == ["Route is <*> to suzhou"]


def test_read_only_matching_learns_nothing():
    miner = LogTemplateMiner()
    miner.assign(table("cart", ["took 35 ms", "cache cold"]))
    state = miner.to_json()
    ids = miner.assign(table(["cart", "cart", "other"], ["took 7 ms", "never seen before", "took 7 ms"]), learn=False)
    assert ids.to_pylist() == [0, None, None]
    assert miner.to_json() == state


def test_settings_are_checked():
    with pytest.raises(ParameterError, match="'similarity_threshold' parameter of LogTemplateMiner"):
        LogTemplateMiner(similarity_threshold=1.5)
    with pytest.raises(ParameterError, match="'depth'"):
        LogTemplateMiner(depth=2)
    with pytest.raises(ParameterError, match="'masking'"):
        LogTemplateMiner(masking=("\\d+",))
    with pytest.raises(ParameterError, match="not a log template state"):
        LogTemplateMiner.from_json('{"version": 1}')
    with pytest.raises(ParameterError, match="version 99"):
        LogTemplateMiner.from_json('{"version": 99}')


def test_state_is_plain_json_with_the_settings():
    miner = LogTemplateMiner(similarity_threshold=0.5, masking=(MASK_NUMBER,), max_tokens=None)
    miner.assign(table("s", ["a 1", "b 2"]))
    state = json.loads(miner.to_json())
    assert state["settings"]["similarity_threshold"] == 0.5
    assert state["settings"]["masking"] == [["NUM", r"\d+(?:\.\d+)?"]]
    again = LogTemplateMiner.from_json(miner.to_json())
    assert (again.similarity_threshold, again.max_tokens, again.masking) == (0.5, None, (MASK_NUMBER,))
    assert again.to_json() == miner.to_json()


# -- the Nezha TrainTicket log statements ------------------------------------------------------------
@pytest.fixture(scope="module")
def nezha(shared_data):
    folder = shared_data / DAY
    logs = read_logs([folder / "log", folder / "fault_free_log"]).logs
    # the code location a statement writes after its time and level: "t.s.TravelServiceImpl#457"
    location = pc.struct_field(pc.extract_regex(logs.column(S.BODY), r"^\S+\s+[A-Z]+\s+(?P<loc>\S+)"), [0])
    assert location.null_count == 0
    return logs, location.to_pylist()


def test_nezha_templates_follow_the_code_locations(nezha):
    logs, location = nezha
    miner = LogTemplateMiner()
    ids = miner.assign(logs).to_pylist()
    services = logs.column(S.SERVICE).to_pylist()
    by_template = collections.defaultdict(collections.Counter)
    locations, templates = collections.defaultdict(set), collections.defaultdict(set)
    for tid, loc, service in zip(ids, location, services):
        by_template[tid][loc] += 1
        locations[service].add(loc)
        templates[service].add(tid)
    purity = sum(c.most_common(1)[0][1] for c in by_template.values()) / len(ids)
    assert purity >= PURITY_FLOOR
    n_locations = sum(len(v) for v in locations.values())
    assert n_locations <= miner.n_templates_ <= TEMPLATES_PER_LOCATION * n_locations
    for service in locations:  # per service: no statement lost in another's template, few split
        assert len(locations[service]) <= len(templates[service]) <= 1.5 * len(locations[service]) + 1, service
    assert set(miner.templates().column(S.SERVICE).to_pylist()) == set(services)


def test_nezha_persistence_round_trip(nezha):
    logs, _ = nezha
    logs = logs.slice(0, 30_000)
    whole = LogTemplateMiner()
    expected = whole.assign(logs).to_pylist()
    half = logs.num_rows // 2
    first = LogTemplateMiner()
    ids = first.assign(logs.slice(0, half)).to_pylist()
    later = LogTemplateMiner.from_json(first.to_json())
    ids += later.assign(logs.slice(half)).to_pylist()
    assert ids == expected
    assert later.templates().equals(whole.templates())
    assert later.to_json() == whole.to_json()


def test_nezha_cache_assigns_as_drain_itself(nezha):
    """The masked-text cache (module docstring) gives every record the cluster Drain's own search
    gives it when each message is added anew."""
    logs, _ = nezha
    logs = logs.slice(0, 40_000)
    miner = LogTemplateMiner()
    ids = miner.assign(logs).to_pylist()
    masked = miner.mask(logs.column(S.BODY)).to_pylist()
    plain = LogTemplateMiner()
    drains = {}
    agree = 0
    keys = miner._keys
    for tid, service, text in zip(ids, logs.column(S.SERVICE).to_pylist(), masked):
        drain = drains.setdefault(service, plain._new_drain())
        cluster, _ = drain.add_log_message(text)
        agree += keys[tid] == (service, cluster.cluster_id)
    assert agree / len(ids) >= 0.999
    assert sum(len(d.id_to_cluster) for d in drains.values()) == miner.n_templates_
