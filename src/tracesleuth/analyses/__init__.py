"""The analyses: one sub-package each, every one under one contract and in one registry.

The contract (:mod:`._contract`): a scikit-learn-compatible estimator (:class:`Analysis`), a frozen
result with ``to_frame()`` / ``to_dict()`` / ``describe()``, and the orientation rule of scores
(higher = more suspicious). The registry (:data:`ANALYSES`) names, for every analysis, where its
estimator, report section, CLI command, evaluation protocol and planted test case live, as
``"module:attribute"`` strings imported on first use, so that listing the analyses (the CLI's
start, ``tracesleuth analyze``, ``tracesleuth evaluate``) imports none of them.

========== ============================================== ==============================
name       analysis                                       paper
========== ============================================== ==============================
annotate   :class:`.annotate.PerformanceAnnotations`      Rogora et al., HotCloud 2017
diagnose   :class:`.diagnose.Diagnosis`                   Pettitt 1979; Nezha, FSE 2023
compare    :class:`.compare.RequestFlowComparison`        Sambasivan et al., NSDI 2011
localize   :class:`.localize.RootCauseLocalization`       Mi et al., Sci China Inf Sci 2012
paths      :class:`.paths.CausalPaths`                    Aguilera et al., SOSP 2003
patterns   :class:`.patterns.LatencyDegradationPatterns`  Cortellessa & Traini, ICPE 2020
========== ============================================== ==============================

To add one: a sub-package with the estimator and a planted case for the common test
(``tests/analyses/test_common.py``); its report sections (built from a fitted estimator, never
refitting) in :mod:`tracesleuth.report.sections`, its typer command in
:mod:`tracesleuth.cli.commands` and its evaluation protocol (simulate with ground truth, then
score) in :mod:`tracesleuth.evaluation.protocols`, one module named after it in each, since each
imports the layer it belongs to; then one :class:`AnalysisSpec` below. The registry names them as
strings, so it imports none of them (nothing here imports upward).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from .._lazy import lazy_exports

# The contract imports scikit-learn: loaded on first use, so that the CLI's start (which lists
# the analyses and registers their commands) stays fast.
__getattr__, __dir__ = lazy_exports(__name__, {
    name: f"._contract:{name}"
    for name in ("HIGHER_IS_MORE_SUSPICIOUS", "Analysis", "AnalysisResult", "ReportContext", "check_settings")
})

__all__ = [
    "ANALYSES",
    "Analysis",
    "AnalysisResult",
    "AnalysisSpec",
    "HIGHER_IS_MORE_SUSPICIOUS",
    "PlantedCase",
    "ReportContext",
    "check_settings",
    "get_analysis",
]


def _resolve(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class AnalysisSpec:
    """Where the parts of one analysis live (each a ``"module:attribute"`` string).

    Attributes
    ----------
    name : str
        The CLI name (``tracesleuth NAME``, ``tracesleuth evaluate NAME``).
    title : str
        Its title in reports and listings.
    paper : str
        The reference it implements.
    estimator : str
        The :class:`Analysis` subclass.
    section : str
        ``build_sections(fitted, context) -> list of SectionLike``: the report sections of a
        fitted estimator, used by ``tracesleuth analyze``; never refits.
    command : str
        ``register(app)``: adds the analysis's command (and the options it takes) to a typer app.
    evaluation : str
        ``evaluate(*, quick, random_state) -> result``: the paper's experiment on simulated data
        with ground truth; its result follows :class:`AnalysisResult` and carries ``scores``.
    planted : str
        ``planted_case(random_state) -> PlantedCase``: seeded data with a known answer, a
        ``score(fitted) -> float`` and the quality ``floor`` the common test asserts.
    needs_baseline : bool, default=False
        ``fit(problem, baseline)`` compares two periods' trace tables; ``tracesleuth analyze``
        runs it only when given ``--baseline``. Otherwise ``fit(table)``.
    needs_annotations : bool, default=False
        It checks given performance annotations (its ``annotations`` setting);
        ``tracesleuth analyze`` runs it only when given ``--annotations FILE``.
    reads_store : bool, default=False
        ``fit(spans, logs=None)`` reads a store's spans and log records over time, not a trace
        table: ``tracesleuth analyze`` runs it first, given ``--at TIME`` on a store.
    """

    name: str
    title: str
    paper: str
    estimator: str
    section: str
    command: str
    evaluation: str
    planted: str
    needs_baseline: bool = False
    needs_annotations: bool = False
    reads_store: bool = False

    @classmethod
    def from_name(cls, name: str, *, title: str, paper: str, estimator: str, **flags: bool) -> "AnalysisSpec":
        """The spec of an analysis whose parts live where the module docstring says: a module
        named after it in each layer.

        Parameters
        ----------
        name, title, paper : str
            As the attributes.
        estimator : str
            The estimator's class name, exported by ``tracesleuth.analyses.NAME``.
        **flags : bool
            ``needs_baseline``, ``needs_annotations``, ``reads_store``.

        Returns
        -------
        AnalysisSpec
            With ``estimator`` ``tracesleuth.analyses.NAME:CLASS``, ``section``
            ``tracesleuth.report.sections.NAME:build_sections``, ``command``
            ``tracesleuth.cli.commands.NAME:register``, ``evaluation``
            ``tracesleuth.evaluation.protocols.NAME:evaluate`` and ``planted``
            ``tracesleuth.analyses.NAME.synthetic:planted_case``.

        Examples
        --------
        >>> AnalysisSpec.from_name("paths", title="t", paper="p", estimator="CausalPaths").command
        'tracesleuth.cli.commands.paths:register'
        """
        return cls(name=name, title=title, paper=paper, estimator=f"tracesleuth.analyses.{name}:{estimator}",
                   section=f"tracesleuth.report.sections.{name}:build_sections",
                   command=f"tracesleuth.cli.commands.{name}:register",
                   evaluation=f"tracesleuth.evaluation.protocols.{name}:evaluate",
                   planted=f"tracesleuth.analyses.{name}.synthetic:planted_case", **flags)

    def load(self, part: str) -> Any:
        """The object behind one part (``"estimator"``, ``"section"``, ...), imported now."""
        return _resolve(getattr(self, part))


@dataclass(frozen=True)
class PlantedCase:
    """Seeded data with a known answer, for the common test's quality floor.

    Attributes
    ----------
    args : tuple
        What ``fit`` takes, in order (a TraceTable; a problem and a baseline TraceTable...).
    settings : dict
        Estimator settings for this case (the seed among them).
    score : callable
        ``score(fitted_estimator) -> float``, higher is better (an F-score, a top-k hit rate).
    floor : float
        The least ``score`` must reach.
    """

    args: tuple
    settings: dict
    score: Any
    floor: float


#: Every analysis, in the order reports and listings show them.
ANALYSES: tuple[AnalysisSpec, ...] = (
    AnalysisSpec.from_name(
        "diagnose",
        title="Diagnosis: which service, since when, how sure",
        paper="A. N. Pettitt, A non-parametric approach to the change-point problem, Applied Statistics 1979; "
              "G. Yu et al., Nezha, FSE 2023 (log templates); D. McFadden, conditional logit, 1974",
        estimator="Diagnosis",
        reads_store=True,
    ),
    AnalysisSpec.from_name(
        "compare",
        title="Request-flow comparison: what changed",
        paper="R. R. Sambasivan et al., Diagnosing Performance Changes by Comparing Request Flows, NSDI 2011",
        estimator="RequestFlowComparison",
        needs_baseline=True,
    ),
    AnalysisSpec.from_name(
        "patterns",
        title="Latency degradation patterns",
        paper="V. Cortellessa and L. Traini, Detecting Latency Degradation Patterns in Service-based Systems, "
              "ICPE 2020, doi:10.1145/3358960.3379126",
        estimator="LatencyDegradationPatterns",
    ),
    AnalysisSpec.from_name(
        "localize",
        title="Root-cause localization: anomalous methods and instances",
        paper="H. Mi, H. Wang, Y. Zhou, M. R. Lyu and H. Cai, Localizing root causes of performance anomalies in "
              "cloud computing systems by analyzing request trace logs, Sci China Inf Sci 2012, "
              "doi:10.1007/s11432-012-4747-8",
        estimator="RootCauseLocalization",
    ),
    AnalysisSpec.from_name(
        "paths",
        title="Black-box causal paths",
        paper="M. K. Aguilera, J. C. Mogul, J. L. Wiener, P. Reynolds and A. Muthitacharoen, Performance debugging "
              "for distributed systems of black boxes, SOSP 2003, doi:10.1145/945445.945454",
        estimator="CausalPaths",
    ),
    AnalysisSpec.from_name(
        "annotate",
        title="Performance annotations",
        paper="J. Rogora, A. Carzaniga, A. Diwan, M. Hauswirth and R. Soulé, Performance annotations for cloud "
              "computing, HotCloud 2017",
        estimator="PerformanceAnnotations",
        needs_annotations=True,
    ),
)


def get_analysis(name: str) -> AnalysisSpec:
    """The registered analysis called ``name``.

    Raises
    ------
    ParameterError
        No analysis has that name (the message lists the names).
    """
    from ..errors import ParameterError

    for spec in ANALYSES:
        if spec.name == name:
            return spec
    raise ParameterError(f"No analysis is called {name!r}; the analyses are: {', '.join(s.name for s in ANALYSES)}.")
