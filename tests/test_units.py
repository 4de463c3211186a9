"""Durations read and written in one place (:mod:`tracesleuth.units`)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracesleuth import units
from tracesleuth.errors import ParameterError
from tracesleuth.units import NS_PER_MS, NS_PER_UNIT, format_duration_ns, parse_duration


def test_unit_constants():
    assert NS_PER_UNIT == {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
    assert NS_PER_MS == NS_PER_UNIT["ms"]


@pytest.mark.parametrize("text", ["200us", "200µs", "200μs", "0.2ms", "2e2 us", " 200000 ns "])
def test_every_spelling_of_microseconds(text):
    assert parse_duration(text) == 200 * units.NS_PER_US


def test_parse_rejects_a_number_without_unit():
    with pytest.raises(ParameterError, match="'350'"):
        parse_duration("350")


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=10**13))
def test_format_then_parse_round_trips_to_four_digits(ns):
    assert parse_duration(format_duration_ns(ns).replace(" ", "")) == pytest.approx(ns, rel=5e-4)


def test_the_patterns_package_re_exports_the_same_functions():
    from tracesleuth.analyses import patterns

    assert patterns.format_duration_ns is format_duration_ns and patterns.parse_duration is parse_duration
