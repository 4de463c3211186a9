"""The HTTP side: an ASGI application (Starlette) serving OTLP/HTTP span and log uploads and
Zipkin v2 span uploads.

Starlette rather than FastAPI: request bodies here are opaque protobuf or JSON bytes read as a
stream under our own size, time and memory limits, and responses are protobuf or JSON messages
encoded by hand to the OTLP specification, so FastAPI's additions (pydantic models, validation,
OpenAPI) would not be used; Starlette is the layer FastAPI itself runs on, with fewer
dependencies and less work per request.

References
----------
OTLP specification 1.x, "OTLP/HTTP" (https://opentelemetry.io/docs/specs/otlp/#otlphttp): request
(``POST /v1/traces``, ``POST /v1/logs``, ``application/x-protobuf`` or ``application/json``,
optional gzip), response (200 with an ``ExportTraceServiceResponse`` / ``ExportLogsServiceResponse``
in the request's encoding; a ``partial_success`` when only part of the data was accepted, with
``rejected_spans`` / ``rejected_log_records``), failures (4xx/5xx with a ``google.rpc.Status``
body), throttling (429/503 with ``Retry-After``). Zipkin v2 API
(https://zipkin.io/zipkin-api/): ``POST /api/v2/spans`` answers 202.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from contextlib import asynccontextmanager

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from ._decode import JSON, PROTOBUF, DecodedRequest, HttpError, decompress, media_type
from ._engine import Collector

log = logging.getLogger("tracesleuth.collector")

#: ``google.rpc.Code`` sent in a ``Status`` body for each HTTP status (the OTLP spec lets the
#: server omit it; clients must not act on it).
_RPC_CODE = {400: 3, 401: 16, 404: 5, 405: 12, 408: 4, 413: 8, 415: 3, 429: 8, 500: 13, 503: 14}
_ROUTES_HELP = ("this receiver serves POST /v1/traces and POST /v1/logs (OTLP/HTTP, protobuf or JSON), "
                "POST /api/v2/spans (Zipkin v2 JSON), GET /healthz and GET /stats")
_KIND_OF_STATUS = {404: "not_found", 405: "method_not_allowed"}


# -- encodings ---------------------------------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def status_protobuf(code: int, message: str) -> bytes:
    """A serialized ``google.rpc.Status`` (``code`` = field 1, ``message`` = field 2)."""
    text = message.encode()
    return (b"\x08" + _varint(code) if code else b"") + b"\x12" + _varint(len(text)) + text


def export_response(rejected: int, message: str, *, as_json: bool, signal: str = "spans") -> bytes:
    """An ``ExportTraceServiceResponse`` (``signal="spans"``) or ``ExportLogsServiceResponse``
    (``"logs"``): empty on full success, else with ``partial_success`` (``rejected_spans`` /
    ``rejected_log_records``, ``error_message``), in protobuf or OTLP JSON (int64 as a decimal
    string, as the protobuf JSON mapping writes it)."""
    if not (rejected or message):
        return b"{}" if as_json else b""
    field, json_field = ("rejected_spans", "rejectedSpans") if signal == "spans" else \
        ("rejected_log_records", "rejectedLogRecords")
    if as_json:
        return orjson.dumps({"partialSuccess": {json_field: str(rejected), "errorMessage": message}})
    if signal == "spans":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse as Response_
    else:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse as Response_
    resp = Response_()
    setattr(resp.partial_success, field, rejected)
    resp.partial_success.error_message = message
    return resp.SerializeToString()


#: Each OTLP/HTTP route: its signal, its ``/stats`` request key, and what its items are called.
_OTLP_ROUTES = {"/v1/traces": ("spans", "otlp", "spans"), "/v1/logs": ("logs", "otlp_logs", "log records")}


# -- the application ---------------------------------------------------------------------------
def build_app(collector: Collector) -> Starlette:
    """The ASGI app over a :class:`Collector` (started by the app's lifespan when not yet
    started, closed at its end)."""
    stats, settings = collector.stats, collector.settings
    token = settings.token.encode() if settings.token else None

    def authorized(request: Request) -> bool:
        if token is None:
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token)

    def refuse(status: int, kind: str, message: str, *, style: str, headers: dict | None = None) -> Response:
        stats.count("errors", kind)
        stats.count("responses", status)
        if style == "json":
            body, ctype = orjson.dumps({"code": _RPC_CODE.get(status, 2), "message": message}), JSON
        elif style == "protobuf":
            body, ctype = status_protobuf(_RPC_CODE.get(status, 2), message), PROTOBUF
        else:
            body, ctype = message.encode() + b"\n", "text/plain; charset=utf-8"
        return Response(body, status_code=status, media_type=ctype, headers=headers)

    async def read_body(request: Request) -> bytes:
        limit = settings.max_body_bytes
        chunks, n = [], 0
        async with asyncio.timeout(settings.body_timeout_seconds):
            async for chunk in request.stream():
                n += len(chunk)
                if n > limit:
                    raise HttpError(413, "payload_too_large", f"request body exceeds the limit of {limit:,} bytes",
                                    headers={"Connection": "close"})  # do not read the rest
                chunks.append(chunk)
        return b"".join(chunks)

    async def ingest(request: Request, fmt: str, style: str, route: str, noun: str = "spans"
                     ) -> Response | DecodedRequest:
        """Everything an upload does before its answer: authorization, size and admission
        checks, reading, decompressing and decoding the body, and making its spans (log records,
        ``noun``) durable. Returns the refusal, or the decoded request (durable) for the route to
        answer."""
        stats.count("requests", route)
        if not authorized(request):
            return refuse(401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer <token>)",
                          style=style, headers={"WWW-Authenticate": 'Bearer realm="tracesleuth"'})
        length = request.headers.get("content-length")
        try:
            declared = int(length) if length is not None else None
        except ValueError:
            return refuse(400, "bad_request", f"Content-Length {length!r} is not a number", style=style)
        if declared is not None and declared > settings.max_body_bytes:
            return refuse(413, "payload_too_large", f"request body of {declared:,} bytes exceeds the limit of "
                                                    f"{settings.max_body_bytes:,} bytes", style=style,
                          headers={"Connection": "close"})
        reserved = declared if declared is not None else settings.max_body_bytes
        why = collector.admit(reserved)
        if why is not None:
            what = ("the receiver's queue is full" if why == "queue_full" else
                    f"{noun} are arriving faster than they are written to the store")
            stats.count("throttled", why)
            return refuse(429, "too_many_requests", f"{what}; retry after {settings.retry_after_seconds} s",
                          style=style, headers={"Retry-After": str(settings.retry_after_seconds)})
        try:
            try:
                raw = await read_body(request)
            except TimeoutError:
                return refuse(408, "request_timeout", f"request body not received within "
                                                      f"{settings.body_timeout_seconds:g} s", style=style,
                              headers={"Connection": "close"})
            stats.add(bytes_received=len(raw))
            body = decompress(raw, request.headers.get("content-encoding"), settings.max_body_bytes)
            collector.grow(len(body) if body is not raw else 0)
            reserved += len(body) if body is not raw else 0
            del raw
            stats.add(bytes_decoded=len(body))
            client = request.client.host if request.client else "?"
            n = stats.requests[route]
            decoded, record = await collector.decode(fmt, body, f"collect {route} #{n} from {client}")
            del body
            logs = decoded.logs is not None
            if logs:
                stats.add(logs_received=decoded.spans_received, logs_rejected=decoded.spans_rejected)
            else:
                stats.add(spans_received=decoded.spans_received, spans_rejected=decoded.spans_rejected)
            if decoded.reasons:
                stats.rejected(decoded.reasons, logs=logs)
            if record is not None:
                try:
                    await collector.commit(record)
                except TimeoutError:
                    return refuse(503, "wal_timeout", f"the {noun} were not confirmed durable within "
                                                      f"{settings.commit_timeout_seconds:g} s (they may still be "
                                                      f"stored); retry later", style=style,
                                  headers={"Retry-After": str(settings.retry_after_seconds)})
                except (OSError, RuntimeError) as e:
                    return refuse(503, "wal_unavailable", f"the {noun} could not be made durable ({e}); nothing "
                                                          f"was stored, retry later", style=style,
                                  headers={"Retry-After": str(settings.retry_after_seconds)})
            stats.add(**{"logs_acknowledged" if logs else "spans_acknowledged": decoded.accepted})
            return decoded
        except HttpError as e:
            return refuse(e.status, e.kind, e.message, style=style, headers=e.headers)
        finally:
            collector.release(reserved)

    async def otlp(request: Request) -> Response:
        """``POST /v1/traces`` and ``POST /v1/logs``: OTLP/HTTP trace and log export.

        200 with an ``ExportTraceServiceResponse`` (``ExportLogsServiceResponse``) in the
        request's encoding; its ``partial_success`` carries ``rejected_spans``
        (``rejected_log_records``) and an ``error_message`` when some were rejected, or a
        non-empty message with 0 rejected for warnings (OTLP spec, "Partial Success"). Failures:
        400 (body cannot be decoded), 401, 408, 413, 415, 429 and 503 (with ``Retry-After``; both
        retryable per "OTLP/HTTP Throttling"), each with a ``Status`` body. Log records have the
        guarantees of spans: acknowledged once durable in the write-ahead log.
        """
        signal, route, noun = _OTLP_ROUTES[request.url.path]
        ctype = media_type(request.headers.get("content-type"))
        suffix = "" if signal == "spans" else "-logs"
        if ctype == PROTOBUF:
            fmt, style = f"otlp{suffix}-proto", "protobuf"
        elif ctype == JSON:
            fmt, style = f"otlp{suffix}-json", "json"
        else:
            stats.count("requests", route)
            return refuse(415, "unsupported_media_type", f"Content-Type {ctype or '(none)'!r} is not accepted; "
                                                         f"OTLP/HTTP sends {PROTOBUF} or {JSON}", style="protobuf")
        decoded = await ingest(request, fmt, style, route, noun)
        if isinstance(decoded, Response):
            return decoded
        stats.count("responses", 200)
        return Response(export_response(decoded.spans_rejected, decoded.message(), as_json=style == "json",
                                        signal=signal),
                        status_code=200, media_type=PROTOBUF if style == "protobuf" else JSON)

    async def zipkin_spans(request: Request) -> Response:
        """``POST /api/v2/spans``: Zipkin v2 JSON span list; 202 when read (rejected spans are
        counted in ``/stats`` and stored in the store's rejects, Zipkin has no partial success)."""
        ctype = media_type(request.headers.get("content-type"))
        if ctype not in (JSON, ""):
            stats.count("requests", "zipkin")
            return refuse(415, "unsupported_media_type", f"Content-Type {ctype!r} is not accepted; this receiver "
                                                         f"takes Zipkin v2 spans as {JSON}", style="text")
        outcome = await ingest(request, "zipkin-json", "text", "zipkin")
        if isinstance(outcome, Response):
            return outcome
        stats.count("responses", 202)
        return Response(status_code=202)

    async def healthz(request: Request) -> Response:
        """``GET /healthz``: 200 while the receiver takes spans and log records (no token needed)."""
        ok = collector.running
        stats.count("responses", 200 if ok else 503)
        return Response(orjson.dumps({"status": "ok" if ok else "stopping"}), status_code=200 if ok else 503,
                        media_type=JSON)

    async def stats_route(request: Request) -> Response:
        """``GET /stats``: the counters as JSON (the bearer token is needed when one is set)."""
        if not authorized(request):
            return refuse(401, "unauthorized", "missing or wrong bearer token", style="text",
                          headers={"WWW-Authenticate": 'Bearer realm="tracesleuth"'})
        stats.count("responses", 200)
        return Response(orjson.dumps(stats.to_dict(**collector.gauges()), option=orjson.OPT_INDENT_2),
                        media_type=JSON)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        kind = _KIND_OF_STATUS.get(exc.status_code, f"http_{exc.status_code}")
        stats.count("requests", "other")
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}; {_ROUTES_HELP}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}; {_ROUTES_HELP}"
        else:
            message = str(exc.detail)
        return refuse(exc.status_code, kind, message, style="text", headers=exc.headers)

    async def client_gone(request: Request, exc: Exception) -> Response:
        stats.count("errors", "client_disconnected")
        return Response(status_code=400)

    @asynccontextmanager
    async def lifespan(app: Starlette):
        await asyncio.to_thread(collector.start)
        try:
            yield
        finally:
            await asyncio.to_thread(collector.close)

    app = Starlette(
        routes=[
            Route("/v1/traces", otlp, methods=["POST"]),
            Route("/v1/logs", otlp, methods=["POST"]),
            Route("/api/v2/spans", zipkin_spans, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/stats", stats_route, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, ClientDisconnect: client_gone},
        lifespan=lifespan,
    )
    app.state.collector = collector
    return app
