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
