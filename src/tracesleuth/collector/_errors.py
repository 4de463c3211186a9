"""Errors of the span receiver. Both are :class:`~tracesleuth.errors.TraceSleuthError` subclasses
(so :class:`ValueError`), as every error tracesleuth raises on bad settings or bad input."""

from __future__ import annotations

from ..errors import TraceSleuthError


class CollectorError(TraceSleuthError):
    """The receiver cannot start on the given store or address (the message names which and why)."""


class PortInUseError(CollectorError):
    """The TCP port the receiver should listen on is already taken.

    Parameters
    ----------
    host : str
        The address asked for.
    port : int
        The port asked for.
    """

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        super().__init__(f"cannot listen on {_authority(host, port)}: port {port} is already in use "
                         f"(another 'tracesleuth collect' or an OpenTelemetry Collector?); "
                         f"choose another port (--port)")


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
