"""Simulated bookshop sessions: a harder test of latency degradation patterns than the paper's.

:mod:`.eshopper` re-creates the load tests of Cortellessa and Traini (ICPE 2020, Section 4): one
endpoint, fixed fan-out, short-tailed execution times, so the degraded requests form latency
modes well apart from the normal ones. Recorded systems are less kind. This simulator, written
apart from the analysis and with other names, laws and costs, keeps the paper's protocol
(degradations of type 1-3 delaying that many synchronous operations, the paper's two noises, the
ground truth kept apart from the spans) and makes it harder:

* **long-tailed normal latencies** that overlap the degraded bands: a database query with a
  lognormal sigma of 0.7, a variable number of sequential price look-ups, and a slow normal mode
  (a review service that misses its cache in 8% of the requests, +110 ms); the type-1 band of a
  session usually lies in the normal tail, so a rule that starts the degraded interval after the
  first density gap misses it, and the paper's interval ``[L_min, L_max]`` holds more normal
  requests than degraded ones;
* **varied base costs and fan-out**: every session scales each operation's median cost by its
  own factor (0.6-1.6), the stock check fans out to 1-4 warehouses in parallel and the price
  look-up to 1-3 sequential calls, the personalised shelf is only called for signed-in users;
* **asynchronous work**: a recommender call (``FOLLOWS_FROM``) and an analytics message
  (producer/consumer) run beside the request; the second noise delays one of them;
* **several endpoints**: product pages (60%), searches (25%) and basket updates (15%) share
  services and operations; only product pages are degraded, the other endpoints are background;
* **per-session delays**: the delay of one operation is drawn per session between 30 and 60 ms
  (the paper: always 50 ms), so that the distance between bands and modes varies. The lower end
  is what keeps a degradation identifiable at all: a delay within an operation's own normal
  spread (the first version drew from 25 ms with a query sigma of 0.9 and a 60 ms cache miss on a
  degradable operation) makes degraded and normal calls the same values, which no pattern on
  that operation can tell apart;
* **request attributes**: ``customer.tier`` and ``http.request.method`` (categories), an
  ephemeral ``client.port`` and a ``session.id`` UUID (identifiers, never categories).

The product page (``storefront:GET /product/{id}``)
---------------------------------------------------
====================  ================================  ============  ===================================
service               operation                         called        notes
====================  ================================  ============  ===================================
storefront            GET /product/{id}                 root          the request
identity              ValidateToken                     sync          first, always
catalog               GetBook                           sync          calls ``SELECT book`` (database)
catalog               SELECT book                       sync          client span only; long tail
pricing               Quote                             sync, 1-3x    one per edition shown
stock                 Availability                      parallel 1-4  one per warehouse, in parallel
reviews               TopReviews                        sync          8% cache misses (+110 ms)
shelf                 Personalised                      sync, 65%     signed-in users only
recommender           Similar                           async         ``FOLLOWS_FROM``, not waited for
analytics             record view                       async         producer/consumer message
====================  ================================  ============  ===================================

Degradations target the synchronous operations called once per request (``identity``,
``catalog`` and its query, ``reviews``) or the first call of ``pricing:Quote``; the two
asynchronous operations are the second noise's targets.

References
----------
.. [1] V. Cortellessa and L. Traini, "Detecting Latency Degradation Patterns in Service-based
   Systems", ICPE 2020, Sections 4.2 and 4.3. https://doi.org/10.1145/3358960.3379126
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from .. import schema as S
from ..errors import ParameterError
from ..units import NS_PER_MS, format_duration_ns
from .eshopper import (ExecutionTime, _alnum, _degradation_line, _hex_ids, _seed_sequence, _streams,
                       _unique_span_ids)

__all__ = ["BOOKSHOP_ENDPOINT", "ENDPOINT_SHARES", "BookshopDegradation", "BookshopSession", "DEGRADABLE", "simulate_bookshop"]

#: The degraded (and most frequent) endpoint.
BOOKSHOP_ENDPOINT = "storefront:GET /product/{id}"
SEARCH_ENDPOINT = "storefront:GET /search"
BASKET_ENDPOINT = "storefront:POST /basket"
#: Shares of the product page, search and basket endpoints among the requests.
ENDPOINT_SHARES = (0.60, 0.25, 0.15)
#: Operations a degradation may delay (synchronous, on the product page's critical path).
DEGRADABLE = ("identity:ValidateToken", "catalog:GetBook", "catalog:SELECT book", "pricing:Quote",
              "reviews:TopReviews")
#: Operations the second noise may delay (asynchronous: they cannot delay the request).
ASYNC_TARGETS = ("recommender:Similar", "analytics:record view")
DELAY_RANGE_MS = (30.0, 60.0)
DEVIATION_FACTOR = 1.2
ASYNC_NOISE_FACTOR = 2.0
NOISE_SHARE = 0.5
SESSION_START_NS = 1_700_000_000_000_000_000
MEAN_GAP_NS = 40 * NS_PER_MS
_TIERS = (("gold", 0.15), ("silver", 0.35), ("bronze", 0.50))


def _lognormal(median_ms: float, sigma: float) -> ExecutionTime:
    return ExecutionTime(((1.0, "lognormal", median_ms, sigma),))


#: Exclusive time of one call of each operation, before the session's cost factor.
BASE_EXCLUSIVE_MS: dict[str, ExecutionTime] = {
    "storefront:GET /product/{id}": _lognormal(3.0, 0.35),
    "storefront:GET /search": _lognormal(2.0, 0.3),
    "storefront:POST /basket": _lognormal(2.5, 0.3),
    "identity:ValidateToken": _lognormal(1.2, 0.5),
    "catalog:GetBook": _lognormal(2.5, 0.4),
    "catalog:SELECT book": _lognormal(4.0, 0.7),
    "catalog:SELECT books": _lognormal(9.0, 0.8),
    "pricing:Quote": ExecutionTime(((1.0, "gamma", 3.0, 1.0),)),
    "stock:Availability": _lognormal(5.0, 0.6),
    "reviews:TopReviews": ExecutionTime(((0.92, "lognormal", 6.0, 0.45), (0.08, "lognormal", 110.0, 0.2))),
    "shelf:Personalised": _lognormal(7.0, 0.5),
    "recommender:Similar": _lognormal(25.0, 0.6),
    "analytics:record view": _lognormal(3.0, 0.5),
    "search:Query": _lognormal(15.0, 0.7),
    "basket:Update": _lognormal(6.0, 0.5),
    "basket:UPDATE basket": _lognormal(3.0, 0.7),
}
_HOP_MS = ExecutionTime(((1.0, "gamma", 2.0, 0.15),))
_HOP_FLOOR_NS = 150_000


@dataclass(frozen=True)
class _Call:
    """A call template: how the caller calls ``rpc`` (``kind``: rpc, database, async or message)."""

    rpc: str
    how: str = "rpc"             # rpc | database | async | message
    times: tuple[int, int] = (1, 1)
    parallel: bool = False
    p_called: float = 1.0
    children: tuple["_Call", ...] = ()


_PRODUCT = _Call(BOOKSHOP_ENDPOINT, children=(
    _Call("identity:ValidateToken"),
    _Call("recommender:Similar", how="async"),
    _Call("analytics:record view", how="message"),
    _Call("catalog:GetBook", children=(_Call("catalog:SELECT book", how="database"),)),
    _Call("pricing:Quote", times=(1, 3)),
    _Call("stock:Availability", times=(1, 4), parallel=True),
    _Call("reviews:TopReviews"),
    _Call("shelf:Personalised", p_called=0.65),
))
_SEARCH = _Call(SEARCH_ENDPOINT, children=(
    _Call("identity:ValidateToken"),
    _Call("search:Query", children=(_Call("catalog:SELECT books", how="database"),)),
    _Call("pricing:Quote", times=(2, 6)),
    _Call("analytics:record view", how="message"),
))
_BASKET = _Call(BASKET_ENDPOINT, children=(
    _Call("identity:ValidateToken"),
    _Call("basket:Update", children=(_Call("basket:UPDATE basket", how="database"),)),
    _Call("stock:Availability", times=(1, 2), parallel=True),
))
_TREES = (_PRODUCT, _SEARCH, _BASKET)


@dataclass(frozen=True)
class BookshopDegradation:
    """A recurrent degradation of the product page (the paper's Section 4.3, other costs).

    Attributes
    ----------
    name : str
        ``"A1"``, ``"A2"``.
    rpcs : tuple of str
        Operations among :data:`DEGRADABLE` delayed by ``delay_ns`` each (their first call); their
        number is the type.
    delay_ns : int
        Delay per operation, drawn per session in :data:`DELAY_RANGE_MS`.
    deviating_rpc, async_rpc : str or None
        The first noise (``DEVIATION_FACTOR`` x the delay in about half of the requests) and the
        second (``ASYNC_NOISE_FACTOR`` x the delay on an asynchronous operation in about half).
    """

    name: str
    rpcs: tuple[str, ...]
    delay_ns: int
    deviating_rpc: str | None = None
    async_rpc: str | None = None

    @property
    def type(self) -> int:
        """The number of delayed operations."""
        return len(self.rpcs)

    def describe(self) -> str:
        """One line, e.g. ``"A1 (type 1): +42 ms in reviews:TopReviews"``."""
        return _degradation_line(
            self.name, self.rpcs, self.delay_ns,
            self.deviating_rpc and f"{self.deviating_rpc} x{DEVIATION_FACTOR:g} in ~half",
            self.async_rpc
            and f"{self.async_rpc} +{format_duration_ns(int(self.delay_ns * ASYNC_NOISE_FACTOR))} in ~half")


@dataclass(frozen=True)
class BookshopSession:
    """A simulated bookshop session: spans, and apart from them, the ground truth.

    Attributes
    ----------
    spans : pyarrow.Table
        Every endpoint's spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`.
    labels : polars.DataFrame
        One row per product-page request: ``trace_id``, ``degradation`` (null: not affected).
    degradations : tuple of BookshopDegradation
    endpoint : str
        The degraded endpoint, :data:`BOOKSHOP_ENDPOINT`.
    n_requests : int
        Requests of every endpoint.
    cost_factors : dict of str to float
        The session's factor on each operation's median cost.
    """

    spans: pa.Table
    labels: pl.DataFrame
    degradations: tuple[BookshopDegradation, ...]
    endpoint: str
    n_requests: int
    cost_factors: dict = field(default_factory=dict)

    def labels_for(self, trace_ids) -> np.ndarray:
        """Ground-truth labels aligned with ``trace_ids`` (object array, ``None`` = not affected).

        Raises
        ------
        ParameterError
            When a trace id is not one of the session's product-page requests.
        """
        from ..analyses.metrics import labels_for

        return labels_for(list(trace_ids), dict(zip(self.labels["trace_id"].to_list(),
                                                    self.labels["degradation"].to_list())), missing="raise")


def simulate_bookshop(*, n_requests: int = 1600, noised: bool = False, random_state=None,
                      p_affected: float = 0.1) -> BookshopSession:
    """Simulate one bookshop session (see the module notes for what makes it harder).

    Parameters
    ----------
    n_requests : int, default=1600
        Requests of all endpoints; about 60% (960 by default) are product pages, the analysed
        endpoint.
    noised : bool, default=False
        The paper's two noises (Section 4.3), with this simulator's factors.
    random_state : int, numpy Generator, SeedSequence or None
        The same value gives the same session.
    p_affected : float, default=0.1
        Probability that a product-page request carries A1, and (exclusively) A2. In [0, 0.5].

    Returns
    -------
    BookshopSession

    Raises
    ------
    ParameterError
        For ``n_requests`` < 1 or ``p_affected`` outside [0, 0.5].

    Examples
    --------
    >>> s = simulate_bookshop(n_requests=200, random_state=3)
    >>> s.endpoint, sorted(d.name for d in s.degradations)
    ('storefront:GET /product/{id}', ['A1', 'A2'])
    """
    if isinstance(n_requests, bool) or not isinstance(n_requests, (int, np.integer)) or n_requests < 1:
        raise ParameterError(f"The 'n_requests' parameter of simulate_bookshop must be an int in the range "
                             f"[1, inf). Got {n_requests!r} instead.")
    if not isinstance(p_affected, (int, float)) or not 0 <= p_affected <= 0.5:
        raise ParameterError(f"The 'p_affected' parameter of simulate_bookshop must be a float in [0, 0.5]. "
                             f"Got {p_affected!r} instead.")
    s_define, s_mark, s_noise, s_time, s_ids = _streams(_seed_sequence(random_state, "simulate_bookshop"))
    factors = {rpc: float(s_define.uniform(0.6, 1.6)) for rpc in BASE_EXCLUSIVE_MS}
    degs = _define(s_define, bool(noised))
    n = int(n_requests)
    endpoint = s_mark.choice(3, size=n, p=ENDPOINT_SHARES)
    u = s_mark.random(n)
    mark = np.where(endpoint == 0, np.where(u < p_affected, 0, np.where(u < 2 * p_affected, 1, -1)), -1)
    deviate = s_noise.random(n) < NOISE_SHARE
    async_hit = s_noise.random(n) < NOISE_SHARE
    tier_names = [t for t, _ in _TIERS]
    tier = s_mark.choice(len(_TIERS), size=n, p=[p for _, p in _TIERS])
    trace_ids = _hex_ids(s_ids, n, 2)
    pods = {svc: [f"{svc}-{_alnum(s_ids, 9)}-{_alnum(s_ids, 5)}" for _ in range(int(s_ids.integers(2, 4)))]
            for svc in sorted({k.split(":")[0] for k in BASE_EXCLUSIVE_MS})}
    builder = _SpanBuilder(s_time, s_ids, factors, pods)
    starts = SESSION_START_NS + np.cumsum(s_time.exponential(MEAN_GAP_NS, n)).astype(np.int64)
    for i in range(n):
        extra: dict[str, int] = {}
        if mark[i] >= 0:
            d = degs[mark[i]]
            for rpc in d.rpcs:
                dev = d.deviating_rpc == rpc and deviate[i]
                extra[rpc] = int(d.delay_ns * (DEVIATION_FACTOR if dev else 1.0))
            if d.async_rpc and async_hit[i]:
                extra[d.async_rpc] = int(d.delay_ns * ASYNC_NOISE_FACTOR)
        attrs = [("http.request.method", "POST" if endpoint[i] == 2 else "GET", None),
                 ("customer.tier", tier_names[tier[i]], None),
                 ("client.port", None, int(s_ids.integers(32768, 61000))),
                 ("session.id", _uuid(s_ids), None)]
        builder.request(trace_ids[i], int(starts[i]), _TREES[endpoint[i]], extra, attrs)
    labels = pl.DataFrame({"trace_id": [t for t, e in zip(trace_ids, endpoint) if e == 0],
                           "degradation": [degs[m].name if m >= 0 else None for m, e in zip(mark, endpoint) if e == 0]},
                          schema={"trace_id": pl.String, "degradation": pl.String})
    return BookshopSession(spans=builder.table(), labels=labels, degradations=tuple(degs), endpoint=BOOKSHOP_ENDPOINT,
                           n_requests=n, cost_factors=factors)


def _define(rng: np.random.Generator, noised: bool) -> list[BookshopDegradation]:
    """Two degradations of different types out of {1, 2, 3}, one delay per session."""
    delay = int(rng.uniform(*DELAY_RANGE_MS) * NS_PER_MS)
    types = rng.permutation([1, 2, 3])[:2]
    out = []
    for k, t in enumerate(types):
        picked = sorted(rng.choice(len(DEGRADABLE), size=int(t), replace=False).tolist())
        rpcs = tuple(DEGRADABLE[i] for i in picked)
        deviating = rpcs[int(rng.integers(len(rpcs)))]
        async_rpc = ASYNC_TARGETS[int(rng.integers(len(ASYNC_TARGETS)))]
        out.append(BookshopDegradation(f"A{k + 1}", rpcs, delay, deviating if noised else None,
                                       async_rpc if noised else None))
    return out


def _uuid(rng: np.random.Generator) -> str:
    h = f"{int(rng.integers(2**63)):016x}{int(rng.integers(2**63)):016x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


class _SpanBuilder:
    """Lays out one request's calls in time and collects their spans (row lists)."""

    def __init__(self, rng, ids, factors, pods):
        self.rng, self.ids, self.factors, self.pods = rng, ids, factors, pods
        self.rows: dict[str, list] = {name: [] for name in S.PRE_EVENTS_SPAN_SCHEMA.names}
        self._drawn: dict[str, list] = {}

    def _draw(self, key: str, law: ExecutionTime) -> int:
        """The next draw of ``law`` (drawn 1,024 at a time: one numpy call per block)."""
        block = self._drawn.get(key)
        if not block:
            block = self._drawn[key] = law.draw_ns(self.rng, 1024).tolist()[::-1]
        return block.pop()

    def _own(self, rpc: str) -> int:
        return int(self._draw(rpc, BASE_EXCLUSIVE_MS[rpc]) * self.factors[rpc])

    def _hop(self) -> int:
        return self._draw("", _HOP_MS) + _HOP_FLOOR_NS

    def _span(self, trace, span, parent, rpc, kind, start, end, follows=False, attrs=(), service=None):
        """One span row; a client or producer span is the caller's (``service``), named after the call."""
        own_service, operation = rpc.split(":", 1)
        service = service or own_service
        r = self.rows
        r[S.TRACE_ID].append(trace)
        r[S.SPAN_ID].append(span)
        r[S.PARENT_SPAN_ID].append(parent)
        r[S.SERVICE].append(service)
        r[S.OPERATION].append(operation)
        pods = self.pods[service]
        r[S.INSTANCE].append(pods[int(self.rng.random() * len(pods))])
        r[S.KIND].append(kind)
        r[S.START_NS].append(int(start))
        r[S.END_NS].append(int(end))
        r[S.STATUS].append("unset")
        r[S.FOLLOWS_FROM].append(follows)
        r[S.ATTRIBUTES].append([{"key": k, "str": s, "int": i, "float": None, "bool": None} for k, s, i in attrs])

    def request(self, trace: str, start: int, root: _Call, extra: dict, attrs: list) -> None:
        self._ids = iter(_unique_span_ids(self.ids, 1, 64))
        self._first_call: set[str] = set()
        self._extra = extra
        self._trace = trace
        self._serve(root, start, None, "server", attrs)

    def _delay(self, rpc: str) -> int:
        if rpc in self._first_call:
            return 0
        self._first_call.add(rpc)
        return self._extra.get(rpc, 0)

    def _serve(self, call: _Call, start: int, parent, kind: str, attrs=()) -> int:
        """A span of ``call.rpc`` starting at ``start`` with its children; returns its end."""
        span = next(self._ids)  # drawn before the children's: ids in start order
        own = self._own(call.rpc) + self._delay(call.rpc)
        plan = []
        for child in call.children:
            if self.rng.random() >= child.p_called:
                continue
            k = int(self.rng.integers(child.times[0], child.times[1] + 1))
            plan.append((child, k))
        sync = [(c, k) for c, k in plan if c.how in ("rpc", "database")]
        pre = own // 4 if sync else own
        cursor = start + pre
        caller = call.rpc.split(":", 1)[0]
        for child, k in plan:
            if child.how in ("async", "message"):
                self._async(child, cursor, span, caller)
        gap = own // 20 if len(sync) > 1 else 0
        for m, (child, k) in enumerate(sync):
            cursor += gap if m else 0
            if child.parallel:
                cursor = max(self._client(child, cursor, span, caller) for _ in range(k))
            else:
                for _ in range(k):
                    cursor = self._client(child, cursor, span, caller)
        post = own - pre - gap * max(len(sync) - 1, 0) if sync else 0
        end = cursor + max(post, 0)
        self._span(self._trace, span, parent, call.rpc, kind, start, end, attrs=attrs)
        return end

    def _client(self, call: _Call, start: int, parent: str, caller: str) -> int:
        """A synchronous call: the caller's client span around the callee's server span (a
        database query: the client span alone, its time the query's)."""
        if call.how == "database":
            end = start + self._own(call.rpc) + self._delay(call.rpc) + self._hop()
            self._span(self._trace, next(self._ids), parent, call.rpc, "client", start, end)
            return end
        client = next(self._ids)
        server_end = self._serve(call, start + self._hop(), client, "server")
        end = server_end + self._hop()
        self._span(self._trace, client, parent, call.rpc, "client", start, end, service=caller)
        return end

    def _async(self, call: _Call, start: int, parent: str, caller: str) -> None:
        """Fire and forget: a FOLLOWS_FROM client span, or a producer span and its consumer."""
        first = next(self._ids)
        if call.how == "async":
            server_end = self._serve(call, start + self._hop(), first, "server")
            self._span(self._trace, first, parent, call.rpc, "client", start, server_end + self._hop(), follows=True,
                       service=caller)
        else:
            sent = start + self._hop() // 3
            self._span(self._trace, first, parent, call.rpc, "producer", start, sent, service=caller)
            self._serve(call, sent + self._hop(), first, "consumer")

    def table(self) -> pa.Table:
        return S.with_later_columns(pa.Table.from_pydict(self.rows, schema=S.PRE_EVENTS_SPAN_SCHEMA))
