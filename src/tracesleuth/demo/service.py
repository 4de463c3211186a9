"""One service of the demo shop, run as its own process: ``python -m tracesleuth.demo.service``.

A service, one of the live shop's :data:`._protocol.LIVE_SERVICES`, serves the RPCs of
:data:`~tracesleuth.evaluation.eshopper.HOMEPAGE_CALLS` that :data:`._protocol.LIVE_SERVICE`
gives it (the simulator's, but ``getrecommended``, served by ``recommendation-service``), over
HTTP (Starlette on uvicorn), each at ``GET /<operation>?call=<i>&user=<u>&rank=<k>``, where ``i``
is the call's index in the call tree. Internally an RPC keeps its simulator key (execution-time
law, first call, the degradations' delays); its telemetry and answers carry the live names.
Handling call ``i`` follows the simulator's layout (:mod:`tracesleuth.evaluation.eshopper`,
"Execution times"):

1. draw the call's exclusive time from :data:`~tracesleuth.evaluation.eshopper.BASE_EXCLUSIVE_MS`;
2. spend 30% of it (when the call has synchronous children), then fire the asynchronous
   children without waiting for them, then make the synchronous ones one after the other over
   HTTP (2% of the time between two);
3. spend the rest, running the RPC's SQLite query (:mod:`._catalog`) and sleeping for what is
   left, plus the delay the request's degradation injects into this call (and, in the incident
   mode, the slower handler's delay once the fault is on: :class:`FaultSwitch`).

The injected delay comes from the request's W3C baggage (:data:`._protocol.BAGGAGE_DEGRADATION`
and the two noise coins), which OpenTelemetry's propagators carry from the load generator
through every hop, and from :meth:`Degradation.delays_ns
<tracesleuth.evaluation.eshopper.Degradation.delays_ns>`, the definition the simulator uses: a
degradation delays the *first* call of each of its RPCs.

Telemetry is the OpenTelemetry SDK's: server spans from the ASGI instrumentation (named after
the RPC, like the Spring Cloud Sleuth spans of the paper's E-Shopper; the ``http send`` and
``http receive`` sub-spans are left out), client spans from the httpx instrumentation (named
after the called RPC), a span per query from the sqlite3 instrumentation, and, for the two
asynchronous calls, a ``PRODUCER`` span around the HTTP request: OpenTelemetry's kind for "the
initiator of an asynchronous request", which the trace table never subtracts from the caller's
exclusive time. Spans leave through a BatchSpanProcessor and the OTLP/HTTP protobuf exporter.
No baggage entry is ever copied into a span attribute.

Each handler also writes log records through Python's :mod:`logging` (logger
``tracesleuth.demo.service``) and OpenTelemetry's logging handler, which gives every record the
trace context of the span it was written in and its code location (``code.function.name``,
``code.line.number``); they leave through a BatchLogRecordProcessor and the OTLP/HTTP exporter
to the collector's ``/v1/logs`` (:func:`._protocol.make_logger_provider`). INFO on entering a
handler and on what it fetched, ERROR when a call it made failed (it then answers without that
part: a degraded answer) or when it raised, WARN when an asynchronous call failed. So which log
statements ran is visible per span, as in the recorded TrainTicket logs.

A failure is recorded the OpenTelemetry way: an exception a handler raises becomes an
``exception`` event on its server span with status error and the exception's message
(:meth:`ShopService.failed`); a caller's client span gets status error with the callee's answer
(:meth:`ShopService.client_response`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import csv
import itertools
import logging
import socket
import sqlite3
import sys
import threading
import time
import warnings
import weakref
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np
import uvicorn
from opentelemetry import baggage, propagate, trace
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.sqlite3 import SQLite3Instrumentor
from opentelemetry.instrumentation.utils import suppress_http_instrumentation
from opentelemetry.sdk._logs import LoggingHandler
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from ..collector._server import GracefulServer
from ..errors import ParameterError
from ..units import NS_PER_S
from ..evaluation.eshopper import (
    ATTR_HTTP_REQUEST_METHOD,
    ATTR_HTTP_RESPONSE_STATUS_CODE,
    ATTR_SERVER_ADDRESS,
    ATTR_URL_FULL,
    BASE_EXCLUSIVE_MS,
    CHILDREN,
    FIRST_CALL,
    HOMEPAGE_CALLS,
)
from ._account import ProcessAccount
from ._catalog import QUERIES, query_parameters
from ._protocol import (
    BAGGAGE_ASYNC_NOISE,
    BAGGAGE_DEGRADATION,
    BAGGAGE_DEVIATE,
    CALL_PARAM,
    CODE_FAULTS,
    FAULT_HITS_COLUMNS,
    FAULT_KINDS,
    FAULT_PATH,
    HEALTH_PATH,
    LIVE_SERVICE,
    LIVE_SERVICES,
    RANK_PARAM,
    USER_PARAM,
    DemoConfig,
    call_service,
    live_rpc,
    make_logger_provider,
    make_tracer_provider,
    watch_parent,
)

#: The shop's log statements (the logger's name is the module's, as applications name theirs).
log = logging.getLogger(__name__)

ATTR_SERVER_PORT = "server.port"
ATTR_HTTP_ROUTE = "http.route"
#: Share of a call's own time spent before its first synchronous call, and between two.
PRE_SHARE, GAP_SHARE = 0.30, 0.02
#: Seconds the service waits at shutdown for asynchronous calls still in flight.
DRAIN_SECONDS = 5.0
#: Level from which the shop's log records are written and exported.
LOG_LEVEL = logging.INFO
#: Last item of the seed of the random stream that decides which requests a code fault hits: a
#: stream of its own, so that the execution-time draws stay those of a run without the fault.
FAULT_STREAM = 1
#: Period of the ``cpu-burn`` fault's duty cycle, s: it burns ``share`` of each period. Shorter
#: than a request (the homepage's modelled 52 ms), so that every request meets the burning.
BURN_PERIOD_S = 0.020
#: ``skipped`` of an early return that skipped the database query (:data:`._protocol.FAULT_HITS_COLUMNS`).
QUERY_SKIPPED = "query"


class RowError(ValueError):
    """The shop's error for a database row a handler cannot use: what the ``exception`` fault raises,
    as a handler meeting a bad row would (an application's own error, not one of tracesleuth's)."""


def _rank(j: int) -> int:
    """Rank of call ``j`` among its parent's calls of the same RPC."""
    siblings = [k for k in CHILDREN[HOMEPAGE_CALLS[j].parent] if HOMEPAGE_CALLS[k].rpc == HOMEPAGE_CALLS[j].rpc]
    return siblings.index(j)


