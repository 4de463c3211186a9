"""Simulated E-Shopper homepage sessions with injected latency degradations.

A stand-in for the load-test sessions of Cortellessa and Traini, Section 4 [1]_: requests to the
homepage of E-Shopper, a Spring Cloud microservice shop traced with Zipkin, each with two
recurrent artificial degradations A1 and A2 injected in a random tenth of the requests each.
:func:`simulate_eshopper` emits the **spans** of a session in the canonical schema
(:data:`tracesleuth.schema.SPAN_SCHEMA`), so that the analysis reads them through the same path
as recorded traces, and returns the ground truth (which request carries which degradation, and
every injected delay) **separately**: nothing in a span tells a degraded request apart.

The homepage request (Section 4.2)
----------------------------------
"Each request involves 13 calls of 8 unique RPCs among 5 microservices [...] the first two get
RPCs invoked by web-service are asynchronous". The paper's Gantt chart (its Figure 5) is not
reproduced in the text, so the call tree below is ours, built from the RPC names the paper uses
and from what the E-Shopper page shows (header with account and cart, category and brand
sidebars, "features items" grid, category tabs, "recommended items" carousel):

====  ===================  =================  ===============  ==========================================
call  service              RPC                called by        role
====  ===================  =================  ===============  ==========================================
 0    web-service          gethome            (the client)     the request; latency = this span's duration
 1    items-service        finditems          gethome, async   category-tab items
 2    items-service        findfeaturesitems  gethome, async   "features items" grid
 3    account-service      getprofile         gethome          header: the signed-in user
 4    cart-service         getcart            gethome          header: cart summary
 5    categories-service   getcategory        gethome          sidebar: top-level categories
 6-8  categories-service   getcategory        gethome          sidebar: sub-categories of 3 panels
 9    categories-service   getbrands          gethome          sidebar: brands
10    items-service        getrecommended     gethome          carousel, first slide
11    account-service      getprofile         getrecommended   the user's preferences
12    items-service        getrecommended     gethome          carousel, second slide
====  ===================  =================  ===============  ==========================================

So the 6 synchronous RPCs, the only ones a degradation may delay, are ``gethome``, ``getprofile``,
``getcart``, ``getcategory``, ``getbrands`` and ``getrecommended``; the 2 asynchronous ones are
``finditems`` and ``findfeaturesitems`` (Section 4.3, second noise). Synchronous calls run one
after the other. Each of the 12 calls made by a service is traced on both sides, as Zipkin's
Spring instrumentation does: a ``client`` span in the caller, a ``server`` span in the callee.
The two asynchronous calls' client spans carry ``follows_from=True``: the caller does not wait
for them, so their time is never subtracted from ``gethome``'s exclusive time, and they may end
after ``gethome`` without changing the request latency. A session has ``25 * n_requests`` spans.

Execution times
---------------
The *exclusive* (pure) time of each call, what the RPC spends itself (Section 4.2), is drawn
independently per call from the distributions of :data:`BASE_EXCLUSIVE_MS`: lognormal or gamma
laws of a few to a few tens of milliseconds, some bimodal (a cache hit or miss in ``getprofile``,
``getrecommended`` and ``findfeaturesitems``). Each network hop (client to server and back) adds
0.1 ms plus a gamma(2, 0.1 ms) delay, which is the client span's exclusive time. A caller spends
30% of its own time before its first synchronous call (dispatching the asynchronous ones at that
point), 2% between consecutive calls and the rest after the last one.

Degradations (Section 4.3)
--------------------------
A degradation of type ``t`` delays ``t`` distinct synchronous RPCs by 50 ms each. The two
degradations of a session get two different types out of {1, 2, 3}, each RPC set drawn among the
6 synchronous RPCs (the two sets may share RPCs). Every request is marked A1 with probability
0.1, else A2 with probability 0.1, else nothing. A marked request gets each of its degradation's
delays **once**, in the first call of the RPC (``getprofile``, ``getcategory`` and
``getrecommended`` are called more than once): the injected time, added to the callee's own
time, is then exactly ``t * 50 ms`` of latency whatever RPCs were drawn, as Section 4.3 requires
("the total amount of injected delays is the same").

A *noised* session adds the two noises of Section 4.3, both chosen per degradation: (1) one of
its RPCs gets 60 ms instead of 50 ms in about half of its requests; (2) one of the two
asynchronous calls gets 100 ms more in about half of its requests, which changes that RPC's
exclusive time but not the request latency. "About half" is a fair coin per request.

Reproducibility
---------------
Everything is drawn from ``random_state`` through independent streams (degradation definitions,
marking, noise coins, execution times, ids): two sessions with the same seed are identical, and
changing the marking probability or the degradations leaves every execution time and id
unchanged, which lets a test compare a degraded session with its undegraded twin.
:func:`draw_degradations` and :func:`draw_marking` give a seed's degradations and marking on
their own, and :meth:`Degradation.delays_ns` what a marked request undergoes: the live demo
(:mod:`tracesleuth.demo`) injects a seed's degradations into real services with them.

References
----------
.. [1] V. Cortellessa and L. Traini, "Detecting Latency Degradation Patterns in Service-based
   Systems", ICPE 2020, Sections 4.2 and 4.3. https://doi.org/10.1145/3358960.3379126
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from .. import schema as S
from ..errors import ParameterError
from ..units import NS_PER_MS, format_duration_ns

__all__ = [
    "ASYNC_RPCS", "BASE_EXCLUSIVE_MS", "Call", "Degradation", "EShopperSession", "ExecutionTime",
    "FIRST_CALL", "HOMEPAGE_CALLS", "InjectedDelay", "Marking", "RPCS", "SERVICES", "SYNC_RPCS",
    "draw_degradations", "draw_marking", "simulate_eshopper",
]

# Semantic-convention attribute keys (OpenTelemetry HTTP conventions) put on the spans.
ATTR_HTTP_REQUEST_METHOD = "http.request.method"
ATTR_HTTP_ROUTE = "http.route"
ATTR_HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
ATTR_URL_FULL = "url.full"
ATTR_SERVER_ADDRESS = "server.address"

#: Delay of one RPC in a degradation (Section 4.3: "each injected delay slows down RPC execution
#: time by 50ms").
DELAY_NS = 50 * NS_PER_MS
#: First noise: the delay injected in the deviating RPC of a noised degradation.
DEVIATED_DELAY_NS = 60 * NS_PER_MS
#: Second noise: the delay injected in an asynchronous call.
ASYNC_NOISE_NS = 100 * NS_PER_MS
#: Share of a degradation's requests hit by each noise (Section 4.3: "half of the requests").
NOISE_SHARE = 0.5
#: Origin of simulated time: 2019-10-01T09:00:00Z (any fixed instant would do).
SESSION_START_NS = 1_569_920_400_000_000_000
#: Locust makes one homepage request every 50 ms (Section 4.3).
REQUEST_INTERVAL_NS = 50 * NS_PER_MS
_ASYNC_DISPATCH_NS = 20_000         # 20 µs between the dispatch of two asynchronous calls
_PODS_PER_SERVICE = 2
_PORT = 8080


@dataclass(frozen=True)
class Call:
    """One call of the homepage request's call tree.

    Attributes
    ----------
    service, operation : str
        The callee's service and RPC.
    parent : int or None
        Index in :data:`HOMEPAGE_CALLS` of the calling RPC; ``None`` for the root ``gethome``.
    asynchronous : bool
        Whether the caller goes on without waiting for the call.
    """

    service: str
    operation: str
    parent: int | None
    asynchronous: bool = False

    @property
    def rpc(self) -> str:
        """``"service:operation"``, the RPC's key (as in the trace table's column names)."""
        return f"{self.service}:{self.operation}"


#: The 13 calls of a homepage request, in the order they start (see the module's table).
HOMEPAGE_CALLS: tuple[Call, ...] = (
    Call("web-service", "gethome", None),
    Call("items-service", "finditems", 0, asynchronous=True),
    Call("items-service", "findfeaturesitems", 0, asynchronous=True),
    Call("account-service", "getprofile", 0),
    Call("cart-service", "getcart", 0),
    Call("categories-service", "getcategory", 0),
    Call("categories-service", "getcategory", 0),
    Call("categories-service", "getcategory", 0),
    Call("categories-service", "getcategory", 0),
    Call("categories-service", "getbrands", 0),
    Call("items-service", "getrecommended", 0),
    Call("account-service", "getprofile", 10),
    Call("items-service", "getrecommended", 0),
)

#: The 8 distinct RPCs, in the order of their first call.
RPCS: tuple[str, ...] = tuple(dict.fromkeys(c.rpc for c in HOMEPAGE_CALLS))
#: The 2 asynchronous RPCs (the second noise's targets).
ASYNC_RPCS: tuple[str, ...] = tuple(dict.fromkeys(c.rpc for c in HOMEPAGE_CALLS if c.asynchronous))
#: The 6 synchronous RPCs (the degradations' targets).
SYNC_RPCS: tuple[str, ...] = tuple(r for r in RPCS if r not in ASYNC_RPCS)
#: The 5 services.
SERVICES: tuple[str, ...] = tuple(dict.fromkeys(c.service for c in HOMEPAGE_CALLS))

#: Index in :data:`HOMEPAGE_CALLS` of the first call of each RPC: the call a degradation delays.
FIRST_CALL: dict[str, int] = {rpc: next(i for i, c in enumerate(HOMEPAGE_CALLS) if c.rpc == rpc) for rpc in RPCS}
#: Indices of the calls each call makes, in the order it makes them.
CHILDREN: tuple[tuple[int, ...], ...] = tuple(tuple(j for j, c in enumerate(HOMEPAGE_CALLS) if c.parent == i)
                                            for i in range(len(HOMEPAGE_CALLS)))
#: Spans per request: a server span per call, a client span per call but the root.
SPANS_PER_REQUEST = 2 * len(HOMEPAGE_CALLS) - 1


@dataclass(frozen=True)
class ExecutionTime:
    """A mixture of lognormal and gamma laws for an exclusive execution time, in milliseconds.

    Parameters
    ----------
    components : tuple of (weight, law, a, b)
        ``law`` is ``"lognormal"`` (``a`` = median in ms, ``b`` = sigma of the log) or ``"gamma"``
        (``a`` = shape, ``b`` = scale in ms). Weights sum to 1.
    """

    components: tuple[tuple[float, str, float, float], ...]

    def draw_ns(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` independent draws, in integer nanoseconds (at least 1 µs).

        The number of random values consumed depends on ``n`` only, never on the draws.
        """
        weights = np.array([c[0] for c in self.components])
        pick = rng.choice(len(self.components), size=n, p=weights / weights.sum())
        out = np.empty(n)
        for k, (_, law, a, b) in enumerate(self.components):
            x = rng.lognormal(np.log(a), b, n) if law == "lognormal" else rng.gamma(a, b, n)
            out[pick == k] = x[pick == k]
        return np.maximum(np.rint(out * NS_PER_MS), 1_000).astype(np.int64)

    @property
    def mean_ms(self) -> float:
        """The mixture's mean, in milliseconds."""
        return float(sum(w * (a * np.exp(b * b / 2) if law == "lognormal" else a * b)
                         for w, law, a, b in self.components))


