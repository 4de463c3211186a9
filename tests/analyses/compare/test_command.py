"""``tracesleuth compare`` and ``tracesleuth analyze --baseline`` on a simulated incident."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracesleuth.analyses.compare.synthetic import simulate_scenario
from tracesleuth.cli import main


@pytest.fixture(scope="module")
def incident(tmp_path_factory):
    """A slowed handler: the baseline's and the problem's spans as Parquet files, and both in one."""
    s = simulate_scenario("slowed-handler", n_requests=600, random_state=3)
    d = tmp_path_factory.mktemp("incident")
    pq.write_table(s.baseline, d / "baseline.parquet")
    pq.write_table(s.problem, d / "problem.parquet")
    pq.write_table(pa.concat_tables([s.baseline, s.problem.cast(s.baseline.schema)]), d / "both.parquet")
    return s, d


def test_compare_json_names_the_injected_service_first(incident, capsys):
    s, d = incident
    code = main(["compare", "-b", str(d / "baseline.parquet"), "-p", str(d / "problem.parquet"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["significant"]
    assert doc["services"][0]["service"] == s.injected
    assert {"service", "score", "evidence"} <= set(doc["services"][0])


def test_compare_by_time_ranges_over_one_input(incident, capsys):
    s, d = incident
    first_problem = pa.compute.min(s.problem["start_ns"]).as_py()
    last_baseline = pa.compute.max(s.baseline["start_ns"]).as_py()
    assert last_baseline < first_problem
    split = (first_problem + last_baseline) / 2e9
    code = main(["compare", str(d / "both.parquet"), "--baseline-time", f"0/{split}",
                 "--problem-time", f"{split}/{split + 10 ** 6}", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["services"][0]["service"] == s.injected
    assert doc["n_problem"] == s.n_problem and doc["n_baseline"] == s.n_baseline


def test_compare_prints_services_and_mutations(incident, capsys):
    s, d = incident
    assert main(["compare", "-b", str(d / "baseline.parquet"), str(d / "problem.parquet")]) == 0
    text = capsys.readouterr().out
    assert "Services, most suspicious first" in text and s.injected in text


@pytest.mark.parametrize(("args", "message"), [
    ([], "give two periods"),
    (["--baseline-time", "0/1"], "go together"),
    (["--baseline-time", "2/1", "--problem-time", "3/4", "X"], "start must come before the end"),
    (["--baseline-time", "yesterday/1", "--problem-time", "3/4", "X"], "neither an ISO 8601 time"),
])
def test_compare_usage_mistakes_are_one_line(incident, capsys, args, message):
    s, d = incident
    args = [str(d / "both.parquet") if a == "X" else a for a in args]
    assert main(["compare", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_analyze_with_a_baseline_opens_with_what_changed(incident, tmp_path, capsys):
    s, d = incident
    out = tmp_path / "report.html"
    code = main(["analyze", str(d / "problem.parquet"), "--baseline", str(d / "baseline.parquet"), "-o", str(out),
                 "--set", "patterns.generations=30", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and list(doc["analyses"]) == ["compare", "patterns", "localize", "paths"]
    assert doc["skipped"] == {"annotate": "needs --annotations"}
    assert doc["analyses"]["compare"]["services"][0]["service"] == s.injected
    page = out.read_text(encoding="utf-8")
    assert page.index("What changed") < page.index("Latency degradation patterns")


def test_analyze_without_a_baseline_says_what_it_skipped(incident, tmp_path, capsys):
    s, d = incident
    code = main(["analyze", str(d / "problem.parquet"), "-o", str(tmp_path / "r.html"), "--set",
                 "patterns.generations=30", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["skipped"] == {"compare": "needs --baseline", "annotate": "needs --annotations"}
    assert main(["analyze", str(d / "problem.parquet"), "-o", str(tmp_path / "r.html"), "--only", "compare"]) == 2


def test_compare_all_endpoints_merges_the_rankings(incident, capsys):
    s, d = incident
    code = main(["compare", "-b", str(d / "baseline.parquet"), "-p", str(d / "problem.parquet"), "--all-endpoints",
                 "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["services"][0]["service"] == s.injected
    assert doc["endpoints"] and all(e in doc["endpoints"] for e in doc["services"][0]["endpoints"])
    assert main(["compare", "-b", str(d / "baseline.parquet"), str(d / "problem.parquet"), "--all-endpoints",
                 "-e", "frontend:GET /"]) == 2
