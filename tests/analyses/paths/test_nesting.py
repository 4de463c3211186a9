"""The nesting algorithm (Aguilera et al. 2003) on the slides' example, on simulated requests with
and without overlap, on bad messages and on real TrainTicket traces made black-box."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from sklearn.base import clone

from tracesleuth.analyses.paths import CausalPaths, messages_from_tables, recovery_rate
from tracesleuth.analyses.paths.messages import MESSAGE_SCHEMA
from tracesleuth.analyses.paths.synthetic import spaced_requests
from tracesleuth.errors import EmptyDataError, ParameterError
from tracesleuth.model import build_trace_table

MS = 1_000_000


def log(rows) -> pl.DataFrame:
    return pl.from_arrow(pa.Table.from_pylist(
        [dict(zip(MESSAGE_SCHEMA.names, r)) for r in rows], schema=MESSAGE_SCHEMA))


def slides_example(t0: int, tag: str) -> list:
    """A calls B; B calls C, then D, before returning (the slides' 'A -> B -> [C; D]')."""
    return [(t0, "A", "B", "call", f"{tag}1"), (t0 + 1 * MS, "B", "C", "call", f"{tag}2"),
            (t0 + 3 * MS, "C", "B", "return", f"{tag}2"), (t0 + 4 * MS, "B", "D", "call", f"{tag}3"),
            (t0 + 9 * MS, "D", "B", "return", f"{tag}3"), (t0 + 10 * MS, "B", "A", "return", f"{tag}1")]


def test_the_slides_example_gives_b_calling_c_then_d_with_latencies_and_delays():
    res = CausalPaths().fit(log(slides_example(0, "x") + slides_example(100 * MS, "y"))).result_
    assert [(p.key, p.count) for p in res.patterns] == [("B(C; D)", 2)]
    p = res.patterns[0]
    assert p.tree == {"node": "B", "calls": [{"node": "C", "calls": []}, {"node": "D", "calls": []}]}
    assert [n["latency_median_ns"] for n in p.nodes] == [10 * MS, 2 * MS, 5 * MS]
    assert [n["delay_median_ns"] for n in p.nodes] == [0, 1 * MS, 4 * MS]
    assert res.to_dict()["patterns"][0]["count"] == 2 and "B(C; D)" in res.describe()


def test_the_scoreboard_picks_the_recurring_parent_when_calls_overlap():
    # Two overlapping requests: y's B->C call is made while both A->B calls are open; the
    # recurring 1 ms delay (seen alone in ten earlier requests) names y's call as its parent.
    rows = [r for k in range(10) for r in slides_example(k * 100 * MS, f"p{k}")]
    rows += slides_example(2000 * MS, "x") + slides_example(2000 * MS + 5 * MS, "y")
    res = CausalPaths().fit(log(sorted(rows))).result_
    assert res.pattern_counts() == {"B(C; D)": 12}


def test_requests_that_do_not_overlap_are_all_recovered():
    messages, truth = messages_from_tables(spaced_requests(200, 1.0))
    assert sum(truth.values()) == 200 and messages.height == 2 * (messages["kind"] == "call").sum()
    res = CausalPaths().fit(messages).result_
    assert recovery_rate(truth, res.pattern_counts()) == 1.0
    assert not any(res.counts.values())


def test_bad_messages_are_counted_and_the_rest_analysed():
    rows = slides_example(0, "x") + [
        (50 * MS, "B", "A", "return", "ghost"),      # a return without its call
        (60 * MS, "A", "B", "call", "open"),         # never answered
        (61 * MS, "A", "B", "call", "open"),         # the same call id again
        (70 * MS, "Q", "R", None, None),             # a free-form message
    ] + slides_example(200 * MS, "y")
    rows[3], rows[4] = rows[4], rows[3]              # two messages out of time order
    res = CausalPaths().fit(log(rows)).result_
    assert res.pattern_counts() == {"B(C; D)": 2}
    assert res.counts == {"returns_without_call": 1, "duplicate_calls": 1, "never_answered": 1,
                          "under_unanswered": 0, "out_of_order": 1, "free_form": 1}
    (left,) = res.notes_of("messages_left_out")  # the same counts, as a note the CLI and report print
    assert left.numbers() == res.counts
    assert str(left) in res.describe() and not res.notes_of("no_causal_path")


def test_settings_and_input_are_checked():
    est = CausalPaths(buckets_per_octave=2)
    assert clone(est).get_params()["buckets_per_octave"] == 2
    with pytest.raises(ParameterError, match="buckets_per_octave"):
        CausalPaths(buckets_per_octave=0).fit(log(slides_example(0, "x")))
    with pytest.raises(ParameterError, match="lacks the column"):
        CausalPaths().fit(pl.DataFrame({"timestamp_ns": [1]}))
    with pytest.raises(EmptyDataError):
        CausalPaths().fit(log([]))
    with pytest.raises(ParameterError):
        recovery_rate({}, {})


#: The recorded TrainTicket day's traces, under ../shared/data (the ``shared_data`` fixture).
TRAINTICKET_TRACES = "nezha/trainticket/2023-01-29/trace"


def test_real_trainticket_paths_are_recovered_without_trace_ids(shared_data):
    from tracesleuth.io import read_spans

    traces = shared_data / TRAINTICKET_TRACES
    spans = read_spans([str(traces / f"08_{m}_trace.csv.gz") for m in (43, 44, 45, 52, 53, 54, 58, 59)])
    messages, truth = messages_from_tables([build_trace_table(spans)])
    res = CausalPaths().fit(messages).result_
    assert sum(truth.values()) == 444
    assert recovery_rate(truth, res.pattern_counts()) >= 0.85  # 0.914 measured


def test_no_causal_path_is_a_note():
    rows = [(0, "A", "B", "call", "c1"), (10 * MS, "B", "A", "call", "c2")]  # calls never answered
    res = CausalPaths().fit(log(rows)).result_
    assert not res.patterns
    (none,) = res.notes_of("no_causal_path")
    assert none.n_call_pairs == res.n_call_pairs == 0 and str(none) in res.describe()
