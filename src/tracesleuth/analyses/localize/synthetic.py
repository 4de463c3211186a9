"""The four performance problems of Mi et al. 2012 (Section 6.1.2), simulated with ground truth.

A file-sharing service on replicated components, like the paper's (Section 6.1.1: an Alibaba
file-sharing application with the operations SaveFile, ListFile and ReadFile over a
distributed scheduler, storage and metadata services). Every method invocation is a span
(kind ``server``) of its component, nested in its caller's span, as the paper's start/end logs
nest (Figure 2); the instance is the component's replica that ran it.

========================= =========================================================== =========
endpoint                  call sequence (``x k``: k calls in a row)                    share
========================= =========================================================== =========
``front:SaveFile``        auth:Check, lock:Acquire, meta:PutMeta, chunk:WriteChunk x   1/3
                          k (k = 1..6: 45, 30, 10, 7, 5, 3%), lock:Release
``front:ListFile``        auth:Check, cache:Get, then on a miss (40%) meta:ListMeta x  1/3
                          p (p = 1: 85%, 2..4: 15%) and cache:Put
``front:ReadFile``        auth:Check, meta:GetMeta, cache:Get, then on a miss (50%)    1/3
                          chunk:ReadChunk x k (k = 1..4: 55, 25, 12, 8%)
========================= =========================================================== =========

So a few call sequences per endpoint hold about three quarters of its requests and a tail of
others the rest (the paper's Figures 4-5), and the tail's sequences contain the major ones'
methods (they call a loop more often), so Algorithm 1 can merge them. Each component method
calls internal methods in its own process (``meta:PutMeta`` -> ``meta:Serialize``,
``meta:WriteLog``...: :data:`INTERNAL`), 24 methods in all. Own (exclusive) times are the
method's median (0.2-6 ms) times a factor the request's methods share (lognormal, sigma 0.3:
the host's load, the file's size) times the method's own noise (lognormal, sigma 0.1): the
latency matrices have the low intrinsic dimensionality the paper observed (Figure 6) and PCA
relies on. A span's children run one after the other, 30% of its own time before the first.

A problem starts at the **onset**: the last 30% of the requests (in time order) are affected.

======================= ================================================================ ===================
kind                    what changes after the onset                                      anomalous instances
======================= ================================================================ ===================
``misconfiguration``    a parameter set wrong on 3 of the 8 ``meta`` replicas: their      those 3
                        ``meta:ListMeta`` takes 4x its own time (ListFile slows down)
``failover``            3 of the 12 ``chunk`` replicas are killed; the survivors take      none (all survivors)
                        their writes, and ``chunk:WriteChunk`` takes 2.5x its own time
``code-bug``            ReadFile's authorization calls a deprecated interface with extra   none (every replica)
                        logic: ``auth:Check`` takes 3x its own time in ReadFile requests
``load-imbalance``      65% of SaveFile's ``lock:Acquire`` calls go to ``lock-0``, whose   ``lock-0``
                        ``lock:Acquire`` takes 2.5x its own time
======================= ================================================================ ===================

Ground truth (:class:`LocalizeScenario`): the **anomalous methods** are the methods whose own time
the problem changes (a caller whose own time did not change is normal, however slower its
duration); the **normal methods** every other method that occurs. Equations (6)-(7) of the paper
score a result against them (:func:`error_rates`).

Reproducibility: everything is drawn from ``random_state`` (an int, a SeedSequence or None).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import schema as S
from ...errors import ParameterError
from ...units import NS_PER_MS

__all__ = ["SCENARIOS", "LocalizeScenario", "error_rates", "planted_case", "simulate_scenario"]

SCENARIOS = ("misconfiguration", "failover", "code-bug", "load-imbalance")
#: Replicas per component.
INSTANCES = {"front": 2, "auth": 3, "lock": 4, "meta": 8, "chunk": 12, "cache": 3}
#: Median own (exclusive) time of each method, ms.
OWN_MS = {"front:SaveFile": 0.5, "front:ListFile": 0.4, "front:ReadFile": 0.4, "auth:Check": 1.0,
          "lock:Acquire": 0.8, "lock:Release": 0.3, "meta:PutMeta": 3.0, "meta:GetMeta": 2.0, "meta:ListMeta": 4.0,
          "chunk:WriteChunk": 6.0, "chunk:ReadChunk": 4.0, "cache:Get": 0.5, "cache:Put": 0.6}
#: Internal methods each component method calls in its own process (same instance), in order.
INTERNAL = {"auth:Check": ("auth:LoadPolicy", "auth:VerifyToken"), "lock:Acquire": ("lock:TryLock",),
            "meta:PutMeta": ("meta:Serialize", "meta:WriteLog"), "meta:GetMeta": ("meta:ReadIndex",),
            "meta:ListMeta": ("meta:ReadIndex", "meta:Scan"), "chunk:WriteChunk": ("chunk:Checksum", "chunk:Flush"),
            "chunk:ReadChunk": ("chunk:ReadBlock", "chunk:Checksum"), "cache:Get": ("cache:Lookup",)}
OWN_MS.update({"auth:LoadPolicy": 0.4, "auth:VerifyToken": 0.6, "lock:TryLock": 0.2, "meta:Serialize": 0.5,
               "meta:WriteLog": 1.5, "meta:ReadIndex": 0.8, "meta:Scan": 2.0, "chunk:Checksum": 0.7,
               "chunk:Flush": 2.5, "chunk:ReadBlock": 1.8, "cache:Lookup": 0.2})
ONSET = 0.7
_SIGMA = 0.1
_LOAD_SIGMA = 0.3
_RATE_PER_S = 200.0
_INNER = {m for ms in INTERNAL.values() for m in ms}
_METHODS = tuple(OWN_MS)  # method codes of the span columns
_INSTANCE_NAMES = tuple(f"{svc}-{i}" for svc, k in INSTANCES.items() for i in range(k))
_FAULTS = {  # kind -> (method, factor, endpoint it applies to or None)
    "misconfiguration": ("meta:ListMeta", 4.0, "front:ListFile"),
    "failover": ("chunk:WriteChunk", 2.5, "front:SaveFile"),
    "code-bug": ("auth:Check", 3.0, "front:ReadFile"),
    "load-imbalance": ("lock:Acquire", 2.5, "front:SaveFile"),
}


@dataclass(frozen=True)
class LocalizeScenario:
    """One simulated problem and its ground truth.

    Attributes
    ----------
    kind : str
        One of :data:`SCENARIOS`.
    spans : pyarrow.Table
        :data:`~tracesleuth.schema.SPAN_SCHEMA`.
    anomalous_methods : frozenset of str
        Operation keys whose own time the problem changes.
    normal_methods : frozenset of str
        Every other operation key in the spans.
    anomalous_instances : frozenset of str
        The replicas where the problem is; empty when it is on all of them.
    injected_service : str
    description : str
    n_requests : int
    onset_ns : int
        Start of the first affected request.
    """

    kind: str
    spans: pa.Table = field(repr=False)
    anomalous_methods: frozenset
    normal_methods: frozenset
    anomalous_instances: frozenset
    injected_service: str
    description: str
    n_requests: int
    onset_ns: int

    def tables(self) -> list:
        """One trace table per endpoint (``front:SaveFile``, ``front:ListFile``, ``front:ReadFile``)."""
        from ...model import build_trace_table

        return [build_trace_table(self.spans, e) for e in ("front:SaveFile", "front:ListFile", "front:ReadFile")]


def _nest(calls: list) -> list:
    """``calls`` (children of the root) with each component method's internal methods under it."""
    out = []
    for method, parent in calls:
        here = len(out)
        out.append((method, parent))
        out += [(inner, here) for inner in INTERNAL.get(method, ())]
    return out


