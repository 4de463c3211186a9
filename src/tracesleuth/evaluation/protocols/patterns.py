"""Section 4 of Cortellessa & Traini (ICPE 2020), re-run: latency degradation patterns vs baselines.

:func:`evaluate_patterns` repeats the paper's experiment on simulated E-Shopper sessions
(:mod:`tracesleuth.evaluation.eshopper`), or on the harder bookshop sessions of
:mod:`tracesleuth.evaluation.bookshop` (long-tailed normal latencies overlapping the degraded
bands, varied costs and fan-out, asynchronous work, several endpoints): for each session, the spans go through the normal path
(:func:`tracesleuth.model.build_trace_table`), each solver clusters the requests, and its clusters
are scored against the injected degradations with the metrics of Section 4.3
(:func:`tracesleuth.analyses.metrics.match_clusters`).

Protocol (Section 4.3 of [1]_)
------------------------------
* **Interval.** The degraded interval of a session is ``[L_min, L_max]``, the smallest and largest
  latency of an affected request (as a half-open interval, ``[L_min, L_max + 1 ns)``). With
  ``interval="auto"`` the estimator's automatic interval is used instead
  (:func:`tracesleuth.analyses.patterns.analysis.choose_interval` with its ``interval_rule``: the
  robust rule by default, the paper's with its settings), as a user without ground truth would:
  the pattern solvers are fitted without an interval and choose it themselves (so what the
  automatic rule adds, e.g. the uncertain requests below it, applies), the clustering baselines
  cluster the requests in the same interval.
* **Pattern solvers** (``"ga"``, ``"bnb"``): the estimator
  :class:`tracesleuth.analyses.patterns.analysis.LatencyDegradationPatterns` is fitted on the whole trace
  table with that interval and its default split points, on the exclusive-time columns only
  (:data:`ESTIMATOR_PARAMS`: the paper's patterns are on RPC execution times), with its default
  settings or those given (``estimator_params``; the paper's method exactly:
  :data:`~tracesleuth.analyses.patterns.analysis.PAPER_SETTINGS`); cluster ``k`` is
  the requests with ``labels_ == k``, those satisfying the pattern of sub-interval ``k``.
* **Clustering baselines** (``"kmeans"``, ``"hierarchical"``, ``"meanshift"``): only the requests
  in the interval are clustered (:func:`tracesleuth.analyses.patterns.clustering.cluster_degraded`), on
  all exclusive-time columns of the trace table. K-means and hierarchical clustering run for
  k = 2..6 and, as in the paper, the best solution against the ground truth is kept
  (``k_select="truth"``); ``k_select="silhouette"`` picks k without ground truth instead.
* **Metrics.** Best-matching cluster per degradation, then recall ``|G|/|P|``, precision
  ``|G|/(|C1|+|C2|)`` and F-score (eq. 5) over the whole session.
* **Time.** Wall-clock seconds of the solver alone (the estimator's ``fit``; ``cluster_degraded``
  with all its k), not of the simulation or of building the trace table.

Sessions are drawn from independent child seeds of ``random_state``; session ``i`` of a noised
run has the same degradations, markings and base times as session ``i`` of a normal run with
the same ``random_state``, plus the noises, so the two runs are paired.

References
----------
.. [1] V. Cortellessa and L. Traini, "Detecting Latency Degradation Patterns in Service-based
   Systems", ICPE 2020, Section 4, Tables 2 and 3. https://doi.org/10.1145/3358960.3379126
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import polars as pl

from ...errors import EmptyDataError, ParameterError
from ...model import build_trace_table
from ...analyses.patterns.clustering import CLUSTERING_METHODS, DEFAULT_K_RANGE, cluster_degraded
from ..eshopper import EShopperSession, simulate_eshopper
from ..runner import check_count
from ...analyses.metrics import match_clusters

__all__ = ["ESTIMATORS", "ESTIMATOR_PARAMS", "PATTERN_SOLVERS", "SOLVERS", "SOLVER_NAMES", "PatternsEvaluation", "evaluate_patterns",
           "evaluate_session", "render"]

#: Solvers of the estimator: the genetic algorithm and branch and bound (Section 4.5).
PATTERN_SOLVERS = ("ga", "bnb")
#: Every solver, in the paper's column order (Tables 2 and 3).
SOLVERS = PATTERN_SOLVERS + CLUSTERING_METHODS
#: Column headings as in the paper.
SOLVER_NAMES = {"ga": "Genetic", "bnb": "Branch and bound", "kmeans": "Kmeans",
                "hierarchical": "Hierarchical", "meanshift": "Mean shift"}
#: Estimator settings of the evaluation: the paper's patterns use RPC execution times only
#: (Section 4.4, "our current implementation only consider[s] RPCs execution time"), so the
#: categorical columns (the instance that served each call) are left out.
ESTIMATOR_PARAMS = {"categorical": False}
#: The estimator of each solver: (module, class, the setting that takes the solver's name). The
#: clustering baselines are :class:`~tracesleuth.analyses.patterns.baselines.DegradedClusters`
#: (``k_select="silhouette"``: the estimator as a user runs it; ``"truth"``: the paper's protocol,
#: k chosen against the injected degradations, which no estimator can do, by
#: :func:`~tracesleuth.analyses.patterns.clustering.cluster_degraded` directly).
_PATTERNS = "tracesleuth.analyses.patterns"
ESTIMATORS = {**{s: (f"{_PATTERNS}.analysis", "LatencyDegradationPatterns", "solver") for s in PATTERN_SOLVERS},
              **{m: (f"{_PATTERNS}.baselines", "DegradedClusters", "method") for m in CLUSTERING_METHODS}}
_INTERVALS = ("affected", "auto")
#: The simulators: the paper's E-Shopper sessions and the harder bookshop sessions.
SIMULATORS = ("eshopper", "bookshop")
_K_SELECT = ("truth", "silhouette")
_METRICS = ("f_score", "precision", "recall", "time_s")

_ROW_SCHEMA = {
    "session": pl.Int64, "solver": pl.String, "f_score": pl.Float64, "precision": pl.Float64,
    "recall": pl.Float64, "time_s": pl.Float64, "n_requests": pl.Int64, "n_affected": pl.Int64,
    "n_degraded": pl.Int64, "n_clusters": pl.Int64, "interval_low_ns": pl.Int64,
    "interval_high_ns": pl.Int64, "types": pl.String, "degradations": pl.String, "matched": pl.String,
}


@dataclass(frozen=True)
class PatternsEvaluation:
    """Results of :func:`evaluate_patterns`: one row per (session, solver), and their summary.

    Attributes
    ----------
    rows : polars.DataFrame
        One row per session and solver: ``session``, ``solver``, ``f_score``, ``precision``,
        ``recall`` (Section 4.3), ``time_s`` (solver wall-clock seconds), ``n_requests``,
        ``n_affected`` (``|P|``), ``n_degraded`` (requests in the interval), ``n_clusters``
        (clusters output by the solver), ``interval_low_ns``, ``interval_high_ns`` (half-open),
        ``types`` (e.g. ``"1+3"``), ``degradations`` (what was injected), ``matched`` (the cluster
        chosen for each degradation). Null interval bounds mean the automatic interval found no
        degradation in that session.
    noised : bool
        Whether the sessions carry the noises of Section 4.3.
    sessions, n_requests : int
        Sessions run and requests per session.
    random_state : int or None
        The seed the sessions were drawn from.
    solvers : tuple of str
    interval : {"affected", "auto"}
    k_select : {"truth", "silhouette"}
    simulator : {"eshopper", "bookshop"}
    estimator_params : dict
        Settings given to the estimator over :data:`ESTIMATOR_PARAMS` (e.g. the paper's).
    """

    rows: pl.DataFrame
    noised: bool
    sessions: int
    n_requests: int
    random_state: int | None
    solvers: tuple
    interval: str = "affected"
    k_select: str = "truth"
    simulator: str = "eshopper"
    estimator_params: dict = field(default_factory=dict)

    def to_frame(self) -> pl.DataFrame:
        """The per-session rows (a copy)."""
        return self.rows.clone()

    def summary(self) -> pl.DataFrame:
        """Per solver, in :attr:`solvers` order: mean and standard deviation (ddof=1) of F-score,
        precision, recall and time over the sessions (NaN rows, if any, are left out)."""
        aggs = [pl.len().alias("sessions")]
        for m in _METRICS:
            aggs += [pl.col(m).drop_nans().mean().alias(f"{m}_mean"), pl.col(m).drop_nans().std(ddof=1).alias(f"{m}_std")]
        order = pl.DataFrame({"solver": list(self.solvers), "_o": list(range(len(self.solvers)))})
        return (self.rows.group_by("solver").agg(aggs).join(order, on="solver").sort("_o").drop("_o"))

    def mean(self, solver: str, metric: str = "f_score") -> float:
        """Mean of ``metric`` (``"f_score"``, ``"precision"``, ``"recall"``, ``"time_s"``) for ``solver``."""
        if metric not in _METRICS:
            raise ParameterError(f"The 'metric' parameter must be one of {', '.join(_METRICS)}. Got {metric!r} instead.")
        s = self.summary().filter(pl.col("solver") == solver)
        if s.height == 0:
            raise ParameterError(f"The 'solver' parameter must be one of {', '.join(self.solvers)}. Got {solver!r} instead.")
        return float(s[f"{metric}_mean"][0])

    @property
    def scores(self) -> dict[str, float]:
        """Mean F-score per solver (the paper's Table 3 headline), in :attr:`solvers` order."""
        return {s: self.mean(s) for s in self.solvers}

    def describe(self) -> str:
        """The summary table (as the paper's Table 3) and the time table, in words."""
        return render(self, table="summary") + "\n" + render(self, table="time")

    def to_dict(self) -> dict:
        """Settings, summary and rows as JSON-safe values (NaN becomes ``None``)."""
        return {
            "settings": {"noised": self.noised, "sessions": self.sessions, "n_requests": self.n_requests,
                         "random_state": self.random_state, "solvers": list(self.solvers),
                         "interval": self.interval, "k_select": self.k_select, "simulator": self.simulator,
                         "estimator_params": {k: v for k, v in self.estimator_params.items()}},
            "summary": [_json_row(r) for r in self.summary().iter_rows(named=True)],
            "sessions": [_json_row(r) for r in self.rows.iter_rows(named=True)],
        }


def evaluate_patterns(*, sessions: int = 30, noised: bool = False, solvers: Sequence[str] = SOLVERS,
                      random_state: int | None = 0, n_requests: int = 1000, interval: str = "affected",
                      k_select: str = "truth", estimator_params: dict | None = None,
                      simulator: str = "eshopper") -> PatternsEvaluation:
    """Run the evaluation of Section 4 of [1]_ on simulated E-Shopper sessions.

    Parameters
    ----------
    sessions : int, default=30
        Load-test sessions to simulate (the paper reports 30 per setting in Table 2).
    noised : bool, default=False
        Add the two noises of Section 4.3 to every session.
    solvers : sequence of str, default=("ga", "bnb", "kmeans", "hierarchical", "meanshift")
        Any of :data:`SOLVERS`.
    random_state : int or None, default=0
        Seed of the sessions and of the solvers.
    n_requests : int, default=1000
        Requests per session.
    interval : {"affected", "auto"}, default="affected"
        ``"affected"``: the paper's ``[L_min, L_max]`` of the affected requests; ``"auto"``: the
        tool's automatic degraded interval.
    k_select : {"truth", "silhouette"}, default="truth"
        How K-means and hierarchical clustering choose k in 2..6: the best F-score against the
        injected degradations (the paper) or the silhouette (no ground truth).
    estimator_params : dict, optional
        Settings for :class:`~tracesleuth.analyses.patterns.analysis.LatencyDegradationPatterns` (pattern
        solvers only), over :data:`ESTIMATOR_PARAMS`; e.g. ``{"generations": 100}``, or
        :data:`~tracesleuth.analyses.patterns.analysis.PAPER_SETTINGS` for the paper's method exactly.
    simulator : {"eshopper", "bookshop"}, default="eshopper"
        ``"eshopper"``: the paper's sessions (:func:`~tracesleuth.evaluation.eshopper.simulate_eshopper`).
        ``"bookshop"``: the harder sessions of :func:`~tracesleuth.evaluation.bookshop.simulate_bookshop`
        (long-tailed normal latencies, varied costs and fan-out, several endpoints); about
        ``n_requests`` requests of its degraded endpoint are analysed.

    Returns
    -------
    PatternsEvaluation

    Raises
    ------
    ParameterError
        For an unknown solver, interval or k_select, or ``sessions`` < 1.

    Examples
    --------
    >>> ev = evaluate_patterns(sessions=2, solvers=("kmeans",), n_requests=400)
    >>> ev.to_frame().select("session", "solver").rows()
    [(0, 'kmeans'), (1, 'kmeans')]
    """
    solvers = tuple(solvers)
    bad = [s for s in solvers if s not in SOLVERS]
    if not solvers or bad or len(set(solvers)) != len(solvers):
        raise ParameterError(f"The 'solvers' parameter of evaluate_patterns must be distinct values among "
                             f"{', '.join(SOLVERS)}. Got {solvers!r} instead.")
    check_count("sessions", sessions, "evaluate_patterns")
    _check_choice("interval", interval, _INTERVALS)
    _check_choice("k_select", k_select, _K_SELECT)
    _check_choice("simulator", simulator, SIMULATORS)
    if any(s in PATTERN_SOLVERS for s in solvers):
        _estimator_class()          # fail early, before simulating anything

    rows = []
    for i, seq in enumerate(np.random.SeedSequence(random_state).spawn(int(sessions))):
        session = _simulate(simulator, n_requests, noised, seq)
        solver_seed = int(seq.generate_state(1)[0])
        for r in evaluate_session(session, solvers=solvers, interval=interval, k_select=k_select,
                                  random_state=solver_seed, estimator_params=estimator_params):
            rows.append({"session": i, **r})
    frame = pl.DataFrame(rows, schema=_ROW_SCHEMA)
    return PatternsEvaluation(rows=frame, noised=bool(noised), sessions=int(sessions), n_requests=int(n_requests),
                              random_state=random_state, solvers=solvers, interval=interval, k_select=k_select,
                              simulator=simulator, estimator_params=dict(estimator_params or {}))


def _simulate(simulator: str, n_requests: int, noised: bool, seq: np.random.SeedSequence):
    if simulator == "eshopper":
        return simulate_eshopper(n_requests=n_requests, noised=noised, random_state=seq)
    from ..bookshop import ENDPOINT_SHARES, simulate_bookshop

    return simulate_bookshop(n_requests=round(n_requests / ENDPOINT_SHARES[0]), noised=noised, random_state=seq)


def evaluate(*, quick: bool = False, random_state: int | None = 0, noised: bool = False) -> PatternsEvaluation:
    """The evaluation protocol registered for ``patterns``: the paper's experiment (Section 4).

    Parameters
    ----------
    quick : bool, default=False
        False: 30 sessions of 1,000 requests, every solver (as the paper). True: 3 sessions of
        300 requests, GA (100 generations) and K-means, for tests and smoke runs.
    random_state : int or None, default=0
    noised : bool, default=False
        The two noise types of Section 4.3.

    Returns
    -------
    PatternsEvaluation
        Its :attr:`~PatternsEvaluation.scores` are the mean F-score per solver.
    """
    if quick:
        return evaluate_patterns(sessions=3, n_requests=300, solvers=("ga", "kmeans"), noised=noised,
                                 random_state=random_state, estimator_params={"generations": 100})
    return evaluate_patterns(noised=noised, random_state=random_state)


def evaluate_session(session: EShopperSession, *, solvers: Sequence[str] = SOLVERS, interval: str = "affected",
                     k_select: str = "truth", random_state=None, estimator_params: dict | None = None) -> list[dict]:
    """Score each solver on one simulated session (Section 4.3 of [1]_).

    Parameters
    ----------
    session : EShopperSession
        Spans and ground truth, from :func:`~tracesleuth.evaluation.eshopper.simulate_eshopper`.
    solvers, interval, k_select
        As in :func:`evaluate_patterns`.
    random_state : int or None
        Seed given to every solver.
    estimator_params : dict, optional
        As in :func:`evaluate_patterns`.

    Returns
    -------
    list of dict
        One row per solver, with the columns of :attr:`PatternsEvaluation.rows` but ``session``.
    """
    _check_choice("interval", interval, _INTERVALS)
    _check_choice("k_select", k_select, _K_SELECT)
    params = {**ESTIMATOR_PARAMS, **(estimator_params or {})}
    table = build_trace_table(session.spans, getattr(session, "endpoint", None))
    frame = table.frame
    truth = session.labels_for(frame["trace_id"].to_list())
    latency = frame["latency_ns"].to_numpy()
    affected = np.array([t is not None for t in truth])
    if interval == "affected":
        if not affected.any():
            raise EmptyDataError("evaluate_session: no affected request, so no interval [L_min, L_max].")
        low, high = int(latency[affected].min()), int(latency[affected].max()) + 1
    else:
        auto = _estimator_module().choose_interval(latency, **_interval_settings(params))
        chosen = getattr(auto, "interval", None)  # (None: a NoDegradation note, no interval)
        low, high = (chosen.low_ns, chosen.high_ns) if chosen is not None else (None, None)
    inside = (latency >= low) & (latency < high) if low is not None else np.zeros(len(latency), bool)
    X = frame.select(table.continuous_columns).to_numpy().astype(np.float64)

    degs = session.degradations
    base = {"n_requests": len(truth), "n_affected": int(affected.sum()), "n_degraded": int(inside.sum()),
            "interval_low_ns": low, "interval_high_ns": high,
            "types": "+".join(str(d.type) for d in degs), "degradations": "; ".join(d.describe() for d in degs)}
    names = [d.name for d in degs]
    out = []
    for solver in solvers:
        t0 = time.perf_counter()
        if low is None:
            clusters = np.full(len(truth), -1)
        elif solver in CLUSTERING_METHODS:
            clusters = (_cluster(X, inside, truth, names, solver, k_select, random_state) if k_select == "truth" else
                        np.asarray(estimator(solver, interval=(low, high), min_support=1,
                                             random_state=random_state).fit(table).labels_))
        else:
            clusters = _pattern_clusters(solver, table, (low, high) if interval == "affected" else None, random_state,
                                         params)
        elapsed = time.perf_counter() - t0
        match = match_clusters(truth, clusters, degradations=names)
        n_clusters = int(len(np.unique(clusters[clusters >= 0])))
        out.append({"solver": solver, "f_score": match.f_score, "precision": match.precision,
                    "recall": match.recall, "time_s": elapsed, **base, "n_clusters": n_clusters,
                    "matched": ", ".join(f"{k}->{v}" for k, v in match.matched.items())})
    return out


def _cluster(X: np.ndarray, inside: np.ndarray, truth: np.ndarray, names: list, method: str,
             k_select: str, random_state) -> np.ndarray:
    """Labels over all requests (-1 outside the interval) from a clustering baseline."""
    full = np.full(len(truth), -1, dtype=np.int64)
    if not inside.any():
        return full

    def truth_score(labels: np.ndarray) -> float:
        full[inside] = labels
        return match_clusters(truth, full, degradations=names).f_score

    full[inside] = cluster_degraded(X[inside], method=method, random_state=random_state,
                                    k_range=DEFAULT_K_RANGE, select=truth_score)
    return full


def estimator(solver: str, **settings):
    """The registered estimator of a solver (:data:`ESTIMATORS`), with these settings."""
    from importlib import import_module

    module, name, key = ESTIMATORS[solver]
    cls = getattr(import_module(module), name)
    return cls(**{key: solver}, **settings)


def _estimator_module():
    try:
        from ...analyses.patterns import analysis
    except ImportError as exc:
        raise ParameterError(f"The pattern solvers {', '.join(PATTERN_SOLVERS)} need "
                             f"tracesleuth.analyses.patterns.analysis.LatencyDegradationPatterns, which cannot be "
                             f"imported ({exc}). Run the clustering solvers only: "
                             f"solvers={CLUSTERING_METHODS!r}.") from None
    return analysis


def _estimator_class():
    return _estimator_module().LatencyDegradationPatterns


def _interval_settings(params: dict) -> dict:
    """The automatic interval's settings among the estimator's (its defaults for the others)."""
    defaults = _estimator_class()().get_params()
    get = lambda k: params.get(k, defaults[k])  # noqa: E731
    return {"rule": get("interval_rule"), "tail_z": float(get("tail_z")),
            "quantile": float(get("bandwidth_quantile")), "min_bin_fraction": float(get("min_bin_fraction"))}


def _pattern_clusters(solver: str, table, interval: tuple[int, int] | None, random_state,
                      estimator_params: dict) -> np.ndarray:
    """The estimator's ``labels_`` (per table row: the sub-interval whose pattern it satisfies, -1),
    with the given ``interval`` ``(low_ns, high_ns)`` or its automatic one (None: the same choice
    as :func:`choose_interval`, made by the estimator as a user's would be)."""
    fitted = estimator(solver, interval=interval, random_state=random_state, **estimator_params).fit(table)
    return np.asarray(fitted.labels_, dtype=np.int64)


def _check_choice(name: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ParameterError(f"The {name!r} parameter must be one of {', '.join(map(repr, allowed))}. "
                             f"Got {value!r} instead.")


def _json_row(row: dict) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


# --------------------------------------------------------------------------------------------
# Rendering (Tables 2 and 3 of the paper)
# --------------------------------------------------------------------------------------------

def render(*evaluations: PatternsEvaluation, table: str = "summary", digits: int = 3) -> str:
    """Plain-text tables in the layout of the paper's results.

    Parameters
    ----------
    *evaluations : PatternsEvaluation
        One or more evaluations (e.g. normal, then noised).
    table : {"summary", "sessions", "time"}, default="summary"
        ``"sessions"``: Table 2, F-score, precision and recall of every solver per session (one
        block per evaluation), with mean and standard deviation rows. ``"time"``: Table 3, mean
        and standard deviation of the solvers' execution time, one column pair per evaluation.
        ``"summary"``: mean ± standard deviation of F-score, precision and recall per solver and
        evaluation (the paper's Figures 6-8 as numbers).
    digits : int, default=3
        Decimals shown.

    Returns
    -------
    str
    """
    if not evaluations:
        raise ParameterError("render needs at least one PatternsEvaluation.")
    _check_choice("table", table, ("summary", "sessions", "time"))
    if table == "sessions":
        return "\n\n".join(_render_sessions(ev, digits) for ev in evaluations)
    if table == "time":
        return _render_time(evaluations, digits)
    return _render_summary(evaluations, digits)


def _title(ev: PatternsEvaluation) -> str:
    return (f"{ev.simulator}: {'noised' if ev.noised else 'normal'} sessions ({ev.sessions} x {ev.n_requests} requests, "
            f"interval={ev.interval}, k by {ev.k_select}, random_state={ev.random_state})")


def _fmt(x, digits: int) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _grid(header: list[list[str]], body: list[list[str]]) -> str:
    rows = header + body
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([*(line(r) for r in header), rule, *(line(r) for r in body)])


def _render_sessions(ev: PatternsEvaluation, digits: int) -> str:
    cols = ("f_score", "precision", "recall")
    top, sub = ["" ], ["ID"]
    for s in ev.solvers:
        top += [SOLVER_NAMES[s], "", ""]
        sub += ["F-score", "Prec", "Recall"]
    body = []
    for i in range(ev.sessions):
        r = ev.rows.filter(pl.col("session") == i)
        cells = [str(i)]
        for s in ev.solvers:
            rs = r.filter(pl.col("solver") == s)
            cells += [_fmt(rs[c][0] if rs.height else None, digits) for c in cols]
        body.append(cells)
    summ = ev.summary()
    for stat in ("mean", "std"):
        cells = [stat]
        for s in ev.solvers:
            rs = summ.filter(pl.col("solver") == s)
            cells += [_fmt(rs[f"{c}_{stat}"][0], digits) for c in cols]
        body.append(cells)
    return _title(ev) + "\n" + _grid([top, sub], body)


def _render_time(evaluations, digits: int) -> str:
    solvers = list(dict.fromkeys(s for ev in evaluations for s in ev.solvers))
    top, sub = ["Approach"], [""]
    for ev in evaluations:
        top += [f"{ev.simulator}, {ev.interval}, {'noised' if ev.noised else 'normal'}", ""]
        sub += ["time mean (s)", "time std (s)"]
    body = []
    for s in solvers:
        cells = [SOLVER_NAMES[s]]
        for ev in evaluations:
            rs = ev.summary().filter(pl.col("solver") == s)
            cells += [_fmt(rs["time_s_mean"][0] if rs.height else None, digits),
                      _fmt(rs["time_s_std"][0] if rs.height else None, digits)]
        body.append(cells)
    return "Execution time per session\n" + _grid([top, sub], body)


def _render_summary(evaluations, digits: int) -> str:
    blocks = []
    for ev in evaluations:
        summ = ev.summary()
        body = []
        for s in ev.solvers:
            rs = summ.filter(pl.col("solver") == s)
            body.append([SOLVER_NAMES[s]] + [
                f"{_fmt(rs[f'{c}_mean'][0], digits)} ± {_fmt(rs[f'{c}_std'][0], digits)}"
                for c in ("f_score", "precision", "recall")])
        blocks.append(_title(ev) + "\n" + _grid([["Approach", "F-score", "Precision", "Recall"]], body))
    return "\n\n".join(blocks)