def _lognormal(median_ms: float, sigma: float) -> tuple:
    return (1.0, "lognormal", median_ms, sigma)


#: Exclusive execution time of one call of each RPC, before any injected delay.
BASE_EXCLUSIVE_MS: dict[str, ExecutionTime] = {
    "web-service:gethome": ExecutionTime((_lognormal(9.0, 0.20),)),
    "items-service:finditems": ExecutionTime(((1.0, "gamma", 6.0, 3.0),)),
    "items-service:findfeaturesitems": ExecutionTime(((0.75, "lognormal", 22.0, 0.20),
                                                      (0.25, "lognormal", 45.0, 0.15))),
    "account-service:getprofile": ExecutionTime(((0.85, "lognormal", 2.0, 0.25),
                                                 (0.15, "lognormal", 9.0, 0.20))),
    "cart-service:getcart": ExecutionTime(((1.0, "gamma", 5.0, 1.2),)),
    "categories-service:getcategory": ExecutionTime((_lognormal(1.8, 0.30),)),
    "categories-service:getbrands": ExecutionTime((_lognormal(3.5, 0.25),)),
    "items-service:getrecommended": ExecutionTime(((0.70, "lognormal", 4.0, 0.25),
                                                   (0.30, "lognormal", 14.0, 0.20))),
}
#: One network hop (request or response) between two services: 0.1 ms + gamma(2, 0.1 ms).
NETWORK_HOP_MS = ExecutionTime(((1.0, "gamma", 2.0, 0.1),))
_NETWORK_FLOOR_NS = 100_000


