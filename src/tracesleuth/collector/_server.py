"""Running the receiver: the listening socket, uvicorn, start-up and shutdown."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import signal
import socket
import threading
from typing import Callable

import uvicorn

from ..errors import ParameterError
from ._errors import CollectorError, PortInUseError, _authority
from ._settings import check_int

log = logging.getLogger("tracesleuth.collector")

#: Seconds uvicorn waits for requests in flight at shutdown before closing their connections.
GRACEFUL_SHUTDOWN_SECONDS = 10


def bind(host: str, port: int, *, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port).

    Raises
    ------
    PortInUseError
        When the port is taken.
    CollectorError
        When the address cannot be used otherwise (unknown host, not an address of this machine,
        port reserved for privileged processes).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise CollectorError(f"cannot listen on {_authority(host, port)}: unknown host ({e.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise PortInUseError(host, port) from None
        raise CollectorError(f"cannot listen on {_authority(host, port)}: {e.strerror or e}") from None
    return sock


class GracefulServer(uvicorn.Server):
    """uvicorn's server, returning (instead of re-raising the signal) after a graceful shutdown on
    SIGINT/SIGTERM, so that a clean stop exits with code 0. Also used by the demo services."""

    @contextlib.contextmanager
    def capture_signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


class _Server(GracefulServer):
    """:class:`GracefulServer` telling when it accepts requests."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]):
        super().__init__(config)
        self._on_started = on_started

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_started()


def run(app, sock: socket.socket, *, url: str, on_ready: Callable[[str], None] | None, log_level: str,
        max_connections: int) -> None:
    """Serve ``app`` on the listening ``sock`` until SIGINT/SIGTERM, then shut down gracefully."""
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on", server_header=False,
                            limit_concurrency=max_connections, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS)
    server = _Server(config, on_started=lambda: on_ready(url) if on_ready else None)
    server.run(sockets=[sock])


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def check_address(host: str, port: int, token: str | None, log_level: str) -> None:
    """Check ``host``/``port``/``log_level`` and warn about a non-loopback address without a token."""
    if not isinstance(host, str) or not host:
        raise ParameterError(f"The 'host' parameter of serve must be a non-empty string. Got {host!r} instead.")
    check_int("port", port, 0, 65535, owner="serve")
    if log_level not in LOG_LEVELS:
        raise ParameterError(f"The 'log_level' parameter of serve must be one of {', '.join(map(repr, LOG_LEVELS))}. "
                             f"Got {log_level!r} instead.")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and token is None:
        log.warning("listening on %s, which is not a loopback address, without a token: anyone who can reach it "
                    "can write spans into the store (set a token)", host)


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{_authority(host, port)}"
