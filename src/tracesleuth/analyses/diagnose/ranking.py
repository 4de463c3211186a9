"""One ranking of the services, with a calibrated confidence: a conditional logit over the evidence.

Each service ``s`` of a case has features ``x_s`` (its weight in each evidence family,
:data:`~.evidence.FAMILIES`); its utility is ``u_s = beta . x_s``, and a "nobody" alternative has
utility ``beta_0``. The probability that ``s`` is the culprit is

    P(s) = exp(u_s) / (exp(beta_0) + sum_t exp(u_t))

(McFadden's conditional logit, 1974), so the confidences of a case sum to at most 1 and the rest is
the probability that the evidence names nobody. The coefficients are fitted by maximum likelihood on
the evaluation's cases (recorded faults, simulated incidents, and fault-free periods whose answer is
"nobody"), with an L2 penalty (``penalty``) that keeps them finite when a family separates the cases
perfectly, chosen by leave-one-out log-likelihood (:func:`choose_penalty`); ``tracesleuth evaluate
diagnose --fit FILE`` refits and writes them. The shipped model (``ranking_model.json``) says which
cases it was fitted on.

**Contamination.** The logit adds the families up as if each were independent evidence; on a real
incident a wrong service can carry several at once (a caller that logs its callee's failure, stops
its calls and takes a new error path), and the logit is then sure of the wrong one. The confidences
are therefore those of a contaminated model (Copas, "Binary regression models for contaminated
data", JRSS B 50, 1988): with probability ``epsilon`` the evidence does not tell the culprit, which
is then any of the ``K`` services or nobody alike,

    P_epsilon(s) = (1 - epsilon) P(s) + epsilon / (K + 1),

``epsilon`` the maximum-likelihood mixing weight of the recorded faults' leave-one-out predictions
(:func:`choose_penalty`): how often, on cases the model was not fitted on, the evidence misled.
Measured on the 35 recorded faults, nested leave-one-out: the held-out top decile went from 11 cases
at 0.99 (9 right) to 12 at 0.94 (10 right), the culprit first held out 19 of 35 either way (with
the same evidence, the best penalty's leave-one-out log-likelihood went from -64.5 to -59.5). The
shipped model (the log families weighed only where both periods hold log records): penalty 0.1,
leave-one-out log-likelihood -63.7, ``epsilon`` 0.067; held out, the top decile 12 cases at 0.93,
10 right.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from .evidence import FAMILIES

__all__ = ["PENALTIES", "RankingModel", "choose_penalty", "contamination_of", "fit_ranking_model", "load_model"]

_SHIPPED = Path(__file__).with_name("ranking_model.json")


@dataclass(frozen=True)
class RankingModel:
    """The conditional logit's coefficients.

    Attributes
    ----------
    coefficients : dict of str to float
        One per family of :data:`~.evidence.FAMILIES`.
    nobody : float
        ``beta_0``, the utility of "the evidence names nobody".
    fitted_on : str
        What the coefficients were fitted on.
    extra : dict
        More of what the fit chose (``penalty``).
    contamination : float, default=0.0
        ``epsilon`` (module docstring), in [0, 1).
    """

    coefficients: dict
    nobody: float
    fitted_on: str = ""
    extra: dict = field(default_factory=dict)
    contamination: float = 0.0

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """``P_epsilon(s)`` of each row of ``features`` (shape (n_services, n_families)), shape
        (n_services,); the rest of 1 is "nobody"'s."""
        return _contaminated(self._logit(features), self.contamination)[:-1]

    def _logit(self, features: np.ndarray) -> np.ndarray:
        """The logit's ``P(s)`` of each service, then "nobody"'s, shape (n_services + 1,)."""
        beta = np.array([self.coefficients.get(f, 0.0) for f in FAMILIES])
        u = np.append(np.asarray(features, float).reshape(-1, len(FAMILIES)) @ beta, self.nobody)
        return np.exp(u - logsumexp(u))

    def to_dict(self) -> dict:
        return {"coefficients": dict(self.coefficients), "nobody": self.nobody, "contamination": self.contamination,
                "fitted_on": self.fitted_on, **self.extra}


