"""When the incident began and what to compare it with: the onset, the problem period and the
baseline, found in the store's request series (Build 1 of issue 28).

* **Blocks.** A store can hold separate stretches of traffic (recorded windows, a collector that was
  down). A gap between consecutive requests is a break when a Poisson arrival process at the
  stretches' rate makes it implausible: ``n exp(-rate * gap) < level`` (Bonferroni over the ``n``
  gaps), so the rule follows the traffic instead of a fixed number of seconds. The rate is fitted to
  the gaps that are not breaks (:func:`blocks`), so the stretches do not depend on how much of the
  store is read (measured on the recorded faults: code faults with logs first 10 -> 11 of 12, every
  other score unchanged).
* **Onset.** The latest change, in the ``lookback_s`` before the moment the user gives, of the
  requests' series (:data:`SERIES`: log latency, errors, error-level records, spans and log records
  per request) and of each service's series (per request that reaches it, and per span of its own:
  a service few requests reach has more spans than requests), by
  :func:`.changepoints.latest_change` (Pettitt's test, all the series tested together by Tarone's
  modified Bonferroni procedure, :func:`.changepoints.tarone_level`: only the series that can reach
  significance share the level; measured on the recorded faults: an onset found for 30 of 35, Bonferroni
  over every series 28; on seeded delays at 0.5 requests/s 15 of 16, Bonferroni 7);
  latency and errors count only when they worsen, and are searched one-sided for a change for the
  worse (:func:`.changepoints.pettitt`). The latest change is the onset. (Measured on the
  TrainTicket faults: the per-span series raise the injected service into the top 3 from 5 to 12
  of 28.) The search runs across breaks in the traffic, the series joined over them: a change often
  comes with a break (a restart, a redeploy, a load that paused while a fault was switched on), and
  searching only after the last break found no change at all in the live shop's incidents whose
  fault came with a pause, and in 10 of the 35 recorded faults (onset found 25 -> 28 of 35, the
  injected service first 12 -> 14). The log series are read only in the stretches of traffic that
  hold a log record (:func:`_logged_ranges`): where none was collected they are missing, not zero
  (measured on the recorded faults: an onset found for 29 of 35, not 30: the one lost, the 10:04
  fault's, was the day's logs ending at 10:00:08; every other score unchanged).
* **Gaps.** When none of those series changes significantly, the onset is the latest change of the
  edges' gaps (the caller's exclusive time on each caller -> callee edge), tested together as a family
  of their own: a network delay into a service called asynchronously shows nowhere else
  (:func:`_onset_before`).
* **After the moment.** When neither family changes significantly up to the moment, both are
  searched again over the problem period that can follow it (up to ``max_problem_s`` after the
  moment, the data the diagnosis compares anyway), still for the latest change at or before the
  moment (:func:`.changepoints.latest_change`'s ``until``): a user who gives a moment early in an
  incident leaves little of it before that moment (measured on random shops, one slowed instance of
  two or three, the moment 50 s after the onset: the culprit first in 27 of 30, not 14, which had
  "no change in the store" 12 times; on the recorded faults, where it runs only when nothing is
  found before the moment, one onset moved, the 11:04 fault's, to an earlier incident's: within
  30 s 20 -> 19 of 35, every first unchanged). It is the second stage, not the first: on the
  recorded windows, whose last seconds hold traces cut at the file's end, searching after the
  moment first moved five onsets to just before it and named a wrong service once.
* **Slow shares.** When neither family changes significantly, before the moment or with the
  period after it, the latest change of the latency series' slow shares (1 where a request's or a
  span's time lies above the series' :data:`~.evidence.TAIL_QUANTILE`, else 0), tested together as
  a third family (:func:`_tail_tests`): intermittent slow calls (a share of them many times slower:
  a timeout and retry, a lock, a pause) barely move the ranks Pettitt's test reads, and move the
  upper tail a lot. It comes last: in the first family the slow shares moved the recorded
  latency faults' onsets to later changes of the tail (latency first 8 -> 6 of 9). Measured on
  random shops, 5-20% of the culprit's calls 5-20 times slower, 30 seeds: "no change in the store"
  12 -> 5, the culprit first 17 -> 25 (with the self-time family's tail test); every other random
  fault and every recorded first unchanged.
* **Weak onset.** When no series changes significantly once they are all counted, the clearest
  change of any one series at ``level`` is the onset, marked not significant, and nobody is named
  (:func:`_onset_before`; measured on the recorded faults: an onset for 35 of 35, not 29, within
  30 s of the inject for 20, not 16; the injected service first unchanged, 22 of 35; the healthy
  seeded periods still name nobody). Only when no series changes even so is there no onset.
* **Breaks.** When the onset precedes a break in the traffic before the moment (the stretch holding
  the moment began after it), no series changed from the traffic's resumption to the moment: the
  incident was already under way when it resumed. The store cannot tell whether it began at the
  onset found or stopped and began again in the break, so the onset says so and names the break
  (:attr:`Onset.break_ns`) rather than claim a time it cannot see (measured on the recorded
  days, whose faults' windows are separated by minutes without a recorded span: 8 of the 35
  onsets precede a break, all TrainTicket's; 7 of them are of faults injected into the service the
  fault before was, and the change found is that earlier fault's; the 08:58 fault's
  ts-contacts-service, for one, wrote one error-level record in four from 08:57:00, a minute
  before its inject, as it had from 08:51:40 in the 08:52 fault's window).
* **Problem period.** From the onset, at most ``max_problem_s``, to the end of the stretch of
  traffic the user's moment is in; always holding that moment (:func:`_problem_range`).
* **Baseline.** The most recent requests before the onset whose own series show no change: the
  block's requests before the onset, then earlier blocks, each up to its first change for the worse
  (an earlier incident's requests are skipped; what follows a change for the worse is not clean even
  when the change is older than the onset: an incident that began before the onset found), until
  ``min_baseline_requests`` are gathered. A stretch's changes are searched in the onset's series,
  every service's and every edge's gap included (:func:`_stretch_changes`): an earlier incident in
  one service barely moves the requests' own series (measured on the recorded faults: the 09:25
  fault's baseline held the 09:21 incident, and ts-basic-service ranked 7th; now first; code faults
  with logs first 11 of 12, in the top 3 12 of 12).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import EmptyDataError
from .changepoints import latest_change, smallest_p_value, tarone_level
from .evidence import TAIL_QUANTILE
from .notes import SmallBaseline
from .telemetry import Period, Telemetry, utc_text

__all__ = ["Onset", "Timeline", "blocks", "find_timeline"]

#: The request series an onset is searched in: name -> (column, the direction that is worse; None:
#: either). Code faults change what a request does more than how long it takes: an early return
#: drops spans and log statements, an exception adds error-level records.
SERIES = {"latency": ("latency_ns", 1), "errors": ("error", 1), "error logs": ("error_log", 1),
          "spans per request": ("spans", None), "log records per request": ("log_records", None)}

#: Fewest requests on either side of a change point (a change at a series' last few requests cannot
#: be told from noise).
MIN_SEGMENT = 10


@dataclass(frozen=True)
class Onset:
    """The change that began the incident.

    Attributes
    ----------
    time_ns : int
        Start of the first request after the change (Unix epoch ns).
    series : str
        The series that changed latest: a name of :data:`SERIES`, of all requests (``"latency"``)
        or of one service's (``"latency of cartservice"``: its own time).
    p_value : float
        Pettitt's p-value of that change.
    level : float
        The level each series was held to: the family's (Tarone's, for all the series tested
        together), or, when no series reaches it, the diagnosis's own ``level``: the onset is then
        the clearest change of any one series (:attr:`significant` False).
    significant : bool
        The change is significant with all the series tested counted.
    break_ns : (int, int) or None
        The latest break in the traffic between the onset and the moment given (:func:`blocks`): the
        last request start before it and the first after it (Unix epoch ns). No series changes from
        the resumption to the moment, so the incident was already under way when the traffic
        resumed; whether it began at the onset, or stopped and began again in the break, the store
        cannot tell (module docstring, "Breaks"). None: no break between them.
    """

    time_ns: int
    series: str
    p_value: float
    level: float
    significant: bool = True
    break_ns: tuple[int, int] | None = None

    def to_dict(self) -> dict:
        out = {"time": utc_text(self.time_ns), "time_ns": self.time_ns, "series": self.series,
               "p_value": self.p_value, "level": self.level, "significant": self.significant, "break": None}
        if self.break_ns is not None:
            out["break"] = {"from": utc_text(self.break_ns[0]), "to": utc_text(self.break_ns[1]),
                            "from_ns": self.break_ns[0], "to_ns": self.break_ns[1]}
        return out


@dataclass(frozen=True)
class Timeline:
    """The periods a diagnosis compares: ``onset`` (None when the user gave ``time``),
    ``problem`` and ``baseline`` (:class:`~.telemetry.Period`), and ``caveats`` (notes,
    :class:`~.notes.SmallBaseline`)."""

    onset: Onset | None
    problem: Period
    baseline: Period
    caveats: tuple = ()


def blocks(start_ns: np.ndarray, level: float, max_iter: int = 50) -> list[tuple[int, int]]:
    """Index ranges ``[i, j)`` of the stretches of traffic in sorted request start times.

    A gap is a break when ``n * exp(-rate * gap) < level`` (Bonferroni over the ``n`` gaps), ``rate``
    the arrival rate within the stretches: the maximum-likelihood rate of an exponential fitted to
    the gaps that are not breaks, found by fixed-point iteration from the rate over the whole span
    (each round drops the gaps the last rate makes breaks and refits; it stops when the breaks stay
    the same, at most ``max_iter`` rounds). The rate over the whole span, breaks included, depends on
    how much of the store is read: a day of recorded windows dilutes it to a tenth, and a 64 s
    silence in traffic of 1.5 requests/s was a break in six hours read and not in the day (the
    same diagnosis gave two answers, measured on the recorded TrainTicket day at 09:23: the
    problem period ran on into the next incident's traffic when the day was read).

    Parameters
    ----------
    start_ns : numpy.ndarray, shape (n,)
        Request start times, sorted (Unix epoch ns).
    level : float
        Family-wise level of the break rule.
    max_iter : int, default=50
        Most refits of the rate.

    Returns
    -------
    list of (int, int)
        The stretches, in time order, covering ``range(n)``.
    """
    n = start_ns.size
    if n < 2:
        return [(0, n)]
    gaps = np.diff(start_ns).astype(float)
    inside = np.ones(gaps.size, dtype=bool)
    for _ in range(max_iter):
        rate = inside.sum() / max(float(gaps[inside].sum()), 1.0)
        now = n * np.exp(-rate * gaps) >= level
        if np.array_equal(now, inside) or not now.any():
            break
        inside = now
    breaks = np.flatnonzero(~inside) + 1
    edges = [0, *breaks.tolist(), n]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def _series_tests(telemetry: Telemetry, low: int, high: int, logged: list | None) -> list[tuple]:
    """The family of series an onset is searched in (:func:`_tests`), over the requests that start in
    ``[low, high]``: the requests' and every service's, per request that reaches it and per span of
    its own."""
    window = telemetry.requests.filter(pl.col(S.START_NS).is_between(low, high))
    tests = _tests(window, logged=logged)
    for what, frame in (("requests", _service_series(telemetry.spans, low, high)),
                        ("spans", _service_span_series(telemetry.spans, low, high))):
        for (service,), group in frame.group_by(S.SERVICE, maintain_order=True):
            tests += _tests(group, f"of {service} ({what})", logged)
    return tests


def _tests(frame: pl.DataFrame, where: str = "", logged: list | None = None) -> list[tuple]:
    """``(frame, series name, values, worse)`` of each :data:`SERIES` column ``frame`` holds (latency on a
    log scale), the name followed by ``where``; the log series only over the rows that start in one of
    the ``logged`` ranges (:func:`_logged_ranges`), when given."""
    tests = []
    for name, (column, worse) in SERIES.items():
        rows = frame
        if logged is not None and column in _LOG_COLUMNS:
            rows = frame.filter(_within(frame[S.START_NS].to_numpy(), logged))
        values = rows[column].to_numpy().astype(float)
        values = _log_ns(values) if column == "latency_ns" else values
        tests.append((rows, f"{name} {where}".strip(), values, worse))
    return tests


#: The :data:`SERIES` columns counted from log records.
_LOG_COLUMNS = ("error_log", "log_records")


def _log_ns(values: np.ndarray) -> np.ndarray:
    """Times (ns) on the log scale the change points are searched on, floored at 1 ns."""
    return np.log(np.maximum(values.astype(float), 1.0))


def _of_requests_in(low: int, high: int) -> pl.Expr:
    """The spans whose request starts in ``[low, high]`` (ns)."""
    return pl.col("request_start_ns").is_between(low, high)


def _within(times: np.ndarray, ranges: list) -> np.ndarray:
    """Whether each time is in one of the sorted, disjoint closed ``ranges``."""
    lows, highs = np.array([a for a, _ in ranges]), np.array([b for _, b in ranges])
    k = np.searchsorted(lows, times, side="right") - 1
    return (k >= 0) & (times <= highs[np.maximum(k, 0)])


def _logged_ranges(requests: pl.DataFrame, level: float) -> list | None:
    """``[(first start, last start)]`` (ns) of the stretches of traffic (:func:`blocks`) in which the
    store holds a log record; None when it holds none at all (no log series then vary) or some in
    every stretch.

    Where logs were not collected (a store that holds them for part of the day, a log pipeline that
    was down) the log series are missing, not zero: a stretch without one record would otherwise
    read as every service falling silent at once, a change of "log records per request" at the
    stretch's first request (measured on the recorded TrainTicket day, whose logs end at 10:00:08:
    the 10:04 fault's onset was that, 36 s before the inject). The stretches are the traffic's, so
    collection that stops inside a stretch is not seen."""
    starts = requests[S.START_NS].to_numpy()
    logs = requests["log_records"].to_numpy()
    parts = blocks(starts, level)
    covered = [(int(starts[a]), int(starts[b - 1])) for a, b in parts if logs[a:b].sum() > 0]
    return None if not covered or len(covered) == len(parts) else covered


def _changes_among(tests: list, level: float, together: bool = True, until_ns: int | None = None
                   ) -> list[tuple[int, str, float, int, float]]:
    """``(start_ns, series, p, row, level held to)`` of each series' latest change for the worse among
    ``tests`` (:func:`_tests`), tested together at ``level`` by Tarone's modified Bonferroni procedure
    (:func:`.changepoints.tarone_level`): the series that cannot reach significance do not dilute it;
    each at ``level`` when not ``together``; only changes whose first request starts by ``until_ns``
    when given (:func:`.changepoints.latest_change`'s ``until``)."""
    smallest = [smallest_p_value(values, min_size=MIN_SEGMENT, direction=worse) for _, _, values, worse in tests]
    each = tarone_level(smallest, level) if together else level
    found = []
    for (frame, name, values, worse), least in zip(tests, smallest):
        # A series that counts only when it worsens is searched for a change for the worse (one-sided).
        until = None if until_ns is None else int(np.searchsorted(frame[S.START_NS].to_numpy(), until_ns, "right")) - 1
        change = (latest_change(values, level=each, min_size=MIN_SEGMENT, direction=worse, until=until)
                  if least <= each and (until is None or until >= MIN_SEGMENT) else None)
        if change is not None:
            found.append((int(frame[S.START_NS][change.index]), name, change.p_value, change.index, each))
    return found


def find_timeline(telemetry: Telemetry, *, at_ns: int | None, time: tuple | None, baseline_time: tuple | None,
                  lookback_s: float, max_problem_s: float, min_baseline_requests: int, level: float) -> Timeline:
    """The onset, problem period and baseline of a diagnosis (see the module docstring).

    Parameters
    ----------
    telemetry : Telemetry
        The store's requests (at least the lookback before ``at_ns`` and the problem after it).
    at_ns : int or None
        A moment inside the incident (Unix epoch ns); None: the store's last request.
    time, baseline_time : (int, int) or None
        The problem / baseline period given by the user (no search for that period).
    lookback_s, max_problem_s : float
        How far before ``at_ns`` the onset is searched; the longest problem period.
    min_baseline_requests : int
        Requests the baseline gathers before it stops looking further back.
    level : float
        Significance level of the change-point tests and the block rule.

    Raises
    ------
    EmptyDataError
        No change for the worse near ``at_ns`` (naming the range searched), a moment outside the
        store (naming the store's range), or no request before the problem period.
    """
    requests = telemetry.requests
    starts = requests[S.START_NS].to_numpy()
    first, last = int(starts[0]), int(starts[-1])
    caveats: list[SmallBaseline] = []
    onset = None
    if time is not None:
        problem_range = time
    else:
        at = last if at_ns is None else at_ns
        if not first <= at <= last + int(max_problem_s * 1e9):
            raise EmptyDataError(f"{utc_text(at)} is outside the store, which holds requests from {utc_text(first)} "
                                 f"to {utc_text(last)}.")
        onset = _onset_before(telemetry, starts, at, lookback_s, max_problem_s, level)
        problem_range = _problem_range(starts, onset.time_ns, at, max_problem_s, level)
    before_ns = problem_range[0] if onset is None else onset.time_ns
    problem = _period(starts, problem_range, "given" if onset is None else
                      "onset" if problem_range[0] == onset.time_ns else "onset_to_moment")
    if baseline_time is not None:
        baseline = _period(starts, baseline_time, "given")
    else:
        baseline = _clean_baseline(telemetry, starts, before_ns, min_baseline_requests, level)
    if baseline.n_requests == 0:
        raise EmptyDataError(f"No request before {utc_text(before_ns)} to compare the problem period with; "
                             "give --baseline-time START/END.")
    if baseline.n_requests < min_baseline_requests:
        caveats.append(SmallBaseline(baseline.n_requests, min_baseline_requests))
    return Timeline(onset, problem, baseline, tuple(caveats))


def _problem_range(starts: np.ndarray, onset_ns: int, at: int, max_problem_s: float, level: float) -> tuple[int, int]:
    """From the onset, at most ``max_problem_s``, to the end of the stretch of traffic the user's moment
    is in (the onset can precede a break), and always holding that moment: the user gave it as a moment
    inside the incident, so a period that ends before it (an onset found more than ``max_problem_s``
    earlier, the incident's own change too weak to show) would compare something else. Such a period
    is the ``max_problem_s`` up to the moment."""
    block_end = int(starts[_block_of(starts, max(at, onset_ns), level)[1] - 1]) + 1
    span_ns = int(max_problem_s * 1e9)
    end = min(max(onset_ns + span_ns, at + 1), max(block_end, at + 1))
    return max(onset_ns, end - span_ns), end


def _onset_before(telemetry: Telemetry, starts: np.ndarray, at: int, lookback_s: float, ahead_s: float,
                  level: float) -> Onset:
    """The latest change of the series before ``at`` (:func:`_series_tests`), tested together; when none
    is significant so, the latest change of the edges' gaps (:func:`_gap_tests`), tested together as a
    family of their own; when none is either, the clearest change (smallest p-value) of any series of
    :func:`_series_tests` at ``level`` alone, as a weak onset (:attr:`Onset.significant` False; the
    verdict is then at most uncertain).

    The gaps are a second family, not members of the first: a delay on the network into a service
    that its callers call asynchronously (a producer span) moves no request's latency and no
    service's own time, only the gap on the edge into it (measured on the live shop: items-service,
    which web-service calls asynchronously, with 10 or 40 ms of network delay: "no change in the
    store" in 5 of 7 runs, its gap risen from 3.5 to 13.9 ms; with the family of gaps, items-service
    first in 7 of 7, onsets within 8 s), while hundreds of noisy gap series in the first family
    cost it its power and move the onset to the latest queueing blip (measured on the recorded faults,
    gaps in the first family: onset within 30 s 0.571 -> 0.514; as a second family: every score
    unchanged). The two families, each at ``level``, hold a change that is not there to at most
    ``2 * level``.

    The user who gives ``at`` says there was an incident: a change too weak to pass once hundreds of
    series are counted is still the best lead to the period to compare, and saying how weak it is
    beats no answer (measured on the recorded faults: six had no onset, two of them CPU contentions,
    on a service 7 requests in 15 minutes reach and on one at p = 1.6e-4 against the family's
    1.1e-4; their weak onsets are within 30 s of the inject for 4 of the 6). Only when no series
    changes even at ``level`` is there no onset.

    The two families are searched first over the requests up to ``at``; when neither finds a change,
    again with those of the ``ahead_s`` after it, for the latest change at or before ``at`` (module
    docstring, "After the moment"); when neither does either, the slow shares (module docstring,
    "Slow shares"; :func:`_families` gives the order); the weak onset is searched in the series
    with the period after the moment."""
    low = at - int(lookback_s * 1e9)
    n_window = int(np.searchsorted(starts, at, side="right") - np.searchsorted(starts, low, side="left"))
    logged = _logged_ranges(telemetry.requests, level)
    searched: list = []
    found = None
    for family in _families(telemetry, low, (at, at + int(ahead_s * 1e9)), logged, n_window >= 2 * MIN_SEGMENT,
                            searched):
        found = max(_changes_among(family, level, until_ns=at), default=None)
        if found is not None:
            break
    significant = found is not None
    if not significant:
        found = min(_changes_among(searched[-1], level, together=False, until_ns=at), key=lambda c: (c[2], -c[0]),
                    default=None)
    if found is None:
        raise EmptyDataError(f"No change in the store between {utc_text(low)} and {utc_text(at)} "
                             f"({n_window} requests); give --time START/END.")
    time_ns, series, p, _, each = found
    return Onset(time_ns, series, p, each, significant, _break_between(starts, time_ns, at, level))


def _families(telemetry: Telemetry, low: int, highs: tuple, logged: list | None, enough: bool, searched: list):
    """The families of series :func:`_onset_before` searches, in its order, each built when reached: per
    end of the search in ``highs``, the series (:func:`_series_tests`, none unless ``enough``) and the
    edges' gaps (:func:`_gap_tests`); then per end, the series' slow shares (:func:`_tail_tests`). Each
    end's series are appended to ``searched``."""
    for high in highs:
        tests = _series_tests(telemetry, low, high, logged) if enough else []
        searched.append(tests)
        yield tests
        yield _gap_tests(telemetry.spans, low, high) if tests else []
    for tests in list(searched):
        yield _tail_tests(tests)


def _break_between(starts: np.ndarray, onset_ns: int, at: int, level: float) -> tuple[int, int] | None:
    """(last start before, first start after) the break that begins the stretch of traffic (:func:`blocks`)
    holding the moment ``at``, when that stretch begins after the onset; else None."""
    a, _ = _block_of(starts, at, level)
    if a == 0 or int(starts[a]) <= onset_ns:
        return None
    return int(starts[a - 1]), int(starts[a])


def _tail_tests(tests: list) -> list[tuple]:
    """``(frame, series name, values, worse)`` (as :func:`_tests`) of the slow share of each latency
    series among ``tests``: 1 where a value lies above the series' :data:`~.evidence.TAIL_QUANTILE`,
    else 0, a rise the worse."""
    return [(frame, "slow share" + name[len("latency"):],
             (values > np.quantile(values, TAIL_QUANTILE)).astype(float), 1)
            for frame, name, values, _ in tests if name.startswith("latency") and values.size]


def _gap_tests(spans: pl.DataFrame, low: int, high: int) -> list[tuple]:
    """``(frame, series name, values, worse)`` (as :func:`_tests`) of each edge's gap over the requests
    that start in ``[low, high]``: per caller -> callee, one row per span of the caller that calls the
    callee, its exclusive time (network, queueing, serialisation: ``gap_ns``) on a log scale, a rise
    the worse."""
    frame = (spans.filter(_of_requests_in(low, high) & pl.col("callee").is_not_null())
             .select(S.SERVICE, "callee", pl.col("request_start_ns").alias(S.START_NS), "gap_ns")
             .filter(pl.len().over(S.SERVICE, "callee") >= 2 * MIN_SEGMENT)
             .sort(S.SERVICE, "callee", S.START_NS, maintain_order=True))
    return [(group, f"gap of {caller} -> {callee}", _log_ns(group["gap_ns"].to_numpy()), 1)
            for (caller, callee), group in frame.group_by(S.SERVICE, "callee", maintain_order=True)]


def _service_span_series(spans: pl.DataFrame, low: int, high: int) -> pl.DataFrame:
    """Per service, one row per span of it that does work of its own (no call out), in
    :data:`SERIES`'s columns: its own time (as ``latency_ns``), whether it failed, whether it wrote
    an error-level record, and its log records; ``spans`` is constant (a span is one span). A
    service's spans outnumber the requests that reach it, so a change in a service few requests
    reach still shows."""
    return (spans.filter(_of_requests_in(low, high) & pl.col("callee").is_null())
            .select(S.SERVICE, pl.col("request_start_ns").alias(S.START_NS), pl.col("own_ns").alias("latency_ns"),
                    "error", (pl.col("error_logs") > 0).alias("error_log"), pl.lit(1, pl.Int64).alias("spans"),
                    "log_records")
            .filter(pl.len().over(S.SERVICE) >= 2 * MIN_SEGMENT).sort(S.SERVICE, S.START_NS, maintain_order=True))


def _service_series(spans: pl.DataFrame, low: int, high: int) -> pl.DataFrame:
    """Per service, one row per request that reaches it, in :data:`SERIES`'s columns: its own time
    (as ``latency_ns``), failed spans, error-level records, spans and log records in that request."""
    return (spans.filter(_of_requests_in(low, high))
            .group_by(S.SERVICE, S.TRACE_ID)
            .agg(pl.col("request_start_ns").first().alias(S.START_NS), pl.col("own_ns").sum().alias("latency_ns"),
                 pl.col("error").any(), (pl.col("error_logs").sum() > 0).alias("error_log"),
                 pl.len().cast(pl.Int64).alias("spans"), pl.col("log_records").sum())
            .filter(pl.len().over(S.SERVICE) >= 2 * MIN_SEGMENT).sort(S.SERVICE, S.START_NS))


def _block_of(starts: np.ndarray, time_ns: int, level: float) -> tuple[int, int]:
    index = int(np.searchsorted(starts, time_ns, side="right")) - 1
    for a, b in blocks(starts, level):
        if a <= max(index, 0) < b:
            return a, b
    return 0, starts.size


def _period(starts: np.ndarray, period: tuple, how: str) -> Period:
    n = int(np.searchsorted(starts, period[1], side="left") - np.searchsorted(starts, period[0], side="left"))
    return Period(int(period[0]), int(period[1]), n, how)


def _clean_baseline(telemetry: Telemetry, starts: np.ndarray, before_ns: int, wanted: int, level: float) -> Period:
    """The most recent clean requests before ``before_ns`` (module docstring), as one period from the
    earliest stretch taken to ``before_ns``; its ranges and ``n_skipped`` say which stretches and what
    was skipped. A stretch is clean where none of the series the onset is searched in
    (:func:`_series_tests`) changes for the worse, nor the requests' latency either way."""
    end = int(np.searchsorted(starts, before_ns, side="left"))
    stretches = [(a, min(b, end)) for a, b in blocks(starts[:end], level)] if end else []
    logged = _logged_ranges(telemetry.requests, level)
    taken, skipped, n = [], 0, 0
    for a, b in reversed(stretches):
        changes = _stretch_changes(telemetry, starts, a, b, logged, level)
        if changes:   # a stretch that changed: take it up to its first change only
            b, skipped = a + min(changes), skipped + 1
        taken.append((a, b))
        n += b - a
        if n >= wanted:
            break
    if not taken:
        return Period(before_ns, before_ns, 0, "none_before")
    ranges = tuple(sorted((int(starts[a]), int(starts[b - 1]) + 1) for a, b in taken if b > a))
    if not ranges:
        return Period(before_ns, before_ns, 0, "none_clean_before")
    return Period(ranges[0][0], before_ns, n, "clean_before", ranges, skipped)


def _stretch_changes(telemetry: Telemetry, starts: np.ndarray, a: int, b: int, logged: list | None,
                     level: float) -> list[int]:
    """Where (request index from ``a``) each series of the requests ``[a, b)`` changes: the latest change
    of each series of :func:`_series_tests` for the worse, of the requests' own series (:func:`_tests`)
    and of the edges' gaps (:func:`_gap_tests`) each tested as a family of their own, and of the
    requests' latency either way (measured on seeded incidents: an earlier network delay into a
    service called asynchronously stayed in the baseline on 8 of 8 seeds without the gaps, 0 with).

    A baseline errs the other way from an onset: a change missed leaves an incident in it, a change
    found in noise costs only some of its requests. So a stretch is unclean when any of four
    families finds a change at ``level`` (at most four times ``level`` in all): the requests' series
    alone keep the power the hundreds of services' series take from them under Tarone's procedure
    (measured on the recorded faults: with every series as one family only, the 08:43 incident stayed
    in the 08:52 fault's baseline and the culprit fell from first to second)."""
    if b - a < 2 * MIN_SEGMENT:
        return []
    requests = telemetry.requests[a:b]
    change = latest_change(_log_ns(requests["latency_ns"].to_numpy()), level=level, min_size=MIN_SEGMENT)
    every = _series_tests(telemetry, int(starts[a]), int(starts[b - 1]), logged)
    own = every[:len(SERIES)]   # the requests' own series come first (:func:`_series_tests`)
    gaps = _gap_tests(telemetry.spans, int(starts[a]), int(starts[b - 1]))
    times = [t for t, *_ in _changes_among(every, level) + _changes_among(own, level) + _changes_among(gaps, level)]
    cuts = [int(np.searchsorted(starts, t, side="left")) - a for t in times]
    return cuts + ([change.index] if change else [])
