"""``tracesleuth localize`` and ``tracesleuth analyze`` on a simulated load imbalance."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tracesleuth.analyses.localize.synthetic import simulate_scenario
from tracesleuth.cli import main


@pytest.fixture(scope="module")
def incident(tmp_path_factory):
    """Lock service calls concentrated on lock-0 for the last 30% of the requests, as Parquet."""
    s = simulate_scenario("load-imbalance", n_requests=3000, random_state=2)
    path = tmp_path_factory.mktemp("localize") / "spans.parquet"
    pq.write_table(s.spans, path)
    return s, path


def test_localize_json_names_the_service_method_and_instance(incident, capsys):
    s, path = incident
    assert main(["localize", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["services"][0]["service"] == s.injected_service
    assert {"service", "score", "evidence"} <= set(doc["services"][0])
    assert doc["methods"][0]["operation_key"] in s.anomalous_methods
    assert sorted(doc["endpoints"]) == ["front:ListFile", "front:ReadFile", "front:SaveFile"]
    top = [i for i in doc["instances"] if i["operation_key"] == doc["methods"][0]["operation_key"]]
    assert top[0]["instance"] in s.anomalous_instances
    assert {i["instance"] for i in top if i["stands_out"]} <= s.anomalous_instances
    assert doc["onset_ns"] is not None and abs(doc["onset_ns"] - s.onset_ns) < 0.05 * (
        s.spans["start_ns"].to_numpy().max() - s.spans["start_ns"].to_numpy().min())


def test_localize_prints_tables_and_takes_one_endpoint(incident, capsys):
    s, path = incident
    assert main(["localize", str(path), "-e", "front:SaveFile", "--paper"]) == 0
    text = capsys.readouterr().out
    assert "front:SaveFile" in text and "s." in text
    assert main(["localize", str(path), "-e", "front:SaveFile", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["endpoints"] == ["front:SaveFile"]


@pytest.mark.parametrize(("args", "message"), [
    (["--major-share", "2"], "'alpha' parameter"),
    (["--latency", "wall"], "'latency' parameter"),
    (["--time", "5/1"], "start must come before the end"),
    (["-e", "nowhere:Nothing"], "nowhere:Nothing"),
])
def test_localize_mistakes_are_one_line(incident, capsys, args, message):
    s, path = incident
    assert main(["localize", str(path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_analyze_includes_the_localization_section(incident, tmp_path, capsys):
    s, path = incident
    out = tmp_path / "report.html"
    code = main(["analyze", str(path), "-e", "front:SaveFile", "-o", str(out), "--only", "localize", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and list(doc["analyses"]) == ["localize"]
    assert doc["analyses"]["localize"]["services"][0]["service"] == s.injected_service
    assert s.injected_service in out.read_text(encoding="utf-8")


def test_localize_reads_the_papers_log_format(incident, tmp_path, capsys):
    """The same incident written as Mi et al.'s trace log (Figure 2): start/end events only."""
    from datetime import datetime, timezone

    s, _ = incident
    spans = s.spans.to_pylist()
    trace_of = {r["trace_id"]: k for k, r in enumerate({r["trace_id"]: r for r in spans}.values())}

    def stamp(ns):
        moment = datetime.fromtimestamp(ns // 10**9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        return f"[{moment}.{ns % 10**9 // 1000:06d}]"

    events = []
    for r in spans:
        where = f"T_ID:{trace_of[r['trace_id']]} SERVICE:{r['service']} HOST:{r['instance']} FUNC:{r['operation']}"
        events += [(r["start_ns"], 0, f"{stamp(r['start_ns'])} [DEBUG] {where}_start"),
                   (r["end_ns"], 1, f"{stamp(r['end_ns'])} [DEBUG] {where}_end")]
    path = tmp_path / "filesharing.log"
    path.write_text("\n".join(line for *_, line in sorted(events, key=lambda e: (e[0], -e[1]))) + "\n")
    assert main(["localize", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["services"][0]["service"] == s.injected_service
    assert doc["methods"][0]["operation_key"] in s.anomalous_methods