def _variants() -> list[tuple[str, float, list]]:
    """``(endpoint, share of all requests, [(method, parent index), ...])`` of every call sequence
    (parents before their children)."""
    return [(ep, share, _nest(calls)) for ep, share, calls in _sequences()]


def _sequences() -> list[tuple[str, float, list]]:
    out = []
    for k, p in zip(range(1, 7), (0.45, 0.30, 0.10, 0.07, 0.05, 0.03)):
        calls = [("front:SaveFile", -1), ("auth:Check", 0), ("lock:Acquire", 0), ("meta:PutMeta", 0)]
        calls += [("chunk:WriteChunk", 0)] * k + [("lock:Release", 0)]
        out.append(("front:SaveFile", p / 3, calls))
    head = [("front:ListFile", -1), ("auth:Check", 0), ("cache:Get", 0)]
    out.append(("front:ListFile", 0.6 / 3, head))
    for pages, p in zip(range(1, 5), (0.85, 0.05, 0.05, 0.05)):
        out.append(("front:ListFile", 0.4 * p / 3, head + [("meta:ListMeta", 0)] * pages + [("cache:Put", 0)]))
    head = [("front:ReadFile", -1), ("auth:Check", 0), ("meta:GetMeta", 0), ("cache:Get", 0)]
    out.append(("front:ReadFile", 0.5 / 3, head))
    for k, p in zip(range(1, 5), (0.55, 0.25, 0.12, 0.08)):
        out.append(("front:ReadFile", 0.5 * p / 3, head + [("chunk:ReadChunk", 0)] * k))
    return out


