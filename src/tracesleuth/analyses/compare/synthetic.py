"""Simulated baseline and problem periods with one known change, for request-flow comparison.

A small shop (the services of Google's OnlineBoutique, whose real traces ../shared/data holds)
serves one endpoint, ``frontend:GET /``, whose requests are of three types, each its own call
structure (a Spectroscope category): ``home`` (catalog, currency, cart -> redis, ads,
recommendation -> catalog), ``product`` (catalog, currency, recommendation -> catalog, ads) and
``checkout`` (checkout -> cart -> redis, catalog, currency, shipping, payment, email, cart ->
redis). Every service-to-service call is traced on both sides, as OpenTelemetry's HTTP/gRPC
instrumentation does: a ``client`` span in the caller, a ``server`` span in the callee, the
client span longer by the two network hops (0.2 ms + gamma(2, 0.1 ms) each way). A server
spends 30% of its own (exclusive) time before its first call, 2% between calls and the rest
after the last one; own times are lognormal around each operation's median.

:func:`simulate_scenario` draws a baseline period and a problem period with one change of
:data:`SCENARIOS` injected into the problem period only, the service it is injected into
drawn (per seed) among the services where that change makes sense:

======================= ==================================================================
kind                    what changes in the problem period (ground truth: ``injected``)
======================= ==================================================================
``new-slow-path``       half of the ``product`` requests make an extra call into S (from
                        the root), which takes 40 ms: a new category, a structural mutation
``slowed-handler``      every server span of S gets 20 ms more own time (a slowed edge:
                        the response-time mutation of every category through S)
``network-delay``       every call into S waits 20 ms on the way in: the client span grows,
                        the server span does not (the edge's gap grows)
``reroute``             a configuration change sends 70% of the calls of S1 to S2 =
                        ``S1-legacy``, a slower replica (+15 ms own time, +5 ms hop);
                        ``injected`` is S2, the service the requests now go to
``early-return``        in 80% of the calls of S (a service with downstream calls), S
                        returns after its pre-call time without calling its downstream
                        services and with status ``error``: S's subtree is missing
``workload-mix``        no fault: the share of ``checkout`` requests goes from 15% to 35%
                        (``home`` from 45% to 25%); see :data:`WORKLOAD_MIX_RULE`
======================= ==================================================================

Periods differ in length and volume: the baseline has ``round(baseline_ratio * n_requests)``
requests (1.5 times the problem's by default) over a proportionally longer time, at the same
rate. Spans come out in :data:`tracesleuth.schema.SPAN_SCHEMA` (``attributes`` null), so the
comparison reads them through :func:`tracesleuth.model.build_trace_table` like recorded traces;
the ground truth is returned beside them, never in a span.

Reproducibility: everything is drawn from ``random_state`` (an int, a SeedSequence or None).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from ... import schema as S
from ...errors import ParameterError
from ...units import NS_PER_MS, NS_PER_S

__all__ = ["ENDPOINT", "REQUEST_TYPES", "SCENARIOS", "WORKLOAD_MIX_RULE", "Node", "Scenario", "planted_case",
           "simulate_scenario", "top_service_hit"]

#: The scenarios of issue 16, item 9a, in the order the evaluation reports them.
SCENARIOS = ("new-slow-path", "slowed-handler", "network-delay", "reroute", "early-return", "workload-mix")

#: What counts as "ranked first" for ``workload-mix``, where nothing is broken. The honest
#: answer is either no significant change (an empty ``services`` list, or ``significant`` false),
#: or, since the mix did change, a top service that belongs only to the category whose share
#: changed most (``checkout``: checkout, shipping, payment or email) - what Spectroscope's
#: authors say a workload change looks like (a structural mutation without a precursor that
#: explains it). Any other top service is a false accusation and counts as a miss.
WORKLOAD_MIX_RULE = ("hit when the result is not significant or has no service, or when its top service is one "
                     "that only the category whose share changed most (checkout) calls")

#: The endpoint of every simulated request.
ENDPOINT = "frontend:GET /"
#: Origin of simulated time: 2024-01-01T00:00:00Z.
PERIOD_START_NS = 1_704_067_200_000_000_000
#: Requests per second in both periods.
REQUEST_RATE_PER_S = 100.0
_HOP_FLOOR_MS = 0.2
_PODS_PER_SERVICE = 2
_SIGMA = 0.25
_SHARES = {"home": 0.45, "product": 0.40, "checkout": 0.15}
_MIX_SHARES = {"home": 0.25, "product": 0.40, "checkout": 0.35}


@dataclass(frozen=True)
class Node:
    """One call of a request's call tree: a server span in ``service`` (and, but for the root, a
    client span in its caller).

    Attributes
    ----------
    service, operation : str
    own_ms : float
        Median own (exclusive) time of the server span, ms.
    children : tuple of Node
        Synchronous calls it makes, in order.
    extra_own_ms : float, default=0.0
        Added to the drawn own time (an injected slowdown).
    extra_hop_ms : float, default=0.0
        Added to the hop into this call (an injected network delay; client span only).
    error : bool, default=False
        The server span has status ``error``.
    """

    service: str
    operation: str
    own_ms: float
    children: tuple = ()
    extra_own_ms: float = 0.0
    extra_hop_ms: float = 0.0
    error: bool = False

    def services(self) -> set:
        """Services of this node and its subtree."""
        return {self.service}.union(*(c.services() for c in self.children))

    def map(self, fn) -> "Node":
        """The tree with ``fn(node)`` applied bottom-up to every node."""
        return fn(replace(self, children=tuple(c.map(fn) for c in self.children)))


def _n(service, operation, own_ms, *children) -> Node:
    return Node(service, operation, own_ms, tuple(children))


def _redis(op="HGET"):
    return _n("redis", op, 0.4)


#: The three request types of the endpoint (each one category).
REQUEST_TYPES: dict[str, Node] = {
    "home": _n("frontend", "GET /", 6.0,
               _n("catalog", "ListProducts", 4.0),
               _n("currency", "GetSupportedCurrencies", 1.5),
               _n("cart", "GetCart", 2.0, _redis()),
               _n("ads", "GetAds", 3.0),
               _n("recommendation", "ListRecommendations", 3.0, _n("catalog", "ListProducts", 4.0))),
    "product": _n("frontend", "GET /", 5.0,
                  _n("catalog", "GetProduct", 2.5),
                  _n("currency", "Convert", 1.0),
                  _n("recommendation", "ListRecommendations", 3.0, _n("catalog", "ListProducts", 4.0)),
                  _n("ads", "GetAds", 3.0)),
    "checkout": _n("frontend", "GET /", 8.0,
                   _n("checkout", "PlaceOrder", 5.0,
                      _n("cart", "GetCart", 2.0, _redis()),
                      _n("catalog", "GetProduct", 2.5),
                      _n("currency", "Convert", 1.0),
                      _n("shipping", "GetQuote", 3.0),
                      _n("payment", "Charge", 6.0),
                      _n("email", "SendOrderConfirmation", 4.0),
                      _n("cart", "EmptyCart", 2.0, _redis("DEL")))),
}
_CHECKOUT_ONLY = tuple(sorted(REQUEST_TYPES["checkout"].services()
                              - REQUEST_TYPES["home"].services() - REQUEST_TYPES["product"].services()))
_ALL_SERVICES = sorted(set().union(*(t.services() for t in REQUEST_TYPES.values())))
#: Candidate injected services per kind (drawn per seed).
_CANDIDATES = {
    "new-slow-path": ("shipping", "payment", "email", "cart"),
    "slowed-handler": tuple(s for s in _ALL_SERVICES if s not in ("frontend", "redis")),
    "network-delay": tuple(s for s in _ALL_SERVICES if s != "frontend"),
    "reroute": ("catalog", "currency", "cart", "ads"),
    "early-return": ("cart", "recommendation", "checkout"),
    "workload-mix": ("checkout",),
}


def _walk(node: Node):
    yield node
    for c in node.children:
        yield from _walk(c)


#: Each service's first operation (and its median own time) in the request types.
_OPERATION_OF: dict = {}
for _t in REQUEST_TYPES.values():
    for _node in _walk(_t):
        _OPERATION_OF.setdefault(_node.service, (_node.operation, _node.own_ms))


@dataclass(frozen=True)
class Scenario:
    """A baseline and a problem period, and what changed between them.

    Attributes
    ----------
    kind : str
        One of :data:`SCENARIOS`.
    baseline, problem : pyarrow.Table
        The periods' spans (:data:`~tracesleuth.schema.SPAN_SCHEMA`).
    injected : str
        The service the change was injected into (for ``workload-mix``, the service that only
        the category whose share grew calls first: ``checkout``).
    accepted : tuple of str
        Services that count as the right answer in first place (see :func:`top_service_hit`).
    description : str
        The change in words.
    n_baseline, n_problem : int
        Requests in each period.
    affected_traces : frozenset of str
        Trace ids of the problem requests the change touched (all problem requests of the
        affected categories for period-wide changes; empty for ``workload-mix``).
    details : dict
        Scenario specifics (``delay_ms``, ``fraction``, ``rerouted_from``...).
    """

    kind: str
    baseline: pa.Table
    problem: pa.Table
    injected: str
    accepted: tuple
    description: str
    n_baseline: int
    n_problem: int
    affected_traces: frozenset = field(default_factory=frozenset, repr=False)
    details: dict = field(default_factory=dict)

    def tables(self):
        """``(problem, baseline)`` trace tables of :data:`ENDPOINT`, in ``fit``'s order."""
        from ...model import build_trace_table

        return build_trace_table(self.problem, ENDPOINT), build_trace_table(self.baseline, ENDPOINT)


