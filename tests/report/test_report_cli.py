"""``tracesleuth analyze``: in-process on a simulated session written to Parquet, and as ``python -m``."""

from __future__ import annotations

import html
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from report_support import GENERATIONS, OPERATION_PAYLOAD, parse, payload_spans, simulated_session

from tracesleuth.cli import main


@pytest.fixture(scope="module")
def parquet(tmp_path_factory):
    path = tmp_path_factory.mktemp("spans") / "session.parquet"
    pq.write_table(payload_spans(simulated_session()), path)
    return path


def test_analyze_json(parquet, tmp_path, capsys):
    out = tmp_path / "report.html"
    code = main(["analyze", str(parquet), "-o", str(out), "--seed", "0", "--set",
                 f"patterns.generations={GENERATIONS}", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["report"] == str(out) and out.is_file()
    assert doc["endpoint"] == "web-service:gethome" and doc["requests"] == 400
    assert list(doc["analyses"]) == ["patterns", "localize", "paths"]
    doc = doc["analyses"]["patterns"]
    assert doc["found"]
    words = [s["words"] for s in doc["sub_intervals"]]
    assert any(OPERATION_PAYLOAD in w for w in words)
    page = out.read_text(encoding="utf-8")
    for s in doc["sub_intervals"]:
        assert html.escape(s["words"]) in page and f">{s['f_score']:.3f}<" in page
    assert "About the input" in page and "parquet (1 file)" in page
    assert len([a for a, _ in parse(page).scripts if a.get("type") is None]) == 2


def test_analyze_prints_a_summary_and_the_path(parquet, tmp_path, capsys):
    out = tmp_path / "r.html"
    code = main(["analyze", str(parquet), "-o", str(out), "--set", "patterns.interval=80ms:",
                 "--set", "patterns.solver=bnb"])
    text = capsys.readouterr().out
    assert code == 0 and out.is_file()
    assert "Latency degradation patterns" in text and "Latency interval [80 ms," in text and "F=" in text
    assert f"Report: {out}" in text


@pytest.mark.parametrize(("setting", "message"), [
    ("patterns.solver=genetic", "'solver' parameter of LatencyDegradationPatterns must be"),
    ("patterns.nope=1", "patterns has no such setting"),
    ("nope.solver=bnb", "no analysis is called 'nope'"),
    ("solver=bnb", "write ANALYSIS.SETTING=VALUE"),
])
def test_analyze_bad_setting_is_one_line(parquet, tmp_path, capsys, setting, message):
    code = main(["analyze", str(parquet), "-o", str(tmp_path / "r.html"), "--set", setting])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_analyze_errors_are_one_line(parquet, tmp_path, capsys):
    code = main(["analyze", str(parquet), "-o", str(tmp_path / "r.html"), "--endpoint", "nope"])
    assert code == 2 and "matches no operation" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_python_m(parquet, tmp_path):
    out = tmp_path / "m.html"
    done = subprocess.run([sys.executable, "-m", "tracesleuth", "analyze", str(parquet), "-o", str(out),
                           "--set", "patterns.generations=20", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["report"] == str(out) and out.stat().st_size > 1_000_000
