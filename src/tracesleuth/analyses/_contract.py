"""The contract every analysis follows: a scikit-learn estimator, declarative settings, a frozen result.

An analysis is

* an **estimator**, a subclass of :class:`Analysis` (itself a :class:`sklearn.base.BaseEstimator`):
  ``__init__`` only stores keyword-only settings, so ``get_params(deep=True)``, ``set_params`` and
  :func:`sklearn.base.clone` work; the settings are checked once, when ``fit`` starts, against the
  class's declarative ``_constraints`` (:func:`check_settings`); ``fit(...)`` returns ``self`` and
  sets every fitted attribute (names ending in ``_``) together at the end, so a fit that raises
  leaves the previous fitted state whole;
* a **result** (:class:`AnalysisResult`): a frozen object with ``to_frame()`` (a polars
  DataFrame), ``to_dict()`` (JSON-safe: ``json.dumps`` works on it as is) and ``describe()``
  (a few lines in words, saying when the result is not to be trusted and why); its decisions are
  ``notes``, a tuple of records on one base (:class:`~._notes.Note`: a ``kind``, the numbers,
  the sentence ``describe()`` prints), never prose alone;
* a report section, a CLI command and an evaluation protocol, registered with the estimator in
  :mod:`tracesleuth.analyses` (one :class:`~tracesleuth.analyses.AnalysisSpec` each).

**Orientation rule** (as PyOD's): wherever an analysis gives a score to an operation, service,
instance, category or request, **a higher score means more suspicious** (more anomalous, more
responsible for the slowdown). Rankings list the most suspicious first.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Protocol, runtime_checkable

import numpy as np
from sklearn.base import BaseEstimator

from ..errors import ParameterError

__all__ = [
    "NONE",
    "Analysis",
    "ReportContext",
    "AnalysisResult",
    "Constraint",
    "Interval",
    "Options",
    "InstanceOf",
    "Seed",
    "Strings",
    "check_settings",
    "sections_from_result",
    "HIGHER_IS_MORE_SUSPICIOUS",
    "ServiceSuspect",
]

#: The orientation rule of every score an analysis gives (see the module docstring).
HIGHER_IS_MORE_SUSPICIOUS = True


# ============================================================================================
# Declarative settings
# ============================================================================================


class Constraint:
    """One allowed kind of value of a setting; ``describe()`` completes "must be ..."."""

    def is_satisfied_by(self, value: Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Interval(Constraint):
    """A number in a range: ``Interval(int, 1, None)`` is an int in ``[1, inf)``.

    Parameters
    ----------
    kind : {int, float}
        ``int`` accepts integers only (not bool); ``float`` accepts any finite real number.
    low, high : float or None
        The bounds; None is unbounded.
    closed : {"both", "left", "right", "neither"}, default="both"
    """

    kind: type
    low: float | None
    high: float | None
    closed: str = "both"

    def is_satisfied_by(self, value: Any) -> bool:
        if not (_is_int(value) if self.kind is int else _is_real(value)):
            return False
        if self.low is not None and (value < self.low or (value == self.low and self.closed in ("right", "neither"))):
            return False
        if self.high is not None and (value > self.high or (value == self.high and self.closed in ("left", "neither"))):
            return False
        return True

    def describe(self) -> str:
        left = "[" if self.closed in ("both", "left") and self.low is not None else "("
        right = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"{'an int' if self.kind is int else 'a float'} in the range {left}{low}, {high}{right}"


@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of values (strings, or bools)."""

    values: tuple

    def is_satisfied_by(self, value: Any) -> bool:
        return any(value is v or (type(value) is type(v) and value == v) for v in self.values)

    def describe(self) -> str:
        kinds = {type(v).__name__ for v in self.values}
        return f"a {'/'.join(sorted(kinds))} among {{{', '.join(repr(v) for v in self.values)}}}"


@dataclass(frozen=True)
class InstanceOf(Constraint):
    """An instance of one of ``types`` (``None`` in ``types`` allows None); ``what`` names it."""

    types: tuple
    what: str

    def is_satisfied_by(self, value: Any) -> bool:
        if value is None:
            return None in self.types
        return isinstance(value, tuple(t for t in self.types if t is not None))

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class Strings(Constraint):
    """A non-string sequence of strings (column names, keys)."""

    def is_satisfied_by(self, value: Any) -> bool:
        return (not isinstance(value, (str, bytes)) and isinstance(value, Iterable)
                and all(isinstance(v, str) for v in value))

    def describe(self) -> str:
        return "a sequence of str"


@dataclass(frozen=True)
class Seed(Constraint):
    """A ``random_state``: an int >= 0, a :class:`numpy.random.Generator` or None."""

    def is_satisfied_by(self, value: Any) -> bool:
        return value is None or isinstance(value, np.random.Generator) or (_is_int(value) and value >= 0)

    def describe(self) -> str:
        return "an int >= 0, a numpy Generator or None"


NONE = InstanceOf((None,), "None")