def top_service_hit(scenario: Scenario, result, k: int = 1) -> bool:
    """Whether a comparison result names the scenario's change in its first ``k`` services.

    Parameters
    ----------
    scenario : Scenario
    result : ComparisonResult or sequence of str
        The estimator's ``result_`` (its ``services`` are read), or a ranked list of services.
    k : int, default=1

    Returns
    -------
    bool
        True when one of the first ``k`` services is in ``scenario.accepted``; for
        ``workload-mix`` (:data:`WORKLOAD_MIX_RULE`) also when the result reports no significant
        change or no service.
    """
    if isinstance(result, (list, tuple)):
        names, significant = list(result), True
    else:
        names = [s.service for s in result.services]
        significant = bool(getattr(result, "significant", True))
    if scenario.kind == "workload-mix" and (not significant or not names):
        return True
    return any(name in scenario.accepted for name in names[:k])


def simulate_scenario(kind: str, *, n_requests: int = 2000, baseline_ratio: float = 1.5,
                      random_state=None) -> Scenario:
    """Draw a baseline and a problem period with one change of kind ``kind``.

    Parameters
    ----------
    kind : str
        One of :data:`SCENARIOS` (the module docstring says what each injects).
    n_requests : int, default=2000
        Requests in the problem period.
    baseline_ratio : float, default=1.5
        Requests (and length) of the baseline period relative to the problem period.
    random_state : int, numpy.random.SeedSequence or None, default=None
        Seeds the injected service, the request types, the times and the ids.

    Returns
    -------
    Scenario

    Raises
    ------
    ParameterError
        For an unknown ``kind``, ``n_requests`` < 1 or ``baseline_ratio`` <= 0.

    Examples
    --------
    >>> sc = simulate_scenario("network-delay", n_requests=200, random_state=0)
    >>> sc.n_baseline, sc.n_problem, sc.problem.schema.names[:3]
    (300, 200, ['trace_id', 'span_id', 'parent_span_id'])
    """
    if kind not in SCENARIOS:
        raise ParameterError(f"The 'kind' parameter of simulate_scenario must be one of "
                             f"{', '.join(map(repr, SCENARIOS))}. Got {kind!r} instead.")
    if isinstance(n_requests, bool) or not isinstance(n_requests, (int, np.integer)) or n_requests < 1:
        raise ParameterError(f"The 'n_requests' parameter of simulate_scenario must be an int in the range "
                             f"[1, inf). Got {n_requests!r} instead.")
    if not isinstance(baseline_ratio, (int, float)) or not baseline_ratio > 0:
        raise ParameterError(f"The 'baseline_ratio' parameter of simulate_scenario must be a float > 0. "
                             f"Got {baseline_ratio!r} instead.")
    seq = random_state if isinstance(random_state, np.random.SeedSequence) else np.random.SeedSequence(random_state)
    s_pick, s_base, s_prob = (np.random.default_rng(s) for s in seq.spawn(3))
    target = str(s_pick.choice(_CANDIDATES[kind]))
    n_prob = int(n_requests)
    n_base = max(1, int(round(baseline_ratio * n_prob)))
    pods = {s: [f"{s}-{_alnum(s_pick, 10)}-{_alnum(s_pick, 5)}" for _ in range(_PODS_PER_SERVICE)]
            for s in [*_ALL_SERVICES, *(f"{s}-legacy" for s in _CANDIDATES["reroute"])]}

    base_types = _draw_types(s_base, n_base, _SHARES)
    base_trees = {name: [(REQUEST_TYPES[name], np.ones(int((base_types == i).sum()), bool))]
                  for i, name in enumerate(REQUEST_TYPES)}
    baseline = _period(base_trees, base_types, s_base, PERIOD_START_NS, pods, _trace_ids(s_base, n_base, "b"))

    shares = _MIX_SHARES if kind == "workload-mix" else _SHARES
    prob_types = _draw_types(s_prob, n_prob, shares)
    details: dict = {}
    accepted = (target,)
    variants: dict[str, list] = {}
    affected = np.zeros(n_prob, dtype=bool)
    for i, name in enumerate(REQUEST_TYPES):
        rows = np.flatnonzero(prob_types == i)
        tree = REQUEST_TYPES[name]
        changed, p = _inject(kind, tree, name, target, details)
        hit = s_prob.random(len(rows)) < p if changed is not None else np.zeros(len(rows), bool)
        affected[rows[hit]] = True
        variants[name] = [(tree, ~hit)] + ([(changed, hit)] if changed is not None else [])
    if kind == "workload-mix":
        accepted = _CHECKOUT_ONLY
        details["shares"] = {"baseline": dict(_SHARES), "problem": dict(_MIX_SHARES)}
    if kind == "reroute":
        target = f"{target}-legacy"
        accepted = (target,)
    problem_start = PERIOD_START_NS + int(n_base / REQUEST_RATE_PER_S * NS_PER_S) + 60 * NS_PER_S
    trace_ids = _trace_ids(s_prob, n_prob, "d")
    problem = _period(variants, prob_types, s_prob, problem_start, pods, trace_ids)
    return Scenario(kind=kind, baseline=baseline, problem=problem, injected=target, accepted=tuple(accepted),
                    description=_describe(kind, target, details), n_baseline=n_base, n_problem=n_prob,
                    affected_traces=frozenset(trace_ids[i] for i in np.flatnonzero(affected).tolist()),
                    details=details)