@dataclass(frozen=True)
class InjectedDelay:
    """One delay injected into one call of a request (see :meth:`Degradation.delays_ns`).

    Attributes
    ----------
    call : int
        Index in :data:`HOMEPAGE_CALLS` of the delayed call (the RPC's first call).
    rpc : str
        ``"service:operation"`` of the call.
    delay_ns : int
        Time added to the call's exclusive time, in nanoseconds.
    noise : str
        ``""`` for a plain 50 ms delay, ``"deviation"`` for the first noise's 60 ms, ``"async"``
        for the second noise's 100 ms.
    """

    call: int
    rpc: str
    delay_ns: int
    noise: str = ""


@dataclass(frozen=True)
class Degradation:
    """A recurrent artificial degradation (Section 4.3).

    Parameters
    ----------
    name : str
        ``"A1"`` or ``"A2"`` in a simulated session.
    rpcs : tuple of str
        The synchronous RPCs (``"service:operation"``, among :data:`SYNC_RPCS`) delayed by 50 ms
        each; their number is the degradation's type.
    deviating_rpc : str or None, default=None
        First noise: the RPC of ``rpcs`` delayed by 60 ms instead of 50 ms in about half of the
        degradation's requests. ``None`` when not noised.
    async_rpc : str or None, default=None
        Second noise: the asynchronous RPC (among :data:`ASYNC_RPCS`) delayed by 100 ms in about
        half of the degradation's requests. ``None`` when not noised.
    """

    name: str
    rpcs: tuple[str, ...]
    deviating_rpc: str | None = None
    async_rpc: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "rpcs", tuple(self.rpcs))
        unknown = [r for r in self.rpcs if r not in SYNC_RPCS]
        if not self.rpcs or unknown or len(set(self.rpcs)) != len(self.rpcs):
            raise ParameterError(f"Degradation {self.name!r}: 'rpcs' must be 1 to {len(SYNC_RPCS)} "
                                 f"distinct synchronous RPCs among {', '.join(SYNC_RPCS)}. "
                                 f"Got {self.rpcs!r} instead.")
        if self.deviating_rpc is not None and self.deviating_rpc not in self.rpcs:
            raise ParameterError(f"Degradation {self.name!r}: 'deviating_rpc' must be one of its "
                                 f"rpcs {self.rpcs!r}. Got {self.deviating_rpc!r} instead.")
        if self.async_rpc is not None and self.async_rpc not in ASYNC_RPCS:
            raise ParameterError(f"Degradation {self.name!r}: 'async_rpc' must be one of "
                                 f"{', '.join(ASYNC_RPCS)}. Got {self.async_rpc!r} instead.")

    @property
    def type(self) -> int:
        """The degradation type: the number of delayed RPCs (1 to 3 in the paper)."""
        return len(self.rpcs)

    @property
    def noised(self) -> bool:
        """Whether either noise of Section 4.3 applies."""
        return self.deviating_rpc is not None or self.async_rpc is not None

    def delays_ns(self, *, deviate: bool = False, async_hit: bool = False) -> tuple[InjectedDelay, ...]:
        """The delays injected into one request marked with this degradation.

        Every RPC of :attr:`rpcs` is delayed by 50 ms in its first call (:data:`FIRST_CALL`), the
        deviating RPC by 60 ms instead when ``deviate``; the asynchronous RPC gets 100 ms more in
        its first call when ``async_hit``. The coins only matter for a noised degradation. This
        is the one definition of what a marked request undergoes, shared by the simulator and
        the live demo (:mod:`tracesleuth.demo`).

        Parameters
        ----------
        deviate : bool, default=False
            The request's first-noise coin (about half of the requests).
        async_hit : bool, default=False
            The request's second-noise coin (about half of the requests).

        Returns
        -------
        tuple of InjectedDelay
            In the order of :attr:`rpcs`, then the asynchronous noise.

        Examples
        --------
        >>> d = Degradation("A1", ("cart-service:getcart",), "cart-service:getcart")
        >>> [(x.call, x.delay_ns // 1_000_000, x.noise) for x in d.delays_ns(deviate=True)]
        [(4, 60, 'deviation')]
        """
        out = []
        for rpc in self.rpcs:
            dev = bool(deviate) and rpc == self.deviating_rpc
            out.append(InjectedDelay(FIRST_CALL[rpc], rpc, DEVIATED_DELAY_NS if dev else DELAY_NS,
                                     "deviation" if dev else ""))
        if self.async_rpc is not None and async_hit:
            out.append(InjectedDelay(FIRST_CALL[self.async_rpc], self.async_rpc, ASYNC_NOISE_NS, "async"))
        return tuple(out)

    def to_dict(self) -> dict:
        """The degradation as plain Python values (the keyword arguments that rebuild it)."""
        return {"name": self.name, "rpcs": list(self.rpcs), "deviating_rpc": self.deviating_rpc,
                "async_rpc": self.async_rpc}

    def describe(self, rpc_name: Callable[[str], str] = str) -> str:
        """One line, e.g. ``"A1 (type 2): +50 ms in cart-service:getcart, web-service:gethome"``.

        ``rpc_name`` gives the name shown for an RPC key (the live demo shows its services').
        """
        return _degradation_line(
            self.name, [rpc_name(rpc) for rpc in self.rpcs], DELAY_NS,
            self.deviating_rpc and f"{rpc_name(self.deviating_rpc)} +{format_duration_ns(DEVIATED_DELAY_NS)} in ~half",
            self.async_rpc and f"{rpc_name(self.async_rpc)} +{format_duration_ns(ASYNC_NOISE_NS)} in ~half")