def simulate_scenario(kind: str, *, n_requests: int = 3000, random_state=None) -> LocalizeScenario:
    """Simulate one of the paper's four problems (module docstring).

    Parameters
    ----------
    kind : str
        One of :data:`SCENARIOS`.
    n_requests : int, default=3000
        Requests over all three endpoints, at 200 per second.
    random_state : int, numpy SeedSequence or None

    Returns
    -------
    LocalizeScenario

    Raises
    ------
    ParameterError
        An unknown ``kind`` or ``n_requests`` < 10.
    """
    if kind not in SCENARIOS:
        raise ParameterError(f"The 'kind' must be one of {', '.join(SCENARIOS)}. Got {kind!r} instead.")
    if isinstance(n_requests, bool) or not isinstance(n_requests, (int, np.integer)) or n_requests < 10:
        raise ParameterError(f"The 'n_requests' must be an int >= 10. Got {n_requests!r} instead.")
    rng = np.random.default_rng(random_state)
    variants = _variants()
    shares = np.array([v[1] for v in variants])
    which = rng.choice(len(variants), size=n_requests, p=shares / shares.sum())
    starts = np.sort(rng.uniform(0, n_requests / _RATE_PER_S * 1e9, n_requests)).astype(np.int64) + 1_700_000_000 * 10**9
    affected = np.arange(n_requests) >= int(ONSET * n_requests)  # requests are in time order
    method, factor, endpoint = _FAULTS[kind]
    killed = {f"chunk-{i}" for i in range(3)} if kind == "failover" else set()
    faulty = {"misconfiguration": {f"meta-{i}" for i in range(3)}, "load-imbalance": {"lock-0"}}.get(kind, set())
    parts = []
    for v, (ep, _, calls) in enumerate(variants):
        rows = np.flatnonzero(which == v)
        if len(rows):
            parts.append(_lay(calls, rows, starts[rows], affected[rows], ep == endpoint or endpoint is None,
                              kind, method, factor, killed, faulty, rng))
    spans = _table(parts, n_requests, rng)
    present = set(pc.unique(pc.binary_join_element_wise(spans["service"], spans["operation"], ":")).to_pylist())
    anomalous = frozenset({method})
    return LocalizeScenario(
        kind=kind, spans=spans, anomalous_methods=anomalous, normal_methods=frozenset(present - anomalous),
        anomalous_instances=frozenset(faulty), injected_service=method.split(":", 1)[0],
        description=f"{kind}: {method} takes {factor:g}x its own time"
                    + (f" on {', '.join(sorted(faulty))}" if faulty else "")
                    + (f" in {endpoint} requests" if endpoint else "") + f" from request {int(ONSET * n_requests)}",
        n_requests=n_requests, onset_ns=int(starts[int(ONSET * n_requests)]) if n_requests else 0)


def _instances(method: str, n: int, hit: np.ndarray, kind: str, killed: set, rng: np.random.Generator) -> np.ndarray:
    """Codes into ``_INSTANCE_NAMES`` of the replicas that serve ``n`` calls of ``method``."""
    service = method.split(":", 1)[0]
    first = _INSTANCE_NAMES.index(f"{service}-0")
    pick = rng.integers(INSTANCES[service], size=n)
    if kind == "failover" and service == "chunk":
        alive = np.array([i for i in range(INSTANCES[service]) if f"{service}-{i}" not in killed])
        pick = np.where(hit, alive[rng.integers(len(alive), size=n)], pick)
    if kind == "load-imbalance" and method == "lock:Acquire":
        pick = np.where(hit & (rng.random(n) < 0.65), 0, pick)
    return first + pick


