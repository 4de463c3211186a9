"""Reader of the request trace logs of Mi et al. 2012: start/end events of methods, nested.

Mi, Wang, Zhou, Lyu and Cai, *Localizing root causes of performance anomalies in cloud computing
systems by analyzing request trace logs*, Sci China Inf Sci 2012, Figure 2 and Section 3: each
line holds a timestamp, the request's global identifier ``T_ID``, the method and whether its
invocation starts or ends, and "other redundant information"::

    [2011-08-01 16:31:31.690272] [DEBUG] [15330] [./Example.h:117] T_ID:001 FUNC:MethodA_start
    [2011-08-01 16:31:31.832724] [DEBUG] [15330] [./Example.h:117] T_ID:001 FUNC:MethodB_start
    [2011-08-01 16:31:32.193131] [DEBUG] [15330] [./Example.h:122] T_ID:001 FUNC:MethodB_end
    [2011-08-01 16:31:33.991376] [DEBUG] [15330] [./Example.h:122] T_ID:001 FUNC:MethodA_end

The call sequence of a request is built "according to the nested relationships of start/end
flags": each matched start/end pair becomes a span whose parent is the method still open around
it.

**What a line may hold.** Fields separated by spaces or ``|`` (the paper's figure draws a table),
in any order after the timestamp: the timestamp is the first bracketed field, ``YYYY-MM-DD
HH:MM:SS[.ffffff]`` (or with a ``T``), read as UTC unless it carries an offset (``+08:00``);
``T_ID:<id>`` (required); ``FUNC:<method>_start`` or ``FUNC:<method>_end`` (required); optional
``SERVICE:<name>``, ``HOST:<address>`` or ``INSTANCE:<name>``. The level, process id and source
location of the paper's lines are read only for the instance (below). Lines with neither
``T_ID:`` nor ``FUNC:`` are other log output: counted and reported in one warning, not read.

**Mapping.** trace id: the 32 hex digits of a BLAKE2b digest of ``T_ID`` (any text may be a
request id; the id itself is kept as attribute ``mi.request_id``); span id: 16 hex digits of a
digest of ``T_ID`` and the start event's line number; operation: the method; service: the
``SERVICE:`` field, else the component of a qualified method (``Lock.acquire``,
``Lock::acquire`` -> ``Lock``), else the log file's name without its extensions; instance: the
``HOST:``/``INSTANCE:`` field, else ``pid-<n>`` from a bracketed process id (the third field of
the paper's lines), else none; kind ``server`` for a request's outermost method, ``internal``
for the others.

**Bad events.** A request's events are ordered by timestamp (ties in file order) before they are
matched, so lines out of order in the file are fine. An ``_end`` with no open ``_start`` of the
same method, a ``_start`` that never ends (or is still open when an enclosing method ends), an
unparsable timestamp: each is rejected (line number, field, reason; one span lost), and the
request's other pairs are kept (a method whose parent never ended becomes an orphan, which trace
assembly reports and repairs). Events of one request are matched within one file: a request whose
methods are logged by several processes, one file each, gives one span tree per file under one
trace id.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from pathlib import PurePath
from typing import BinaryIO, Iterator

import pyarrow as pa

from ._builder import SpanBatchBuilder, last_batch

__all__ = ["read_mi_log", "looks_like_mi_log"]

_TIMESTAMP = re.compile(rb"\[\s*(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)\s*\]")
_FIELD = rb"[^\s|\]]+"
_T_ID = re.compile(rb"(?:^|[\s|])T_ID:(" + _FIELD + rb")")
_FUNC = re.compile(rb"(?:^|[\s|])FUNC:(" + _FIELD + rb")_(start|end)(?=$|[\s|])")
_SERVICE = re.compile(rb"(?:^|[\s|])SERVICE:(" + _FIELD + rb")")
_HOST = re.compile(rb"(?:^|[\s|])(?:HOST|INSTANCE):(" + _FIELD + rb")")
_PID = re.compile(rb"\]\s*\|?\s*\[\s*[A-Za-z]+\s*\]\s*\|?\s*\[\s*(\d+)\s*\]")
_COMPONENT = re.compile(r"^(.+?)(?:::|\.)[^.:]+$")
#: Attribute keeping the log's own request id.
REQUEST_ID = "mi.request_id"


def looks_like_mi_log(head: bytes) -> bool:
    """Whether the first bytes of a (decompressed) file are Mi et al.'s trace-log lines: a first
    line that opens with a bracketed timestamp and holds ``T_ID:`` and ``FUNC:``."""
    line = head.lstrip(b"\xef\xbb\xbf \t\r\n|").split(b"\n", 1)[0]
    return line.startswith(b"[") and bool(_TIMESTAMP.match(line)) and b"T_ID:" in line and b"FUNC:" in line


def _nanoseconds(text: bytes) -> int:
    value = text.decode("ascii").replace("Z", "+00:00")
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    whole = int(moment.replace(microsecond=0).timestamp())
    fraction = value.split(".", 1)[1] if "." in value else ""
    digits = re.match(r"\d*", fraction).group(0)
    return whole * 1_000_000_000 + int((digits + "000000000")[:9])


def _hex(text: str, n_bytes: int) -> str:
    return hashlib.blake2b(text.encode(), digest_size=n_bytes).hexdigest()


def read_mi_log(stream: BinaryIO, builder: SpanBatchBuilder) -> Iterator[pa.RecordBatch]:
    """Read a request trace log of Mi et al. 2012 (Figure 2) as spans.

    A record is a line (1-based). The format, the mapping to spans and the handling of bad
    events are in the module docstring.

    Parameters
    ----------
    stream : binary file
        The decompressed file.
    builder : SpanBatchBuilder
        Receives the spans; rejected events and warnings go to its log with the field at fault
        (``timestamp``, ``FUNC``).

    Yields
    ------
    pyarrow.RecordBatch
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, one per matched start/end pair.
    """
    log, source = builder.log, builder.source
    default_service = PurePath(source).name.split(".", 1)[0] or "unknown"
    requests: dict[bytes, list[tuple]] = {}
    other, first_other = 0, 0
    for number, line in enumerate(stream, start=1):
        line = line.rstrip(b"\r\n")
        t_id, func = _T_ID.search(line), _FUNC.search(line)
        if t_id is None or func is None:
            if line.strip():
                other += 1
                first_other = first_other or number
            continue
        stamp = _TIMESTAMP.search(line)
        try:
            if stamp is None:
                raise ValueError("no [YYYY-MM-DD HH:MM:SS.ffffff] timestamp")
            ns = _nanoseconds(stamp.group(1))
        except (ValueError, OverflowError) as e:
            log.add(source, number, f"unreadable: {e}", field="timestamp", spans=1, excerpt=line)
            continue
        service, host, pid = _SERVICE.search(line), _HOST.search(line), _PID.search(line)
        instance = host.group(1).decode(errors="replace") if host else (
            f"pid-{pid.group(1).decode()}" if pid else None)
        requests.setdefault(t_id.group(1), []).append(
            (ns, number, func.group(1).decode(errors="replace"), func.group(2) == b"start",
             service.group(1).decode(errors="replace") if service else None, instance, line))
    if other:
        log.add(source, first_other, f"{other:,} lines without both T_ID: and FUNC: are not trace events and were "
                                     "not read (first at this line)", spans=0)
    for request, events in requests.items():
        yield from _request_spans(builder, request.decode(errors="replace"), events, default_service)
    yield from last_batch(builder)


def _request_spans(builder: SpanBatchBuilder, request: str, events: list[tuple],
                   default_service: str) -> Iterator[pa.RecordBatch]:
    """Match one request's start/end events by nesting and add a span per pair."""
    log, source = builder.log, builder.source
    trace_id = _hex(request, 16)
    events.sort(key=lambda e: (e[0], e[1]))
    stack: list[tuple] = []  # open starts: (event, span id)

    def unended(event: tuple, why: str) -> None:
        log.add(source, event[1], f"FUNC:{event[2]}_start {why}", field="FUNC", spans=1, excerpt=event[6])

    for event in events:
        ns, number, method, is_start, _, _, line = event
        if is_start:
            stack.append((event, _hex(f"{request}/{number}", 8)))
            continue
        depth = next((k for k in range(len(stack) - 1, -1, -1) if stack[k][0][2] == method), None)
        if depth is None:
            log.add(source, number, f"FUNC:{method}_end has no open FUNC:{method}_start in request {request}",
                    field="FUNC", spans=1, excerpt=line)
            continue
        while len(stack) > depth + 1:
            unended(stack.pop()[0], f"never ends: {method} around it ended first (request {request})")
        start, span_id = stack.pop()
        s_ns, s_number, _, _, service, instance, _ = start
        component = _COMPONENT.match(method)
        builder.add_attribute(REQUEST_ID, request, s_number)
        builder.add(s_number, trace_id, span_id, stack[-1][1] if stack else None,
                    service or event[4] or (component.group(1) if component else default_service), method,
                    instance or event[5], "internal" if stack else "server", s_ns, ns)
        if builder.full():
            yield builder.flush()
    for start, _ in stack:
        unended(start, f"never ends (request {request})")