def _degradation_line(name: str, rpcs: Sequence[str], delay_ns: int, *noises: str | None) -> str:
    """A degradation in one line (its ``describe``, here and in :mod:`.bookshop`): its name, its
    type (the number of delayed RPCs), the delay and the RPCs, then each noise given (noise 1,
    noise 2; a falsy one is left out)."""
    text = f"{name} (type {len(rpcs)}): +{format_duration_ns(delay_ns)} in {', '.join(rpcs)}"
    return text + "".join(f"; noise {i}: {noise}" for i, noise in enumerate(noises, 1) if noise)


@dataclass(frozen=True)
class EShopperSession:
    """A simulated load-test session: spans, and apart from them, the ground truth.

    Attributes
    ----------
    spans : pyarrow.Table
        The session's spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, shape
        (25 * n_requests, 15). They carry no trace of the ground truth.
    labels : polars.DataFrame
        One row per request in start order: ``trace_id`` (str), ``degradation`` (str, null when
        the request is not affected).
    injections : polars.DataFrame
        One row per injected delay: ``trace_id``, ``degradation``, ``service``, ``operation``,
        ``call`` (index in :data:`HOMEPAGE_CALLS`), ``delay_ns`` (int64), ``noise`` (str: ``""``
        for a plain 50 ms delay, ``"deviation"`` for the first noise's 60 ms, ``"async"`` for the
        second noise's 100 ms).
    degradations : tuple of Degradation
        A1 and A2, as injected.
    n_requests : int
        Number of homepage requests (traces).
    """

    spans: pa.Table
    labels: pl.DataFrame
    injections: pl.DataFrame
    degradations: tuple[Degradation, ...]
    n_requests: int

    @property
    def noised(self) -> bool:
        """Whether any degradation carries a noise of Section 4.3."""
        return any(d.noised for d in self.degradations)

    def label_map(self) -> dict[str, str | None]:
        """``{trace_id: "A1" | "A2" | None}``."""
        return dict(zip(self.labels["trace_id"].to_list(), self.labels["degradation"].to_list()))

    def labels_for(self, trace_ids) -> np.ndarray:
        """Ground-truth labels aligned with ``trace_ids`` (object array, ``None`` = not affected).

        :func:`tracesleuth.analyses.metrics.labels_for` with this session's :meth:`label_map`.

        Raises
        ------
        ParameterError
            When a trace id is not one of the session's.
        """
        from ..analyses.metrics import labels_for     # on first use: the demo's processes import this module only

        return labels_for(list(trace_ids), self.label_map(), missing="raise")


