"""How much an annotation's windows of calls vary: a random-effects model of the window means.

The paper checks each window of new calls against the annotation's distribution alone, as if
the calls it was derived from were all the variation there is. On recorded traffic they are
not: the mean time of an operation moves from one minute to the next (load, the instances
serving, caches, the hour), and a window of 30 calls measures its mean to a few hundredths of
a standard deviation, so a test of the window against the pooled distribution fails on
healthy traffic (TrainTicket, six normal minutes derived and six others checked: 7 % of the
assertions failed with the paper's test, issue 30).

Here the calls an annotation was derived from are cut into the windows a check makes
(:func:`.check.window_slices`: consecutive calls of one period) and their normal scores
``z`` (:func:`.check.normal_scores`) are modelled as one-way random effects,
``z_ij = mu + b_j + e_ij``, ``b_j ~ Normal(0, tau²)`` between windows, ``e_ij`` of variance
``sigma²`` within one. ``sigma²`` is the pooled within-window variance; ``tau²`` is the
DerSimonian-Laird moment estimate (DerSimonian & Laird 1986, doi:10.1016/0197-2456(86)90046-2):
with weights ``w_j = n_j / sigma²``, ``Q = Σ w_j (m_j - m̄_w)²`` and
``tau² = max(0, (Q - (K - 1)) / (Σ w_j - Σ w_j² / Σ w_j))``; ``mu`` is the random-effects mean
(weights ``1 / (sigma² / n_j + tau²)``) and ``mean_se`` its standard error. A new window's mean
score is then ``Normal(mu, sigma² / n + tau² + mean_se²)``: the prediction of a random-effects
model for a new window (Higgins, Thompson & Spiegelhalter 2009, doi:10.1111/j.1467-985X.2008.00552.x).

An operation seen in fewer than :data:`MIN_OWN_WINDOWS` windows has no estimate of its own
``tau²``: it takes the median ``tau²`` of the operations that have one (the deployment's
between-window variation, in score units, which are comparable across operations: an empirical-
Bayes pooling), and the calibration says so (``pooled``). When no operation has enough windows,
``tau² = 0`` and a note asks for a derivation over several periods.

Measured (``tracesleuth evaluate annotate``, six normal minutes derived and six others checked,
medians over five seeded splits): 99.0 % of TrainTicket's assertions and 98.7 % of
OnlineBoutique's pass (the paper's test: 92.7 % on TrainTicket); annotations derived from
TrainTicket's one fault-free minute pass 98.0 % of 4,395 assertions on its 28 other normal minutes
(40.3 % before; 187 windows were faster and are reported, not failed).

Why by hand and not ``statsmodels.stats.meta_analysis.combine_effects``: it computes the same
DerSimonian-Laird estimate; four lines of arithmetic do not justify a dependency on statsmodels
(and patsy), which nothing else of the project needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Calibration

__all__ = ["MIN_OWN_WINDOWS", "WindowMeans", "dersimonian_laird", "finish_calibrations"]

#: Fewest windows from which an operation's own between-window variance is estimated (with
#: fewer, Q has at most one degree of freedom); below, the deployment's pooled value is used.
MIN_OWN_WINDOWS = 3
#: Floor of the within-window variance of the scores (a constant metric has none; its windows
#: are then compared through the between-window term alone).
MIN_SCORE_VARIANCE = 1e-6


@dataclass(frozen=True)
class WindowMeans:
    """The windows of one annotation's derivation calls: mean score and size of each.

    Attributes
    ----------
    means : ndarray of shape (n_windows,)
    sizes : ndarray of shape (n_windows,)
    within_var : float
        Pooled within-window variance of the scores.
    """

    means: np.ndarray
    sizes: np.ndarray
    within_var: float

    @classmethod
    def of(cls, scores: np.ndarray, slices: list) -> "WindowMeans":
        """From the scores of the calls and their windows (slices of ``scores``)."""
        starts = np.array([s.start for s in slices], dtype=np.int64)
        sizes = np.array([s.stop - s.start for s in slices], dtype=np.float64)
        sums = np.add.reduceat(scores, starts) if len(starts) else np.zeros(0)
        means = sums / np.maximum(sizes, 1)
        squares = np.add.reduceat(scores ** 2, starts) if len(starts) else np.zeros(0)
        within = squares - sizes * means ** 2  # sum of squared deviations per window
        dof = float((sizes - 1).sum())
        var = float(within.sum() / dof) if dof > 0 else 1.0
        return cls(means, sizes, max(var, MIN_SCORE_VARIANCE))


def dersimonian_laird(means: np.ndarray, sizes: np.ndarray, within_var: float) -> float:
    """The DerSimonian-Laird between-window variance ``tau²`` (module docstring); NaN with < 2 windows.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> sizes = np.full(200, 30.0)
    >>> means = rng.normal(0, 0.3, 200) + rng.normal(0, 1, (200, 30)).mean(axis=1)
    >>> round(dersimonian_laird(means, sizes, 1.0), 2)  # tau² = 0.3² = 0.09
    0.08
    """
    k = len(means)
    if k < 2:
        return float("nan")
    w = sizes / within_var
    fixed = float(w @ means / w.sum())
    q = float(w @ (means - fixed) ** 2)
    return max(0.0, (q - (k - 1)) / float(w.sum() - (w @ w) / w.sum()))


def _calibration(m: WindowMeans, tau2: float, pooled: bool) -> Calibration:
    w = 1.0 / (m.within_var / m.sizes + tau2)
    mu = float(w @ m.means / w.sum())
    return Calibration(windows=len(m.means), score_mean=mu, score_sd=float(np.sqrt(m.within_var)),
                       between_sd=float(np.sqrt(tau2)), mean_se=float(np.sqrt(1.0 / w.sum())), pooled=pooled)


def finish_calibrations(windows: dict) -> tuple[dict, float | None]:
    """Calibrations of many annotations, pooling ``tau²`` for those with few windows (module docstring).

    Parameters
    ----------
    windows : dict of key to WindowMeans
        Each annotation's windows (at least one each).

    Returns
    -------
    calibrations : dict of key to Calibration
    pooled_tau2 : float or None
        The deployment's between-window variance given to annotations with fewer than
        :data:`MIN_OWN_WINDOWS` windows; None when no annotation had enough (then 0 was used).
    """
    own = {k: dersimonian_laird(m.means, m.sizes, m.within_var) for k, m in windows.items()
           if len(m.means) >= MIN_OWN_WINDOWS}
    pool = float(np.median(list(own.values()))) if own else None
    out = {}
    for key, m in windows.items():
        if key in own:
            out[key] = _calibration(m, own[key], False)
        else:
            out[key] = _calibration(m, 0.0 if pool is None else pool, True)
    return out, pool
