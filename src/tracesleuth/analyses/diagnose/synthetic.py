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

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ... import schema as S

__all__ = ["FAULTS", "INSTANCE_FAULTS", "LOG_FAULTS", "RANDOM_FAULTS", "SERVICES", "RandomIncident", "incident_spans",
           "planted_case", "random_incident", "score_random_incidents"]

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


#: The faults :func:`random_incident` plants: those of :data:`FAULTS`, ``"instance-delay"`` (the own
#: time of one instance of a service with several grows), ``"tail"`` (a share of its calls many
#: times slower), ``"ramp"`` (its own time grows steadily: a leak), ``"error-status"`` (failed
#: spans without an exception event: an HTTP 500 that raised nothing) and ``"timeout"`` (slow calls
#: into it that its callers give up on).
RANDOM_FAULTS = (*FAULTS, "instance-delay", "tail", "ramp", "error-status", "timeout", "unavailable", "log-error",
                 "instance-exception")
#: The faults only log records show (:func:`random_incident` writes records for them whatever ``logs``).
LOG_FAULTS = ("log-error",)
#: The faults in one instance of the culprit (:attr:`RandomIncident.instance`).
INSTANCE_FAULTS = ("instance-delay", "instance-exception")


@dataclass(frozen=True)
class RandomIncident:
    """A seeded incident in a random shop (:func:`random_incident`).

    Attributes
    ----------
    spans : pyarrow.Table
        In :data:`~tracesleuth.schema.SPAN_SCHEMA`.
    logs : pyarrow.Table or None
        In :data:`~tracesleuth.schema.LOG_SCHEMA`, template ids given; None without ``logs``.
    culprit : str
        The service the fault is in.
    instance : str or None
        The faulty instance of an ``"instance-delay"`` or ``"instance-exception"`` fault.
    onset_ns, at_ns : int
        When the fault began, and a moment inside it (50 s later), Unix epoch ns.
    fault : str
    magnitude : float
    """

    spans: object
    logs: object
    culprit: str
    instance: str | None
    onset_ns: int
    at_ns: int
    fault: str
    magnitude: float


