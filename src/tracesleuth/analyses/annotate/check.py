"""Annotations as assertions: tests of windows of new measurements (Rogora et al., HotCloud 2017, Section 5).

"We implement the assertions as standard one-sample statistical tests, comparing measured
metrics to the idealized model given by the annotation. We record an assertion violation
whenever the test indicates that the measurements do not conform to the annotation." The
result is "a distance or fitness value (or a sort of p-value)" beside pass/fail (Section 1).

**Windows.** An operation's new measurements, in time order, are cut into **periods** of
``period_ns`` (aligned on the epoch: minutes by default; None: one period) and each period's
calls into **windows** of ``window`` calls (a last window shorter than half of that joins the
one before; fewer than ``window`` calls in a period: one window of them all). One
**assertion** is one annotation tested on one window; a window with fewer than ``min_calls``
calls is not tested, and counted (``n_short``).

**Scores.** Each measurement is turned into its **normal score** under the annotation,
``z = Φ⁻¹(F(y | x))`` with ``F`` the annotation's distribution function at the call's feature
(a standard normal variable when the annotation holds), clipped to [-3, 3] (:data:`CLIP`: a
call preempted for milliseconds by the operating system does not fail a window on its own).
Per kind: the standardized residual ``(y - h(x)) / sd`` (correlated), ``(y - value) / sd``
(constant), the score under the mixture (clustered).

**The test** of a window of ``n`` calls with mean score ``m``: ``t = (m - mu) / s(n)`` with the
annotation's :class:`~.model.Calibration` (:mod:`.calibration`: ``mu`` the mean window score
where it was derived, ``s(n)² = sigma² / n + tau² + se²`` the predicted spread of a new
window's mean, between-window variation included); without a calibration (hand-written files,
earlier versions), the paper's test: ``mu = 0``, ``s(n)² = Var(clipped z) / n``
(:data:`CLIPPED_VARIANCE`). **One-sided** by default (``alternative="greater"``): a window
whose calls are slower (or use more memory) than the annotation fails, p-value ``1 - Φ(t)``;
one significantly faster is reported (``n_faster``), not failed. ``alternative="two-sided"``
fails both, p-value ``2 (1 - Φ(|t|))``. An annotation with ``sd = 0`` (a constant, or an exact
relation) fails a window when a value lies above it (either side, two-sided) by more than 1e-6
relative, p-value 0, else 1.

**Many assertions at once** (:func:`failing`): a check makes hundreds of assertions, and 1 % of
them would fail at ``alpha = 0.01`` on healthy traffic, each a false alarm. The p-values of all
the assertions of a check are adjusted together with the **Benjamini-Hochberg** procedure
(``scipy.stats.false_discovery_control``) and an assertion fails when its adjusted p-value is
below ``alpha``. Why Benjamini-Hochberg and not Holm: on healthy traffic every assertion's null
holds, and then the false discovery rate equals the family-wise error rate, so the check fails
any assertion with probability at most ``alpha``, as Holm guarantees; under a fault, many
assertions are off, and Benjamini-Hochberg keeps far more of them than Holm, which divides
``alpha`` by the number of assertions. The windows of one operation, and of callers and
callees, are positively dependent (a slow minute slows them together), under which the
procedure keeps its guarantee (Benjamini & Yekutieli 2001, doi:10.1214/aos/1013699998).

**Per annotation**: the share of its assertions passed (the values whose distribution over
annotations is the paper's Figure 2); it **holds** when none failed. The run's **pass rate** is
the share of all assertions that passed (:attr:`~.analysis.AnnotationsResult.pass_rate`), its
**holding rate** the share of the annotations checked that hold. Per period, the windows tested
and failed (the drift of the annotation over a time range) and ``since_ns``, the start of the
ongoing run of failing periods (an isolated earlier failure, as the adjustment allows when many
assertions fail, does not move it back). An annotation whose operation has no measurement here (or
too few, or lacks its feature in every call) is listed as not checked, with the reason, and
counts in neither rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats
from scipy.special import ndtr, ndtri

from ... import schema as S
from .measurements import feature_column
from .model import Annotation
from .notes import CheckNote, FeatureInNoCall, NoCalls, TooFewForAWindow, UnusableMeasurements

__all__ = ["ALTERNATIVES", "AnnotationCheck", "CLIP", "CLIPPED_VARIANCE", "MIN_WINDOW", "PERIOD_NS", "PROCEDURE",
           "WindowTests", "check_annotation", "failing", "normal_scores", "summarize", "window_tests", "usable",
           "window_slices", "windows"]

#: The default fewest calls a window needs to be tested (``min_calls``): the mean of five clipped
#: normal scores is already close to normal (the clipped score's excess kurtosis is small).
MIN_WINDOW = 5
#: The default period (ns) windows never straddle: a minute, the resolution at which the drift is shown.
PERIOD_NS = 60_000_000_000
#: Normal scores are clipped to [-CLIP, CLIP] before their mean is tested.
CLIP = 3.0
#: Variance of a standard normal variable clipped to [-CLIP, CLIP] (its mean is 0).
CLIPPED_VARIANCE = float((2 * stats.norm.cdf(CLIP) - 1) - 2 * CLIP * stats.norm.pdf(CLIP)
                         + 2 * CLIP ** 2 * stats.norm.sf(CLIP))
#: The tests' alternatives: slower (or more memory) fails; or either way.
ALTERNATIVES = ("greater", "two-sided")
#: The multiple-testing procedure applied over all the assertions of a check (module docstring).
PROCEDURE = "Benjamini-Hochberg"
#: Relative deviation beyond which a value is off an exact annotation (``sd = 0``).
EXACT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class AnnotationCheck:
    """One annotation checked against new measurements.

    Attributes
    ----------
    operation, metric, kind : str
    text : str
        The annotation in words.
    n_measurements : int
        Measurements tested (of the operation, with the feature for a correlated annotation).
    n_windows : int
        Assertions tested (0: not checked, ``note`` says why).
    n_passed : int
        Assertions passed.
    pass_share : float or None
        ``n_passed / n_windows``.
    holds : bool or None
        No assertion failed; None when not checked.
    p_value : float or None
        The smallest adjusted p-value of its assertions (module docstring).
    distance : float or None
        The median over its windows of ``|t|``, how many predicted standard deviations a
        window's mean score is off (higher = further off).
    median_window_p : float or None
        The median raw p-value of its windows.
    expected_median, observed_median : float or None
        The annotation's median at each call's feature and the measurements, medians over the
        calls (the metric's unit).
    n_unusable : int
        Measurements not tested: NaN or negative, or (correlated) without the feature.
    note : CheckNote or None
        Why it was not checked, or what it left out (a note of :mod:`.notes`; ``str()`` in words).
    n_short : int
        Windows with fewer than ``min_calls`` calls, not tested.
    n_faster : int
        Windows significantly faster (lower) than the annotation (one-sided: reported, not failed).
    shift : float or None
        The median signed ``t`` of its windows (> 0: slower than the annotation).
    since_ns : int or None
        Since when it fails (Unix ns): the start of the ongoing run of periods with a failed
        window, up to the last period checked; when the last period passes (it recovered), the
        start of the first period with a failed window. None when none failed.
    periods : tuple of (int, int, int)
        ``(period start ns, windows tested, windows failed)`` in time order.
    service : str
        The operation's service.
    calls_service : str or None
        The service its calls (client spans) reach, when another: where a client span's time
        is spent besides its own service.
    """

    operation: str
    metric: str
    kind: str
    text: str
    n_measurements: int
    n_windows: int
    n_passed: int
    pass_share: float | None
    holds: bool | None
    p_value: float | None
    distance: float | None
    median_window_p: float | None
    expected_median: float | None
    observed_median: float | None
    n_unusable: int = 0
    note: CheckNote | None = None
    n_short: int = 0
    n_faster: int = 0
    shift: float | None = None
    since_ns: int | None = None
    periods: tuple = ()
    service: str = ""
    calls_service: str | None = None

    @property
    def checked(self) -> bool:
        return self.n_windows > 0

    @property
    def score(self) -> float:
        """Suspicion (higher = more suspicious): the share of failed assertions, 0 when not checked."""
        return 0.0 if not self.n_windows else 1.0 - self.n_passed / self.n_windows

    def to_dict(self) -> dict:
        return {"operation": self.operation, "metric": self.metric, "kind": self.kind, "text": self.text,
                "passed": self.holds, "checked": self.checked, "measurements": self.n_measurements,
                "assertions": self.n_windows, "assertions_passed": self.n_passed, "pass_share": self.pass_share,
                "p_value": self.p_value, "distance": self.distance, "median_window_p": self.median_window_p,
                "expected_median": self.expected_median, "observed_median": self.observed_median,
                "unusable": self.n_unusable, "score": self.score,
                "note": None if self.note is None else self.note.to_dict(), "short_windows": self.n_short,
                "faster_windows": self.n_faster, "shift": self.shift, "since_ns": self.since_ns,
                "periods": [{"start_ns": a, "assertions": b, "failed": c} for a, b, c in self.periods],
                "service": self.service, "calls_service": self.calls_service}


def windows(n: int, window: int, min_calls: int = MIN_WINDOW) -> list[slice]:
    """Consecutive windows of ``window`` of ``n`` items (rules in the module docstring).

    Examples
    --------
    >>> [(s.start, s.stop) for s in windows(70, 30)]
    [(0, 30), (30, 70)]
    >>> [(s.start, s.stop) for s in windows(80, 30)], windows(4, 30)
    ([(0, 30), (30, 60), (60, 80)], [])
    """
    if n < max(min_calls, 1):
        return []
    if n < window:
        return [slice(0, n)]
    bounds = list(range(0, n, window)) + [n]
    if n - bounds[-2] < window / 2:  # a short last window joins the one before
        del bounds[-2]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def window_slices(start_ns: np.ndarray, window: int, period_ns: int | None) -> tuple[list[slice], np.ndarray]:
    """Every window of calls in time order, none straddling a period (module docstring), whatever its size.

    Parameters
    ----------
    start_ns : ndarray of shape (n,)
        The calls' starts, Unix ns, ascending.
    window : int
    period_ns : int or None

    Returns
    -------
    slices : list of slice
    period_start_ns : ndarray of shape (n_windows,)
        The start of each window's period (0 when ``period_ns`` is None).

    Examples
    --------
    >>> starts = np.array([0, 1, 2, 61, 62, 125]) * 10**9
    >>> s, p = window_slices(starts, 30, 60 * 10**9)
    >>> [(x.start, x.stop) for x in s], (p // 10**9).tolist()
    ([(0, 3), (3, 5), (5, 6)], [0, 60, 120])
    """
    n = len(start_ns)
    if n == 0:
        return [], np.zeros(0, dtype=np.int64)
    if period_ns is None:
        return windows(n, window, 1), np.zeros(len(windows(n, window, 1)), dtype=np.int64)
    period = np.asarray(start_ns, dtype=np.int64) // period_ns
    bounds = np.r_[0, np.flatnonzero(np.diff(period)) + 1, n]
    slices, starts = [], []
    for a, b in zip(bounds[:-1], bounds[1:]):
        for s in windows(int(b - a), window, 1):
            slices.append(slice(int(a) + s.start, int(a) + s.stop))
            starts.append(int(period[a]) * period_ns)
    return slices, np.array(starts, dtype=np.int64)


def normal_scores(annotation: Annotation, y: np.ndarray, x: np.ndarray | None) -> np.ndarray:
    """The clipped normal scores of measurements under an annotation (module docstring), shape (n,)."""
    u = np.clip(annotation.cdf(y, x), 1e-300, 1 - 1e-16)
    return np.clip(ndtri(u), -CLIP, CLIP)


def usable(annotation: Annotation, measurements: pl.DataFrame) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, int]:
    """``(y, x, start_ns, n_unusable)``: the measurements an annotation can be tested on, in time order.

    A measurement is usable when it is finite and >= 0 and, for a correlated annotation, its
    call has the feature.
    """
    n = measurements.height
    y = (measurements[annotation.metric].cast(pl.Float64).to_numpy() if annotation.metric in measurements.columns
         else np.full(n, np.nan))
    good = np.isfinite(y) & (y >= 0)
    x = None
    if annotation.uses_feature:
        column = feature_column(annotation.feature)
        x = measurements[column].to_numpy() if column in measurements.columns else np.full(n, np.nan)
        good &= np.isfinite(x)
        x = x[good]
    start = (measurements[S.START_NS].to_numpy() if S.START_NS in measurements.columns
             else np.zeros(n, dtype=np.int64))[good]
    return y[good], x, start, int(n - good.sum())


@dataclass(frozen=True)
class WindowTests:
    """The raw tests of one annotation's windows, before the adjustment over the whole check.

    Attributes
    ----------
    p_greater, p_less : ndarray of shape (n_tested,)
        One-sided p-values: slower (or more), faster (or less) than the annotation.
    t : ndarray of shape (n_tested,)
        The standardized shift of each window's mean score (module docstring).
    period_start_ns : ndarray of shape (n_tested,)
    n_measurements, n_unusable, n_short : int
    expected_median, observed_median : float or None
    note : CheckNote or None
        Why nothing was tested, or what was left out (:mod:`.notes`).
    """

    p_greater: np.ndarray
    p_less: np.ndarray
    t: np.ndarray
    period_start_ns: np.ndarray
    n_measurements: int = 0
    n_unusable: int = 0
    n_short: int = 0
    expected_median: float | None = None
    observed_median: float | None = None
    note: CheckNote | None = None

    @property
    def n_tested(self) -> int:
        return len(self.t)

    def p_values(self, alternative: str) -> np.ndarray:
        """The p-values of ``alternative`` (:data:`ALTERNATIVES`)."""
        if alternative == "greater":
            return self.p_greater
        return np.minimum(1.0, 2 * np.minimum(self.p_greater, self.p_less))


def window_tests(annotation: Annotation, measurements: pl.DataFrame, *, window: int = 30, min_calls: int = MIN_WINDOW,
                 period_ns: int | None = PERIOD_NS) -> WindowTests:
    """The raw tests of one annotation on the windows of its operation's calls (module docstring).

    Parameters
    ----------
    annotation : Annotation
    measurements : polars.DataFrame
        The operation's rows of a measurement frame (:mod:`.measurements`), in time order.
    window : int, default=30
        Calls per window.
    min_calls : int, default=5
        Fewer calls in a window: not tested (counted).
    period_ns : int or None, default=60 s
        Windows never straddle a period.

    Returns
    -------
    WindowTests
    """
    empty = np.zeros(0)
    if measurements.height == 0:
        return WindowTests(empty, empty, empty, empty.astype(np.int64), note=NoCalls())
    y, x, start, n_unusable = usable(annotation, measurements)
    slices, periods = window_slices(start, window, period_ns)
    keep = [k for k, s in enumerate(slices) if s.stop - s.start >= min_calls]
    n_short = len(slices) - len(keep)
    if not keep:
        what = f"{annotation.metric} and {annotation.feature}" if annotation.uses_feature else annotation.metric
        note = TooFewForAWindow(len(y), what, len(slices), min_calls)
        if annotation.uses_feature and n_unusable == measurements.height:
            note = FeatureInNoCall(annotation.feature, measurements.height)
        return WindowTests(empty, empty, empty, empty.astype(np.int64), n_unusable=n_unusable, n_short=n_short,
                           note=note)
    parts = [slices[k] for k in keep]

    sizes = np.array([s.stop - s.start for s in parts], dtype=np.float64)
    if n_short:  # the tested windows' calls, gathered
        index = np.concatenate([np.arange(s.start, s.stop) for s in parts])
        ys, xs = y[index], None if x is None else x[index]
    else:  # every window: one slice of the calls
        ys, xs = y[parts[0].start:parts[-1].stop], None if x is None else x[parts[0].start:parts[-1].stop]
    bounds = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    if float(np.max(annotation.variance(xs))) == 0:  # exact: a value off the curve is no chance event
        mean = annotation.expected(xs)
        off = (ys - mean) / np.maximum(np.abs(mean), 1.0)
        above = np.maximum.reduceat(off, bounds)
        below = np.maximum.reduceat(-off, bounds)
        p_greater = np.where(above > EXACT_TOLERANCE, 0.0, 1.0)
        p_less = np.where(below > EXACT_TOLERANCE, 0.0, 1.0)
        t = np.where(above >= below, above, -below)
    else:
        scores = normal_scores(annotation, ys, xs)
        means = np.add.reduceat(scores, bounds) / sizes
        cal = annotation.calibration
        if cal is None:
            t = means / np.sqrt(CLIPPED_VARIANCE / sizes)
        else:
            t = (means - cal.score_mean) / cal.window_sd(sizes)
        p_greater, p_less = ndtr(-t), ndtr(t)
    expected = annotation.ppf(np.full(1 if x is None else len(x), 0.5), x)
    note = UnusableMeasurements(n_unusable) if n_unusable else None
    return WindowTests(p_greater, p_less, t, periods[keep], n_measurements=len(y), n_unusable=n_unusable,
                       n_short=n_short, expected_median=float(np.median(expected)),
                       observed_median=float(np.median(y)), note=note)


def failing(tests: list, alpha: float, alternative: str = "greater") -> tuple[list, list, list]:
    """Which assertions of a whole check fail, and which are faster, after the Benjamini-Hochberg adjustment.

    Parameters
    ----------
    tests : list of WindowTests
    alpha : float
        The false discovery rate (the family-wise error rate on healthy traffic).
    alternative : {"greater", "two-sided"}

    Returns
    -------
    failed : list of ndarray of bool
        Per item of ``tests``, its failed windows.
    faster : list of ndarray of bool
        Its windows significantly faster (lower) than the annotation (adjusted the same way).
    adjusted : list of ndarray
        Its adjusted p-values of ``alternative``.

    Examples
    --------
    >>> t = WindowTests(np.array([1e-6, 0.3]), np.array([1.0, 0.7]), np.array([4.8, 0.5]), np.array([0, 0]))
    >>> [f.tolist() for f in failing([t], 0.01)[0]]
    [[True, False]]
    """
    sizes = [tst.n_tested for tst in tests]
    if not sum(sizes):
        return ([np.zeros(0, dtype=bool) for _ in tests],) * 2 + ([np.zeros(0) for _ in tests],)
    cuts = np.cumsum(sizes)[:-1]
    p = np.concatenate([tst.p_values(alternative) for tst in tests])
    low = np.concatenate([tst.p_less for tst in tests])
    adjusted = stats.false_discovery_control(p, method="bh")
    lower = stats.false_discovery_control(low, method="bh")
    t = np.concatenate([tst.t for tst in tests])
    failed = adjusted < alpha
    faster = (lower < alpha) & (t < 0)
    return np.split(failed, cuts), np.split(faster, cuts), np.split(adjusted, cuts)


def summarize(annotation: Annotation, tests: WindowTests, failed: np.ndarray, faster: np.ndarray,
              adjusted: np.ndarray, *, calls_service: str | None = None) -> AnnotationCheck:
    """The check of one annotation from its tests and which of them failed (:func:`failing`)."""
    service = annotation.operation.split(":", 1)[0]
    if not tests.n_tested:
        return AnnotationCheck(annotation.operation, annotation.metric, annotation.kind, annotation.text(),
                               tests.n_measurements, 0, 0, None, None, None, None, None, tests.expected_median,
                               tests.observed_median, tests.n_unusable, tests.note, n_short=tests.n_short,
                               service=service, calls_service=calls_service)
    n = tests.n_tested
    n_failed = int(failed.sum())
    periods = []
    starts = tests.period_start_ns
    for p in np.unique(starts):
        mine = starts == p
        periods.append((int(p), int(mine.sum()), int(failed[mine].sum())))
    since = next((p for p, _, f in periods if f), None)
    if periods and periods[-1][2]:  # still failing: since the start of the ongoing run of failing periods
        k = len(periods) - 1
        while k > 0 and periods[k - 1][2]:
            k -= 1
        since = periods[k][0]
    return AnnotationCheck(
        operation=annotation.operation, metric=annotation.metric, kind=annotation.kind, text=annotation.text(),
        n_measurements=tests.n_measurements, n_windows=n, n_passed=n - n_failed, pass_share=(n - n_failed) / n,
        holds=n_failed == 0, p_value=float(adjusted.min()), distance=float(np.median(np.abs(tests.t))),
        median_window_p=float(np.median(tests.p_greater)), expected_median=tests.expected_median,
        observed_median=tests.observed_median, n_unusable=tests.n_unusable, note=tests.note, n_short=tests.n_short,
        n_faster=int(faster.sum()), shift=float(np.median(tests.t)), since_ns=since, periods=tuple(periods),
        service=service, calls_service=calls_service)


def check_annotation(annotation: Annotation, measurements: pl.DataFrame, *, window: int = 30, alpha: float = 0.01,
                     min_calls: int = MIN_WINDOW, period_ns: int | None = PERIOD_NS,
                     alternative: str = "greater") -> AnnotationCheck:
    """Check one annotation alone against the measurements of its operation (its windows adjusted together).

    Parameters
    ----------
    annotation : Annotation
    measurements : polars.DataFrame
        The operation's rows of a measurement frame (:mod:`.measurements`), in time order.
    window, min_calls, period_ns
        As :func:`window_tests`.
    alpha : float, default=0.01
    alternative : {"greater", "two-sided"}, default="greater"

    Returns
    -------
    AnnotationCheck
    """
    tests = window_tests(annotation, measurements, window=window, min_calls=min_calls, period_ns=period_ns)
    failed, faster, adjusted = failing([tests], alpha, alternative)
    return summarize(annotation, tests, failed[0], faster[0], adjusted[0])