def _contaminated(p: np.ndarray, epsilon: float) -> np.ndarray:
    """``(1 - epsilon) p + epsilon / len(p)``: the probabilities of the services and nobody mixed
    with the uniform."""
    return (1 - epsilon) * p + epsilon / p.size


def load_model(path=None) -> RankingModel:
    """The model in ``path`` (JSON written by :func:`fit_ranking_model`'s caller), default the shipped one.

    Raises
    ------
    ParameterError
        When the file is not such a model (naming the file).
    """
    from ...errors import ParameterError

    path = Path(path) if path is not None else _SHIPPED
    try:
        doc = json.loads(path.read_text())
        contamination = float(doc.get("contamination", 0.0))
        if not 0.0 <= contamination < 1.0:
            raise ValueError(f"contamination {contamination} is not in [0, 1)")
        return RankingModel({k: float(v) for k, v in doc["coefficients"].items()}, float(doc["nobody"]),
                            str(doc.get("fitted_on", "")),
                            {k: v for k, v in doc.items() if k not in ("coefficients", "nobody", "fitted_on",
                                                                       "contamination")},
                            contamination)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ParameterError(f"{path}: not a diagnosis ranking model ({exc})") from None


#: The L2 penalties :func:`choose_penalty` tries.
PENALTIES = (0.1, 0.3, 1.0, 3.0, 10.0)


def fit_ranking_model(cases, *, penalty: float = 0.1, contamination: float = 0.0, fitted_on: str = ""
                      ) -> RankingModel:
    """Maximum-likelihood coefficients of the conditional logit.

    Parameters
    ----------
    cases : iterable of (ndarray, int or None)
        Per case the features of its services (shape (n_services, n_families)) and the row of the
        culprit, or None when nobody is (a fault-free period, or a culprit the evidence does not list).
    penalty : float, default=0.1
        L2 penalty on the coefficients (not on ``beta_0``); :func:`choose_penalty` picks one.
    contamination : float, default=0.0
        ``epsilon`` of the confidences (module docstring; :func:`choose_penalty` estimates it); the
        coefficients are the logit's own.
    fitted_on : str
        What the cases were (kept in the model).

    Returns
    -------
    RankingModel
        With ``extra["penalty"]``.
    """
    stacked = _stack(cases)

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = _negative_log_likelihood(theta, *stacked)
        beta = theta[:-1]
        return value + penalty * float(beta @ beta), gradient + np.append(2 * penalty * beta, 0.0)

    start = np.append(np.full(len(FAMILIES), 0.5), 2.0)
    theta = optimize.minimize(loss, start, jac=True, method="L-BFGS-B").x
    return RankingModel({f: float(b) for f, b in zip(FAMILIES, theta[:-1])}, float(theta[-1]), fitted_on,
                        {"penalty": penalty}, contamination)


def choose_penalty(cases: list, always: list = (), penalties=PENALTIES) -> tuple[float, float, dict]:
    """The L2 penalty whose model predicts each of ``cases`` best when fitted without it, and the
    contamination of those predictions: the largest leave-one-out log-likelihood of the culprits (or
    of "nobody"), each penalty's predictions taken with their own maximum-likelihood contamination
    (:func:`contamination_of`), the cases ``always`` in every fit.

    A penalty fixed by hand set how sure the confidences are; the held-out calibration of the
    recorded faults depends on it (measured, 35 faults, penalties 0.1 / 1 / 3 / 10 without
    contamination: leave-one-out log-likelihood -67.8 / -64.2 / -63.8 / -66.4; in the held-out top
    decile 14 cases at 0.98 right 0.86, 12 at 0.98 right 0.83, 10 at 0.98 right 0.90, 8 at 0.99
    right 0.88; the culprit first held out 20 of 35 for each of 0.1, 1 and 3).

    Parameters
    ----------
    cases : list of (ndarray, int or None)
        As :func:`fit_ranking_model`'s; each is held out in turn.
    always : list
        Cases in every fit (the seeded incidents).
    penalties : sequence of float

    Returns
    -------
    (float, float, dict)
        The penalty, its contamination, and each penalty's leave-one-out log-likelihood (at its
        contamination).
    """
    scores, mixing = {}, {}
    for penalty in penalties:
        held_out = []
        for i, (features, truth) in enumerate(cases):
            model = fit_ranking_model(list(cases[:i]) + list(cases[i + 1:]) + list(always), penalty=penalty)
            p = model._logit(features)
            held_out.append(p[-1 if truth is None else truth])
        mixing[penalty], scores[penalty] = contamination_of(
            held_out, [1.0 / (1 + np.asarray(x).reshape(-1, len(FAMILIES)).shape[0]) for x, _ in cases])
    best = max(scores, key=scores.get)
    return best, mixing[best], scores