def simulate_eshopper(*, n_requests: int = 1000, noised: bool = False, random_state=None,
                      p_affected: float = 0.1, degradations: Sequence[Degradation] | None = None
                      ) -> EShopperSession:
    """Simulate one load-test session of E-Shopper homepage requests (Section 4.3 of [1]_).

    Parameters
    ----------
    n_requests : int, default=1000
        Homepage requests (traces) in the session, one every 50 ms. The paper's 5-minute sessions
        hold about 6000; it evaluates on "sets of about 1000 traces".
    noised : bool, default=False
        Add the two noises of Section 4.3 (see the module notes). With explicit ``degradations``,
        the noise choices they leave at ``None`` are drawn.
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None, default=None
        Source of every random choice; the same value gives the same session.
    p_affected : float, default=0.1
        Probability that a request carries A1, and (exclusively) that it carries A2. In [0, 0.5].
    degradations : sequence of Degradation, optional
        Impose the degradations instead of drawing two of different types as the paper does.
        Names must be distinct; there may be one or more.

    Returns
    -------
    EShopperSession
        The spans, and separately the labels and every injected delay.

    Raises
    ------
    ParameterError
        For ``n_requests`` < 1, ``p_affected`` outside [0, 0.5] (or above ``1 / len(degradations)``),
        a bad ``random_state`` or duplicate degradation names.

    References
    ----------
    .. [1] V. Cortellessa and L. Traini, "Detecting Latency Degradation Patterns in Service-based
       Systems", ICPE 2020. https://doi.org/10.1145/3358960.3379126

    Examples
    --------
    >>> session = simulate_eshopper(n_requests=200, random_state=7)
    >>> session.spans.num_rows
    5000
    >>> sorted(session.labels["degradation"].drop_nulls().unique().to_list())
    ['A1', 'A2']
    """
    if isinstance(n_requests, bool) or not isinstance(n_requests, (int, np.integer)) or n_requests < 1:
        raise ParameterError(f"The 'n_requests' parameter of simulate_eshopper must be an int in the "
                             f"range [1, inf). Got {n_requests!r} instead.")
    n = int(n_requests)
    s_define, s_mark, s_noise, s_time, s_ids = _streams(_seed_sequence(random_state, "simulate_eshopper"))

    degs = _define_degradations(s_define, noised) if degradations is None else \
        _complete_degradations(degradations, s_define, noised)
    if not isinstance(p_affected, (int, float)) or not 0 <= p_affected <= min(0.5, 1 / len(degs)):
        raise ParameterError(f"The 'p_affected' parameter of simulate_eshopper must be a float in "
                             f"[0, {min(0.5, 1 / len(degs)):g}] with {len(degs)} degradations. "
                             f"Got {p_affected!r} instead.")

    marking = _mark(s_mark, s_noise, n, p_affected, len(degs))
    mark = marking.degradation

    # Base times: one draw per call and request, one per network hop, in call order.
    n_calls = len(HOMEPAGE_CALLS)
    own = np.stack([BASE_EXCLUSIVE_MS[c.rpc].draw_ns(s_time, n) for c in HOMEPAGE_CALLS])
    base_own = own.copy()
    hop_out = NETWORK_HOP_MS.draw_ns(s_time, n * n_calls).reshape(n_calls, n) + _NETWORK_FLOOR_NS
    hop_back = NETWORK_HOP_MS.draw_ns(s_time, n * n_calls).reshape(n_calls, n) + _NETWORK_FLOOR_NS

    trace_ids = _hex_ids(s_ids, n, 2)
    inj_rows: list[tuple] = []
    for i in np.flatnonzero(mark >= 0):
        d = degs[mark[i]]
        for x in d.delays_ns(deviate=bool(marking.deviate[i]), async_hit=bool(marking.async_hit[i])):
            own[x.call, i] += x.delay_ns
            inj_rows.append((trace_ids[i], d.name, x.rpc, x.call, x.delay_ns, x.noise))

    starts = SESSION_START_NS + np.arange(n, dtype=np.int64) * REQUEST_INTERVAL_NS
    spans = _build_spans(trace_ids, starts, own, base_own, hop_out, hop_back, s_ids)

    labels = pl.DataFrame({"trace_id": trace_ids,
                           "degradation": [degs[k].name if k >= 0 else None for k in mark]},
                          schema={"trace_id": pl.String, "degradation": pl.String})
    svc_op = [row[2].split(":", 1) for row in inj_rows]
    injections = pl.DataFrame(
        {"trace_id": [r[0] for r in inj_rows], "degradation": [r[1] for r in inj_rows],
         "service": [so[0] for so in svc_op], "operation": [so[1] for so in svc_op],
         "call": [r[3] for r in inj_rows], "delay_ns": [r[4] for r in inj_rows],
         "noise": [r[5] for r in inj_rows]},
        schema={"trace_id": pl.String, "degradation": pl.String, "service": pl.String,
                "operation": pl.String, "call": pl.Int64, "delay_ns": pl.Int64, "noise": pl.String},
    ).sort("trace_id", "call", maintain_order=True)
    return EShopperSession(spans=spans, labels=labels, injections=injections, degradations=tuple(degs),
                           n_requests=n)


