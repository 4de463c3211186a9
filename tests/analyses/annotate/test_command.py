"""``tracesleuth annotate derive|check|predict`` and ``analyze --annotations`` on the SQLite workload."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tracesleuth.analyses.annotate.workload import ENDPOINT, run_workload
from tracesleuth.cli import main


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A clean run, a second clean run and one with 2 ms before every database statement, and the
    annotations derived on the first."""
    base = tmp_path_factory.mktemp("annotate")
    run_workload(base, n_requests=40, name="warm-up", random_state=1)
    clean = run_workload(base, n_requests=200, name="clean").spans_path
    again = run_workload(base, n_requests=200, name="again").spans_path
    slow = run_workload(base, n_requests=200, name="slow", db_delay_s=0.002).spans_path
    annotations = base / "annotations.yaml"
    assert main(["annotate", "derive", str(clean), "-o", str(annotations), "--metric", "time"]) == 0
    return base, clean, again, slow, annotations


def test_derive_writes_a_file_and_prints_the_annotations(runs, capsys, tmp_path):
    base, clean, *_ = runs
    out = tmp_path / "a.json"
    assert main(["annotate", "derive", str(clean), "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "derive" and doc["output"] == str(out) and json.loads(out.read_text())["annotations"]
    assert {"operation", "metric", "kind", "text"} <= set(doc["annotations"][0])
    assert "size(entries)" in doc["features"] and sum(doc["kinds"].values()) == len(doc["annotations"])
    assert main(["annotate", "derive", str(clean), "-o", str(tmp_path / "b.yaml")]) == 0
    text = capsys.readouterr().out
    assert "annotations of" in text and "filehost:" in text


def test_check_passes_a_clean_run_and_fails_a_slow_one(runs, capsys):
    base, clean, again, slow, annotations = runs
    assert main(["annotate", "check", str(annotations), str(again), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["annotations"] and all({"operation", "passed"} <= set(a) for a in doc["annotations"])
    assert main(["annotate", "check", str(annotations), str(slow), "--json"]) == 0
    slow_doc = json.loads(capsys.readouterr().out)
    # Timing on a shared machine drifts between runs (a clean rerun passed 82-98% here on an idle
    # machine, 29% once while two other test processes started beside it); the delay is far beyond
    # it: 2 ms before statements of a few microseconds. When the clean rerun itself is slowed by other
    # work, the check cannot tell the delay from the load: skip, naming what was measured.
    if doc["pass_rate"] < 0.6:
        pytest.skip(f"the clean rerun passed only {doc['pass_rate']:.0%} of its annotations (load average "
                    f"{os.getloadavg()[0]:.2f}): the machine's load changed between the two clean runs")
    assert slow_doc["pass_rate"] < 0.3
    failing = {a["operation"] for a in slow_doc["annotations"] if a["passed"] is False}
    assert "filehost:Database.query" in failing and ENDPOINT in failing
    assert main(["annotate", "check", str(annotations), str(slow), "--fail-under", "0.9"]) == 1
    assert "FAILS" in capsys.readouterr().out


def test_predict_answers_what_if(runs, capsys, tmp_path):
    base, clean, again, slow, annotations = runs
    assert main(["annotate", "predict", str(annotations), str(clean), "--change", "filehost:Database.*+2ms",
                 "--under", "5ms", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == ENDPOINT and doc["predicted"]["median_ns"] > doc["measured"]["median_ns"] + 2e6
    assert doc["share_under_predicted"] < doc["share_under_measured"]
    new = tmp_path / "slow.yaml"
    assert main(["annotate", "derive", str(slow), "-o", str(new), "--json"]) == 0
    capsys.readouterr()
    assert main(["annotate", "predict", str(annotations), str(clean), "--replace", f"filehost:Database.*={new}",
                 "-t", "filehost:FileHost.put"]) == 0
    assert "What if filehost:Database.execute as newly annotated" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "message"), [
    (["predict", "{a}", "{t}"], "Give a change"),
    (["predict", "{a}", "{t}", "--change", "filehost:Database.query+fast"], "Cannot read the change"),
    (["predict", "{a}", "{t}", "--change", "nothing:here+1ms"], "matches no operation"),
    (["predict", "{a}", "{t}", "--change", "filehost:*+1ms", "-t", "nope"], "target"),
    (["predict", "{a}", "{t}", "--replace", "nothing"], "PATTERN=FILE"),
    (["check", "{bad}", "{t}"], "line 2"),
    (["check", "{a}", "{t}", "--window", "2"], "'window' parameter"),
    (["derive", "{t}", "--metric", "latency"], "'metrics' parameter"),
    (["check", "{a}", "{t}", "--min-calls", "1"], "'min_calls' parameter"),
    (["check", "{a}", "{t}", "--period", "soon"], "--period"),
    (["check", "{a}", "{t}", "--time", "2023-01-29T09:00"], "START/END"),
])
def test_mistakes_are_one_line(runs, capsys, tmp_path, args, message):
    base, clean, again, slow, annotations = runs
    bad = tmp_path / "bad.yaml"
    bad.write_text("annotations:\n- {operation: a:b, metric: time, kind: linear}\n")
    argv = ["annotate"] + [a.format(a=annotations, t=clean, bad=bad) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_store_time_range_derives_and_checks_with_services_and_two_sided_tests(runs, capsys, tmp_path):
    from tracesleuth.io import read_spans

    base, clean, again, slow, annotations = runs
    store = tmp_path / "store"
    assert main(["ingest", str(clean), str(slow), "-o", str(store)]) == 0

    def period(path) -> str:
        starts = read_spans(str(path)).spans.column("start_ns").to_numpy()
        return f"{starts.min() / 1e9:.6f}/{(starts.max() + 1) / 1e9:.6f}"

    derived = tmp_path / "range.yaml"
    assert main(["annotate", "derive", str(store), "--time", period(clean), "-o", str(derived), "--metric",
                 "time", "--period", "none"]) == 0
    capsys.readouterr()
    assert main(["annotate", "check", str(derived), str(store), "--time", period(slow), "--period", "none",
                 "--two-sided", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["alternative"] == "two-sided" and doc["procedure"] == "Benjamini-Hochberg"
    assert doc["pass_rate"] < 0.3 and doc["services"][0]["service"] == "filehost"
    assert {"service", "score", "evidence"} <= set(doc["services"][0])
    assert main(["annotate", "check", str(derived), str(store), "--time", period(slow)]) == 0
    assert "Services the failing annotations point to" in capsys.readouterr().out


def test_analyze_checks_the_annotations_when_given(runs, capsys, tmp_path):
    base, clean, again, slow, annotations = runs
    out = tmp_path / "report.html"
    assert main(["analyze", str(slow), "-o", str(out), "--only", "annotate", "--annotations", str(annotations),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["analyses"]) == ["annotate"] and doc["analyses"]["annotate"]["pass_rate"] < 0.5
    page = out.read_text(encoding="utf-8")
    assert "Performance annotations: assertions on this run" in page and "Figure 2" in page
    assert main(["analyze", str(slow), "-o", str(out), "--only", "annotate"]) == 2
    assert "--annotations FILE" in capsys.readouterr().err


def test_the_module_runs_as_a_program():
    done = subprocess.run([sys.executable, "-m", "tracesleuth", "annotate", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "derive" in done.stdout and "predict" in done.stdout