def random_incident(fault: str, *, n_services: int | None = None, n_requests: int = 1500, duration_s: float = 600.0,
                    onset_s: float = 400.0, logs: bool = False, parallel: bool = False, skew_ms: float = 0.0,
                    random_state=None) -> RandomIncident:
    """An incident in a shop drawn at random, to check the diagnosis away from the one shop it was built on.

    The shop: ``n_services`` (default 6-14) services, each called by one earlier service and, with
    probability 0.3, by a second (a call graph, not a tree); each has 1-3 operations and 1-3
    instances; each operation calls each of its service's callees with a probability drawn once
    (0.5-1), sometimes asynchronously (a producer span, 1 in 8 edges). Own times are log-normal with
    a median of 0.5-30 ms and a dispersion of 0.2-0.8 per operation, gaps 0.3-3 ms per edge. Two
    things happen that are not the fault: a bystander service fails 2% of its spans all along (an
    error span with an exception event, its callers' client spans failing with it), and the request
    rate changes by a factor 0.7-1.4 at a random moment. The fault starts at ``onset_s`` in a service
    other than the entry one, with a magnitude drawn from its range:

    * ``"delay"``: own time x (1.5-4); ``"instance-delay"``: the same on one of its >= 2 instances;
    * ``"network"``: the gap into it + (1-3) x the gap + 5-20 ms;
    * ``"exception"``: 20-100% of its spans fail (error status, exception event; the caller's client
      span fails and, half the time, the caller's own span too: an error seen by every ancestor);
    * ``"early-return"``: 30-100% of its spans stop calling downstream (a service with a callee; the
      entry one when no other has);
    * ``"tail"``: 5-20% of its spans' own time x (5-20) (intermittent slow calls);
    * ``"ramp"``: own time x (1 + m t / (duration_s - onset_s)), m 1-4, t the seconds since the onset;
    * ``"error-status"``: as ``"exception"``, the failed spans without an exception event;
    * ``"timeout"``: as ``"tail"``, and each caller gives up on a call into it after 3 x its slowest
      operation's median own time + 10 ms: the client span fails there (its caller's own span too,
      half the time), the culprit's span, not failed, runs on;
    * ``"unavailable"``: 20-100% of the calls into it are refused (the service is down or crashing):
      the caller's client span fails, with an exception event, after the gap or, in half the shops,
      after a connect timeout of 20-200 ms, and no span of the culprit (or below it) is recorded;
      the caller's own span fails too, half the time (a message sent to it is taken by the broker
      and never consumed: no error);
    * ``"log-error"``: 20-100% of its spans write an error-level record of a statement not seen
      before (an exception caught and logged), the span not failed: only the log records show it;
    * ``"instance-exception"``: as ``"exception"``, on one of its >= 2 instances (a bad pod or release).

    With ``logs`` (always for :data:`LOG_FAULTS`), every server span writes log records
    (:func:`_random_logs`, drawn from a generator of its own: the spans are those drawn without):
    each operation runs 1-4 statements, each with a chance of 0.3-1 per span, one in four at WARN;
    a span that failed by itself writes an error-level record, and a caller whose call failed writes
    one on its own span half the time (an error logged on its way up); a noisy service other than
    the bystander and the culprit writes an error-level record on 1% of its spans all along.

    With ``parallel``, a span makes its synchronous calls all at once (a fan-out: Go's errgroup,
    ``Promise.all``) and ends its own work after the last answer, so its calls overlap; the draws are
    those made without it (the same shop, calls, times and fault), only the calls' start times move.
    With ``skew_ms``, every service but the entry one records on a clock off by a constant drawn
    uniformly in ``[-skew_ms, skew_ms]`` ms (its spans, their events and its log records), from a
    generator of its own: the shop is the one drawn without it.

    Parameters
    ----------
    fault : str
        One of :data:`RANDOM_FAULTS`.
    n_services : int, optional
        At least 3.
    n_requests : int, default=1500
    duration_s, onset_s : float
        Seconds from the start (2026-01-01T00:00Z).
    logs : bool, default=False
    parallel : bool, default=False
    skew_ms : float, default=0.0
    random_state : int or numpy Generator, optional

    Returns
    -------
    RandomIncident

    Raises
    ------
    ParameterError
        An unknown fault, or fewer than 3 services.
    """
    from ...errors import ParameterError

    if fault not in RANDOM_FAULTS:
        raise ParameterError(f"fault must be one of {', '.join(RANDOM_FAULTS)}. Got {fault!r} instead.")
    rng = np.random.default_rng(random_state)
    log_rng, clock_rng = rng.spawn(2)   # the log records' and clocks' own draws: the spans stay those drawn without
    n = int(rng.integers(6, 15)) if n_services is None else n_services
    if n < 3:
        raise ParameterError(f"n_services must be at least 3. Got {n} instead.")
    shop = _random_shop(rng, n)
    culprit = _random_culprit(rng, shop, fault)
    bystander = str(rng.choice([s for s in shop if s not in ("service-00", culprit)]))
    low, high = {"delay": (1.5, 4.0), "instance-delay": (1.5, 4.0), "network": (1.0, 3.0),
                 "exception": (0.2, 1.0), "early-return": (0.3, 1.0), "tail": (5.0, 20.0), "ramp": (1.0, 4.0),
                 "error-status": (0.2, 1.0), "timeout": (5.0, 20.0), "unavailable": (0.2, 1.0),
                 "log-error": (0.2, 1.0), "instance-exception": (0.2, 1.0)}[fault]
    origin = 1_767_225_600 * 10**9
    plan = {"fault": fault, "culprit": culprit, "magnitude": float(rng.uniform(low, high)),
            "instance": str(rng.choice(shop[culprit]["instances"])) if fault in INSTANCE_FAULTS else None,
            "extra_ms": float(rng.uniform(5, 20)),
            "share": float(rng.uniform(0.05, 0.2)) if fault in ("tail", "timeout") else None,
            "onset_ns": origin + int(onset_s * 1e9), "ramp_ns": int((duration_s - onset_s) * 1e9)}
    if fault == "unavailable":   # drawn last: the other faults' shops stay as they were
        plan["connect_ms"] = float(rng.uniform(20, 200)) if rng.random() < 0.5 else 0.0
    change_s, factor = rng.uniform(0, duration_s), rng.uniform(0.7, 1.4)
    starts = np.sort(np.r_[rng.uniform(0, change_s, int(n_requests * change_s / duration_s)),
                           rng.uniform(change_s, duration_s, int(n_requests * factor * (1 - change_s / duration_s)))])
    rows: list[dict] = []
    counter = [0]
    for r, start_s in enumerate(starts):
        entry = shop["service-00"]
        operation = int(rng.integers(len(entry["operations"])))
        _random_call(rows, rng, shop, f"{r:032x}", None, "service-00", operation, origin + int(start_s * 1e9),
                     plan if start_s >= onset_s else None, bystander, counter, parallel)
    if skew_ms:
        _skew_clocks(rows, shop, skew_ms, clock_rng)
    columns = {name: [row.get(name) for row in rows] for name in S.SPAN_SCHEMA.names}
    records = _random_logs(rows, shop, plan, bystander, log_rng) if logs or fault in LOG_FAULTS else None
    return RandomIncident(pa.Table.from_pydict(columns, schema=S.SPAN_SCHEMA), records, culprit, plan["instance"],
                          origin + int(onset_s * 1e9), origin + int((onset_s + 50) * 1e9), fault, plan["magnitude"])