def _lay(calls: list, rows: np.ndarray, starts: np.ndarray, affected: np.ndarray, in_endpoint: bool, kind: str,
         method: str, factor: float, killed: set, faulty: set, rng: np.random.Generator) -> dict:
    """The spans of one call sequence for its requests: columns of equal length, in call order."""
    n, m = len(rows), len(calls)
    load = rng.lognormal(0.0, _LOAD_SIGMA, (n, 1))  # what every method of a request shares (host load, size)
    own = np.rint(rng.lognormal(np.log([OWN_MS[c] for c, _ in calls]), _SIGMA, (n, m)) * load * NS_PER_MS
                  ).astype(np.int64)
    hit = affected & in_endpoint
    instance = []
    for j, (c, p) in enumerate(calls):
        inst = instance[p] if p > 0 and c in _INNER else _instances(c, n, hit, kind, killed, rng)
        if c == method:
            slow = hit & (np.isin(inst, [_INSTANCE_NAMES.index(f) for f in faulty]) if faulty else True)
            own[:, j] = np.where(slow, np.rint(own[:, j] * factor), own[:, j])
        instance.append(inst)
    # Bottom-up durations, then top-down starts: a span's children run one after another,
    # after 30% of its own time.
    parents = [p for _, p in calls]
    dur = own.copy()
    for j in range(m - 1, 0, -1):
        dur[:, parents[j]] += dur[:, j]
    begin = np.zeros((n, m), np.int64)
    cursor = {0: own[:, 0] * 3 // 10}
    for j in range(1, m):
        p = parents[j]
        begin[:, j] = begin[:, p] + cursor[p] if p in cursor else begin[:, p] + own[:, p] * 3 // 10
        cursor[p] = begin[:, j] - begin[:, p] + dur[:, j]
    end = begin + dur
    return {"rows": np.repeat(rows, m), "call": np.tile(np.arange(m), n), "parent": np.tile([p for _, p in calls], n),
            "key": np.tile(np.array([_METHODS.index(c) for c, _ in calls], dtype=np.int32), n),
            "instance": np.column_stack(instance).ravel(), "start": (begin + starts[:, None]).ravel(),
            "end": (end + starts[:, None]).ravel()}


def _table(parts: list, n_requests: int, rng: np.random.Generator) -> pa.Table:
    """One span table from the sequences' columns, grouped by request in time order."""
    col = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    order = np.lexsort((col["call"], col["rows"]))
    col = {k: v[order] for k, v in col.items()}
    first = np.r_[0, np.flatnonzero(np.diff(col["rows"])) + 1]  # each request's root row
    root = np.repeat(first, np.diff(np.r_[first, len(order)]))
    # Ids of at most 16 decimal digits, non-zero: valid hexadecimal ids when written and read back.
    tag = int(rng.integers(1, 10**6)) * 10**9
    span = pc.cast(pa.array(np.arange(len(order), dtype=np.int64) + tag), pa.string())
    parent = pc.if_else(pa.array(col["parent"] >= 0), pc.take(span, pa.array(root + np.maximum(col["parent"], 0))),
                        pa.scalar(None, pa.string()))
    trace = pc.cast(pa.array(col["rows"].astype(np.int64) + tag), pa.string())
    decode = lambda codes, names: pa.DictionaryArray.from_arrays(  # noqa: E731
        pa.array(codes, pa.int32()), pa.array(names, pa.string())).cast(pa.string())
    m = len(order)
    return S.with_later_columns(pa.Table.from_arrays([
        trace, span, parent, decode(col["key"], [k.split(":", 1)[0] for k in _METHODS]),
        decode(col["key"], [k.split(":", 1)[1] for k in _METHODS]), decode(col["instance"], _INSTANCE_NAMES),
        pa.array(np.full(m, "server", dtype=object), pa.string()),
        pa.array(col["start"], pa.int64()), pa.array(col["end"], pa.int64()),
        pa.array(np.full(m, "unset", dtype=object), pa.string()), pa.array(np.zeros(m, bool), pa.bool_()),
        pa.nulls(m, pa.list_(S.ATTRIBUTE_TYPE))], schema=S.PRE_EVENTS_SPAN_SCHEMA))


def error_rates(scenario: LocalizeScenario, result) -> tuple[float, float]:
    """False-negative and false-positive rates of a result, the paper's equations (7) and (6).

    Parameters
    ----------
    scenario : LocalizeScenario
    result : LocalizationResult
        A method is flagged when it is anomalous in at least one cluster.

    Returns
    -------
    (float, float)
        ``|anomalous methods not flagged| / |anomalous methods|`` and
        ``|normal methods flagged| / |normal methods|``, each in [0, 1].
    """
    flagged = {m.operation_key for m in result.methods if m.anomalous}
    fn = len(scenario.anomalous_methods - flagged) / max(len(scenario.anomalous_methods), 1)
    fp = len(flagged & scenario.normal_methods) / max(len(scenario.normal_methods), 1)
    return fn, fp


def planted_case(random_state: int = 0):
    """The common test's planted case: the code-bug scenario, 1,500 requests, the trace table of
    its endpoint ``front:ReadFile`` (where the bug is).

    The score is 1.0 when the estimator's first method is the slowed one, else 0.0; the floor is 1.0.

    Returns
    -------
    PlantedCase
    """
    from .. import PlantedCase

    scenario = simulate_scenario("code-bug", n_requests=1500, random_state=random_state)

    def score(fitted) -> float:
        methods = fitted.result_.methods
        return 1.0 if methods and methods[0].operation_key in scenario.anomalous_methods else 0.0

    from ...model import build_trace_table

    table = build_trace_table(scenario.spans, "front:ReadFile")
    return PlantedCase(args=(table,), settings={"random_state": random_state}, score=score, floor=1.0)
