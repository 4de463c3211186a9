"""``run_demo``: start the shop and the collector, load it, stop everything, analyse, report."""

from __future__ import annotations

import math
import os
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import ParameterError
from ..evaluation.eshopper import HOMEPAGE_CALLS, draw_degradations
from ._protocol import HEALTH_PATH, LIVE_SERVICES, DemoConfig, LiveDegradation, call_service, child_environment
from ._supervisor import DemoError, Supervisor, termination_raises

#: The homepage request's entry: the web service's ``gethome`` server span.
ENDPOINT = "web-service:gethome"
#: Instances of each live service (:data:`._protocol.LIVE_SERVICES`): one each, and two of the
#: items service, which serves the two asynchronous calls of a request (category and featured
#: items), as pods behind a Kubernetes service: 7 processes for 6 services.
DEFAULT_INSTANCES = {s: 2 if s == "items-service" else 1 for s in LIVE_SERVICES}
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


@dataclass(frozen=True)
class DemoResult:
    """What a live demo run did and how well the analysis recovered the injected degradations.

    Attributes
    ----------
    workdir : Path
        The run's directory (store, ground truth, report, config, databases, logs/).
    store_path : Path
        The span store the collector wrote (``tracesleuth analyze STORE -e web-service:gethome``).
    labels_path : Path
        Ground truth, one row per request: ``request, trace_id, degradation, noise, scheduled_ns,
        sent_ns, latency_ns, status``.
    injections_path : Path
        Every delay asked for: ``trace_id, degradation, service, operation, call, delay_ns, noise``.
    report_path : Path
        The HTML report, with the ground-truth section.
    requests_sent, requests_completed, requests_failed : int
        Homepage requests sent, answered 200, failed (error status, timeout, refused).
    requests_analysed : int
        Rows of the trace table (homepage requests found in the store).
    spans_stored : int
        Spans in the store.
    affected : dict of str to int
        Requests marked with each degradation.
    degradations : tuple of LiveDegradation
        A1 and A2 as injected, their RPCs under the live services' names (the simulator's
        definitions in ``.degradation``).
    endpoint : str
    interval : str or None
        The degraded latency interval the analysis chose, in words (None when nothing was found).
    match_f_scores : dict of str to float
        F-score of each degradation's best-matching pattern (Section 4.3 of Cortellessa & Traini).
    matched : dict of str to int
        The sub-interval (pattern) matched to each degradation, -1 for none.
    recovered_patterns : dict of str to str or None
        The matched pattern of each degradation in words, e.g.
        ``"web-service:gethome exclusive >= 55.2 ms"`` (None when none was matched).
    precision, recall, f_score : float
        Over both degradations (:func:`~tracesleuth.evaluation.metrics.match_clusters`).
    timings : dict of str to float
        Seconds: ``startup_s``, ``load_s``, ``flush_s``, ``analysis_s``, ``report_s``, ``total_s``.
    seed, rate_per_s, duration_s, noised, interval_rule
        The settings of the run.
    collector_stats : dict
        The receiver's final counters.
    disturbed : str or None
        Why the run is not to be trusted, when it is not: failed requests, or undegraded
        requests much slower than the services' modelled times (:func:`disturbance`: the
        machine could not keep up, so queueing delays as large as the injected ones blur the
        degradations). None for a clean run.
    """

    workdir: Path
    store_path: Path
    labels_path: Path
    injections_path: Path
    report_path: Path
    requests_sent: int
    requests_completed: int
    requests_failed: int
    requests_analysed: int
    spans_stored: int
    affected: dict
    degradations: tuple
    endpoint: str
    interval: str | None
    match_f_scores: dict
    matched: dict
    recovered_patterns: dict
    precision: float
    recall: float
    f_score: float
    timings: dict
    seed: int
    rate_per_s: float
    duration_s: float
    noised: bool
    interval_rule: str = "affected"
    collector_stats: dict = field(default_factory=dict, repr=False)
    disturbed: str | None = None

    def recovered(self, threshold: float = 0.9) -> dict:
        """``{degradation: bool}``: whether its best match reaches ``threshold`` F-score."""
        return {k: v >= threshold for k, v in self.match_f_scores.items()}

    def to_dict(self) -> dict:
        """JSON-safe dictionary (paths as strings, NaN as None)."""
        def clean(v):
            if isinstance(v, float) and math.isnan(v):
                return None
            if isinstance(v, Path):
                return str(v)
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            return v

        out = {k: clean(getattr(self, k)) for k in self.__dataclass_fields__ if k != "degradations"}
        out["degradations"] = [d.to_dict() | {"type": d.type, "description": d.describe()} for d in self.degradations]
        return out


