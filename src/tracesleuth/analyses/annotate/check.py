"""Annotations as assertions: one-sample tests of new measurements (Rogora et al., HotCloud 2017, Section 5).

"We implement the assertions as standard one-sample statistical tests, comparing measured
metrics to the idealized model given by the annotation. We record an assertion violation
whenever the test indicates that the measurements do not conform to the annotation." The
result is "a distance or fitness value (or a sort of p-value)" beside pass/fail (Section 1).

An operation's new measurements, in time order, are cut into **windows** of ``window`` calls
(a last window shorter than half of that joins the one before; fewer than ``window`` calls in
all: one window of them all, when there are at least :data:`MIN_WINDOW`). One **assertion** is
one annotation tested on one window, at significance ``alpha``. Each measurement is first
turned into its **normal score** under the annotation, ``z = Φ⁻¹(F(y | x))`` with ``F`` the
annotation's distribution function at the call's feature: a standard normal variable when the
annotation holds. Per kind this is

* correlated, ``y ~ Normal(h(x), sd)``: the standardized residual ``(y - h(x)) / sd``;
* constant, ``y ~ Normal(value, sd)``: ``(y - value) / sd``;
* clustered: the normal score under the mixture of its clusters;

and the assertion is a two-sided **z-test of the mean score** of the window, each score first
clipped to [-3, 3] (:data:`CLIP`; the clipped standard normal has mean 0 and variance
:data:`CLIPPED_VARIANCE`, which the test uses). The distance is the absolute mean clipped
score: how many of the annotation's standard deviations the window is off, on average. An
annotation with ``sd = 0`` (a constant, or an exact relation: every training value on the
curve) passes when every value is on it within 1e-6 relative, with a p-value of 1 or 0, and its
distance is the largest relative deviation.

Why this test and not another of the standard ones: a database delay moves every call of an
operation, which the mean detects in a few calls; the clipping keeps a call preempted by the
operating system for milliseconds (a few in a thousand on a busy machine) from failing a window
on its own, as it did with the plain z-test; and Kolmogorov-Smirnov or a median test compare
the shape or the median of the measurements with the normal model, which timing data (skewed)
does not follow: on the SQLite workload they failed clean runs against their own annotations.

Per annotation, over its windows: the share of assertions passed (the values whose
distribution over annotations is the paper's Figure 2) and whether the annotation **holds** on
the run: its failed windows are not significantly more than the ``alpha`` share expected by
chance (one-sided binomial test, p-value above ``alpha``: one failed window of one does not
hold), so that a long run is not failed by chance alone; an exact annotation (``sd = 0``) holds
when no window failed. The run's **pass rate** is the share of all assertions that passed
(:attr:`~.analysis.AnnotationsResult.pass_rate`), its **holding rate** the share of the
annotations checked that hold. An annotation whose operation has no measurement here (or fewer
than :data:`MIN_WINDOW`, or lacks its feature in every call) is listed as not checked, with the
reason, and counts in neither rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats
from scipy.special import ndtr, ndtri

from .measurements import feature_column
from .model import Annotation

__all__ = ["AnnotationCheck", "CLIP", "CLIPPED_VARIANCE", "MIN_WINDOW", "check_annotation", "windows"]

#: The fewest measurements an assertion is tested on.
MIN_WINDOW = 5
#: Normal scores are clipped to [-CLIP, CLIP] before their mean is tested.
CLIP = 3.0
#: Variance of a standard normal variable clipped to [-CLIP, CLIP] (its mean is 0).
CLIPPED_VARIANCE = float((2 * stats.norm.cdf(CLIP) - 1) - 2 * CLIP * stats.norm.pdf(CLIP)
                         + 2 * CLIP ** 2 * stats.norm.sf(CLIP))


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
        The annotation holds on the run (module docstring); None when not checked.
    p_value : float or None
        Of the binomial test behind ``holds`` (1 when no window failed).
    distance : float or None
        The median distance of the windows (the absolute mean clipped normal score, in the
        annotation's standard deviations; higher = further off).
    median_window_p : float or None
        The median p-value of the windows.
    expected_median, observed_median : float or None
        The annotation's median at each call's feature and the measurements, medians over the
        calls (the metric's unit).
    n_unusable : int
        Measurements not tested: NaN or negative, or (correlated) without the feature.
    note : str
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
    note: str = ""

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
                "unusable": self.n_unusable, "score": self.score, "note": self.note}


def windows(n: int, window: int) -> list[slice]:
    """Consecutive windows of ``window`` of ``n`` items (rules in the module docstring).

    Examples
    --------
    >>> [(s.start, s.stop) for s in windows(70, 30)]
    [(0, 30), (30, 70)]
    >>> [(s.start, s.stop) for s in windows(80, 30)], windows(4, 30)
    ([(0, 30), (30, 60), (60, 80)], [])
    """
    if n < MIN_WINDOW:
        return []
    if n < window:
        return [slice(0, n)]
    bounds = list(range(0, n, window)) + [n]
    if n - bounds[-2] < window / 2:  # a short last window joins the one before
        del bounds[-2]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def _tests(annotation: Annotation, y: np.ndarray, x: np.ndarray | None, parts: list[slice]
           ) -> tuple[np.ndarray, np.ndarray, bool]:
    """(p-values, distances) of the windows ``parts`` of one annotation's calls, and whether it is exact."""
    starts = np.array([s.start for s in parts])
    sizes = np.array([s.stop - s.start for s in parts], dtype=np.float64)
    if float(np.max(annotation.variance(x))) == 0:
        mean = annotation.expected(x)
        off = np.abs(y - mean) / np.maximum(np.abs(mean), 1.0)
        worst = np.maximum.reduceat(off, starts)
        return np.where(worst > 1e-6, 0.0, 1.0), worst, True
    u = np.clip(annotation.cdf(y, x), 1e-300, 1 - 1e-16)
    scores = np.clip(ndtri(u), -CLIP, CLIP)
    shift = np.add.reduceat(scores, starts) / sizes
    return 2 * ndtr(-np.abs(shift) * np.sqrt(sizes / CLIPPED_VARIANCE)), np.abs(shift), False


