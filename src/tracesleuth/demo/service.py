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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import socket
import sqlite3
import sys
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np
import uvicorn
from opentelemetry import baggage, propagate
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.sqlite3 import SQLite3Instrumentor
from opentelemetry.instrumentation.utils import suppress_http_instrumentation
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
from ._catalog import QUERIES, query_parameters
from ._protocol import (
    BAGGAGE_ASYNC_NOISE,
    BAGGAGE_DEGRADATION,
    BAGGAGE_DEVIATE,
    CALL_PARAM,
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
    make_tracer_provider,
    watch_parent,
)

ATTR_SERVER_PORT = "server.port"
ATTR_HTTP_ROUTE = "http.route"
#: Share of a call's own time spent before its first synchronous call, and between two.
PRE_SHARE, GAP_SHARE = 0.30, 0.02
#: Seconds the service waits at shutdown for asynchronous calls still in flight.
DRAIN_SECONDS = 5.0


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
    """

    def __init__(self, config: DemoConfig, service: str, index: int = 0, *, tracer_provider=None):
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
        #: The incident mode's fault (:class:`FaultSwitch`): kind and delay, None and 0 when off.
        self.fault_kind: str | None = None
        self.fault_delay_ns = 0
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
        app = Starlette(routes=routes, lifespan=self.lifespan)
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

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        # One connection pool per callee instance: httpcore checks every pooled connection of a
        # client on each request, so small per-host pools keep a call's cost independent of the
        # number of services called.
        for url in self.callees:
            client = httpx.AsyncClient(base_url=url, timeout=self.config.request_timeout_s,
                                       limits=httpx.Limits(max_connections=128, max_keepalive_connections=32))
            HTTPXClientInstrumentor.instrument_client(client, tracer_provider=self.provider,
                                                      request_hook=_name_client_span)
            self.clients[url] = client
        try:
            yield
        finally:
            if self.tasks:
                await asyncio.wait(set(self.tasks), timeout=DRAIN_SECONDS)
            for client in self.clients.values():
                await client.aclose()
            await asyncio.to_thread(self.provider.shutdown)
            if self.unknown_degradations:
                print(f"{self.instance}: {self.unknown_degradations} requests named an unknown degradation",
                      file=sys.stderr)

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

        base_ns = int(BASE_EXCLUSIVE_MS[rpc].draw_ns(self.rng, 1)[0])
        injected_ns = self.injected_ns(call) + (self.fault_delay_ns if self.fault_kind == "slow-handler" else 0)
        sync = [j for j in CHILDREN[call] if not HOMEPAGE_CALLS[j].asynchronous]
        pre = int(base_ns * PRE_SHARE) if sync else 0
        gap = int(base_ns * GAP_SHARE)

        await self.spend(pre)
        for j in CHILDREN[call]:
            if HOMEPAGE_CALLS[j].asynchronous:
                self.fire(j, user)
        parts: dict[str, list] = {}
        try:
            for m, j in enumerate(sync):
                if m:
                    await self.spend(gap)
                parts.setdefault(HOMEPAGE_CALLS[j].operation, []).append(await self.call(j, user))
        except httpx.HTTPError as e:
            return JSONResponse({"error": f"{live_rpc(rpc)}: a call failed: {e!r}"}, status_code=502)
        post = base_ns + injected_ns - pre - max(len(sync) - 1, 0) * gap
        rows = await self.spend(post, work=lambda: self.query(rpc, user, rank))
        return JSONResponse({"rpc": live_rpc(rpc), "instance": self.instance, "rows": rows, "calls": parts})

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
                    span.set_status(Status(StatusCode.ERROR))
            except httpx.HTTPError as e:
                span.record_exception(e)
                span.set_status(Status(StatusCode.ERROR, type(e).__name__))


class FaultSwitch:
    """ASGI middleware outside the telemetry: the incident mode's fault of one service instance.

    ``GET /_fault?kind=K&delay_ns=D`` (:data:`._protocol.FAULT_PATH`, never traced) switches
    the fault on (``K`` one of :data:`._protocol.FAULT_KINDS`) or off (``kind=none``):

    * ``slow-handler``: the service's handler spends ``D`` more ns per request, inside its server
      span (:meth:`ShopService.handle`), so the operation's self time grows;
    * ``network-delay``: each request waits ``D`` ns here, before the telemetry sees it, as a
      delay on the service's network interface would hold it: the caller's client span grows,
      the server span does not, so the gap on the edges into the service grows.

    Parameters
    ----------
    app : ASGI application
        The traced application.
    service : ShopService
        Holds the fault's state (``fault_kind``, ``fault_delay_ns``).
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
        except ValueError:
            delay_ns = -1
        if kind not in (*FAULT_KINDS, "none") or delay_ns < 0:
            status = 400
            body = f"kind must be one of {', '.join(FAULT_KINDS)} or none, delay_ns an integer >= 0".encode()
        else:
            self.service.fault_kind, self.service.fault_delay_ns = (None, 0) if kind == "none" else (kind, delay_ns)
            status, body = 200, b"ok"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


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