@dataclass(frozen=True)
class Marking:
    """Which requests of a session carry which degradation, and their noise coins.

    Attributes
    ----------
    degradation : ndarray of int64, shape (n_requests,)
        Index of the degradation each request is marked with (0 for A1, 1 for A2...), -1 for none.
    deviate : ndarray of bool, shape (n_requests,)
        First-noise coin of each request (used only for a noised degradation's requests).
    async_hit : ndarray of bool, shape (n_requests,)
        Second-noise coin of each request (likewise).
    """

    degradation: np.ndarray
    deviate: np.ndarray
    async_hit: np.ndarray

    @property
    def n_requests(self) -> int:
        """Number of requests."""
        return len(self.degradation)


def draw_degradations(*, noised: bool = False, random_state=None) -> tuple[Degradation, ...]:
    """Draw the degradations A1 and A2 of a session as Section 4.3 of [1]_ does.

    Two different types out of {1, 2, 3}, the RPCs of each drawn among :data:`SYNC_RPCS`; with
    ``noised``, a deviating RPC and an asynchronous RPC for each. The same ``random_state`` gives
    the degradations :func:`simulate_eshopper` injects with that ``random_state``, so a live run
    (:mod:`tracesleuth.demo`) and a simulated session of one seed share them.

    Parameters
    ----------
    noised : bool, default=False
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None, default=None

    Returns
    -------
    tuple of Degradation

    References
    ----------
    .. [1] Cortellessa and Traini, ICPE 2020, Section 4 (the degradations of the E-Shopper
       sessions); cited in full by :func:`simulate_eshopper`.

    Examples
    --------
    >>> sorted(d.type for d in draw_degradations(random_state=7)) != [2, 2]
    True
    """
    s_define = _streams(_seed_sequence(random_state, "draw_degradations"))[0]
    return tuple(_define_degradations(s_define, bool(noised)))


def draw_marking(n_requests: int, *, n_degradations: int = 2, p_affected: float = 0.1,
                 random_state=None) -> Marking:
    """Mark requests as :func:`simulate_eshopper` does with the same ``random_state``.

    Each request carries degradation 0 with probability ``p_affected``, else degradation 1 with
    that probability, and so on; each also gets two fair noise coins.

    Parameters
    ----------
    n_requests : int
    n_degradations : int, default=2
    p_affected : float, default=0.1
        In [0, 1 / n_degradations].
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None, default=None

    Returns
    -------
    Marking

    Raises
    ------
    ParameterError
        For ``n_requests`` < 1, ``n_degradations`` < 1 or ``p_affected`` out of range.

    Examples
    --------
    >>> m = draw_marking(1000, random_state=0)
    >>> sorted(set(m.degradation.tolist()))
    [-1, 0, 1]
    """
    for name, value in (("n_requests", n_requests), ("n_degradations", n_degradations)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ParameterError(f"The {name!r} parameter of draw_marking must be an int in the range [1, inf). "
                                 f"Got {value!r} instead.")
    if not isinstance(p_affected, (int, float)) or not 0 <= p_affected <= 1 / n_degradations:
        raise ParameterError(f"The 'p_affected' parameter of draw_marking must be a float in "
                             f"[0, {1 / n_degradations:g}]. Got {p_affected!r} instead.")
    _, s_mark, s_noise, _, _ = _streams(_seed_sequence(random_state, "draw_marking"))
    return _mark(s_mark, s_noise, int(n_requests), p_affected, int(n_degradations))


def _streams(seq: np.random.SeedSequence) -> tuple[np.random.Generator, ...]:
    """Five independent streams (definitions, marking, noise, times, ids), derived as
    ``SeedSequence.spawn`` would but without changing ``seq`` (a SeedSequence passed twice gives
    the same session twice)."""
    return tuple(np.random.default_rng(np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, i),
                                                              pool_size=seq.pool_size))
                 for i in range(5))


