"""The performance annotations' decisions, as records (the analyses' one
:class:`~tracesleuth.analyses._notes.Note` base: ``kind``, the numbers, ``describe()``).

Deriving (:func:`~.derive.derive_annotation`, :func:`~.derive.derive_annotations`):

=========================== ==================================================================
kind                        decision
=========================== ==================================================================
``bad_measurements``        :class:`BadMeasurements` - NaN, infinite or negative values left out
``feature_missing``         :class:`FeatureMissing` - a feature absent from too many calls
``feature_constant``        :class:`FeatureConstant` - a feature with one value
``no_polynomial_fit``       :class:`NoPolynomialFit` - correlated, but clustered
``too_few_measurements``    :class:`TooFewMeasurements` - no annotation (a ``skipped`` reason)
``memory_partly_recorded``  :class:`MemoryPartlyRecorded` - memory derived from some calls
``calibration_pooled``      :class:`CalibrationPooled` - the others' between-window variation
``calibration_unknown``     :class:`CalibrationUnknown` - no between-window variation at all
=========================== ==================================================================

Checking (:meth:`~.analysis.PerformanceAnnotations.fit` with annotations):

=========================== ==================================================================
``window_mismatch``         :class:`WindowMismatch` - checked on other windows than calibrated
``unknown_operations``      :class:`UnknownOperations` - annotated operations with no call here
``feature_absent``          :class:`FeatureAbsent` - an annotation's feature in none of its calls
``short_windows``           :class:`ShortWindows` - windows with too few calls, not tested
``nothing_checked``         :class:`NothingChecked` - no annotation had enough calls
=========================== ==================================================================

One annotation's check (``AnnotationCheck.note``, :class:`CheckNote`): ``no_calls``,
``too_few_for_a_window``, ``feature_in_no_call`` (not checked), ``unusable_measurements``.

Predicting (:func:`~.predict.predict`):

=========================== ==================================================================
``unseen_operations``       :class:`UnseenOperations` - replacements of operations never called
``no_time_annotation``      :class:`NoTimeAnnotation` - a replaced operation keeps its rank
=========================== ==================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .._notes import Note

__all__ = ["BadMeasurements", "CalibrationPooled", "CalibrationUnknown", "CheckNote", "FeatureAbsent", "FeatureConstant",
           "FeatureInNoCall", "FeatureMissing", "MemoryPartlyRecorded", "NoCalls", "NoPolynomialFit", "NoTimeAnnotation",
           "NothingChecked", "ShortWindows", "TooFewForAWindow", "TooFewMeasurements", "UnknownOperations",
           "UnseenOperations", "UnusableMeasurements", "WindowMismatch"]

#: Operations a note names in full; the others are counted.
NAMED = 5


def _some(names: tuple[str, ...]) -> str:
    return ", ".join(names[:NAMED]) + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")


# --- deriving -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BadMeasurements(Note):
    """Measurements of an operation's metric that are NaN, infinite or negative: left out before
    deriving its annotation.

    Attributes
    ----------
    operation, metric : str
    n_bad, n_measurements : int
    """

    kind: ClassVar[str] = "bad_measurements"
    operation: str
    metric: str
    n_bad: int
    n_measurements: int

    def describe(self) -> str:
        return (f"{self.operation} {self.metric}: {self.n_bad:,} of {self.n_measurements:,} measurements are NaN, "
                "infinite or negative; left out")


@dataclass(frozen=True)
class FeatureMissing(Note):
    """A feature absent from more calls than ``feature_coverage`` allows: not a candidate for the
    operation's correlated annotation.

    Attributes
    ----------
    operation, metric, feature : str
    n_missing, n_calls : int
    """

    kind: ClassVar[str] = "feature_missing"
    operation: str
    metric: str
    feature: str
    n_missing: int
    n_calls: int

    def describe(self) -> str:
        return (f"{self.operation} {self.metric}: feature {self.feature} is missing in {self.n_missing:,} of "
                f"{self.n_calls:,} calls; not a candidate")


@dataclass(frozen=True)
class FeatureConstant(Note):
    """A feature with the same value in every call (outliers aside): it cannot explain the metric,
    so it is not a candidate.

    Attributes
    ----------
    operation, metric, feature : str
    value : float
    """

    kind: ClassVar[str] = "feature_constant"
    operation: str
    metric: str
    feature: str
    value: float

    def describe(self) -> str:
        return (f"{self.operation} {self.metric}: feature {self.feature} has the same value in every call "
                f"({self.value:g}); not a candidate")


@dataclass(frozen=True)
class NoPolynomialFit(Note):
    """The best feature correlates with the metric, but no polynomial of degree up to
    ``max_degree`` fits within ``max_relative_error``: the operation's annotation is clustered.

    Attributes
    ----------
    operation, metric, feature : str
    correlation : float
        Pearson's r of the feature and the metric.
    max_degree : int
    max_relative_error, best_error : float
        The allowed relative error and the smallest reached.
    """

    kind: ClassVar[str] = "no_polynomial_fit"
    operation: str
    metric: str
    feature: str
    correlation: float
    max_degree: int
    max_relative_error: float
    best_error: float

    def describe(self) -> str:
        return (f"{self.operation} {self.metric}: feature {self.feature} correlates (r = {self.correlation:.2f}) but "
                f"no polynomial of degree <= {self.max_degree} fits within a relative error of "
                f"{self.max_relative_error:g} (best {self.best_error:.2f}); clustered")


@dataclass(frozen=True)
class TooFewMeasurements(Note):
    """No annotation of an operation's metric: fewer than ``min_samples`` measurements (left,
    after the bad ones). The reason of a ``skipped`` entry, not one of the result's notes.

    Attributes
    ----------
    operation, metric : str
    n_measurements : int
    min_samples : int
    after_bad : bool
        Whether bad measurements were left out first.
    """

    kind: ClassVar[str] = "too_few_measurements"
    operation: str
    metric: str
    n_measurements: int
    min_samples: int
    after_bad: bool = False

    def describe(self) -> str:
        n = self.n_measurements
        return (f"{n} {'measurement' if n == 1 else 'measurements'}{' left' if self.after_bad else ''}; at least "
                f"{self.min_samples} are needed")


@dataclass(frozen=True)
class MemoryPartlyRecorded(Note):
    """Some calls of an operation recorded no memory: its memory annotation is derived from the
    others.

    Attributes
    ----------
    operation : str
    n_missing, n_calls : int
    """

    kind: ClassVar[str] = "memory_partly_recorded"
    operation: str
    n_missing: int
    n_calls: int

    def describe(self) -> str:
        return (f"{self.operation} memory: not recorded in {self.n_missing:,} of {self.n_calls:,} calls; derived "
                "from the others")


@dataclass(frozen=True)
class CalibrationPooled(Note):
    """Annotations with fewer than ``min_windows`` windows of calls: how much they vary between
    windows is taken as the median of the others' (:mod:`.calibration`).

    Attributes
    ----------
    n_annotations : int
    min_windows : int
    """

    kind: ClassVar[str] = "calibration_pooled"
    n_annotations: int
    min_windows: int

    def describe(self) -> str:
        return (f"{self.n_annotations} annotation(s) had fewer than {self.min_windows} windows of calls to estimate "
                "how much they vary between windows: they take the median of the others")


@dataclass(frozen=True)
class CalibrationUnknown(Note):
    """No annotation had ``min_windows`` windows of calls: the variation between windows is
    unknown and taken as 0 (:mod:`.calibration`).

    Attributes
    ----------
    n_annotations : int
        Annotations without their own estimate (all that vary).
    min_windows : int
    """

    kind: ClassVar[str] = "calibration_unknown"
    n_annotations: int
    min_windows: int

    def describe(self) -> str:
        return (f"no annotation had {self.min_windows} windows of calls: how much they vary between windows is "
                "unknown and taken as 0; derive from several periods (minutes) of traffic")


# --- checking -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowMismatch(Note):
    """The annotations were calibrated on windows of another size than they are checked on.

    Attributes
    ----------
    derived_window, window : int
        Calls per window when deriving, and when checking.
    """

    kind: ClassVar[str] = "window_mismatch"
    derived_window: int
    window: int

    def describe(self) -> str:
        return (f"the annotations were calibrated on windows of {self.derived_window} calls and are checked on "
                f"windows of {self.window}: between-window variation is that of their windows")


@dataclass(frozen=True)
class UnknownOperations(Note):
    """Annotated operations with no call in the traces checked (annotations of another deployment,
    or traces of other endpoints).

    Attributes
    ----------
    operations : tuple of str
        Those operations, sorted.
    n_annotated : int
        Annotated operations.
    """

    kind: ClassVar[str] = "unknown_operations"
    operations: tuple[str, ...]
    n_annotated: int

    def describe(self) -> str:
        return (f"{len(self.operations)} of {self.n_annotated} annotated operations have no call here (annotations of "
                f"another deployment, or traces of other endpoints?): {_some(self.operations)}")


@dataclass(frozen=True)
class FeatureAbsent(Note):
    """An annotation's feature is in none of its operation's calls here: it is not checked.

    Attributes
    ----------
    operation, feature : str
    """

    kind: ClassVar[str] = "feature_absent"
    operation: str
    feature: str

    def describe(self) -> str:
        return f"{self.operation}: feature {self.feature} is in none of its calls here; its annotation is not checked"


@dataclass(frozen=True)
class ShortWindows(Note):
    """Windows with fewer than ``min_calls`` calls: their assertions are not tested.

    Attributes
    ----------
    n_windows : int
    n_annotations : int
        Annotations with such windows.
    min_calls : int
    """

    kind: ClassVar[str] = "short_windows"
    n_windows: int
    n_annotations: int
    min_calls: int

    def describe(self) -> str:
        return (f"{self.n_windows:,} window(s) of {self.n_annotations} annotation(s) had fewer than {self.min_calls} "
                "calls: not tested")


@dataclass(frozen=True)
class NothingChecked(Note):
    """None of the annotated operations has enough calls here to be checked.

    Attributes
    ----------
    examples : tuple of str
        Up to three operations with no measurement.
    """

    kind: ClassVar[str] = "nothing_checked"
    examples: tuple[str, ...] = ()

    def describe(self) -> str:
        return ("none of the annotated operations has enough calls here"
                + (f" (e.g. {', '.join(self.examples)})" if self.examples else ""))


# --- predicting -----------------------------------------------------------------------------


@dataclass(frozen=True)
class UnseenOperations(Note):
    """Replaced annotations that name operations the traces never call: left out, since their
    calls cannot be replayed on the recorded call graph.

    Attributes
    ----------
    patterns : tuple of str
        The changes' operation patterns.
    """

    kind: ClassVar[str] = "unseen_operations"
    patterns: tuple[str, ...]

    def describe(self) -> str:
        return (f"{len(self.patterns)} replaced annotation(s) name operations the traces never call, left out (their "
                f"calls cannot be replayed on the recorded call graph): {', '.join(self.patterns[:NAMED])}")


@dataclass(frozen=True)
class NoTimeAnnotation(Note):
    """A replaced operation without a time annotation: with the residual method its calls keep
    their rank among its recorded times.

    Attributes
    ----------
    operation : str
    """

    kind: ClassVar[str] = "no_time_annotation"
    operation: str

    def describe(self) -> str:
        return f"{self.operation} has no time annotation: its calls keep their rank among its recorded times"


# --- one annotation's check (``AnnotationCheck.note``, a row of the checks table) --------------------


@dataclass(frozen=True)
class CheckNote(Note):
    """Base of what one annotation's check says beside its tests (:func:`~.check.window_tests`):
    why it was not checked, or what it left out."""

    kind: ClassVar[str] = "check_note"


@dataclass(frozen=True)
class NoCalls(CheckNote):
    """The annotated operation has no call in these measurements: not checked."""

    kind: ClassVar[str] = "no_calls"

    def describe(self) -> str:
        return "no call of the operation in these measurements"


@dataclass(frozen=True)
class TooFewForAWindow(CheckNote):
    """No window holds ``min_calls`` usable measurements: not checked.

    Attributes
    ----------
    n_usable : int
    measured : str
        The metric (and the feature, for an annotation of one).
    n_windows : int
        Windows the calls fall in (0: none).
    min_calls : int
    """

    kind: ClassVar[str] = "too_few_for_a_window"
    n_usable: int
    measured: str
    n_windows: int
    min_calls: int

    def describe(self) -> str:
        return (f"{self.n_usable} usable measurement(s) of {self.measured}"
                + (f" in {self.n_windows} window(s)" if self.n_windows else "")
                + f"; a window needs at least {self.min_calls}")


@dataclass(frozen=True)
class FeatureInNoCall(CheckNote):
    """The annotation's feature is in none of the operation's calls: not checked (the result's
    :class:`FeatureAbsent` note names the operations)."""

    kind: ClassVar[str] = "feature_in_no_call"
    feature: str
    n_calls: int

    def describe(self) -> str:
        return f"feature {self.feature} is in none of its {self.n_calls:,} calls"


@dataclass(frozen=True)
class UnusableMeasurements(CheckNote):
    """Measurements left out of a check: NaN, negative, or without the annotation's feature."""

    kind: ClassVar[str] = "unusable_measurements"
    n_unusable: int

    def describe(self) -> str:
        return f"{self.n_unusable:,} measurement(s) not usable (NaN, negative or without the feature)"
