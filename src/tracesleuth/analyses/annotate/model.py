"""Performance annotations: the three kinds, as probability distributions of a metric, in words.

Rogora et al., *Performance annotations for cloud computing*, HotCloud 2017, Section 2: an
annotation is "a probability distribution for a set of measured values (the dependent variable)
that change in response to some ... feature (the independent variable)", e.g.
``delete(path): time ~ Normal(2 ms x depth(path), 1 ms)``. Section 3 derives three kinds, each a
frozen dataclass here:

* :class:`CorrelatedAnnotation`: ``y ~ Normal(h(x), sd)``, ``h`` a polynomial of degree 1 to 3
  of one feature ``x``;
* :class:`ClusteredAnnotation`: ``y`` from a mixture of normal clusters, each "described by a
  centroid and a standard deviation" (and, so that the mixture is a distribution, the share of
  the values it holds: its ``weight``), whatever the features;
* :class:`ConstantAnnotation`: ``y`` constant (Figure 1c), its value and the small spread seen.

Every annotation derived by :mod:`.derive` also carries its :class:`Calibration`: how far the
mean normal score of a window of calls strays from the annotation on the traffic it was derived
from, within a window and between windows (a random-effects model; :mod:`.check` tests new
windows against it). Annotations without one (written by hand, or by an earlier version) are
checked against the annotation's own distribution alone.

Every kind answers the same questions (:class:`Annotation`): the expected value and the
distribution at given features (``expected``, ``cdf``, ``ppf``, ``sample``), its human-readable
form (``text``) and its file form (``to_dict``; :func:`annotation_from_dict` reads it back,
:mod:`.fileformat` writes and reads whole files). Metrics (:data:`METRICS`) are measured in
integer-valued units: ``time`` and ``self_time`` in nanoseconds, ``memory`` in bytes. A normal
distribution puts some probability below zero, where no time or memory lies: ``sample`` and
``ppf`` clip at 0.

References
----------
J. Rogora, A. Carzaniga, A. Diwan, M. Hauswirth and R. Soulé. "Performance annotations for
cloud computing". HotCloud 2017. https://www.usenix.org/conference/hotcloud17/program/presentation/rogora
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.special import ndtr, ndtri

from ...units import format_duration_ns

__all__ = ["Annotation", "Calibration", "Cluster", "ClusteredAnnotation", "ConstantAnnotation", "CorrelatedAnnotation", "KINDS",
           "METRICS", "Metric", "annotation_from_dict", "format_instant", "format_metric", "format_value"]


@dataclass(frozen=True)
class Metric:
    """A target metric (Section 3, "Target metrics").

    Attributes
    ----------
    name : str
        ``time``, ``self_time`` or ``memory``.
    unit : str
        ``ns`` or ``bytes``.
    description : str
    """

    name: str
    unit: str
    description: str


#: The target metrics, by name.
METRICS = {
    "time": Metric("time", "ns", "the span's duration (wall time of the call)"),
    "self_time": Metric("self_time", "ns", "the span's exclusive (self) time: its duration minus its synchronous "
                                           "children's"),
    "memory": Metric("memory", "bytes", "the peak memory allocated during the call (tracesleuth.memory.peak_bytes, "
                                        "recorded by tracesleuth.instrument with memory=True)"),
}


def format_value(value: float, unit: str) -> str:
    """A metric value in words: ``"2 ms"`` for nanoseconds, ``"1.5 KiB"`` for bytes, else the number.

    Examples
    --------
    >>> format_value(2_000_000, "ns"), format_value(1536, "bytes"), format_value(0.25, "1")
    ('2 ms', '1.5 KiB', '0.25')
    """
    if unit == "ns":
        return format_duration_ns(value)
    if unit == "bytes":
        magnitude = abs(value)
        for factor, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if magnitude >= factor:
                return f"{value / factor:.4g} {name}"
        return f"{value:.4g} B"
    return f"{value:.4g}"


def format_instant(ns: int | None) -> str:
    """A Unix time in ns as ``YYYY-MM-DD HH:MM`` UTC (the periods of a check); a dash for None.

    Examples
    --------
    >>> format_instant(1674999000 * 10**9), format_instant(None)
    ('2023-01-29 13:30', '—')
    """
    from datetime import datetime, timezone

    return "—" if ns is None else datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def format_metric(value: float | None, metric: str) -> str:
    """A value of ``metric`` in words (its unit from :data:`METRICS`); a dash for None.

    Examples
    --------
    >>> format_metric(1_500_000, "time"), format_metric(None, "memory")
    ('1.5 ms', '—')
    """
    if value is None:
        return "—"
    return format_value(value, METRICS[metric].unit if metric in METRICS else "1")


def _term(coefficient: float, unit: str, feature: str, power: int) -> str:
    value = format_value(abs(coefficient), unit)
    if power == 0:
        return value
    return f"{value} × {feature}" + ("" if power == 1 else "²" if power == 2 else "³")


@dataclass(frozen=True)
class Calibration:
    """How an annotation's windows of calls vary on the traffic it was derived from (:mod:`.derive`).

    The model (one-way random effects on the clipped normal scores ``z`` of the calls,
    :mod:`.check`): call ``i`` of window ``j`` has ``z_ij = mu + b_j + e_ij`` with
    ``b_j ~ Normal(0, between_sd²)`` (windows differ: load, the hour, the instances serving)
    and ``e_ij`` of variance ``score_sd²`` (calls differ within a window). The mean score of a
    new window of ``n`` calls is then ``Normal(mu, score_sd² / n + between_sd² + mean_se²)``.

    Attributes
    ----------
    windows : int
        Windows of calls it was estimated from (>= 1).
    score_mean : float
        ``mu``, the mean window score (0 when the annotation fits its data exactly).
    score_sd : float
        Within-window standard deviation of the scores (> 0).
    between_sd : float
        Standard deviation of the window means around ``mu`` beyond the within-window noise (>= 0).
    mean_se : float
        Standard error of ``mu`` (>= 0).
    pooled : bool
        ``between_sd`` is the deployment's (too few windows of this operation to estimate its own).
    """

    windows: int
    score_mean: float
    score_sd: float
    between_sd: float
    mean_se: float
    pooled: bool = False

    def window_sd(self, n: np.ndarray) -> np.ndarray:
        """Standard deviation of the mean score of windows of ``n`` calls (ndarray) under the model."""
        return np.sqrt(self.score_sd ** 2 / np.asarray(n, dtype=np.float64) + self.between_sd ** 2
                       + self.mean_se ** 2)

    def to_dict(self) -> dict[str, Any]:
        return {"windows": int(self.windows), "score_mean": float(self.score_mean), "score_sd": float(self.score_sd),
                "between_sd": float(self.between_sd), "mean_se": float(self.mean_se), "pooled": bool(self.pooled)}


@dataclass(frozen=True)
class Annotation:
    """What every kind of annotation holds and answers (the kinds are its subclasses).

    Attributes
    ----------
    operation : str
        The operation key ``service:operation``.
    metric : str
        A name of :data:`METRICS`.
    n_samples : int
        Measurements it was derived from.
    calibration : Calibration or None
        How its windows varied where it was derived (None: not known; :mod:`.check` then takes
        the annotation's distribution as exact).
    """

    operation: str
    metric: str
    n_samples: int
    calibration: Calibration | None = None

    kind: ClassVar[str] = ""
    #: Whether it depends on a feature (``expected``, ``cdf``... then need ``x``).
    uses_feature: ClassVar[bool] = False

    @property
    def unit(self) -> str:
        """The metric's unit (``ns``, ``bytes``)."""
        return METRICS[self.metric].unit if self.metric in METRICS else "1"

    @property
    def key(self) -> tuple[str, str]:
        """``(operation, metric)``: at most one annotation per key in a set."""
        return self.operation, self.metric

    def expected(self, x: np.ndarray | None = None) -> np.ndarray:  # pragma: no cover - abstract
        """The mean of the metric at features ``x`` (ndarray of shape (n,)), shape (n,); (1,) when no feature."""
        raise NotImplementedError

    def variance(self, x: np.ndarray | None = None) -> np.ndarray:  # pragma: no cover - abstract
        """The variance of the metric at features ``x``, same shape as :meth:`expected`."""
        raise NotImplementedError

    def cdf(self, y: np.ndarray, x: np.ndarray | None = None) -> np.ndarray:  # pragma: no cover - abstract
        """P(metric <= y) at features ``x``, shape (n,)."""
        raise NotImplementedError

    def ppf(self, u: np.ndarray, x: np.ndarray | None = None) -> np.ndarray:  # pragma: no cover - abstract
        """The ``u``-quantiles (0 < u < 1) at features ``x``, clipped at 0, shape (n,)."""
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, x: np.ndarray | None = None, size: int | None = None) -> np.ndarray:
        """Draws of the metric (clipped at 0), one per feature value of ``x`` (or ``size`` without a feature)."""
        n = len(x) if x is not None and self.uses_feature else (size if size is not None else 1)
        return self.ppf(rng.uniform(1e-12, 1 - 1e-12, n), x)

    def text(self) -> str:  # pragma: no cover - abstract
        """The human-readable form, e.g. ``files:delete: time ~ Normal(2 ms × depth(path), sd 1 ms)``."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The file form (JSON-safe); :func:`annotation_from_dict` reads it back."""
        out = {"operation": self.operation, "metric": self.metric, "kind": self.kind, "samples": self.n_samples}
        if self.calibration is not None:
            out["calibration"] = self.calibration.to_dict()
        return out