def _mark(s_mark: np.random.Generator, s_noise: np.random.Generator, n: int, p_affected: float,
          n_degradations: int) -> Marking:
    """Marking: degradation 0 with p, else 1 with p, ... (mutually exclusive); two noise coins."""
    u = s_mark.random(n)
    mark = np.full(n, -1)
    for k in range(n_degradations):
        mark[(u >= k * p_affected) & (u < (k + 1) * p_affected)] = k
    deviate = s_noise.random(n) < NOISE_SHARE
    async_hit = s_noise.random(n) < NOISE_SHARE
    return Marking(mark, deviate, async_hit)


def _seed_sequence(random_state, where: str) -> np.random.SeedSequence:
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    if random_state is None or (isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool)
                                and random_state >= 0):
        return np.random.SeedSequence(None if random_state is None else int(random_state))
    raise ParameterError(f"The 'random_state' parameter of {where} must be a non-negative int, a numpy "
                         f"Generator, a SeedSequence or None. Got {random_state!r} instead.")


def _define_degradations(rng: np.random.Generator, noised: bool) -> list[Degradation]:
    """Two degradations of different types out of {1, 2, 3}, RPCs drawn among the synchronous ones."""
    types = rng.permutation([1, 2, 3])[:2]
    degs = []
    for k, t in enumerate(types):
        picked = set(rng.choice(len(SYNC_RPCS), size=int(t), replace=False).tolist())
        rpcs = tuple(r for i, r in enumerate(SYNC_RPCS) if i in picked)
        deviating = rpcs[int(rng.integers(len(rpcs)))]
        async_rpc = ASYNC_RPCS[int(rng.integers(len(ASYNC_RPCS)))]
        degs.append(Degradation(f"A{k + 1}", rpcs, deviating if noised else None,
                                async_rpc if noised else None))
    return degs


def _complete_degradations(degradations, rng: np.random.Generator, noised: bool) -> list[Degradation]:
    degs = list(degradations)
    names = [d.name for d in degs]
    if not degs or not all(isinstance(d, Degradation) for d in degs) or len(set(names)) != len(names):
        raise ParameterError(f"The 'degradations' parameter of simulate_eshopper must be a non-empty "
                             f"sequence of Degradation with distinct names. Got {degradations!r} instead.")
    out = []
    for d in degs:
        deviating = d.rpcs[int(rng.integers(len(d.rpcs)))]
        async_rpc = ASYNC_RPCS[int(rng.integers(len(ASYNC_RPCS)))]
        if noised:
            d = replace(d, deviating_rpc=d.deviating_rpc or deviating, async_rpc=d.async_rpc or async_rpc)
        out.append(d)
    return out


def _hex_ids(rng: np.random.Generator, n: int, words: int) -> list[str]:
    """``n`` random non-zero ids of ``16 * words`` lower-case hex characters."""
    x = rng.integers(1, 2**64, size=(n, words), dtype=np.uint64)
    return ["".join(f"{int(v):016x}" for v in row) for row in x]


