"""Durations: the unit constants, reading ``"350ms"`` and writing ``"350 ms"``, in one place.

Times are integer nanoseconds end to end (:mod:`tracesleuth.schema`); this module is where a
duration crosses to or from text or another unit:

* :data:`NS_PER_UNIT` (and :data:`NS_PER_US`, :data:`NS_PER_MS`, :data:`NS_PER_S`) - nanoseconds
  in each unit, for readers converting columns and for plots in milliseconds;
* :func:`parse_duration` - ``"350ms"``, ``"1.5 s"``, ``"200us"`` -> integer nanoseconds;
* :func:`format_duration_ns` - nanoseconds -> ``"350 ms"``, in the largest unit in which the
  value is at least 1;
* :func:`parse_instant`, :func:`parse_time_range` - a moment, a period as the user writes them
  (ISO 8601, UTC unless an offset is given; or Unix seconds) -> Unix epoch ns; :func:`utc_text`
  back to text.

The two round-trip to four significant digits: ``parse_duration(format_duration_ns(ns))``
equals ``ns`` within 5e-4 relative (spaces aside).

Standard library only: light enough for every process that imports it (the demo's services).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from .errors import ParameterError

__all__ = ["NS_PER_MS", "NS_PER_S", "NS_PER_UNIT", "NS_PER_US", "format_duration_ns", "parse_duration", "parse_instant",
           "parse_time_range", "utc_text"]

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
#: Nanoseconds per unit, by the unit's ASCII name.
NS_PER_UNIT = {"ns": 1, "us": NS_PER_US, "ms": NS_PER_MS, "s": NS_PER_S}

#: Units written by :func:`format_duration_ns`, largest first.
_FORMAT_UNITS = ((NS_PER_S, "s"), (NS_PER_MS, "ms"), (NS_PER_US, "µs"), (1, "ns"))
#: Units read by :func:`parse_duration`: the ASCII names, and microseconds also as ``µs``
#: (MICRO SIGN) and ``μs`` (GREEK SMALL LETTER MU).
_PARSE_UNITS = {**NS_PER_UNIT, "µs": NS_PER_US, "μs": NS_PER_US}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*(ns|us|µs|μs|ms|s)\s*$")


def parse_duration(text: str) -> int:
    """Parse ``"350ms"``, ``"1.5 s"``, ``"200us"``, ``"75000ns"`` into integer nanoseconds.

    Parameters
    ----------
    text : str
        A non-negative number (decimal, optionally with an exponent) and a unit: ``ns``, ``us``
        (or ``µs``, ``μs``), ``ms`` or ``s``; spaces around either are allowed.

    Returns
    -------
    int
        The duration in nanoseconds, rounded to the nearest integer.

    Raises
    ------
    ParameterError
        No unit, an unknown unit, a negative or malformed number, or not a string.

    See Also
    --------
    format_duration_ns : The other direction.

    Examples
    --------
    >>> parse_duration("350ms")
    350000000
    >>> parse_duration("1.5 s")
    1500000000
    """
    if not isinstance(text, str):
        raise ParameterError(f"A duration must be a string such as '350ms'. Got {text!r} instead.")
    match = _DURATION.match(text)
    if match is None:
        raise ParameterError(
            f"Cannot read duration {text!r}: expected a non-negative number followed by one of "
            "ns, us, ms, s (e.g. '350ms')."
        )
    number, exponent, unit = match.groups()
    value = float(number) * (10.0 ** int(exponent) if exponent else 1.0) * _PARSE_UNITS[unit]
    if not math.isfinite(value):
        raise ParameterError(f"Cannot read duration {text!r}: not a finite number.")
    return int(round(value))


def format_duration_ns(ns: float | int) -> str:
    """Render a duration in the largest unit in which it is at least 1 (ns, µs, ms, s).

    Parameters
    ----------
    ns : int or float
        Duration in nanoseconds.

    Returns
    -------
    str
        Four significant digits at most, e.g. ``"80 ms"``, ``"101.5 ms"``, ``"1.2 s"``, ``"750 ns"``.

    See Also
    --------
    parse_duration : The other direction.

    Examples
    --------
    >>> format_duration_ns(80_000_000)
    '80 ms'
    >>> format_duration_ns(1_234_567_890)
    '1.235 s'
    """
    value = float(ns)
    magnitude = abs(value)
    for factor, unit in _FORMAT_UNITS:
        if magnitude >= factor or factor == 1:
            return f"{value / factor:.4g} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def parse_instant(text: str, option: str) -> int:
    """One moment, ISO 8601 (UTC unless an offset is given) or Unix seconds -> Unix epoch ns.

    Raises
    ------
    ParameterError
        Naming ``option`` and what was given, when it is neither.
    """
    part = text.strip()
    try:
        return int(float(part) * 1e9)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(part)
    except ValueError:
        raise ParameterError(f"{option} {part!r} is neither an ISO 8601 time "
                             "(2023-01-29T08:40:00) nor Unix seconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1e9)


def parse_time_range(text: str, option: str) -> tuple[int, int]:
    """``"2023-01-29T08:40/2023-01-29T08:42"`` (ISO 8601, UTC unless an offset is given; or Unix
    seconds) -> ``(start_ns, end_ns)``, half-open.

    Raises
    ------
    ParameterError
        Naming ``option`` and what was given, when it is not ``START/END`` with START < END.
    """
    def instant(part: str) -> int:
        return parse_instant(part, f"{option} {text!r}:")

    start, sep, end = text.partition("/")
    if not sep:
        raise ParameterError(f"{option} {text!r}: write START/END, e.g. 2023-01-29T08:40/2023-01-29T08:42")
    low, high = instant(start), instant(end)
    if low >= high:
        raise ParameterError(f"{option} {text!r}: the start must come before the end")
    return low, high


def utc_text(time_ns: int) -> str:
    """``time_ns`` (Unix epoch ns) as ISO 8601 UTC to the second: ``2023-01-29T08:43:04Z``."""
    return datetime.fromtimestamp(time_ns // 10**9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