_RANKS = {j: _rank(j) for j in range(1, len(HOMEPAGE_CALLS))}


async def _name_client_span(span, request) -> None:
    """httpx request hook: name the client span after the called RPC (the URL path)."""
    url = request.url
    path = url.path if isinstance(url, httpx.URL) else url[3].decode().split("?", 1)[0]
    span.update_name(path.strip("/") or "/")


#: The logging handler attached to :data:`log` for each logger provider.
_LOG_HANDLERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _log_handler(logger_provider) -> LoggingHandler:
    """OpenTelemetry's logging handler on :data:`log` writing to ``logger_provider``: the one
    attached already for it (services sharing a provider in one process write each record once),
    else a new one."""
    handler = _LOG_HANDLERS.get(logger_provider)
    if handler is not None and handler in log.handlers:
        return handler
    with warnings.catch_warnings():
        # The SDK's handler is deprecated for the one of opentelemetry-instrumentation-logging
        # (another dependency); within the pinned release train (1.45.1) it works unchanged.
        warnings.simplefilter("ignore", DeprecationWarning)
        handler = LoggingHandler(level=LOG_LEVEL, logger_provider=logger_provider)
    log.addHandler(handler)
    _LOG_HANDLERS[logger_provider] = handler
    if log.getEffectiveLevel() > LOG_LEVEL:
        log.setLevel(LOG_LEVEL)
    return handler


class _ErrorResponse(JSONResponse):
    """HTTP 500 with a JSON body that gives the server span its status with a description.

    The ASGI instrumentation sets the server span's status from the response's HTTP status as
    the response starts (error, without a description: a later status replaces an earlier one)
    and ends the span once the body is sent; the description goes in between.
    """

    def __init__(self, content, *, span, span_status: Status):
        super().__init__(content, status_code=500)
        self.span, self.span_status = span, span_status

    async def __call__(self, scope, receive, send):
        async def send_and_describe(message):
            await send(message)
            if message["type"] == "http.response.start":
                self.span.set_status(self.span_status)

        await super().__call__(scope, receive, send_and_describe)


