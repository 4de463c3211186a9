"""Normal and anomalous requests of a cluster by PCA, and its principal methods.

Mi et al., Sci China Inf Sci 2012, Section 4.2.2 (the normal subspace of ``gamma`` of the
variance; the squared prediction error against the Q-statistic, equation 1) and Section 4.3.1
(principal methods by B4: Jolliffe, *Discarding variables in a principal component analysis*,
Applied Statistics 1972).

The Q-statistic threshold is Jackson & Mudholkar's (*Control procedures for residuals associated
with principal component analysis*, Technometrics 1979, equation 3.4): with ``lambda_j`` the
covariance eigenvalues of the residual components, ``theta_i = sum_j lambda_j ** i``,
``h0 = 1 - 2 theta1 theta3 / (3 theta2 ** 2)`` and ``c`` the standard normal quantile at ``1 - beta``,

    delta**2 = theta1 * (c * sqrt(2 theta2 h0**2) / theta1 + 1 + theta2 h0 (h0 - 1) / theta1**2) ** (1 / h0)

``h0`` is floored at 0.001: it is at most 1 and falls to 0 or below only when one residual
eigenvalue dominates the others, where the approximation is poor anyway. The paper's equation 1
writes the norm; the squared prediction error is its square, compared with ``delta**2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2, norm
from sklearn.decomposition import PCA

from .notes import ClusterNotTested, ConstantLatencies, NoResidualVariance, TooFewToSplit, ZeroRobustCovariance

__all__ = ["SpeSplit", "outlyingness", "principal_methods", "q_threshold", "spe_split"]

#: Reweighting steps of the robust fit, and the level at which they drop requests (looser than
#: ``beta``: the trimmed core underestimates the spread, and a step at ``beta`` would keep it so).
_REWEIGHTS = 3
_REWEIGHT_LEVEL = 0.001
#: Relative size under which a variance counts as zero (latencies are integer ns).
_TINY = 1e-9


@dataclass(frozen=True)
class SpeSplit:
    """The PCA split of one cluster's requests.

    Attributes
    ----------
    spe : numpy.ndarray
        Shape (m,): each request's squared prediction error, ns**2.
    threshold : float
        ``delta**2``, the Q-statistic at ``1 - beta``, ns**2.
    anomalous : numpy.ndarray
        Shape (m,), bool: ``spe > threshold`` (or, when combined, T**2 above its threshold).
    n_components : int
        Principal components kept (the least number explaining ``gamma`` of the variance).
    explained : numpy.ndarray
        Shape (n_components,): their shares of the variance.
    principal : numpy.ndarray
        Shape (n_components,), int: the principal methods' column indices into the matrix given,
        in the order of the components (:func:`principal_methods`).
    n_methods : int
        Columns the split used (varying ones; the most variable ones when requests are few).
    """

    spe: np.ndarray
    threshold: float
    anomalous: np.ndarray
    n_components: int
    explained: np.ndarray
    principal: np.ndarray
    n_methods: int


def q_threshold(residual_eigenvalues: np.ndarray, beta: float) -> float:
    """Jackson & Mudholkar's Q-statistic at confidence ``1 - beta`` (module docstring).

    Parameters
    ----------
    residual_eigenvalues : numpy.ndarray
        Shape (r,): covariance eigenvalues of the components left out, ns**2.
    beta : float
        In (0, 1).

    Returns
    -------
    float
        ``delta**2`` (ns**2); 0.0 when the residual variance is zero.
    """
    lam = np.asarray(residual_eigenvalues, dtype=np.float64)
    theta1, theta2, theta3 = lam.sum(), (lam ** 2).sum(), (lam ** 3).sum()
    if theta1 <= 0 or theta2 <= 0:
        return 0.0
    h0 = max(1.0 - 2.0 * theta1 * theta3 / (3.0 * theta2 ** 2), 1e-3)
    c = norm.ppf(1.0 - beta)
    inner = c * np.sqrt(2.0 * theta2 * h0 ** 2) / theta1 + 1.0 + theta2 * h0 * (h0 - 1.0) / theta1 ** 2
    return float(theta1 * max(inner, 0.0) ** (1.0 / h0))


def principal_methods(components: np.ndarray) -> np.ndarray:
    """B4: for each principal component in order, the column with the largest absolute loading
    not chosen for an earlier one (Section 4.3.1).

    Parameters
    ----------
    components : numpy.ndarray
        Shape (k, n), k <= n: the components' loadings, largest variance first.

    Returns
    -------
    numpy.ndarray
        Shape (k,), int: distinct column indices.
    """
    chosen: list[int] = []
    for loadings in np.abs(components):
        for j in np.argsort(-loadings, kind="stable"):
            if j not in chosen:
                chosen.append(int(j))
                break
    return np.array(chosen, dtype=np.int64)


def spe_split(values: np.ndarray, *, variance: float, beta: float, robust: bool = False, combined: bool = False,
              log: bool = False, random_state=None, max_fit_requests: int = 2000,
              min_requests: int = 10) -> SpeSplit | ClusterNotTested:
    """Split a cluster's requests into normal and anomalous ones (Section 4.2.2, equation 1).

    Columns whose latency is constant carry no variance and are left out; the others are centred
    (not scaled, as the paper). **Fewer requests than methods** (Section 4.2.1: most clusters;
    PCA needs more requests than columns, the robust fit on half of them about twice as many): the cluster is split on
    its ``(m - 1) // 2`` methods of largest latency variance only (the stable ones are "noises
    for diagnosis", Section 4.3), which the result's cluster table shows; clusters of fewer than
    ``min_requests`` requests are not split. The principal methods are picked by B4 from the principal
    components of the cluster's classical PCA: the methods whose latency fluctuates most in the
    period (Section 4.3: the rest are "noises for diagnosis").

    Two departures from the paper, each a setting, both off for the paper's method:

    * ``robust``: the normal subspace (centre, components, eigenvalues) is estimated as ROBPCA
      does (Hubert, Rousseeuw & Vanden Branden, Technometrics 2005): from the half of the
      requests (at most ``max_fit_requests``, drawn with ``random_state``) of least
      Stahel-Donoho outlyingness (:func:`outlyingness`), then from every request within that
      fit's thresholds (reweighting steps), instead of from all requests. When a fault
      slows many of a cluster's requests (a fifth, a third), the classical PCA takes the
      fault's direction into the normal subspace and the squared prediction error no longer
      sees it. (The Minimum Covariance Determinant was tried and rejected: when the requests'
      latencies share a common factor, as real ones do, its optimum mixes faulty and normal
      requests.)
    * ``combined``: a request is also anomalous when its Hotelling T**2 in the normal subspace
      (the sum of its squared scores over the components' eigenvalues) exceeds the chi-square
      quantile with ``k`` degrees of freedom at ``1 - beta``: a slow method with a large
      variance of its own lies inside the normal subspace, where the SPE cannot see it
      (the combined SPE/T**2 monitoring of Yue & Qin, J. Process Control 2001).

    Parameters
    ----------
    values : numpy.ndarray
        Shape (m, n): the latency matrix ``Y``, ns.
    variance : float
        ``gamma`` in (0, 1): the share of the variance the kept components explain.
    beta : float
        In (0, 1): the significance level of the thresholds.
    robust, combined : bool, default=False
    random_state : int, numpy Generator or None
        Draws the robust fit's requests and directions (``robust`` only).
    max_fit_requests : int, default=2000
    min_requests : int, default=10

    Returns
    -------
    SpeSplit or ClusterNotTested
        The split; or why the cluster cannot be split (a note of :mod:`.notes`): fewer than
        ``min_requests`` requests, every latency constant, a singular robust covariance, or no
        variance left outside the kept components (nothing can stand out from them).
    """
    m, n = values.shape
    if m < min_requests:
        return TooFewToSplit(m, min_requests)
    spread = values.var(axis=0)
    varying = np.flatnonzero(np.ptp(values, axis=0) > 0)
    if varying.size == 0:
        return ConstantLatencies(m)
    if m <= 2 * varying.size:  # PCA needs m > n (Section 4.2.1); the robust fit's half, about twice as many
        keep = (m - 1) // 2
        varying = np.sort(varying[np.argsort(-spread[varying], kind="stable")[:keep]])
    y = np.log1p(values[:, varying] / 1e3) if log else values[:, varying]
    pca = PCA(svd_solver="full").fit(y)  # a full SVD: deterministic
    k = _n_components(pca.explained_variance_, variance)
    principal = varying[principal_methods(pca.components_[:k])]
    centre, eigenvalues, components = pca.mean_, pca.explained_variance_, pca.components_
    if robust:
        fitted = _robust_subspace(y, random_state, max_fit_requests, beta, variance)
        if fitted is None:
            return ZeroRobustCovariance(m)
        centre, eigenvalues, components = fitted
    k = _n_components(eigenvalues, variance)
    if eigenvalues[k:].sum() <= _TINY * max(eigenvalues.sum(), 1.0) and not combined:
        return NoResidualVariance(int(k))
    anomalous, spe, threshold = _flags(y, centre, eigenvalues, components, variance=variance, beta=beta,
                                       combined=combined, details=True)
    return SpeSplit(spe=spe, threshold=threshold, anomalous=anomalous, n_components=k,
                    explained=(eigenvalues[:k] / eigenvalues.sum()), principal=principal, n_methods=int(varying.size))


def _flags(y, centre, eigenvalues, components, *, variance: float, beta: float, combined: bool,
           details: bool = False):
    """Rows whose SPE exceeds the Q-statistic (or, when ``combined``, whose T**2 exceeds the
    chi-square quantile) in the subspace of the leading components holding ``variance``."""
    k = _n_components(eigenvalues, variance)
    residual = eigenvalues[k:]
    centred = y - centre
    p = components[:k].T  # (n, k), orthonormal columns
    scores = centred @ p
    resid = centred - scores @ p.T
    spe = np.einsum("ij,ij->i", resid, resid)
    threshold = q_threshold(residual, beta)
    anomalous = spe > threshold if residual.sum() > _TINY * eigenvalues.sum() else np.zeros(len(y), dtype=bool)
    if combined:
        lam = eigenvalues[:k]
        ok = lam > _TINY * eigenvalues.sum()
        anomalous |= (scores[:, ok] ** 2 / lam[ok]).sum(axis=1) > chi2.ppf(1.0 - beta, int(ok.sum()))
    return (anomalous, spe, threshold) if details else anomalous


def _n_components(eigenvalues: np.ndarray, variance: float) -> int:
    """The least number of leading components whose eigenvalues hold ``variance`` of the total."""
    ratios = np.cumsum(eigenvalues) / eigenvalues.sum()
    return int(min(np.searchsorted(ratios, variance - 1e-12) + 1, len(eigenvalues)))


def outlyingness(y: np.ndarray, rng: np.random.Generator, n_directions: int = 250) -> np.ndarray:
    """Stahel-Donoho outlyingness of each row: the largest robust z-score of its projections.

    Over ``n_directions`` directions through random pairs of rows and the coordinate axes,
    ``|x . d - median| / (1.4826 MAD)`` (directions whose MAD is zero are skipped), as the first
    step of ROBPCA (Hubert, Rousseeuw & Vanden Branden, Technometrics 2005, Section 2).

    Parameters
    ----------
    y : numpy.ndarray
        Shape (m, n).
    rng : numpy.random.Generator
    n_directions : int, default=250

    Returns
    -------
    numpy.ndarray
        Shape (m,), >= 0.
    """
    i, j = rng.integers(len(y), size=(2, n_directions))
    d = y[i] - y[j]
    norms = np.linalg.norm(d, axis=1)
    d = np.vstack([d[norms > 0] / norms[norms > 0, None], np.eye(y.shape[1])])
    proj = y @ d.T
    med = np.median(proj, axis=0)
    mad = 1.4826 * np.median(np.abs(proj - med), axis=0)
    ok = mad > 0
    if not ok.any():
        return np.zeros(len(y))
    return (np.abs(proj[:, ok] - med[ok]) / mad[ok]).max(axis=1)


def _robust_subspace(y: np.ndarray, random_state, max_fit_requests: int, beta: float, variance: float):
    """``(centre, eigenvalues, components)`` fitted robustly (ROBPCA's way); None when degenerate.

    The ``h = (m + n + 1) // 2`` requests of least outlyingness (:func:`outlyingness`) give a
    first centre and covariance; the requests within its SPE and T**2 thresholds at level
    0.001 then give the next ones, three times (reweighting steps, which make the estimate
    consistent again after the trimming).
    """
    rng = np.random.default_rng(random_state)
    sample = y if len(y) <= max_fit_requests else y[np.sort(rng.choice(len(y), max_fit_requests, replace=False))]
    m, n = sample.shape
    core = sample[np.argsort(outlyingness(sample, rng), kind="stable")[: (m + n + 1) // 2]]
    fitted = _eigen(core)
    if fitted is None:
        return None
    for _ in range(_REWEIGHTS):
        keep = ~_flags(sample, *fitted, variance=variance, beta=_REWEIGHT_LEVEL, combined=True)
        if keep.sum() <= n:
            break
        fitted = _eigen(sample[keep])
    return fitted


def _eigen(y: np.ndarray):
    """``(mean, eigenvalues descending, components as rows)`` of the rows' covariance; None if zero."""
    eigenvalues, vectors = np.linalg.eigh(np.atleast_2d(np.cov(y, rowvar=False)))
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues = np.clip(eigenvalues[order], 0.0, None)
    if eigenvalues.sum() <= 0:
        return None
    return y.mean(axis=0), eigenvalues, vectors[:, order].T
