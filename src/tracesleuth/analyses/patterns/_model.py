"""Conditions, patterns and their quality score.

The vocabulary of Cortellessa & Traini (2020), Sections 2.2 and 5:

* a **condition** is a continuous triple ``<j, low, high>`` satisfied when ``low <= a_j < high``
  (Definitions 2.2 and 5.4) or a categorical pair ``<j, v>`` satisfied when ``a_j == v``
  (Definition 5.3). A missing value (the request never called the operation, or the attribute was
  not recorded) satisfies no condition;
* a **pattern** is a set of conditions, at most one per attribute, satisfied when all of its
  conditions are (Definition 2.3);
* given a **latency interval** ``I``, the requests whose latency lies in ``I`` are the positives
  ``R_pos`` (eq. 2), a pattern's true and false positives are the positives and negatives that
  satisfy it (eq. 3), and its quality ``Q(P, I)`` is the F-score of its precision and recall
  (eqs. 4-5).

All times are integer nanoseconds; intervals are half-open ``[low, high)``.

References
----------
V. Cortellessa and L. Traini. "Detecting Latency Degradation Patterns in Service-based Systems".
ICPE 2020. https://doi.org/10.1145/3358960.3379126
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Set
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ParameterError
from ...schema import ATTRIBUTE_PREFIX, EXCLUSIVE_PREFIX, INSTANCE_PREFIX
from ..metrics import precision_recall_f
from ...units import format_duration_ns

__all__ = [
    "ATTR_PREFIX",
    "CONTINUOUS_PREFIX",
    "INSTANCE_PREFIX",
    "Condition",
    "LatencyInterval",
    "Pattern",
    "PatternQuality",
    "attribute_words",
    "pattern_quality",
]

#: The trace-table column prefixes conditions are built on (named in :mod:`tracesleuth.schema`):
#: continuous, exclusive time in ns; categorical, the instance that served the operation and a
#: root-span attribute.
CONTINUOUS_PREFIX, INSTANCE_PREFIX, ATTR_PREFIX = EXCLUSIVE_PREFIX, INSTANCE_PREFIX, ATTRIBUTE_PREFIX


# --------------------------------------------------------------------------------------------
# Latency interval
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatencyInterval:
    """A half-open request latency interval ``[low_ns, high_ns)``, the paper's ``I``.

    Parameters
    ----------
    low_ns, high_ns : int
        Bounds in nanoseconds, ``low_ns < high_ns``.
    """

    low_ns: int
    high_ns: int

    def __post_init__(self) -> None:
        low, high = int(self.low_ns), int(self.high_ns)
        if not low < high:
            raise ParameterError(
                f"A latency interval must have low < high. Got [{low}, {high}) ns instead."
            )
        object.__setattr__(self, "low_ns", low)
        object.__setattr__(self, "high_ns", high)

    def contains(self, latency_ns: np.ndarray) -> np.ndarray:
        """Return the positives mask of eq. (2): ``low_ns <= L < high_ns``, shape of the input."""
        latency_ns = np.asarray(latency_ns)
        return (latency_ns >= self.low_ns) & (latency_ns < self.high_ns)

    def describe(self) -> str:
        """``"[350 ms, 700 ms)"``."""
        return f"[{format_duration_ns(self.low_ns)}, {format_duration_ns(self.high_ns)})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict with ``low_ns``, ``high_ns`` and ``words``."""
        return {"low_ns": self.low_ns, "high_ns": self.high_ns, "words": self.describe()}


# --------------------------------------------------------------------------------------------
# Conditions
# --------------------------------------------------------------------------------------------


def attribute_words(attribute: str) -> str:
    """Human name of a trace-table column.

    ``"exclusive_ns[svc:op]"`` -> ``"svc:op exclusive"``; ``"instance[svc:op]"`` ->
    ``"svc:op instance"``; ``"attr[version]"`` -> ``"version"``; anything else unchanged.
    """
    for prefix, suffix in ((CONTINUOUS_PREFIX, " exclusive"), (INSTANCE_PREFIX, " instance"), (ATTR_PREFIX, "")):
        if attribute.startswith(prefix) and attribute.endswith("]"):
            return attribute[len(prefix):-1] + suffix
    return attribute