class ShopService:
    """The state and handlers of one service instance.

    Parameters
    ----------
    config : DemoConfig
    service : str
        One of :data:`._protocol.LIVE_SERVICES`.
    index : int
        The instance's index among the service's instances.
    tracer_provider : opentelemetry.sdk.trace.TracerProvider, optional
        Default: OTLP/HTTP export to ``config.collector_url``
        (:func:`._protocol.make_tracer_provider`).
    logger_provider : opentelemetry.sdk._logs.LoggerProvider, optional
        Where the log records go. Default: OTLP/HTTP export to ``config.collector_url``
        (:func:`._protocol.make_logger_provider`).

    Notes
    -----
    The instance attaches OpenTelemetry's logging handler to the module's logger (:data:`log`);
    :meth:`close` detaches it (the service process does so as it stops).
    """

    def __init__(self, config: DemoConfig, service: str, index: int = 0, *, tracer_provider=None,
                 logger_provider=None):
        if service not in LIVE_SERVICES:
            raise ParameterError(f"The 'service' parameter of ShopService must be one of "
                                 f"{', '.join(LIVE_SERVICES)}. Got {service!r} instead.")
        self.config, self.service = config, service
        self.instance = f"{service}-{index}"
        # {operation: simulator RPC key} of the RPCs this live service serves.
        self.operations = {c.operation: c.rpc for c in HOMEPAGE_CALLS if LIVE_SERVICE[c.rpc] == service}
        self.rng = np.random.default_rng([config.seed, LIVE_SERVICES.index(service), index])
        self.degradations = {d.name: d for d in config.degradations}
        self.targets = {s: itertools.cycle(urls) for s, urls in config.instances.items()}
        self.callees = sorted({u for j, c in enumerate(HOMEPAGE_CALLS) if c.parent is not None
                               and call_service(c.parent) == service for u in config.instances[call_service(j)]})
        self.provider = tracer_provider or make_tracer_provider(service, self.instance, config)
        self.tracer = self.provider.get_tracer(__name__)
        self.tasks: set[asyncio.Task] = set()
        self.clients: dict[str, httpx.AsyncClient] = {}
        self.unknown_degradations = 0
        #: The incident mode's fault (:class:`FaultSwitch`): kind, delay and share; None, 0 and
        #: 1.0 when off.
        self.fault_kind: str | None = None
        self.fault_delay_ns = 0
        self.fault_share = 1.0
        self.fault_rng = np.random.default_rng([config.seed, LIVE_SERVICES.index(service), index, FAULT_STREAM])
        #: Rows of :data:`._protocol.FAULT_HITS_COLUMNS`: the requests a code fault hit.
        self.fault_hits: list[tuple] = []
        self.burner = CpuBurner()
        self.service_at = {url: s for s, urls in config.instances.items() for url in urls}
        self.logger_provider = logger_provider or make_logger_provider(service, self.instance, config)
        self.log_handler = _log_handler(self.logger_provider)
        self.db = None
        if service in config.databases:
            connection = sqlite3.connect(f"file:{config.databases[service]}?mode=ro", uri=True,
                                         check_same_thread=False)
            self.db = SQLite3Instrumentor.instrument_connection(connection, tracer_provider=self.provider)

    # -- the ASGI application -------------------------------------------------------------------

    def app(self):
        """The Starlette app wrapped in OpenTelemetry's ASGI middleware, inside the fault switch."""
        routes = [Route(f"/{op}", self.handle, methods=["GET"]) for op in self.operations]
        routes.append(Route(HEALTH_PATH, self.health, methods=["GET"]))
        app = Starlette(routes=routes, lifespan=self.lifespan, exception_handlers={RowError: self.failed})
        return FaultSwitch(OpenTelemetryMiddleware(app, excluded_urls=HEALTH_PATH.strip("/"),
                                                   default_span_details=self.span_details,
                                                   tracer_provider=self.provider, exclude_spans=["receive", "send"]),
                           self)

    def span_details(self, scope) -> tuple[str, dict]:
        """Server span name and attributes: the RPC's name and its route."""
        path = scope.get("path", "")
        op = path.strip("/")
        if op in self.operations:
            return op, {ATTR_HTTP_ROUTE: path}
        return scope.get("method", "GET"), {}

    def client(self, url: str, transport=None) -> httpx.AsyncClient:
        """An instrumented client of the callee instance at ``url`` (``transport``: httpx's default)."""
        client = httpx.AsyncClient(base_url=url, timeout=self.config.request_timeout_s, transport=transport,
                                   limits=httpx.Limits(max_connections=128, max_keepalive_connections=32))
        HTTPXClientInstrumentor.instrument_client(client, tracer_provider=self.provider,
                                                  request_hook=_name_client_span,
                                                  response_hook=self.client_response)
        return client

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        # One connection pool per callee instance: httpcore checks every pooled connection of a
        # client on each request, so small per-host pools keep a call's cost independent of the
        # number of services called.
        for url in self.callees:
            self.clients[url] = self.client(url)
        try:
            yield
        finally:
            if self.tasks:
                await asyncio.wait(set(self.tasks), timeout=DRAIN_SECONDS)
            for client in self.clients.values():
                await client.aclose()
            await asyncio.to_thread(self.close)
            if self.unknown_degradations:
                print(f"{self.instance}: {self.unknown_degradations} requests named an unknown degradation",
                      file=sys.stderr)

    def close(self) -> None:
        """Stop the fault, write its ground truth, flush and shut the telemetry down, detach the
        logging handler, close the database, and write what became of the telemetry
        (:meth:`write_account`)."""
        self.burner.stop()
        self.write_fault_hits()
        log.removeHandler(self.log_handler)
        self.provider.shutdown()
        self.logger_provider.shutdown()
        if self.db is not None:
            self.db.close()
            self.db = None
        self.write_account()

    def account(self) -> ProcessAccount | None:
        """What became of the spans and log records this instance recorded; None when its providers
        do not count (ones given by a test: :func:`._protocol.make_tracer_provider` counts)."""
        spans, logs = getattr(self.provider, "counter", None), getattr(self.logger_provider, "counter", None)
        if spans is None:
            return None
        return ProcessAccount(self.service, self.instance, spans.account(), None if logs is None else logs.account())

    def write_account(self) -> Path | None:
        """Write :meth:`account` into ``config.telemetry_dir`` (:meth:`._account.ProcessAccount.write`),
        and say on stderr when telemetry was lost; None when there is nowhere or nothing to write."""
        account = self.account()
        if account is None:
            return None
        if account.spans.lost or (account.logs is not None and account.logs.lost):
            print(f"telemetry not accepted by the collector at {self.config.collector_url}: {account.describe()}",
                  file=sys.stderr)
        return account.write(self.config.telemetry_dir) if self.config.telemetry_dir else None

    async def health(self, request):
        return PlainTextResponse("ok")

    async def handle(self, request):
        op = request.url.path.strip("/")
        rpc = self.operations[op]
        q = request.query_params
        try:
            call = int(q.get(CALL_PARAM, FIRST_CALL[rpc]))
            user, rank = int(q.get(USER_PARAM, 0)), int(q.get(RANK_PARAM, 0))
        except ValueError:
            return JSONResponse({"error": "call, user and rank must be integers"}, status_code=400)
        if not 0 <= call < len(HOMEPAGE_CALLS) or HOMEPAGE_CALLS[call].rpc != rpc:
            return JSONResponse({"error": f"call {call} is not a call of {live_rpc(rpc)}"}, status_code=400)
        log.info("%s: request of user %d (call %d)", op, user, call)

        hit = self.fault_hit()
        base_ns = int(BASE_EXCLUSIVE_MS[rpc].draw_ns(self.rng, 1)[0])
        injected_ns = self.injected_ns(call) + (self.fault_delay_ns if self.fault_kind == "slow-handler" else 0)
        sync = [j for j in CHILDREN[call] if not HOMEPAGE_CALLS[j].asynchronous]
        pre = int(base_ns * PRE_SHARE) if sync else 0
        gap = int(base_ns * GAP_SHARE)
        post = base_ns + injected_ns - pre - max(len(sync) - 1, 0) * gap

        await self.spend(pre)
        for j in CHILDREN[call]:
            if HOMEPAGE_CALLS[j].asynchronous:
                self.fire(j, user)
        parts: dict[str, list] = {}
        for m, j in enumerate(sync):
            if m:
                await self.spend(gap)
            if hit == "early-return" and m == len(sync) - 1:
                # The early return: without the last call and what follows it; the handler's
                # time stays that of the model (only the structure and the logs show the fault).
                self.record_hit(hit, call, op, skipped=HOMEPAGE_CALLS[j].operation)
                await self.spend(post)
                return self.answer(rpc, None, parts)
            try:
                parts.setdefault(HOMEPAGE_CALLS[j].operation, []).append(await self.call(j, user))
            except httpx.HTTPStatusError as e:
                # The callee answered with an error: answer without its part (a degraded answer).
                log.error("call to %s %s failed: HTTP %d", call_service(j), HOMEPAGE_CALLS[j].operation,
                          e.response.status_code)
                parts.setdefault(HOMEPAGE_CALLS[j].operation, []).append(None)
            except httpx.HTTPError as e:
                log.error("call to %s %s failed: %r", call_service(j), HOMEPAGE_CALLS[j].operation, e)
                return JSONResponse({"error": f"{live_rpc(rpc)}: a call failed: {e!r}"}, status_code=502)
        if hit == "early-return":
            self.record_hit(hit, call, op, skipped=QUERY_SKIPPED)
            await self.spend(post)
            return self.answer(rpc, None, parts)
        rows = await self.spend(post, work=lambda: self.query(rpc, user, rank))
        if rows is None:
            log.info("%s: answer of user %d assembled from %d parts", op, user, sum(map(len, parts.values())))
        else:
            log.info("%s: fetched %d rows for user %d", op, len(rows), user)
        if hit == "exception":
            self.record_hit(hit, call, op)
            raise RowError(f"{live_rpc(rpc)}: row 0 of user {user} has no usable value: {rows[0] if rows else None!r}")
        return self.answer(rpc, rows, parts)

    def answer(self, rpc: str, rows, parts: dict) -> JSONResponse:
        """The handler's answer: the rows fetched and the callees' parts (``None`` for a part whose
        call failed, listed in ``degraded``)."""
        degraded = sorted(op for op, answers in parts.items() if any(a is None for a in answers))
        return JSONResponse({"rpc": live_rpc(rpc), "instance": self.instance, "rows": rows, "calls": parts,
                             "degraded": degraded})

    async def failed(self, request, exc: Exception) -> JSONResponse:
        """Starlette's handler of :class:`RowError`: the exception on the server span (an
        ``exception`` event, status error with its message), an ERROR log record with it, and
        HTTP 500."""
        span = trace.get_current_span()
        span.record_exception(exc)
        message = f"{type(exc).__name__}: {exc}"
        log.error("%s failed: %s", request.url.path.strip("/"), exc, exc_info=exc)
        return _ErrorResponse({"error": message}, span=span, span_status=Status(StatusCode.ERROR, message))

    async def client_response(self, span, request, response) -> None:
        """httpx response hook: a client span whose callee answered with an error gets status error
        with a message naming the callee and its status (the instrumentation sets the code alone)."""
        if response.status_code >= 400 and span.is_recording():
            url = request.url
            base = f"{url.scheme}://{url.host}:{url.port}" if isinstance(url, httpx.URL) else None
            callee = self.service_at.get(base, "the callee")
            span.set_status(Status(StatusCode.ERROR, f"HTTP {response.status_code} from {callee}"))

    # -- the incident mode's faults ------------------------------------------------------------

    def fault_hit(self) -> str | None:
        """The code fault (:data:`._protocol.CODE_FAULTS`) that hits this request, or None: each
        request is hit with probability ``fault_share``, from a seeded stream of its own."""
        if self.fault_kind in CODE_FAULTS and self.fault_rng.random() < self.fault_share:
            return self.fault_kind
        return None

    def record_hit(self, kind: str, call: int, operation: str, skipped: str = "") -> None:
        """Note the request a code fault hit (the ground truth, never in a span or a log record)."""
        ctx = trace.get_current_span().get_span_context()
        self.fault_hits.append((format(ctx.trace_id, "032x"), format(ctx.span_id, "016x"), self.service, self.instance,
                                operation, call, kind, skipped, time.time_ns()))

    def write_fault_hits(self) -> Path | None:
        """Write :attr:`fault_hits` to ``<config.fault_hits_dir>/<instance>.csv``; None when there is
        nowhere or nothing to write."""
        if not (self.config.fault_hits_dir and self.fault_hits):
            return None
        path = Path(self.config.fault_hits_dir) / f"{self.instance}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(FAULT_HITS_COLUMNS)
            writer.writerows(self.fault_hits)
        return path

    # -- the work -------------------------------------------------------------------------------

    def injected_ns(self, call: int) -> int:
        """The delay the request's degradation (from its baggage) injects into ``call``, in ns."""
        name = baggage.get_baggage(BAGGAGE_DEGRADATION)
        if name is None:
            return 0
        degradation = self.degradations.get(str(name))
        if degradation is None:
            self.unknown_degradations += 1
            return 0
        delays = degradation.delays_ns(deviate=baggage.get_baggage(BAGGAGE_DEVIATE) == "1",
                                       async_hit=baggage.get_baggage(BAGGAGE_ASYNC_NOISE) == "1")
        return sum(x.delay_ns for x in delays if x.call == call)

    def query(self, rpc: str, user: int, rank: int) -> list | None:
        """Run the RPC's SQLite query (a span of the sqlite3 instrumentation); ``rpc`` is the
        simulator's key, :data:`._catalog.QUERIES` is keyed by live RPC."""
        key = live_rpc(rpc)
        if self.db is None or key not in QUERIES:
            return None
        cursor = self.db.cursor()
        try:
            cursor.execute(QUERIES[key], query_parameters(key, user=user, rank=rank))
            return cursor.fetchall()
        finally:
            cursor.close()

    @staticmethod
    async def spend(duration_ns: int, work=None):
        """Spend ``duration_ns``: run ``work`` (real work), then sleep for what is left."""
        t0 = time.perf_counter_ns()
        out = work() if work is not None else None
        left = duration_ns - (time.perf_counter_ns() - t0)
        if left > 0:
            await asyncio.sleep(left / NS_PER_S)
        return out

    def _target(self, j: int) -> tuple[httpx.AsyncClient, str]:
        """The client of the next instance (round robin) of call ``j``'s live service, and the path."""
        return self.clients[next(self.targets[call_service(j)])], f"/{HOMEPAGE_CALLS[j].operation}"

    async def call(self, j: int, user: int):
        """Synchronous call ``j`` (an httpx client span, context and baggage injected)."""
        client, path = self._target(j)
        response = await client.get(path, params={CALL_PARAM: j, USER_PARAM: user, RANK_PARAM: _RANKS[j]})
        response.raise_for_status()
        return response.json()

    def fire(self, j: int, user: int) -> None:
        """Asynchronous call ``j``: started, never waited for by the handler."""
        task = asyncio.create_task(self._fire(j, user))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _fire(self, j: int, user: int) -> None:
        client, path = self._target(j)
        url = f"{client.base_url}".rstrip("/") + path
        parts = urlsplit(url)
        attributes = {ATTR_HTTP_REQUEST_METHOD: "GET", ATTR_URL_FULL: url, ATTR_SERVER_ADDRESS: parts.hostname,
                      ATTR_SERVER_PORT: parts.port}
        with self.tracer.start_as_current_span(HOMEPAGE_CALLS[j].operation, kind=SpanKind.PRODUCER,
                                               attributes=attributes) as span:
            headers: dict[str, str] = {}
            propagate.inject(headers)
            try:
                with suppress_http_instrumentation():
                    response = await client.get(path, headers=headers, params={
                        CALL_PARAM: j, USER_PARAM: user, RANK_PARAM: _RANKS[j]})
                span.set_attribute(ATTR_HTTP_RESPONSE_STATUS_CODE, response.status_code)
                if response.status_code >= 500:
                    span.set_status(Status(StatusCode.ERROR, f"HTTP {response.status_code} from {call_service(j)}"))
                    log.warning("asynchronous call to %s %s failed: HTTP %d", call_service(j),
                                HOMEPAGE_CALLS[j].operation, response.status_code)
            except httpx.HTTPError as e:
                span.record_exception(e)
                span.set_status(Status(StatusCode.ERROR, type(e).__name__))
                log.warning("asynchronous call to %s %s failed: %r", call_service(j), HOMEPAGE_CALLS[j].operation, e)


