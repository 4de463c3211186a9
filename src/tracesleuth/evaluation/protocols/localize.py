"""Evaluation of root-cause localization (issue 17, item 9): the paper's four scenarios, then real faults.

:func:`evaluate` is the protocol registered for ``localize`` (``tracesleuth evaluate localize``).

Simulated scenarios (:func:`evaluate_simulated`)
-------------------------------------------------
The four scenarios of the paper's Section 6.1.2 (:data:`~tracesleuth.analyses.localize.synthetic.SCENARIOS`, simulated by
:func:`~tracesleuth.analyses.localize.synthetic.simulate_scenario` on replicated services with ground-truth methods and
instances), each under several seeds, analysed with and without cluster adjustment, with the
estimator's default settings and with the paper's (:data:`PAPER_SETTINGS`). Per scenario, the columns of the paper's Table 2: the share of major clusters among all
clusters, of principal methods among all methods, of the requests the major clusters hold
(after merging) among all requests, and the false-negative and false-positive rates of
equations (6)-(7) (:func:`~tracesleuth.analyses.localize.synthetic.error_rates`), averaged over the seeds.

Real faults (:func:`evaluate_real`, ../shared/data/nezha)
----------------------------------------------------------
Each recorded fault's windows analysed alone, with no baseline: the inject-minute file (the
minute before the fault) and the two minutes after it (:mod:`tracesleuth.evaluation.nezha`), every
root endpoint (:func:`tracesleuth.model.root_tables`), with the estimator's default settings (the
paper's method and the changes within the window). Per fault, the rank of the injected service in
``services`` and, where that service ran on several instances, whether the injected pod is the
top instance of its most suspicious method. Per fault type: top-1 and top-3 counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ...errors import TraceSleuthError
from ..protocol import describe_tables, json_rows
from ..nezha import SYSTEMS, RealFault, read_windows
from ..runner import (SimulatedAndReal, case_rows, chosen_faults, fault_rows, fault_type_table, rank_of, rank_shares,
                      recorded_faults, run_settings, seeded_cases, timed)

__all__ = ["LocalizeEvaluation", "PAPER_SETTINGS", "evaluate", "evaluate_real", "evaluate_simulated", "table_2"]

#: The paper's method: classical PCA on raw latencies, anomalous requests by SPE alone, every split
#: cluster tested, a method anomalous on a significant two-sided Mann-Whitney test whatever its
#: effect size.
PAPER_SETTINGS = {"robust": False, "combined": False, "log": False, "alternative": "two-sided", "min_effect": 0.5,
                  "alarm_test": False, "changes": False}
LATENCY_FAULTS = ("cpu_contention", "cpu_consumed", "network_delay")

_SIM_SCHEMA = {"scenario": pl.String, "seed": pl.Int64, "settings": pl.String, "adjusted": pl.Boolean,
               "clusters": pl.Int64, "major_clusters": pl.Int64, "methods": pl.Int64, "principal_methods": pl.Int64,
               "requests": pl.Int64, "involved_requests": pl.Int64, "false_negative_rate": pl.Float64,
               "false_positive_rate": pl.Float64, "top_method_hit": pl.Boolean, "top_service_hit": pl.Boolean,
               "instance_hit": pl.Boolean, "fit_s": pl.Float64}
_REAL_SCHEMA = {"system": pl.String, "inject_time": pl.String, "fault_type": pl.String, "service": pl.String,
                "pod": pl.String, "requests": pl.Int64, "rank": pl.Int64, "top3": pl.String, "instances": pl.Int64,
                "pod_top_instance": pl.Boolean, "fit_s": pl.Float64, "note": pl.String}


# --------------------------------------------------------------------------------------------
# Simulated scenarios
# --------------------------------------------------------------------------------------------

def evaluate_simulated(*, seeds: int = 3, n_requests: int = 3000, random_state=0, scenarios=None,
                       settings: dict | None = None) -> pl.DataFrame:
    """Every scenario under ``seeds`` seeds, with and without adjustment, default and paper settings.

    Parameters
    ----------
    seeds : int, default=3
        Simulations of each scenario, each localized under every settings, adjusted and not.
    n_requests : int, default=3000
        Requests per scenario.
    random_state : int or None, default=0
        Seeds the scenarios (:func:`~tracesleuth.evaluation.runner.seeded_cases`); the
        estimator's seed is the scenario's index ``i``.
    scenarios : sequence of str, optional
        Default: all of :data:`~tracesleuth.analyses.localize.synthetic.SCENARIOS`.
    settings : dict of str to dict, optional
        Named estimator settings to compare; default ``{"default": {}, "paper": PAPER_SETTINGS}``.

    Returns
    -------
    polars.DataFrame
        One row per (scenario, seed, settings, adjusted): cluster, method and request counts
        (Table 2's ratios), ``false_negative_rate`` and ``false_positive_rate`` (equations
        6-7), ``top_method_hit`` (the first method is an anomalous one), ``top_service_hit``,
        ``instance_hit`` (an anomalous instance stands out for the first method; null when the
        fault is on every instance) and ``fit_s``.

    Raises
    ------
    ParameterError
        ``seeds`` is not a positive int.
    """
    from ...analyses.localize.synthetic import SCENARIOS

    cases = seeded_cases(scenarios or SCENARIOS, seeds=seeds, random_state=random_state)
    settings = {"default": {}, "paper": PAPER_SETTINGS} if settings is None else settings
    return case_rows(cases, lambda case: _scenario_rows(*case, n_requests=n_requests, settings=settings), _SIM_SCHEMA)


def _scenario_rows(kind: str, i: int, seq: np.random.SeedSequence, *, n_requests: int, settings: dict) -> list[dict]:
    """Simulate one scenario and localize it under every named settings, with and without
    adjustment: its rows."""
    from ...analyses.localize.analysis import RootCauseLocalization
    from ...analyses.localize.synthetic import error_rates, simulate_scenario

    sc = simulate_scenario(kind, n_requests=n_requests, random_state=seq)
    tables = sc.tables()
    n_methods = len(sc.anomalous_methods | sc.normal_methods)
    rows = []
    for name, params in settings.items():
        for adjusted in (True, False):
            est = RootCauseLocalization(**{"random_state": i, **params, "adjust_clusters": adjusted})
            res, fit_s = timed(lambda: est.fit(tables).result_)
            fn, fp = error_rates(sc, res)
            found = res.anomalous_methods
            top_instances = [x for x in res.instances if found and x.operation_key == found[0].operation_key]
            rows.append({
                "scenario": kind, "seed": i, "settings": name, "adjusted": adjusted,
                "clusters": res.n_clusters, "major_clusters": len(res.clusters), "methods": n_methods,
                "principal_methods": len({m.operation_key for m in res.methods}),
                "requests": res.n_requests,
                "involved_requests": int(sum(c.n_requests for c in res.clusters)),
                "false_negative_rate": fn, "false_positive_rate": fp,
                "top_method_hit": bool(found) and found[0].operation_key in sc.anomalous_methods,
                "top_service_hit": bool(res.services) and res.services[0].service == sc.injected_service,
                "instance_hit": (None if not sc.anomalous_instances else
                                 any(x.stands_out and x.instance in sc.anomalous_instances
                                     for x in top_instances)),
                "fit_s": fit_s})
    return rows


def table_2(simulated: pl.DataFrame) -> pl.DataFrame:
    """The paper's Table 2 from :func:`evaluate_simulated`'s rows: means over seeds, in percent.

    Returns
    -------
    polars.DataFrame
        Per scenario, settings and adjustment: ``major_clusters_pct`` (of all clusters),
        ``principal_methods_pct`` (of all methods), ``involved_requests_pct`` (of all requests),
        ``false_negative_pct``, ``false_positive_pct``, and the top-method, top-service and
        instance hit rates (percent).
    """
    pct = lambda num, den: (100 * pl.col(num) / pl.col(den)).mean().round(1)  # noqa: E731
    return (simulated.group_by("scenario", "settings", "adjusted", maintain_order=True)
            .agg(pl.len().alias("seeds"), pct("major_clusters", "clusters").alias("major_clusters_pct"),
                 pct("principal_methods", "methods").alias("principal_methods_pct"),
                 pct("involved_requests", "requests").alias("involved_requests_pct"),
                 (100 * pl.col("false_negative_rate")).mean().round(1).alias("false_negative_pct"),
                 (100 * pl.col("false_positive_rate")).mean().round(1).alias("false_positive_pct"),
                 (100 * pl.col("top_method_hit").cast(pl.Float64)).mean().round(0).alias("top_method_pct"),
                 (100 * pl.col("top_service_hit").cast(pl.Float64)).mean().round(0).alias("top_service_pct"),
                 (100 * pl.col("instance_hit").cast(pl.Float64)).mean().round(0).alias("instance_pct")))


# --------------------------------------------------------------------------------------------
# Real faults
# --------------------------------------------------------------------------------------------

def evaluate_fault(fault: RealFault, *, estimator_params: dict | None = None) -> dict:
    """Localize one recorded fault from its windows alone; the row of :func:`evaluate_real`."""
    from ...model import root_tables
    from ...analyses.localize.analysis import RootCauseLocalization

    spans = read_windows((fault.inject_file,) + tuple(fault.problem_files))
    row = {"system": fault.system, "inject_time": fault.inject_time, "fault_type": fault.fault_type,
           "service": fault.service, "pod": fault.pod, "requests": None, "rank": None, "top3": None,
           "instances": None, "pod_top_instance": None, "fit_s": None, "note": ""}

    def fit():
        tables, _ = root_tables(spans)
        return tables, RootCauseLocalization(**{"random_state": 0, **(estimator_params or {})}).fit(tables).result_

    try:
        (tables, res), row["fit_s"] = timed(fit)
    except TraceSleuthError as exc:
        row["note"] = f"{type(exc).__name__}: {exc}"
        return row
    services = [s.service for s in res.services]
    row.update(requests=res.n_requests, rank=rank_of(fault.service, services), top3=", ".join(services[:3]))
    pods = {p for t in tables for p in t.calls().filter(pl.col("service") == fault.service)["instance"].drop_nulls()}
    row["instances"] = len(pods)
    mine = [m for m in res.anomalous_methods if m.service == fault.service]
    if len(pods) > 1 and mine:
        ranked = [x for x in res.instances if x.operation_key == mine[0].operation_key]
        row["pod_top_instance"] = bool(ranked) and ranked[0].instance == fault.pod
    if not res.services:
        row["note"] = "nothing anomalous"
    return row


def evaluate_real(data_dir=None, *, faults=None, systems=SYSTEMS, estimator_params: dict | None = None
                  ) -> pl.DataFrame:
    """Localize every recorded fault of ../shared/data/nezha (protocol in the module docstring).

    Parameters
    ----------
    data_dir : path, optional
        The ``nezha`` folder; default :func:`~tracesleuth.evaluation.nezha.default_data_dir`.
    faults : sequence of RealFault or of int, optional
        Faults to run (or their indices in ``list_faults``); default all with windows.
    systems : sequence of str, default=SYSTEMS
    estimator_params : dict, optional

    Returns
    -------
    polars.DataFrame
        One row per fault: ``system``, ``inject_time``, ``fault_type``, ``service``, ``pod``,
        ``requests``, ``rank`` (1-based, null when not ranked), ``top3``, ``instances`` (of the
        injected service), ``pod_top_instance`` (null when it has one instance or no anomalous
        method), ``fit_s`` and ``note``.

    Raises
    ------
    ParameterError
        When no data folder is given or found.
    """
    return fault_rows(chosen_faults(data_dir, faults, systems),
                      lambda f: evaluate_fault(f, estimator_params=estimator_params), _REAL_SCHEMA)


def per_fault_type(real: pl.DataFrame) -> pl.DataFrame:
    """Top-1 and top-3 hit counts of the injected service per system and fault type."""
    return fault_type_table(real, {"rank": ""}, [pl.col("pod_top_instance").sum().alias("pod_top_instance"),
                                                  pl.col("pod_top_instance").is_not_null().sum().alias("pod_checked")])


# --------------------------------------------------------------------------------------------
# The registered protocol
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LocalizeEvaluation(SimulatedAndReal):
    """Results of :func:`evaluate` (the attributes of
    :class:`~tracesleuth.evaluation.runner.SimulatedAndReal`).

    Attributes
    ----------
    simulated : polars.DataFrame
        :func:`evaluate_simulated`'s rows.
    real : polars.DataFrame
        :func:`evaluate_real`'s rows.
    scores : dict of str to float
        ``simulated_top_method`` (default settings, adjusted), ``simulated_1_minus_fn`` and
        ``simulated_1_minus_fp`` (1 - mean rate), and with real data ``real_top1``,
        ``real_top3`` and ``real_latency_top3`` (latency faults only).
    """

    def to_frame(self) -> pl.DataFrame:
        """The paper's Table 2 (:func:`table_2`)."""
        return table_2(self.simulated)

    def to_dict(self) -> dict:
        """Settings, scores, notes, Table 2 and every row, JSON-safe."""
        return {**self._head(), "table_2": json_rows(table_2(self.simulated)), "simulated": json_rows(self.simulated),
                "real": json_rows(self.real),
                "per_fault_type": json_rows(per_fault_type(self.real)) if self.real.height else []}

    def describe(self) -> str:
        """Table 2, the real-fault table and the scores, in words."""
        return describe_tables(
            [("Simulated scenarios (the paper's Table 2; rates in percent, means over seeds)", table_2(self.simulated)),
             ("Real faults (../shared/data/nezha, windows alone): rank of the injected service",
              per_fault_type(self.real) if self.real.height else self.real)], self.scores, self.notes)


