"""Evaluation of the request-flow comparison (issue 16, item 9): simulated changes, then real faults.

:func:`evaluate` is the protocol registered for ``compare`` (``tracesleuth evaluate compare``).

Simulated scenarios (:func:`evaluate_simulated`)
-------------------------------------------------
Every kind of :data:`~tracesleuth.analyses.compare.synthetic.SCENARIOS` under several seeds (each its own injected service,
:func:`~tracesleuth.analyses.compare.synthetic.simulate_scenario`); the estimator
(:class:`~tracesleuth.analyses.compare.RequestFlowComparison`, default settings but the seed)
and the anchor rule (:func:`~tracesleuth.analyses.compare._baseline_rule.rank_services_by_rise`) rank the services; a hit is
the change named first (:func:`~tracesleuth.analyses.compare.synthetic.top_service_hit`, whose ``workload-mix`` rule is
:data:`~tracesleuth.analyses.compare.synthetic.WORKLOAD_MIX_RULE`).

Real faults (:func:`evaluate_real`, ../shared/data/nezha)
----------------------------------------------------------
* **Faults**: every entry of the fault lists whose trace windows exist (faults without trace
  files upstream are skipped, not failed). The injected service is ``inject_pod`` without its
  Kubernetes ``-<replicaset>-<pod>`` suffix.
* **Problem period**: the two one-minute files after the inject minute (``HH_MM`` + 1 and + 2
  minutes; the inject-minute file ends at the inject minute, before the injection).
* **Baseline**: TrainTicket: its fault-free minute (``fault_free/08_50``). OnlineBoutique has
  none: the inject-minute file of the fault under test (the 60 s ending at the inject minute,
  so wholly before ``inject_time``, and after any earlier fault's windows).
* **Endpoints**: every endpoint with requests in both periods, as a user would compare them
  without knowing the fault (:func:`~tracesleuth.analyses.compare.endpoints.compare_endpoints`): the root operation and
  every *inner endpoint* (the operation of a server span in another service than the root's,
  called directly by the root's service: the API a gateway such as TrainTicket's ``/*``
  forwards to; OnlineBoutique's frontend's gRPC calls).
* **A fault's ranking** merges its endpoints' (:func:`~tracesleuth.analyses.compare.endpoints.merge_rankings`): a service's
  score is the sum of its scores over the endpoints (the estimator's ``services``; the anchor's
  rises), ranked highest first; an endpoint whose comparison fails (too few requests...) adds
  nothing.
* **Per fault type**: top-1 and top-3 hits of the injected service, estimator and anchor
  side by side.

A second protocol runs beside the issue's (full evaluation only): the **adjacent baseline**
(:func:`~tracesleuth.evaluation.nezha.adjacent_baseline`), TrainTicket's faults against their
inject-minute file instead of the fault-free minute hours earlier (OnlineBoutique's protocol is
that already). It removes the drift of hours between the periods and keeps a thin baseline of
one minute, which can hold the end of an earlier fault; it is reported beside the issue's
protocol, never instead of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ...errors import ParameterError, TraceSleuthError
from ..protocol import describe_tables, json_rows
from ..nezha import SYSTEMS, RealFault, adjacent_baseline, default_data_dir, list_faults
from ..nezha import read_windows as _spans
from ..runner import (SimulatedAndReal, case_rows, chosen_faults, fault_rows, fault_type_table, rank_of, rank_shares,
                      recorded_faults, run_settings, seeded_cases, timed)
from ...analyses.compare.synthetic import SCENARIOS, simulate_scenario, top_service_hit

__all__ = ["CompareEvaluation", "RealFault", "default_data_dir", "evaluate", "evaluate_real", "evaluate_simulated",
           "list_faults", "per_fault_type"]

_SIM_SCHEMA = {"kind": pl.String, "seed": pl.Int64, "injected": pl.String, "estimator_top": pl.String,
               "estimator_hit": pl.Boolean, "anchor_top": pl.String, "anchor_hit": pl.Boolean,
               "fit_s": pl.Float64, "note": pl.String}
_REAL_SCHEMA = {"system": pl.String, "inject_time": pl.String, "fault_type": pl.String, "service": pl.String,
                "endpoints": pl.Int64, "estimator_rank": pl.Int64, "anchor_rank": pl.Int64,
                "estimator_top3": pl.String, "anchor_top3": pl.String, "injected_evidence": pl.String,
                "top_evidence": pl.String, "note": pl.String}


# --------------------------------------------------------------------------------------------
# Simulated scenarios
# --------------------------------------------------------------------------------------------

def evaluate_simulated(*, seeds: int = 5, n_requests: int = 2000, random_state=0, kinds=SCENARIOS,
                       estimator_params: dict | None = None) -> pl.DataFrame:
    """Rank services on every simulated scenario kind under ``seeds`` seeds.

    Parameters
    ----------
    seeds : int, default=5
        Scenarios of each kind.
    n_requests : int, default=2000
        Problem-period requests (the baseline has 1.5 times as many).
    random_state : int or None, default=0
        Seeds the scenarios (:func:`~tracesleuth.evaluation.runner.seeded_cases`); each
        estimator's seed is drawn from its scenario's.
    kinds : sequence of str, default=SCENARIOS
    estimator_params : dict, optional
        Settings of the estimator (the seed is added).

    Returns
    -------
    polars.DataFrame
        One row per scenario: ``kind``, ``seed``, ``injected``, ``estimator_top``,
        ``estimator_hit`` (null when the estimator failed), ``anchor_top``,
        ``anchor_hit``, ``fit_s`` (estimator fit, s) and ``note``.
    """
    cases = seeded_cases(kinds, seeds=seeds, random_state=random_state)
    return case_rows(cases, lambda case: [_scenario_row(*case, n_requests=n_requests,
                                                        estimator_params=estimator_params)], _SIM_SCHEMA)


def _scenario_row(kind: str, i: int, seq: np.random.SeedSequence, *, n_requests: int,
                  estimator_params: dict | None) -> dict:
    """Simulate one scenario, rank its services by the estimator and the anchor rule: its row."""
    from ...analyses.compare._baseline_rule import rank_services_by_rise
    from ...analyses.compare.analysis import RequestFlowComparison

    sc = simulate_scenario(kind, n_requests=n_requests, random_state=seq)
    problem, baseline = sc.tables()
    anchor = [s for s, _ in rank_services_by_rise(problem, baseline)]
    row = {"kind": kind, "seed": i, "injected": sc.injected, "estimator_top": None, "estimator_hit": None,
           "anchor_top": anchor[0] if anchor else None, "anchor_hit": top_service_hit(sc, anchor),
           "fit_s": None, "note": ""}
    params = {"random_state": int(seq.generate_state(1)[0]) % 2**31, **(estimator_params or {})}
    try:
        fitted, row["fit_s"] = timed(lambda: RequestFlowComparison(**params).fit(problem, baseline))
        res = fitted.result_
        row["estimator_top"] = res.services[0].service if res.services else None
        row["estimator_hit"] = top_service_hit(sc, res)
        if not res.significant:
            row["note"] = f"not significant: {res.reason}"
    except TraceSleuthError as exc:
        row["note"] = f"estimator failed: {exc}"
    return row


# --------------------------------------------------------------------------------------------
# Real faults
# --------------------------------------------------------------------------------------------

def _evidence(found, service: str) -> str:
    """What the estimator holds against ``service`` at its home endpoint, in words (or why nothing)."""
    endpoint, x = found.suspect(service)
    result = found.results[endpoint]
    if x is not None:
        return f"score {x.score:.2f} on {endpoint}: " + "; ".join(x.evidence[:2])
    spans = dict(result.service_calls).get(service, 0)
    if not spans:
        return "no span in the problem period"
    t = next((t for t in result.service_times if t.service == service), None)
    rise = (f"its time rose x{1 + t.severity:.2g} over {t.problem_calls} calls, p={t.p_value:.2g}: neither "
            "significant nor doubled" if t is not None else "its time did not rise")
    return (f"not suspected on {endpoint} ({spans} spans): {rise}; no operation of it makes fewer calls; no "
            "structural mutation diverges at it; no error rise")


def evaluate_fault(fault: RealFault, *, estimator_params: dict | None = None) -> dict:
    """Compare one fault's problem period with its baseline on every endpoint
    (:func:`~tracesleuth.analyses.compare.endpoints.compare_endpoints`, which knows nothing of the fault) and rank the
    injected service; the row of :func:`evaluate_real` (ranks are 1-based, null when absent).
    The anchor rule runs on the same endpoints and is merged the same way."""
    from ...analyses.compare._baseline_rule import rank_services_by_rise
    from ...analyses.compare.endpoints import _compare_tables, _tables_of, endpoints_of, merge_rankings

    problem_spans, baseline_spans = _spans(fault.problem_files), _spans(fault.baseline_files)
    tables = _tables_of(problem_spans, baseline_spans, endpoints_of(problem_spans, baseline_spans))
    # Both rankings read the same trace tables, built once per endpoint.
    anchor_rankings = [rank_services_by_rise(*pair) for pair in tables.values() if not isinstance(pair, str)]
    est, used, notes, why = [], 0, [], (None, None)
    try:
        found = _compare_tables(tables, **{"random_state": 0, **(estimator_params or {})})
        est, used = [s for s, _ in found.services], len(found.results)
        why = (_evidence(found, fault.service), f"{est[0]}: {_evidence(found, est[0])}" if est else None)
    except TraceSleuthError as exc:
        notes.append(f"{type(exc).__name__}: {exc}")
    anchor = [s for s, _ in merge_rankings(anchor_rankings)]
    return {"system": fault.system, "inject_time": fault.inject_time, "fault_type": fault.fault_type,
            "service": fault.service, "endpoints": used,
            "estimator_rank": rank_of(fault.service, est),
            "anchor_rank": rank_of(fault.service, anchor),
            "estimator_top3": ", ".join(est[:3]), "anchor_top3": ", ".join(anchor[:3]),
            "injected_evidence": why[0], "top_evidence": why[1], "note": "; ".join(notes)}


def evaluate_real(data_dir=None, *, faults=None, systems=SYSTEMS, estimator_params: dict | None = None,
                  baseline: str = "issue") -> pl.DataFrame:
    """Rank services on the recorded faults of ../shared/data/nezha (protocol in the module docstring).

    Parameters
    ----------
    data_dir : path, optional
        The ``nezha`` folder; default :func:`default_data_dir`.
    faults : sequence of RealFault or of int, optional
        Faults to run (or their indices in :func:`list_faults`); default all with windows.
    systems : sequence of str, default=("trainticket", "onlineboutique")
    estimator_params : dict, optional
    baseline : {"issue", "adjacent"}, default="issue"
        The issue's protocol, or the adjacent baseline (module docstring).

    Returns
    -------
    polars.DataFrame
        One row per fault: ``system``, ``inject_time``, ``fault_type``, ``service``,
        ``endpoints`` (compared), ``estimator_rank``, ``anchor_rank`` (1-based, null when not
        ranked), ``estimator_top3``, ``anchor_top3``, ``injected_evidence`` (what the estimator
        holds against the injected service at its home endpoint, or why nothing),
        ``top_evidence`` (the same for the top-ranked service) and ``note``.

    Raises
    ------
    ParameterError
        When no data folder is given or found, or ``baseline`` is unknown.
    """
    if baseline not in ("issue", "adjacent"):
        raise ParameterError(f"The 'baseline' parameter of evaluate_real must be 'issue' or 'adjacent'. "
                             f"Got {baseline!r} instead.")
    chosen = chosen_faults(data_dir, faults, systems)
    if baseline == "adjacent":
        chosen = [adjacent_baseline(f) for f in chosen]
    return fault_rows(chosen, lambda f: evaluate_fault(f, estimator_params=estimator_params), _REAL_SCHEMA)


def per_fault_type(real: pl.DataFrame) -> pl.DataFrame:
    """Top-1 and top-3 hit counts per system and fault type, estimator and anchor side by side."""
    return fault_type_table(real, {"estimator_rank": "estimator_", "anchor_rank": "anchor_"})


# --------------------------------------------------------------------------------------------
# The registered protocol
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompareEvaluation(SimulatedAndReal):
    """Results of :func:`evaluate` (the attributes of
    :class:`~tracesleuth.evaluation.runner.SimulatedAndReal`, and ``adjacent``).

    Attributes
    ----------
    simulated : polars.DataFrame
        One row per simulated scenario (:func:`evaluate_simulated`).
    real : polars.DataFrame
        One row per real fault (:func:`evaluate_real`); empty when the data was absent.
    scores : dict of str to float
        ``simulated_top1`` (estimator), ``anchor_simulated_top1``, and with real data
        ``real_top1``, ``real_top3`` (estimator, share of faults) and ``anchor_real_top1``,
        ``anchor_real_top3``; with the adjacent baseline the same four prefixed ``adjacent_``.
    adjacent : polars.DataFrame
        The adjacent baseline's rows (full evaluation only; module docstring).
    """

    adjacent: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=_REAL_SCHEMA))

    def to_frame(self) -> pl.DataFrame:
        """The per-fault-type table (real data), or the per-kind simulated table when no real data."""
        if self.real.height:
            return per_fault_type(self.real)
        return self.simulated_summary()

    def simulated_summary(self) -> pl.DataFrame:
        """Per scenario kind: scenarios, estimator and anchor top-1 hits."""
        return (self.simulated.group_by("kind", maintain_order=True)
                .agg(pl.len().alias("scenarios"), pl.col("estimator_hit").sum().alias("estimator_top1"),
                     pl.col("anchor_hit").sum().alias("anchor_top1")))

    def to_dict(self) -> dict:
        """Settings, scores, notes and every row (``real``: the issue's protocol; ``adjacent``: the
        adjacent baseline), JSON-safe."""
        return {**self._head(), "simulated": json_rows(self.simulated), "real": json_rows(self.real),
                "per_fault_type": json_rows(per_fault_type(self.real)) if self.real.height else [],
                "adjacent": json_rows(self.adjacent),
                "adjacent_per_fault_type": json_rows(per_fault_type(self.adjacent)) if self.adjacent.height else []}

    def describe(self) -> str:
        """The simulated and real tables and the scores, in words."""
        return describe_tables(
            [("Simulated scenarios (injected change ranked first)", self.simulated_summary()),
             ("Real faults (../shared/data/nezha): top-1 / top-3 of the injected service",
              per_fault_type(self.real) if self.real.height else self.real),
             ("Second protocol, adjacent baseline (TrainTicket against each fault's inject-minute file)",
              per_fault_type(self.adjacent) if self.adjacent.height else self.adjacent)], self.scores, self.notes)


def _share(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def evaluate(*, quick: bool = False, random_state=0, data_dir=None) -> CompareEvaluation:
    """The evaluation protocol registered for ``compare`` (issue 16, item 9).

    Parameters
    ----------
    quick : bool, default=False
        False: every scenario kind under 5 seeds of 2,000 problem requests, every real fault
        with trace windows, and TrainTicket's again with the adjacent baseline. True: 1 seed of
        400 requests per kind, and the first TrainTicket fault of each type (issue protocol only).
    random_state : int or None, default=0
        Seeds the simulated scenarios and the estimator's fits on them.
    data_dir : path, optional
        The ``nezha`` folder of the real faults, for both baselines; its default, and the note
        when it is absent: :func:`~tracesleuth.evaluation.runner.recorded_faults`.

    Returns
    -------
    CompareEvaluation

    Examples
    --------
    >>> ev = evaluate(quick=True)                                   # doctest: +SKIP
    >>> sorted(ev.scores)                                           # doctest: +SKIP
    ['anchor_real_top1', 'anchor_real_top3', 'anchor_simulated_top1', 'real_top1', 'real_top3', 'simulated_top1']
    """
    simulated = evaluate_simulated(seeds=1 if quick else 5, n_requests=400 if quick else 2000,
                                   random_state=random_state)
    # Quick: the first TrainTicket fault of each type.
    data, faults, notes = recorded_faults(data_dir, quick=quick,
                                          first_per=lambda f: f.fault_type if f.system == "trainticket" else None)
    real = adjacent = pl.DataFrame(schema=_REAL_SCHEMA)
    if faults is not None:
        real = evaluate_real(data, faults=faults)
        if not quick:
            adjacent = evaluate_real(data, faults=[f for f in faults if f.system == "trainticket"], baseline="adjacent")
    scores = {"simulated_top1": _share(simulated["estimator_hit"].to_list()),
              "anchor_simulated_top1": _share(simulated["anchor_hit"].to_list())}
    for prefix, rows in (("", real), ("adjacent_", adjacent)):
        if rows.height:
            for who, column in (("", "estimator_rank"), ("anchor_", "anchor_rank")):
                scores.update(rank_shares(rows[column].to_list(), f"{prefix}{who}real_top{{k}}"))
    scores = {k: v for k, v in scores.items() if v is not None}
    return CompareEvaluation(simulated=simulated, real=real, scores=scores, notes=tuple(notes),
                             settings=run_settings(quick, random_state, data), adjacent=adjacent)