def _inject(kind: str, tree: Node, name: str, target: str, details: dict):
    """The changed tree of one request type and the share of its requests that get it (None
    when the type is unchanged)."""
    if kind == "slowed-handler":
        details["delay_ms"] = 20.0
        fn = lambda n: replace(n, extra_own_ms=20.0) if n.service == target else n  # noqa: E731
        return (tree.map(fn), 1.0) if target in tree.services() else (None, 0.0)
    if kind == "network-delay":
        details["delay_ms"] = 20.0
        fn = lambda n: replace(n, extra_hop_ms=20.0) if n.service == target else n  # noqa: E731
        return (tree.map(fn), 1.0) if target in tree.services() else (None, 0.0)
    if kind == "new-slow-path":
        details.update(delay_ms=40.0, fraction=0.5, request_type="product")
        if name != "product":
            return None, 0.0
        op, own = _OPERATION_OF[target]
        extra = Node(target, op, own, extra_own_ms=40.0)
        return replace(tree, children=tree.children + (extra,)), 0.5
    if kind == "reroute":
        details.update(rerouted_from=target, fraction=0.7, extra_own_ms=15.0, extra_hop_ms=5.0)
        fn = lambda n: (replace(n, service=f"{target}-legacy", extra_own_ms=15.0, extra_hop_ms=5.0)  # noqa: E731
                        if n.service == target else n)
        return (tree.map(fn), 0.7) if target in tree.services() else (None, 0.0)
    if kind == "early-return":
        details.update(fraction=0.8, error=True)
        fn = lambda n: replace(n, children=(), own_ms=0.3 * n.own_ms, error=True) if n.service == target else n  # noqa: E731
        return (tree.map(fn), 0.8) if target in tree.services() else (None, 0.0)
    return None, 0.0  # workload-mix: no fault


