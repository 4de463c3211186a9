"""The diagnosis (issue 28): change points, the gap rule, rate tests, seeded incidents over many
seeds (floors, not one lucky case), healthy periods, bad input, the CLI and the recorded faults."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from sklearn.base import clone

from tracesleuth.analyses.diagnose import Diagnosis
from tracesleuth.analyses.diagnose.changepoints import latest_change, pettitt, smallest_p_value, tarone_level
from tracesleuth.analyses.diagnose.evidence import rate_p_values, shift_p_value
from tracesleuth.analyses.diagnose.synthetic import incident_spans
from tracesleuth.cli import main
from tracesleuth.errors import EmptyDataError, ParameterError

ONSET_S = 400.0
SEEDS = range(8)


def _at(spans, seconds: float = 450.0) -> int:
    return int(spans["start_ns"][0].as_py()) + int(seconds * 1e9)


def test_pettitt_finds_a_step_and_its_direction():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, 100), rng.normal(1.5, 1, 60)]
    change = pettitt(x)
    assert abs(change.index - 100) <= 5 and change.p_value < 1e-6 and change.direction == 1
    assert pettitt(np.ones(50)) is None and pettitt([1.0, 2.0]) is None


def test_pettitt_on_a_binary_series_uses_the_tied_ranks():
    # 1 error in 60 requests, then 20 in 80: the untied approximation says p ~ 0.01; the ranks'
    # tie-corrected variance makes it clear.
    x = np.r_[np.zeros(59), 1, np.zeros(60), np.ones(20)]
    assert pettitt(x).p_value < 1e-4


def test_pettitt_one_sided_looks_in_one_direction_only():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, 100), rng.normal(1, 1, 100)]
    both, rise = pettitt(x), pettitt(x, direction=1)
    assert rise.index == both.index and rise.direction == 1
    assert rise.p_value == pytest.approx(both.p_value / 2) and pettitt(x, direction=-1) is None
    assert smallest_p_value(x, direction=1) == pytest.approx(smallest_p_value(x) / 2)


def test_a_rise_followed_by_a_partial_fall_is_found_one_sided():
    """An onset (+1.5 sd at 100) and a partial recovery before the moment (-0.75 or -1 sd at 250), 20
    seeds each: searched for a rise, the onset is found within 10 points in >= 17 (measured 19 and
    19); a two-sided search whose latest change is then kept only when it rose, in <= 5 (measured 2
    and 0: it finds the fall and drops the series)."""
    for drop in (0.75, 1.0):
        one_sided = two_sided = 0
        for seed in range(20):
            x = np.random.default_rng(seed).normal(0, 1, 300)
            x[100:] += 1.5
            x[250:] -= drop
            rise, either = latest_change(x, level=0.01, direction=1), latest_change(x, level=0.01)
            one_sided += rise is not None and abs(rise.index - 100) <= 10
            two_sided += either is not None and either.direction == 1 and abs(either.index - 100) <= 10
        assert one_sided >= 17 and two_sided <= 5


def test_latest_change_keeps_the_later_of_two():
    rng = np.random.default_rng(1)
    x = np.r_[rng.normal(0, 1, 100), rng.normal(3, 1, 100), rng.normal(6, 1, 100)]
    assert abs(latest_change(x, level=0.01).index - 200) <= 5


def test_latest_change_until_finds_the_change_before_the_moment_with_the_values_after_it():
    """A rise at 100 and another at 260 of 300: until 200, the change at 100 is found, not the later
    one. And a rise at 180 of 200 that the 20 values up to it barely show at 0.01 (a one-sd step):
    with the 100 values after the moment, it is found at 180 (within 10) in >= 16 of 20 seeds
    (measured 19), without them in <= 4 (measured 1)."""
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, 100), rng.normal(2, 1, 160), rng.normal(4, 1, 40)]
    assert abs(latest_change(x, level=0.01, until=200).index - 100) <= 5
    assert abs(latest_change(x, level=0.01).index - 260) <= 5
    with_after = without = 0
    for seed in range(20):
        y = np.r_[np.random.default_rng(seed).normal(0, 1, 180), np.random.default_rng(seed + 100).normal(1, 1, 120)]
        ahead = latest_change(y, level=0.01, direction=1, until=199)
        before = latest_change(y[:200], level=0.01, direction=1)
        with_after += ahead is not None and abs(ahead.index - 180) <= 10
        without += before is not None and abs(before.index - 180) <= 10
    assert with_after >= 16 and without <= 4, (with_after, without)


def test_latest_change_rarely_fires_on_noise():
    fired = sum(latest_change(np.random.default_rng(seed).normal(0, 1, 300), level=0.01) is not None
                for seed in range(40))
    assert fired <= 3  # level 0.01 and a conservative approximation: ~0.4 expected


def test_smallest_p_value_bounds_every_order_of_the_values():
    """Over 20 series (continuous, sparse 0/1, tied) and 30 orders of each: no order gives Pettitt a
    smaller p-value than :func:`smallest_p_value`, and the sorted order attains it."""
    for seed in range(20):
        rng = np.random.default_rng(seed)
        x = [rng.normal(0, 1, 50), (rng.random(50) < 0.1).astype(float), rng.integers(0, 4, 50).astype(float)][seed % 3]
        if np.all(x == x[0]):
            continue
        least = smallest_p_value(x, min_size=1)
        assert all(pettitt(rng.permutation(x)).p_value >= least * (1 - 1e-9) for _ in range(30))
        assert pettitt(np.sort(x)).p_value == pytest.approx(least)
    assert smallest_p_value(np.ones(40)) == 1.0 and smallest_p_value(np.arange(15.0)) == 1.0


def test_tarone_level_keeps_the_family_wise_error_and_gains_power():
    """Families of 5 continuous and 35 sparse 0/1 series (an error in 3% of 60 requests: none can reach
    significance), 300 seeds each: on noise no family fires (level 0.01); with a step in one
    continuous series Tarone's level finds it in 161 of 300 families, Bonferroni's in 78 (floors 130
    and more than Bonferroni)."""
    def family(rng, step):
        xs = [rng.normal(0, 1, 60) for _ in range(5)] + [(rng.random(60) < 0.03).astype(float) for _ in range(35)]
        xs[0][40:] += step
        return xs

    def fired(xs, level):
        return any(latest_change(x, level=level) is not None for x in xs)

    assert tarone_level([1e-9, 1e-9, 0.5, 1.0], 0.01) == 0.005 and tarone_level([], 0.01) == 0.01
    assert tarone_level([1e-9] * 4, 0.01) == 0.0025   # every test can reach it: Bonferroni's level
    noise = [family(np.random.default_rng(seed), 0.0) for seed in range(300)]
    assert sum(fired(xs, tarone_level([smallest_p_value(x) for x in xs], 0.01)) for xs in noise) <= 3
    steps = [family(np.random.default_rng(seed), 1.2) for seed in range(300)]
    tarone = sum(fired(xs, tarone_level([smallest_p_value(x) for x in xs], 0.01)) for xs in steps)
    bonferroni = sum(fired(xs, 0.01 / len(xs)) for xs in steps)
    assert tarone >= 130 and tarone > bonferroni


def test_rate_and_shift_tests():
    p = rate_p_values([30, 0], [100, 100], [3, 30], [100, 100], "greater")
    assert p[0] < 1e-4 and p[1] == 1.0
    assert rate_p_values([0], [100], [30], [100], "less")[0] < 1e-6
    rng = np.random.default_rng(2)
    base = rng.lognormal(0, 0.2, 200)
    assert shift_p_value(base * 1.05, base, 0.1) > 0.05  # 5% is below the slowdown asked for
    assert shift_p_value(base * 1.5, base, 0.1) < 1e-6
    assert shift_p_value(base[:2], base, 0.1) == 1.0   # fewer than MIN_SAMPLES (3)
    assert shift_p_value(base[:3] * 1e7, base * 1e6, 0.1) < 1e-5   # three requests (ns), each slower than any before


def test_the_tail_test_sees_intermittent_slow_calls_and_holds_its_level():
    """10% of 150 calls ten times slower, against 300: the tail test finds it at p < 0.01 on >= 16 of
    20 seeds (measured 18), the shift test on <= 5 (measured 0); with no change it rejects at 0.05 in
    <= 8% of 400 draws (measured 4.25%), and a tail slower by less than ``min_slowdown`` does not
    count."""
    from tracesleuth.analyses.diagnose.evidence import Evidence, tail_p_value

    tail = shift = false = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        before, after = rng.lognormal(0, 0.3, 300), rng.lognormal(0, 0.3, 150)
        after[rng.random(150) < 0.1] *= 10
        tail += tail_p_value(after, before, 0.1) < 0.01
        shift += shift_p_value(after, before, 0.1) < 0.01
    for seed in range(400):
        rng = np.random.default_rng(1000 + seed)
        false += tail_p_value(rng.lognormal(0, 0.3, 150), rng.lognormal(0, 0.3, 300), 0.0) < 0.05
    base = np.random.default_rng(0).lognormal(0, 0.3, 300)
    assert tail >= 16 and shift <= 5 and false <= 32, (tail, shift, false)
    assert tail_p_value(base * 1.05, base, 0.1) > 0.05 and tail_p_value(base[:2], base, 0.1) == 1.0
    shown = Evidence("self_time", "db", "query", 1e-4, 4.0, 4.1, 38.0, "tail").describe()
    assert shown == "self time: query 95th percentile 4.1 -> 38 ms (p = 0.0001)"


@pytest.mark.parametrize("fault,service", [("delay", "db"), ("network", "cart"), ("exception", "catalog"),
                                           ("early-return", "cart")])
def test_seeded_incidents_floor(fault, service):
    """Every fault kind over 8 seeds: the culprit first in >= 7 of 8, the onset within 30 s in >= 7."""
    first = onset = 0
    for seed in SEEDS:
        spans = incident_spans(fault=fault, service=service, random_state=seed, onset_s=ONSET_S)
        result = Diagnosis(at=_at(spans)).fit(spans).result_
        first += bool(result.services) and result.services[0].service == service
        start = int(spans["start_ns"][0].as_py())
        onset += result.onset is not None and abs((result.onset.time_ns - start) / 1e9 - ONSET_S) <= 30
    assert first >= 7 and onset >= 7


def test_low_traffic_delays_floor():
    """0.5 requests/s, 25 requests between the onset and the moment given, a delay of 0.5x in the leaf
    service, 16 seeds: the onset found in >= 13 and within 30 s in >= 10, the culprit named first in
    >= 13 (measured 15, 12, 15; with Bonferroni over every series 7, 4, 7); with no fault, no one
    named in >= 15 (measured 16)."""
    found = within = named = quiet = 0
    for seed in range(16):
        spans = incident_spans(fault="delay", service="db", magnitude=0.5, n_requests=300, random_state=seed)
        start = int(spans["start_ns"][0].as_py())
        try:
            result = Diagnosis(at=_at(spans)).fit(spans).result_
        except EmptyDataError:
            continue
        found += 1
        within += abs((result.onset.time_ns - start) / 1e9 - ONSET_S) <= 30
        named += result.verdict == "named" and result.services[0].service == "db"
    for seed in range(16):
        spans = incident_spans(fault=None, n_requests=300, random_state=seed)
        try:
            quiet += Diagnosis(at=_at(spans)).fit(spans).result_.verdict != "named"
        except EmptyDataError:
            quiet += 1
    assert found >= 13 and within >= 10 and named >= 13 and quiet >= 15


def test_a_slowdown_of_a_service_few_requests_reach_floor():
    """catalog's own time x4 in a service 2% of the requests reach (1 to 6 of them in the 90 s problem
    period given), 20 seeds: catalog first on >= 9 (measured 11; with 5 requests the least a time
    test takes, 4); with no fault, named on <= 2 (measured 1: a gap at p = 0.004 in three requests)."""
    first = named = 0
    for seed in range(20):
        spans = incident_spans(fault="delay", service="catalog", magnitude=3.0, reach={"catalog": 0.02},
                               random_state=seed)
        start = int(pl.from_arrow(spans)["start_ns"].min())
        periods = {"time": (start + 400 * 10**9, start + 490 * 10**9), "baseline_time": (start, start + 400 * 10**9)}
        services = Diagnosis(**periods).fit(spans).result_.services
        first += bool(services) and services[0].service == "catalog"
        healthy = incident_spans(fault=None, reach={"catalog": 0.02}, random_state=seed)
        named += Diagnosis(**periods).fit(healthy).result_.verdict == "named"
    assert first >= 9 and named <= 2


def test_problem_range_on_minimal_data():
    """One request a second for 1000 s, the longest period 300 s: from the onset when that holds the
    moment; else the 300 s up to the moment; never past the end of the traffic."""
    from tracesleuth.analyses.diagnose.timeline import _problem_range

    s = 10**9
    starts = np.arange(1000) * s
    assert _problem_range(starts, 400 * s, 450 * s, 300.0, 0.01) == (400 * s, 700 * s)
    assert _problem_range(starts, 100 * s, 550 * s, 300.0, 0.01) == (250 * s + 1, 550 * s + 1)
    assert _problem_range(starts, 900 * s, 950 * s, 300.0, 0.01) == (900 * s, 999 * s + 1)


def test_the_problem_period_holds_the_moment_given():
    """An onset 450 s before the moment, the longest problem period 300 s: the period is the 300 s up
    to the moment (not 300 s from the onset, which would end before it), the baseline still ends at the
    onset; 8 seeds, the culprit first in >= 7 (measured 8)."""
    first = 0
    for seed in SEEDS:
        spans = incident_spans(fault="delay", service="cart", onset_s=100.0, random_state=seed)
        at = _at(spans, 550.0)
        result = Diagnosis(at=at).fit(spans).result_
        onset, problem = result.onset.time_ns, result.problem
        assert problem.start_ns <= at < problem.end_ns and problem.how == "onset_to_moment"
        assert problem.start_ns > onset and result.baseline.end_ns <= onset
        first += result.services[0].service == "cart"
    assert first >= 7


def test_a_healthy_period_names_nobody():
    """No fault: no change is found (a clear error) or nobody is named, on >= 7 of 8 seeds."""
    quiet = 0
    for seed in SEEDS:
        spans = incident_spans(fault=None, random_state=seed)
        try:
            quiet += Diagnosis(at=_at(spans)).fit(spans).result_.verdict != "named"
        except EmptyDataError as exc:
            assert "No change in the store between" in str(exc) and "--time" in str(exc)
            quiet += 1
    assert quiet >= 7


def test_a_network_delay_into_an_asynchronous_callee_is_found_in_the_gaps():
    """A network delay into catalog, which frontend calls asynchronously (a producer span it does not
    wait for), moves no request's latency and no service's own time: only the gap on frontend ->
    catalog. 12 seeds: the onset is found (the edges' gaps, a family of its own) within 10 s of the
    fault and catalog comes first on >= 11; healthy periods with the same calls name nobody on >= 11.
    Measured: 12 of 12 each, onsets within 5 s; before the gaps, "no change in the store" on 12 of 12."""
    found = quiet = 0
    for seed in range(12):
        spans = incident_spans(fault="network", service="catalog", magnitude=0.5, asynchronous=("catalog",),
                               random_state=seed)
        result = Diagnosis(at=_at(spans)).fit(spans).result_
        onset_error_s = (result.onset.time_ns - _at(spans, ONSET_S)) / 1e9
        found += (result.onset.series == "gap of frontend -> catalog" and abs(onset_error_s) <= 10
                  and result.services[0].service == "catalog")
        healthy = incident_spans(fault=None, asynchronous=("catalog",), random_state=seed)
        try:
            quiet += Diagnosis(at=_at(healthy)).fit(healthy).result_.verdict != "named"
        except EmptyDataError:
            quiet += 1
    assert found >= 11 and quiet >= 11


def test_a_slowdown_of_the_whole_host_is_no_service_s_evidence():
    """From the onset the whole host is 30% slower (every own time and gap), and cart returns early
    in 30% of its spans, 12 seeds: cart comes first on >= 11; with the host slowdown alone, nobody
    is named on >= 11. Measured: 12 and 12 with the common slowdown taken out of the time tests
    (:func:`~tracesleuth.analyses.diagnose.evidence.common_slowdown`); without it, cart first on 0:
    every service's own time rose 30% and outweighed the calls it stopped making."""
    first = quiet = 0
    for seed in range(12):
        spans = incident_spans(fault="early-return", service="cart", magnitude=0.3, host_slowdown=0.3,
                               random_state=seed)
        result = Diagnosis(at=_at(spans)).fit(spans).result_
        first += result.services[0].service == "cart"
        common = [n.slowdown for n in result.notes if n.kind == "common_slowdown"]
        assert len(common) == 1 and 0.2 <= common[0] <= 0.4  # the host's 30%, said in a note
        healthy = incident_spans(fault=None, host_slowdown=0.3, random_state=seed)
        try:
            quiet += Diagnosis(at=_at(healthy)).fit(healthy).result_.verdict != "named"
        except EmptyDataError:
            quiet += 1
    assert first >= 11 and quiet >= 11


def test_a_weak_onset_is_a_lead_never_a_named_culprit():
    """A slow-down too weak to pass once every series is counted (db's own time +25%, 98 requests in
    490 s, the moment at the store's end: nothing after it to read), 20 seeds: the clearest single
    change is taken as a weak onset, and then nobody is named. Measured: an onset significant with
    all the series counted on 4 of 20 seeds, a weak one on 6 more, all 6 with db first; no weak onset
    named anyone. With the store going on for 110 s after the moment (120 requests in 600 s), the
    onset search reads them too: significant on 14 of 20, db named on 8, nobody else named."""
    strict = weak = weak_first = 0
    for seed in range(20):
        spans = incident_spans(fault="delay", service="db", magnitude=0.25, n_requests=98, duration_s=490.0,
                               random_state=seed)
        try:
            result = Diagnosis(at=_at(spans, ONSET_S + 90)).fit(spans).result_
        except EmptyDataError as exc:
            assert "No change in the store between" in str(exc)
            continue
        if result.onset.significant:
            strict += 1
            continue
        weak += 1
        weak_first += result.services[0].service == "db"
        assert result.verdict != "named" and result.onset.p_value <= 0.01
        assert "Onset uncertain" in result.describe()
    assert strict <= 6 and weak >= 5 and weak_first >= 4
    significant = named = 0
    for seed in range(20):
        spans = incident_spans(fault="delay", service="db", magnitude=0.25, n_requests=120, random_state=seed)
        try:
            result = Diagnosis(at=_at(spans, ONSET_S + 90)).fit(spans).result_
        except EmptyDataError:
            continue
        significant += result.onset.significant
        if result.verdict == "named":
            named += 1
            assert result.services[0].service == "db"
    assert significant >= 10 and named >= 5


def test_an_early_return_that_skips_the_services_own_operations_points_at_it():
    """An early return in a service whose downstream work is its own operations (db's spans relabelled
    as cart's: a query, not a call into another service), 8 seeds: the calls it stopped making are its
    own, and cart comes first on >= 7 (measured 8; with the edges into other services only, 2)."""
    first = 0
    for seed in SEEDS:
        spans = pl.from_arrow(incident_spans(fault="early-return", service="cart", magnitude=0.6, random_state=seed))
        spans = spans.with_columns(pl.when(pl.col("service") == "db").then(pl.lit("cart"))
                                   .otherwise(pl.col("service")).alias("service"))
        result = Diagnosis(at=_at(spans.to_arrow())).fit(spans.to_arrow()).result_
        first += result.services[0].service == "cart"
        dropped = [e for e in result.services[0].evidence if e.family == "calls_dropped"]
        assert result.services[0].service != "cart" or any(e.item.startswith("cart -> cart:") for e in dropped)
    assert first >= 7


def _two_stretches(seed: int):
    """Two healthy 300 s stretches of traffic 2 minutes apart, with a log record for every span of
    the first only (a store whose logs were kept for part of the day); and a moment in the second."""
    stretches = []
    for k in (0, 1):
        spans = pl.from_arrow(incident_spans(fault=None, n_requests=600, duration_s=300.0,
                                             random_state=seed * 2 + k))
        shift = pl.lit(k * 420 * 10**9, pl.Int64)
        ids = [(f"{k}" + pl.col(c).str.slice(1)).alias(c) for c in ("trace_id", "span_id", "parent_span_id")]
        stretches.append(spans.with_columns(*ids, pl.col("start_ns") + shift, pl.col("end_ns") + shift))
    spans = pl.concat(stretches)
    logs = stretches[0].select(pl.col("start_ns").alias("time_ns"), "span_id", "service",
                               pl.lit(9, pl.Int32).alias("severity_number"), pl.lit(1, pl.Int64).alias("template_id"))
    return spans.to_arrow(), logs, int(stretches[1]["start_ns"].min()) + 250 * 10**9


def test_log_series_are_missing_where_no_log_was_collected():
    """The store's logs stop at a break in the traffic: the log series are left out after it (not
    read as every service falling silent, an onset at p ~ 1e-240 without the rule), so no onset is
    found in the healthy stretches, on >= 7 of 8 seeds; the log-free stretch is not among the logged
    ranges."""
    from tracesleuth.analyses.diagnose.telemetry import Telemetry
    from tracesleuth.analyses.diagnose.timeline import _logged_ranges

    quiet = 0
    for seed in SEEDS:
        spans, logs, at = _two_stretches(seed)
        telemetry = Telemetry.from_tables(spans, logs)
        ranges = _logged_ranges(telemetry.requests, 0.01)
        assert ranges is not None and len(ranges) == 1 and ranges[0][1] < at - 250 * 10**9
        try:
            onset = Diagnosis(at=at).fit(telemetry).result_.onset
            quiet += "log" not in onset.series
        except EmptyDataError as exc:
            assert "No change in the store between" in str(exc)
            quiet += 1
    assert quiet >= 7


def _recorded_windows(seed: int) -> np.ndarray:
    """Request starts (ns) of 10 recorded windows of 5 min at 1.5 requests/s, 30 min apart, the
    5th silent for 45 s."""
    rng = np.random.default_rng(seed)
    windows = []
    for w in range(10):
        start = w * 1800.0
        times = start + np.cumsum(rng.exponential(1 / 1.5, 600))
        times = times[times < start + 300]
        windows.append(times[(times < start + 120) | (times >= start + 165)] if w == 4 else times)
    return (np.concatenate(windows) * 1e9).astype(np.int64)


def test_stretches_of_traffic_do_not_depend_on_how_much_is_read():
    """The break rule's rate is the traffic's within its stretches: the stretches of one window
    read alone (with 10 min either side) are those of the whole day read, and the 45 s silence is
    a break in both, on every one of 20 seeds (with the rate over the whole span, the day's breaks
    diluted it to 0.2 requests/s and the silence was a break only in the window read alone); on
    Poisson traffic without a break, no break on >= 19 of 20 seeds (level 0.01)."""
    from tracesleuth.analyses.diagnose.timeline import blocks

    same = quiet = 0
    for seed in range(20):
        starts = _recorded_windows(seed)
        low, high = 4 * 1800 * 10**9 - 600 * 10**9, 4 * 1800 * 10**9 + 900 * 10**9
        part = starts[(starts >= low) & (starts < high)]
        read_alone = [(int(part[a]), int(part[b - 1])) for a, b in blocks(part, 0.01)]
        in_day = [(int(starts[a]), int(starts[b - 1])) for a, b in blocks(starts, 0.01)
                  if low <= starts[a] and starts[b - 1] < high]
        same += read_alone == in_day and len(read_alone) == 2
        poisson = np.cumsum(np.random.default_rng(100 + seed).exponential(1 / 1.5, 2000)) * 1e9
        quiet += len(blocks(poisson.astype(np.int64), 0.01)) == 1
    assert same == 20 and quiet >= 19


def _earlier_incident(seed: int):
    """Two 300 s stretches of traffic 2 minutes apart: in the first, db's own time grows by 20%
    from 150 s on (an earlier incident the requests' latency barely shows); in the second, cart's
    doubles from 60 s on. Returns the spans, the first start and a moment in the second incident."""
    stretches = []
    for k, (service, magnitude, onset_s) in enumerate((("db", 0.2, 150.0), ("cart", 1.0, 60.0))):
        spans = pl.from_arrow(incident_spans(fault="delay", service=service, magnitude=magnitude, n_requests=600,
                                             duration_s=300.0, onset_s=onset_s, random_state=seed * 2 + k))
        shift = pl.lit(k * 420 * 10**9, pl.Int64)
        ids = [(f"{k}" + pl.col(c).str.slice(1)).alias(c) for c in ("trace_id", "span_id", "parent_span_id")]
        stretches.append(spans.with_columns(*ids, pl.col("start_ns") + shift, pl.col("end_ns") + shift))
    spans = pl.concat(stretches)
    first = int(spans["start_ns"].min())
    return spans.to_arrow(), first, first + 570 * 10**9


def test_the_baseline_leaves_out_an_earlier_incident_seen_in_one_service():
    """The baseline needs the first stretch too, and takes it only up to db's change (within 10 s), on
    >= 7 of 8 seeds: its stretches are tested in every series the onset is searched in (with the
    requests' series alone, 4 of 8)."""
    clean = 0
    for seed in SEEDS:
        spans, first, at = _earlier_incident(seed)
        baseline = Diagnosis(at=at).fit(spans).result_.baseline
        in_first = [high for _, high in baseline.ranges if high < first + 400 * 10**9]
        clean += max(in_first, default=first) <= first + 160 * 10**9
    assert clean >= 7


@pytest.mark.parametrize("earlier, second", [
    ({"fault": "delay", "service": "db"}, "catalog"),
    ({"fault": "network", "service": "catalog", "asynchronous": ("catalog",)}, "cart"),
], ids=["own time", "gap into an asynchronous callee"])
def test_the_baseline_stops_at_an_earlier_change_in_the_same_stretch(earlier, second):
    """An earlier fault from 150 s that stays (db's own time x1.5; or a network delay into catalog,
    which frontend calls asynchronously, so that only the gap frontend -> catalog shows it); a second
    service fails half its spans from 400 s; the moment is 500 s. The onset is the second's errors, and
    the baseline is the traffic before the earlier change (ends within 10 s of it), not after it, on
    >= 7 of 8 seeds. Measured 8 of 8 each; taking the stretch after its last change, 0 of 8 for db's
    (the baseline held db's incident); without the edges' gaps in the baseline's families, 0 of 8 for
    the network delay (the baseline ran to 400 s)."""
    clean = 0
    for seed in SEEDS:
        spans = pl.from_arrow(incident_spans(**earlier, magnitude=0.5, onset_s=150.0, random_state=seed))
        first = int(spans["start_ns"].min())
        coin = pl.Series(np.random.default_rng(seed).random(spans.height) < 0.5)
        fails = (pl.col("service") == second) & (pl.col("kind") == "server") & (
            pl.col("start_ns") >= first + 400 * 10**9) & coin
        spans = spans.with_columns(status=pl.when(fails).then(pl.lit("error")).otherwise(pl.col("status")))
        result = Diagnosis(at=first + 500 * 10**9).fit(spans.to_arrow()).result_
        clean += second in result.onset.series and max(h for _, h in result.baseline.ranges) <= first + 160 * 10**9
    assert clean >= 7


def test_result_answers_every_question_and_is_json():
    spans = incident_spans(fault="delay", service="cart", random_state=3)
    est = Diagnosis(at=_at(spans))
    result = est.fit(spans).result_
    doc = json.loads(json.dumps(result.to_dict()))
    assert {"verdict", "services", "onset", "baseline", "problem", "notes"} <= set(doc)
    top = doc["services"][0]
    assert top["service"] == "cart" and 0 <= top["confidence"] <= 1 and top["instances"] == ["cart-0"]
    assert "cart handler" in top["operations"] and top["evidence"][0]["family"] == "self_time"
    assert {n["kind"] for n in doc["notes"]} >= {"onset", "problem", "baseline", "verdict"}
    assert [n for n in doc["notes"] if n["kind"] == "no_logs"]  # no logs
    (verdict,) = [n for n in doc["notes"] if n["kind"] == "verdict"]
    assert (verdict["verdict"], verdict["service"]) == (doc["verdict"], "cart") and verdict["text"] == verdict["words"]
    (problem,) = [n for n in doc["notes"] if n["kind"] == "problem"]
    assert (problem["start_ns"], problem["n_requests"]) == (doc["problem"]["start_ns"], doc["problem"]["requests"])
    assert result.to_frame()["service"][0] == "cart" and result.describe().startswith("cart")
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "result_")


