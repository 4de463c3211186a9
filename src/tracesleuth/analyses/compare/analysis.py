"""Request-flow comparison: what changed between a baseline and a problem period, and where.

:class:`RequestFlowComparison` implements Spectroscope (Sambasivan et al., NSDI 2011): the requests
of both periods are grouped into categories of identical structure (:mod:`.categories`);
response-time and structural mutations are found and mapped to precursors, ranked by their
expected contribution to the slowdown, explained by the edges, operations and low-level
attributes that changed (:mod:`.mutations`), and summed up as a ranked list of services
(:mod:`.services`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import EmptyDataError, ParameterError
from ...units import format_duration_ns
from .._contract import Analysis, Interval, Options, Seed
from .._notes import Note, WithNotes
from .._statistics import proportion_p_values
from .categories import category_stats, divergence_sides, edit_distance, key_pattern, parse_signature
from .mutations import (FlowGraph, Mutation, Precursor, adjust_p_values, localize,
                        low_level_differences, response_time_contribution,
                        structural_contribution)
from .notes import (BelowTopK, CategoriesUntested, NoCommonCategory, NoSignificantChange, NoSpans, NothingSlower,
                    PooledOnly, PrecursorsRelaxed, WorkloadMix)
from .calls import PeriodCalls, read_period, spill_directories
from .pooled import CallDrop, Pooled, PooledChange, ServiceTime, pooled_from
from .services import ServiceSuspect, rank_services

__all__ = ["ComparisonResult", "RequestFlowComparison"]

CORRECTIONS = ("holm", "bonferroni", "none")

_FRAME_SCHEMA = {
    "rank": pl.Int64, "kind": pl.String, "category": pl.String, "contribution_ns": pl.Float64,
    "baseline_count": pl.Int64, "problem_count": pl.Int64, "baseline_mean_ns": pl.Float64,
    "problem_mean_ns": pl.Float64, "p_value": pl.Float64, "top_precursor": pl.String,
    "divergence": pl.String, "divergence_service": pl.String, "n_edges": pl.Int64, "n_operations": pl.Int64,
    "top_edge": pl.String, "top_operation": pl.String, "low_level": pl.String,
}


@dataclass(frozen=True)
class ComparisonResult(WithNotes):
    """What :class:`RequestFlowComparison` found.

    Attributes
    ----------
    significant : bool
        Whether any mutation was found; when False, ``reason`` says why.
    reason : NoSignificantChange or None
        The tests that found nothing, with their numbers (``str()``: in words).
    endpoint : str
        The operation key both periods' requests enter by.
    n_baseline, n_problem : int
        Requests in each period.
    services : tuple of ServiceSuspect
        Most suspicious first (:mod:`.services` documents the rule).
    mutations : tuple of Mutation
        Slow-downs by contribution, highest first, then the others (speed-ups, and structural
        mutations that made requests faster) by absolute contribution.
    notes : tuple of Note
        The decisions worth knowing, as records (:mod:`.notes`: tests skipped for want of
        requests, heuristics relaxed, a workload-mix change...).
    pooled : tuple of PooledChange
        Operations' self times and edges' gaps that rose significantly, pooled over all
        categories (:mod:`.pooled`), most added time first.
    service_times : tuple of ServiceTime
        Every service whose time rose (significant or not), most severe first (:mod:`.pooled`).
    call_drops : tuple of CallDrop
        Operations whose spans make significantly fewer calls than any baseline span did.
    service_calls : tuple of (str, int)
        Spans of each service in the problem period (the support behind its evidence; the
        endpoint merge reads it).
    """

    significant: bool
    reason: NoSignificantChange | None
    endpoint: str
    n_baseline: int
    n_problem: int
    services: tuple[ServiceSuspect, ...] = ()
    mutations: tuple[Mutation, ...] = ()
    notes: tuple[Note, ...] = ()
    pooled: tuple[PooledChange, ...] = ()
    service_times: tuple[ServiceTime, ...] = ()
    call_drops: tuple[CallDrop, ...] = ()
    service_calls: tuple[tuple[str, int], ...] = ()

    def to_frame(self) -> pl.DataFrame:
        """One row per mutation (empty, same columns, when there is none)."""
        rows = [{
            "rank": m.rank, "kind": m.kind, "category": m.category, "contribution_ns": m.contribution_ns,
            "baseline_count": m.baseline_count, "problem_count": m.problem_count,
            "baseline_mean_ns": m.baseline_mean_ns, "problem_mean_ns": m.problem_mean_ns, "p_value": m.p_value,
            "top_precursor": m.precursors[0].category if m.precursors else None, "divergence": m.divergence,
            "divergence_service": m.divergence_service, "n_edges": len(m.edges), "n_operations": len(m.operations),
            "top_edge": m.edges[0].describe() if m.edges else None,
            "top_operation": m.operations[0].operation_key if m.operations else None,
            "low_level": "; ".join(m.low_level) or None,
        } for m in self.mutations]
        return pl.DataFrame(rows, schema=_FRAME_SCHEMA)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict; top-level ``services`` (``service``, ``score``, ``evidence``) and ``mutations``."""
        out = {
            "significant": self.significant,
            "reason": None if self.reason is None else self.reason.to_dict(), "endpoint": self.endpoint,
            "n_baseline": self.n_baseline, "n_problem": self.n_problem,
            "services": [s.to_dict() for s in self.services],
            "mutations": [m.to_dict() for m in self.mutations],
            "notes": [n.to_dict() for n in self.notes],
            "pooled": [c.to_dict() for c in self.pooled],
            "service_times": [t.to_dict() for t in self.service_times],
            "call_drops": [d.to_dict() for d in self.call_drops],
            "service_calls": dict(self.service_calls),
        }
        json.dumps(out)  # a failure here is a bug, not bad input
        return out

    def describe(self) -> str:
        """A few lines in words."""
        head = f"{self.endpoint}: {self.n_baseline} baseline vs {self.n_problem} problem requests."
        if not self.significant:
            return f"{head} {self.reason}"
        lines = [head, "Most suspicious services:" if self.services else
                 "No service is suspected (only speed-ups, workload-mix changes or rises too small to count)."]
        for s in self.services[:3]:
            lines.append(f"  {s.service} (score {s.score:.2f}): {s.evidence[0] if s.evidence else ''}")
        if self.mutations:
            lines.append("Top mutations:")
        for m in self.mutations[:3]:
            where = f", diverges at {m.divergence}" if m.divergence else ""
            lines.append(f"  #{m.rank} {m.kind}: contribution {format_duration_ns(abs(m.contribution_ns))}"
                         f"{' (faster)' if m.contribution_ns < 0 else ''}, {m.problem_count} problem requests"
                         f"{where}{' (workload mix)' if m.workload_mix else ''}")
        if self.pooled:
            lines.append("Pooled over categories:")
            lines += [f"  {c.describe()}" for c in self.pooled[:3]]
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)


