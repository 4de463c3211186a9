"""``predict`` on any table, the notes as records, and bad input named clearly."""

from __future__ import annotations

import json
import warnings

import numpy as np
import polars as pl
import pytest

from tracesleuth.analyses.patterns import LatencyDegradationPatterns
from tracesleuth.analyses.patterns.analysis import PatternsWarning
from tracesleuth.analyses.patterns.notes import Note, SameLatency, TooFewInInterval
from tracesleuth.analyses.patterns.synthetic import compound_case, make_degraded_session
from tracesleuth.errors import EmptyDataError, ParameterError

FAST = {"generations": 120}


@pytest.fixture(scope="module")
def fitted():
    session = make_degraded_session(1000, random_state=1)
    return session, LatencyDegradationPatterns(random_state=0, **FAST).fit(session.frame)


def test_predict_of_the_fitted_table_is_labels(fitted):
    session, model = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same columns: nothing to say
        assert np.array_equal(model.predict(session.frame), model.labels_)


def test_predict_with_compound_rules_is_labels():
    case = compound_case(1)
    model = LatencyDegradationPatterns(random_state=0, **FAST).fit(case.frame)
    assert any(rule.carries for rule in model.result_.compound)
    assert np.array_equal(model.predict(case.frame), model.labels_)


def test_predict_on_another_table():
    """Fitted on half a session, the other half's degraded requests take their degradation's label."""
    session = make_degraded_session(2000, random_state=1)
    first, second = session.frame[:1000], session.frame[1000:]
    model = LatencyDegradationPatterns(random_state=0, **FAST).fit(first)
    labels = model.predict(second)
    assert labels.shape == (1000,) and labels.dtype == np.int64
    truth = session.truth[1000:]
    for degradation in (1, 2):  # each degradation under its own label
        values, counts = np.unique(labels[truth == degradation], return_counts=True)
        assert values[np.argmax(counts)] >= 0 and counts.max() >= 0.95 * (truth == degradation).sum()
    assert (labels[truth == 0] == -1).mean() >= 0.95


def test_predict_says_what_columns_differ(fitted):
    session, model = fitted
    used = sorted({c.attribute for s in model.result_.sub_intervals for c in s.pattern})
    frame = session.frame.drop(used[0]).with_columns(pl.lit(1, dtype=pl.Int64).alias("exclusive_ns[new:op]"))
    with pytest.warns(PatternsWarning) as caught:
        labels = model.predict(frame)
    note = caught[0].message.note
    assert (note.kind, note.missing, note.unknown) == ("predict_columns", (used[0],), ("exclusive_ns[new:op]",))
    assert labels.shape == (frame.height,)
    # the missing operation counts as 0 exclusive time: its pattern's conditions `>= t` fail
    sub = next(s for s in model.result_.sub_intervals if used[0] in s.pattern.attributes)
    assert not (labels == sub.index).any() or any(c.low_ns is None for c in sub.pattern if c.attribute == used[0])


def test_predict_bad_input(fitted):
    session, model = fitted
    with pytest.raises(ParameterError, match="not fitted"):
        LatencyDegradationPatterns().predict(session.frame)
    with pytest.raises(ParameterError, match="'latency_ns'"):
        model.predict(session.frame.drop("latency_ns"))
    with pytest.raises(ParameterError, match="TraceTable or a polars DataFrame"):
        model.predict([1, 2, 3])
    missing = session.frame.with_columns(pl.when(pl.int_range(pl.len()) < 5).then(None)
                                         .otherwise(pl.col("latency_ns")).alias("latency_ns"))
    assert (model.predict(missing)[:5] == -1).all()


def test_notes_are_records(fitted):
    _, model = fitted
    res = model.result_
    assert res.notes and all(isinstance(n, Note) for n in res.notes)
    (band,) = res.notes_of("uncertain_left_out")
    assert band.uncertain_ns == res.uncertain_ns and band.low_ns == res.interval.low_ns and band.n_requests > 0
    as_json = json.loads(json.dumps(res.to_dict()))["notes"]
    assert [n["kind"] for n in as_json] == [n.kind for n in res.notes]
    assert as_json[0]["words"] == res.notes[0].describe() == str(res.notes[0])


# --------------------------------------------------------------------------------------------
# Bad input (issue 29): clear errors, or "no degradation" with the reason
# --------------------------------------------------------------------------------------------


def _frame(latency_ms, **columns):
    return pl.DataFrame({"latency_ns": (np.asarray(latency_ms, dtype=np.float64) * 1e6).astype(np.int64), **columns})


def test_an_interval_holding_one_request():
    lat = np.r_[np.full(50, 10.0) + np.arange(50) * 0.01, 100.0]
    res = LatencyDegradationPatterns(interval="90ms:200ms").fit(_frame(lat, **{"exclusive_ns[s:a]": lat * 1e6})).result_
    assert not res.found and res.reason == TooFewInInterval(90 * 10**6, 200 * 10**6, 1, 15)


def test_all_requests_identical():
    lat = np.full(100, 20.0)
    res = LatencyDegradationPatterns().fit(_frame(lat, **{"exclusive_ns[s:a]": lat * 1e6})).result_
    assert not res.found and res.reason == SameLatency(100, 20 * 10**6)
    assert str(res.reason) == "every request has the same latency (20 ms)."


def test_a_table_without_exclusive_time_columns():
    rng = np.random.default_rng(0)
    lat = np.r_[rng.normal(50, 2, 500), rng.normal(120, 2, 100)]
    with pytest.raises(EmptyDataError, match="No attribute to build conditions from"):
        LatencyDegradationPatterns(random_state=0).fit(_frame(lat))