#: A run is disturbed when its undegraded requests' latency spreads (90th percentile minus median)
#: wider than the modelled spread plus one injected delay (50 ms), or their median exceeds twice
#: the modelled one plus that delay: queueing on an overloaded machine then adds as much as a
#: degradation does, and the degraded requests can no longer be told apart.
DISTURBANCE_FACTOR = 2.0


def disturbance(undegraded_latency_ns, *, sent: int, failed: int, rate_per_s: float, seed: int) -> str | None:
    """Why a live run is not to be trusted, or None.

    Parameters
    ----------
    undegraded_latency_ns : ndarray of int64
        End-to-end latencies of the requests no degradation was injected into, ns.
    sent, failed : int
        Requests sent and failed.
    rate_per_s : float
        The load's rate (named in the advice).
    seed : int
        Seed of the modelled times (:func:`~tracesleuth.evaluation.eshopper.simulate_eshopper`
        draws the same execution-time model the live services sleep for).

    Returns
    -------
    str or None
        The reason and what to try, e.g. "undegraded requests took 2.6 s (median) where the
        services' modelled times give 52 ms: the machine could not keep up ...".
    """
    import numpy as np

    from ..evaluation.eshopper import DELAY_NS, simulate_eshopper
    from ..units import format_duration_ns

    reasons = []
    if sent and failed / sent > 0.01:
        reasons.append(f"{failed:,} of {sent:,} requests failed")
    lat = np.asarray(undegraded_latency_ns)
    if lat.size:
        expected, expected_p90 = _modelled_quantiles_ns(simulate_eshopper(n_requests=1000, random_state=seed))
        observed, observed_p90 = (float(q) for q in np.quantile(lat, [0.5, 0.9]))
        if (observed > DISTURBANCE_FACTOR * expected + DELAY_NS
                or observed_p90 - observed > expected_p90 - expected + DELAY_NS):
            reasons.append(f"undegraded requests took {format_duration_ns(observed)} (median) and "
                           f"{format_duration_ns(observed_p90)} (90th percentile) where the services' modelled "
                           f"times give {format_duration_ns(expected)} and {format_duration_ns(expected_p90)}")
    if not reasons:
        return None
    return ("; ".join(reasons) + f": the machine could not keep up with {rate_per_s:g} requests/s, and queueing as "
            "long as the injected delays blurs the degradations. Try a lower --rate, or a machine with spare CPU.")


def _modelled_quantiles_ns(session) -> tuple[float, float]:
    """Median and 90th percentile latency of the simulated session's undegraded requests, ns."""
    import numpy as np
    import polars as pl

    from ..model import build_trace_table

    table = build_trace_table(session.spans)
    labelled = [t for t, label in session.label_map().items() if label is not None]
    undegraded = (~table.frame["trace_id"].is_in(pl.Series(labelled, dtype=pl.String))).to_numpy()
    q = np.quantile(table.frame["latency_ns"].to_numpy()[undegraded], [0.5, 0.9])
    return float(q[0]), float(q[1])


