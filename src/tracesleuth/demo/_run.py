"""``run_demo`` and ``run_incident``: start the shop and the collector, load it, stop everything,
analyse, report."""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import ParameterError
from ..evaluation.eshopper import HOMEPAGE_CALLS, draw_degradations
from ..units import NS_PER_MS
from ._account import ProcessAccount
from ._health import achieved_rate, assess_run, blurred_requests
from ._protocol import (DEFAULT_FAULT_SHARE, DELAY_FAULTS, FAULT_HITS_COLUMNS, FAULT_KINDS, FAULT_PATH, HEALTH_PATH,
                        LIVE_SERVICES, LOAD_GENERATOR, DemoConfig, Fault, LiveDegradation, call_service,
                        child_environment)
from ._result import RECOVERY_F_SCORE, DemoResult, IncidentResult
from ._supervisor import DemoError, Supervisor, termination_raises

#: The homepage request's entry: the web service's ``gethome`` server span.
ENDPOINT = "web-service:gethome"
#: Instances of each live service (:data:`._protocol.LIVE_SERVICES`): one each, and two of the
#: items service, which serves the two asynchronous calls of a request (category and featured
#: items), as pods behind a Kubernetes service: 7 processes for 6 services.
DEFAULT_INSTANCES = {s: 2 if s == "items-service" else 1 for s in LIVE_SERVICES}
#: Requests per second of the default load: the homepage request makes 13 calls over HTTP and
#: leaves 38 spans and 26 log records, which costs the shop and the collector about 70 ms of CPU
#: (0.54-0.59 cores at 8/s on an idle machine, 0.42-0.48 before the log records were sent:
#: ``benchmarks/bench_demo.py``); 8/s keeps the run near half a core, so that it fits a 2-core
#: machine with headroom even beside a second CPU-bound process.
DEFAULT_RATE_PER_S = 8.0
#: Seconds of load of a default run.
DEFAULT_DURATION_S = 120.0
#: Added by an incident run's fault, ns (a third of the homepage's modelled 52 ms).
DEFAULT_FAULT_DELAY_NS = 20 * NS_PER_MS
#: Directory of a run where the service instances write the requests a code fault hit (one file
#: each), and the file of the run that gathers them (:data:`._protocol.FAULT_HITS_COLUMNS`).
FAULT_HITS_DIR, FAULT_HITS_FILE = "fault-hits", "fault-hits.csv"
#: Directory of a run where every process writes what became of its telemetry, as it stops
#: (:class:`._account.ProcessAccount`).
TELEMETRY_DIR = "telemetry"
#: Seconds allowed to the collector and the services to start.
STARTUP_TIMEOUT_S = 90.0
#: Seconds allowed to one process to stop gracefully (export its spans) before SIGKILL.
STOP_TIMEOUT_S = 30.0
#: Seconds left to asynchronous calls in flight once the last response has come back.
DRAIN_S = 0.5
#: Seconds the children get to exit after an interruption before SIGKILL.
INTERRUPT_TIMEOUT_S = 3.0
#: How the degraded interval is chosen (see :func:`run_demo`).
INTERVALS = ("affected", "auto")
INTERVAL_RULES = {"affected": "[L_min, L_max] of the affected requests (Section 4.3)",
                  "auto": "automatic (above the main latency mode)"}


def _stop_waves() -> tuple[tuple[str, ...], ...]:
    """The live services in stopping order: each after every service that calls it.

    A caller is stopped before its callees, so that none of its calls is left without a callee:
    a stopping service still finishes its requests in flight and waits for the asynchronous calls
    it fired (``web-service`` fires ``finditems`` and ``findfeaturesitems`` at ``items-service``;
    ``recommendation-service`` calls ``account-service``). Services of one wave stop together.
    """
    callers: dict[str, set[str]] = {s: set() for s in LIVE_SERVICES}
    for j, c in enumerate(HOMEPAGE_CALLS):
        if c.parent is not None and call_service(c.parent) != call_service(j):
            callers[call_service(j)].add(call_service(c.parent))
    wave: dict[str, int] = {}

    def depth(s: str) -> int:
        if s not in wave:
            wave[s] = 1 + max((depth(c) for c in callers[s]), default=-1)
        return wave[s]

    for s in LIVE_SERVICES:
        depth(s)
    return tuple(tuple(s for s in LIVE_SERVICES if wave[s] == k) for k in range(max(wave.values()) + 1))


#: :func:`_stop_waves`: ``(web-service,), (items, cart, categories, recommendation), (account,)``.
STOP_WAVES = _stop_waves()


