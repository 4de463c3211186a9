"""One service in-process (its ASGI app through httpx's ASGI transport, spans and log records in
memory): the delay a request's baggage asks for, the spans and log records it writes, no baggage
in any attribute, and the incident mode's faults."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from opentelemetry import baggage, context
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tracesleuth.demo import BAGGAGE_DEGRADATION, BAGGAGE_DEVIATE, BAGGAGE_KEYS, LIVE_SERVICES
from tracesleuth.demo._catalog import create_databases
from tracesleuth.demo._protocol import DemoConfig, make_tracer_provider
from tracesleuth.demo.service import ShopService, main
from tracesleuth.errors import ParameterError
from tracesleuth.evaluation.eshopper import FIRST_CALL, HOMEPAGE_CALLS, Degradation

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
DEGRADATIONS = (
    Degradation("A1", ("cart-service:getcart",), deviating_rpc="cart-service:getcart"),
    Degradation("A2", ("web-service:gethome", "account-service:getprofile")),
    Degradation("A3", ("items-service:getrecommended",)),
)


def _config(tmp_path) -> DemoConfig:
    """One distinct (unreachable) URL per live service."""
    instances = {s: [f"http://127.0.0.1:{9000 + k}"] for k, s in enumerate(LIVE_SERVICES)}
    return DemoConfig(seed=0, collector_url="http://127.0.0.1:9", degradations=DEGRADATIONS, n_requests=1,
                      rate_per_s=1.0, instances=instances, databases=create_databases(tmp_path, seed=0))


class _Telemetry:
    """Spans and log records of the services of a test, in memory."""

    def __init__(self):
        self.spans, self.logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))

    def service(self, config, name: str) -> ShopService:
        return ShopService(config, name, 0, tracer_provider=self.tracer_provider, logger_provider=self.logger_provider)

    def records(self) -> list:
        """``(severity text, body, attributes, trace id, span id)`` of every log record, in order."""
        return [(r.log_record.severity_text, r.log_record.body, dict(r.log_record.attributes or {}),
                 format(r.log_record.trace_id or 0, "032x"), format(r.log_record.span_id or 0, "016x"))
                for r in self.logs.get_finished_logs()]

    def clear(self) -> None:
        self.spans.clear()
        self.logs.clear()


def _running(tmp_path, name):
    telemetry = _Telemetry()
    service = telemetry.service(_config(tmp_path), name)
    yield service, telemetry.spans
    service.close()


@pytest.fixture
def cart(tmp_path):
    yield from _running(tmp_path, "cart-service")


@pytest.fixture
def recommendation(tmp_path):
    yield from _running(tmp_path, "recommendation-service")


def _get(service, path, headers=None) -> tuple[httpx.Response, float]:
    async def go():
        transport = httpx.ASGITransport(app=service.app())
        async with httpx.AsyncClient(transport=transport, base_url="http://cart") as client:
            t = time.perf_counter()
            r = await client.get(path, headers=headers or {})
            return r, time.perf_counter() - t

    return asyncio.run(go())


def _headers(**entries) -> dict:
    return {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01",
            "baggage": ",".join(f"{k}={v}" for k, v in entries.items())}


def test_injected_delay_follows_the_shared_definition(cart):
    service, _ = cart
    getcart = FIRST_CALL["cart-service:getcart"]

    def injected(**entries) -> int:
        ctx = context.get_current()
        for k, v in entries.items():
            ctx = baggage.set_baggage(k, v, ctx)
        token = context.attach(ctx)
        try:
            return service.injected_ns(getcart)
        finally:
            context.detach(token)

    assert injected() == 0
    assert injected(**{BAGGAGE_DEGRADATION: "A1"}) == 50_000_000
    assert injected(**{BAGGAGE_DEGRADATION: "A1", BAGGAGE_DEVIATE: "1"}) == 60_000_000
    assert injected(**{BAGGAGE_DEGRADATION: "A2"}) == 0            # A2 delays other RPCs
    assert injected(**{BAGGAGE_DEGRADATION: "Z9"}) == 0 and service.unknown_degradations == 1


def test_a_marked_request_is_delayed_and_traced_without_its_mark(cart):
    service, exporter = cart
    call = FIRST_CALL["cart-service:getcart"]
    r, seconds = _get(service, f"/getcart?call={call}&user=5", _headers(**{BAGGAGE_DEGRADATION: "A1"}))
    assert r.status_code == 200 and r.json()["rpc"] == "cart-service:getcart"
    assert seconds >= 0.050
    spans = exporter.get_finished_spans()
    server = [s for s in spans if s.kind is SpanKind.SERVER]
    assert [s.name for s in server] == ["getcart"]
    assert format(server[0].context.trace_id, "032x") == TRACE_ID
    assert format(server[0].parent.span_id, "016x") == PARENT_ID
    queries = [s for s in spans if s.attributes.get("db.system") == "sqlite"]
    assert queries and all(q.parent.span_id == server[0].context.span_id for q in queries)
    assert server[0].end_time - server[0].start_time >= 50_000_000
    for s in spans:
        for key, value in {**s.attributes, **s.resource.attributes}.items():
            assert not any(b in key for b in (*BAGGAGE_KEYS, "baggage")), (s.name, key)
            assert not any(m in str(value) for m in ("A1", "A2", "tracesleuth.")), (s.name, key, value)


def test_a_call_of_another_rpc_is_refused(cart):
    service, _ = cart
    r, _ = _get(service, f"/getcart?call={FIRST_CALL['account-service:getprofile']}")
    assert r.status_code == 400 and "not a call of cart-service:getcart" in r.json()["error"]
    r, _ = _get(service, "/getcart?call=x")
    assert r.status_code == 400


def test_each_live_service_serves_its_rpcs_and_calls_its_callees(tmp_path):
    config = _config(tmp_path)
    url = {s: urls[0] for s, urls in config.instances.items()}
    served, callees = {}, {}
    telemetry = _Telemetry()
    for name in LIVE_SERVICES:
        service = telemetry.service(config, name)
        served[name] = sorted(service.operations)
        callees[name] = service.callees
        service.close()
    assert served == {"web-service": ["gethome"], "items-service": ["findfeaturesitems", "finditems"],
                      "account-service": ["getprofile"], "cart-service": ["getcart"],
                      "categories-service": ["getbrands", "getcategory"],
                      "recommendation-service": ["getrecommended"]}
    assert sorted(op for ops in served.values() for op in ops) == sorted({c.operation for c in HOMEPAGE_CALLS})
    assert callees["web-service"] == sorted(url[s] for s in LIVE_SERVICES if s != "web-service")
    assert callees["recommendation-service"] == [url["account-service"]]
    assert all(not callees[s] for s in LIVE_SERVICES if s not in ("web-service", "recommendation-service"))
    with pytest.raises(ParameterError, match="recommendation-service"):
        ShopService(config, "shipping-service", 0, tracer_provider=TracerProvider())
    with pytest.raises(SystemExit):
        main(["--config", "x", "--service", "shipping-service", "--fd", "0"])


def test_the_resource_names_the_live_service(tmp_path):
    provider = make_tracer_provider("recommendation-service", "recommendation-service-0", _config(tmp_path))
    try:
        assert provider.resource.attributes["service.name"] == "recommendation-service"
    finally:
        provider.shutdown()


def test_recommendation_service_serves_the_carousel_from_its_own_database(recommendation):
    service, exporter = recommendation
    # The second slide (call 12) makes no call; A3 delays the first (call 10) only.
    r, _ = _get(service, "/getrecommended?call=12&user=5&rank=1", _headers(**{BAGGAGE_DEGRADATION: "A3"}))
    assert r.status_code == 200, r.text
    assert r.json()["rpc"] == "recommendation-service:getrecommended"
    assert r.json()["instance"] == "recommendation-service-0" and len(r.json()["rows"]) == 3
    spans = exporter.get_finished_spans()
    [server] = [s for s in spans if s.kind is SpanKind.SERVER]
    assert server.name == "getrecommended"
    [query] = [s for s in spans if s.attributes.get("db.system") == "sqlite"]
    assert "recommendations" in query.attributes.get("db.statement", "")
    token = context.attach(baggage.set_baggage(BAGGAGE_DEGRADATION, "A3"))
    try:
        assert service.injected_ns(FIRST_CALL["items-service:getrecommended"]) == 50_000_000
        assert service.injected_ns(12) == 0
    finally:
        context.detach(token)
    r, _ = _get(service, "/getrecommended?call=11")
    assert r.status_code == 400 and "not a call of recommendation-service:getrecommended" in r.json()["error"]
    r, _ = _get(service, "/finditems?call=1")
    assert r.status_code == 404


def test_the_incident_fault_switch(cart):
    service, exporter = cart
    call = FIRST_CALL["cart-service:getcart"]

    def server_ms():
        [server] = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.SERVER]
        exporter.clear()
        return (server.end_time - server.start_time) / 1e6

    r, _ = _get(service, f"/getcart?call={call}&user=5")
    assert r.status_code == 200
    base_ms = server_ms()
    # Refused settings change nothing; the switch itself is never traced.
    for bad in ("kind=slower", "kind=slow-handler&delay_ns=-1", "kind=network-delay&delay_ns=x"):
        r, _ = _get(service, f"/_fault?{bad}")
        assert r.status_code == 400 and "slow-handler" in r.text
    assert service.fault_kind is None and exporter.get_finished_spans() == ()
    # A slower handler: inside the server span (its self time grows).
    r, _ = _get(service, "/_fault?kind=slow-handler&delay_ns=80000000")
    assert r.status_code == 200 and exporter.get_finished_spans() == ()
    r, seconds = _get(service, f"/getcart?call={call}&user=5")
    assert r.status_code == 200 and seconds >= 0.080 and server_ms() >= 80 > base_ms
    # Network delay: before the telemetry sees the request, so the server span does not grow.
    _get(service, "/_fault?kind=network-delay&delay_ns=80000000")
    r, seconds = _get(service, f"/getcart?call={call}&user=5")
    assert r.status_code == 200 and seconds >= 0.080 and server_ms() < 80
    _get(service, "/_fault?kind=none")
    assert (service.fault_kind, service.fault_delay_ns) == (None, 0)


# -- log records and the incident mode's code faults ---------------------------------------------

def _switch(service, query: str) -> None:
    r, _ = _get(service, f"/_fault?{query}")
    assert r.status_code == 200, r.text


@pytest.fixture
def shop(tmp_path):
    """recommendation-service calling account-service in-process (call 10 makes one call), with
    cart-service; one telemetry for the three."""
    telemetry = _Telemetry()
    config = _config(tmp_path)
    services = {name: telemetry.service(config, name)
                for name in ("recommendation-service", "account-service", "cart-service")}
    [url] = config.instances["account-service"]
    services["recommendation-service"].clients[url] = services["recommendation-service"].client(
        url, transport=httpx.ASGITransport(app=services["account-service"].app()))
    yield services, telemetry
    for service in services.values():
        service.close()


def _server(telemetry, name: str):
    """The span of the ASGI instrumentation named ``name`` (internal when its caller runs in this
    process: the instrumentation then sees an active span)."""
    [span] = [s for s in telemetry.spans.get_finished_spans()
              if s.kind in (SpanKind.SERVER, SpanKind.INTERNAL) and s.name == name]
    return span


def _ids(span) -> tuple[str, str]:
    return format(span.context.trace_id, "032x"), format(span.context.span_id, "016x")


def test_handlers_log_with_trace_context_and_code_location(shop):
    services, telemetry = shop
    call = FIRST_CALL["cart-service:getcart"]
    r, _ = _get(services["cart-service"], f"/getcart?call={call}&user=5", _headers())
    assert r.status_code == 200
    server = _server(telemetry, "getcart")
    records = telemetry.records()
    assert [(level, body) for level, body, *_ in records] == [
        ("INFO", f"getcart: request of user 5 (call {call})"), ("INFO", "getcart: fetched 1 rows for user 5")]
    for _, _, attributes, trace_id, span_id in records:
        assert (trace_id, span_id) == _ids(server) and trace_id == TRACE_ID
        assert attributes["code.function.name"] == "handle" and attributes["code.line.number"] > 0
        assert attributes["code.file.path"].endswith("service.py")
    # Two statements, two code locations: "which statements ran" is visible per span.
    assert len({r[2]["code.line.number"] for r in records}) == 2
    assert all(s.status.status_code is StatusCode.UNSET for s in telemetry.spans.get_finished_spans())


def test_an_exception_fault_is_recorded_on_the_server_span_and_logged(shop):
    services, telemetry = shop
    cart = services["cart-service"]
    call = FIRST_CALL["cart-service:getcart"]
    _switch(cart, "kind=exception&share=1")
    r, _ = _get(cart, f"/getcart?call={call}&user=5", _headers())
    assert r.status_code == 500 and r.json()["error"].startswith("RowError: cart-service:getcart")
    server = _server(telemetry, "getcart")
    assert server.status.status_code is StatusCode.ERROR
    assert server.status.description.startswith("RowError: cart-service:getcart: row 0 of user 5")
    [event] = server.events
    assert event.name == "exception"
    assert event.attributes["exception.type"].endswith("RowError")
    assert event.attributes["exception.message"] == server.status.description.removeprefix("RowError: ")
    assert "in handle" in event.attributes["exception.stacktrace"]
    levels = [(level, body.split(":")[0]) for level, body, *_ in telemetry.records()]
    assert levels == [("INFO", "getcart"), ("INFO", "getcart"), ("ERROR", "getcart failed")]
    *_, (_, _, attributes, trace_id, span_id) = telemetry.records()
    assert (trace_id, span_id) == _ids(server)
    assert attributes["exception.type"] == "RowError" and "Traceback" in attributes["exception.stacktrace"]
    # The ground truth stays in the service (written beside the store), never in the telemetry.
    [hit] = cart.fault_hits
    assert hit[:2] == _ids(server) and hit[2:8] == ("cart-service", "cart-service-0", "getcart", call, "exception", "")
    # Off again: answers as before, nothing recorded.
    _switch(cart, "kind=none")
    telemetry.clear()
    r, _ = _get(cart, f"/getcart?call={call}&user=5", _headers())
    assert r.status_code == 200 and not _server(telemetry, "getcart").events


def test_a_caller_handles_its_callees_exception(shop):
    services, telemetry = shop
    _switch(services["account-service"], "kind=exception&share=1")
    r, _ = _get(services["recommendation-service"], "/getrecommended?call=10&user=5&rank=0", _headers())
    # The caller carries on: its answer lacks the profile, it says so, and its own span is no error.
    assert r.status_code == 200, r.text
    assert r.json()["degraded"] == ["getprofile"] and r.json()["calls"] == {"getprofile": [None]}
    caller = _server(telemetry, "getrecommended")
    [client] = [s for s in telemetry.spans.get_finished_spans() if s.kind is SpanKind.CLIENT and s.name == "getprofile"]
    callee = _server(telemetry, "getprofile")
    assert caller.status.status_code is StatusCode.UNSET and not caller.events
    assert client.parent.span_id == caller.context.span_id
    assert client.status.status_code is StatusCode.ERROR
    assert client.status.description == "HTTP 500 from account-service"
    assert 500 in (client.attributes.get("http.response.status_code"), client.attributes.get("http.status_code"))
    assert callee.parent.span_id == client.context.span_id and callee.events[0].name == "exception"
    records = telemetry.records()
    errors = [(body, span_id) for level, body, _, _, span_id in records if level == "ERROR"]
    assert errors == [("getprofile failed: " + callee.status.description.removeprefix("RowError: "), _ids(callee)[1]),
                      ("call to account-service getprofile failed: HTTP 500", _ids(caller)[1])]
    # ... and goes on to its own query and answer.
    assert ("INFO", "getrecommended: fetched 3 rows for user 5") in [(lv, b) for lv, b, *_ in records]


def test_an_early_return_skips_the_last_call_without_an_error(shop):
    services, telemetry = shop
    rec = services["recommendation-service"]
    r, _ = _get(rec, "/getrecommended?call=10&user=5&rank=0", _headers())
    assert r.status_code == 200
    normal = telemetry.records()
    telemetry.clear()
    _switch(rec, "kind=early-return&share=1")
    r, _ = _get(rec, "/getrecommended?call=10&user=5&rank=0", _headers())
    assert r.status_code == 200 and r.json()["rows"] is None and r.json()["calls"] == {}
    spans = telemetry.spans.get_finished_spans()
    # No call to account-service, no query; no error anywhere.
    assert [(s.kind, s.name) for s in spans] == [(SpanKind.SERVER, "getrecommended")]
    assert spans[0].status.status_code is StatusCode.UNSET and not spans[0].events
    bodies = [b for _, b, *_ in telemetry.records()]
    assert bodies == ["getrecommended: request of user 5 (call 10)"]
    # The statement on the skipped path is what is missing (its code location never appears).
    lines = {r[2]["code.line.number"] for r in telemetry.records()}
    assert {r[2]["code.line.number"] for r in normal if r[2]["code.function.name"] == "handle"} - lines
    [hit] = rec.fault_hits
    assert hit[6:8] == ("early-return", "getprofile")


def test_an_early_return_without_calls_skips_the_query(shop):
    services, telemetry = shop
    cart = services["cart-service"]
    _switch(cart, "kind=early-return&share=1")
    call = FIRST_CALL["cart-service:getcart"]
    r, _ = _get(cart, f"/getcart?call={call}&user=5", _headers())
    assert r.status_code == 200 and r.json()["rows"] is None
    assert [s.name for s in telemetry.spans.get_finished_spans()] == ["getcart"]
    assert [b for _, b, *_ in telemetry.records()] == [f"getcart: request of user 5 (call {call})"]
    assert cart.fault_hits[0][6:8] == ("early-return", "query")


def test_a_code_fault_hits_its_share_of_the_requests_reproducibly(tmp_path):
    def hits(seed: int) -> list[bool]:
        telemetry = _Telemetry()
        config = DemoConfig(**{**_config(tmp_path / str(seed)).__dict__, "seed": seed})
        cart = telemetry.service(config, "cart-service")
        try:
            _switch(cart, "kind=early-return&share=0.3")
            return [cart.fault_hit() is not None for _ in range(2000)]
        finally:
            cart.close()

    drawn = hits(0)
    assert drawn == hits(0) and drawn != hits(1)
    assert 0.25 <= sum(drawn) / len(drawn) <= 0.35


def test_fault_hits_are_written_beside_the_store(tmp_path):
    telemetry = _Telemetry()
    config = DemoConfig(**{**_config(tmp_path).__dict__, "fault_hits_dir": str(tmp_path / "hits")})
    cart = telemetry.service(config, "cart-service")
    _switch(cart, "kind=exception&share=1")
    for user in range(3):
        _get(cart, f"/getcart?call={FIRST_CALL['cart-service:getcart']}&user={user}", _headers())
    cart.close()
    import csv

    with open(tmp_path / "hits" / "cart-service-0.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and {r["kind"] for r in rows} == {"exception"}
    assert {r["trace_id"] for r in rows} == {TRACE_ID}
    assert len({r["span_id"] for r in rows}) == 3


def test_the_cpu_burn_switch_starts_and_stops_its_thread(cart):
    service, _ = cart
    for bad in ("kind=cpu-burn&share=0", "kind=cpu-burn&share=1.5", "kind=exception&share=x"):
        r, _ = _get(service, f"/_fault?{bad}")
        assert r.status_code == 400 and "share a number in (0, 1]" in r.text
    assert not service.burner.running and service.fault_kind is None
    _switch(service, "kind=cpu-burn&share=0.5")
    assert service.burner.running and (service.fault_kind, service.fault_share) == ("cpu-burn", 0.5)
    r, _ = _get(service, f"/getcart?call={FIRST_CALL['cart-service:getcart']}&user=5")
    assert r.status_code == 200
    _switch(service, "kind=slow-handler&delay_ns=1000000")           # another fault stops the burning
    assert not service.burner.running
    _switch(service, "kind=cpu-burn&share=1")
    assert service.burner.running
    _switch(service, "kind=none")
    assert not service.burner.running and service.fault_kind is None


def test_a_collector_refusing_logs_breaks_no_request(tmp_path, capfd):
    """Until the collector serves /v1/logs it answers 404: the requests go on, the records are
    counted as not accepted, nothing is printed per batch."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tracesleuth.demo._protocol import make_logger_provider

    class NotFound(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = DemoConfig(**{**_config(tmp_path).__dict__,
                               "collector_url": f"http://127.0.0.1:{server.server_address[1]}"})
        provider = make_logger_provider("cart-service", "cart-service-0", config)
        cart = ShopService(config, "cart-service", 0, tracer_provider=TracerProvider(), logger_provider=provider)
        try:
            for user in range(5):
                r, _ = _get(cart, f"/getcart?call={FIRST_CALL['cart-service:getcart']}&user={user}")
                assert r.status_code == 200
            assert provider.force_flush()
        finally:
            cart.close()
    finally:
        server.shutdown()
    logs = provider.counter.account()
    assert (logs.recorded, logs.exported, logs.export_failed, logs.dropped) == (10, 0, 10, 0)
    assert capfd.readouterr().err == ""
