"""Changes within the window (beyond Mi et al.): rises, their change points, and which end of a gap is blamed."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from tracesleuth import schema as S
from tracesleuth.analyses.localize import RootCauseLocalization
from tracesleuth.analyses.localize import changes as C

T0 = 1_700_000_000 * 10**9


def _calls(rows) -> pl.DataFrame:
    """Calls from (start_ns, operation_key, service, server_service or None, caller_key, value) rows:
    the value is the gap of a call to a server, else the self time."""
    start, key, service, server, caller, value = zip(*rows)
    gap = [v if s is not None else None for v, s in zip(value, server)]
    own = [v if s is None else 1000 for v, s in zip(value, server)]
    return pl.DataFrame({"start_ns": start, S.OPERATION_KEY: key, S.SERVICE: service, S.SERVER_SERVICE: server,
                         S.CALLER_KEY: caller, S.KIND: ["client" if s else "server" for s in server],
                         S.EXCLUSIVE_NS: own, S.GAP_NS: gap},
                        schema_overrides={S.SERVER_SERVICE: pl.String, S.GAP_NS: pl.Int64, S.EXCLUSIVE_NS: pl.Int64})


def _series(rng, n, key, service, *, rise_from=None, factor=1.0, server=None, caller="root:op", base=1e6, step=10**9):
    out = []
    for i in range(n):
        v = rng.lognormal(np.log(base), 0.2) * (factor if rise_from is not None and i >= rise_from else 1.0)
        out.append((T0 + i * step, key, service, server, caller, int(v)))
    return out


def test_a_rise_is_found_with_its_change_point_and_a_stationary_series_is_not():
    rng = np.random.default_rng(0)
    calls = _calls(_series(rng, 60, "db:query", "db", rise_from=42, factor=20)
                   + _series(rng, 60, "api:GET /", "api"))
    found, n_tested = C.window_changes(calls)
    assert n_tested == 2
    assert [c.key for c in found] == ["db:query"]
    (c,) = found
    assert c.service == "db" and c.kind == "self" and c.significant(0.05)
    assert 15 < c.rise < 27 and c.effect > 0.95
    # the cut is one of nine evenly spaced times: the first one at or after the rise (call 42 of 60)
    assert T0 + 42 * 10**9 <= c.onset_ns <= T0 + 48 * 10**9
    assert c.calls_before + c.calls_after == 60
    assert "rose" in c.describe() and c.to_dict()["service"] == "db"


def test_a_few_calls_are_only_nominally_significant():
    rng = np.random.default_rng(1)
    calls = _calls(_series(rng, 7, "verify:check", "verify", rise_from=3, factor=50)
                   + [r for k in range(30) for r in _series(rng, 40, f"other:op{k}", "other")])
    found, n_tested = C.window_changes(calls)
    mine = [c for c in found if c.key == "verify:check"]
    assert mine and mine[0].p_value < 0.05 and not mine[0].significant(0.05)
    assert mine[0].p_family == pytest.approx(min(1.0, mine[0].p_value * 9 * n_tested))


def test_gaps_are_blamed_on_the_end_common_to_the_rises():
    rng = np.random.default_rng(2)
    rows = []
    # the frontend's calls to four services all wait longer: the frontend is blamed
    for callee in ("ads", "cart", "catalog", "currency"):
        rows += _series(rng, 40, f"frontend:GET {callee}", "frontend", rise_from=25, factor=30, server=callee,
                        caller="frontend:GET /")
    # the shipping service is slow for both its callers, whose other calls are fine: shipping is blamed
    for caller in ("checkout", "quote"):
        rows += _series(rng, 40, f"{caller}:GET shipping", caller, rise_from=25, factor=30, server="shipping",
                        caller=f"{caller}:op")
        rows += _series(rng, 40, f"{caller}:GET catalog", caller, server="catalog", caller=f"{caller}:op")
        rows += _series(rng, 40, f"{caller}:GET email", caller, server="email", caller=f"{caller}:op")
    found, _ = C.window_changes(_calls(rows))
    blamed = {c.key: c.service for c in found}
    assert all(blamed[f"frontend:GET / -> frontend:GET {x}"] == "frontend" for x in ("ads", "cart", "catalog", "currency"))
    assert blamed["checkout:op -> checkout:GET shipping"] == "shipping"
    assert blamed["quote:op -> quote:GET shipping"] == "shipping"
    assert "from frontend into ads) rose" in next(c for c in found if c.key.endswith("GET ads")).describe()
    assert "blamed on the caller" in next(c for c in found if c.service == "frontend").describe()


@pytest.mark.parametrize("starved", [True, False])
def test_a_lone_caller_is_blamed_when_its_own_work_rose_too(starved):
    # the one rule (tracesleuth.model.gaps): a caller with one callee is judged by its own self time
    rng = np.random.default_rng(4)
    rows = (_series(rng, 40, "web:GET cart", "web", rise_from=25, factor=30, server="cart", caller="web:GET /")
            + _series(rng, 40, "web:GET /", "web", rise_from=25 if starved else None, factor=30))
    found, _ = C.window_changes(_calls(rows))
    blamed = {c.key: c.service for c in found}
    assert blamed["web:GET / -> web:GET cart"] == ("web" if starved else "cart")


def test_long_series_use_the_rank_sums_with_the_normal_approximation():
    rng = np.random.default_rng(3)
    n = C.EXACT_MAX_CALLS + 600
    values = rng.lognormal(0, 1, n)
    values[700:] *= 1.5
    times = np.arange(n, dtype=np.int64)
    cuts = np.array([n * k / 10 for k in range(1, 10)])
    p, onset, before, after, effect = C._best_cut(times, values, cuts, 3)
    k = len(before)
    ref = stats.mannwhitneyu(after, before, alternative="greater", method="asymptotic")
    assert p == pytest.approx(ref.pvalue, rel=1e-6)
    assert effect == pytest.approx(ref.statistic / (k * (n - k)))
    assert onset == times[k] and 600 <= k <= 800


def test_the_estimator_ranks_services_by_slowdown_and_the_paper_settings_leave_changes_out():
    from .test_core import _spans  # requests api -> (db, cache); db-3 slow from request 800

    from tracesleuth.model import build_trace_table

    table = build_trace_table(_spans(1200, slow_from=800))
    res = RootCauseLocalization(random_state=0).fit(table).result_
    assert res.services[0].service == "db" and res.changes and res.changes[0].service == "db"
    # one instance of four slowed: the median of all db calls hardly moves (rise ~1.06x), the
    # paper's split of the slow requests sees it (~4x): the score is the larger slowdown
    db = res.services[0]
    assert db.score >= max(c.rise for c in res.changes if c.service == "db") and db.score > 2
    assert res.to_dict()["changes"][0]["service"] == "db" and res.n_series > 0
    assert "series rose within the window" in res.describe()
    paper = RootCauseLocalization(random_state=0, changes=False).fit(table).result_
    assert paper.changes == () and paper.n_series == 0
    assert paper.services[0].score == paper.anomalous_methods[0].score  # the paper's score: clusters


@pytest.mark.parametrize("inject, service", [("13:31:54", "ts-contacts-service"),
                                             ("15:42:00", "ts-preserve-service")])
def test_trainticket_cpu_contention_is_found_from_its_windows_alone(shared_data, inject, service):
    """Issue 17's real-data target: the contacts service's 9 slowed calls (clusters of 2-8
    requests), and the preserve service, whose contention shows in the gaps of its own calls."""
    from tracesleuth.evaluation.nezha import list_faults, read_windows
    from tracesleuth.model import root_tables

    (fault,) = [f for f in list_faults(shared_data / "nezha", systems=("trainticket",))
                if f.inject_time.endswith(inject)]
    tables, _ = root_tables(read_windows((fault.inject_file,) + tuple(fault.problem_files)))
    res = RootCauseLocalization(random_state=0).fit(tables).result_
    assert res.services[0].service == service
    assert res.onset_ns is not None