def test_bad_input_and_settings():
    spans = incident_spans(fault="delay", random_state=4)
    with pytest.raises(EmptyDataError, match="outside the store, which holds requests from"):
        Diagnosis(at=1).fit(spans)
    with pytest.raises(ParameterError, match="'level' parameter"):
        Diagnosis(level=2.0).fit(spans)
    start = int(spans["start_ns"][0].as_py())
    given = Diagnosis(time=(start + int(400e9), start + int(600e9)),
                      baseline_time=(start, start + int(390e9))).fit(spans).result_
    assert given.onset is None and given.services[0].service == "cart"


@pytest.fixture(scope="module")
def incident_store(tmp_path_factory):
    base = tmp_path_factory.mktemp("diagnose")
    pq.write_table(incident_spans(fault="exception", service="db", random_state=5), base / "spans.parquet")
    assert main(["ingest", str(base / "spans.parquet"), "-o", str(base / "store")]) == 0
    return base / "store"


def test_cli_diagnose(incident_store, capsys):
    capsys.readouterr()
    assert main(["diagnose", str(incident_store), "--at", "2026-01-01T00:07:30", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "named" and doc["services"][0]["service"] == "db"
    assert main(["diagnose", str(incident_store), "--at", "2026-01-01T00:07:30"]) == 0
    assert "db (confidence" in capsys.readouterr().out


@pytest.mark.parametrize("args,message", [
    (["--at", "2020-01-01T00:00"], "outside the store"),
    (["--at", "noon"], "neither an ISO 8601 time"),
    (["--at", "2026-01-01T00:07:30", "--time", "2026-01-01T00:06/2026-01-01T00:08"], "not both"),
])
def test_cli_mistakes_are_one_line_and_exit_2(incident_store, capsys, args, message):
    assert main(["diagnose", str(incident_store), *args]) == 2
    text = capsys.readouterr().err
    assert message in text and "Traceback" not in text


def test_cli_not_a_store(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path)]) == 2
    assert "not a span store" in capsys.readouterr().err