def _build_spans(trace_ids: list[str], starts: np.ndarray, own: np.ndarray, base_own: np.ndarray,
                 hop_out: np.ndarray, hop_back: np.ndarray, rng: np.random.Generator) -> pa.Table:
    """Lay the calls out in time, request by request (vectorised over requests), and emit spans."""
    n_calls, n = own.shape
    server_start = np.zeros((n_calls, n), np.int64)
    server_end = np.zeros((n_calls, n), np.int64)
    client_start = np.zeros((n_calls, n), np.int64)
    client_end = np.zeros((n_calls, n), np.int64)

    def lay(i: int, start: np.ndarray) -> np.ndarray:
        server_start[i] = start
        sync = [j for j in CHILDREN[i] if not HOMEPAGE_CALLS[j].asynchronous]
        asyn = [j for j in CHILDREN[i] if HOMEPAGE_CALLS[j].asynchronous]
        base = base_own[i]
        pre = base * 3 // 10 if sync else np.zeros(n, np.int64)
        gap = base * 2 // 100
        cursor = start + pre
        for m, j in enumerate(asyn):        # fired, not waited for
            client_start[j] = cursor + m * _ASYNC_DISPATCH_NS
            client_end[j] = lay(j, client_start[j] + hop_out[j]) + hop_back[j]
        for m, j in enumerate(sync):
            if m:
                cursor = cursor + gap
            client_start[j] = cursor
            client_end[j] = lay(j, cursor + hop_out[j]) + hop_back[j]
            cursor = client_end[j]
        post = own[i] - pre - (len(sync) - 1) * gap if sync else own[i]
        server_end[i] = cursor + post
        return server_end[i]

    lay(0, starts)

    # Ids: one server span per call, one client span per call but the root; request-major order.
    n_spans = SPANS_PER_REQUEST
    span_ids = np.array(_unique_span_ids(rng, n, n_spans), dtype=object).reshape(n, n_spans)
    server_col = [0] + [2 * i for i in range(1, n_calls)]     # column of call i's server span
    client_col = [None] + [2 * i - 1 for i in range(1, n_calls)]
    pods = {s: [f"{s}-{_alnum(rng, 10)}-{_alnum(rng, 5)}" for _ in range(_PODS_PER_SERVICE)] for s in SERVICES}
    pod_pick = rng.integers(_PODS_PER_SERVICE, size=(n_calls, n))

    order = []  # (column in the request's span block, data) to interleave per request
    for i, call in enumerate(HOMEPAGE_CALLS):
        inst = np.array(pods[call.service], dtype=object)[pod_pick[i]]
        if i:
            caller = HOMEPAGE_CALLS[call.parent]
            caller_inst = np.array(pods[caller.service], dtype=object)[pod_pick[call.parent]]
            order.append((client_col[i], dict(
                span=span_ids[:, client_col[i]], parent=span_ids[:, server_col[call.parent]],
                service=caller.service, operation=call.operation, instance=caller_inst, kind="client",
                start=client_start[i], end=client_end[i], follows=call.asynchronous,
                a1=(ATTR_URL_FULL, f"http://{call.service}:{_PORT}/{call.operation}"),
                a2=(ATTR_SERVER_ADDRESS, call.service))))
        order.append((server_col[i], dict(
            span=span_ids[:, server_col[i]], parent=span_ids[:, client_col[i]] if i else None,
            service=call.service, operation=call.operation, instance=inst, kind="server",
            start=server_start[i], end=server_end[i], follows=False,
            a1=(ATTR_HTTP_ROUTE, "/" if i == 0 else f"/{call.operation}"),
            a2=(ATTR_HTTP_RESPONSE_STATUS_CODE, 200))))
    order.sort(key=lambda t: t[0])

    def per_span(key, dtype=object):
        """An (n, n_spans) array of one field, flattened request-major."""
        block = np.empty((n, n_spans), dtype=dtype)
        for col, d in order:
            block[:, col] = d[key]
        return block.ravel()

    parent = per_span("parent")
    m = n * n_spans
    # Attributes: three per span (method, then the two kind-specific ones).
    keys = np.empty((n_spans, 3), dtype=object)
    strs = np.empty((n_spans, 3), dtype=object)
    ints = np.empty((n_spans, 3), dtype=object)
    for col, d in order:
        keys[col] = [ATTR_HTTP_REQUEST_METHOD, d["a1"][0], d["a2"][0]]
        strs[col, :2] = ["GET", d["a1"][1]]
        if isinstance(d["a2"][1], int):
            ints[col, 2] = d["a2"][1]
        else:
            strs[col, 2] = d["a2"][1]
    reps = lambda a: np.tile(a.ravel(), n)  # noqa: E731
    struct = pa.StructArray.from_arrays(
        [pa.array(reps(keys), pa.string()), pa.array(reps(strs), pa.string()),
         pa.array(reps(ints), pa.int64()), pa.nulls(3 * m, pa.float64()), pa.nulls(3 * m, pa.bool_())],
        fields=list(S.ATTRIBUTE_TYPE))
    attributes = pa.ListArray.from_arrays(pa.array(np.arange(0, 3 * m + 1, 3, dtype=np.int32)), struct,
                                          type=pa.list_(S.ATTRIBUTE_TYPE))

    arrays = [
        pa.array(np.repeat(np.array(trace_ids, dtype=object), n_spans), pa.string()),
        pa.array(per_span("span"), pa.string()),
        pa.array(parent, pa.string()),
        pa.array(per_span("service"), pa.string()),
        pa.array(per_span("operation"), pa.string()),
        pa.array(per_span("instance"), pa.string()),
        pa.array(per_span("kind"), pa.string()),
        pa.array(per_span("start", np.int64), pa.int64()),
        pa.array(per_span("end", np.int64), pa.int64()),
        pa.array(np.full(m, "unset", dtype=object), pa.string()),
        pa.array(per_span("follows", bool), pa.bool_()),
        attributes,
    ]
    return S.with_later_columns(pa.Table.from_arrays(arrays, schema=S.PRE_EVENTS_SPAN_SCHEMA))


def _unique_span_ids(rng: np.random.Generator, n: int, per_trace: int) -> list[str]:
    """Random non-zero 64-bit span ids, unique within each trace."""
    x = rng.integers(1, 2**64, size=(n, per_trace), dtype=np.uint64)
    while True:
        s = np.sort(x, axis=1)
        dup_rows = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if not len(dup_rows):
            break
        x[dup_rows] = rng.integers(1, 2**64, size=(len(dup_rows), per_trace), dtype=np.uint64)
    return [f"{int(v):016x}" for v in x.ravel()]


def _alnum(rng: np.random.Generator, k: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"      # Kubernetes' pod-name alphabet
    return "".join(alphabet[i] for i in rng.integers(len(alphabet), size=k))