def _table(x: Any, name: str):
    if not hasattr(x, "frame") or not hasattr(x, "endpoint"):
        raise ParameterError(f"The {name} period must be a TraceTable (from build_trace_table); "
                             f"got {type(x).__name__}.")
    if x.frame.height == 0:
        raise EmptyDataError(f"The {name} period has no request of its endpoint {x.endpoint!r}.")
    if x.frame.height < 2:
        raise EmptyDataError(f"The {name} period has one request only; comparing distributions needs at least 2.")
    return x


def _sides(entry: dict) -> tuple[list, list]:
    """The categories whose requests a mutation compares (Section 3.2): a response-time mutation's
    own in both periods; a structural one's precursors (baseline; none when it has none) and its own
    (problem)."""
    own = [entry["row"][S.SIGNATURE]]
    if entry["kind"] == "response-time":
        return own, own
    return [p.category for p in entry["precursors"]], own


class RequestFlowComparison(Analysis):
    """Compare the request flows of a baseline and a problem period (Spectroscope).

    Parameters
    ----------
    alpha : float, default=0.05
        Significance of every test (KS tests of categories, edges and operations; share
        changes), after ``correction``. The paper's 95% confidence.
    correction : {"holm", "bonferroni", "none"}, default="holm"
        Multiple-test control over a family of tests (the categories' KS tests; the share
        tests; the edge and operation tests inside one mutation): Holm's step-down method
        controls the family-wise error rate at ``alpha`` (so identical periods report no change
        with probability >= 1 - alpha however many categories there are) and is more powerful
        than Bonferroni's; "none" is the paper's per-test 95%.
    min_requests : int, default=10
        Requests (calls, for edges and operations) a category needs in each period to be KS
        tested; below it the distribution is too poorly known (Section 3.2).
    min_calls : int, default=5
        Calls an operation or edge needs in each period (in the strata common to both) for the
        rank tests pooled over categories (:mod:`.pooled`). Lower than ``min_requests`` because
        a rank test's own p-value accounts for a small sample (with 5 calls a side its smallest
        one-sided p-value is about 0.004, so noise there cannot pass the multiple-test control),
        while the KS test of a whole category's distribution needs more; below 5 the normal
        approximation of the rank sum is poor.
    sm_threshold : float, default=0.01
        The structural-mutation threshold, as a change of a category's **share** of its period's
        requests (0.01 = one percentage point): shares normalise periods of different length or
        load. The paper's SM_THRESHOLD is a request count for periods of similar workload; a
        share is that count over the period's volume. One point keeps rare paths (below 1% of
        requests) from counting unless they grow; the change must also be significant (pooled
        two-proportion z-test, ``alpha`` and ``correction``), so sampling noise is no mutation.
    min_rise : float, default=1.0
        Relative rise of a service's time (its severity, :class:`~.pooled.ServiceTime`) from
        which the rise counts for the service ranking even when it is not significant (1.0: the
        time doubled; the fold-change convention; :mod:`.services` says why). A very large value
        (``1e9``) keeps significant rises only.
    max_precursors : int, default=3
        Precursors kept per structural mutation, most similar first.
    tree_depth : int, default=3
        Depth of the low-level decision tree (Section 3.5).
    top_k : int, default=10
        Mutations explained (edges, operations, low-level splits) and given to the service
        ranking; the rest are listed with their contribution only.
    random_state : int, numpy Generator or None, default=None
        Seed of the decision tree and of its row sample.

    Attributes
    ----------
    result_ : ComparisonResult
    categories_ : polars.DataFrame
        One row per category: ``signature``, ``root``, ``n_nodes``, ``baseline_count``,
        ``problem_count``, ``baseline_share``, ``problem_share``, ``baseline_mean_ns``,
        ``baseline_var_ns2``, ``problem_mean_ns``, ``problem_var_ns2``, ``rt_p_value`` (KS,
        after correction; null when not tested), ``share_p_value``.
    endpoint_ : str

    Notes
    -----
    Ranking (Section 3.4): a structural mutation contributes ``(problem count - baseline count
    x n_problem / n_baseline) x (its problem mean - its precursors' baseline means weighted by
    similarity)``; a response-time mutation ``problem count x (problem mean - baseline mean)``.
    A category that is both is two entries, ranked separately. Slow-downs (positive) come first;
    speed-ups follow, by absolute contribution, and only structural ones count for the services
    (:mod:`.services`). A structural mutation without a precursor (heuristics 1-2 left none with
    the same root) is compared with the endpoint's baseline mean.

    Heuristic 2 (the precursor lost at least as many requests as the mutation gained) is relaxed
    when it leaves no precursor: the same-root precursors are then kept, and a note says so.

    The paper's limits hold: contention and workload changes are not identified as such.

    References
    ----------
    .. [1] R. R. Sambasivan, A. X. Zheng, M. De Rosa, E. Krevat, S. Whitman, M. Stroucken,
       W. Wang, L. Xu and G. R. Ganger, "Diagnosing performance changes by comparing request
       flows", NSDI 2011.

    Examples
    --------
    >>> from tracesleuth.evaluation.eshopper import simulate_eshopper
    >>> from tracesleuth.model import build_trace_table
    >>> a = build_trace_table(simulate_eshopper(n_requests=300, random_state=1).spans)
    >>> RequestFlowComparison().fit(a, a).result_.significant
    False
    """

    _constraints = {
        "alpha": [Interval(float, 0, 1, closed="neither")],
        "correction": [Options(CORRECTIONS)],
        "min_requests": [Interval(int, 2, None)],
        "min_calls": [Interval(int, 2, None)],
        "sm_threshold": [Interval(float, 0, 1, closed="left")],
        "min_rise": [Interval(float, 0, None, closed="neither")],
        "max_precursors": [Interval(int, 1, None)],
        "tree_depth": [Interval(int, 1, None)],
        "top_k": [Interval(int, 1, None)],
        "random_state": [Seed()],
    }

    def __init__(self, *, alpha: float = 0.05, correction: str = "holm", min_requests: int = 10,
                 min_calls: int = 5, sm_threshold: float = 0.01, min_rise: float = 1.0, max_precursors: int = 3,
                 tree_depth: int = 3, top_k: int = 10, random_state=None):
        self.alpha = alpha
        self.correction = correction
        self.min_requests = min_requests
        self.min_calls = min_calls
        self.sm_threshold = sm_threshold
        self.min_rise = min_rise
        self.max_precursors = max_precursors
        self.tree_depth = tree_depth
        self.top_k = top_k
        self.random_state = random_state

    def fit(self, problem, baseline) -> "RequestFlowComparison":
        """Compare ``problem`` with ``baseline`` (TraceTables of one endpoint); return ``self``.

        Raises
        ------
        ParameterError
            A setting is not allowed; an input is no TraceTable; the periods' endpoints differ.
        EmptyDataError
            A period has no request, or one only.
        """
        return super().fit(problem, baseline)

    # ----------------------------------------------------------------------------------------

    def _fit(self, problem, baseline) -> dict[str, Any]:
        problem, baseline = _table(problem, "problem"), _table(baseline, "baseline")
        if problem.endpoint != baseline.endpoint:
            raise ParameterError(f"The periods are of different endpoints: baseline {baseline.endpoint!r}, "
                                 f"problem {problem.endpoint!r}; build both trace tables with the same endpoint.")
        endpoint = problem.endpoint
        fb, fp = baseline.frame, problem.frame
        nb, np_ = fb.height, fp.height
        notes: list[Note] = []
        cats = category_stats(fb, fp)
        pattern = key_pattern(set(baseline.operations) | set(problem.operations) | {endpoint})
        structures = {s: parse_signature(s, pattern) for s in cats[S.SIGNATURE].to_list()}
        cats = cats.with_columns(
            pl.Series("root", [structures[s].root for s in cats[S.SIGNATURE]], dtype=pl.String),
            pl.Series("n_nodes", [len(structures[s].nodes) for s in cats[S.SIGNATURE]], dtype=pl.Int64))
        common = cats.filter((pl.col("baseline_count") > 0) & (pl.col("problem_count") > 0))
        if common.height == 0:
            notes.append(NoCommonCategory())

        # --- response-time mutations (Section 3.2) ---------------------------------------------
        testable = common.filter((pl.col("baseline_count") >= self.min_requests)
                                 & (pl.col("problem_count") >= self.min_requests))[S.SIGNATURE].to_list()
        skipped = common.height - len(testable)
        if skipped:
            notes.append(CategoriesUntested(skipped, self.min_requests))
        rt_p = self._rt_tests(fb, fp, testable)
        # --- structural mutations (Section 3.3) ------------------------------------------------
        share_p = adjust_p_values(proportion_p_values(cats["problem_count"].to_numpy(), np_,
                                                      cats["baseline_count"].to_numpy(), nb), self.correction)
        cats = cats.with_columns(
            pl.Series("rt_p_value", [rt_p.get(s) for s in cats[S.SIGNATURE]], dtype=pl.Float64),
            pl.Series("share_p_value", share_p, dtype=pl.Float64))
        delta = (cats["problem_share"] - cats["baseline_share"]).to_numpy()
        significant_share = share_p < self.alpha
        is_mut = (delta >= self.sm_threshold) & significant_share & (delta > 0)
        is_pre = (-delta >= self.sm_threshold) & significant_share & (delta < 0)
        rows = cats.rows(named=True)
        scale = np_ / nb
        base_mean = float(fb[S.LATENCY_NS].cast(pl.Float64).mean())
        precursors = [r for r, f in zip(rows, is_pre) if f]
        entries: list[dict] = []
        for r, f in zip(rows, is_mut):
            if not f:
                continue
            entries.append(self._structural(r, precursors, structures, scale, base_mean, notes, fb, fp))
        for r in rows:
            p = r["rt_p_value"]
            if p is not None and p < self.alpha:
                entries.append(dict(kind="response-time", row=r, p_value=p,
                                    contribution=response_time_contribution(r["problem_count"], r["baseline_mean_ns"],
                                                                            r["problem_mean_ns"])))
        entries.sort(key=lambda e: (e["contribution"] <= 0, -abs(e["contribution"]), e["kind"], e["row"][S.SIGNATURE]))
        for e in entries[:self.top_k]:
            e["sides"] = _sides(e)
        # --- the call views, read once (:mod:`.calls`) ---------------------------------------
        code = {sig: k for k, sig in enumerate(cats[S.SIGNATURE].to_list())}
        ask = [e["sides"] for e in entries[:self.top_k] if e["sides"][0]]
        with spill_directories(baseline, problem) as (spill_b, spill_p):
            cb = self._read(baseline, fb, code, {code[s] for side, _ in ask for s in side}, notes, "baseline", spill_b)
            cp = self._read(problem, fp, code, {code[s] for _, side in ask for s in side}, notes, "problem", spill_p)
            # --- edges and operations pooled over categories (:mod:`.pooled`) ----------------
            found = Pooled() if cb is None or cp is None else pooled_from(
                cb.series, cp.series, cb.call_counts, cp.call_counts, alpha=self.alpha, correction=self.correction,
                min_calls=self.min_calls)
        pooled = found.changes
        if not entries and not pooled and not found.call_drops:
            reason = NoSignificantChange(float(self.alpha), str(self.correction), len(testable), float(self.sm_threshold),
                                         int(found.n_tests))
            result = ComparisonResult(significant=False, reason=reason, endpoint=endpoint, n_baseline=nb,
                                      n_problem=np_, notes=tuple(notes))
            return {"result_": result, "categories_": cats, "endpoint_": endpoint}
        if not entries:
            notes.append(PooledOnly(len(pooled), len(found.call_drops)))
        mix = [e for e in entries if e.get("workload_mix")]
        if mix:
            notes.append(WorkloadMix(len(mix)))

        # --- where the time went, low-level differences (top_k only) --------------------------
        kinds = self._kinds(cb, cp)
        req_b = fb.select(pl.int_range(pl.len(), dtype=pl.Int64).alias(S.REQUEST), S.SIGNATURE)
        req_p = fp.select(pl.int_range(pl.len(), dtype=pl.Int64).alias(S.REQUEST), S.SIGNATURE)
        mutations = []
        for rank, e in enumerate(entries, start=1):
            r = e["row"]
            explain = rank <= self.top_k
            edges, ops, low = (), (), ()
            if explain and e["sides"][0]:
                side_b, side_p = e["sides"]
                ib = req_b.filter(pl.col(S.SIGNATURE).is_in(side_b))[S.REQUEST]
                ip = req_p.filter(pl.col(S.SIGNATURE).is_in(side_p))[S.REQUEST]
                if cb is not None and cp is not None:
                    edges, ops = localize(cb.calls_of(code[s] for s in side_b), cp.calls_of(code[s] for s in side_p),
                                          len(ib), len(ip), alpha=self.alpha, correction=self.correction,
                                          min_requests=self.min_requests)
                labels = ("baseline", "problem") if e["kind"] == "response-time" else ("precursor", "mutation")
                low = low_level_differences(fb[ib.to_numpy()], fp[ip.to_numpy()], max_depth=self.tree_depth,
                                            random_state=self.random_state, labels=labels)
            div, div_service, div_children = None, None, ()
            graph = FlowGraph.of(structures[r[S.SIGNATURE]]) if explain else None
            precursor_graph = None
            if e.get("divergence") is not None:
                div, div_service, div_children = self._divergence_service(*e["divergence"], kinds)
                if explain:
                    mine, other, index, added, removed = e["divergence"]
                    graph = FlowGraph.of(mine, index, added)
                    precursor_graph = FlowGraph.of(other, None, removed)
            elif explain and e.get("precursors"):
                precursor_graph = FlowGraph.of(structures[e["precursors"][0].category])
            mutations.append(Mutation(
                rank=rank, kind=e["kind"], category=r[S.SIGNATURE], contribution_ns=float(e["contribution"]),
                baseline_count=int(r["baseline_count"]), problem_count=int(r["problem_count"]),
                baseline_mean_ns=r["baseline_mean_ns"], problem_mean_ns=r["problem_mean_ns"],
                p_value=None if e["p_value"] is None else float(e["p_value"]),
                precursors=tuple(e.get("precursors", ())), divergence=div, divergence_service=div_service,
                edges=edges, operations=ops, low_level=low, baseline_share=float(r["baseline_share"]),
                problem_share=float(r["problem_share"]), divergence_children=tuple(div_children),
                graph=graph, precursor_graph=precursor_graph,
                workload_mix=bool(e.get("workload_mix", False))))
        if len(mutations) > self.top_k:
            notes.append(BelowTopK(len(mutations) - self.top_k, self.top_k))
        services = rank_services(mutations[:self.top_k], endpoint=endpoint,
                                 errors_baseline=None if cb is None else cb.errors,
                                 errors_problem=None if cp is None else cp.errors,
                                 n_baseline=nb, n_problem=np_, alpha=self.alpha, pooled=pooled,
                                 service_times=found.service_times, call_drops=found.call_drops,
                                 min_rise=self.min_rise)
        if mutations and not pooled and not any(m.contribution_ns > 0 and not m.workload_mix for m in mutations):
            notes.append(NothingSlower(len(mutations)))
        result = ComparisonResult(significant=True, reason=None, endpoint=endpoint, n_baseline=nb, n_problem=np_,
                                  services=services, mutations=tuple(mutations), notes=tuple(notes),
                                  pooled=pooled, service_times=found.service_times,
                                  call_drops=found.call_drops,
                                  service_calls=() if cp is None else tuple(cp.service_calls.rows()))
        return {"result_": result, "categories_": cats, "endpoint_": endpoint}

    # ----------------------------------------------------------------------------------------

    def _rt_tests(self, fb: pl.DataFrame, fp: pl.DataFrame, testable: list[str]) -> dict[str, float]:
        """Corrected KS p-values of the testable categories."""
        from .mutations import _ks

        if not testable:
            return {}
        def samples(frame):
            g = frame.filter(pl.col(S.SIGNATURE).is_in(testable)).group_by(S.SIGNATURE).agg(S.LATENCY_NS)
            return {s: v.to_numpy() for s, v in zip(g[S.SIGNATURE].to_list(), g[S.LATENCY_NS])}
        sb, sp = samples(fb), samples(fp)
        raw = np.array([_ks(sb[s], sp[s]) for s in testable])
        return dict(zip(testable, adjust_p_values(raw, self.correction).tolist()))

    def _structural(self, r: dict, precursors: list[dict], structures: dict, scale: float, base_mean: float,
                    notes: list, fb: pl.DataFrame, fp: pl.DataFrame) -> dict:
        """A structural mutation: its precursors by the three heuristics, and its contribution."""
        sig = r[S.SIGNATURE]
        mine = structures[sig]
        added = r["problem_count"] - r["baseline_count"] * scale
        same_root = [p for p in precursors if structures[p[S.SIGNATURE]].root == mine.root]      # heuristic 1
        enough = [p for p in same_root if p["baseline_count"] * scale - p["problem_count"] >= added]  # heuristic 2
        if not enough and same_root:
            enough = same_root
            notes.append(PrecursorsRelaxed(sig, float(added), len(same_root)))
        tokens = mine.tokens()
        ranked = sorted(((edit_distance(tokens, structures[p[S.SIGNATURE]].tokens()), p[S.SIGNATURE], p)
                         for p in enough), key=lambda t: (t[0], t[1]))[:self.max_precursors]   # heuristic 3
        sim = np.array([1.0 / (1 + d) for d, _, _ in ranked])
        weights = sim / sim.sum() if len(sim) else sim
        pre = []
        for (d, s, p), w in zip(ranked, weights.tolist()):
            mean = p["baseline_mean_ns"] if p["baseline_count"] > 0 else p["problem_mean_ns"]
            pre.append(Precursor(category=s, edit_distance=int(d), weight=float(w),
                                 baseline_count=int(p["baseline_count"]), problem_count=int(p["problem_count"]),
                                 mean_ns=None if mean is None else float(mean)))
        means = [(p.mean_ns, p.weight) for p in pre if p.mean_ns is not None]
        reference = (sum(m * w for m, w in means) / sum(w for _, w in means)) if means else base_mean
        divergence = None
        if pre:
            other = structures[pre[0].category]
            found = divergence_sides(mine, other)
            if found is not None:
                divergence = (mine, other, *found)
        return dict(kind="structural", row=r, p_value=r["share_p_value"], precursors=pre, divergence=divergence,
                    workload_mix=self._is_mix(r, fb, fp),
                    contribution=structural_contribution(added, r["problem_mean_ns"], reference))

    def _is_mix(self, r: dict, fb: pl.DataFrame, fp: pl.DataFrame) -> bool:
        """Whether a structural mutation is a workload-mix change (:attr:`Mutation.workload_mix`).

        The category had at least ``min_requests`` requests in the baseline (an established path,
        not a new one) and its problem requests are not significantly slower than its baseline
        requests (one-sided Mann-Whitney U, ``alpha``).
        """
        if r["baseline_count"] < self.min_requests or r["problem_count"] < 2:
            return False
        sig = r[S.SIGNATURE]
        xb = fb.filter(pl.col(S.SIGNATURE) == sig)[S.LATENCY_NS].cast(pl.Float64).to_numpy()
        xp = fp.filter(pl.col(S.SIGNATURE) == sig)[S.LATENCY_NS].cast(pl.Float64).to_numpy()
        from scipy import stats

        return bool(stats.mannwhitneyu(xp, xb, alternative="greater", method="asymptotic").pvalue >= self.alpha)

    @staticmethod
    def _read(table, frame: pl.DataFrame, code: dict, explained: set, notes: list, name: str,
              spill) -> PeriodCalls | None:
        """:func:`.calls.read_period` of a period (a :class:`~.notes.NoSpans` note when it has no
        call view)."""
        found = read_period(table, frame[S.SIGNATURE].replace_strict(code, return_dtype=pl.Int64).to_numpy(),
                            explained, spill)
        if found is None:
            notes.append(NoSpans(name))
        return found

    @staticmethod
    def _kinds(cb: PeriodCalls | None, cp: PeriodCalls | None) -> dict[str, tuple[str, str]]:
        """``{operation key: (service, most common kind)}`` over both periods' spans (a tie goes to
        the kind first by name)."""
        frames = [c.kinds for c in (cb, cp) if c is not None]
        if not frames:
            return {}
        g = (pl.concat(frames).group_by(S.OPERATION_KEY, S.SERVICE, S.KIND).agg(pl.col("count").sum())
             .sort(S.OPERATION_KEY, "count", S.KIND, descending=[False, True, False])
             .group_by(S.OPERATION_KEY, maintain_order=True).first())
        return {k: (s, kind) for k, s, kind in g.select(S.OPERATION_KEY, S.SERVICE, S.KIND).rows()}

    @staticmethod
    def _divergence_service(mine, other, index: int, added: list, removed: list,
                            kinds: dict) -> tuple[str, str, tuple[str, ...]]:
        """The divergence node's key, the service to blame there, and the differing children's keys.

        Rule (the structure diverges at node ``N`` of service ``s``):

        * **added or replaced subtrees** (the mutation has children there that the precursor
          lacks: a new call, a call rerouted to another service): the service the new subtree
          enters, the first node in its preorder whose service is neither ``s`` nor one of the
          services of the subtrees it replaces (a call rerouted below an unchanged caller names
          the new callee, not the caller), else the first whose service is not ``s`` (the
          callee of a new client span), else ``s`` (new work inside ``s``); with several new
          subtrees, the largest;
        * **removed subtrees only** (``N`` returned early or threw before calling): ``s``; but for
          a client span whose missing children are server spans of one other service, that
          service (the call into it did not answer);
        * **different entry spans**: the mutation's entry service.
        """
        def service(key: str) -> str:
            return kinds.get(key, (key.split(":", 1)[0], None))[0]

        node = mine.nodes[index]
        own = service(node.key)
        ka, kr = {mine.nodes[c].key for c in added}, {other.nodes[c].key for c in removed}
        if mine.root != other.root:
            ka, kr = {mine.root}, {other.root}
        changed = tuple(sorted(ka ^ kr) or sorted(ka | kr))
        if added:
            before = {service(other.nodes[j].key) for c in removed for j in other.subtree_nodes(c)}
            best = None
            for c in added:
                span = mine.subtree_nodes(c)
                services = [service(mine.nodes[j].key) for j in span]
                entered = next((x for x in services if x != own and x not in before),
                               next((x for x in services if x != own), own))
                if best is None or len(span) > best[0]:
                    best = (len(span), entered)
            return node.key, best[1], changed
        kind = kinds.get(node.key, (None, None))[1]
        if kind == "client" and removed:
            others = {service(other.nodes[c].key) for c in removed}
            if len(others) == 1 and own not in others:
                return node.key, others.pop(), changed
        return node.key, own, changed


