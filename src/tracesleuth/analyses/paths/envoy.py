"""Envoy access logs as black-box message logs (Aguilera et al. 2003 input from a service mesh).

Envoy's default access-log format (envoyproxy.io, "Access logging", default format string)::

    [%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE%
    %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%
    "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%"
    "%UPSTREAM_HOST%"

One line is one request that passed the proxy of a node: a CALL from that node to the
``:authority`` (its host name without the port) at ``START_TIME``, and its RETURN
``DURATION`` ms later. The node is the log file's name without its extensions (one proxy, one
file), or ``node=``. The call id is the line's file and number: ``X-REQUEST-ID`` would be a
request identifier, which the black-box analyses must do without. Times have millisecond
resolution: choose the nesting's buckets or the convolution's quantum accordingly.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from ...errors import TraceFormatError
from .messages import MESSAGE_SCHEMA

__all__ = ["looks_like_envoy", "read_envoy_log"]

_LINE = re.compile(r'^\[(?P<start>[^\]]+)\]\s+"(?P<request>[^"]*)"\s+(?P<code>\S+)\s+(?P<flags>\S+)\s+'
                   r'(?P<received>\S+)\s+(?P<sent>\S+)\s+(?P<duration>\S+)\s+(?P<upstream_time>\S+)\s+'
                   r'"(?P<forwarded>[^"]*)"\s+"(?P<agent>[^"]*)"\s+"(?P<request_id>[^"]*)"\s+'
                   r'"(?P<authority>[^"]*)"\s+"(?P<upstream>[^"]*)"')


def looks_like_envoy(head: str) -> bool:
    """Whether the first line of a file is in Envoy's default access-log format."""
    return bool(_LINE.match(head.lstrip().split("\n", 1)[0]))


def read_envoy_log(path, *, node: str | None = None) -> tuple[pl.DataFrame, int]:
    """The messages of an Envoy access log.

    Parameters
    ----------
    path : str or path
    node : str, optional
        The node whose proxy wrote the log; default the file's name without its extensions.

    Returns
    -------
    (polars.DataFrame, int)
        Messages in :data:`~.messages.MESSAGE_SCHEMA` (a CALL and a RETURN per line), in time
        order, and the number of lines rejected.

    Raises
    ------
    TraceFormatError
        Naming the file and the first bad line, when no line could be read.
    """
    path = Path(path)
    node = node or path.name.split(".", 1)[0]
    rows, rejected, first_bad = [], 0, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            m = _LINE.match(line)
            try:
                if m is None:
                    raise ValueError("not Envoy's default access-log format")
                start = datetime.fromisoformat(m["start"].replace("Z", "+00:00"))
                if start.tzinfo is None:
                    start = start.replace(tzinfo=timezone.utc)
                duration_ms = int(m["duration"])
                authority = m["authority"].rsplit(":", 1)[0] if m["authority"] not in ("", "-") else None
                if authority is None:
                    raise ValueError("no :authority (the service called)")
            except ValueError as e:
                rejected += 1
                first_bad = first_bad or f"line {number}: {e}"
                continue
            t = int(start.timestamp() * 1_000) * 1_000_000
            call_id = f"{path.name}:{number}"
            rows.append((t, node, authority, "call", call_id))
            rows.append((t + duration_ms * 1_000_000, authority, node, "return", call_id))
    if not rows:
        raise TraceFormatError(str(path), f"no Envoy access-log line could be read ({first_bad or 'empty file'})")
    schema = {n: pl.Int64 if n == "timestamp_ns" else pl.String for n in MESSAGE_SCHEMA.names}
    return pl.DataFrame(rows, schema=schema, orient="row").sort("timestamp_ns", maintain_order=True), rejected