def _random_logs(rows: list[dict], shop: dict, plan: dict, bystander: str, rng: np.random.Generator) -> pa.Table:
    """Log records of :func:`random_incident`'s server spans (its docstring), in
    :data:`~tracesleuth.schema.LOG_SCHEMA` with template ids (the store mines them from the bodies)."""
    serial = iter(range(1, 1_000_000))
    statements = {(name, f"{name} op{k}"): [(next(serial), float(rng.uniform(0.3, 1.0)),
                                             13 if rng.random() < 0.25 else 9) for _ in range(int(rng.integers(1, 5)))]
                  for name, service in shop.items() for k in range(len(service["operations"]))}
    failed_here = {name: next(serial) for name in shop}
    call_failed = {name: next(serial) for name in shop}
    new_statement = next(serial)
    others = [s for s in shop if s not in ("service-00", bystander, plan["culprit"])]
    noisy = str(rng.choice(others)) if others else None
    failed_calls = {row["parent_span_id"] for row in rows if row["kind"] == "client" and row["status"] == "error"}
    records = []

    def write(row, template, severity):
        records.append({S.TIME_NS: int(rng.uniform(row["start_ns"], row["end_ns"] + 1)), S.TRACE_ID: row["trace_id"],
                        S.SPAN_ID: row["span_id"], S.SERVICE: row["service"], S.INSTANCE: row["instance"],
                        S.SEVERITY_NUMBER: severity, S.SEVERITY_TEXT: {9: "INFO", 13: "WARN", 17: "ERROR"}[severity],
                        S.BODY: f"statement {template}", S.TEMPLATE_ID: template})

    for row in rows:
        if row["kind"] != "server":
            continue
        name = row["service"]
        for template, chance, severity in statements[(name, row["operation"])]:
            if rng.random() < chance:
                write(row, template, severity)
        if row["status"] == "error":
            if row["span_id"] not in failed_calls:
                write(row, failed_here[name], 17)
            elif rng.random() < 0.5:
                write(row, call_failed[name], 17)
        if name == noisy and rng.random() < 0.01:
            write(row, failed_here[name], 17)
        if (plan["fault"] == "log-error" and name == plan["culprit"] and row["start_ns"] >= plan["onset_ns"]
                and rng.random() < plan["magnitude"]):
            write(row, new_statement, 17)
    columns = {name: [r.get(name) for r in records] for name in S.LOG_SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=S.LOG_SCHEMA)