def check_annotation(annotation: Annotation, measurements: pl.DataFrame, *, window: int = 30,
                     alpha: float = 0.01) -> AnnotationCheck:
    """Check one annotation against the measurements of its operation (rules in the module docstring).

    Parameters
    ----------
    annotation : Annotation
    measurements : polars.DataFrame
        The operation's rows of a measurement frame (:mod:`.measurements`), in time order.
    window : int, default=30
        Calls per assertion.
    alpha : float, default=0.01
        Significance of each assertion and of the binomial test of the annotation.

    Returns
    -------
    AnnotationCheck
    """
    def unchecked(note: str, n_unusable: int = 0) -> AnnotationCheck:
        return AnnotationCheck(annotation.operation, annotation.metric, annotation.kind, annotation.text(), 0, 0, 0,
                               None, None, None, None, None, None, None, n_unusable, note)

    if measurements.height == 0:
        return unchecked("no call of the operation in these measurements")
    y = measurements[annotation.metric].cast(pl.Float64).to_numpy() if annotation.metric in measurements.columns \
        else np.full(measurements.height, np.nan)
    x = None
    good = np.isfinite(y) & (y >= 0)
    if annotation.uses_feature:
        column = feature_column(annotation.feature)
        x = (measurements[column].to_numpy() if column in measurements.columns
             else np.full(measurements.height, np.nan))
        good &= np.isfinite(x)
        x = x[good]
    n_unusable = int(measurements.height - good.sum())
    y = y[good]
    parts = windows(len(y), window)
    if not parts:
        what = f"{annotation.metric} and {annotation.feature}" if annotation.uses_feature else annotation.metric
        return unchecked(f"{len(y)} usable measurement(s) of {what}; at least {MIN_WINDOW} are needed", n_unusable)
    stop = parts[-1].stop
    p, distances, exact = _tests(annotation, y[:stop], None if x is None else x[:stop], parts)
    failed = int((p < alpha).sum())
    binomial = float(stats.binomtest(failed, len(parts), alpha, alternative="greater").pvalue) if failed else 1.0
    if exact:  # a failed window is no chance event
        binomial = 0.0 if failed else 1.0
    expected = annotation.ppf(np.full(1 if x is None else len(x), 0.5), x)
    return AnnotationCheck(
        operation=annotation.operation, metric=annotation.metric, kind=annotation.kind, text=annotation.text(),
        n_measurements=len(y), n_windows=len(parts), n_passed=len(parts) - failed,
        pass_share=(len(parts) - failed) / len(parts), holds=binomial > alpha, p_value=binomial,
        distance=float(np.median(distances)), median_window_p=float(np.median(p)),
        expected_median=float(np.median(expected)), observed_median=float(np.median(y)), n_unusable=n_unusable,
        note="" if not n_unusable else f"{n_unusable:,} measurement(s) not usable (NaN, negative or without the "
                                       "feature)")
