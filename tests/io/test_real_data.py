"""The Zipkin readers on real recorded traces: ../shared/data/zipkin-lens (Zipkin v2, Apache-2.0)."""

from __future__ import annotations

import orjson
import pytest

from tracesleuth.io import read_spans

# file: (spans in the file, spans read, services, spans without duration (read as 0-length))
ZIPKIN_LENS = {
    "ascend.json": (8, 8, 3, 0),
    "envoy.json": (1, 1, 1, 0),
    "messaging-kafka.json": (28, 28, 2, 0),
    "messaging.json": (4, 4, 2, 0),
    "messaging2.json": (11, 11, 4, 0),
    "simple-db-p6.json": (5, 5, 1, 0),
    "skew.json": (4, 4, 2, 0),
    # 84 entries have neither timestamp nor duration: fragments Zipkin merges into the server span
    # with the same id and endpoint (each one has such a span); they cannot be placed and are rejected.
    "smartthings-mobile-web-install.json": (1041, 957, 16, 91),
    "smartthings-oauth-authorization.json": (175, 175, 8, 19),
    "yelp.json": (16, 16, 6, 0),
}


def test_every_file_is_read_with_the_expected_counts(shared_data):
    folder = shared_data / "zipkin-lens"
    result = read_spans(folder / "*.json")
    assert set(result.formats.values()) == {"zipkin-json"} and len(result.formats) == len(ZIPKIN_LENS)
    rejects = result.rejects.to_pylist()
    for name, (n_in, n_read, _, n_no_duration) in ZIPKIN_LENS.items():
        assert len(orjson.loads((folder / name).read_bytes())) == n_in
        log = [r for r in rejects if r["source"] == str(folder / name)]
        assert n_in == n_read + sum(r["spans"] for r in log), name
        assert sum(1 for r in log if r["field"] == "duration" and r["spans"] == 0) == n_no_duration, name
        assert all(r["field"] in ("duration", "timestamp") for r in log), name
    assert result.n_spans == sum(v[1] for v in ZIPKIN_LENS.values())


@pytest.mark.parametrize("name", sorted(ZIPKIN_LENS))
def test_each_file_spans_and_services(shared_data, name):
    n_in, n_read, n_services, _ = ZIPKIN_LENS[name]
    result = read_spans(shared_data / "zipkin-lens" / name)
    assert result.n_spans == n_read and result.n_spans + result.spans_rejected == n_in
    assert len(result.spans["service"].unique()) == n_services
    assert len(result.spans["trace_id"].unique()) == 1


def test_skew_and_shared_spans(shared_data):
    rows = read_spans(shared_data / "zipkin-lens" / "skew.json").spans.to_pylist()
    by_kind = {r["kind"]: r for r in rows if r["span_id"] == "74280ae0c10d8062"}
    assert set(by_kind) == {"client", "server"}  # one id, two spans: assembly splits them
    server = by_kind["server"]
    assert {"key": "zipkin.shared", "str": None, "int": None, "float": None, "bool": True} in server["attributes"]
    assert server["service"] == "serviceb" and server["instance"] == "192.0.0.0"
    assert server["start_ns"] == 1470150004008761 * 1000 and server["end_ns"] - server["start_ns"] == 93577 * 1000
    assert rows[0]["trace_id"] == "0000000000000000" + "1e223ff1f80f1c69"
    assert rows[0]["kind"] == "internal"  # no kind in Zipkin: a local span


def test_messaging_kinds_endpoints_and_errors(shared_data):
    rows = read_spans(shared_data / "zipkin-lens" / "messaging.json").spans.to_pylist()
    assert sorted(r["kind"] for r in rows) == ["consumer", "internal", "producer", "server"]
    producer = [r for r in rows if r["kind"] == "producer"][0]
    assert producer["instance"] == "192.168.0.10"
    assert {"key": "peer.service", "str": "rabbitmq", "int": None, "float": None, "bool": None} in producer["attributes"]
    kafka = read_spans(shared_data / "zipkin-lens" / "messaging-kafka.json").spans
    assert kafka["status"].to_pylist().count("error") == 3
    assert all(a["key"] != "error" for attrs in kafka["attributes"].to_pylist() for a in attrs)