def _check(name: str, value, kind, low, high=math.inf, *, low_open: bool = False):
    ok = isinstance(value, kind) and not isinstance(value, bool) and \
        (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f"({low}" if low_open else f"[{low}"
        raise ParameterError(f"The {name!r} parameter of run_demo must be {'an int' if kind is int else 'a number'} "
                             f"in the range {bound}, {high if high != math.inf else 'inf'}]. Got {value!r} instead.")


def run_demo(*, duration_s: float = 120, rate_per_s: float = 12, seed: int = 0, workdir=None, noised: bool = False,
             on_progress: Callable[[DemoProgress], None] | None = None, report_path=None,
             interval: str = "affected", instances: dict | None = None, generations: int = 400,
             max_in_flight: int = 64) -> DemoResult:
    """Run the live E-Shopper demo: real services, real traces, injected degradations, analysis.

    Starts the span receiver (:mod:`tracesleuth.collector`) and the shop's services, each its own
    process on 127.0.0.1 instrumented with the OpenTelemetry SDK; sends ``duration_s *
    rate_per_s`` homepage requests, about a tenth marked A1 and a tenth A2 through W3C baggage;
    waits for every exporter to flush and stops every process; then fits
    :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns` on the stored spans (endpoint
    ``web-service:gethome``, exclusive times only, as in the paper), scores its patterns against
    the ground truth
    (:func:`~tracesleuth.evaluation.metrics.match_clusters`) and writes the HTML report.

    The degradations are those :func:`~tracesleuth.evaluation.eshopper.draw_degradations`
    draws from ``seed`` (two different types out of 1-3 over the 6 synchronous RPCs, 50 ms per
    RPC), and request ``i`` is marked as request ``i`` of ``simulate_eshopper(random_state=seed)``.

    Parameters
    ----------
    duration_s : float, default=120
        Seconds of load, in (0, 3600].
    rate_per_s : float, default=12
        Homepage requests per second, in (0, 200].
    seed : int, default=0
        Seed of the degradations, the marking, the execution times and the analysis.
    workdir : str or Path, optional
        Directory of the run (created; must not already hold a run). Default: a new temporary
        directory, kept after the run.
    noised : bool, default=False
        Add the two noises of Section 4.3 (60 ms instead of 50 ms in one RPC, 100 ms in an
        asynchronous call, each in about half of a degradation's requests).
    on_progress : callable, optional
        Called with a :class:`DemoProgress` at each step, and about once a second during the load.
    report_path : str or Path, optional
        Where to write the HTML report. Default ``<workdir>/report.html``.
    interval : {"affected", "auto"}, default="affected"
        The degraded latency interval analysed. ``"affected"``: the paper's protocol (Section
        4.3), ``[L_min, L_max]`` of the requests marked A1 or A2 (as
        :func:`~tracesleuth.analyses.patterns.evaluation.evaluate_patterns` does). ``"auto"``: the tool's
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
    >>> result = run_demo(duration_s=30, rate_per_s=30)                       # doctest: +SKIP
    >>> result.match_f_scores                                                # doctest: +SKIP
    {'A1': 0.98, 'A2': 0.97}
    """
    if os.name != "posix":
        raise DemoError("the live demo needs a POSIX system (process groups, signals); "
                        f"this one is {os.name!r}")
    _check("duration_s", duration_s, (int, float), 0, 3600, low_open=True)
    _check("rate_per_s", rate_per_s, (int, float), 0, 200, low_open=True)
    _check("seed", seed, int, 0)
    _check("generations", generations, int, 1)
    _check("max_in_flight", max_in_flight, int, 1, 10_000)
    if interval not in INTERVALS:
        raise ParameterError(f"The 'interval' parameter of run_demo must be one of "
                             f"{', '.join(map(repr, INTERVALS))}. Got {interval!r} instead.")
    counts = dict(DEFAULT_INSTANCES if instances is None else instances)
    if set(counts) != set(LIVE_SERVICES) or any(not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 8
                                                for v in counts.values()):
        raise ParameterError(f"The 'instances' parameter of run_demo must give every service of "
                             f"{', '.join(LIVE_SERVICES)} an int in [1, 8]. Got {instances!r} instead.")
    workdir = Path(tempfile.mkdtemp(prefix="tracesleuth-demo-")) if workdir is None else Path(workdir)
    store = workdir / "store"
    if store.exists():
        raise ParameterError(f"The 'workdir' parameter of run_demo must be a directory without a previous run; "
                             f"{workdir} already holds {store}. Choose another directory.")
    workdir.mkdir(parents=True, exist_ok=True)
    report_path = Path(report_path) if report_path is not None else workdir / "report.html"
    n_requests = max(1, round(duration_s * rate_per_s))
    degradations = draw_degradations(noised=noised, random_state=seed)
    t_start = time.perf_counter()

    def progress(phase: str, message: str, sent: int = 0):
        if on_progress is not None:
            on_progress(DemoProgress(phase, message, sent, n_requests, time.perf_counter() - t_start))

    timings: dict[str, float] = {}
    supervisor = Supervisor(workdir / "logs", env=child_environment())
    try:
        with termination_raises():
            config, load, collector_stats = _operate(
                supervisor, workdir=workdir, store=store, seed=seed, degradations=degradations,
                n_requests=n_requests, rate_per_s=float(rate_per_s), max_in_flight=max_in_flight, counts=counts,
                timings=timings, t_start=t_start, progress=progress)
    except KeyboardInterrupt:
        supervisor.close(timeout_s=INTERRUPT_TIMEOUT_S)
        raise
    finally:
        supervisor.close(timeout_s=STOP_TIMEOUT_S)

    return _analyse(workdir=workdir, store=store, config=config, report_path=report_path, load=load,
                    collector_stats=collector_stats, timings=timings, t_start=t_start, progress=progress, seed=seed,
                    generations=generations, duration_s=duration_s, noised=noised, interval=interval)


def _operate(supervisor: Supervisor, *, workdir: Path, store: Path, seed: int, degradations, n_requests: int,
             rate_per_s: float, max_in_flight: int, counts: dict, timings: dict, t_start: float, progress
             ) -> tuple[DemoConfig, dict, dict]:
    """Start the collector and the services, run the load, stop everything in order.

    Returns the run's configuration, the load generator's final counts and the collector's final
    counters.
    """
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
            seed=seed, collector_url=collector_url, degradations=tuple(degradations), n_requests=n_requests,
            rate_per_s=rate_per_s, max_in_flight=max_in_flight, databases=databases,
            instances={s: [f"http://127.0.0.1:{k.getsockname()[1]}" for k in socks] for s, socks in sockets.items()},
            labels_path=str(workdir / "labels.csv"), injections_path=str(workdir / "injections.csv"))
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
    progress("load", f"sending {n_requests:,} requests at {rate_per_s:g}/s", 0)
    loadgen = supervisor.spawn("load-generator", [python, "-m", "tracesleuth.demo.loadgen", "--config",
                                                  str(config_path), "--parent-pid", me], events=True)
    loadgen.expected_exit = True
    load = _follow_load(supervisor, loadgen, deadline_s=n_requests / rate_per_s + 120,
                        on_event=lambda ev: progress("load", "sending requests", ev.get("sent", 0)))
    loadgen.process.wait(timeout=STOP_TIMEOUT_S)
    if loadgen.process.returncode != 0:
        raise DemoError(f"the load generator exited with code {loadgen.process.returncode}; its log "
                        f"{loadgen.log_path} ends with:\n{loadgen.log_tail()}")
    timings["load_s"] = time.perf_counter() - t

    t = time.perf_counter()
    progress("flushing", "flushing the exporters and stopping the services", load.get("sent", 0))
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
    return config, load, stopped.get("stats", {})


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


