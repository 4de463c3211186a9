"""``tracesleuth collect``: an embedded span and log receiver writing into a span store.

Applications export spans and log records to it as they would to an OpenTelemetry Collector
(OTLP/HTTP, protobuf or JSON, optionally gzip), or spans to a Zipkin server (v2 JSON); they land
in a :class:`~tracesleuth.io.store.SpanStore` (log records in its logs table), where ``tracesleuth
info``/``table`` and every analysis read them. Endpoints:

=====================  ===========================================================================
``POST /v1/traces``     OTLP/HTTP trace export: ``application/x-protobuf`` or ``application/json``
``POST /v1/logs``       OTLP/HTTP log export: ``application/x-protobuf`` or ``application/json``
``POST /api/v2/spans``  Zipkin v2 JSON span list (202 Accepted)
``GET /healthz``        200 ``{"status": "ok"}`` while spans are taken
``GET /stats``          JSON counters: requests, bytes, spans and log records received/acknowledged/
                        rejected/stored, rejections by reason, errors by kind, queue and WAL levels
=====================  ===========================================================================

Durability: a request is answered 2xx only after its spans (log records) are in the write-ahead log under
``STORE/wal/`` and fsynced (:mod:`._wal`; concurrent requests share one fsync). A background
flusher turns the log into Parquet parts every ``flush_interval_seconds`` (:mod:`._flush`), and
a receiver restarted after a crash first converts what the previous one left. So an acknowledged
span is never lost, and is readable from the store's Parquet parts a flush interval after it was
acknowledged.

Backpressure: requests admitted but not yet answered are bounded in number and bytes, and the
log not yet converted is bounded in bytes; beyond either bound a request is refused at once with
429 and ``Retry-After``, before its body is read, which the OpenTelemetry SDK exporters retry.

Reject rules follow the OTLP/HTTP specification
(https://opentelemetry.io/docs/specs/otlp/#otlphttp-response): a body that cannot be decoded is
refused whole (400, nothing stored); spans (log records) of a well-formed body that fail the
readers' checks (ids, timestamps) are rejected one by one and the rest accepted, answered 200 with
``partial_success`` (``rejected_spans`` / ``rejected_log_records``, ``error_message``); what the
limits cut (OpenTelemetry's span and log-record limits: :class:`~tracesleuth.io.SpanLimits`,
:class:`~tracesleuth.io.LogLimits`) is kept, cut, and reported in the message.
"""

from __future__ import annotations

from typing import Callable

from ._errors import CollectorError, PortInUseError
from ._settings import MiB, CollectorSettings

__all__ = ["CollectorError", "PortInUseError", "create_app", "serve"]


def create_app(store_path, *, token: str | None = None, flush_interval_seconds: float = 1.0,
               max_body_bytes: int = 16 * MiB, max_queue_bytes: int = 64 * MiB, max_queue_requests: int = 64,
               max_wal_bytes: int = 1024 * MiB, retry_after_seconds: int = 1, span_limits=None, log_limits=None):
    """The receiver as an ASGI application (Starlette), for any ASGI server or a test client.

    The store is opened, the WAL replayed and the background threads started by the app's
    lifespan start-up, and everything received is converted into parts at its shutdown; so run
    it with lifespan events (uvicorn's default, ``with TestClient(app)``). Parameters are those
    of :func:`serve`.

    Returns
    -------
    starlette.applications.Starlette

    Raises
    ------
    ParameterError
        When a setting is out of range (named, with the range and the value given).

    Examples
    --------
    >>> from starlette.testclient import TestClient
    >>> from tracesleuth.collector import create_app
    >>> with TestClient(create_app("spans.store")) as client:          # doctest: +SKIP
    ...     client.get("/healthz").json()
    {'status': 'ok'}
    """
    from ._app import build_app
    from ._engine import Collector

    settings = CollectorSettings(token=token, flush_interval_seconds=flush_interval_seconds,
                                 max_body_bytes=max_body_bytes, max_queue_bytes=max_queue_bytes,
                                 max_queue_requests=max_queue_requests, max_wal_bytes=max_wal_bytes,
                                 retry_after_seconds=retry_after_seconds,
                                 span_limits=_span_limits(span_limits), log_limits=_log_limits(log_limits))
    return build_app(Collector(store_path, settings))


