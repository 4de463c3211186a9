"""The demo's load generator, run as its own process: ``python -m tracesleuth.demo.loadgen``.

Like the Locust user of Section 4.3 of Cortellessa and Traini, it requests the homepage
(``GET /gethome`` on the web service) at a fixed rate, open loop (a slow response does not delay
the next request), with at most ``max_in_flight`` requests outstanding. Request ``i`` is marked
as :func:`~tracesleuth.evaluation.eshopper.draw_marking` marks request ``i`` of a simulated
session with the same seed: A1 with probability 0.1, else A2 with probability 0.1, with the two
noise coins. The mark travels as W3C baggage (:data:`._protocol.BAGGAGE_DEGRADATION`), injected
by OpenTelemetry's propagators with the ``traceparent`` of the request.

The client is an httpx AsyncClient instrumented by OpenTelemetry (its spans, service
``load-generator``, are the roots of the traces, so the homepage's server span always has its
parent). The trace id of each request is read back from the ``traceparent`` header the
instrumentation wrote into it, and the ground truth goes to files of its own, never into a span:

* ``labels.csv`` - ``request, trace_id, degradation, noise, scheduled_ns, sent_ns,
  latency_ns, status``: one row per request (``degradation`` empty when none, ``status`` 0
  when no answer came);
* ``injections.csv`` - ``trace_id, degradation, service, operation, call, delay_ns, noise``:
  every delay the mark asks the services to inject
  (:meth:`~tracesleuth.evaluation.eshopper.Degradation.delays_ns`), ``service`` being the live
  service that serves the call (:func:`._protocol.live_rpc`: ``recommendation-service`` for
  ``getrecommended``), as in the spans.

Progress goes to stdout as JSON lines (``{"event": "progress", ...}``), one a second, then one
``{"event": "done", ...}`` with the counts and the CPU seconds the generator used (``cpu_s``).
SIGTERM or SIGINT stop it early; the files then hold the requests sent so far. Once its spans are
flushed it writes what became of them (:class:`._account.ProcessAccount`) into the run's
``telemetry_dir``, as every service instance does.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import signal
import sys
import time
from dataclasses import dataclass

import httpx
import numpy as np
from opentelemetry import baggage, context

from ..evaluation.eshopper import draw_marking
from ._account import ProcessAccount
from ._protocol import (
    BAGGAGE_ASYNC_NOISE,
    BAGGAGE_DEGRADATION,
    BAGGAGE_DEVIATE,
    LOAD_GENERATOR,
    USER_PARAM,
    DemoConfig,
    emit,
    live_rpc,
    make_tracer_provider,
    watch_parent,
)

GATEWAY = "web-service"
HOMEPAGE_PATH = "/gethome"
LABEL_COLUMNS = ("request", "trace_id", "degradation", "noise", "scheduled_ns", "sent_ns", "latency_ns", "status")
INJECTION_COLUMNS = ("trace_id", "degradation", "service", "operation", "call", "delay_ns", "noise")


@dataclass
class _Sent:
    request: int
    degradation: str | None
    noise: str
    scheduled_ns: int
    sent_ns: int = 0
    trace_id: str | None = None
    latency_ns: int | None = None
    status: int = 0


def trace_id_of(request: httpx.Request) -> str | None:
    """The trace id in the ``traceparent`` header the instrumentation injected into ``request``."""
    value = request.headers.get("traceparent")
    if not value:
        return None
    parts = value.split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


async def _name_span(span, request) -> None:
    span.update_name(HOMEPAGE_PATH.strip("/"))


class LoadGenerator:
    """Sends the homepage requests of one run and records the ground truth."""

    def __init__(self, config: DemoConfig):
        self.config = config
        self.degradations = config.degradations
        # No degradation (the incident mode's phases): no request is marked.
        self.marking = draw_marking(config.n_requests, n_degradations=len(self.degradations),
                                    p_affected=config.p_affected, random_state=config.seed) \
            if self.degradations else None
        self.users = np.random.default_rng([config.seed, 99]).integers(1, 1 << 20, config.n_requests)
        self.sent: list[_Sent] = []
        self.completed = self.failed = 0
        self.instance = f"{LOAD_GENERATOR}-0"
        self.provider = make_tracer_provider(LOAD_GENERATOR, self.instance, config)

    def _mark(self, i: int) -> tuple[str | None, bool, bool]:
        if self.marking is None:
            return None, False, False
        k = int(self.marking.degradation[i])
        if k < 0:
            return None, False, False
        d = self.degradations[k]
        deviate = bool(self.marking.deviate[i]) and d.deviating_rpc is not None
        async_hit = bool(self.marking.async_hit[i]) and d.async_rpc is not None
        return d.name, deviate, async_hit

    async def run(self) -> None:
        cfg = self.config
        url = cfg.instances[GATEWAY][0] + HOMEPAGE_PATH
        limits = httpx.Limits(max_connections=cfg.max_in_flight, max_keepalive_connections=cfg.max_in_flight)
        async with httpx.AsyncClient(timeout=cfg.request_timeout_s, limits=limits) as client:
            from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

            HTTPXClientInstrumentor.instrument_client(client, tracer_provider=self.provider, request_hook=_name_span)
            gate = asyncio.Semaphore(cfg.max_in_flight)
            tasks: set[asyncio.Task] = set()
            loop = asyncio.get_running_loop()
            interval = 1.0 / cfg.rate_per_s
            t0 = loop.time()
            t0_ns = time.time_ns()
            next_report = t0 + 1.0
            due = t0
            try:
                for i in range(cfg.n_requests):
                    due = max(due, loop.time())
                    await asyncio.sleep(max(0.0, due - loop.time()))
                    await gate.acquire()
                    name, deviate, async_hit = self._mark(i)
                    noise = "+".join(n for n, on in (("deviation", deviate), ("async", async_hit)) if on)
                    sent = _Sent(i, name, noise, t0_ns + int((due - t0) * 1e9))
                    self.sent.append(sent)
                    task = asyncio.create_task(self._request(client, url, sent, deviate, async_hit, gate))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    due += interval
                    if loop.time() >= next_report:
                        self._progress(loop.time() - t0)
                        next_report += 1.0
                if tasks:
                    await asyncio.wait(set(tasks), timeout=cfg.request_timeout_s + 1)
            finally:
                for task in tasks:
                    task.cancel()
                self._progress(loop.time() - t0)

    async def _request(self, client, url, sent: _Sent, deviate: bool, async_hit: bool, gate) -> None:
        ctx = context.get_current()
        if sent.degradation is not None:
            ctx = baggage.set_baggage(BAGGAGE_DEGRADATION, sent.degradation, ctx)
            if deviate:
                ctx = baggage.set_baggage(BAGGAGE_DEVIATE, "1", ctx)
            if async_hit:
                ctx = baggage.set_baggage(BAGGAGE_ASYNC_NOISE, "1", ctx)
        token = context.attach(ctx)
        sent.sent_ns = time.time_ns()
        t = time.perf_counter_ns()
        try:
            response = await client.get(url, params={USER_PARAM: int(self.users[sent.request])})
            sent.trace_id = trace_id_of(response.request)
            sent.status = response.status_code
            sent.latency_ns = time.perf_counter_ns() - t
            if response.status_code == 200:
                self.completed += 1
            else:
                self.failed += 1
        except httpx.HTTPError as e:
            self.failed += 1
            try:
                sent.trace_id = trace_id_of(e.request)
            except RuntimeError:        # no request attached to the error
                pass
        finally:
            context.detach(token)
            gate.release()

    def _progress(self, elapsed_s: float) -> None:
        emit("progress", sent=len(self.sent), completed=self.completed, failed=self.failed,
             planned=self.config.n_requests, elapsed_s=round(elapsed_s, 3))

    def write(self) -> None:
        """Write ``labels.csv`` and ``injections.csv`` (requests whose trace id is unknown are
        labelled with an empty trace id: they never reached the system)."""
        by_name = {d.name: d for d in self.degradations}
        with open(self.config.labels_path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(LABEL_COLUMNS)
            for s in self.sent:
                w.writerow((s.request, s.trace_id or "", s.degradation or "", s.noise, s.scheduled_ns, s.sent_ns,
                            "" if s.latency_ns is None else s.latency_ns, s.status))
        with open(self.config.injections_path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(INJECTION_COLUMNS)
            for s in self.sent:
                if s.degradation is None or s.trace_id is None:
                    continue
                for x in by_name[s.degradation].delays_ns(deviate="deviation" in s.noise,
                                                          async_hit="async" in s.noise):
                    service, operation = live_rpc(x.rpc).split(":", 1)
                    w.writerow((s.trace_id, s.degradation, service, operation, x.call, x.delay_ns, x.noise))


def main(argv: list[str] | None = None) -> int:
    """Send the run's requests, write the ground truth, flush the spans."""
    parser = argparse.ArgumentParser(prog="python -m tracesleuth.demo.loadgen", description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the run's config.json")
    parser.add_argument("--parent-pid", type=int, default=0, help="stop when this process is gone")
    args = parser.parse_args(argv)
    watch_parent(args.parent_pid)
    gen = LoadGenerator(DemoConfig.read(args.config))

    async def run():
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        await gen.run()

    interrupted = False
    cpu_start = time.process_time()
    try:
        asyncio.run(run())
    except (asyncio.CancelledError, KeyboardInterrupt):
        interrupted = True
    finally:
        gen.write()
        gen.provider.shutdown()
        if gen.config.telemetry_dir:
            ProcessAccount(LOAD_GENERATOR, gen.instance, gen.provider.counter.account()).write(gen.config.telemetry_dir)
    emit("done", sent=len(gen.sent), completed=gen.completed, failed=gen.failed, interrupted=interrupted,
         cpu_s=round(time.process_time() - cpu_start, 3))
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