def score_random_incidents(fault: str, *, seeds: int = 30, at_s: float = 50.0, n_requests: int = 1500,
                           logs: bool = False, parallel: bool = False, skew_ms: float = 0.0) -> dict:
    """Diagnose :func:`random_incident` of ``fault`` for seeds ``0 .. seeds - 1``, each told the moment
    ``at_s`` after the onset (with their log records with ``logs``; their calls made all at once
    with ``parallel``; on skewed clocks with ``skew_ms``), and count the answers.

    Returns
    -------
    dict
        ``fault``, ``seeds``, ``first`` (the culprit first), ``top1`` (``first / seeds``),
        ``wrong_named`` (another service named), ``no_answer`` (no change found: EmptyDataError),
        ``instance_first`` (the faulty instance of :data:`INSTANCE_FAULTS` first in the culprit's
        instances, when the culprit is first; None for other faults), and
        ``median_abs_onset_error_s`` (None without an answer).
    """
    import statistics

    import polars as pl

    from ...errors import EmptyDataError
    from .analysis import Diagnosis

    first = wrong_named = no_answer = instance = 0
    onset_errors = []
    for seed in range(seeds):
        incident = random_incident(fault, n_requests=n_requests, logs=logs, parallel=parallel, skew_ms=skew_ms,
                                   random_state=seed)
        try:
            result = Diagnosis(at=incident.onset_ns + int(at_s * 1e9)).fit(incident.spans, incident.logs).result_
        except EmptyDataError:
            no_answer += 1
            continue
        top = result.services[0] if result.services else None
        right = top is not None and top.service == incident.culprit
        first += right
        wrong_named += result.verdict == "named" and not right
        instance += right and incident.instance is not None and top.instances[:1] == (incident.instance,)
        onset_errors.append(abs(result.onset.time_ns - incident.onset_ns) / 1e9)
    return {"fault": fault, "seeds": seeds, "first": first, "top1": first / seeds, "wrong_named": wrong_named,
            "no_answer": no_answer, "instance_first": instance if fault in INSTANCE_FAULTS else None,
            "median_abs_onset_error_s": statistics.median(onset_errors) if onset_errors else None}


def _random_culprit(rng: np.random.Generator, shop: dict, fault: str) -> str:
    """A service other than the entry one that can hold ``fault``: with several instances for
    :data:`INSTANCE_FAULTS` (one is given a second when none has), with a callee for an
    ``"early-return"`` (the entry service when only it has one)."""
    others = [s for s in shop if s != "service-00"]
    if fault in INSTANCE_FAULTS:
        fits = [s for s in others if len(shop[s]["instances"]) > 1]
        if not fits:
            culprit = str(rng.choice(others))
            shop[culprit]["instances"].append(f"{culprit}-1")
            return culprit
    elif fault == "early-return":
        fits = [s for s in others if shop[s]["callees"]] or ["service-00"]
    else:
        fits = others
    return str(rng.choice(fits))


def _skew_clocks(rows: list[dict], shop: dict, skew_ms: float, rng: np.random.Generator) -> None:
    """Shift each service's times (spans and events) by its clock's offset (:func:`random_incident`)."""
    offsets = {name: 0 if name == "service-00" else int(rng.uniform(-skew_ms, skew_ms) * 1e6) for name in shop}
    for row in rows:
        offset = offsets[row["service"]]
        row["start_ns"] += offset
        row["end_ns"] += offset
        for event in row["events"]:
            event["time_ns"] += offset


def _random_shop(rng: np.random.Generator, n: int) -> dict:
    """Services ``service-00`` (the entry) .. of :func:`random_incident`'s shop: per service its
    operations (own time median ms and dispersion, and per callee the chance a span calls it), its
    instances, and per callee the edge's gap median ms and whether it is asynchronous."""
    names = [f"service-{i:02d}" for i in range(n)]
    callers = {name: set() for name in names}
    for i in range(1, n):
        callers[names[i]].add(names[int(rng.integers(i))])
        if i > 1 and rng.random() < 0.3:
            callers[names[i]].add(names[int(rng.integers(i))])
    shop = {}
    for name in names:
        callees = [c for c in names if name in callers[c]]
        shop[name] = {
            "callees": {c: {"gap_ms": float(rng.uniform(0.3, 3.0)), "asynchronous": bool(rng.random() < 0.125)}
                        for c in callees},
            "operations": [{"median_ms": float(np.exp(rng.uniform(np.log(0.5), np.log(30)))),
                            "sigma": float(rng.uniform(0.2, 0.8)),
                            "calls": {c: float(rng.uniform(0.5, 1.0)) for c in callees}}
                           for _ in range(int(rng.integers(1, 4)))],
            "instances": [f"{name}-{k}" for k in range(int(rng.integers(1, 4)))]}
    return shop