def _describe(kind: str, target: str, d: dict) -> str:
    return {
        "new-slow-path": f"half of the product requests make a new call into {target} taking 40 ms",
        "slowed-handler": f"every server span of {target} takes 20 ms more",
        "network-delay": f"every call into {target} waits 20 ms on the network on its way in",
        "reroute": f"70% of the calls of {d.get('rerouted_from')} go to {target} (+15 ms own, +5 ms hop)",
        "early-return": f"80% of the calls of {target} return early with an error, skipping its downstream calls",
        "workload-mix": "checkout requests go from 15% to 35% of the workload (home 45% to 25%); no fault",
    }[kind]


def _draw_types(rng: np.random.Generator, n: int, shares: dict) -> np.ndarray:
    p = np.array([shares[k] for k in REQUEST_TYPES])
    return rng.choice(len(p), size=n, p=p / p.sum())


def _trace_ids(rng: np.random.Generator, n: int, tag: str) -> list:
    """``n`` distinct 32-hex-digit trace ids; the first digit tells the period (``b`` baseline, ``d`` problem)."""
    return [f"{tag}{v:031x}" for v in rng.choice(2**62, size=n, replace=False).tolist()]


def _period(variants: dict, types: np.ndarray, rng: np.random.Generator, start_ns: int, pods: dict,
            trace_hex: list) -> pa.Table:
    """Spans of one period, grouped by request (in request order), by start within one.
    ``variants[type]`` lists ``(tree, mask over that type's requests)``."""
    n = len(types)
    starts = start_ns + np.sort(rng.uniform(0, n / REQUEST_RATE_PER_S * NS_PER_S, n)).astype(np.int64)
    cols: dict[str, list] = {k: [] for k in ("trace", "span", "parent", "service", "operation", "instance", "kind",
                                            "start", "end", "error")}
    counter = [0]
    for i, name in enumerate(REQUEST_TYPES):
        req = np.flatnonzero(types == i)
        for tree, mask in variants[name]:
            rows = req[mask]
            if len(rows):
                _lay(tree, rows, starts[rows], None, None, rng, pods, cols, counter)
    trace = np.concatenate(cols["trace"])
    order = np.lexsort((np.concatenate(cols["start"]), trace))
    m = len(order)
    span_ids = [f"{v:016x}" for v in (np.concatenate(cols["span"])[order] + 1).tolist()]
    parent = np.concatenate(cols["parent"])[order]
    parent_ids = [None if v < 0 else f"{v + 1:016x}" for v in parent.tolist()]
    take = lambda k: np.concatenate(cols[k])[order]  # noqa: E731
    arrays = [
        pa.array(np.array(trace_hex, dtype=object)[trace[order]], pa.string()),
        pa.array(span_ids, pa.string()),
        pa.array(parent_ids, pa.string()),
        pa.array(take("service"), pa.string()),
        pa.array(take("operation"), pa.string()),
        pa.array(take("instance"), pa.string()),
        pa.array(take("kind"), pa.string()),
        pa.array(take("start"), pa.int64()),
        pa.array(take("end"), pa.int64()),
        pa.array(np.where(take("error"), "error", "unset"), pa.string()),
        pa.array(np.zeros(m, bool), pa.bool_()),
        pa.nulls(m, pa.list_(S.ATTRIBUTE_TYPE)),
    ]
    return S.with_later_columns(pa.Table.from_arrays(arrays, schema=S.PRE_EVENTS_SPAN_SCHEMA))


