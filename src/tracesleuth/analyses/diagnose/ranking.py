"""One ranking of the services, with a calibrated confidence: a conditional logit over the evidence.

Each service ``s`` of a case has features ``x_s`` (its weight in each evidence family,
:data:`~.evidence.FAMILIES`); its utility is ``u_s = beta . x_s``, and a "nobody" alternative has
utility ``beta_0``. The probability that ``s`` is the culprit is

    P(s) = exp(u_s) / (exp(beta_0) + sum_t exp(u_t))

(McFadden's conditional logit, 1974), so the confidences of a case sum to at most 1 and the rest is
the probability that the evidence names nobody. The coefficients are fitted by maximum likelihood on
the evaluation's cases (recorded faults, simulated incidents, and fault-free periods whose answer is
"nobody"), with an L2 penalty (``penalty``) that keeps them finite when a family separates the cases
perfectly; ``tracesleuth evaluate diagnose --fit FILE`` refits and writes them. The shipped model
(``ranking_model.json``) says which cases it was fitted on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from .evidence import FAMILIES

__all__ = ["RankingModel", "fit_ranking_model", "load_model"]

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
    """

    coefficients: dict
    nobody: float
    fitted_on: str = ""
    extra: dict = field(default_factory=dict)

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """``P(s)`` of each row of ``features`` (shape (n_services, n_families)), shape (n_services,)."""
        if features.shape[0] == 0:
            return np.zeros(0)
        beta = np.array([self.coefficients.get(f, 0.0) for f in FAMILIES])
        u = features @ beta
        return np.exp(u - logsumexp(np.append(u, self.nobody)))

    def to_dict(self) -> dict:
        return {"coefficients": dict(self.coefficients), "nobody": self.nobody, "fitted_on": self.fitted_on,
                **self.extra}


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
        return RankingModel({k: float(v) for k, v in doc["coefficients"].items()}, float(doc["nobody"]),
                            str(doc.get("fitted_on", "")),
                            {k: v for k, v in doc.items() if k not in ("coefficients", "nobody", "fitted_on")})
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ParameterError(f"{path}: not a diagnosis ranking model ({exc})") from None


def fit_ranking_model(cases, *, penalty: float = 0.1, fitted_on: str = "") -> RankingModel:
    """Maximum-likelihood coefficients of the conditional logit.

    Parameters
    ----------
    cases : iterable of (ndarray, int or None)
        Per case the features of its services (shape (n_services, n_families)) and the row of the
        culprit, or None when nobody is (a fault-free period, or a culprit the evidence does not list).
    penalty : float, default=0.1
        L2 penalty on the coefficients (not on ``beta_0``).
    fitted_on : str
        What the cases were (kept in the model).

    Returns
    -------
    RankingModel
    """
    cases = [(np.asarray(x, float).reshape(-1, len(FAMILIES)), truth) for x, truth in cases]

    def loss(theta: np.ndarray) -> float:
        beta, nobody = theta[:-1], theta[-1]
        total = penalty * float(beta @ beta)
        for x, truth in cases:
            u = x @ beta
            chosen = nobody if truth is None else u[truth]
            total -= chosen - logsumexp(np.append(u, nobody))
        return total

    start = np.append(np.full(len(FAMILIES), 0.5), 2.0)
    theta = optimize.minimize(loss, start, method="L-BFGS-B").x
    return RankingModel({f: float(b) for f, b in zip(FAMILIES, theta[:-1])}, float(theta[-1]), fitted_on)
