"""Mutations and precursors (Sambasivan et al., NSDI 2011, Sections 3.2-3.5).

* **Response-time mutations** (Section 3.2): categories present in both periods with at least
  ``min_requests`` requests each whose latency distribution changed, by the two-sample
  Kolmogorov-Smirnov test (:func:`scipy.stats.ks_2samp`) under a multiple-test control
  (:func:`adjust_p_values`). Inside a mutation, the same test on every edge's durations and gaps
  and on every operation's exclusive (self) time shows where the time went
  (:func:`localize`).
* **Structural mutations and precursors** (Section 3.3): a category whose *share* of its period's
  requests rose by at least ``sm_threshold`` is a mutation, one whose share fell by as much a
  precursor. Shares, not counts, so that periods of different length or load compare (the paper
  assumes similar workloads in both periods; a share is the count normalised by the period's
  volume). A share change must also be significant under a two-proportion z-test with the same
  multiple-test control, so that sampling noise between two periods of a stationary workload is
  no mutation.
* **Mapping** a mutation to its precursors (Section 3.3.2): (1) same root node, (2) the
  precursor's decrease at least the mutation's increase (counts scaled to the problem period's
  volume; one precursor may donate to several mutations), (3) ranked by
  :func:`~.categories.edit_distance` between their structures.
* **Ranking** (Section 3.4) by expected contribution to the change of the problem period's
  total response time, :func:`structural_contribution` and :func:`response_time_contribution`.
* **Low-level differences** (Section 3.5): a decision tree over the requests' attribute and
  instance columns (:func:`low_level_differences`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from ... import schema as S
from ...units import format_duration_ns

__all__ = ["EdgeChange", "FlowGraph", "Mutation", "OperationChange", "Precursor", "adjust_p_values", "localize",
           "low_level_differences", "response_time_contribution",
           "structural_contribution"]


# ============================================================================================
# Results
# ============================================================================================


@dataclass(frozen=True)
class Precursor:
    """A category a structural mutation's requests are thought to have come from.

    Attributes
    ----------
    category : str
        Its signature.
    edit_distance : int
        String-edit distance between its structure and the mutation's (preorder nodes).
    weight : float
        Structural similarity ``1 / (1 + edit_distance)`` normalised over the mutation's
        precursors (sum 1); weights the precursors' mean response time.
    baseline_count, problem_count : int
        Its requests in each period.
    mean_ns : float or None
        Its mean response time in the baseline period (the problem period's when it had no
        baseline request), ns.
    """

    category: str
    edit_distance: int
    weight: float
    baseline_count: int
    problem_count: int
    mean_ns: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "edit_distance": self.edit_distance, "weight": self.weight,
                "baseline_count": self.baseline_count, "problem_count": self.problem_count, "mean_ns": self.mean_ns}


@dataclass(frozen=True)
class EdgeChange:
    """An edge (caller span -> callee span) whose latency changed inside a mutation.

    Attributes
    ----------
    caller, callee : str
        Operation keys of the parent and of the child span.
    callee_service : str or None
        The service the edge calls: the server span's service for a client span (so an
        ``HTTP GET`` edge names the service called), else the callee span's service.
    baseline_mean_ns, problem_mean_ns : float
        Mean duration of the callee span, per call, ns (for a structural mutation: in the
        precursors' requests and in the mutation's).
    baseline_gap_ns, problem_gap_ns : float or None
        Mean gap (client time outside the server span it calls: network and queueing), ns;
        None for an edge with no gap.
    p_value : float or None
        Kolmogorov-Smirnov p-value of the durations, after the multiple-test control.
    gap_p_value : float or None
        The same for the gaps.
    added_ns : float
        Time the edge added per request: change of the mean duration times calls per request, ns.
    added_gap_ns : float
        The same for the gap (0 when the gap did not change significantly).
    """

    caller: str
    callee: str
    callee_service: str | None
    baseline_mean_ns: float
    problem_mean_ns: float
    baseline_gap_ns: float | None
    problem_gap_ns: float | None
    p_value: float | None
    gap_p_value: float | None = None
    added_ns: float = 0.0
    added_gap_ns: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def describe(self) -> str:
        text = (f"{self.caller} -> {self.callee} ({self.callee_service}): "
                f"{format_duration_ns(self.baseline_mean_ns)} -> {format_duration_ns(self.problem_mean_ns)}")
        if self.added_gap_ns > 0 and self.baseline_gap_ns is not None and self.problem_gap_ns is not None:
            text += (f", gap {format_duration_ns(self.baseline_gap_ns)} -> "
                     f"{format_duration_ns(self.problem_gap_ns)}")
        return text


@dataclass(frozen=True)
class OperationChange:
    """An operation whose exclusive (self) time changed inside a mutation.

    Attributes
    ----------
    operation_key : str
    service : str
        The service of its spans.
    baseline_mean_ns, problem_mean_ns : float
        Mean exclusive time per call, ns.
    p_value : float or None
        Kolmogorov-Smirnov p-value after the multiple-test control.
    added_ns : float
        Change of the mean times calls per request, ns.
    client : bool
        Its spans are client spans calling a server span: their exclusive time is the edge's
        gap, counted with the edge (:class:`EdgeChange`), not again here, by the service ranking.
    """

    operation_key: str
    service: str
    baseline_mean_ns: float
    problem_mean_ns: float
    p_value: float | None
    added_ns: float = 0.0
    client: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class FlowGraph:
    """A category's request-flow graph as drawn by the report: its nodes in preorder.

    Attributes
    ----------
    keys : tuple of str
        Operation key of each node (``service:operation``), in the structure's preorder.
    parents : tuple of int
        Index of each node's parent (-1 for the entry span).
    changed : tuple of int
        Nodes of the subtrees where the structure differs from the other side's (the
        mutation's added or replaced subtrees; the precursor's removed ones).
    divergence : int or None
        The node where the structure diverges (on the mutation's side).
    """

    keys: tuple[str, ...]
    parents: tuple[int, ...]
    changed: tuple[int, ...] = ()
    divergence: int | None = None

    @classmethod
    def of(cls, structure, divergence: int | None = None, subtrees=()) -> "FlowGraph":
        """The graph of a :class:`~.categories.Structure`, the nodes of ``subtrees`` (roots) marked."""
        changed = sorted({j for c in subtrees for j in structure.subtree_nodes(c)})
        return cls(keys=tuple(n.key for n in structure.nodes), parents=tuple(n.parent for n in structure.nodes),
                   changed=tuple(changed), divergence=divergence)

    def to_dict(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "parents": list(self.parents), "changed": list(self.changed),
                "divergence": self.divergence}


@dataclass(frozen=True)
class Mutation:
    """One ranked mutation (a category, or one of its two virtual halves).

    Attributes
    ----------
    rank : int
        1 for the largest contribution to the slowdown.
    kind : {"response-time", "structural"}
    category : str
        The signature.
    contribution_ns : float
        Expected contribution to the change of the problem period's total response time, ns
        (Section 3.4); negative for a speed-up.
    baseline_count, problem_count : int
    baseline_mean_ns, problem_mean_ns : float or None
        Mean response time of the category in each period (None when absent).
    p_value : float or None
        Response-time: the KS p-value; structural: the two-proportion p-value of the share
        change; after the multiple-test control.
    precursors : tuple of Precursor
        Structural mutations only, most similar first.
    divergence : str or None
        Operation key of the node where the structure diverges from the top precursor's.
    divergence_service : str or None
        The service whose calls changed there (for a client span whose server call changed:
        the service called).
    edges, operations : tuple
        Edges and operations whose time rose significantly, most added time first.
    low_level : tuple of str
        The decision tree's top splits in words.
    baseline_share, problem_share : float
        The category's share of its period's requests.
    divergence_children : tuple of str
        Operation keys of the divergence node's children that differ (either side).
    workload_mix : bool
        A structural mutation that is a change of the workload mix, not of the system: the
        category was already established in the baseline (at least ``min_requests``
        requests) and its problem requests are not slower than its baseline requests (one-sided
        Mann-Whitney U at ``alpha``). More requests down a path that behaves as before is what
        a workload change looks like (the paper's stated limit); it is reported but counts for
        no service.
    graph, precursor_graph : FlowGraph or None
        The category's request-flow graph and its top precursor's (structural mutations; a
        response-time mutation has the first only), for the report's drawing; None beyond
        ``top_k``.
    """

    rank: int
    kind: str
    category: str
    contribution_ns: float
    baseline_count: int
    problem_count: int
    baseline_mean_ns: float | None
    problem_mean_ns: float | None
    p_value: float | None
    precursors: tuple[Precursor, ...] = ()
    divergence: str | None = None
    divergence_service: str | None = None
    edges: tuple[EdgeChange, ...] = ()
    operations: tuple[OperationChange, ...] = ()
    low_level: tuple[str, ...] = ()
    baseline_share: float = 0.0
    problem_share: float = 0.0
    divergence_children: tuple[str, ...] = field(default=())
    workload_mix: bool = False
    graph: FlowGraph | None = None
    precursor_graph: FlowGraph | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__
               if k not in ("precursors", "edges", "operations", "low_level", "divergence_children", "graph",
                            "precursor_graph")}
        out["graph"] = None if self.graph is None else self.graph.to_dict()
        out["precursor_graph"] = None if self.precursor_graph is None else self.precursor_graph.to_dict()
        out["precursors"] = [p.to_dict() for p in self.precursors]
        out["edges"] = [e.to_dict() for e in self.edges]
        out["operations"] = [o.to_dict() for o in self.operations]
        out["low_level"] = list(self.low_level)
        out["divergence_children"] = list(self.divergence_children)
        return out


# ============================================================================================
# Statistics
# ============================================================================================


def adjust_p_values(p: np.ndarray, method: str) -> np.ndarray:
    """p-values after the multiple-test control ``method``.

    ``"holm"`` (default of the analysis): Holm's step-down adjustment, which controls the
    family-wise error rate like Bonferroni's but is uniformly more powerful; ``"bonferroni"``:
    ``min(1, m p)``; ``"none"``: the raw p-values, as the paper (one test per category at 95%).

    Examples
    --------
    >>> adjust_p_values(np.array([0.01, 0.04, 0.03]), "holm").round(2).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p, dtype=float)
    m = len(p)
    if m == 0 or method == "none":
        return p.copy()
    if method == "bonferroni":
        return np.minimum(1.0, p * m)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted
    return out


def response_time_contribution(problem_count: int, baseline_mean_ns: float, problem_mean_ns: float) -> float:
    """Expected contribution of a response-time mutation, ns: ``problem_count * (mean_p - mean_b)``.

    The paper (Section 3.4) multiplies by the non-problem count; the problem count is used here
    because it is the number of requests that paid the change in the period under diagnosis, and
    it makes the figure comparable with :func:`structural_contribution`, whose counts are scaled
    to the problem period's volume.
    """
    return float(problem_count) * (float(problem_mean_ns) - float(baseline_mean_ns))


def structural_contribution(added_requests: float, mutation_mean_ns: float, precursor_mean_ns: float) -> float:
    """Expected contribution of a structural mutation, ns (Section 3.4).

    ``added_requests * (mutation_mean_ns - precursor_mean_ns)``, ``added_requests`` being the
    mutation's problem count minus its baseline count scaled to the problem period's volume,
    and ``precursor_mean_ns`` its precursors' mean response times weighted by similarity.
    """
    return float(added_requests) * (float(mutation_mean_ns) - float(precursor_mean_ns))


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    return float(stats.ks_2samp(a, b, method="asymp" if len(a) * len(b) > 10_000 else "auto").pvalue)


# ============================================================================================
# Where the time went
# ============================================================================================


def _per_call(calls: pl.DataFrame) -> pl.DataFrame:
    """Edge and operation columns of a call view."""
    return calls.select(
        pl.col(S.CALLER_KEY), pl.col(S.OPERATION_KEY), pl.col(S.SERVICE),
        pl.coalesce(S.SERVER_SERVICE, S.SERVICE).alias("callee_service"),
        pl.col(S.SERVER_SERVICE).is_not_null().alias("client"),
        pl.col(S.DURATION_NS).cast(pl.Float64), pl.col(S.EXCLUSIVE_NS).cast(pl.Float64),
        pl.col(S.GAP_NS).cast(pl.Float64),
    )


def _samples(frame: pl.DataFrame, keys: list[str], value: str) -> dict:
    grouped = frame.filter(pl.col(value).is_not_null()).group_by(keys).agg(pl.col(value))
    return {k: v.to_numpy() for k, v in zip(grouped.select(keys).rows(), grouped[value])}


def localize(base_calls: pl.DataFrame, prob_calls: pl.DataFrame, n_base: int, n_prob: int, *, alpha: float,
             correction: str, min_requests: int) -> tuple[tuple[EdgeChange, ...], tuple[OperationChange, ...]]:
    """Edges and operations whose time rose significantly between two sets of requests.

    The entry span's own edge is left out (it is the request, tested as the category); its
    exclusive time is tested with the other operations.

    Per edge ``(caller_key, operation_key)``: KS test of the callee spans' durations and of the
    gaps; per operation: KS test of the spans' exclusive times; each where both sides have at
    least ``min_requests`` calls and the mean rose; p-values controlled together by
    ``correction``. Added time per request = change of the per-call mean times the problem
    side's calls per request (Sambasivan et al., Section 3.2: "the edges whose latency
    distributions changed most show where the time went").

    Parameters
    ----------
    base_calls, prob_calls : polars.DataFrame
        Call views (:meth:`TraceTable.calls`) of the baseline (or precursor) requests and of the
        problem (or mutation) requests.
    n_base, n_prob : int
        Number of requests on each side.

    Returns
    -------
    edges : tuple of EdgeChange
    operations : tuple of OperationChange
        Both sorted by added time, largest first.
    """
    if base_calls.height == 0 or prob_calls.height == 0:
        return (), ()
    # The entry span (no caller) is the request itself, already tested as the category.
    b, p = _per_call(base_calls), _per_call(prob_calls)
    edge_keys = [S.CALLER_KEY, S.OPERATION_KEY]
    tests: list[tuple] = []  # (kind, key, base samples, prob samples)

    def collect(kind: str, fb: pl.DataFrame, fp: pl.DataFrame, keys: list[str], value: str) -> None:
        sb, sp = _samples(fb, keys, value), _samples(fp, keys, value)
        for k, xp in sp.items():
            xb = sb.get(k)
            if xb is None or len(xb) < min_requests or len(xp) < min_requests:
                continue
            if xp.mean() <= xb.mean():
                continue
            tests.append((kind, k, xb, xp))

    has_caller = pl.col(S.CALLER_KEY).is_not_null()
    eb, ep = b.filter(has_caller), p.filter(has_caller)
    collect("edge", eb, ep, edge_keys, S.DURATION_NS)
    collect("gap", eb, ep, edge_keys, S.GAP_NS)
    collect("op", b, p, [S.OPERATION_KEY], S.EXCLUSIVE_NS)
    if not tests:
        return (), ()
    pv = adjust_p_values(np.array([_ks(t[2], t[3]) for t in tests]), correction)
    significant = {(t[0], t[1]): (pv[i], t[2], t[3]) for i, t in enumerate(tests) if pv[i] < alpha}

    meta_edge = {(r[0], r[1]): r[2] for r in p.group_by(edge_keys).agg(pl.col("callee_service").first())
                 .select(*edge_keys, "callee_service").rows()}
    meta_op = {r[0]: (r[1], r[2]) for r in p.group_by(S.OPERATION_KEY).agg(
        pl.col(S.SERVICE).first(), (pl.col("client").mean() > 0.5)).rows()}
    gap_means_b = {k: float(v.mean()) for k, v in _samples(b, edge_keys, S.GAP_NS).items()}
    gap_means_p = {k: float(v.mean()) for k, v in _samples(p, edge_keys, S.GAP_NS).items()}
    durations = None  # every edge's durations, read only when some edge's gap alone changed

    edges = []
    edge_keys_found = {k for (kind, k) in significant if kind in ("edge", "gap")}
    for k in edge_keys_found:
        dur = significant.get(("edge", k))
        gap = significant.get(("gap", k))
        if dur:
            xb, xp = dur[1], dur[2]
        else:  # only the gap changed: means of the durations for the record
            if durations is None:
                durations = _samples(b, edge_keys, S.DURATION_NS), _samples(p, edge_keys, S.DURATION_NS)
            xb, xp = durations[0][k], durations[1][k]
        per_req = len(xp) / max(n_prob, 1)
        added = (float(xp.mean()) - float(xb.mean())) * per_req if dur else 0.0
        added_gap = (float(gap[2].mean()) - float(gap[1].mean())) * per_req if gap else 0.0
        edges.append(EdgeChange(
            caller=k[0], callee=k[1], callee_service=meta_edge.get(k), baseline_mean_ns=float(xb.mean()),
            problem_mean_ns=float(xp.mean()), baseline_gap_ns=gap_means_b.get(k), problem_gap_ns=gap_means_p.get(k),
            p_value=float(dur[0]) if dur else None, gap_p_value=float(gap[0]) if gap else None,
            added_ns=added, added_gap_ns=added_gap))
    edges.sort(key=lambda e: (-max(e.added_ns, e.added_gap_ns), e.caller or "", e.callee))
    ops = []
    for (kind, k), (pval, xb, xp) in significant.items():
        if kind != "op":
            continue
        service, client = meta_op[k[0]]
        ops.append(OperationChange(operation_key=k[0], service=service, baseline_mean_ns=float(xb.mean()),
                                   problem_mean_ns=float(xp.mean()), p_value=float(pval),
                                   added_ns=(float(xp.mean()) - float(xb.mean())) * len(xp) / max(n_prob, 1),
                                   client=bool(client)))
    ops.sort(key=lambda o: (-o.added_ns, o.operation_key))
    return tuple(edges), tuple(ops)


# ============================================================================================
# Low-level differences
# ============================================================================================


def low_level_differences(base: pl.DataFrame, prob: pl.DataFrame, *, max_depth: int, random_state: Any,
                          labels: tuple[str, str] = ("baseline", "problem"), max_rows: int = 20_000,
                          max_splits: int = 3) -> tuple[str, ...]:
    """What tells two sets of requests apart: a decision tree's top splits in words (Section 3.5).

    A :class:`sklearn.tree.DecisionTreeClassifier` (``max_depth``, ``random_state``, balanced
    class weights) is fitted on the requests' ``attr[...]`` (one-hot), ``num[...]`` and
    ``instance[...]`` (one-hot) columns, label ``labels[1]`` for ``prob``'s rows; the splits
    with the largest weighted impurity decrease are returned, as "instance[K] = 'pod-3'
    (problem: 97% of 812 requests on that side)". At most ``max_rows`` rows per side are used
    (a seeded sample). Nothing is returned when no column varies or the tree does not split.
    """
    from sklearn.tree import DecisionTreeClassifier

    prefixes = (S.ATTRIBUTE_PREFIX, S.NUMERIC_ATTRIBUTE_PREFIX, S.INSTANCE_PREFIX)
    cols = [c for c in base.columns if c.startswith(prefixes) and c in prob.columns]
    if not cols or base.height == 0 or prob.height == 0:
        return ()
    rng = np.random.default_rng(random_state if not isinstance(random_state, np.random.Generator)
                                else random_state.integers(2**32))
    if base.height > max_rows:
        base = base[np.sort(rng.choice(base.height, max_rows, replace=False))]
    if prob.height > max_rows:
        prob = prob[np.sort(rng.choice(prob.height, max_rows, replace=False))]
    both = pl.concat([base.select(cols), prob.select(cols)], how="vertical_relaxed")
    features, names = [], []
    for c in cols:
        s = both[c]
        if s.dtype == pl.String or s.dtype == pl.Categorical:
            values = s.drop_nulls().unique().sort().to_list()
            if len(values) < 2 or len(values) > 50:
                continue
            arr = s.to_numpy()
            for v in values:
                features.append((arr == v).astype(float))
                names.append((c, v))
        elif s.dtype.is_numeric():
            arr = s.cast(pl.Float64).to_numpy()
            if np.nanmin(arr) == np.nanmax(arr) if np.isfinite(arr).any() else True:
                continue
            features.append(arr)
            names.append((c, None))
    if not features:
        return ()
    X = np.column_stack(features)
    y = np.r_[np.zeros(base.height), np.ones(prob.height)]
    seed = random_state if isinstance(random_state, (int, np.integer)) else int(rng.integers(2**31))
    tree = DecisionTreeClassifier(max_depth=max_depth, random_state=seed, class_weight="balanced").fit(X, y)
    t = tree.tree_
    internal = [i for i in range(t.node_count) if t.children_left[i] != -1]
    if not internal:
        return ()
    gain = {i: t.weighted_n_node_samples[i] * t.impurity[i]
            - t.weighted_n_node_samples[t.children_left[i]] * t.impurity[t.children_left[i]]
            - t.weighted_n_node_samples[t.children_right[i]] * t.impurity[t.children_right[i]] for i in internal}
    words = []
    for i in sorted(internal, key=lambda i: -gain[i])[:max_splits]:
        col, value = names[t.feature[i]]
        thr = t.threshold[i]
        # The side of the split where the problem (mutation) requests are most concentrated.
        sides = []
        for child, cond in ((t.children_left[i], "le"), (t.children_right[i], "gt")):
            n = t.n_node_samples[child]
            frac = t.value[child][0][1]  # class-weighted fraction of labels[1] (sklearn >= 1.4 stores fractions)
            sides.append((frac, n, cond))
        frac, n, cond = max(sides)
        if value is not None:
            text = f"{col} {'≠' if cond == 'le' else '='} {value!r}"
        else:
            text = f"{col} {'<=' if cond == 'le' else '>'} {thr:.6g}"
        words.append(f"{text} ({labels[1]}: {frac:.0%} of {n} requests on that side, class-balanced)")
    return tuple(words)
