"""``tracesleuth paths`` on traces (made black-box by the tool) and on a message log."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tracesleuth.analyses.paths import messages_from_tables
from tracesleuth.analyses.paths.synthetic import spaced_requests
from tracesleuth.cli import main


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """300 requests that do not overlap: their spans as Parquet, their messages as CSV."""
    tables = spaced_requests(300, 1.0, random_state=4)
    d = tmp_path_factory.mktemp("paths")
    pq.write_table(tables[0].spans, d / "spans.parquet")  # every endpoint's spans (the tables share them)
    messages, truth = messages_from_tables(tables)
    messages.write_csv(d / "messages.csv")
    return d, truth


def test_paths_on_traces_recovers_every_path_and_says_so(inputs, capsys):
    d, truth = inputs
    assert main(["paths", str(d / "spans.parquet"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["recovery"] == 1.0 and doc["n_paths"] == 300
    top = doc["patterns"][0]
    assert top["count"] == max(truth.values()) and top["tree"]["node"] == "front"
    assert set(top["tree"]) == {"node", "calls"} and doc["patterns"] == sorted(doc["patterns"],
                                                                              key=lambda p: -p["count"])


def test_paths_on_a_message_log(inputs, capsys):
    d, truth = inputs
    assert main(["paths", str(d / "messages.csv"), "--messages", "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "300 causal paths" in text and "Node latencies of the most frequent path" in text


@pytest.mark.parametrize(("args", "message"), [
    (["--messages", "-e", "front:ReadFile"], "a message log has no endpoints"),
    (["--buckets-per-octave", "0"], "'buckets_per_octave' parameter"),
])
def test_paths_mistakes_are_one_line(inputs, capsys, args, message):
    d, _ = inputs
    assert main(["paths", str(d / "messages.csv"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_file_that_is_not_a_message_log_is_named(inputs, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert main(["paths", str(bad), "--messages"]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "missing" in err and len(err.strip().splitlines()) == 1


def test_envoy_access_logs_are_message_logs(tmp_path, capsys):
    """Two proxies' default-format logs: web calls app, app calls db inside each call."""
    web, app = [], []
    for k in range(30):
        t = 1_000 * k  # one request a second
        stamp = lambda ms: f"2024-03-01T10:{(t + ms) // 60_000:02d}:{(t + ms) // 1000 % 60:02d}.{(t + ms) % 1000:03d}Z"  # noqa: E731
        web.append(f'[{stamp(0)}] "GET /page HTTP/1.1" 200 - 0 512 40 39 "-" "curl" "id-{k}" "app:8080" '
                   f'"10.0.0.2:8080"')
        app.append(f'[{stamp(5)}] "GET /rows HTTP/1.1" 200 - 0 128 20 19 "-" "app" "id-{k}" "db:5432" '
                   f'"10.0.0.3:5432"')
    (tmp_path / "web.log").write_text("\n".join(web) + "\nnot an access log line\n")
    (tmp_path / "app.log").write_text("\n".join(app) + "\n")
    assert main(["paths", str(tmp_path / "web.log"), str(tmp_path / "app.log"), "--messages", "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["patterns"][0]["count"] == 30 and doc["patterns"][0]["key"] == "app(db)"
    assert "1 lines not in Envoy's access-log format" in captured.err