def _analyse(*, workdir, store, config, report_path, load, collector_stats, timings, t_start, progress, seed,
             generations, duration_s, noised, interval) -> DemoResult:
    import numpy as np
    import polars as pl

    from ..evaluation.metrics import labels_for, match_clusters
    from ..analyses.patterns.evaluation import ESTIMATOR_PARAMS
    from ..model import build_trace_table
    from ..analyses.patterns import LatencyDegradationPatterns
    from ..analyses.patterns.section import build_patterns_report
    from ..io import read_spans

    t = time.perf_counter()
    progress("analysing", "finding the latency degradation patterns", load.get("sent", 0))
    spans = read_spans(store)
    table = build_trace_table(spans, ENDPOINT)
    labels = pl.read_csv(config.labels_path, schema_overrides={"trace_id": pl.String, "degradation": pl.String,
                                                               "noise": pl.String})
    labels = labels.filter(pl.col("trace_id").is_not_null())
    label_map = dict(zip(labels["trace_id"].to_list(), labels["degradation"].to_list()))
    names = [d.name for d in config.degradations]
    shown = tuple(LiveDegradation(d) for d in config.degradations)       # live names, for the user
    truth = labels_for(table, label_map)
    bounds = None
    affected = np.array([t is not None for t in truth])
    if interval == "affected" and affected.any():
        latency = table.frame["latency_ns"].to_numpy()
        bounds = (int(latency[affected].min()), int(latency[affected].max()) + 1)
    estimator = LatencyDegradationPatterns(random_state=seed, generations=generations, interval=bounds,
                                           **ESTIMATOR_PARAMS).fit(table)
    match = match_clusters(truth, estimator.labels_, degradations=names)
    timings["analysis_s"] = time.perf_counter() - t

    t = time.perf_counter()
    progress("report", "writing the report", load.get("sent", 0))
    report = build_patterns_report(
        spans, table, estimator, labels=label_map, degradations={d.name: d.describe() for d in shown},
        title="Live E-Shopper demo: latency degradation patterns",
        subtitle=(f"{table.n_requests:,} homepage requests at {config.rate_per_s:g}/s through "
                  f"{sum(len(v) for v in config.instances.values())} instrumented processes of "
                  f"{len(config.instances)} services; "
                  f"seed {seed}{', noised' if noised else ''}."),
        solver_settings={"seed": seed, "generations": generations, "attributes": "exclusive times only",
                         "interval rule": INTERVAL_RULES[interval]})
    path = report.write(report_path)
    timings["report_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - t_start
    res = estimator.result_
    words = {s.index: s.words for s in res.sub_intervals}
    disturbed = disturbance(table.frame["latency_ns"].to_numpy()[~affected], sent=int(load.get("sent", 0)),
                            failed=int(load.get("failed", 0)), rate_per_s=float(config.rate_per_s), seed=seed)
    result = DemoResult(
        workdir=workdir, store_path=store, labels_path=Path(config.labels_path),
        injections_path=Path(config.injections_path), report_path=Path(path),
        requests_sent=int(load.get("sent", 0)), requests_completed=int(load.get("completed", 0)),
        requests_failed=int(load.get("failed", 0)), requests_analysed=table.n_requests,
        spans_stored=int(spans.spans.num_rows),
        affected={n: int((labels["degradation"] == n).sum()) for n in names},
        degradations=shown, endpoint=ENDPOINT,
        interval=res.interval.describe() if res.found and res.interval is not None else None,
        match_f_scores={k: float(v) for k, v in match.match_f_scores.items()},
        matched={k: int(v) for k, v in match.matched.items()},
        recovered_patterns={k: words.get(int(v)) for k, v in match.matched.items()},
        precision=match.precision, recall=match.recall, f_score=match.f_score, timings=timings, seed=seed,
        rate_per_s=float(config.rate_per_s), duration_s=float(duration_s), noised=bool(noised),
        interval_rule=interval, collector_stats=collector_stats, disturbed=disturbed)
    progress("done", f"report written to {path}", result.requests_sent)
    return result


__all__ = ["DEFAULT_INSTANCES", "ENDPOINT", "DemoProgress", "DemoResult", "run_demo"]