def contamination_of(p_truth, p_uniform) -> tuple[float, float]:
    """The maximum-likelihood ``epsilon`` of held-out predictions and its log-likelihood: the
    ``epsilon`` in [0, 0.5] that maximises ``sum log((1 - epsilon) p_truth + epsilon p_uniform)``
    (concave in ``epsilon``: one maximum).

    Parameters
    ----------
    p_truth : array_like, shape (n_cases,)
        The logit's held-out probability of each case's answer (its culprit, or nobody).
    p_uniform : array_like, shape (n_cases,)
        ``1 / (K + 1)`` of each case (``K`` its services).

    Returns
    -------
    (float, float)
    """
    a, b = np.asarray(p_truth, float), np.asarray(p_uniform, float)

    def loss(epsilon: float) -> float:
        return -float(np.log(np.maximum((1 - epsilon) * a + epsilon * b, 1e-300)).sum())

    found = optimize.minimize_scalar(loss, bounds=(0.0, 0.5), method="bounded", options={"xatol": 1e-4})
    epsilon = float(found.x) if loss(found.x) < loss(0.0) else 0.0
    return epsilon, -loss(epsilon)


def _stack(cases) -> tuple:
    """The cases' features in one array (shape (n_rows, n_families)), each row's case, the culprit
    rows, and the cases whose answer is "nobody" (cases without a service add nothing to the
    likelihood: their only alternative is "nobody")."""
    features, owner, culprit_rows, nobody = [], [], [], 0
    n = 0
    for x, truth in cases:
        x = np.asarray(x, float).reshape(-1, len(FAMILIES))
        if x.shape[0] == 0:
            continue
        features.append(x)
        owner.append(np.full(x.shape[0], len(owner), dtype=np.int64))
        if truth is None:
            nobody += 1
        else:
            culprit_rows.append(n + truth)
        n += x.shape[0]
    if not features:
        return np.zeros((0, len(FAMILIES))), np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    return np.vstack(features), np.concatenate(owner), np.array(culprit_rows, np.int64), nobody


def _negative_log_likelihood(theta: np.ndarray, x: np.ndarray, owner: np.ndarray, culprit_rows: np.ndarray,
                             n_nobody: int) -> tuple[float, np.ndarray]:
    """The conditional logit's negative log-likelihood and its gradient in ``theta = (beta, beta_0)``."""
    beta, nobody = theta[:-1], theta[-1]
    n_cases = int(owner[-1]) + 1 if owner.size else 0
    u = x @ beta
    top = np.full(n_cases, nobody)
    np.maximum.at(top, owner, u)
    mass = np.exp(nobody - top)
    np.add.at(mass, owner, np.exp(u - top[owner]))
    lse = top + np.log(mass)                      # log(exp(beta_0) + sum_s exp(u_s)), per case
    value = float(lse.sum() - u[culprit_rows].sum() - n_nobody * nobody)
    p = np.exp(u - lse[owner])                    # P(s) of each row
    gradient_beta = p @ x - x[culprit_rows].sum(axis=0)
    gradient_nobody = float(np.exp(nobody - lse).sum()) - n_nobody
    return value, np.append(gradient_beta, gradient_nobody)