def check_settings(estimator: Any, constraints: dict[str, list[Constraint]] | None = None) -> None:
    """Check every setting of ``estimator`` against its class's ``_constraints``, once.

    Parameters
    ----------
    estimator : Analysis
        Its ``get_params(deep=False)`` are checked.
    constraints : dict of str to list of Constraint, optional
        Default: ``type(estimator)._constraints``. A setting satisfies its list when it satisfies
        any constraint in it; a setting missing from the dict is not checked.

    Raises
    ------
    ParameterError
        Naming the setting, the allowed values and what was given, as scikit-learn does: "The
        'generations' parameter of LatencyDegradationPatterns must be an int in the range
        [0, inf). Got -1 instead."
    """
    constraints = type(estimator)._constraints if constraints is None else constraints
    params = estimator.get_params(deep=False)
    for name, allowed in constraints.items():
        value = params[name]
        if not any(c.is_satisfied_by(value) for c in allowed):
            raise ParameterError(
                f"The {name!r} parameter of {type(estimator).__name__} must be "
                f"{' or '.join(c.describe() for c in allowed)}. Got {value!r} instead."
            )


# ============================================================================================
# Estimator and result
# ============================================================================================


class Analysis(BaseEstimator):
    """Base class of every analysis estimator (see the module docstring for the contract).

    A subclass declares ``_constraints`` (setting name -> list of :class:`Constraint`) and
    implements ``_fit(*args, **kwargs) -> dict`` returning every fitted attribute by name; it
    never assigns fitted attributes itself. ``fit`` checks the settings, calls ``_fit`` and sets
    what it returned in one step, so an exception leaves the previous fit whole.
    """

    #: Setting name -> allowed kinds of value; checked by :func:`check_settings` in ``fit``.
    _constraints: ClassVar[dict[str, list[Constraint]]] = {}

    def fit(self, *args: Any, **kwargs: Any) -> "Analysis":
        """Check the settings, run the analysis and set the fitted attributes; return ``self``.

        Raises
        ------
        ParameterError
            A setting is not allowed (checked before any work).
        TraceSleuthError
            A subclass of :class:`ValueError` naming the bad input; the estimator is unchanged.
        """
        check_settings(self)
        fitted = self._fit(*args, **kwargs)
        bad = [k for k in fitted if not k.endswith("_") or k.startswith("_")]
        if bad:  # a bug of the subclass, not bad input
            raise AssertionError(f"{type(self).__name__}._fit returned non-fitted names {bad}")
        self.__dict__.update(fitted)
        return self

    def _fit(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True)
class ReportContext:
    """What a report section may show besides its analysis's result.

    Attributes
    ----------
    spans : SpanReadResult, pyarrow.Table or polars.DataFrame
        The spans analysed (for Gantt charts of example requests).
    table : TraceTable
        The trace table the analysis was fitted on.
    labels : mapping of str to str or None, optional
        Ground truth ``{trace_id: label or None}`` (simulations, the live demo).
    degradations : object, optional
        Descriptions of what was injected, as the analysis's section understands them.
    settings : mapping, optional
        Settings to show in the section's summary (seed, budget...).
    max_gantt_spans : int, default=400
        Spans per Gantt chart at most.
    """

    spans: Any
    table: Any
    labels: Any = None
    degradations: Any = None
    settings: Any = None
    max_gantt_spans: int = 400


@runtime_checkable
class AnalysisResult(Protocol):
    """What every analysis's ``result_`` offers; results are frozen dataclasses."""

    def to_frame(self) -> Any:
        """One row per finding (a :class:`polars.DataFrame`; same columns when there is none)."""

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-safe (``json.dumps`` works on it as is)."""

    def describe(self) -> str:
        """A few lines in words, including why the result is not to be trusted when it is not."""


def sections_from_result(section_of, title: str):
    """The registry's ``section`` of an analysis whose report section is built from its result alone.

    Parameters
    ----------
    section_of : callable
        ``section_of(result) -> Section``: the section of a result.
    title : str
        The estimator's class name, for the docstring.

    Returns
    -------
    callable
        ``build_sections(fitted, context=None) -> list of Section``: ``fitted`` an estimator (its
        ``result_`` is read) or a result; ``context`` (a :class:`ReportContext`) is unused, every
        number coming from the result.
    """
    def build_sections(fitted: Any, context: "ReportContext | None" = None) -> list:
        return [section_of(getattr(fitted, "result_", fitted))]

    build_sections.__doc__ = (f"The report sections of a fitted :class:`{title}` or its result (the registry's "
                              "``section``; :func:`tracesleuth.analyses._contract.sections_from_result`).")
    return build_sections


@dataclass(frozen=True)
class ServiceSuspect:
    """A service and why it is suspected: the shape of an analysis's ``services`` (the root-cause
    localization's and the performance annotations'; the comparison's has the same fields).

    Attributes
    ----------
    service : str
    score : float
        Higher = more suspicious. In the root-cause localization, with the changes within the
        window (the default): the largest slowdown attributed to it, x-fold (its module
        docstring, "Services"); without (the paper): the suspicious score of its most suspicious
        method (clusters in which it is anomalous).
    evidence : tuple of str
        Its changes and anomalous methods, the strongest first.
    """

    service: str
    score: float
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"service": self.service, "score": self.score, "evidence": list(self.evidence)}