def _random_call(rows, rng, shop, trace, parent, name, operation, start_ns, plan, bystander, counter,
                 parallel=False) -> tuple:
    """Add the span of ``name``'s ``operation`` (and its callees') to ``rows``; return its end (ns)
    and whether it failed. With ``parallel`` its synchronous calls all start together."""
    service, op = shop[name], shop[name]["operations"][operation]
    instance = service["instances"][int(rng.integers(len(service["instances"])))]
    own = rng.lognormal(np.log(op["median_ms"]), op["sigma"]) * 1e6
    here = plan is not None and plan["culprit"] == name
    if here and (plan["fault"] == "delay" or plan["fault"] == "instance-delay" and instance == plan["instance"]):
        own *= plan["magnitude"]
    if here and plan["fault"] in ("tail", "timeout") and rng.random() < plan["share"]:
        own *= plan["magnitude"]
    if here and plan["fault"] == "ramp":
        own *= 1 + plan["magnitude"] * (start_ns - plan["onset_ns"]) / plan["ramp_ns"]
    counter[0] += 1
    span_id = f"{counter[0]:016x}"
    raised = (here and (plan["fault"] in ("exception", "error-status")
                        or plan["fault"] == "instance-exception" and instance == plan["instance"])
              and rng.random() < min(plan["magnitude"], 1.0)
              or name == bystander and rng.random() < 0.02)
    skip = here and plan["fault"] == "early-return" and rng.random() < plan["magnitude"]
    failed = raised
    t = first = last = start_ns + int(own / 2)   # where the next call starts; the first's; the latest end
    for callee, chance in op["calls"].items():
        if parallel:
            t, last = first, max(t, last)
        if skip or raised or rng.random() >= chance:
            continue
        edge = service["callees"][callee]
        gap = rng.lognormal(np.log(edge["gap_ms"]), 0.3) * 1e6
        if plan is not None and plan["fault"] == "network" and plan["culprit"] == callee:
            gap += plan["magnitude"] * gap + plan["extra_ms"] * 1e6
        counter[0] += 1
        client = f"{counter[0]:016x}"
        waits = not edge["asynchronous"]
        if (plan is not None and plan["fault"] == "unavailable" and plan["culprit"] == callee
                and rng.random() < plan["magnitude"]):
            # refused; a message to it is sent (the broker takes it) and never consumed
            end = t + int(gap + plan["connect_ms"] * 1e6) if waits else t + int(gap / 2)
            row = _row(trace, client, span_id, name, f"call {callee}", "client" if waits else "producer", t, end)
            row["attributes"], row["instance"] = [{"key": "server.address", "str": callee}], instance
            if waits:
                row["status"] = "error"
                row["events"] = [{"time_ns": end, "name": "exception",
                                  "attributes": [{"key": "exception.type", "str": "ConnectionRefusedError"}]}]
                failed = failed or rng.random() < 0.5
                t = end
            rows.append(row)
            continue
        callee_op = int(rng.integers(len(shop[callee]["operations"])))
        end, callee_failed = _random_call(rows, rng, shop, trace, client, callee, callee_op, t + int(gap / 2), plan,
                                          bystander, counter, parallel)
        if plan is not None and plan["fault"] == "timeout" and plan["culprit"] == callee:
            limit = t + int((3 * max(o["median_ms"] for o in shop[callee]["operations"]) + 10) * 1e6)
            if waits and end + int(gap / 2) > limit:
                end, callee_failed = limit - int(gap / 2), True
        row = _row(trace, client, span_id, name, f"call {callee}", "client" if waits else "producer", t,
                   end + int(gap / 2) if waits else t + int(gap / 2))
        row["attributes"], row["instance"] = [{"key": "server.address", "str": callee}], instance
        if callee_failed and waits:
            row["status"] = "error"
            failed = failed or rng.random() < 0.5
        rows.append(row)
        t = end + int(gap / 2) if waits else t
    if parallel:
        t = max(t, last)   # after the last answer
    row = _row(trace, span_id, parent, name, f"{name} op{operation}", "server", start_ns, t + int(own / 2))
    row["instance"] = instance
    if failed:
        row["status"] = "error"
    if raised and not (here and plan["fault"] == "error-status"):
        row["events"] = [{"time_ns": row["end_ns"], "name": "exception",
                          "attributes": [{"key": "exception.type", "str": "RuntimeError"}]}]
    rows.append(row)
    return row["end_ns"], failed