@dataclass(frozen=True)
class DemoProgress:
    """A step of :func:`run_demo`, for a progress display.

    Attributes
    ----------
    phase : {"starting", "load", "flushing", "analysing", "report", "done"}
    message : str
    requests_sent, requests_planned : int
    elapsed_s : float
        Seconds since the run started.
    """

    phase: str
    message: str
    requests_sent: int = 0
    requests_planned: int = 0
    elapsed_s: float = 0.0


def _check(name: str, value, kind, low, high=math.inf, *, low_open: bool = False, function: str = "run_demo"):
    ok = isinstance(value, kind) and not isinstance(value, bool) and \
        (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f"({low}" if low_open else f"[{low}"
        raise ParameterError(f"The {name!r} parameter of {function} must be {'an int' if kind is int else 'a number'} "
                             f"in the range {bound}, {high if high != math.inf else 'inf'}]. Got {value!r} instead.")


@dataclass(frozen=True)
class _Phase:
    """One stretch of load: its name, its requests, and the fault switched on before it."""

    name: str
    n_requests: int
    fault: Fault | None = None


def _check_common(duration_s, rate_per_s, seed, max_in_flight, instances, workdir, report_path, function: str):
    """Checks shared by :func:`run_demo` and :func:`run_incident`; returns the instance counts,
    the run's directory, its store and the report's path."""
    if os.name != "posix":
        raise DemoError("the live demo needs a POSIX system (process groups, signals); "
                        f"this one is {os.name!r}")
    _check("duration_s", duration_s, (int, float), 0, 3600, low_open=True, function=function)
    _check("rate_per_s", rate_per_s, (int, float), 0, 200, low_open=True, function=function)
    _check("seed", seed, int, 0, function=function)
    _check("max_in_flight", max_in_flight, int, 1, 10_000, function=function)
    counts = dict(DEFAULT_INSTANCES if instances is None else instances)
    if set(counts) != set(LIVE_SERVICES) or any(not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 8
                                                for v in counts.values()):
        raise ParameterError(f"The 'instances' parameter of {function} must give every service of "
                             f"{', '.join(LIVE_SERVICES)} an int in [1, 8]. Got {instances!r} instead.")
    workdir = Path(tempfile.mkdtemp(prefix="tracesleuth-demo-")) if workdir is None else Path(workdir)
    store = workdir / "store"
    if store.exists():
        raise ParameterError(f"The 'workdir' parameter of {function} must be a directory without a previous run; "
                             f"{workdir} already holds {store}. Choose another directory.")
    workdir.mkdir(parents=True, exist_ok=True)
    report_path = Path(report_path) if report_path is not None else workdir / "report.html"
    return counts, workdir, store, report_path


def run_demo(*, duration_s: float = DEFAULT_DURATION_S, rate_per_s: float = DEFAULT_RATE_PER_S, seed: int = 0,
             workdir=None, noised: bool = False, on_progress: Callable[[DemoProgress], None] | None = None,
             report_path=None, interval: str = "affected", instances: dict | None = None, generations: int = 400,
             max_in_flight: int = 64) -> DemoResult:
    """Run the live E-Shopper demo: real services, real traces, injected degradations, analysis.

    Starts the span receiver (:mod:`tracesleuth.collector`) and the shop's services, each its own
    process on 127.0.0.1 instrumented with the OpenTelemetry SDK; sends ``duration_s *
    rate_per_s`` homepage requests, about a tenth marked A1 and a tenth A2 through W3C baggage;
    waits for every exporter to flush and stops every process; then fits
    :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns` on the stored spans (endpoint
    ``web-service:gethome``, the solver settings of the paper's evaluation), scores the patterns
    against the ground truth, checks that the run delivered its load
    (:func:`~._health.assess_run`) and writes the HTML report.

    Parameters
    ----------
    duration_s : float, default=120
        Seconds of load, in (0, 3600].
    rate_per_s : float, default=8
        Homepage requests per second, in (0, 200] (:data:`DEFAULT_RATE_PER_S` says why 8).
    seed : int, default=0
        Seed of the degradations, the marking, every execution-time draw and the analysis.
    workdir : path, optional
        Directory of the run; default a new temporary directory. It must not hold a run already.
    noised : bool, default=False
        Add the two noise types of Section 4.3.
    on_progress : callable, optional
        Called with a :class:`DemoProgress` at every step.
    report_path : path, optional
        Where to write the HTML report. Default ``<workdir>/report.html``.
    interval : {"affected", "auto"}, default="affected"
        The degraded latency interval analysed. ``"affected"``: the paper's protocol (Section
        4.3), ``[L_min, L_max]`` of the requests marked A1 or A2 (as
        :func:`~tracesleuth.evaluation.protocols.patterns.evaluate_patterns` does). ``"auto"``: the tool's
        automatic interval (:func:`~tracesleuth.analyses.patterns.degraded_interval`), as a user without
        ground truth gets it.
    instances : dict of str to int, optional
        Instances (processes) per live service, for every service of
        :data:`~tracesleuth.demo._protocol.LIVE_SERVICES`. Default :data:`DEFAULT_INSTANCES`
        (6 services, 7 processes).
    generations : int, default=400
        Generations of the genetic algorithm.
    max_in_flight : int, default=64
        Requests the load generator has outstanding at most.

    Returns
    -------
    DemoResult
        Its :meth:`~DemoResult.outcome` says whether the degradations were recovered (F-score
        >= :data:`~._result.RECOVERY_F_SCORE`) and whether the run is a result at all.

    Raises
    ------
    ParameterError
        A setting out of range, or a ``workdir`` that already holds a run.
    DemoError
        A process did not start or stopped early (the message quotes its log), or the system is
        not POSIX.
    KeyboardInterrupt, DemoInterrupted
        On SIGINT, or SIGTERM/SIGHUP in the main thread; every child process has been stopped.

    Examples
    --------
    >>> result = run_demo(duration_s=30, rate_per_s=8)                        # doctest: +SKIP
    >>> result.match_f_scores                                                # doctest: +SKIP
    {'A1': 0.98, 'A2': 0.97}
    >>> result.outcome().status                                              # doctest: +SKIP
    'recovered'
    """
    function = "run_demo"
    _check("generations", generations, int, 1, function=function)
    if interval not in INTERVALS:
        raise ParameterError(f"The 'interval' parameter of run_demo must be one of "
                             f"{', '.join(map(repr, INTERVALS))}. Got {interval!r} instead.")
    counts, workdir, store, report_path = _check_common(duration_s, rate_per_s, seed, max_in_flight, instances,
                                                        workdir, report_path, function)
    n_requests = max(1, round(duration_s * rate_per_s))
    degradations = draw_degradations(noised=noised, random_state=seed)
    run = _execute(workdir=workdir, store=store, seed=seed, degradations=degradations, p_affected=0.1,
                   phases=[_Phase("load", n_requests)], rate_per_s=float(rate_per_s), max_in_flight=max_in_flight,
                   counts=counts, on_progress=on_progress)
    return _analyse(run, report_path=report_path, seed=seed, generations=generations, duration_s=duration_s,
                    noised=noised, interval=interval)


def run_incident(service: str, *, fault: str = "slow-handler", delay_ns: int = DEFAULT_FAULT_DELAY_NS,
                 share: float = DEFAULT_FAULT_SHARE, duration_s: float = DEFAULT_DURATION_S, rate_per_s: float = DEFAULT_RATE_PER_S, seed: int = 0,
                 workdir=None, on_progress: Callable[[DemoProgress], None] | None = None, report_path=None,
                 instances: dict | None = None, max_in_flight: int = 64) -> IncidentResult:
    """Run the live shop through an incident: a baseline phase, one fault in one service, a problem phase.

    The shop runs as in :func:`run_demo`, without degradations: for the first half of
    ``duration_s`` it serves its normal load (the baseline), then ``fault`` is switched on in
    every instance of ``service`` (:class:`~.service.FaultSwitch`) and the load goes on for the
    second half (the problem period). The request-flow comparison
    (:class:`~tracesleuth.analyses.compare.RequestFlowComparison`, Sambasivan et al., NSDI 2011)
    of the two periods - the analysis ``tracesleuth analyze PROBLEM --baseline BASELINE`` runs -
    then ranks the services; the report opens with its "What changed" section.

    Parameters
    ----------
    service : str
        The service the fault goes into, one of :data:`~._protocol.LIVE_SERVICES` but the
        gateway ``web-service`` (the entry the requests are compared at).
    fault : {"slow-handler", "network-delay", "exception", "early-return", "cpu-burn"}, default="slow-handler"
        :data:`~._protocol.FAULT_KINDS`: the service's handler gets slower (its self time), the
        calls into it wait on the network (the gap on its callers' edges), its handler raises
        (an ``exception`` event on its server span, HTTP 500 to its callers, which handle it and
        log an ERROR), its handler returns early (without its last downstream call, or its
        database query, and the log statement of that path: no error), or a thread of each of
        its instances burns CPU.
    delay_ns : int, default=20 ms
        What a delay fault (:data:`~._protocol.DELAY_FAULTS`) adds per request handled, ns, in
        [1 ms, 10 s]; not used by the other kinds.
    share : float, default=0.5
        In (0, 1]: the share of the service's requests that ``exception`` and ``early-return``
        hit, or of a core that ``cpu-burn`` burns in each instance; not used by the delay
        faults (they hit every request).
    duration_s, rate_per_s, seed, workdir, on_progress, report_path, instances, max_in_flight
        As in :func:`run_demo`.

    Returns
    -------
    IncidentResult
        Its :meth:`~IncidentResult.outcome` says whether the injected service ranks first and
        whether the run is a result at all. Which requests a code fault hit is ground truth:
        it goes to ``fault-hits.csv`` in ``workdir`` (:attr:`IncidentResult.fault_hits_path`),
        never into a span or a log record.

    Raises
    ------
    ParameterError, DemoError, KeyboardInterrupt, DemoInterrupted
        As :func:`run_demo`.

    Examples
    --------
    >>> result = run_incident("cart-service", duration_s=60)                 # doctest: +SKIP
    >>> result.top_service                                                   # doctest: +SKIP
    'cart-service'
    """
    function = "run_incident"
    targets = [s for s in LIVE_SERVICES if s != "web-service"]
    if service not in targets:
        raise ParameterError(f"The 'service' parameter of {function} must be one of {', '.join(targets)}. "
                             f"Got {service!r} instead.")
    if fault not in FAULT_KINDS:
        raise ParameterError(f"The 'fault' parameter of {function} must be one of {', '.join(FAULT_KINDS)}. "
                             f"Got {fault!r} instead.")
    _check("delay_ns", delay_ns, int, NS_PER_MS, 10_000 * NS_PER_MS, function=function)
    _check("share", share, (int, float), 0, 1, low_open=True, function=function)
    counts, workdir, store, report_path = _check_common(duration_s, rate_per_s, seed, max_in_flight, instances,
                                                        workdir, report_path, function)
    half = max(2, round(duration_s * rate_per_s / 2))
    injected = (Fault(service, fault, int(delay_ns)) if fault in DELAY_FAULTS else
                Fault(service, fault, 0, float(share)))
    run = _execute(workdir=workdir, store=store, seed=seed, degradations=(), p_affected=0.0,
                   phases=[_Phase("baseline", half), _Phase("problem", half, injected)], rate_per_s=float(rate_per_s),
                   max_in_flight=max_in_flight, counts=counts, on_progress=on_progress)
    return _analyse_incident(run, fault=injected, report_path=report_path, seed=seed, duration_s=duration_s)


@dataclass
class _Run:
    """What the operation of a run left for its analysis."""

    workdir: Path
    store: Path
    config: DemoConfig
    loads: dict            # phase name -> (its config, the load generator's "done" event)
    collector_stats: dict
    cpu_cores: float | None
    load_average: float | None
    fault_start_ns: int | None
    timings: dict
    t_start: float
    progress: Callable
    telemetry: tuple = ()                   # every process's ProcessAccount
    telemetry_unreported: tuple = ()        # processes that wrote none


def _execute(*, workdir: Path, store: Path, seed: int, degradations, p_affected: float, phases: list[_Phase],
             rate_per_s: float, max_in_flight: int, counts: dict, on_progress) -> _Run:
    """Operate a run under a supervisor that stops every process, whatever happens."""
    n_total = sum(p.n_requests for p in phases)
    t_start = time.perf_counter()

    def progress(phase: str, message: str, sent: int = 0):
        if on_progress is not None:
            on_progress(DemoProgress(phase, message, sent, n_total, time.perf_counter() - t_start))

    timings: dict[str, float] = {}
    supervisor = Supervisor(workdir / "logs", env=child_environment())
    try:
        with termination_raises():
            run = _operate(supervisor, workdir=workdir, store=store, seed=seed, degradations=degradations,
                           p_affected=p_affected, phases=phases, rate_per_s=rate_per_s, max_in_flight=max_in_flight,
                           counts=counts, timings=timings, t_start=t_start, progress=progress)
    except KeyboardInterrupt:
        supervisor.close(timeout_s=INTERRUPT_TIMEOUT_S)
        raise
    finally:
        supervisor.close(timeout_s=STOP_TIMEOUT_S)
    return run


def _operate(supervisor: Supervisor, *, workdir: Path, store: Path, seed: int, degradations, p_affected: float,
             phases: list[_Phase], rate_per_s: float, max_in_flight: int, counts: dict, timings: dict,
             t_start: float, progress) -> _Run:
    """Start the collector and the services, run each phase's load, stop everything in order."""
    from ._catalog import create_databases

    python, me = sys.executable, str(os.getpid())
    progress("starting", "starting the collector and the services")
    databases = create_databases(workdir / "db", seed=seed)
    collector = supervisor.spawn("collector", [python, "-m", "tracesleuth.demo._collector", "--store", str(store),
                                               "--parent-pid", me], events=True)
    collector_url = supervisor.wait_event(collector, "ready", STARTUP_TIMEOUT_S)["url"]

    sockets = {s: [] for s in LIVE_SERVICES}
    services: dict[str, list] = {s: [] for s in LIVE_SERVICES}
    try:
        for s in LIVE_SERVICES:
            sockets[s] = [_listen() for _ in range(counts[s])]
        config = DemoConfig(
            seed=seed, collector_url=collector_url, degradations=tuple(degradations), n_requests=phases[0].n_requests,
            rate_per_s=rate_per_s, p_affected=p_affected, max_in_flight=max_in_flight, databases=databases,
            fault_hits_dir=str(workdir / FAULT_HITS_DIR) if any(p.fault for p in phases) else "",
            telemetry_dir=str(workdir / TELEMETRY_DIR),
            instances={s: [f"http://127.0.0.1:{k.getsockname()[1]}" for k in socks] for s, socks in sockets.items()})
        config_path = config.write(workdir / "config.json")
        for s, socks in sockets.items():
            for k, sock in enumerate(socks):
                services[s].append(supervisor.spawn(
                    f"{s}-{k}", [python, "-m", "tracesleuth.demo.service", "--config", str(config_path), "--service",
                                 s, "--index", str(k), "--fd", str(sock.fileno()), "--parent-pid", me],
                    pass_fds=(sock.fileno(),)))
    finally:
        for socks in sockets.values():      # the services hold their own copies
            for sock in socks:
                sock.close()
    _wait_healthy(supervisor, [u for urls in config.instances.values() for u in urls], STARTUP_TIMEOUT_S)
    timings["startup_s"] = time.perf_counter() - t_start

    t = time.perf_counter()
    watched = [collector, *(c for cs in services.values() for c in cs)]
    cpu_start = supervisor.cpu_seconds(watched)
    loads: dict[str, tuple] = {}
    fault_start_ns = None
    sent_before = 0
    for phase in phases:
        if phase.fault is not None:
            _switch_fault(config.instances[phase.fault.service], phase.fault)
            fault_start_ns = time.time_ns()
        single = len(phases) == 1
        suffix = "" if single else f"-{phase.name}"
        phase_config = dataclasses.replace(config, n_requests=phase.n_requests,
                                           labels_path=str(workdir / f"labels{suffix}.csv"),
                                           injections_path=str(workdir / f"injections{suffix}.csv"))
        phase_path = phase_config.write(workdir / f"config{suffix}.json")
        what = "" if single else f"{phase.name} phase{' (fault on)' if phase.fault else ''}: "
        progress("load", f"{what}sending {phase.n_requests:,} requests at {rate_per_s:g}/s", sent_before)
        loadgen = supervisor.spawn(f"load-generator{suffix}", [python, "-m", "tracesleuth.demo.loadgen", "--config",
                                                               str(phase_path), "--parent-pid", me], events=True)
        loadgen.expected_exit = True
        offset = sent_before
        load = _follow_load(supervisor, loadgen, deadline_s=phase.n_requests / rate_per_s + 120,
                            on_event=lambda ev: progress("load", f"{what}sending requests", offset + ev.get("sent", 0)))
        loadgen.process.wait(timeout=STOP_TIMEOUT_S)
        if loadgen.process.returncode != 0:
            raise DemoError(f"the load generator exited with code {loadgen.process.returncode}; its log "
                            f"{loadgen.log_path} ends with:\n{loadgen.log_tail()}")
        loads[phase.name] = (phase_config, load)
        sent_before += int(load.get("sent", 0))
    cpu_end = supervisor.cpu_seconds(watched)
    load_average = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    timings["load_s"] = time.perf_counter() - t
    cpu_cores = None
    if cpu_start is not None and cpu_end is not None and timings["load_s"] > 0:
        loadgen_cpu = sum(float(load.get("cpu_s", 0.0)) for _, load in loads.values())
        cpu_cores = round((cpu_end - cpu_start + loadgen_cpu) / timings["load_s"], 3)

    t = time.perf_counter()
    progress("flushing", "flushing the exporters and stopping the services", sent_before)
    time.sleep(DRAIN_S)
    # Callers before callees (STOP_WAVES), so that no call is left without its callee; each
    # service exports its last spans as it stops, and the collector, stopped last, writes them
    # all to the store.
    for wave in STOP_WAVES:
        supervisor.stop([c for s in wave for c in services[s]], timeout_s=STOP_TIMEOUT_S)
    supervisor.stop([collector], timeout_s=STOP_TIMEOUT_S * 2)
    stopped = _last_event(supervisor, collector, "stopped") or {}
    timings["flush_s"] = time.perf_counter() - t
    failed = [c.name for cs in services.values() for c in cs if c.returncode != 0]
    if collector.returncode != 0 or not stopped:
        failed.append(collector.name)
    if failed:
        raise DemoError(f"these demo processes did not stop cleanly: {', '.join(failed)} "
                        f"(logs in {supervisor.logs_dir})")
    telemetry = ProcessAccount.read_all(config.telemetry_dir)
    expected = [c.name for cs in services.values() for c in cs] + [f"{LOAD_GENERATOR}-0"] * len(loads)
    unreported = Counter(expected) - Counter(a.instance for a in telemetry)
    return _Run(workdir=workdir, store=store, config=config, loads=loads, collector_stats=stopped.get("stats", {}),
                cpu_cores=cpu_cores, load_average=load_average, fault_start_ns=fault_start_ns, timings=timings, t_start=t_start,
                progress=progress, telemetry=telemetry, telemetry_unreported=tuple(sorted(unreported.elements())))


def _switch_fault(urls: list[str], fault: Fault) -> None:
    """Switch ``fault`` on in every instance (``urls``) of its service."""
    import httpx

    with httpx.Client(timeout=10.0) as client:
        for url in urls:
            try:
                response = client.get(url + FAULT_PATH, params={"kind": fault.kind, "delay_ns": fault.delay_ns,
                                                                 "share": fault.share})
            except httpx.HTTPError as e:
                raise DemoError(f"cannot switch the fault on in {fault.service} at {url}: {e!r}") from e
            if response.status_code != 200:
                raise DemoError(f"{fault.service} at {url} refused the fault ({response.status_code}): "
                                f"{response.text[:200]}")


def _gather_fault_hits(workdir: Path) -> Path:
    """Gather the instances' ``fault-hits/<instance>.csv`` into ``fault-hits.csv`` (in time order;
    only the header when no request was hit)."""
    import csv

    rows = []
    for part in sorted((workdir / FAULT_HITS_DIR).glob("*.csv")):
        with open(part, newline="") as f:
            reader = csv.reader(f)
            if tuple(next(reader, ())) != FAULT_HITS_COLUMNS:
                raise DemoError(f"{part}: not a fault-hits file (its header is not {', '.join(FAULT_HITS_COLUMNS)})")
            rows.extend(reader)
    rows.sort(key=lambda r: int(r[-1]))
    path = workdir / FAULT_HITS_FILE
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(FAULT_HITS_COLUMNS)
        writer.writerows(rows)
    return path


def _listen() -> socket.socket:
    """A listening socket on a free loopback port, handed to a service process."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def _wait_healthy(supervisor: Supervisor, urls: list[str], timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    pending = list(urls)
    with httpx.Client(timeout=2.0) as client:
        while pending:
            supervisor.check()
            if time.monotonic() > deadline:
                raise DemoError(f"these demo services did not answer {HEALTH_PATH} within {timeout_s:g} s: "
                                f"{', '.join(pending)} (logs in {supervisor.logs_dir})")
            still = []
            for url in pending:
                try:
                    ok = client.get(url + HEALTH_PATH).status_code == 200
                except httpx.HTTPError:
                    ok = False
                if not ok:
                    still.append(url)
            pending = still
            if pending:
                time.sleep(0.1)


def _follow_load(supervisor: Supervisor, loadgen, *, deadline_s: float, on_event) -> dict:
    """Relay the load generator's progress until it is done; DemoError when another process dies."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        ev = supervisor.next_event(loadgen, 0.5)
        supervisor.check()
        if ev is None:
            continue
        if ev.get("event") == "progress":
            on_event(ev)
        elif ev.get("event") == "done":
            return ev
        elif ev.get("event") == "eof":
            loadgen.process.wait(timeout=10)
            raise DemoError(f"the load generator exited (code {loadgen.process.returncode}) before it was done; "
                            f"its log {loadgen.log_path} ends with:\n{loadgen.log_tail()}")
    raise DemoError(f"the load generator did not finish within {deadline_s:.0f} s")


def _last_event(supervisor: Supervisor, child, name: str) -> dict | None:
    found = None
    while True:
        ev = supervisor.next_event(child, 0.1)
        if ev is None or ev.get("event") == "eof":
            return found
        if ev.get("event") == name:
            found = ev


def _read_labels(path):
    import polars as pl

    return pl.read_csv(path, schema_overrides={"trace_id": pl.String, "degradation": pl.String,
                                               "noise": pl.String, "latency_ns": pl.Int64})


def _load_counts(loads: dict) -> dict:
    """Requests sent, completed and failed over every phase."""
    return {k: sum(int(load.get(k, 0)) for _, load in loads.values()) for k in ("sent", "completed", "failed")}


def _health(run: _Run, labels, trace_ids, undegraded_latency_ns, *, seed: int, blurred=()):
    """The run's health from its ground truth (``labels``: every phase's rows), the trace ids
    found in the store and the requests queueing made look degraded (:func:`blurred_requests`)."""
    import polars as pl

    counts = _load_counts(run.loads)
    rate = float(run.config.rate_per_s)
    achieved = min((achieved_rate(lab["scheduled_ns"].to_numpy(), lab["sent_ns"].to_numpy(), rate)
                    for lab in (labels.filter(pl.col("phase") == name) for name in run.loads)), default=0.0)
    answered = labels.filter((pl.col("status") == 200) & pl.col("trace_id").is_not_null())["trace_id"]
    lost = int((~answered.is_in(pl.Series(list(trace_ids), dtype=pl.String).implode())).sum())
    planned = sum(cfg.n_requests for cfg, _ in run.loads.values())
    return assess_run(planned=planned, sent=counts["sent"], completed=counts["completed"], failed=counts["failed"],
                      analysed=len(trace_ids), lost=lost, rate_per_s=rate, achieved_rate_per_s=achieved,
                      undegraded_latency_ns=undegraded_latency_ns, seed=seed, cpu_cores=run.cpu_cores,
                      load_average=run.load_average, blurred=blurred, telemetry=run.telemetry,
                      telemetry_unreported=run.telemetry_unreported)


def _all_labels(run: _Run):
    import polars as pl

    return pl.concat([_read_labels(cfg.labels_path).with_columns(pl.lit(name).alias("phase"))
                      for name, (cfg, _) in run.loads.items()])


def _analyse(run: _Run, *, report_path, seed, generations, duration_s, noised, interval) -> DemoResult:
    import numpy as np
    import polars as pl

    from ..analyses.patterns import LatencyDegradationPatterns
    from ..evaluation.protocols.patterns import ESTIMATOR_PARAMS
    from ..report.sections.patterns import build_patterns_report
    from ..analyses.metrics import labels_for, match_clusters
    from ..io import read_spans
    from ..model import build_trace_table
    from ._report import live_run_section

    config, timings = run.config, run.timings
    counts = _load_counts(run.loads)
    t = time.perf_counter()
    run.progress("analysing", "finding the latency degradation patterns", counts["sent"])
    spans = read_spans(run.store)
    table = build_trace_table(spans, ENDPOINT)
    labels = _all_labels(run)
    known = labels.filter(pl.col("trace_id").is_not_null())
    label_map = dict(zip(known["trace_id"].to_list(), known["degradation"].to_list()))
    names = [d.name for d in config.degradations]
    shown = tuple(LiveDegradation(d) for d in config.degradations)       # live names, for the user
    truth = labels_for(table, label_map)
    bounds = None
    affected = np.array([t is not None for t in truth])
    latency = table.frame["latency_ns"].to_numpy()
    if interval == "affected" and affected.any():
        bounds = (int(latency[affected].min()), int(latency[affected].max()) + 1)
    estimator = LatencyDegradationPatterns(random_state=seed, generations=generations, interval=bounds,
                                           **ESTIMATOR_PARAMS).fit(table)
    match = match_clusters(truth, estimator.labels_, degradations=names)
    exclusive = {rpc: table.frame[f"exclusive_ns[{rpc}]"].to_numpy() for d in shown for rpc in d.rpcs
                 if f"exclusive_ns[{rpc}]" in table.frame.columns}
    blurred = blurred_requests(exclusive, truth, [(d.name, d.rpcs) for d in shown], recovery_f_score=RECOVERY_F_SCORE)
    health = _health(run, labels, table.frame["trace_id"].to_list(), latency[~affected], seed=seed, blurred=blurred)
    timings["analysis_s"] = time.perf_counter() - t

    res = estimator.result_
    words = {s.index: s.words for s in res.sub_intervals}
    load_config = run.loads["load"][0]
    result = DemoResult(
        workdir=run.workdir, store_path=run.store, labels_path=Path(load_config.labels_path),
        injections_path=Path(load_config.injections_path), report_path=Path(report_path),
        requests_sent=counts["sent"], requests_completed=counts["completed"], requests_failed=counts["failed"],
        requests_analysed=table.n_requests, spans_stored=int(spans.spans.num_rows),
        affected={n: int((labels["degradation"] == n).sum()) for n in names},
        degradations=shown, endpoint=ENDPOINT,
        interval=res.interval.describe() if res.found and res.interval is not None else None,
        match_f_scores={k: float(v) for k, v in match.match_f_scores.items()},
        matched={k: int(v) for k, v in match.matched.items()},
        recovered_patterns={k: words.get(int(v)) for k, v in match.matched.items()},
        precision=match.precision, recall=match.recall, f_score=match.f_score, timings=timings, seed=seed,
        rate_per_s=float(config.rate_per_s), duration_s=float(duration_s), noised=bool(noised),
        interval_rule=interval, collector_stats=run.collector_stats, health=health,
        recovery_f_score=RECOVERY_F_SCORE)

    t = time.perf_counter()
    run.progress("report", "writing the report", counts["sent"])
    report = build_patterns_report(
        spans, table, estimator, labels=label_map, degradations={d.name: d.describe() for d in shown},
        title="Live E-Shopper demo: latency degradation patterns",
        subtitle=(f"{table.n_requests:,} homepage requests at {config.rate_per_s:g}/s through "
                  f"{sum(len(v) for v in config.instances.values())} instrumented processes of "
                  f"{len(config.instances)} services; "
                  f"seed {seed}{', noised' if noised else ''}."),
        solver_settings={"seed": seed, "generations": generations, "attributes": "exclusive times only",
                         "interval rule": INTERVAL_RULES[interval]})
    report.insert(0, live_run_section(health, result.outcome()))
    report.write(report_path)
    timings["report_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - run.t_start
    run.progress("done", f"report written to {report_path}", result.requests_sent)
    return result


def _analyse_incident(run: _Run, *, fault: Fault, report_path, seed, duration_s) -> IncidentResult:
    import pyarrow as pa
    import pyarrow.compute as pc

    from .. import __version__
    from ..analyses import ReportContext, get_analysis
    from ..io import read_spans
    from ..model import build_trace_table
    from ..report import Report, input_section
    from ._report import live_run_section

    config, timings = run.config, run.timings
    counts = _load_counts(run.loads)
    t = time.perf_counter()
    run.progress("analysing", "comparing the problem period with the baseline", counts["sent"])
    spans = read_spans(run.store)
    labels = _all_labels(run)
    tables = {}
    for name in run.loads:
        ids = labels.filter((labels["phase"] == name) & labels["trace_id"].is_not_null())["trace_id"].to_list()
        phase_spans = spans.spans.filter(pc.is_in(spans.spans.column("trace_id"), value_set=pa.array(ids, pa.string())))
        tables[name] = build_trace_table(phase_spans, ENDPOINT)
    spec = get_analysis("compare")
    estimator = spec.load("estimator")(random_state=seed).fit(tables["problem"], tables["baseline"])
    comparison = estimator.result_
    services = tuple(s.to_dict() for s in comparison.services)
    ranked = [s["service"] for s in services]
    health = _health(run, labels, [*tables["baseline"].frame["trace_id"], *tables["problem"].frame["trace_id"]],
                     tables["baseline"].frame["latency_ns"].to_numpy(), seed=seed)
    timings["analysis_s"] = time.perf_counter() - t
    result = IncidentResult(
        workdir=run.workdir, store_path=run.store, report_path=Path(report_path),
        labels_paths={name: Path(cfg.labels_path) for name, (cfg, _) in run.loads.items()}, fault=fault,
        fault_start_ns=int(run.fault_start_ns or 0),
        requests={name: table.n_requests for name, table in tables.items()}, endpoint=ENDPOINT, services=services,
        injected_rank=ranked.index(fault.service) + 1 if fault.service in ranked else None,
        significant=comparison.significant, timings=timings, seed=seed, rate_per_s=float(config.rate_per_s),
        duration_s=float(duration_s), health=health, collector_stats=run.collector_stats,
        fault_hits_path=_gather_fault_hits(run.workdir))

    t = time.perf_counter()
    run.progress("report", "writing the report", counts["sent"])
    report = Report("Live E-Shopper incident: what changed?",
                    subtitle=(f"{tables['baseline'].n_requests:,} baseline and {tables['problem'].n_requests:,} "
                              f"problem requests to {ENDPOINT} at {config.rate_per_s:g}/s; the fault: "
                              f"{fault.describe()}; seed {seed}."),
                    footer=f"tracesleuth {__version__} - {spec.paper}")
    for section in spec.load("section")(estimator, ReportContext(spans, tables["problem"], settings={"seed": seed})):
        report.add(section)
    live = live_run_section(health, result.outcome(), tables=tables, fault=fault, fault_start_ns=result.fault_start_ns)
    # "What changed" opens the report, unless the run is no result: then that comes first.
    report.insert(0 if result.outcome().status == "broken" else len(report.sections), live)
    report.add(input_section(spans, tables["problem"]))
    report.write(report_path)
    timings["report_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - run.t_start
    run.progress("done", f"report written to {report_path}", counts["sent"])
    return result


__all__ = ["DEFAULT_DURATION_S", "DEFAULT_INSTANCES", "DEFAULT_RATE_PER_S", "ENDPOINT", "DemoProgress", "run_demo",
           "run_incident"]
