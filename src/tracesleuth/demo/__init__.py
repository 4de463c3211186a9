"""The live demo: a traced microservice shop with injected latency degradations, analysed.

:func:`run_demo` reproduces the set-up of Section 4 of Cortellessa and Traini (ICPE 2020) with
real processes instead of the simulator (:mod:`tracesleuth.evaluation.eshopper`), from the
same definitions (the homepage call tree, the execution-time laws, the degradations A1/A2 and
their marking):

* the **shop**: 6 services serving the homepage request's call tree - the gateway
  (``web-service``) calling ``account-service`` (profile), ``cart-service``,
  ``categories-service`` (categories and brands), ``items-service`` (category and featured
  items; two instances) and ``recommendation-service`` (the "recommended items" carousel, which
  the paper's 5-service E-Shopper and the simulator leave in the items service; see
  :mod:`._protocol`) - each instance an OS process serving HTTP on 127.0.0.1 (Starlette,
  uvicorn), calling the others with httpx, every service but the gateway querying its own
  SQLite database (:mod:`tracesleuth.demo.service`);
* **telemetry**: the OpenTelemetry SDK in every process, with the ASGI, httpx and sqlite3
  auto-instrumentations, exporting OTLP/HTTP protobuf through a BatchSpanProcessor to
  tracesleuth's own receiver (:mod:`tracesleuth.collector`), which writes the span store;
* **fault injection**: the load generator (:mod:`tracesleuth.demo.loadgen`) marks about a
  tenth of the homepage requests A1 and a tenth A2 in W3C baggage; OpenTelemetry's propagation
  carries the mark through every call, and each service adds the delays the degradation
  defines to its calls (50 ms per RPC; the noises of Section 4.3 when asked). The ground truth
  goes to ``labels.csv`` beside the store, never into a span;
* **analysis**: :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns` on the stored spans,
  scored against the ground truth with Section 4.3's metrics, and the HTML report;
* **a result, or not**: the load generator's failures and achieved rate, the queueing of the
  undegraded requests and the CPU the run used (:class:`RunHealth`) decide whether the run is a
  result at all; :meth:`DemoResult.outcome` says "recovered", "not recovered" or "broken"
  (naming the cause), and ``tracesleuth demo`` exits non-zero unless recovered.

:func:`run_incident` runs the same shop through an incident instead: a baseline phase, then one
fault in one service (a slower handler, network delay on the calls into it, an exception or an
early return in its handler for a share of its requests, or a thread burning CPU in it), compared
with the request-flow comparison (Sambasivan et al., NSDI 2011), whose "What changed" opens the
report. The services also send their log records, with trace context, to the collector, and
record the exceptions they raise on their spans (status error, an ``exception`` event).

Processes are started in one process group and always stopped, also on Ctrl-C, SIGTERM or an
error (:mod:`._supervisor`).

Examples
--------
>>> from tracesleuth.demo import run_demo
>>> result = run_demo(duration_s=60, rate_per_s=8, seed=1)             # doctest: +SKIP
>>> result.recovered()                                                   # doctest: +SKIP
{'A1': True, 'A2': True}
>>> run_incident("cart-service", duration_s=60).top_service              # doctest: +SKIP
'cart-service'
"""

from ._protocol import (
    BAGGAGE_ASYNC_NOISE,
    BAGGAGE_DEGRADATION,
    BAGGAGE_DEVIATE,
    BAGGAGE_KEYS,
    CODE_FAULTS,
    DEFAULT_FAULT_SHARE,
    DELAY_FAULTS,
    FAULT_KINDS,
    Fault,
    LIVE_SERVICE,
    LIVE_SERVICES,
    LiveDegradation,
    SHARE_FAULTS,
    live_rpc,
)
from ._health import RunHealth
from ._result import EXIT_BROKEN, EXIT_NOT_RECOVERED, RECOVERY_F_SCORE, DemoOutcome, DemoResult, IncidentResult
from ._run import (DEFAULT_DURATION_S, DEFAULT_FAULT_DELAY_NS, DEFAULT_INSTANCES, DEFAULT_RATE_PER_S, ENDPOINT,
                   DemoProgress, run_demo, run_incident)
from ._supervisor import DemoError, DemoInterrupted

__all__ = [
    "BAGGAGE_ASYNC_NOISE", "BAGGAGE_DEGRADATION", "BAGGAGE_DEVIATE", "BAGGAGE_KEYS", "CODE_FAULTS",
    "DEFAULT_DURATION_S", "DEFAULT_FAULT_SHARE", "DELAY_FAULTS",
    "DEFAULT_FAULT_DELAY_NS", "DEFAULT_INSTANCES", "DEFAULT_RATE_PER_S", "ENDPOINT", "EXIT_BROKEN",
    "EXIT_NOT_RECOVERED", "FAULT_KINDS", "LIVE_SERVICE", "LIVE_SERVICES", "RECOVERY_F_SCORE", "DemoError",
    "DemoInterrupted", "DemoOutcome", "DemoProgress", "DemoResult", "Fault", "IncidentResult", "LiveDegradation",
    "RunHealth", "SHARE_FAULTS", "live_rpc", "run_demo", "run_incident",
]
