"""Performance annotations (Rogora et al., HotCloud 2017): the estimator and its result.

:class:`PerformanceAnnotations` takes trace tables (one row per call through
:func:`~.measurements.measurements_from_tables`) and either **derives** an annotation per
operation and metric (:mod:`.derive`), or, given annotations, **checks** them against these
calls as assertions (:mod:`.check`). Its :meth:`~PerformanceAnnotations.what_if` composes the
annotations along the call graph of the calls it was fitted on (:mod:`.predict`). The result,
:class:`AnnotationsResult`, holds the annotations, what could not be annotated and why, the
checks, and a sample of the measurements of each annotation for its plot.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import EmptyDataError, ParameterError
from .._contract import NONE, Analysis, InstanceOf, Interval, Options, Seed, Strings
from .._notes import Note, WithNotes
from .check import ALTERNATIVES, MIN_WINDOW, PERIOD_NS, PROCEDURE, failing, summarize, window_tests
from .derive import CLUSTERINGS, DEFAULTS, derive_annotations
from .fileformat import AnnotationSet, load_annotations
from .measurements import feature_column, feature_columns, feature_of_column, measurements_from_tables, operation_groups
from .model import METRICS, format_instant, format_metric
from .notes import FeatureAbsent, FeatureInNoCall, NothingChecked, ShortWindows, UnknownOperations, WindowMismatch

__all__ = ["AnnotationsResult", "PerformanceAnnotations"]

#: Measurements kept per annotation for its plot (a seeded sample).
PLOT_POINTS = 400


@dataclass(frozen=True)
class AnnotationsResult(WithNotes):
    """What :class:`PerformanceAnnotations` derived or checked.

    Attributes
    ----------
    mode : {"derive", "check"}
    annotations : AnnotationSet
        Derived (``derive``) or given (``check``).
    skipped : tuple of (str, str, TooFewMeasurements)
        ``(operation, metric, reason)`` of every operation and metric with calls but no
        annotation (``derive``); the reason a record (:class:`~.notes.TooFewMeasurements`).
    notes : tuple of Note
        Measurements left out and why; features not used and why; what a check could not test
        (records, :mod:`.notes`).
    n_calls, n_operations : int
        Calls (spans) and operations measured.
    features : tuple of str
        The features found in the calls.
    checks : tuple of AnnotationCheck
        ``check``: one per annotation, those that fail first.
    services : tuple of ServiceSuspect
        ``check``: the services the failing annotations point to, most suspicious first
        (:mod:`.services`).
    window : int
    alpha : float
        The false discovery rate of the check's assertions (:data:`~.check.PROCEDURE`).
    alternative : {"greater", "two-sided"}
    min_calls : int
    period_ns : int or None
    n_unknown : int
        ``check``: annotations of operations with no call here.
    top_n : int
        Annotations :meth:`describe` lists.
    points : dict
        ``{(operation, metric): (x or None, y)}``: up to 400 measurements per annotation
        (ndarrays; for plots, not in ``to_dict``).
    """

    mode: str
    annotations: AnnotationSet
    skipped: tuple = ()
    notes: tuple = ()
    n_calls: int = 0
    n_operations: int = 0
    features: tuple = ()
    checks: tuple = ()
    services: tuple = ()
    window: int = 30
    alpha: float = 0.01
    alternative: str = "greater"
    min_calls: int = MIN_WINDOW
    period_ns: int | None = PERIOD_NS
    n_unknown: int = 0
    top_n: int = 10
    points: dict = field(default_factory=dict, repr=False, compare=False)

    # --- checking ------------------------------------------------------------------------
    @property
    def checked(self) -> tuple:
        """The checks with at least one assertion tested."""
        return tuple(c for c in self.checks if c.checked)

    @property
    def n_assertions(self) -> int:
        """Assertions tested: one per annotation and window."""
        return sum(c.n_windows for c in self.checks)

    @property
    def pass_rate(self) -> float | None:
        """Assertions passed / assertions tested (None when none was)."""
        n = self.n_assertions
        return sum(c.n_passed for c in self.checks) / n if n else None

    @property
    def holding_rate(self) -> float | None:
        """Annotations that hold on the run / annotations checked (None when none was)."""
        checked = self.checked
        return sum(bool(c.holds) for c in checked) / len(checked) if checked else None

    def pass_share_cdf(self) -> tuple[np.ndarray, np.ndarray]:
        """The paper's Figure 2: the distribution over annotations of their share of passed assertions.

        Returns
        -------
        (shares, cumulative) : ndarrays of shape (n_checked,)
            Sorted shares and the fraction of annotations at or below each.
        """
        shares = np.sort(np.array([c.pass_share for c in self.checked], dtype=np.float64))
        return shares, np.arange(1, len(shares) + 1) / max(len(shares), 1)

    @property
    def n_short(self) -> int:
        """Windows not tested for having fewer than ``min_calls`` calls."""
        return sum(c.n_short for c in self.checks)

    def drift(self) -> pl.DataFrame:
        """Per failing annotation and period: windows tested and failed (the drift over a time range).

        Returns
        -------
        polars.DataFrame
            Columns ``operation``, ``metric``, ``period_start_ns``, ``assertions``, ``failed``,
            ``since_ns`` (the annotation's first failing period), in the checks' order.
        """
        rows = [{"operation": c.operation, "metric": c.metric, "period_start_ns": p, "assertions": n, "failed": f,
                 "since_ns": c.since_ns}
                for c in self.checks if c.checked and not c.holds for p, n, f in c.periods]
        return pl.DataFrame(rows, schema={"operation": pl.String, "metric": pl.String, "period_start_ns": pl.Int64,
                                          "assertions": pl.Int64, "failed": pl.Int64, "since_ns": pl.Int64})

    def kind_counts(self) -> dict[str, int]:
        counts = {"correlated": 0, "clustered": 0, "constant": 0}
        for a in self.annotations:
            counts[a.kind] += 1
        return counts

    # --- the protocol --------------------------------------------------------------------
    def to_frame(self) -> pl.DataFrame:
        """One row per annotation (per check when checking), in the file's order (failures first when checking)."""
        if self.mode == "check":
            return pl.DataFrame([{k: v for k, v in c.to_dict().items() if k in _CHECK_SCHEMA} for c in self.checks],
                                schema=_CHECK_SCHEMA)
        rows = [{"operation": a.operation, "metric": a.metric, "kind": a.kind,
                 "feature": getattr(a, "feature", None), "degree": getattr(a, "degree", None),
                 "samples": a.n_samples, "correlation": getattr(a, "correlation", None),
                 "relative_error": getattr(a, "relative_error", None),
                 "clusters": len(a.clusters) if a.kind == "clustered" else None, "text": a.text()}
                for a in self.annotations]
        return pl.DataFrame(rows, schema=_DERIVE_SCHEMA)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the plot points, JSON-safe. Checking: ``pass_rate`` and one entry per
        annotation with ``operation`` and ``passed`` (it holds on the run)."""
        doc = {"mode": self.mode, "calls": self.n_calls, "operations": self.n_operations,
               "features": list(self.features), "kinds": self.kind_counts(),
               "notes": [n.to_dict() for n in self.notes],
               "skipped": [{"operation": o, "metric": m, "reason": str(r), "n_measurements": r.n_measurements,
                            "min_samples": r.min_samples} for o, m, r in self.skipped]}
        if self.mode == "check":
            shares, cumulative = self.pass_share_cdf()
            doc.update({"pass_rate": self.pass_rate, "assertions": self.n_assertions,
                        "assertions_passed": sum(c.n_passed for c in self.checks),
                        "holding_rate": self.holding_rate, "checked": len(self.checked),
                        "not_checked": len(self.checks) - len(self.checked), "window": self.window,
                        "alpha": self.alpha, "alternative": self.alternative, "procedure": PROCEDURE,
                        "min_calls": self.min_calls, "period_ns": self.period_ns, "short_windows": self.n_short,
                        "unknown_operations": self.n_unknown, "services": [s.to_dict() for s in self.services],
                        "annotations": [c.to_dict() for c in self.checks],
                        "pass_share_cdf": {"share": shares.tolist(), "cumulative": cumulative.tolist()}})
        else:
            doc["annotations"] = [{**a.to_dict(), "text": a.text()} for a in self.annotations]
        return doc

    def describe(self) -> str:
        """In words: the annotations (or the checks), what was skipped and why, and the caveats."""
        lines = []
        if self.mode == "check":
            checked = self.checked
            if not checked:
                lines.append(f"No annotation could be checked: none of the {len(self.checks)} annotated operations "
                             "has enough calls here. Check a longer run, or the right traces.")
            else:
                failing = [c for c in checked if not c.holds]
                side = "slower fails" if self.alternative == "greater" else "slower or faster fails"
                lines.append(f"{self.pass_rate:.1%} of {self.n_assertions:,} assertions passed (windows of "
                             f"{self.window} calls, {side}, {PROCEDURE} at {self.alpha:g}); "
                             f"{len(checked) - len(failing)} of {len(checked)} annotations hold on this run"
                             + (f", {len(self.checks) - len(checked)} not checked." if len(checked) < len(self.checks)
                                else "."))
                for c in failing[:self.top_n]:
                    calls = f" (calls {c.calls_service})" if c.calls_service else ""
                    lines.append(f"  FAILS {c.text}{calls}\n        {c.n_passed}/{c.n_windows} windows pass; median "
                                 f"observed {format_metric(c.observed_median, c.metric)} vs expected "
                                 f"{format_metric(c.expected_median, c.metric)} (distance {c.distance:.2f})"
                                 + (f"; failing since {format_instant(c.since_ns)} UTC" if c.since_ns is not None and
                                    len(c.periods) > 1 else ""))
                if self.services:
                    lines.append("Services the failing annotations point to: " + ", ".join(
                        f"{s.service} ({s.score:.2f})" for s in self.services[:self.top_n]))
                faster = [c for c in checked if c.n_faster]
                if faster:
                    lines.append(f"Faster than annotated (reported, not failed): {len(faster)} annotation(s), e.g. "
                                 + ", ".join(c.operation for c in faster[:3]))
            if self.n_short:
                lines.append(f"{self.n_short:,} window(s) with fewer than {self.min_calls} calls not tested.")
            if self.n_unknown:
                lines.append(f"{self.n_unknown} of {len(self.checks)} annotated operations have no call here "
                             "(another deployment or other endpoints?); see the notes.")
        else:
            counts = self.kind_counts()
            lines.append(f"{len(self.annotations)} annotations of {self.n_operations} operations from "
                         f"{self.n_calls:,} calls: {counts['correlated']} correlated, {counts['clustered']} clustered, "
                         f"{counts['constant']} constant; {len(self.skipped)} not annotated.")
            if not self.features:
                lines.append("No numeric feature in these calls (span attributes, or arguments measured by "
                             "tracesleuth.instrument): no annotation can depend on an input, so every one is "
                             "clustered or constant. Add numeric span attributes or instrument the code.")
            shown = sorted(self.annotations, key=lambda a: (a.kind != "correlated", -a.n_samples))[:self.top_n]
            lines += ["  " + a.text() for a in shown]
            if len(self.annotations) > len(shown):
                lines.append(f"  ... and {len(self.annotations) - len(shown)} more")
        needed: dict[int, int] = {}  # min_samples -> skipped operation metrics
        for _, _, reason in self.skipped:
            needed[reason.min_samples] = needed.get(reason.min_samples, 0) + 1
        for min_samples, count in needed.items():
            lines.append(f"Not annotated: {count} operation metric(s): at least {min_samples} are needed.")
        if self.notes:
            lines.append(f"{len(self.notes)} note(s), e.g.: {self.notes[0]}")
        return "\n".join(lines)


_DERIVE_SCHEMA = {"operation": pl.String, "metric": pl.String, "kind": pl.String, "feature": pl.String,
                  "degree": pl.Int64, "samples": pl.Int64, "correlation": pl.Float64, "relative_error": pl.Float64,
                  "clusters": pl.Int64, "text": pl.String}
_CHECK_SCHEMA = {"operation": pl.String, "metric": pl.String, "kind": pl.String, "text": pl.String,
                 "passed": pl.Boolean, "checked": pl.Boolean, "measurements": pl.Int64, "assertions": pl.Int64,
                 "assertions_passed": pl.Int64, "pass_share": pl.Float64, "p_value": pl.Float64,
                 "distance": pl.Float64, "median_window_p": pl.Float64, "expected_median": pl.Float64,
                 "observed_median": pl.Float64, "unusable": pl.Int64, "score": pl.Float64, "note": pl.String,
                 "short_windows": pl.Int64, "faster_windows": pl.Int64, "shift": pl.Float64, "since_ns": pl.Int64,
                 "service": pl.String, "calls_service": pl.String}


class PerformanceAnnotations(Analysis):
    """Learned per-operation performance models, as annotations and assertions (Rogora et al. 2017).

    Parameters
    ----------
    metrics : sequence of str, default=("time", "memory")
        Target metrics (:data:`~.model.METRICS`): ``time`` (span duration), ``self_time``
        (exclusive time), ``memory`` (where recorded by :mod:`tracesleuth.instrument`).
    features : sequence of str or None, default=None
        The candidate features (names or ``fnmatch`` patterns, e.g. ``["size(*)", "depth(*)"]``);
        None: every feature found (:mod:`.measurements`).
    min_samples : int, default=10
        Fewer calls of an operation: no annotation (listed with the reason).
    min_correlation : float, default=0.5
        Least absolute Pearson correlation of the chosen feature (Section 3).
    max_relative_error : float, default=0.5
        Greatest root-mean-square error of a polynomial over the metric's mean.
    max_degree : int, default=3
        Highest polynomial degree (the paper: 3).
    constant_tolerance : float, default=0.01
        Greatest coefficient of variation of a constant annotation.
    elbow_ratio : float, default=4.0
        k-means stops adding clusters when ``SSE(k - 1) / SSE(k)`` falls below it.
    max_clusters : int, default=8
    elbow_lookahead : int, default=1
        Clusters tried past a ratio below ``elbow_ratio`` before the elbow is taken (0: the
        paper's rule; :mod:`.derive`, step 6).
    feature_coverage : float, default=0.95
        Least share of an operation's calls a candidate feature must be present in.
    clustering : {"bic", "elbow"}, default="bic"
        How a clustered annotation's clusters are chosen: a normal mixture by BIC, each
        component at least ``min_cluster_calls`` calls, or the paper's k-means elbow
        (:mod:`.derive`, step 6).
    min_cluster_calls : int, default=20
        Fewest calls per mixture component (``clustering="bic"``).
    outlier_fence : float or None, default=3.0
        Calls beyond this many interquartile ranges from the quartiles are set aside from the
        correlation and the fit (at most 5 % of them; :mod:`.derive`); None: the paper's method
        (``outlier_fence=None, elbow_lookahead=0, clustering="elbow"``: the paper's derivation exactly).
    annotations : AnnotationSet, str, os.PathLike or None, default=None
        Given: ``fit`` checks them against the calls instead of deriving (:mod:`.check`).
    window : int, default=30
        Calls per assertion (and per window of a derivation's calibration, :mod:`.calibration`).
    period_ns : int or None, default=60_000_000_000
        Windows never straddle a period of this many ns (aligned on the epoch): derivation
        learns how much windows vary from period to period, and a check shows per period when
        an annotation started to fail. None: one period.
    min_calls : int, default=5
        Fewer calls in a window: the assertion is not tested (counted).
    alpha : float, default=0.01
        The false discovery rate of a check's assertions (Benjamini-Hochberg over all of them;
        on healthy traffic, the chance that any assertion fails; :mod:`.check`).
    alternative : {"greater", "two-sided"}, default="greater"
        ``greater``: a window slower (or using more memory) than the annotation fails, a faster
        one is reported; ``two-sided``: both fail.
    top_n : int, default=10
        Annotations :meth:`AnnotationsResult.describe` lists.
    random_state : int, numpy Generator or None, default=None
        Seeds the sample of points kept for plots (derivation and checking draw nothing) and
        the what-if's Monte Carlo draws.

    Attributes
    ----------
    annotations_ : AnnotationSet
        Derived, or the ones checked.
    measurements_ : polars.DataFrame
        The calls fitted on (:mod:`.measurements`), for :meth:`what_if`.
    result_ : AnnotationsResult

    Raises
    ------
    ParameterError
        From ``fit``: a setting is not allowed, or the input is no trace table.
    EmptyDataError
        From ``fit``: no call.
    AnnotationFileError
        From ``fit``: ``annotations`` names a file that cannot be loaded (line and field named).

    References
    ----------
    J. Rogora, A. Carzaniga, A. Diwan, M. Hauswirth and R. Soulé. "Performance annotations for
    cloud computing". HotCloud 2017.

    Examples
    --------
    >>> from tracesleuth.analyses.annotate.synthetic import planted_case
    >>> case = planted_case(0)
    >>> est = PerformanceAnnotations(random_state=0).fit(*case.args)
    >>> print(est.annotations_.get("files:FileStore.delete").text())
    files:FileStore.delete: time ~ Normal(304.7 µs + 1.998 ms × depth(path), sd 103.2 µs)
    """

    _constraints = {
        "metrics": [Strings()],
        "features": [Strings(), NONE],
        "min_samples": [Interval(int, 2, None)],
        "min_correlation": [Interval(float, 0, 1)],
        "max_relative_error": [Interval(float, 0, None, closed="neither")],
        "max_degree": [Interval(int, 1, 3)],
        "constant_tolerance": [Interval(float, 0, None)],
        "elbow_ratio": [Interval(float, 1, None, closed="neither")],
        "max_clusters": [Interval(int, 1, None)],
        "elbow_lookahead": [Interval(int, 0, None)],
        "feature_coverage": [Interval(float, 0, 1, closed="right")],
        "outlier_fence": [Interval(float, 0, None, closed="neither"), NONE],
        "clustering": [Options(CLUSTERINGS)],
        "min_cluster_calls": [Interval(int, 2, None)],
        "period_ns": [Interval(int, 1, None), NONE],
        "min_calls": [Interval(int, 2, None)],
        "alternative": [Options(ALTERNATIVES)],
        "annotations": [InstanceOf((AnnotationSet, str, os.PathLike, None), "an AnnotationSet, a path or None")],
        "window": [Interval(int, 5, None)],
        "alpha": [Interval(float, 0, 1, closed="neither")],
        "top_n": [Interval(int, 1, None)],
        "random_state": [Seed()],
    }

    def __init__(self, *, metrics=("time", "memory"), features=None, min_samples: int = 10,
                 min_correlation: float = 0.5, max_relative_error: float = 0.5, max_degree: int = 3,
                 constant_tolerance: float = 0.01, elbow_ratio: float = 4.0, max_clusters: int = 8,
                 elbow_lookahead: int = 1, feature_coverage: float = 0.95, outlier_fence: float | None = 3.0,
                 clustering: str = "bic", min_cluster_calls: int = 20, annotations=None, window: int = 30,
                 period_ns: int | None = PERIOD_NS, min_calls: int = MIN_WINDOW, alpha: float = 0.01,
                 alternative: str = "greater", top_n: int = 10, random_state=None):
        self.metrics = metrics
        self.features = features
        self.min_samples = min_samples
        self.min_correlation = min_correlation
        self.max_relative_error = max_relative_error
        self.max_degree = max_degree
        self.constant_tolerance = constant_tolerance
        self.elbow_ratio = elbow_ratio
        self.max_clusters = max_clusters
        self.elbow_lookahead = elbow_lookahead
        self.feature_coverage = feature_coverage
        self.outlier_fence = outlier_fence
        self.clustering = clustering
        self.min_cluster_calls = min_cluster_calls
        self.annotations = annotations
        self.window = window
        self.period_ns = period_ns
        self.min_calls = min_calls
        self.alpha = alpha
        self.alternative = alternative
        self.top_n = top_n
        self.random_state = random_state

    def fit(self, tables) -> "PerformanceAnnotations":
        """Derive (or, given ``annotations``, check) the annotations of the calls of trace tables.

        Parameters
        ----------
        tables : TraceTable or sequence of TraceTable
            With their spans (:func:`tracesleuth.model.build_trace_table`;
            :func:`tracesleuth.model.root_tables` gives every root endpoint's).

        Returns
        -------
        self
        """
        return super().fit(tables)

    def _settings(self) -> dict:
        return {k: getattr(self, k) for k in DEFAULTS}

    def _fit(self, tables) -> dict[str, Any]:
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown:
            raise ParameterError(f"The 'metrics' parameter of PerformanceAnnotations must name metrics among "
                                 f"{{{', '.join(METRICS)}}}. Got {unknown[0]!r} instead.")
        given = None
        if self.annotations is not None:
            given = self.annotations if isinstance(self.annotations, AnnotationSet) else load_annotations(
                self.annotations)
        frame = measurements_from_tables(tables)
        if frame.height == 0:
            raise EmptyDataError("no call to measure")
        columns = feature_columns(frame)
        if self.features is not None:
            columns = [c for c in columns if any(fnmatch.fnmatchcase(feature_of_column(c), p) for p in self.features)]
        groups = operation_groups(frame)
        rng = np.random.default_rng(self.random_state)
        if given is None:
            annotations, skipped, notes = derive_annotations(
                frame, groups, metrics=self.metrics, feature_columns=columns, random_state=self.random_state,
                window=self.window, period_ns=self.period_ns, **self._settings())
            result_set = AnnotationSet(annotations=tuple(annotations), settings={
                **self._settings(), "window": self.window, "period_ns": self.period_ns})
            checks: tuple = ()
            services: tuple = ()
            n_unknown = 0
        else:
            result_set, skipped = given, ()
            checks, services, notes, n_unknown = self._check(given, frame, groups)
        points = _points(result_set, frame, groups, rng)
        result = AnnotationsResult(
            mode="derive" if given is None else "check", annotations=result_set, skipped=tuple(skipped),
            notes=tuple(notes), n_calls=frame.height, n_operations=len(groups),
            features=tuple(feature_of_column(c) for c in columns), checks=checks, services=services,
            window=self.window, alpha=self.alpha, alternative=self.alternative, min_calls=self.min_calls,
            period_ns=self.period_ns, n_unknown=n_unknown, top_n=self.top_n, points=points)
        return {"annotations_": result_set, "measurements_": frame, "result_": result}

    def _check(self, given: AnnotationSet, frame: pl.DataFrame, groups) -> tuple[tuple, tuple, list, int]:
        from .services import call_graph, rank_services

        rows_of = dict(groups)
        calls_service = _calls_service(frame, rows_of)
        notes: list[Note] = []
        window = self.window
        derived_window = given.settings.get("window") if isinstance(given.settings, dict) else None
        if isinstance(derived_window, int) and derived_window != window:
            notes.append(WindowMismatch(derived_window, window))
        tests = []
        for a in given:
            rows = rows_of.get(a.operation)
            sub = frame[rows] if rows is not None else frame.head(0)
            tests.append(window_tests(a, sub, window=window, min_calls=self.min_calls, period_ns=self.period_ns))
        failed, faster, adjusted = failing(tests, self.alpha, self.alternative)
        checks = [summarize(a, t, f, q, p, calls_service=calls_service.get(a.operation))
                  for a, t, f, q, p in zip(given, tests, failed, faster, adjusted)]
        unknown = sorted({a.operation for a in given if a.operation not in rows_of})
        if unknown:
            known = len({a.operation for a in given}) - len(unknown)
            notes.append(UnknownOperations(tuple(unknown), len(unknown) + known))
        missing = sorted({(c.operation, c.note.feature) for c in checks if isinstance(c.note, FeatureInNoCall)})
        for operation, feature in missing[:5]:
            notes.append(FeatureAbsent(operation, feature))
        short = sum(c.n_short for c in checks)
        if short:
            ops = sum(1 for c in checks if c.n_short)
            notes.append(ShortWindows(short, ops, self.min_calls))
        if not any(c.checked for c in checks):
            missing_ops = [c.operation for c in checks if c.n_measurements == 0][:3]
            notes.append(NothingChecked(tuple(missing_ops)))
        order = sorted(range(len(checks)), key=lambda i: (not checks[i].checked, bool(checks[i].holds),
                                                          -checks[i].score, checks[i].operation, checks[i].metric))
        checks = [checks[i] for i in order]
        services = rank_services(checks, call_graph(frame)) if any(c.holds is False for c in checks) else ()
        return tuple(checks), services, notes, len(unknown)

    def what_if(self, changes: Sequence, *, target: str | None = None, method: str = "residual",
                n_draws: int = 2000, threshold=None):
        """Predict an operation's time if some operations' time annotations changed (:func:`.predict.predict`).

        Parameters
        ----------
        changes : sequence of Change or str
            ``"sqlite:*+5ms"``, ``"auth:login<=50ms"``, ``"db:query*0.5"`` (:func:`.predict.parse_change`).
        target : str, optional
            Default the most frequent root operation.
        method : {"residual", "sample"}, default="residual"
        n_draws : int, default=2000
        threshold : str or float, optional
            A duration (``"100ms"`` or ns): also predict the share of calls under it.

        Returns
        -------
        Prediction
        """
        from ...units import parse_duration
        from .predict import parse_change, predict

        if not hasattr(self, "measurements_"):
            raise ParameterError("Fit the estimator on a run's traces before asking what-if questions.")
        parsed = [parse_change(c) if isinstance(c, str) else c for c in changes]
        limit = parse_duration(threshold) if isinstance(threshold, str) else threshold
        return predict(self.annotations_, self.measurements_, parsed, target=target, method=method, n_draws=n_draws,
                       threshold_ns=limit, random_state=self.random_state)


def _calls_service(frame: pl.DataFrame, rows_of: dict) -> dict[str, str]:
    """Operation -> the service its calls reach, when another (the most frequent ``server_service`` of its calls)."""
    if S.SERVER_SERVICE not in frame.columns:
        return {}
    found = (frame.select(S.OPERATION_KEY, S.SERVER_SERVICE).drop_nulls()
             .group_by(S.OPERATION_KEY).agg(pl.col(S.SERVER_SERVICE).mode().sort().first()))
    return {op: service for op, service in found.iter_rows() if service != op.split(":", 1)[0]}


def _points(annotations: AnnotationSet, frame: pl.DataFrame, groups, rng: np.random.Generator) -> dict:
    """Up to :data:`PLOT_POINTS` ``(x, y)`` of each annotation, a seeded sample."""
    rows_of = dict(groups)
    points = {}
    for a in annotations:
        rows = rows_of.get(a.operation)
        if rows is None or a.metric not in frame.columns:
            continue
        if len(rows) > PLOT_POINTS:
            rows = np.sort(rng.choice(rows, PLOT_POINTS, replace=False))
        y = frame[a.metric].gather(rows).cast(pl.Float64).to_numpy()
        x = None
        if a.uses_feature and feature_column(a.feature) in frame.columns:
            x = frame[feature_column(a.feature)].gather(rows).to_numpy()
        keep = np.isfinite(y) & (np.isfinite(x) if x is not None else True)
        points[a.key] = (None if x is None else x[keep], y[keep])
    return points