class FaultSwitch:
    """ASGI middleware outside the telemetry: the incident mode's fault of one service instance.

    ``GET /_fault?kind=K&delay_ns=D&share=S`` (:data:`._protocol.FAULT_PATH`, never traced)
    switches the fault on (``K`` one of :data:`._protocol.FAULT_KINDS`) or off (``kind=none``):

    * ``slow-handler``: the service's handler spends ``D`` more ns per request, inside its server
      span (:meth:`ShopService.handle`), so the operation's self time grows;
    * ``network-delay``: each request waits ``D`` ns here, before the telemetry sees it, as a
      delay on the service's network interface would hold it: the caller's client span grows,
      the server span does not, so the gap on the edges into the service grows;
    * ``exception``: for a share ``S`` of the requests, the handler raises :class:`RowError` once
      it has fetched its rows (:meth:`ShopService.failed` answers HTTP 500);
    * ``early-return``: for a share ``S`` of the requests, the handler returns before its last
      synchronous call, or, when it makes none, before its database query, without an error and
      without the log statement of that path;
    * ``cpu-burn``: a thread of the instance burns ``S`` of a core (:class:`CpuBurner`).

    Parameters
    ----------
    app : ASGI application
        The traced application.
    service : ShopService
        Holds the fault's state (``fault_kind``, ``fault_delay_ns``, ``fault_share``).
    """

    def __init__(self, app, service: ShopService):
        self.app, self.service = app, service

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            if scope["path"] == FAULT_PATH:
                await self._switch(scope, send)
                return
            if self.service.fault_kind == "network-delay" and scope["path"] != HEALTH_PATH:
                await asyncio.sleep(self.service.fault_delay_ns / NS_PER_S)
        await self.app(scope, receive, send)

    async def _switch(self, scope, send) -> None:
        query = parse_qs(scope.get("query_string", b"").decode())
        kind = query.get("kind", ["none"])[0]
        try:
            delay_ns = int(query.get("delay_ns", ["0"])[0])
            share = float(query.get("share", ["1"])[0])
        except ValueError:
            delay_ns, share = -1, -1.0
        if kind not in (*FAULT_KINDS, "none") or delay_ns < 0 or not 0 < share <= 1:
            status = 400
            body = (f"kind must be one of {', '.join(FAULT_KINDS)} or none, delay_ns an integer >= 0, "
                    f"share a number in (0, 1]").encode()
        else:
            svc = self.service
            svc.burner.stop()
            svc.fault_kind, svc.fault_delay_ns, svc.fault_share = \
                (None, 0, 1.0) if kind == "none" else (kind, delay_ns, share)
            if kind == "cpu-burn":
                svc.burner.start(share)
            status, body = 200, b"ok"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class CpuBurner:
    """The ``cpu-burn`` fault: a daemon thread that spins for ``share`` of every
    :data:`BURN_PERIOD_S` and sleeps for the rest, until stopped.

    A busy thread inside the service's process, as a runaway background job would be: it takes
    ``share`` of a core, and, holding Python's GIL while it spins, makes the event loop serving
    the requests wait for it (up to the interpreter's switch interval, 5 ms, at each hand-over):
    the contention of a CPU-starved instance, without a second process loading the machine more.
    """

    def __init__(self):
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, share: float) -> None:
        """Burn ``share`` (in (0, 1]) of a core from now on."""
        self.stop()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._burn, args=(share, self._stop), name="cpu-burn", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    @staticmethod
    def _burn(share: float, stop: threading.Event) -> None:
        busy_s, idle_s = share * BURN_PERIOD_S, (1.0 - share) * BURN_PERIOD_S
        while not stop.is_set():
            end = time.perf_counter() + busy_s
            while time.perf_counter() < end:
                pass
            if idle_s > 0:
                stop.wait(idle_s)


def main(argv: list[str] | None = None) -> int:
    """Serve one service instance on an inherited listening socket until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m tracesleuth.demo.service", description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the run's config.json")
    parser.add_argument("--service", required=True, choices=LIVE_SERVICES)
    parser.add_argument("--index", type=int, default=0, help="instance index")
    parser.add_argument("--fd", type=int, required=True, help="inherited listening socket")
    parser.add_argument("--parent-pid", type=int, default=0, help="stop when this process is gone")
    args = parser.parse_args(argv)
    watch_parent(args.parent_pid)
    service = ShopService(DemoConfig.read(args.config), args.service, args.index)
    sock = socket.socket(fileno=args.fd)
    # What was loaded so far lives as long as the process: keep it out of the cyclic garbage
    # collector's way (fewer, shorter collections while requests are served).
    gc.collect()
    gc.freeze()
    config = uvicorn.Config(service.app(), loop="asyncio", http="httptools", lifespan="on", log_level="warning",
                            access_log=False, server_header=False, timeout_graceful_shutdown=DRAIN_SECONDS,
                            backlog=1024)
    GracefulServer(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