@dataclass(frozen=True)
class CorrelatedAnnotation(Annotation):
    """``metric ~ Normal(h(feature), sd)``, ``h`` a polynomial (Section 3, "correlated annotations").

    Attributes
    ----------
    feature : str
        The feature, as written by :func:`tracesleuth.instrument.feature_name` (``depth(path)``)
        or a span attribute key (``db.response.returned_rows``).
    coefficients : tuple of float
        ``h``'s coefficients in ascending powers (``c0 + c1 x + c2 x² + c3 x³``), in the
        metric's unit per power of the feature's; the degree is ``len - 1`` (1 to 3).
    sd : float
        Standard deviation of the residuals, the metric's unit (>= 0).
    correlation : float
        Pearson correlation of the feature and the metric, in [-1, 1].
    relative_error : float
        Root-mean-square error of ``h`` over the mean of the metric.
    feature_range : tuple of (float, float)
        Least and greatest feature value seen: ``h`` is extrapolated outside.
    n_outliers : int
        Calls set aside as outliers when it was derived (:mod:`.derive`, step 3).
    """

    feature: str = ""
    coefficients: tuple = (0.0,)
    sd: float = 0.0
    correlation: float = 0.0
    relative_error: float = 0.0
    feature_range: tuple = (0.0, 0.0)
    n_outliers: int = 0

    kind: ClassVar[str] = "correlated"
    uses_feature: ClassVar[bool] = True

    @property
    def degree(self) -> int:
        return len(self.coefficients) - 1

    def expected(self, x=None) -> np.ndarray:
        if x is None:
            raise ValueError(f"{self.operation} {self.metric}: a correlated annotation needs the feature {self.feature}")
        return np.polynomial.polynomial.polyval(np.asarray(x, dtype=np.float64), self.coefficients)

    def variance(self, x=None) -> np.ndarray:
        return np.full(np.shape(self.expected(x)), self.sd ** 2)

    def cdf(self, y, x=None) -> np.ndarray:
        mean = self.expected(x)
        y = np.asarray(y, dtype=np.float64)
        if self.sd == 0:
            return (y >= mean).astype(np.float64)
        return ndtr((y - mean) / self.sd)

    def ppf(self, u, x=None) -> np.ndarray:
        return np.maximum(self.expected(x) + self.sd * ndtri(np.asarray(u, dtype=np.float64)), 0.0)

    def text(self) -> str:
        terms = [(c, k) for k, c in enumerate(self.coefficients) if c != 0 or k == 0]
        if len(terms) > 1 and terms[0][0] == 0:
            terms = terms[1:]
        mean = ""
        for i, (c, k) in enumerate(terms):
            sign = ("-" if c < 0 else "") if i == 0 else (" - " if c < 0 else " + ")
            mean += sign + _term(c, self.unit, self.feature, k)
        return f"{self.operation}: {self.metric} ~ Normal({mean}, sd {format_value(self.sd, self.unit)})"

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "feature": self.feature, "coefficients": [float(c) for c in self.coefficients],
                "sd": float(self.sd), "correlation": float(self.correlation),
                "relative_error": float(self.relative_error), "feature_range": [float(v) for v in self.feature_range],
                "outliers": int(self.n_outliers)}


