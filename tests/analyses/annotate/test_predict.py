"""What-if prediction: changes replayed along the call graph of recorded requests."""

from __future__ import annotations

import polars as pl
import pytest

from tracesleuth.analyses.annotate import PerformanceAnnotations
from tracesleuth.analyses.annotate.fileformat import AnnotationSet
from tracesleuth.analyses.annotate.model import ConstantAnnotation
from tracesleuth.analyses.annotate.predict import Change, parse_change, predict, replacements
from tracesleuth.analyses.annotate.synthetic import planted_case
from tracesleuth.errors import ParameterError

US = 1_000


def frame(spans: list[tuple]) -> pl.DataFrame:
    """(trace, span, parent, operation, start µs, end µs[, kind]) -> a measurement frame."""
    rows = [{"operation_key": f"s:{op}", "trace_id": t, "span_id": s, "parent_span_id": p,
             "kind": rest[0] if rest else "internal", "follows_from": False, "start_ns": a * US,
             "time": (b - a) * US} for t, s, p, op, a, b, *rest in spans]
    return pl.DataFrame(rows)


SEQUENTIAL = [("t1", "r", None, "R", 0, 100), ("t1", "a", "r", "A", 10, 30), ("t1", "b", "r", "B", 40, 60)]
PARALLEL = [("t2", "r", None, "R", 0, 100), ("t2", "a", "r", "A", 10, 60), ("t2", "b", "r", "B", 10, 40)]
NESTED = [("t3", "r", None, "R", 0, 100), ("t3", "p", "r", "P", 10, 70), ("t3", "b", "p", "B", 20, 40),
          ("t3", "c", "p", "C", 45, 60), ("t3", "d", "r", "D", 75, 90)]
ASYNC = [("t4", "r", None, "R", 0, 100), ("t4", "b", "r", "B", 10, 40, "producer")]


def new_root(spans, change: str) -> float:
    p = predict(AnnotationSet(), frame(spans), [parse_change(change)], target="s:R", random_state=0)
    return p.predicted["median_ns"] / US


def test_sequential_calls_push_what_follows():
    assert new_root(SEQUENTIAL, "s:B+5us") == 105
    assert new_root(SEQUENTIAL, "s:B-5us") == 95
    assert new_root(SEQUENTIAL, "s:[AB]<=10us") == 100 - 10 - 10
    assert new_root(SEQUENTIAL, "s:*<=10us") == 0  # R capped, then its children 20 µs sooner: at least 0
    assert new_root(SEQUENTIAL, "s:A*2") == 120


def test_parallel_calls_count_only_past_the_longest():
    assert new_root(PARALLEL, "s:B+10us") == 100
    assert new_root(PARALLEL, "s:B+30us") == 110
    assert new_root(PARALLEL, "s:A-20us") == 80  # both end at 40: the 40 µs of R after them follow


def test_nested_calls_propagate_up_and_asynchronous_ones_do_not():
    assert new_root(NESTED, "s:B+5us") == 105
    assert new_root(ASYNC, "s:B+50us") == 100


def test_changes_are_read_and_bad_ones_refused():
    assert parse_change("db:* * 0.5") == Change("db:*", "scale", 0.5)
    assert parse_change("auth:login<=50ms").value == 50e6
    for bad in ("db:query", "db:query+fast", "db:query*-1"):
        with pytest.raises(ParameterError, match="Cannot read the change"):
            parse_change(bad)
    with pytest.raises(ParameterError, match="matches no operation"):
        predict(AnnotationSet(), frame(SEQUENTIAL), [parse_change("s:Z+1ms")])
    with pytest.raises(ParameterError, match="target"):
        predict(AnnotationSet(), frame(SEQUENTIAL), [parse_change("s:B+1ms")], target="s:nope")


def test_what_if_on_planted_requests_shifts_the_endpoint_by_the_change():
    case = planted_case(0)
    est = PerformanceAnnotations(random_state=0).fit(*case.args)
    p = est.what_if(["files:FileStore.delete+1ms"], threshold="15ms")
    assert p.target == "files:WebDAV.request"
    assert p.predicted["median_ns"] - p.measured["median_ns"] == pytest.approx(1e6, rel=0.05)
    assert p.median_interval_ns[0] <= p.predicted["median_ns"] <= p.median_interval_ns[1]
    assert p.share_under_predicted < p.share_under_measured
    # The annotation of get_owner replaced by a constant 5 ms: each call draws 5 ms.
    new = AnnotationSet(annotations=(ConstantAnnotation("files:FileStore.get_owner", "time", 1, value=5e6, sd=0.0),))
    r = est.what_if(replacements(new), target="files:FileStore.get_owner")
    assert r.predicted["median_ns"] == pytest.approx(5e6) and r.predicted["p95_ns"] == pytest.approx(5e6)
    q = est.what_if(replacements(new), method="residual")
    owner = est.annotations_.get("files:FileStore.get_owner")
    assert q.predicted["mean_ns"] > p.measured["mean_ns"] + 5e6 - owner.expected()[0] - 3e5
    assert "What if" in p.describe() and p.to_frame().height == 2
    # A new version's annotation of an operation these traces never call cannot be replayed: left
    # out and said; the replacements that can be replayed still apply.
    newer = AnnotationSet(annotations=(*new.annotations,
                                       ConstantAnnotation("files:FileStore.audit", "time", 1, value=1e6, sd=0.0)))
    s = est.what_if(replacements(newer), target="files:FileStore.get_owner")
    assert s.predicted["median_ns"] == pytest.approx(5e6)
    (unseen,) = s.notes_of("unseen_operations")
    assert unseen.patterns == ("files:FileStore.audit",)
    only_unseen = AnnotationSet(annotations=newer.annotations[1:])
    with pytest.raises(ParameterError, match="matches no operation"):
        est.what_if(replacements(only_unseen))
