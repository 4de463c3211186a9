"""What the demo's processes agree on: the live services and what each serves, the run
configuration, the baggage keys that mark a request, the query parameters of a call, the
telemetry set-up (which counts what becomes of every span and log record: :mod:`._telemetry`,
:mod:`._account`) and the child environment.

Nothing here imports the analysis: the service and load-generator processes import this module
and :mod:`tracesleuth.evaluation.eshopper` (the call tree, the execution times and the
degradations), nothing else of tracesleuth.

The live shop's services
------------------------
The simulator reproduces the paper's E-Shopper: "13 calls of 8 unique RPCs among 5
microservices" (:data:`~tracesleuth.evaluation.eshopper.SERVICES`), where ``items-service``
serves the category items, the featured items and the "recommended items" carousel. The live
shop is asked for at least 6 services (a gateway calling profile, recommended items, cart,
categories, featured items...), so it deploys the same call tree on **6** services: the
carousel's ``getrecommended`` is served by a ``recommendation-service`` of its own (with its
own database), ``items-service`` keeping ``finditems`` and ``findfeaturesitems``
(:data:`LIVE_SERVICE`, :data:`LIVE_SERVICES`). The call tree, the execution-time laws and the
degradations stay the simulator's, keyed by its RPCs (``"items-service:getrecommended"``), so a
live run and a simulated session of one seed inject the same delays into the same calls; only
the deployment differs: which process serves a call, where calls are routed
(:attr:`DemoConfig.instances`, :attr:`DemoConfig.databases`), and the names in telemetry and
ground truth. Everything the analysis and the user see - span service names, ``injections.csv``,
the degradations' descriptions in the report and the summary - uses the live names
(:func:`live_rpc`, :class:`LiveDegradation`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..evaluation.eshopper import HOMEPAGE_CALLS, RPCS, Degradation

#: The live shop's service of the "recommended items" carousel (``getrecommended``).
RECOMMENDATION_SERVICE = "recommendation-service"
#: Live service serving each RPC of the simulator's call tree, ``{"service:operation": service}``
#: (every RPC is served by its simulated service, but the carousel's, see the module's docstring).
LIVE_SERVICE: dict[str, str] = {
    rpc: RECOMMENDATION_SERVICE if rpc == "items-service:getrecommended" else rpc.split(":", 1)[0] for rpc in RPCS}
#: The 6 live services, in the order of their first call in a homepage request.
LIVE_SERVICES: tuple[str, ...] = tuple(dict.fromkeys(LIVE_SERVICE[c.rpc] for c in HOMEPAGE_CALLS))


def live_rpc(rpc: str) -> str:
    """The live ``"service:operation"`` key of a simulator RPC key (what the spans carry).

    >>> live_rpc("items-service:getrecommended"), live_rpc("cart-service:getcart")
    ('recommendation-service:getrecommended', 'cart-service:getcart')
    """
    return f"{LIVE_SERVICE[rpc]}:{rpc.split(':', 1)[1]}"


def call_service(call: int) -> str:
    """The live service serving call ``call`` of :data:`~tracesleuth.evaluation.eshopper.HOMEPAGE_CALLS`."""
    return LIVE_SERVICE[HOMEPAGE_CALLS[call].rpc]


@dataclass(frozen=True)
class LiveDegradation:
    """A degradation as the live shop shows it: the same definition, its RPCs under their live names.

    The services inject :attr:`degradation` (keyed by the simulator's RPCs); what a user reads -
    the report's ground truth, the demo summary, :meth:`DemoResult.to_dict
    <tracesleuth.demo.DemoResult.to_dict>` - comes from this view.

    Attributes
    ----------
    degradation : Degradation
        The definition injected (:func:`~tracesleuth.evaluation.eshopper.draw_degradations`).
    """

    degradation: Degradation

    @property
    def name(self) -> str:
        return self.degradation.name

    @property
    def type(self) -> int:
        return self.degradation.type

    @property
    def noised(self) -> bool:
        return self.degradation.noised

    @property
    def rpcs(self) -> tuple[str, ...]:
        """The delayed RPCs, live ``"service:operation"`` keys."""
        return tuple(live_rpc(r) for r in self.degradation.rpcs)

    @property
    def deviating_rpc(self) -> str | None:
        d = self.degradation.deviating_rpc
        return None if d is None else live_rpc(d)

    @property
    def async_rpc(self) -> str | None:
        a = self.degradation.async_rpc
        return None if a is None else live_rpc(a)

    def to_dict(self) -> dict:
        """``name``, ``rpcs``, ``deviating_rpc``, ``async_rpc`` with live names (for display; the
        simulator's definition is ``self.degradation.to_dict()``)."""
        return {"name": self.name, "rpcs": list(self.rpcs), "deviating_rpc": self.deviating_rpc,
                "async_rpc": self.async_rpc}

    def describe(self) -> str:
        """:meth:`Degradation.describe <tracesleuth.evaluation.eshopper.Degradation.describe>` with
        live names, e.g. ``"A1 (type 1): +50 ms in recommendation-service:getrecommended"``."""
        return describe_live(self.degradation)


def describe_live(degradation: Degradation) -> str:
    """``degradation.describe()`` with every RPC under its live name.

    >>> describe_live(Degradation("A1", ("cart-service:getcart", "items-service:getrecommended")))
    'A1 (type 2): +50 ms in cart-service:getcart, recommendation-service:getrecommended'
    """
    return degradation.describe(live_rpc)

#: W3C baggage entry naming the degradation a request is marked with (``A1``, ``A2``); absent
#: for a request that carries none. Set by the load generator, read by every service.
BAGGAGE_DEGRADATION = "tracesleuth.degradation"
#: Baggage entry set (value ``"1"``) when the request's first-noise coin came up (60 ms instead
#: of 50 ms in the deviating RPC of a noised degradation).
BAGGAGE_DEVIATE = "tracesleuth.noise.deviation"
#: Baggage entry set (value ``"1"``) when the request's second-noise coin came up (100 ms more
#: in the asynchronous RPC of a noised degradation).
BAGGAGE_ASYNC_NOISE = "tracesleuth.noise.async"
BAGGAGE_KEYS = (BAGGAGE_DEGRADATION, BAGGAGE_DEVIATE, BAGGAGE_ASYNC_NOISE)

#: Query parameter naming the call of :data:`~tracesleuth.evaluation.eshopper.HOMEPAGE_CALLS` a
#: request to a service is (a degradation delays the first call of an RPC only).
CALL_PARAM = "call"
#: Query parameter with the signed-in user of the homepage request.
USER_PARAM = "user"
#: Query parameter with the rank of the call among its parent's calls of the same RPC
#: (the category panel, the carousel slide).
RANK_PARAM = "rank"

#: Path on which a service instance switches the incident mode's fault on or off (not traced):
#: ``GET /_fault?kind=slow-handler&delay_ns=30000000``, ``GET /_fault?kind=exception&share=0.5``;
#: ``kind=none`` switches it off.
FAULT_PATH = "/_fault"
#: The incident mode's faults that add a delay to every request of the faulty service: a slower
#: handler (its server spans' self time grows) or network delay on the calls into it (the gap
#: between its callers' client spans and its server spans grows, as a delay on its network
#: interface would add). Their size is :attr:`Fault.delay_ns`.
DELAY_FAULTS = ("slow-handler", "network-delay")
#: The code faults, which hit a share (:attr:`Fault.share`) of the faulty service's requests and
#: leave the evidence that the recorded code faults of Nezha leave (``exception`` and ``return``):
#: ``exception``, the handler raises (its server span gets the ``exception`` event and status
#: error, its caller an HTTP 500, which it handles: an ERROR log record and a degraded answer);
#: ``early-return``, the handler returns without its last downstream call, or without its database
#: query when it makes no call, and without the log statement of that path, with no error: visible
#: only in the structure of the trace and in the logs.
CODE_FAULTS = ("exception", "early-return")
#: CPU contention in the faulty service's instances: a thread of theirs burns :attr:`Fault.share`
#: of a core in a busy loop (every request they serve waits for the CPU, and for Python's GIL).
CPU_FAULTS = ("cpu-burn",)
#: Every fault the incident mode injects into one service.
FAULT_KINDS = DELAY_FAULTS + CODE_FAULTS + CPU_FAULTS
#: The faults whose size is a share (:attr:`Fault.share`): of the requests (the code faults), of a
#: core (``cpu-burn``).
SHARE_FAULTS = CODE_FAULTS + CPU_FAULTS
#: Default :attr:`Fault.share`: half of the requests hit by a code fault, so that the problem
#: period holds both the faulty and the normal path of every operation (as the recorded code
#: faults do: Nezha's ``exception`` pods still answer some requests normally), and half a core
#: burnt by ``cpu-burn`` (a contention that the demo's default load, under half a core for the
#: whole shop, feels).
DEFAULT_FAULT_SHARE = 0.5
#: Columns of the code faults' ground truth (:attr:`DemoConfig.fault_hits_dir`): one row per
#: request a code fault hit, naming the faulty service's server span and what the fault did.
FAULT_HITS_COLUMNS = ("trace_id", "span_id", "service", "instance", "operation", "call", "kind", "skipped", "time_ns")


@dataclass(frozen=True)
class Fault:
    """The one fault an incident run injects into one service from the problem phase on.

    Attributes
    ----------
    service : str
        One of :data:`LIVE_SERVICES`.
    kind : {"slow-handler", "network-delay", "exception", "early-return", "cpu-burn"}
        :data:`FAULT_KINDS`.
    delay_ns : int
        Added to every request the service handles (slow handler), or before each request
        reaches it (network delay), ns; 0 for the other kinds.
    share : float, default=1.0
        In (0, 1]: the share of the service's requests a code fault hits (:data:`CODE_FAULTS`),
        or of a core that ``cpu-burn`` burns in each of its instances; 1.0 for the delay faults
        (every request).
    """

    service: str
    kind: str
    delay_ns: int
    share: float = 1.0

    def describe(self) -> str:
        """In words, e.g. ``"+30 ms in every handler of cart-service (a slower handler)"``."""
        from ..units import format_duration_ns

        percent = f"{self.share:.0%}"
        if self.kind == "exception":
            return (f"an exception in the handler of {self.service} for {percent} of its requests "
                    "(its callers get HTTP 500 and carry on)")
        if self.kind == "early-return":
            return (f"an early return in the handler of {self.service} for {percent} of its requests "
                    "(a downstream call or its database query skipped, no error)")
        if self.kind == "cpu-burn":
            return f"a busy thread burning {percent} of a core in every instance of {self.service}"
        delay = format_duration_ns(self.delay_ns)
        if self.kind == "network-delay":
            return f"+{delay} of network delay on every call into {self.service}"
        return f"+{delay} in every handler of {self.service} (a slower handler)"

    def to_dict(self) -> dict:
        return {"service": self.service, "kind": self.kind, "delay_ns": self.delay_ns, "share": self.share,
                "description": self.describe()}


#: Service name of the load generator's own spans (the client side of each homepage request).
LOAD_GENERATOR = "load-generator"
#: Path every service answers 200 on once it serves (not traced).
HEALTH_PATH = "/healthz"

#: Environment variables the instrumentations read that would change what the demo records
#: (propagators, header capture, an exporter or the SDK switched off): cleared in every child.
_CLEARED_PREFIXES = ("OTEL_",)


@dataclass(frozen=True)
class ExportSettings:
    """BatchSpanProcessor and OTLP exporter settings of every demo process.

    The queue is far beyond what the demo's rate needs: the busiest process, ``web-service``,
    records 12 spans and 2 log records per homepage request, 96 spans a second at the default 8
    requests/s, so 65,536 queued spans are 680 s of export stalled outright, where one export
    gives up after ``export_timeout_millis`` (10 s; the SDK's default queue, 2,048, would still
    hold 21 s). A queue-full drop is thus not expected; were there one, it is counted, never
    silent (:class:`._account.SignalAccount`).

    Attributes
    ----------
    schedule_delay_millis : int
        Longest wait between two exports, in ms.
    max_queue_size : int
        Spans buffered at most before new ones are dropped.
    max_export_batch_size : int
        Spans per OTLP request at most.
    export_timeout_millis : int
        Time allowed to one export, in ms.
    """

    schedule_delay_millis: int = 1000
    max_queue_size: int = 65536
    max_export_batch_size: int = 1024
    export_timeout_millis: int = 10_000


@dataclass(frozen=True)
class DemoConfig:
    """Everything a child process of a demo run needs, written once as ``config.json``.

    Attributes
    ----------
    seed : int
        Seed of the degradations, the marking and every execution-time draw.
    collector_url : str
        Base URL of the receiver (OTLP/HTTP spans at ``/v1/traces``, log records at ``/v1/logs``).
    instances : dict of str to list of str
        Base URL of each instance of each live service (:data:`LIVE_SERVICES`).
    degradations : tuple of Degradation
        The degradations injected (A1, A2), keyed by the simulator's RPCs as the services
        inject them.
    n_requests : int
        Homepage requests the load generator sends.
    rate_per_s : float
        Requests per second it sends them at.
    p_affected : float
        Probability that a request is marked with A1, and (exclusively) with A2.
    max_in_flight : int
        Requests the load generator has in flight at most.
    request_timeout_s : float
        Timeout of one request, in seconds.
    databases : dict of str to str
        SQLite database file of each live service that has one.
    labels_path, injections_path : str
        Where the load generator writes the ground truth.
    export : ExportSettings
    fault_hits_dir : str
        Directory where each service instance writes, as it stops, the requests a code fault hit
        (:data:`FAULT_HITS_COLUMNS`, one ``<instance>.csv`` each): the incident mode's ground
        truth, beside the store, never in a span or a log record. Empty: not written.
    telemetry_dir : str
        Directory where each process writes, as it stops, what became of the spans and log
        records it recorded (:class:`._account.ProcessAccount`). Empty: not written.
    """

    seed: int
    collector_url: str
    instances: dict
    degradations: tuple
    n_requests: int
    rate_per_s: float
    p_affected: float = 0.1
    max_in_flight: int = 64
    request_timeout_s: float = 10.0
    databases: dict = field(default_factory=dict)
    labels_path: str = ""
    injections_path: str = ""
    export: ExportSettings = field(default_factory=ExportSettings)
    fault_hits_dir: str = ""
    telemetry_dir: str = ""

    def to_dict(self) -> dict:
        """JSON-safe dictionary (what :meth:`write` stores)."""
        return {"seed": self.seed, "collector_url": self.collector_url, "instances": self.instances,
                "degradations": [d.to_dict() for d in self.degradations], "n_requests": self.n_requests,
                "rate_per_s": self.rate_per_s, "p_affected": self.p_affected, "max_in_flight": self.max_in_flight,
                "request_timeout_s": self.request_timeout_s, "databases": self.databases,
                "labels_path": self.labels_path, "injections_path": self.injections_path,
                "export": self.export.__dict__, "fault_hits_dir": self.fault_hits_dir,
                "telemetry_dir": self.telemetry_dir}

    def write(self, path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2))
        return path

    @classmethod
    def read(cls, path) -> "DemoConfig":
        doc = json.loads(Path(path).read_text())
        doc["degradations"] = tuple(Degradation(**d) for d in doc["degradations"])
        doc["export"] = ExportSettings(**doc["export"])
        return cls(**doc)


def child_environment() -> dict:
    """The environment of a child process: this one's, without ``OTEL_*`` settings (so that no
    propagator, header capture or exporter set by the user changes what is recorded), with the
    stable HTTP semantic conventions and unbuffered output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED_PREFIXES)}
    env["OTEL_SEMCONV_STABILITY_OPT_IN"] = "http"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _resource(service: str, instance: str):
    """The OpenTelemetry resource of a demo process (its spans' and its log records')."""
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": service, "service.instance.id": instance,
                            "service.namespace": "eshopper-demo", "host.name": "127.0.0.1",
                            "process.pid": os.getpid()})


def make_tracer_provider(service: str, instance: str, config: DemoConfig, exporter=None):
    """A TracerProvider exporting OTLP/HTTP protobuf to the collector through a BatchSpanProcessor,
    counting what becomes of its spans.

    Parameters
    ----------
    service : str
        ``service.name`` of the process.
    instance : str
        ``service.instance.id`` of the process (the trace table's instance of its spans).
    config : DemoConfig
    exporter : opentelemetry.sdk.trace.export.SpanExporter, optional
        Default: the OTLP/HTTP exporter to ``config.collector_url + "/v1/traces"``.

    Returns
    -------
    opentelemetry.sdk.trace.TracerProvider
        Its ``counter`` attribute is the :class:`~._telemetry.TelemetryCounter` of its spans
        (:func:`_counted_pipeline`).
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

    from ._telemetry import CountingSpanProcessor

    ex = config.export
    if exporter is None:
        exporter = OTLPSpanExporter(endpoint=f"{config.collector_url}/v1/traces",
                                    timeout=ex.export_timeout_millis / 1000)
    provider = TracerProvider(resource=_resource(service, instance))
    _counted_pipeline(provider, provider.add_span_processor, CountingSpanProcessor, BatchSpanProcessor, exporter,
                      SpanExportResult.SUCCESS, ex)
    return provider


#: The OTLP/HTTP log exporter's own logger: it reports each refused batch (ERROR, at most once
#: every 20 s per message); :class:`~._telemetry.CountingExporter` counts them instead and the
#: run's health says how many (:class:`._account.ProcessAccount`).
_LOG_EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http._log_exporter"


def make_logger_provider(service: str, instance: str, config: DemoConfig, exporter=None):
    """A LoggerProvider exporting log records (OTLP/HTTP protobuf) to the collector's ``/v1/logs``.

    The records leave through a BatchLogRecordProcessor with the spans' settings
    (:class:`ExportSettings`), from a thread of their own: an export that fails (the collector
    down, or refusing logs) never holds or fails a request; it is counted
    (:func:`_counted_pipeline`) rather than printed for every batch.

    Parameters
    ----------
    service, instance : str
        As :func:`make_tracer_provider` (the same resource).
    config : DemoConfig
    exporter : opentelemetry.sdk._logs.export.LogRecordExporter, optional
        Default: the OTLP/HTTP exporter to ``config.collector_url + "/v1/logs"``.

    Returns
    -------
    opentelemetry.sdk._logs.LoggerProvider
        Its ``counter`` attribute is the :class:`~._telemetry.TelemetryCounter` of its log records.
    """
    import logging

    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExportResult

    from ._telemetry import CountingLogRecordProcessor

    ex = config.export
    if exporter is None:
        logging.getLogger(_LOG_EXPORTER_LOGGER).setLevel(logging.CRITICAL)
        exporter = OTLPLogExporter(endpoint=f"{config.collector_url}/v1/logs", timeout=ex.export_timeout_millis / 1000)
    provider = LoggerProvider(resource=_resource(service, instance))
    _counted_pipeline(provider, provider.add_log_record_processor, CountingLogRecordProcessor,
                      BatchLogRecordProcessor, exporter, LogRecordExportResult.SUCCESS, ex)
    return provider


def _counted_pipeline(provider, add_processor, counting_processor, batch_processor, exporter, success,
                      settings: ExportSettings) -> None:
    """Give ``provider`` a counting processor, then a batch processor exporting through a counting
    exporter, both writing into one :class:`~._telemetry.TelemetryCounter`: ``provider.counter``.

    The counting processor comes first, so that it sees every item the batch processor is handed
    (and may drop). One rule for spans and log records alike.
    """
    from ._telemetry import CountingExporter, TelemetryCounter

    counter = TelemetryCounter()
    add_processor(counting_processor(counter))
    add_processor(batch_processor(
        CountingExporter(exporter, counter, success=success), schedule_delay_millis=settings.schedule_delay_millis,
        max_queue_size=settings.max_queue_size, max_export_batch_size=settings.max_export_batch_size,
        export_timeout_millis=settings.export_timeout_millis))
    provider.counter = counter


def watch_parent(parent_pid: int, *, interval_s: float = 0.5, grace_s: float = 5.0) -> None:
    """Stop this process when its parent dies (even by SIGKILL, when no clean-up could run).

    A daemon thread polls the parent pid; once this process has been re-parented it sends
    itself SIGTERM (a graceful stop) and, if still alive ``grace_s`` later, exits at once.
    """
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(interval_s)
        print(f"demo child {os.getpid()}: parent {parent_pid} is gone, stopping", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        os._exit(3)

    if parent_pid > 0:
        threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def emit(event: str, **fields) -> None:
    """One JSON line on stdout, the way children report to the supervisor."""
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()