@dataclass(frozen=True)
class ConstantAnnotation(Annotation):
    """``metric = value`` (Figure 1c: the memory of ``getOwner`` whatever its input).

    Attributes
    ----------
    value : float
        The mean, the metric's unit.
    sd : float
        The spread seen (standard deviation; 0 when every measurement was equal).
    """

    value: float = 0.0
    sd: float = 0.0

    kind: ClassVar[str] = "constant"

    def expected(self, x=None) -> np.ndarray:
        return np.full(1 if x is None else len(x), float(self.value))

    def variance(self, x=None) -> np.ndarray:
        return np.full(1 if x is None else len(x), float(self.sd) ** 2)

    def cdf(self, y, x=None) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        if self.sd == 0:
            return (y >= self.value).astype(np.float64)
        return ndtr((y - self.value) / self.sd)

    def ppf(self, u, x=None) -> np.ndarray:
        return np.maximum(self.value + self.sd * ndtri(np.asarray(u, dtype=np.float64)), 0.0)

    def text(self) -> str:
        spread = f", sd {format_value(self.sd, self.unit)}" if self.sd else ""
        return f"{self.operation}: {self.metric} = {format_value(self.value, self.unit)} (constant{spread})"

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "value": float(self.value), "sd": float(self.sd)}


@dataclass(frozen=True)
class Cluster:
    """One cluster of a clustered annotation.

    Attributes
    ----------
    centroid : float
        The metric's unit.
    sd : float
        Standard deviation of its values (>= 0).
    weight : float
        Share of the measurements it holds, in (0, 1]; the weights of an annotation sum to 1.
    """

    centroid: float
    sd: float
    weight: float

    def to_dict(self) -> dict[str, float]:
        return {"centroid": float(self.centroid), "sd": float(self.sd), "weight": float(self.weight)}


