"""One service in-process (its ASGI app through httpx's ASGI transport, spans in memory): the
delay a request's baggage asks for, the spans it records, and no baggage in any attribute."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from opentelemetry import baggage, context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

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


def _service(tmp_path, name: str):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    service = ShopService(_config(tmp_path), name, 0, tracer_provider=provider)
    return service, exporter, provider


def _running(tmp_path, name):
    service, exporter, provider = _service(tmp_path, name)
    yield service, exporter
    service.db.close()
    provider.shutdown()


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
    for name in LIVE_SERVICES:
        service = ShopService(config, name, 0, tracer_provider=TracerProvider())
        served[name] = sorted(service.operations)
        callees[name] = service.callees
        if service.db is not None:
            service.db.close()
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