@pytest.mark.slow
def test_recorded_onlineboutique_faults(shared_data, tmp_path, monkeypatch):
    """OnlineBoutique's 7 recorded faults, told only inject + 90 s: measured 7 of 7 first; floor 6."""
    from tracesleuth.evaluation.protocols.diagnose import evaluate

    monkeypatch.setenv("TRACESLEUTH_CACHE", str(tmp_path))
    ev = evaluate(quick=True, data_dir=shared_data / "nezha")
    assert ev.counts["recorded faults"] == 7 and ev.scores["top1"] >= 6 / 7
    assert ev.scores["onset_within_30s"] >= 5 / 7


def test_report_section_opens_with_the_answer():
    from tracesleuth.report.sections.diagnose import build_sections
    from tracesleuth.report import Report

    spans = incident_spans(fault="network", service="catalog", random_state=6)
    fitted = Diagnosis(at=_at(spans)).fit(spans)
    sections = build_sections(fitted)
    assert [s.anchor for s in sections] == ["diagnosis"]
    html = Report("t", sections=sections).to_html()
    assert "catalog (confidence" in html and "Suspects, most suspicious first" in html


def test_analyze_at_opens_the_report_with_the_diagnosis(incident_store, tmp_path, capsys):
    capsys.readouterr()
    report = tmp_path / "r.html"
    assert main(["analyze", str(incident_store), "--at", "2026-01-01T00:07:30", "--only", "compare", "-o", str(report),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["diagnosis"]["services"][0]["service"] == "db" and "compare" in doc["analyses"]
    (row,) = doc["agreement"]
    first = next((s["service"] for s in doc["analyses"]["compare"]["services"]), None)
    assert row["analysis"] == "compare" and row["first"] == first and row["agrees"] == (first == "db")
    html = report.read_text()
    assert html.index('id="diagnosis"') < html.index('id="agreement"') < html.index('id="what-changed"')
    # the diagnosis analyze opens with is diagnose's: the same part of the store read, the same answer
    assert main(["diagnose", str(incident_store), "--at", "2026-01-01T00:07:30", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == doc["diagnosis"]
    assert main(["analyze", str(incident_store), "--at", "2031-01-01T00:00:00", "--only", "compare"]) == 2
    assert "is outside the store, which holds spans from" in capsys.readouterr().err


def test_agreement_says_where_another_analysis_first_service_stands():
    from types import SimpleNamespace as NS

    from tracesleuth.report.sections.diagnose import agreement

    diagnosis = NS(services=(NS(service="db", confidence=0.8), NS(service="cart", confidence=0.1)))
    rows = agreement(diagnosis, {"compare": NS(services=(NS(service="cart"),)), "localize": NS(services=()),
                                 "paths": NS(patterns=()), "same": NS(services=(NS(service="db"),)),
                                 "unseen": NS(services=(NS(service="web"),))})
    by = {r["analysis"]: r for r in rows}
    assert set(by) == {"compare", "localize", "same", "unseen"}  # no ranking of services: left out
    assert (by["compare"]["agrees"], by["compare"]["diagnosis_rank"], by["compare"]["diagnosis_confidence"]) == \
        (False, 2, 0.1)
    assert by["same"]["agrees"] and by["localize"]["first"] is None and by["unseen"]["diagnosis_rank"] is None


def test_stratified_rates_ignore_a_change_of_the_request_mix():
    from tracesleuth.analyses.diagnose.evidence import stratified_rate_p_values

    # Endpoint 0 calls the item once per request, endpoint 1 never; the problem period has 4x as many
    # requests of endpoint 0. Per request overall the item rose; per endpoint it did not.
    p_mix = stratified_rate_p_values([400, 0], [400, 100], [100, 0], [100, 400], [0, 0], "greater")
    assert p_mix[0] > 0.3
    p_rose = stratified_rate_p_values([200, 0], [100, 100], [100, 0], [100, 100], [0, 0], "greater")
    assert p_rose[0] < 1e-6
    # A stratum seen in one period only carries no information.
    assert stratified_rate_p_values([50], [100], [0], [0], [0], "greater")[0] == 1.0


@pytest.mark.slow
def test_fit_writes_a_model_with_a_chosen_penalty_and_a_held_out_calibration(shared_data, tmp_path, monkeypatch):
    """``evaluate diagnose --fit``: the model written loads, its penalty is one of the grid, and the
    calibration is also given held out, over the recorded faults."""
    from tracesleuth.analyses.diagnose import load_model
    from tracesleuth.analyses.diagnose.ranking import PENALTIES
    from tracesleuth.evaluation.protocols.diagnose import evaluate

    monkeypatch.setenv("TRACESLEUTH_CACHE", str(tmp_path))
    ev = evaluate(quick=True, data_dir=shared_data / "nezha", fit=tmp_path / "model.json")
    model = load_model(tmp_path / "model.json")
    assert model.extra["penalty"] in PENALTIES and "leave-one-out" in model.fitted_on
    assert 0.0 <= model.contamination <= 0.5
    held_out = [c for c in ev.calibration if c.get("held_out")]
    assert sum(c["cases"] for c in held_out) == ev.counts["recorded faults"]
    assert 0.0 <= ev.scores["held_out_top1"] <= 1.0 and "held out" in ev.describe()


def test_ranking_model_learns_which_family_points_at_the_culprit():
    from tracesleuth.analyses.diagnose import FAMILIES, fit_ranking_model

    rng = np.random.default_rng(0)
    cases = []
    for _ in range(60):
        x = rng.uniform(0, 2, (5, len(FAMILIES)))
        truth = int(rng.integers(5))
        x[truth, FAMILIES.index("error_logs")] += 6
        cases.append((x, truth))
    cases += [(rng.uniform(0, 1, (5, len(FAMILIES))), None) for _ in range(20)]
    model = fit_ranking_model(cases)
    assert model.coefficients["error_logs"] == max(model.coefficients.values())
    p = model.probabilities(cases[0][0])
    assert 0 < p.sum() < 1 and int(np.argmax(p)) == cases[0][1]


def test_ranking_likelihood_gradient_is_the_likelihoods():
    """The analytic gradient of the conditional logit's likelihood matches finite differences, and the
    likelihood is the per-case sum it stands for (cases without a service included)."""
    from scipy.special import logsumexp

    from tracesleuth.analyses.diagnose import FAMILIES
    from tracesleuth.analyses.diagnose.ranking import _negative_log_likelihood, _stack

    rng = np.random.default_rng(3)
    cases = [(rng.normal(0, 1, (int(rng.integers(0, 6)), len(FAMILIES))), None) for _ in range(10)]
    cases = [(x, int(rng.integers(len(x))) if len(x) and k % 3 else None) for k, (x, _) in enumerate(cases)]
    theta = rng.normal(0, 1, len(FAMILIES) + 1)
    value, gradient = _negative_log_likelihood(theta, *_stack(cases))
    expected = -sum((theta[-1] if t is None else (x @ theta[:-1])[t]) - logsumexp(np.append(x @ theta[:-1], theta[-1]))
                    for x, t in cases)
    assert value == pytest.approx(expected)
    step = 1e-6
    numeric = [(_negative_log_likelihood(theta + step * e, *_stack(cases))[0] - value) / step
               for e in np.eye(theta.size)]
    assert np.allclose(numeric, gradient, atol=1e-4)


def test_the_penalty_chosen_grows_when_the_evidence_is_noise():
    """Leave-one-out log-likelihood picks the L2 penalty: where the features say nothing of the
    culprit, 3 or 10 on >= 7 of 8 seeds; where one family points at it, 1 or less on >= 7 of 8
    (measured: 8 and 8)."""
    from tracesleuth.analyses.diagnose import FAMILIES
    from tracesleuth.analyses.diagnose.ranking import choose_penalty

    noise = signal = 0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        cases = [(rng.uniform(0, 2, (4, len(FAMILIES))), int(rng.integers(4))) for _ in range(30)]
        noise += choose_penalty(cases)[0] >= 3
        for x, truth in cases:
            x[truth, FAMILIES.index("error_logs")] += 1.0
        signal += choose_penalty(cases)[0] <= 1
    assert noise >= 7 and signal >= 7


def test_the_contamination_is_how_often_held_out_evidence_misled():
    """``epsilon`` (ranking module docstring) is the maximum-likelihood mixing weight of the
    leave-one-out predictions: 0 where the evidence always points at the culprit; about the share of
    cases whose evidence points at another service (here 20%, beside clean cases always fitted on,
    as the seeded incidents are), on >= 7 of 8 seeds each (measured: 8 of 8; epsilon 0.10 to 0.30);
    and the confidences of a contaminated model are mixed with the uniform."""
    from tracesleuth.analyses.diagnose import FAMILIES
    from tracesleuth.analyses.diagnose.ranking import choose_penalty, fit_ranking_model

    def make(rng, n, misleading):
        cases = []
        for _ in range(n):
            x = rng.uniform(0, 1, (6, len(FAMILIES)))
            truth = int(rng.integers(6))
            x[truth, FAMILIES.index("error_logs")] += 6
            if rng.random() < misleading:
                truth = int((truth + rng.integers(1, 6)) % 6)
            cases.append((x, truth))
        return cases

    clean = contaminated = 0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        always = make(rng, 60, 0.0)
        clean += choose_penalty(make(rng, 30, 0.0), always)[1] <= 0.02
        contaminated += 0.05 <= choose_penalty(make(rng, 30, 0.2), always)[1] <= 0.4
    assert clean >= 7 and contaminated >= 7
    cases = make(np.random.default_rng(0), 30, 0.0)
    sharp = fit_ranking_model(cases, penalty=0.1)
    mixed = fit_ranking_model(cases, penalty=0.1, contamination=0.2)
    x = cases[0][0]
    assert np.allclose(mixed.probabilities(x), 0.8 * sharp.probabilities(x) + 0.2 / 7)


def test_reference_rules():
    from tracesleuth.analyses.diagnose import Telemetry
    from tracesleuth.analyses.diagnose.references import log_rule, reference_periods, time_rule

    spans = incident_spans(fault="network", service="catalog", random_state=7)
    telemetry = Telemetry.from_tables(spans)
    problem, baseline = (telemetry.during(p) for p in reference_periods(_at(spans)))
    assert time_rule(problem, baseline)[0] == "catalog"
    assert log_rule(problem, baseline) == []  # no log records


def _propagated_error_logs(seed: int, culprit: str, share: float = 0.3):
    """A healthy shop whose ``culprit`` starts, at the onset, to log an ERROR in a share of its
    requests (a code fault its spans do not show), and every service above it in those traces logs
    an ERROR too (the error on its way up); an INFO record on every server span throughout."""
    from tracesleuth.analyses.diagnose.synthetic import SERVICES

    callers, frontier = set(), {culprit}
    while frontier:
        frontier = {s for s, (_, callees) in SERVICES.items() if frontier & set(callees)} - callers
        callers |= frontier
    spans = pl.from_arrow(incident_spans(fault=None, random_state=seed))
    # span ids unique in the store (the seeded ones repeat across traces; logs name a span by id only)
    spans = spans.with_columns(*[(pl.col("trace_id").str.slice(16) + pl.col(c)).alias(c)
                                 for c in ("span_id", "parent_span_id")])
    servers = spans.filter(pl.col("kind") == "server")
    onset = int(spans["start_ns"][0]) + int(ONSET_S * 1e9)
    rng = np.random.default_rng(seed)
    traces = servers.filter((pl.col("service") == culprit) & (pl.col("start_ns") >= onset))["trace_id"]
    failing = traces.filter(pl.Series(rng.random(traces.len()) < share))
    error = servers.filter(pl.col("trace_id").is_in(failing.implode())
                           & pl.col("service").is_in(sorted(callers | {culprit})))

    def records(frame, severity, template):
        return frame.select(pl.col("start_ns").alias("time_ns"), "span_id", "service",
                            pl.lit(severity, pl.Int32).alias("severity_number"),
                            pl.lit(template, pl.Int64).alias("template_id"))
    logs = pl.concat([records(servers, 9, 1), records(error, 17, 2)]).sort("time_ns")
    return spans.to_arrow(), logs, _at(spans.to_arrow()), callers


@pytest.mark.parametrize("culprit", ["db", "catalog"])
def test_error_logs_count_at_their_origin(culprit):
    """An error logged by the culprit and by every caller above it (issue 28's TrainTicket faults:
    ts-basic-service returns early, ts-travel2-service, which calls it, logs errors too): only the
    deepest records of a trace count, so the error-log evidence names the culprit alone, on every
    one of 8 seeds, and the diagnosis names it first on >= 7 of 8. With every span's records
    counted (before the rule) the callers' rise is as significant as the culprit's (p < 1e-10 for
    all): ``db`` came first on 0 of 8 seeds, ``catalog`` only by the tie-break with its caller."""
    from tracesleuth.analyses.diagnose.telemetry import Telemetry

    first = 0
    for seed in SEEDS:
        spans, logs, at, callers = _propagated_error_logs(seed, culprit)
        telemetry = Telemetry.from_tables(spans, logs)
        origins = telemetry.spans.filter(pl.col("error_log_origin"))
        assert set(origins["service"]) == {culprit}
        assert telemetry.spans.filter(pl.col("error_logs") > 0)["service"].unique().len() == len(callers) + 1
        fitted = Diagnosis(at=at).fit(telemetry)
        assert {e.service for e in fitted.evidence_ if e.family == "error_logs" and e.weight > 2} == {culprit}
        first += fitted.result_.services[0].service == culprit
    assert first >= 7


def test_log_evidence_needs_log_records_in_both_periods():
    """Log records whose collection stopped before the onset (a store holding logs for part of the
    day, as the recorded TrainTicket day's end at 10:00:08): no log family is weighed, a note says
    which period holds none, and nobody is named, on 8 of 8 seeds (before the rule, every template
    of the baseline "stopped" at once: log-template evidence on 8 of 8)."""
    from tracesleuth.analyses.diagnose.telemetry import Telemetry

    for seed in SEEDS:
        spans, logs, at, _ = _propagated_error_logs(seed, "db", share=0.0)
        stop = int(pl.from_arrow(spans)["start_ns"].min()) + int((ONSET_S - 60) * 1e9)
        fitted = Diagnosis(at=at).fit(Telemetry.from_tables(spans, logs.filter(pl.col("time_ns") < stop)))
        assert not {e.family for e in fitted.evidence_} & {"error_logs", "log_templates"}
        assert [n.period for n in fitted.result_.notes if n.kind == "no_logs"] == ["problem"]
        assert fitted.result_.verdict != "named"
    assert "holds no log record" in fitted.result_.describe()


def test_error_log_origin_is_a_traces_own():
    """Built from partitions of whole traces (as ``--scheduler`` does), the error-log origins are
    those of all the spans at once."""
    from tracesleuth.analyses.diagnose.telemetry import SPAN_ORDER, REQUEST_ORDER, Telemetry, trace_frames

    spans, logs, _, _ = _propagated_error_logs(0, "db")
    spans = pl.from_arrow(spans)
    whole = Telemetry.from_tables(spans.to_arrow(), logs)
    parts = [trace_frames(spans.filter(pl.col("trace_id").str.slice(-1).is_in(list(digits))).to_arrow())
             for digits in ("0123456", "789abcdef")]
    pieced = Telemetry.from_frames(pl.concat([p[0] for p in parts]).sort(SPAN_ORDER),
                                   pl.concat([p[1] for p in parts]).sort(REQUEST_ORDER), logs)
    assert pieced.spans.equals(whole.spans)
    assert whole.spans["error_log_origin"].sum() > 0


def _incident_across_a_break(seed: int, cut: bool):
    """cart's own time doubles from 400 s of 600 s; with ``cut``, the requests that start in
    [450, 570) s are left out (a collector that was down). Returns the spans and a moment at 590 s."""
    spans = pl.from_arrow(incident_spans(fault="delay", service="cart", n_requests=1200, random_state=seed))
    first = int(spans["start_ns"].min())
    if cut:
        request_start = pl.col("start_ns").min().over("trace_id") - first
        spans = spans.filter(~request_start.is_between(450 * 10**9, 570 * 10**9, closed="left"))
    return spans.to_arrow(), first


def test_an_onset_before_a_break_says_the_incident_was_under_way_when_traffic_resumed():
    """An incident that began before a break in the traffic and goes on after it: the onset is the
    change before the break (within 10 s; measured 8 of 8) and names the break (within 5 s of the
    cut; measured 7: seed 5's latest break is a 6 s silence at 578 s, 2 requests/s, a break by the
    rule's own level), floors 7 of 8; cart is first on >= 7 (measured 8); the same traffic without
    the cut names no break on >= 7 (measured 7, seed 5's silence). The note says the store cannot
    tell when in the break it began."""
    named = found = first = quiet = 0
    for seed in SEEDS:
        spans, start = _incident_across_a_break(seed, cut=True)
        result = Diagnosis(at=start + 590 * 10**9).fit(spans).result_
        brk = result.onset.break_ns
        found += abs((result.onset.time_ns - start) / 1e9 - ONSET_S) <= 10
        named += (brk is not None and abs((brk[0] - start) / 1e9 - 450) <= 5
                  and abs((brk[1] - start) / 1e9 - 570) <= 5)
        first += result.services[0].service == "cart"
        note = next(n for n in result.notes if n.kind == "onset")
        assert brk is None or ("broke off" in note.describe() and result.to_dict()["onset"]["break"]["to_ns"] == brk[1])
        unbroken, start = _incident_across_a_break(seed, cut=False)
        quiet += Diagnosis(at=start + 590 * 10**9).fit(unbroken).result_.onset.break_ns is None
    assert named >= 7 and found >= 7 and first >= 7 and quiet >= 7, (named, found, first, quiet)


def _timed_out_call(child_start_ms: float, child_ms: float, child_status: str = "unset"):
    """web -> (client span, 100 ms, failed) -> db (server span); times in ms from 0."""
    import pyarrow as pa

    from tracesleuth import schema as S
    from tracesleuth.analyses.diagnose.synthetic import _row

    ms = 10**6
    rows = [_row("t1", "a", None, "web", "GET /", "server", 0, 120 * ms),
            _row("t1", "b", "a", "web", "call db", "client", 10 * ms, 110 * ms),
            _row("t1", "c", "b", "db", "query", "server", int(child_start_ms * ms),
                 int((child_start_ms + child_ms) * ms))]
    rows[1]["status"] = rows[0]["status"] = "error"
    rows[2]["status"] = child_status
    return pa.Table.from_pydict({name: [r.get(name) for r in rows] for name in S.SPAN_SCHEMA.names},
                                schema=S.SPAN_SCHEMA)


@pytest.mark.parametrize("child_start_ms,child_ms,child_status,origin", [
    (12, 400, "unset", "db"),     # the call gave up after 100 ms while db ran 400 ms: a timeout
    (12, 50, "unset", "web"),     # db answered within the call: the caller's own error
    (-500, 50, "unset", "web"),   # db's clock 500 ms behind: not a timeout
    (300, 60, "unset", "web"),    # db's clock ahead, its end after the call's, but it lasted less
    (12, 400, "error", "db"),     # db failed itself: the ordinary origin
])
def test_a_timed_out_call_points_at_the_callee_that_outlived_it(child_start_ms, child_ms, child_status, origin):
    """A failed call whose callee's span, not failed, lasted longer than the call gave up waiting: the
    callee is the error's origin, the caller's client span is not. Durations decide, not end times,
    so a callee's clock skew cannot make a timeout."""
    from tracesleuth.analyses.diagnose.telemetry import Telemetry

    spans = Telemetry.from_tables(_timed_out_call(child_start_ms, child_ms, child_status)).spans
    assert spans.filter(pl.col("origin"))["service"].to_list() == [origin]


def test_an_unanswered_call_counts_against_the_service_its_answered_calls_went_to():
    """A client span that failed with no child (a refused connection, a callee down), or a producer
    span with no child (a message never consumed), stands for the span of the service its
    operation's answered calls to the same peer (``server.address``) all went to: the error, the
    time (a gap on that edge) and the call are that service's. A call never answered, or answered
    by two services from one peer, and a failed span of another kind stay their own service's. The
    caller's error-level records above an unanswered call are not an error-log origin."""
    import pyarrow as pa

    from tracesleuth import schema as S
    from tracesleuth.analyses.diagnose.synthetic import _row
    from tracesleuth.analyses.diagnose.telemetry import Telemetry

    ms = 10**6
    rows = []

    def call(trace, operation, callee, status="unset", kind="client", peer=None):
        rows.append(_row(trace, f"{trace}a", None, "web", "GET /", "server", 0, 50 * ms))
        rows.append(_row(trace, f"{trace}b", f"{trace}a", "web", operation, kind, 10 * ms, 40 * ms))
        rows[-1]["status"] = status
        rows[-1]["attributes"] = [{"key": "server.address", "str": peer}] if peer else []
        if callee:
            rows.append(_row(trace, f"{trace}c", f"{trace}b", callee, "query", "server", 12 * ms, 38 * ms))

    call("t1", "call db", "db")
    call("t2", "call db", None, "error")           # refused: db's
    call("t3", "call cache", None, "error")        # never answered here: web's
    call("t4", "call any", "db")
    call("t5", "call any", "cache")
    call("t6", "call any", None, "error")          # answered by two services: web's
    call("t7", "call db", None, "error", "internal")   # not a client span: web's
    call("t8", "GET", "db", peer="db.local")
    call("t9", "GET", "cache", peer="cache.local")
    call("t10", "GET", None, "error", peer="cache.local")   # one name, told apart by the peer: cache's
    call("t11", "send", "worker", kind="producer")
    call("t12", "send", None, kind="producer")             # a message never consumed: worker's
    table = pa.Table.from_pydict({name: [r.get(name) for r in rows] for name in S.SPAN_SCHEMA.names},
                                 schema=S.SPAN_SCHEMA)
    # web logs an error on its server span above an answered call and above a refused one: the second
    # is the refused call's error on its way up, not an error-log origin.
    logs = pl.DataFrame({"time_ns": [45 * ms, 45 * ms], "span_id": ["t1a", "t2a"], "service": ["web", "web"],
                         "severity_number": [17, 17], "template_id": [1, 1]},
                        schema_overrides={"severity_number": pl.Int32})
    telemetry = Telemetry.from_tables(table, logs)
    assert telemetry.spans.filter(pl.col("error_log_origin"))["span_id"].to_list() == ["t1a"]
    spans = telemetry.spans.filter(pl.col("service") == "web", pl.col("operation") != "GET /")
    by_trace = {r["trace_id"]: r for r in spans.iter_rows(named=True)}
    assert by_trace["t2"]["subject"] == "db" and by_trace["t2"]["unanswered"] and by_trace["t2"]["origin"]
    assert by_trace["t2"]["callee"] == "db" and by_trace["t2"]["gap_ns"] == 30 * ms and by_trace["t2"]["own_ns"] == 0
    assert (by_trace["t10"]["subject"], by_trace["t12"]["subject"]) == ("cache", "worker")
    assert by_trace["t12"]["unanswered"] and not by_trace["t12"]["origin"]
    for trace in ("t3", "t6", "t7"):
        row = by_trace[trace]
        assert row["subject"] == "web" and not row["unanswered"] and row["own_ns"] == 30 * ms, row


def test_calls_made_at_once_cover_their_caller_once():
    """A span's own time (or gap) is its duration less the union of its children's intervals, the
    model's exclusive time: two calls made at once cover 0-80 ms of a 100 ms span, not 160 ms."""
    import pyarrow as pa

    from tracesleuth import schema as S
    from tracesleuth.analyses.diagnose.synthetic import _row
    from tracesleuth.analyses.diagnose.telemetry import trace_frames

    ms = 10**6
    rows = [_row("t1", "a", None, "web", "GET /", "server", 0, 100 * ms),
            _row("t1", "b", "a", "web", "call cart", "client", 10 * ms, 70 * ms),
            _row("t1", "c", "a", "web", "call items", "client", 10 * ms, 80 * ms),
            _row("t1", "d", "a", "web", "render", "internal", 60 * ms, 90 * ms),   # overlaps the calls' end
            _row("t1", "e", "b", "cart", "get", "server", 12 * ms, 68 * ms),
            _row("t1", "f", "c", "items", "get", "server", 15 * ms, 75 * ms)]
    spans, _ = trace_frames(pa.Table.from_pylist(rows, schema=S.SPAN_SCHEMA))
    own = dict(zip(spans["span_id"], spans["own_ns"] + spans["gap_ns"]))
    assert own == {"a": 20 * ms, "b": 4 * ms, "c": 10 * ms, "d": 30 * ms, "e": 56 * ms, "f": 60 * ms}


def test_a_callee_on_a_clock_ahead_is_put_back_in_its_call():
    """A server span recorded on another host's clock, outside the client span that called it, is
    centred in it (the model's clock-skew rule) before the gap is taken: the gap is the call's time
    outside the callee's span, not the whole call."""
    import pyarrow as pa

    from tracesleuth import schema as S
    from tracesleuth.analyses.diagnose.synthetic import _row
    from tracesleuth.analyses.diagnose.telemetry import trace_frames

    ms, ahead = 10**6, 200 * 10**6
    rows = [_row("t1", "a", None, "web", "GET /", "server", 0, 100 * ms),
            _row("t1", "b", "a", "web", "call cart", "client", 10 * ms, 90 * ms),
            _row("t1", "c", "b", "cart", "get", "server", 15 * ms + ahead, 85 * ms + ahead)]
    spans, _ = trace_frames(pa.Table.from_pylist(rows, schema=S.SPAN_SCHEMA))
    times = {r["span_id"]: (r["start_ns"], r["own_ns"], r["gap_ns"]) for r in spans.iter_rows(named=True)}
    assert times["c"] == (15 * ms, 70 * ms, 0) and times["b"][2] == 10 * ms and times["a"][1] == 20 * ms
