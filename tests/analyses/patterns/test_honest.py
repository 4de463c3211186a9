"""Honest on mixed data (issue 29 item 5): a pattern below ``min_f`` is not presented as an
explanation (the range gets an ``unexplained`` note with its best F), at most
``max_patterns_shown`` patterns of a range are shown and the rest counted, and a condition that
adds no time is context, not a cause. The labels do not depend on the floor."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tracesleuth.analyses.patterns import LatencyDegradationPatterns
from tracesleuth.analyses.patterns._model import Condition, LatencyInterval, Pattern
from tracesleuth.analyses.patterns.analysis import PAPER_SETTINGS
from tracesleuth.analyses.patterns.results import (MAX_PATTERNS_SHOWN, MIN_F_SHOWN, ConditionEffect,
                                                   DegradationPatternsResult, SubIntervalPattern)
from tracesleuth.analyses.patterns.synthetic import make_degraded_session
from tracesleuth.errors import ParameterError

MS = 1_000_000
OP = "exclusive_ns[svc:op{}]"


def _sub(index, low, high, f, n=100):
    pattern = Pattern([Condition(OP.format(index), low_ns=5 * MS)])
    return SubIntervalPattern(index, low, high, pattern, pattern.describe(), f, f, f, int(f * n), 0, n, int(f * n))


def _result(subs, **kw):
    settings = {"min_f": MIN_F_SHOWN, "max_patterns_shown": MAX_PATTERNS_SHOWN, **kw}
    interval = LatencyInterval(min(s.low_ns for s in subs), max(s.high_ns for s in subs))
    return DegradationPatternsResult(found=True, solver="ga", n_requests=1000, sub_intervals=tuple(subs),
                                     interval=interval, **settings).presented()


def test_a_range_below_the_floor_is_unexplained_with_its_best_f():
    # [100, 200) ms: four patterns above the floor (3 shown, 1 counted); [200, 400) ms: two below it
    res = _result([_sub(0, 100 * MS, 200 * MS, 0.9), _sub(1, 100 * MS, 200 * MS, 0.55),
                   _sub(2, 100 * MS, 200 * MS, 0.7), _sub(3, 100 * MS, 200 * MS, 0.6),
                   _sub(4, 200 * MS, 400 * MS, 0.3, n=80), _sub(5, 200 * MS, 400 * MS, 0.2, n=80)])
    first, second = res.shown_by_range()
    assert first.shown == (0, 2, 3) and first.beyond_most == (1,) and first.below_floor == () and first.explained
    assert second.shown == () and second.below_floor == (4, 5) and not second.explained
    (note,) = res.notes_of("unexplained")
    assert (note.low_ns, note.high_ns, note.n_requests, note.best_f, note.n_patterns, note.min_f) == \
        (200 * MS, 400 * MS, 80, 0.3, 2, 0.5)
    d = res.to_dict()
    assert (d["n_shown"], d["n_hidden"]) == (3, 3)
    assert [r["n_hidden"] for r in d["ranges"]] == [1, 2]
    assert [s["shown"] for s in d["sub_intervals"]] == [True, False, True, True, False, False]
    assert [n["kind"] for n in d["notes"]] == ["unexplained"]
    assert "200 ms" in res.describe()  # the range is said
    assert res.presented().notes == res.notes  # idempotent: the notes are replaced, not added


def test_floor_zero_shows_every_pattern():
    res = _result([_sub(0, 0, 10 * MS, 0.05), _sub(1, 0, 10 * MS, 0.01)], min_f=0.0, max_patterns_shown=None)
    (r,) = res.shown_by_range()
    assert r.shown == (0, 1) and r.n_hidden == 0 and not res.notes_of("unexplained")


@pytest.mark.parametrize("condition, added, cause", [
    (Condition(OP.format(0), high_ns=154 * MS), -30.0 * MS, False),   # an upper bound: the operation is fast
    (Condition(OP.format(0), high_ns=154 * MS), 30.0 * MS, False),    # no lower bound: not what makes it slow
    (Condition(OP.format(0), low_ns=20 * MS), 25.0 * MS, True),       # adds time
    (Condition(OP.format(0), low_ns=2 * MS, high_ns=9 * MS), -1.0 * MS, False),  # a range not slower there
    (Condition("instance[svc:op0]", value="svc-3"), None, True),      # a category may be a cause
])
def test_a_condition_is_a_cause_only_when_it_adds_time(condition, added, cause):
    e = ConditionEffect(condition, inside_ns=None if added is None else 40.0 * MS,
                        outside_ns=None if added is None else 40.0 * MS - added, added_ns=added,
                        inside_share=None if added is not None else 1.0,
                        outside_share=None if added is not None else 0.0)
    assert e.adds_time is cause and e.to_dict()["cause"] is cause


def _mixed(n=600, n_slow=180, n_ops=6, seed=0) -> pl.DataFrame:
    """Fast requests (a few ms in each of ``n_ops`` operations) and ``n_slow`` slow ones, each slow
    for a delay of 100-300 ms in one operation drawn at random: the slow requests mix causes."""
    rng = np.random.default_rng(seed)
    base = rng.lognormal(np.log(2 * MS), 0.2, size=(n, n_ops))
    slow = rng.choice(n, n_slow, replace=False)
    base[slow, rng.integers(0, n_ops, n_slow)] += rng.uniform(100, 300, n_slow) * MS
    frame = {OP.format(k): base[:, k].astype(np.int64) for k in range(n_ops)}
    return pl.DataFrame({"latency_ns": base.sum(axis=1).astype(np.int64), **frame})


def test_mixed_causes_get_no_pattern_as_explanation_and_the_labels_do_not_change():
    table = _mixed()
    honest = LatencyDegradationPatterns(random_state=0, generations=60).fit(table)
    res = honest.result_
    assert res.found
    ranges = res.shown_by_range()
    by_index = {s.index: s for s in res.sub_intervals}
    assert all(by_index[i].f_score >= MIN_F_SHOWN for r in ranges for i in r.shown)
    assert all(len(r.shown) <= MAX_PATTERNS_SHOWN for r in ranges)
    unexplained = {(n.low_ns, n.high_ns): n for n in res.notes_of("unexplained")}
    assert unexplained, res.describe()
    for r in ranges:
        if not r.explained:
            note = unexplained[(r.low_ns, r.high_ns)]
            best = max(by_index[i].f_score for i in r.below_floor)
            assert note.best_f == pytest.approx(best) and best < MIN_F_SHOWN
    everything = LatencyDegradationPatterns(random_state=0, generations=60, min_f=0.0).fit(table)
    np.testing.assert_array_equal(honest.labels_, everything.labels_)
    np.testing.assert_array_equal(honest.predict(table), honest.labels_)
    assert not everything.result_.notes_of("unexplained")


def test_a_good_pattern_is_shown():
    session = make_degraded_session(1000, random_state=1)
    res = LatencyDegradationPatterns(random_state=0).fit(session.frame).result_
    ranges = res.shown_by_range()
    assert all(r.explained and r.n_hidden == 0 for r in ranges)
    assert sum(len(r.shown) for r in ranges) == len(res.sub_intervals) == 2
    assert not res.notes_of("unexplained")
    assert all(e.adds_time for s in res.sub_intervals for e in s.effects)


def test_paper_settings_show_every_pattern():
    assert PAPER_SETTINGS["min_f"] == 0.0 and PAPER_SETTINGS["max_patterns_shown"] is None
    res = LatencyDegradationPatterns(random_state=0, generations=60, **PAPER_SETTINGS).fit(_mixed()).result_
    assert sum(len(r.shown) for r in res.shown_by_range()) == len(res.sub_intervals)
    assert not res.notes_of("unexplained")


@pytest.mark.parametrize("name, value", [("min_f", 1.5), ("min_f", -0.1), ("max_patterns_shown", 0)])
def test_floor_settings_are_checked(name, value):
    with pytest.raises(ParameterError, match=name):
        LatencyDegradationPatterns(**{name: value}).fit(_mixed())


def _two_ranges():
    return _result([_sub(0, 100 * MS, 200 * MS, 0.9), _sub(1, 100 * MS, 200 * MS, 0.55),
                    _sub(2, 100 * MS, 200 * MS, 0.7), _sub(3, 100 * MS, 200 * MS, 0.6),
                    _sub(4, 200 * MS, 400 * MS, 0.3, n=80), _sub(5, 200 * MS, 400 * MS, 0.2, n=80)])


def test_the_command_line_shows_only_what_explains():
    from tracesleuth.cli.commands.patterns import show
    from tracesleuth.cli._common import out

    with out.capture() as captured:
        show(_two_ranges())
    text = captured.get()
    assert "no pattern explains it; best F 0.300" in text
    assert "1 more pattern(s) not shown (1 beyond the best 3" in text
    assert "2 more pattern(s) not shown (2 below F 0.5" in text


def test_the_report_folds_patterns_below_the_floor():
    from tracesleuth.report.sections.patterns import PatternsInput, patterns_section, shown_patterns
    from tracesleuth.report import Details, Table

    res = _two_ranges()
    groups = shown_patterns(res)
    assert [[s.index for s in shown] for _, shown, _ in groups] == [[0, 2, 3], []]
    assert [sorted(s.index for s in hidden) for _, _, hidden in groups] == [[1], [4, 5]]
    section = patterns_section(PatternsInput(res, np.full(10, -1), "latency"))
    main = next(p for p in section.parts if isinstance(p, Table))
    assert len(main.rows) == 3
    assert sum(len(d.parts[0].rows) for d in section.parts if isinstance(d, Details)) == 3