def serve(store_path, *, host: str = "127.0.0.1", port: int = 4318, token: str | None = None,
          flush_interval_seconds: float = 1.0, max_body_bytes: int = 16 * MiB, max_queue_bytes: int = 64 * MiB,
          max_queue_requests: int = 64, max_wal_bytes: int = 1024 * MiB, retry_after_seconds: int = 1,
          max_connections: int = 1024, log_level: str = "warning", span_limits=None, log_limits=None,
          on_ready: Callable[[str], None] | None = None) -> dict:
    """Receive spans and log records over HTTP into a span store until SIGINT or SIGTERM.

    Parameters
    ----------
    store_path : str or Path
        The span store (created when absent; an existing directory that is not a store is
        refused). Its write-ahead log is ``STORE/wal/``.
    host : str, default="127.0.0.1"
        Address to listen on. Loopback by default; any other address without a ``token`` is
        logged as a warning.
    port : int, default=4318
        TCP port (4318 is the OTLP/HTTP default; 0 takes any free port, see ``on_ready``).
    token : str, optional
        When set, span uploads and ``/stats`` need ``Authorization: Bearer <token>`` (else 401);
        ``/healthz`` never does.
    flush_interval_seconds : float, default=1.0
        How often acknowledged spans are written into Parquet parts, in seconds: the delay after
        which ``tracesleuth info``/``table`` see them (each flush that received spans adds one
        part).
    max_body_bytes : int, default=16 MiB
        Largest request body, in bytes, after decompression (and as received); larger -> 413.
    max_queue_bytes : int, default=64 MiB
        Bytes of request bodies (as declared by ``Content-Length``, then decompressed) admitted
        and not yet answered; a request that would exceed it -> 429 with ``Retry-After``. One
        request is always admitted when none is pending.
    max_queue_requests : int, default=64
        Requests admitted and not yet answered; more -> 429 with ``Retry-After``.
    max_wal_bytes : int, default=1 GiB
        Write-ahead log bytes not yet converted into parts; at or above it -> 429 with
        ``Retry-After`` (the store cannot keep up).
    retry_after_seconds : int, default=1
        ``Retry-After`` of 429 and 503 answers, in seconds.
    max_connections : int, default=1024
        Open connections and requests uvicorn serves at once before answering 503 itself.
    span_limits : tracesleuth.io.SpanLimits, optional
        Bounds on the names and attributes of each span, cut and reported (partial success
        message, ``/stats`` warnings) as the readers do; default: the OpenTelemetry SDK's
        environment variables (``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``...), else its defaults
        (:meth:`tracesleuth.io.SpanLimits.from_environment`).
    log_limits : tracesleuth.io.LogLimits, optional
        Bounds on the bodies and attributes of each log record, cut and reported likewise;
        default: ``OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT``... , else the SDK's defaults
        (:meth:`tracesleuth.io.LogLimits.from_environment`).
    log_level : str, default="warning"
        uvicorn's log level; the receiver's own warnings (replay, flush errors) go to the
        ``tracesleuth.collector`` logger.
    on_ready : callable, optional
        Called with the base URL (``"http://127.0.0.1:4318"``, with the real port when ``port``
        is 0) once requests are accepted.

    Returns
    -------
    dict
        The final ``/stats`` counters, after a graceful shutdown (requests in flight answered,
        every acknowledged span and log record written to Parquet parts).

    Raises
    ------
    PortInUseError
        When ``port`` is already taken (raised before anything is written).
    CollectorError
        When the address cannot be listened on, or another receiver uses the store.
    TraceFormatError
        When ``store_path`` exists and is not a span store.
    ParameterError
        When a setting is out of range.

    See Also
    --------
    create_app : the same receiver as an ASGI application.

    References
    ----------
    OpenTelemetry Protocol specification, "OTLP/HTTP": https://opentelemetry.io/docs/specs/otlp/#otlphttp
    (partial success: "OTLP/HTTP Response"; status codes: "Failures", "OTLP/HTTP Throttling").
    Zipkin v2 API: https://zipkin.io/zipkin-api/ (``POST /spans``).

    Examples
    --------
    >>> from tracesleuth.collector import serve
    >>> serve("spans.store", port=4318, token="s3cret")               # doctest: +SKIP
    """
    from ._app import build_app
    from ._engine import Collector
    from ._server import bind, check_address, run, url_of
    from ._settings import check_int

    settings = CollectorSettings(token=token, flush_interval_seconds=flush_interval_seconds,
                                 max_body_bytes=max_body_bytes, max_queue_bytes=max_queue_bytes,
                                 max_queue_requests=max_queue_requests, max_wal_bytes=max_wal_bytes,
                                 retry_after_seconds=retry_after_seconds,
                                 span_limits=_span_limits(span_limits), log_limits=_log_limits(log_limits))
    check_int("max_connections", max_connections, 1, owner="serve")
    check_address(host, port, token, log_level)
    sock = bind(host, port)
    try:
        collector = Collector(store_path, settings)
        collector.start()
        try:
            run(build_app(collector), sock, url=url_of(sock), on_ready=on_ready, log_level=log_level,
                max_connections=max_connections)
        finally:
            collector.close()
    finally:
        sock.close()
    return collector.stats.to_dict(**collector.gauges())


def _span_limits(limits):
    from ..io import SpanLimits

    return SpanLimits.from_environment() if limits is None else limits


def _log_limits(limits):
    from ..io import LogLimits

    return LogLimits.from_environment() if limits is None else limits
