"""Seeded incidents with a known culprit and onset, for tests and the quality floors.

A small shop: ``frontend`` calls ``cart`` (which calls ``db``) and ``catalog``; ``cart`` calls ``db``
through a client span (its gap is the network's). A service named in ``asynchronous`` is called
through a producer span its caller does not wait for (OpenTelemetry's kind for the initiator of an
asynchronous request), so nothing in it, nor in the network into it, adds to the request's latency;
one in ``reach`` is called by a share of its callers' spans only. Requests arrive as a Poisson
process; every service's own time is log-normal. ``host_slowdown`` slows the whole host from the
onset: every own time and every gap grows by that factor (a busier machine), whatever the fault.
At the onset one fault starts in one service:

* ``"delay"``: its own time grows by ``magnitude`` (a factor, 1.0 = doubled);
* ``"network"``: the gap of calls into it grows by ``magnitude`` x its caller's usual gap + 20 ms;
* ``"exception"``: a share ``magnitude`` (capped at 1) of its spans fail with an ``exception`` event;
* ``"early-return"``: it stops calling downstream in a share ``magnitude`` of its spans.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ... import schema as S

__all__ = ["FAULTS", "SERVICES", "incident_spans", "planted_case"]

FAULTS = ("delay", "network", "exception", "early-return")
#: Service -> (its own time's median ms, what it calls).
SERVICES = {"frontend": (4.0, ("cart", "catalog")), "cart": (6.0, ("db",)), "catalog": (5.0, ()),
            "db": (3.0, ())}


def incident_spans(*, fault: str | None = "delay", service: str = "cart", magnitude: float = 1.0,
                   n_requests: int = 1200, duration_s: float = 600.0, onset_s: float = 400.0,
                   asynchronous: tuple = (), reach: dict | None = None, host_slowdown: float = 0.0,
                   random_state=None) -> pa.Table:
    """Spans of ``n_requests`` over ``duration_s``, with ``fault`` in ``service`` from ``onset_s``.

    Parameters
    ----------
    fault : {"delay", "network", "exception", "early-return"} or None
        None: no fault (a healthy period).
    service : str
        One of :data:`SERVICES`.
    magnitude : float
        See the module docstring.
    n_requests : int
    duration_s, onset_s : float
        Seconds from the start (2026-01-01T00:00Z).
    asynchronous : tuple of str, default=()
        Services their callers call asynchronously (a producer span, not waited for).
    reach : dict of str to float, optional
        Service -> the share of its callers' spans that call it (default: every one): a service few
        requests reach.
    host_slowdown : float, default=0.0
        From the onset, every service's own time and every gap is ``1 + host_slowdown`` times longer.
    random_state : int or numpy Generator, optional

    Returns
    -------
    pyarrow.Table
        In :data:`~tracesleuth.schema.SPAN_SCHEMA`.

    Raises
    ------
    ParameterError
        An unknown fault or service.
    """
    from ...errors import ParameterError

    if fault is not None and fault not in FAULTS:
        raise ParameterError(f"fault must be one of {', '.join(FAULTS)} or None. Got {fault!r} instead.")
    if service not in SERVICES:
        raise ParameterError(f"service must be one of {', '.join(SERVICES)}. Got {service!r} instead.")
    rng = np.random.default_rng(random_state)
    origin = 1_767_225_600 * 10**9
    starts = np.sort(rng.uniform(0, duration_s, n_requests))
    rows: list[dict] = []
    for r, start_s in enumerate(starts):
        faulty = fault is not None and start_s >= onset_s
        _call(rows, rng, f"{r:032x}", None, "frontend", origin + int(start_s * 1e9), fault if faulty else None,
              service, magnitude, [0], asynchronous, reach or {}, 1 + host_slowdown * (start_s >= onset_s))
    columns = {name: [row.get(name) for row in rows] for name in S.SPAN_SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=S.SPAN_SCHEMA)


def _call(rows, rng, trace, parent, name, start_ns, fault, culprit, magnitude, counter, asynchronous,
          reach, slow) -> int:
    """Add the span of ``name`` (and its callees) to ``rows``; return its end (ns)."""
    median_ms, callees = SERVICES[name]
    own = rng.lognormal(np.log(median_ms), 0.25) * 1e6 * slow
    here = fault is not None and name == culprit
    if here and fault == "delay":
        own *= 1 + magnitude
    counter[0] += 1
    span_id = f"{counter[0]:016x}"
    failed = here and fault == "exception" and rng.random() < min(magnitude, 1.0)
    skip = here and fault == "early-return" and rng.random() < min(magnitude, 1.0)
    t = start_ns + int(own / 2)
    for callee in (() if skip or failed else callees):
        if callee in reach and rng.random() >= reach[callee]:
            continue
        gap = rng.lognormal(np.log(0.8), 0.3) * 1e6 * slow
        if fault == "network" and callee == culprit:
            gap += magnitude * gap + 20e6
        counter[0] += 1
        client = f"{counter[0]:016x}"
        end = _call(rows, rng, trace, client, callee, t + int(gap / 2), fault, culprit, magnitude, counter,
                    asynchronous, reach, slow)
        waits = callee not in asynchronous
        rows.append(_row(trace, client, span_id, name, f"call {callee}", "client" if waits else "producer", t,
                         end + int(gap / 2)))
        t = end + int(gap / 2) if waits else t
    end = t + int(own / 2)
    row = _row(trace, span_id, parent, name, f"{name} handler", "server", start_ns, end)
    if failed:
        row["status"] = "error"
        row["events"] = [{"time_ns": end, "name": "exception",
                          "attributes": [{"key": "exception.type", "str": "RuntimeError"}]}]
    rows.append(row)
    return end


def _row(trace, span_id, parent, service, operation, kind, start_ns, end_ns) -> dict:
    return {"trace_id": trace, "span_id": span_id, "parent_span_id": parent, "service": service,
            "operation": operation, "instance": f"{service}-0", "kind": kind, "start_ns": int(start_ns),
            "end_ns": int(end_ns), "status": "unset", "follows_from": False, "attributes": [], "events": [],
            "links": [], "status_message": None}


def planted_case(random_state=0):
    """The common test's planted case: a 30 ms network delay into ``catalog`` from 400 s of 600 s,
    the diagnosis told a moment 50 s after the onset; score 1 when ``catalog`` comes first.

    Returns
    -------
    PlantedCase
        ``args`` = (spans as a polars DataFrame,), floor 1.0.
    """
    import polars as pl

    from .. import PlantedCase

    spans = incident_spans(fault="network", service="catalog", magnitude=0.5, random_state=random_state)
    at = int(spans["start_ns"][0].as_py()) + 450 * 10**9

    def score(fitted) -> float:
        services = fitted.result_.services
        return float(bool(services) and services[0].service == "catalog")
    return PlantedCase(args=(pl.from_arrow(spans),), settings={"at": at, "random_state": random_state},
                       score=score, floor=1.0)