@dataclass(frozen=True)
class ClusteredAnnotation(Annotation):
    """``metric ~ Σ weight_k Normal(centroid_k, sd_k)`` (Section 3, "clustered annotations").

    Attributes
    ----------
    clusters : tuple of Cluster
        By increasing centroid.
    """

    clusters: tuple = ()

    kind: ClassVar[str] = "clustered"
    #: Points of the grid on which the mixture's quantile function is interpolated.
    GRID_POINTS: ClassVar[int] = 4097

    def _arrays(self):
        c = np.array([k.centroid for k in self.clusters], dtype=np.float64)
        s = np.array([k.sd for k in self.clusters], dtype=np.float64)
        w = np.array([k.weight for k in self.clusters], dtype=np.float64)
        return c, s, w / w.sum()

    def expected(self, x=None) -> np.ndarray:
        c, s, w = self._arrays()
        return np.full(1 if x is None else len(x), float(w @ c))

    def variance(self, x=None) -> np.ndarray:
        c, s, w = self._arrays()
        mean = w @ c
        return np.full(1 if x is None else len(x), float(w @ (s ** 2 + c ** 2) - mean ** 2))

    def cdf(self, y, x=None) -> np.ndarray:
        c, s, w = self._arrays()
        y = np.asarray(y, dtype=np.float64)[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(s > 0, (y - c) / np.where(s > 0, s, 1.0), np.where(y >= c, np.inf, -np.inf))
        return ndtr(z) @ w

    def ppf(self, u, x=None) -> np.ndarray:
        c, s, w = self._arrays()
        low = max(float(np.min(c - 8 * s)), 0.0)
        high = float(np.max(c + 8 * s))
        if high <= low:
            return np.full(np.shape(u), low)
        grid = np.linspace(low, high, self.GRID_POINTS)
        cdf = self.cdf(grid)
        cdf, first = np.unique(cdf, return_index=True)  # strictly increasing for the interpolation
        return np.interp(np.asarray(u, dtype=np.float64), cdf, grid[first])

    def text(self) -> str:
        parts = [f"{k.weight:.0%} Normal({format_value(k.centroid, self.unit)}, sd {format_value(k.sd, self.unit)})"
                 for k in self.clusters]
        return f"{self.operation}: {self.metric} ~ " + " | ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "clusters": [k.to_dict() for k in self.clusters]}


#: The kinds of annotation, by name.
KINDS = {cls.kind: cls for cls in (CorrelatedAnnotation, ClusteredAnnotation, ConstantAnnotation)}


def annotation_from_dict(entry: dict[str, Any]) -> Annotation:
    """An annotation from its file form (:meth:`Annotation.to_dict`), values already checked.

    Raises
    ------
    KeyError, ValueError
        A field is missing or has a wrong value (:mod:`.fileformat` checks first and names the
        line).
    """
    kind = KINDS[entry["kind"]]
    common = {"operation": entry["operation"], "metric": entry["metric"], "n_samples": int(entry.get("samples", 0))}
    if entry.get("calibration") is not None:
        c = entry["calibration"]
        common["calibration"] = Calibration(int(c["windows"]), float(c["score_mean"]), float(c["score_sd"]),
                                            float(c["between_sd"]), float(c.get("mean_se", 0.0)),
                                            bool(c.get("pooled", False)))
    if kind is CorrelatedAnnotation:
        return kind(**common, feature=entry["feature"], coefficients=tuple(float(c) for c in entry["coefficients"]),
                    sd=float(entry["sd"]), correlation=float(entry.get("correlation", 0.0)),
                    relative_error=float(entry.get("relative_error", 0.0)),
                    feature_range=tuple(float(v) for v in entry.get("feature_range", (0.0, 0.0))),
                    n_outliers=int(entry.get("outliers", 0)))
    if kind is ConstantAnnotation:
        return kind(**common, value=float(entry["value"]), sd=float(entry.get("sd", 0.0)))
    return kind(**common, clusters=tuple(Cluster(float(k["centroid"]), float(k["sd"]), float(k["weight"]))
                                         for k in entry["clusters"]))
