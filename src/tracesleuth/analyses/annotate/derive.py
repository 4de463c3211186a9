"""Deriving an annotation from measurements (Rogora et al., HotCloud 2017, Section 3, "Formulating annotations").

For one operation and one metric, with measurements ``y`` and candidate features ``x_j``:

1. **Bad measurements**: NaN, infinite or negative values are left out and counted (a note
   names the operation); fewer than ``min_samples`` left: no annotation, and the reason.
2. **Constant** (Figure 1c; "better to explicitly annotate the function so as to indicate a
   constant behavior" than a polynomial with coefficients near 0): every value equal, or a
   coefficient of variation (sample standard deviation over the mean) at most
   ``constant_tolerance``.
3. **Outliers** (not in the paper; ``outlier_fence=None`` turns it off): a call preempted by
   the operating system, a garbage collection or a page fault takes many times its usual time,
   and one such value among hundreds decides a Pearson correlation and a least-squares fit.
   Values beyond Tukey's far-out fences, more than ``outlier_fence`` interquartile ranges
   below the first or above the third quartile, are set aside from steps 4-5 when they are at
   most :data:`MAX_OUTLIER_SHARE` of the calls (more are a mode of their own, not outliers); the
   correlated annotation records how many (``outliers``). A clustered annotation is made of
   every value: k-means gives outliers a cluster of their own.
4. **Feature**: "the feature with the highest PCC value greater than some threshold": the
   Pearson correlation coefficient of each candidate with ``y``, taken in absolute value (a
   cost that falls as a feature grows is a relation too), at least ``min_correlation``. A
   candidate must be present in at least ``feature_coverage`` of the calls (the fit and its
   check use the calls that have it) and vary; a feature left out for either reason is noted,
   naming the operation.
5. **Correlated**: least-squares polynomials of the chosen feature, "of increasing degree,
   from degree 1 (linear) to degree 3 (cubic)", the first whose *relative error*, the
   root-mean-square error over the mean of ``y``, is at most ``max_relative_error`` (a degree
   needs more distinct feature values than itself). The annotation's standard deviation is that
   of the residuals (``n - degree - 1`` degrees of freedom); below 1e-9 of the mean it is 0 (an
   exact relation, as the memory of a list of ``n`` items).
6. **Clustered**, when no feature qualifies or no polynomial fits: a mixture of normals chosen by
   the **Bayesian information criterion** (``clustering="bic"``, the default; not in the paper):
   scikit-learn's ``GaussianMixture`` with ``k = 1, 2, ...`` components fitted (EM, k-means
   initialization seeded by ``random_state``) to the values (standardized; at most
   :data:`FIT_POINTS` of them, a seeded sample), and the ``k`` of least BIC kept among those
   whose every component holds at least ``min_cluster_calls`` of the fitted values (stopping
   after :data:`BIC_PATIENCE` values of ``k`` in a row that do not improve it; Schwarz 1978,
   doi:10.1214/aos/1176344136; the floor keeps a component's mean and standard deviation
   estimated from enough calls: with 20, the standard deviation's relative standard error is
   about 1 / sqrt(2 × 20) = 16 %). Each component is a cluster: its mean, standard deviation
   and weight. Why not the paper's elbow: it fixes a ratio of errors, not a model of the
   values, and on one minute of recorded traffic it gave 235 of 237 operations several
   clusters each of a few calls (issue 30); the criterion trades the fit's likelihood against
   the parameters it costs, and stops where the data no longer pays for another cluster.
   The paper's rule stays (``clustering="elbow"``, with ``--paper``): k-means on the sorted values,
   ``k`` from 1 up: "we increase the number of clusters until the ratio between the errors in
   subsequent runs is below a threshold (i.e., we reach the elbow)". The ratio taken is
   ``SSE(k - 1) / SSE(k)`` (>= 1: how many times smaller the error got by adding a cluster); the
   first ``k`` where it is below ``elbow_ratio`` is not taken and ``k - 1`` clusters are kept
   (also when a run leaves no error, or at ``max_clusters``). One deviation, ``elbow_lookahead``
   (1 by default, 0 for the paper's rule): ``k + 1`` clusters are tried too before stopping, and
   taken when they pay. The largest errors of timing data come from a few far values (calls
   preempted for milliseconds): a database call after a 1 ms delay was 96 % at 1.14 ms, 4 % at
   4.5 ms and a few at 25 ms; two clusters (the far few apart) divided the error by less than 3,
   three by much more, and the paper's rule kept one normal, N(1.3 ms, sd 1.4 ms), which puts
   17 % of its mass below 0.2 ms where no call lies. Each cluster: its centroid, standard
   deviation and share of the values.

Defaults (the paper gives no values; these are documented choices, tested on the planted cases
of :mod:`.synthetic` and the SQLite workload of :mod:`.workload`): ``min_correlation=0.5``
(a moderate linear association, Cohen's convention), ``min_cluster_calls=20`` (step 6),
``max_relative_error=0.5`` (timing noise
of a third of the mean is common on a shared machine), ``outlier_fence=3`` (Tukey's far out),
``constant_tolerance=0.01`` (1 %), ``elbow_ratio=4``: k-means splits one normal cluster in two
with a ratio of about 2.75 (in one dimension the error of a normal falls to 1 - 2/π of itself),
and a skewed one (log-normal timing) with about 3, so a threshold of 4 keeps one cluster for one
mode and separates modes whose gap is larger than about their spread.

k-means is scikit-learn's (``KMeans``, the best of :data:`N_INIT` k-means++ initializations,
seeded by ``random_state``), in one thread, on a sketch of the sorted values of at most
:data:`SKETCH_POINTS` weighted points (their means over runs of equal count: in one dimension a
cluster is an interval of the sorted values, which a run seldom straddles); every value then
goes to its nearest centroid and the errors of the elbow rule are the values' own. On 10,000
values this is about 20 times faster than k-means on the values themselves, which made 1,000
operations take minutes. Seeds at quantiles of
the values, tried first, put every seed in the bulk of a skewed distribution and never found a
tail of 2 % ten times slower (database calls after a delay: the elbow then kept one cluster, a
normal with the tail's spread); k-means++ seeds far apart values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .calibration import MIN_OWN_WINDOWS
from .model import Annotation, Cluster, ClusteredAnnotation, ConstantAnnotation, CorrelatedAnnotation
from .notes import (BadMeasurements, CalibrationPooled, CalibrationUnknown, FeatureConstant, FeatureMissing,
                    MemoryPartlyRecorded, NoPolynomialFit, TooFewMeasurements)

__all__ = ["CLUSTERINGS", "DEFAULTS", "Derivation", "cluster_values", "derive_annotation", "derive_annotations",
           "mixture_clusters"]

#: Default derivation settings (the estimator's defaults; rationale in the module docstring).
DEFAULTS = {"min_samples": 10, "min_correlation": 0.5, "max_relative_error": 0.5, "max_degree": 3,
            "constant_tolerance": 0.01, "elbow_ratio": 4.0, "max_clusters": 8, "feature_coverage": 0.95,
            "outlier_fence": 3.0, "elbow_lookahead": 1, "clustering": "bic", "min_cluster_calls": 20}
#: How a clustered annotation's clusters are chosen (step 6).
CLUSTERINGS = ("bic", "elbow")
#: The mixture is fitted on at most this many values (a seeded sample): BIC's choice is made on
#: as many, and 16,000 values of one operation over six minutes took 0.4 s per k.
FIT_POINTS = 2000
#: More components are not tried once this many in a row have not lowered the BIC (it is
#: near-convex in k: the likelihood gains shrink while the penalty grows linearly).
BIC_PATIENCE = 2
#: Regularization of a component's variance, in the values' variance: a component narrower than
#: 1 % of the operation's spread is a point (the constant annotation's 1 %), and EM does not
#: collapse on repeated values (durations recorded in whole microseconds).
MIN_COMPONENT_VARIANCE = 1e-4
#: The largest share of calls set aside as outliers (step 3); beyond it they are kept.
MAX_OUTLIER_SHARE = 0.05
#: k-means++ initializations per k-means fit (the best is kept).
N_INIT = 4
#: k-means runs on at most this many points: the sorted values' means over runs of equal count,
#: weighted by the count (then every value goes to its nearest centroid and the errors are the
#: values' own).
SKETCH_POINTS = 1000


@dataclass
class Derivation:
    """What deriving one operation's metric gave.

    Attributes
    ----------
    annotation : Annotation or None
        None when none could be derived (``reason`` says why).
    reason : TooFewMeasurements or None
        Why there is no annotation (None when there is one; ``str(reason)`` in words).
    notes : list of Note
        What was left out on the way (bad measurements, features absent from some calls...), as
        records (:mod:`.notes`).
    correlations : dict of str to float
        Pearson correlation of each candidate feature with the metric.
    """

    annotation: Annotation | None = None
    reason: TooFewMeasurements | None = None
    notes: list = field(default_factory=list)
    correlations: dict = field(default_factory=dict)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    xc, yc = x - x.mean(), y - y.mean()
    denominator = np.sqrt((xc @ xc) * (yc @ yc))
    return float(xc @ yc / denominator) if denominator > 0 else 0.0


def cluster_values(y: np.ndarray, *, elbow_ratio: float = 4.0, max_clusters: int = 8, elbow_lookahead: int = 1,
                   random_state=0) -> tuple[list[Cluster], list]:
    """k-means with the elbow rule on one metric's values (module docstring, step 6).

    Parameters
    ----------
    y : ndarray of shape (n,)
        Finite values, n >= 1.
    elbow_ratio : float, default=4.0
    max_clusters : int, default=8
    elbow_lookahead : int, default=1
        How many more clusters must also improve the error less than ``elbow_ratio`` before
        the elbow is taken (0: the paper's rule, the first ratio below the threshold stops).
    random_state : int, numpy RandomState or None, default=0
        Seeds the k-means++ initializations.

    Returns
    -------
    clusters : list of Cluster
        By increasing centroid.
    errors : list of float
        The sum of squared errors of ``k = 1, 2, ...`` clusters, as far as they were computed.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.r_[rng.normal(10.0, 1.0, 600), rng.normal(30.0, 2.0, 400)]
    >>> [(round(c.centroid), round(c.weight, 1)) for c in cluster_values(y)[0]]
    [(10, 0.6), (30, 0.4)]
    """
    from sklearn.cluster import KMeans

    y = np.sort(np.asarray(y, dtype=np.float64))
    labels = [np.zeros(len(y), dtype=np.int64)]
    errors = [float(((y - y.mean()) ** 2).sum())]
    most = min(max_clusters, len(np.unique(y)), SKETCH_POINTS)
    # The sorted values in at most SKETCH_POINTS runs of equal count: their means, weighted.
    starts = np.linspace(0, len(y), min(len(y), SKETCH_POINTS) + 1).astype(np.int64)[:-1]
    weights = np.diff(np.r_[starts, len(y)]).astype(np.float64)
    points = (np.add.reduceat(y, starts) / weights).reshape(-1, 1)

    def fit(k: int) -> None:
        km = KMeans(n_clusters=k, init="k-means++", n_init=N_INIT, random_state=random_state).fit(
            points, sample_weight=weights)
        centers = np.sort(km.cluster_centers_.ravel())
        # One dimension: each cluster is the interval between the midpoints of its neighbours.
        trial = np.searchsorted((centers[1:] + centers[:-1]) / 2, y)
        sums = np.bincount(trial, weights=y, minlength=k)
        counts = np.bincount(trial, minlength=k)
        means = np.divide(sums, counts, out=np.zeros(k), where=counts > 0)
        errors.append(float(((y - means[trial]) ** 2).sum()))
        labels.append(trial)

    def pays(k: int) -> bool:  # adding the k-th cluster divided the error by at least elbow_ratio
        return errors[k - 1] == 0 or errors[k - 2] / errors[k - 1] >= elbow_ratio

    chosen = 1
    while chosen < most and errors[chosen - 1] > 0:
        # Clusters chosen + 1 ... chosen + 1 + lookahead: the first that pays is taken.
        taken = None
        for k in range(chosen + 1, min(chosen + 1 + elbow_lookahead, most) + 1):
            if len(errors) < k:
                fit(k)
            if pays(k):
                taken = k
                break
        if taken is None:
            break
        chosen = taken
    clusters = []
    n = len(y)
    final = labels[chosen - 1]
    for label in np.unique(final):
        values = y[final == label]
        clusters.append(Cluster(centroid=float(values.mean()), sd=float(values.std(ddof=1)) if len(values) > 1 else 0.0,
                                weight=len(values) / n))
    return sorted(clusters, key=lambda c: c.centroid), errors


def mixture_clusters(y: np.ndarray, *, max_clusters: int = 8, min_cluster_calls: int = 20,
                     random_state=0) -> tuple[list[Cluster], dict]:
    """A mixture of normals chosen by BIC, every component at least ``min_cluster_calls`` values (step 6).

    Parameters
    ----------
    y : ndarray of shape (n,)
        Finite values, n >= 1, not all equal.
    max_clusters : int, default=8
    min_cluster_calls : int, default=20
    random_state : int, numpy RandomState or None, default=0
        Seeds the sample and the fits.

    Returns
    -------
    clusters : list of Cluster
        By increasing centroid.
    bic : dict of int to float
        The criterion of each ``k`` fitted that met the floor.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.r_[rng.normal(10.0, 1.0, 600), rng.normal(30.0, 2.0, 400)]
    >>> [(round(c.centroid), round(c.weight, 1)) for c in mixture_clusters(y)[0]]
    [(10, 0.6), (30, 0.4)]
    """
    from sklearn.mixture import GaussianMixture
    from sklearn.utils import check_random_state

    rng = check_random_state(random_state)
    y = np.asarray(y, dtype=np.float64)
    fit = y if len(y) <= FIT_POINTS else rng.choice(y, FIT_POINTS, replace=False)
    center, scale = float(fit.mean()), float(fit.std())
    if scale == 0:
        center, scale = float(y.mean()), float(y.std()) or 1.0
    z = ((fit - center) / scale).reshape(-1, 1)
    best, bics = None, {}
    for k in range(1, min(max_clusters, len(np.unique(fit))) + 1):  # no more components than distinct values
        if k > 1 and k * min_cluster_calls > len(fit):
            break
        model = GaussianMixture(k, reg_covar=MIN_COMPONENT_VARIANCE, random_state=rng).fit(z)
        if k > 1 and model.weights_.min() * len(fit) < min_cluster_calls:
            continue
        bics[k] = float(model.bic(z))
        if best is None or bics[k] < bics[best[0]]:
            best = (k, model)
        elif k - best[0] >= BIC_PATIENCE:
            break
    model = best[1]
    clusters = [Cluster(centroid=center + scale * float(m), sd=scale * float(np.sqrt(v)), weight=float(w))
                for m, v, w in zip(model.means_.ravel(), model.covariances_.ravel(), model.weights_)]
    return sorted(clusters, key=lambda c: c.centroid), bics


def derive_annotation(operation: str, metric: str, y: np.ndarray, features: dict[str, np.ndarray], *,
                      min_samples: int = 10, min_correlation: float = 0.5, max_relative_error: float = 0.5,
                      max_degree: int = 3, constant_tolerance: float = 0.01, elbow_ratio: float = 4.0,
                      max_clusters: int = 8, feature_coverage: float = 0.95,
                      outlier_fence: float | None = 3.0, elbow_lookahead: int = 1, clustering: str = "bic",
                      min_cluster_calls: int = 20, random_state=0) -> Derivation:
    """The annotation of one operation's metric (the steps and defaults of the module docstring).

    Parameters
    ----------
    operation : str
        Operation key (named in reasons and notes).
    metric : str
        A name of :data:`~.model.METRICS`.
    y : ndarray of shape (n,)
        The measurements, the metric's unit.
    features : dict of str to ndarray of shape (n,)
        Candidate features, NaN where a call has none.
    min_samples, min_correlation, max_relative_error, max_degree, constant_tolerance, elbow_ratio, \
max_clusters, feature_coverage, outlier_fence, elbow_lookahead, clustering, min_cluster_calls
        As :class:`~.analysis.PerformanceAnnotations`.
    random_state : int, numpy RandomState or None, default=0
        Seeds the mixture (:func:`mixture_clusters`) or k-means (:func:`cluster_values`).

    Returns
    -------
    Derivation

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> depth = rng.integers(1, 10, 500).astype(float)
    >>> time_ns = 2e6 * depth + rng.normal(0, 1e5, 500)
    >>> d = derive_annotation("files:delete", "time", time_ns, {"depth(path)": depth})
    >>> d.annotation.kind, d.annotation.feature, d.annotation.degree
    ('correlated', 'depth(path)', 1)
    """
    out = Derivation()
    y = np.asarray(y, dtype=np.float64)
    good = np.isfinite(y) & (y >= 0)
    n_bad = int(len(y) - good.sum())
    if n_bad:
        out.notes.append(BadMeasurements(operation, metric, n_bad, len(y)))
        y = y[good]
        features = {name: x[good] for name, x in features.items()}
    n = len(y)
    if n < min_samples:
        out.reason = TooFewMeasurements(operation, metric, n, min_samples, bool(n_bad))
        return out
    mean = float(y.mean())
    sd = float(y.std(ddof=1))
    if sd == 0 or sd <= constant_tolerance * abs(mean):
        out.annotation = ConstantAnnotation(operation=operation, metric=metric, n_samples=n, value=mean, sd=sd)
        return out
    body = np.ones(n, dtype=bool)
    if outlier_fence is not None:
        q1, q3 = np.quantile(y, [0.25, 0.75])
        body = (y >= q1 - outlier_fence * (q3 - q1)) & (y <= q3 + outlier_fence * (q3 - q1))
        if n - body.sum() > MAX_OUTLIER_SHARE * n:
            body[:] = True
    best, best_r = None, 0.0
    for name, x in features.items():
        present = np.isfinite(x)
        k = int(present.sum())
        if k == 0:
            continue
        if k < feature_coverage * n:
            out.notes.append(FeatureMissing(operation, metric, name, n - k, n))
            continue
        present &= body
        xs = x[present]
        if len(xs) < 2 or xs.min() == xs.max():
            out.notes.append(FeatureConstant(operation, metric, name,
                                             float(xs[0] if len(xs) else x[np.isfinite(x)][0])))
            continue
        r = _pearson(xs, y[present])
        out.correlations[name] = r
        if abs(r) > abs(best_r) or (abs(r) == abs(best_r) and best is not None and name < best):
            best, best_r = name, r
    tried = None
    if best is not None and abs(best_r) >= min_correlation:
        x = features[best]
        present = np.isfinite(x) & body
        xs, ys = x[present], y[present]
        distinct = len(np.unique(xs))
        best_error = np.inf
        for degree in range(1, max_degree + 1):
            if degree >= distinct or degree + 1 >= len(xs):
                break
            poly = np.polynomial.Polynomial.fit(xs, ys, degree).convert()
            coefficients = np.zeros(degree + 1)
            coefficients[:len(poly.coef)] = poly.coef
            residuals = ys - np.polynomial.polynomial.polyval(xs, coefficients)
            error = float(np.sqrt(np.mean(residuals ** 2)) / ys.mean()) if ys.mean() > 0 else np.inf
            best_error = min(best_error, error)
            if error <= max_relative_error:
                sd = float(np.sqrt((residuals @ residuals) / max(len(ys) - degree - 1, 1)))
                out.annotation = CorrelatedAnnotation(
                    operation=operation, metric=metric, n_samples=len(ys), feature=best,
                    coefficients=tuple(float(c) for c in coefficients), sd=0.0 if sd < 1e-9 * ys.mean() else sd,
                    correlation=best_r, relative_error=error, feature_range=(float(xs.min()), float(xs.max())),
                    n_outliers=int(n - body.sum()))
                return out
        tried = NoPolynomialFit(operation, metric, best, float(best_r), int(max_degree), float(max_relative_error),
                                float(best_error))
    if tried is not None:
        out.notes.append(tried)
    if clustering == "bic":
        clusters, _ = mixture_clusters(y, max_clusters=max_clusters, min_cluster_calls=min_cluster_calls,
                                       random_state=random_state)
    else:
        clusters, _ = cluster_values(y, elbow_ratio=elbow_ratio, max_clusters=max_clusters,
                                     elbow_lookahead=elbow_lookahead, random_state=random_state)
    out.annotation = ClusteredAnnotation(operation=operation, metric=metric, n_samples=n, clusters=tuple(clusters))
    return out


def derive_annotations(frame, groups, *, metrics=("time", "memory"), feature_columns=(), random_state=None,
                       window: int = 30, period_ns: int | None = 60_000_000_000, **settings) -> tuple[list, list, list]:
    """:func:`derive_annotation` for every operation and metric of a measurement frame.

    Parameters
    ----------
    frame : polars.DataFrame
        A measurement frame sorted by operation (:func:`~.measurements.measurements_from_tables`).
    groups : list of (str, ndarray)
        Its operations and their rows (:func:`~.measurements.operation_groups`).
    metrics : sequence of str, default=("time", "memory")
        ``memory`` is derived only for the operations whose calls recorded it.
    feature_columns : sequence of str
        The ``feature[...]`` columns that are candidates.
    random_state : int, numpy Generator or None
        Seeds the mixtures (or k-means).
    window : int, default=30
    period_ns : int or None, default=60 s
        The windows of a check (:func:`.check.window_slices`), into which each annotation's calls
        are cut for its :class:`~.model.Calibration` (:mod:`.calibration`).
    **settings
        The other keywords of :func:`derive_annotation` (defaults :data:`DEFAULTS`).

    Returns
    -------
    annotations : list of Annotation
        Each with its calibration.
    skipped : list of (str, str, TooFewMeasurements)
        ``(operation, metric, reason)`` of those with calls but no annotation.
    notes : list of Note
        Records (:mod:`.notes`).
    """
    from dataclasses import replace

    import polars as pl
    from threadpoolctl import threadpool_limits

    from .calibration import WindowMeans, finish_calibrations
    from .check import normal_scores, usable, window_slices
    from .measurements import feature_of_column

    seed = np.random.RandomState(random_state.integers(2**31) if isinstance(random_state, np.random.Generator)
                                 else random_state)
    annotations, skipped, notes, means = [], [], [], {}
    values = {m: frame[m].cast(pl.Float64).to_numpy() for m in metrics}
    recorded = frame["memory"].is_not_null().to_numpy() if "memory" in metrics else None
    features = {feature_of_column(c): frame[c].to_numpy() for c in feature_columns}
    with threadpool_limits(1):  # many small k-means fits: one thread each is fastest
        for operation, rows in groups:
            lo, hi = int(rows[0]), int(rows[-1]) + 1
            own = {name: x[lo:hi] for name, x in features.items() if not np.isnan(x[lo:hi]).all()}
            for metric in metrics:
                y, candidates = values[metric][lo:hi], own
                if metric == "memory":
                    kept = recorded[lo:hi]
                    if not kept.any():
                        continue  # not measured here: nothing to say
                    if not kept.all():
                        notes.append(MemoryPartlyRecorded(operation, int((~kept).sum()), len(y)))
                        y, candidates = y[kept], {k: v[kept] for k, v in own.items()}
                d = derive_annotation(operation, metric, y, candidates, **{**DEFAULTS, **settings},
                                      random_state=seed)
                notes += d.notes
                if d.annotation is None:
                    skipped.append((operation, metric, d.reason))
                    continue
                annotations.append(d.annotation)
                ys, xs, starts, _ = usable(d.annotation, frame.slice(lo, hi - lo))
                slices, _ = window_slices(starts, window, period_ns)
                if slices and float(np.max(d.annotation.variance(xs))) > 0:  # an exact one needs none
                    means[d.annotation.key] = WindowMeans.of(normal_scores(d.annotation, ys, xs), slices)
    calibrations, pool = finish_calibrations(means)
    if any(c.pooled for c in calibrations.values()):
        few = sum(c.pooled for c in calibrations.values())
        notes.append(CalibrationPooled(few, MIN_OWN_WINDOWS) if pool is not None else
                     CalibrationUnknown(few, MIN_OWN_WINDOWS))
    return [replace(a, calibration=calibrations.get(a.key)) for a in annotations], skipped, notes