def evaluate(*, quick: bool = False, random_state=0, data_dir=None) -> LocalizeEvaluation:
    """The evaluation protocol registered for ``localize`` (issue 17, item 9).

    Parameters
    ----------
    quick : bool, default=False
        False: every scenario under 3 seeds of 3,000 requests, and every real fault with
        windows. True: 1 seed of 1,500 requests, default settings only, and the first fault of
        each type of each system.
    random_state : int or None, default=0
        Seeds the simulated scenarios (the real faults' fits use 0).
    data_dir : path, optional
        The ``nezha`` folder, each fault's windows read alone; its default, and the note when it
        is absent: :func:`~tracesleuth.evaluation.runner.recorded_faults`.

    Returns
    -------
    LocalizeEvaluation
    """
    simulated = evaluate_simulated(seeds=1 if quick else 3, n_requests=1500 if quick else 3000,
                                   random_state=random_state, settings={"default": {}} if quick else None)
    # Quick: the first fault of each type of each system.
    data, faults, notes = recorded_faults(data_dir, quick=quick, first_per=lambda f: (f.system, f.fault_type))
    real = pl.DataFrame(schema=_REAL_SCHEMA) if faults is None else evaluate_real(data, faults=faults)
    main = simulated.filter((pl.col("settings") == "default") & pl.col("adjusted"))
    scores = {"simulated_top_method": float(main["top_method_hit"].mean()),
              "simulated_1_minus_fn": 1.0 - float(main["false_negative_rate"].mean()),
              "simulated_1_minus_fp": 1.0 - float(main["false_positive_rate"].mean())}
    if real.height:
        scores.update(rank_shares(real["rank"].to_list(), "real_top{k}"))
        latency = real.filter(pl.col("fault_type").is_in(LATENCY_FAULTS))["rank"].to_list()
        if latency:
            scores.update(rank_shares(latency, "real_latency_top{k}", ks=(3,)))
    return LocalizeEvaluation(simulated=simulated, real=real, scores=scores, notes=tuple(notes),
                              settings=run_settings(quick, random_state, data))