@dataclass(frozen=True)
class Condition:
    """One condition on one trace attribute (Definitions 2.2, 5.3, 5.4).

    A continuous condition ``<j, low, high>`` is satisfied by a request whose value ``a_j`` has
    ``low_ns <= a_j < high_ns``; an open end (``None``) stands for the data's extreme, so
    ``low_ns=None`` means "below ``high_ns``" and both ``None`` means "the value is present" (the
    request called the operation). A categorical condition ``<j, v>`` is satisfied when
    ``a_j == value``. A missing value never satisfies any condition.

    Use :meth:`continuous` and :meth:`categorical` to build one.

    Parameters
    ----------
    attribute : str
        Column name in the trace table (``"exclusive_ns[svc:op]"``, ``"attr[version]"``...).
    low_ns, high_ns : int or None
        Continuous bounds in the attribute's unit (nanoseconds for exclusive times).
    value : str or None
        The category of a categorical condition.
    """

    attribute: str
    low_ns: int | None = None
    high_ns: int | None = None
    value: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.attribute, str) or not self.attribute:
            raise ParameterError(f"A condition needs a non-empty attribute name. Got {self.attribute!r} instead.")
        if self.value is not None:
            if self.low_ns is not None or self.high_ns is not None:
                raise ParameterError(
                    f"Condition on {self.attribute!r}: a categorical condition (value={self.value!r}) "
                    "takes no low_ns/high_ns."
                )
            object.__setattr__(self, "value", str(self.value))
            return
        for name in ("low_ns", "high_ns"):
            bound = getattr(self, name)
            if bound is not None:
                object.__setattr__(self, name, int(bound))
        if self.low_ns is not None and self.high_ns is not None and not self.low_ns < self.high_ns:
            raise ParameterError(
                f"Condition on {self.attribute!r} must have low_ns < high_ns. "
                f"Got [{self.low_ns}, {self.high_ns}) instead."
            )

    @classmethod
    def continuous(cls, attribute: str, low_ns: int | None = None, high_ns: int | None = None) -> "Condition":
        """``<attribute, low_ns, high_ns>``: satisfied when ``low_ns <= a < high_ns``."""
        return cls(attribute, low_ns=low_ns, high_ns=high_ns)

    @classmethod
    def categorical(cls, attribute: str, value: str) -> "Condition":
        """``<attribute, value>``: satisfied when ``a == value``."""
        if value is None:
            raise ParameterError(f"Categorical condition on {attribute!r} needs a value. Got None instead.")
        return cls(attribute, value=value)

    @property
    def kind(self) -> str:
        """``"categorical"`` or ``"continuous"``."""
        return "continuous" if self.value is None else "categorical"

    def satisfied(self, values: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
        """Evaluate on raw values.

        Parameters
        ----------
        values : ndarray of shape (n_requests,)
            Integer values (continuous) or strings/objects (categorical). For a categorical
            attribute ``None`` marks a missing value.
        present : ndarray of bool, shape (n_requests,), optional
            False where the value is missing. Default: all present (categorical: not None).

        Returns
        -------
        ndarray of bool, shape (n_requests,)
        """
        values = np.asarray(values)
        if self.value is not None:
            ok = values == self.value
            ok = np.asarray(ok, dtype=bool)
        else:
            ok = np.ones(values.shape, dtype=bool)
            if self.low_ns is not None:
                ok &= values >= self.low_ns
            if self.high_ns is not None:
                ok &= values < self.high_ns
        if present is not None:
            ok &= np.asarray(present, dtype=bool)
        return ok

    def satisfied_by(self, frame: Any) -> np.ndarray:
        """Evaluate on a polars DataFrame (or an object with ``.frame``) holding the attribute.

        Returns
        -------
        ndarray of bool, shape (n_requests,)
            True where the request satisfies the condition; missing values never do.
        """
        frame = getattr(frame, "frame", frame)
        if self.attribute not in frame.columns:
            raise ParameterError(f"Condition on {self.attribute!r}: no such column in the table.")
        column = frame.get_column(self.attribute)
        present = column.is_not_null().to_numpy()
        if self.value is not None:
            values = column.cast(str).fill_null("").to_numpy()
        else:
            values = column.fill_null(0).to_numpy()
        return self.satisfied(values, present)

    def describe(self) -> str:
        """Words: ``"svc:op exclusive in [80 ms, 102 ms)"``, ``"version = 1.4"``."""
        name = attribute_words(self.attribute)
        if self.value is not None:
            return f"{name} = {self.value}"
        low, high = self.low_ns, self.high_ns
        if low is not None and high is not None:
            return f"{name} in [{format_duration_ns(low)}, {format_duration_ns(high)})"
        if low is not None:
            return f"{name} >= {format_duration_ns(low)}"
        if high is not None:
            return f"{name} < {format_duration_ns(high)}"
        if self.attribute.startswith(CONTINUOUS_PREFIX):
            return f"{self.attribute[len(CONTINUOUS_PREFIX):-1]} called"
        return f"{name} present"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: attribute, kind, low_ns, high_ns, value, words."""
        return {
            "attribute": self.attribute,
            "kind": self.kind,
            "low_ns": self.low_ns,
            "high_ns": self.high_ns,
            "value": self.value,
            "words": self.describe(),
        }


# --------------------------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------------------------


class Pattern(Set):
    """A set of conditions, at most one per attribute (Definition 2.3).

    A request satisfies the pattern when it satisfies every condition. The pattern behaves as a
    frozenset of :class:`Condition` (``len``, ``in``, equality, hashing; iteration lists the
    continuous conditions first, each group in attribute order).

    Parameters
    ----------
    conditions : iterable of Condition

    Raises
    ------
    ParameterError
        Two conditions on the same attribute.

    Examples
    --------
    >>> p = Pattern([Condition.continuous("exclusive_ns[order:GET /order]", 80_000_000, 102_000_000),
    ...              Condition.categorical("attr[version]", "1.4")])
    >>> p.describe()
    'order:GET /order exclusive in [80 ms, 102 ms) and version = 1.4'
    """

    __slots__ = ("_conditions",)

    def __init__(self, conditions: Iterable[Condition] = ()):
        items = sorted(set(conditions), key=lambda c: (c.kind == "categorical", c.attribute))
        seen: set[str] = set()
        for c in items:
            if not isinstance(c, Condition):
                raise ParameterError(f"A pattern holds Condition objects. Got {c!r} instead.")
            if c.attribute in seen:
                raise ParameterError(
                    f"A pattern holds at most one condition per attribute; {c.attribute!r} appears twice."
                )
            seen.add(c.attribute)
        self._conditions: tuple[Condition, ...] = tuple(items)

    @classmethod
    def _from_iterable(cls, it: Iterable[Condition]) -> "Pattern":
        return cls(it)

    def __iter__(self) -> Iterator[Condition]:
        return iter(self._conditions)

    def __len__(self) -> int:
        return len(self._conditions)

    def __contains__(self, item: object) -> bool:
        return item in self._conditions

    def __hash__(self) -> int:
        return hash(self._conditions)

    def __repr__(self) -> str:
        return f"Pattern({list(self._conditions)!r})"

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """The conditions: continuous ones first, each group sorted by attribute."""
        return self._conditions

    @property
    def attributes(self) -> tuple[str, ...]:
        """The attributes the conditions are on."""
        return tuple(c.attribute for c in self._conditions)

    def satisfied_by(self, frame: Any) -> np.ndarray:
        """Mask of the requests satisfying every condition, ndarray of bool of shape (n_requests,).

        The empty pattern is satisfied by every request (a universal quantifier over no condition).
        """
        frame = getattr(frame, "frame", frame)
        ok = np.ones(frame.height, dtype=bool)
        for c in self._conditions:
            ok &= c.satisfied_by(frame)
        return ok

    def quality(self, frame: Any, interval: LatencyInterval, *, latency_column: str = "latency_ns") -> "PatternQuality":
        """Precision, recall and F-score ``Q(P, I)`` of eqs. (2)-(5) on a trace table."""
        frame = getattr(frame, "frame", frame)
        positives = interval.contains(frame.get_column(latency_column).to_numpy())
        sat = self.satisfied_by(frame)
        tp = int(np.count_nonzero(sat & positives))
        fp = int(np.count_nonzero(sat & ~positives))
        return pattern_quality(tp, fp, int(np.count_nonzero(positives)))

    def describe(self) -> str:
        """The conditions in words joined by ``" and "`` (``"any request"`` when empty)."""
        if not self._conditions:
            return "any request"
        return " and ".join(c.describe() for c in self._conditions)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: ``conditions`` (list of condition dicts) and ``words``."""
        return {"conditions": [c.to_dict() for c in self._conditions], "words": self.describe()}


# --------------------------------------------------------------------------------------------
# Quality
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PatternQuality:
    """Counts and scores of one pattern against one latency interval (eqs. 3-5).

    Attributes
    ----------
    tp, fp : int
        True positives ``|tp|`` and false positives ``|fp|`` (eq. 3).
    n_positives : int
        ``|R_pos|``, the requests whose latency is in the interval (eq. 2).
    precision, recall, f_score : float
        Eqs. (4) and (5). Precision is 0 when no request satisfies the pattern, recall is 0 when
        there is no positive, and the F-score is 0 when ``tp == 0``.
    """

    tp: int
    fp: int
    n_positives: int
    precision: float
    recall: float
    f_score: float

    @property
    def support(self) -> int:
        """Requests satisfying the pattern, ``|tp| + |fp|``."""
        return self.tp + self.fp


def pattern_quality(tp: int, fp: int, n_positives: int) -> PatternQuality:
    """Precision, recall and F-score from the counts (eqs. 4-5), checked.

    The scores are :func:`~tracesleuth.analyses.metrics.precision_recall_f`'s (the pattern
    searches rank candidates by :func:`~tracesleuth.analyses.metrics.f_score_from_counts`).

    Parameters
    ----------
    tp, fp : int
        True and false positives, ``>= 0``.
    n_positives : int
        ``|R_pos|``, ``>= tp``.

    Examples
    --------
    >>> q = pattern_quality(8, 2, 10)
    >>> (q.precision, q.recall, round(q.f_score, 3))
    (0.8, 0.8, 0.8)
    """
    tp, fp, n_positives = int(tp), int(fp), int(n_positives)
    if tp < 0 or fp < 0 or n_positives < tp:
        raise ParameterError(
            f"Pattern counts must have 0 <= tp <= n_positives and fp >= 0. "
            f"Got tp={tp}, fp={fp}, n_positives={n_positives} instead."
        )
    return PatternQuality(tp, fp, n_positives, *precision_recall_f(tp, fp, n_positives))