def _ms(rng: np.random.Generator, median_ms: float, n: int) -> np.ndarray:
    return np.rint(rng.lognormal(np.log(median_ms), _SIGMA, n) * NS_PER_MS).astype(np.int64)


def _hop(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.rint((_HOP_FLOOR_MS + rng.gamma(2.0, 0.1, n)) * NS_PER_MS).astype(np.int64)


def _lay(node: Node, rows: np.ndarray, start: np.ndarray, parent_ids, caller: Node | None,
         rng: np.random.Generator, pods: dict, cols: dict, counter: list) -> np.ndarray:
    """Emit the spans of ``node`` for requests ``rows`` starting at ``start`` (the client span's
    start when called); returns the end of the call as its caller sees it."""
    n = len(rows)

    def emit(service, operation, instance, kind, s, e, parent, error):
        ids = np.arange(counter[0], counter[0] + n, dtype=np.int64)
        counter[0] += n
        cols["trace"].append(rows)
        cols["span"].append(ids)
        cols["parent"].append(parent if parent is not None else np.full(n, -1, np.int64))
        for key, value in (("service", service), ("operation", operation), ("kind", kind)):
            cols[key].append(np.full(n, value, dtype=object))
        cols["instance"].append(instance)
        cols["start"].append(s)
        cols["end"].append(e)
        cols["error"].append(np.full(n, error, bool))
        return ids

    pick = lambda svc: np.array(pods[svc], dtype=object)[rng.integers(_PODS_PER_SERVICE, size=n)]  # noqa: E731
    client_ids = None
    server_start = start
    if caller is not None:
        hop_out = _hop(rng, n) + int(round(node.extra_hop_ms * NS_PER_MS))
        hop_back = _hop(rng, n)
        client_ids = np.arange(counter[0], counter[0] + n, dtype=np.int64)  # reserved: emitted after the layout
        counter[0] += n
        server_start = start + hop_out
    own = _ms(rng, node.own_ms, n) + int(round(node.extra_own_ms * NS_PER_MS))
    base = own
    pre = base * 3 // 10 if node.children else np.zeros(n, np.int64)
    gap = base * 2 // 100
    server_ids = emit(node.service, node.operation, pick(node.service), "server", server_start, server_start,
                      client_ids, node.error)
    cursor = server_start + pre
    for m, child in enumerate(node.children):
        if m:
            cursor = cursor + gap
        cursor = _lay(child, rows, cursor, server_ids, node, rng, pods, cols, counter)
    post = own - pre - (len(node.children) - 1) * gap if node.children else own
    server_end = cursor + np.maximum(post, 0)
    cols["end"][-1 - _spans_after(cols, server_ids)] = server_end  # patch the server span's end
    if caller is None:
        return server_end
    end = server_end + hop_back
    saved = counter[0]
    counter[0] = int(client_ids[0])
    emit(caller.service, node.operation, pick(caller.service), "client", start, end, parent_ids, False)
    counter[0] = saved
    return end


def _spans_after(cols: dict, ids: np.ndarray) -> int:
    """How many span blocks were emitted after the block holding ``ids``."""
    for back, block in enumerate(reversed(cols["span"])):
        if block is ids:
            return back
    raise RuntimeError("span block not found")  # pragma: no cover


def _alnum(rng: np.random.Generator, k: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"      # Kubernetes' pod-name alphabet
    return "".join(alphabet[i] for i in rng.integers(len(alphabet), size=k))


def planted_case(random_state: int = 0):
    """The common test's planted case: a slowed handler (every server span of one service takes
    20 ms more), 600 problem and 900 baseline requests.

    The score is 1.0 when the estimator's first service is the slowed one, else 0.0; the floor
    is 1.0.

    Returns
    -------
    PlantedCase
    """
    from .. import PlantedCase

    scenario = simulate_scenario("slowed-handler", n_requests=600, random_state=random_state)
    problem, baseline = scenario.tables()

    def score(fitted) -> float:
        services = fitted.result_.services
        return 1.0 if services and services[0].service == scenario.injected else 0.0

    return PlantedCase(args=(problem, baseline), settings={"random_state": random_state}, score=score, floor=1.0)
