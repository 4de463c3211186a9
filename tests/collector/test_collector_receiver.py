"""The receiver as a process on a loopback port: the official OpenTelemetry SDK exporter, crash
(kill -9) and restart without losing an acknowledged span, backpressure against a slow client,
a port already in use. Every wait is bounded."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from receiver_support import Receiver, json_request, json_span, proto_request, wait_until

from tracesleuth import schema as S
from tracesleuth.collector import PortInUseError, serve
from tracesleuth.io.store import SpanStore, is_store

PB = {"Content-Type": "application/x-protobuf"}


def _stored_ids(store) -> list:
    spans = SpanStore(store, create=False).read_spans()
    return list(zip(spans.column(S.TRACE_ID).to_pylist(), spans.column(S.SPAN_ID).to_pylist()))


def _stored_count(store) -> int:
    return SpanStore(store, create=False).read_spans().num_rows if is_store(store) else 0


def test_official_sdk_exporter_over_loopback(tmp_path):
    """Spans exported by opentelemetry-sdk's BatchSpanProcessor + OTLP/HTTP protobuf exporter
    (gzip, bearer token) are in the store's Parquet parts a flush interval later, while the
    receiver runs, with their ids, names, parents and resource."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    store = tmp_path / "store"
    with Receiver(store, token="t0k3n", flush_interval_seconds=0.2) as receiver:
        sent = InMemorySpanExporter()
        exporter = OTLPSpanExporter(endpoint=receiver.url + "/v1/traces", compression=Compression.Gzip,
                                    headers={"Authorization": "Bearer t0k3n"}, timeout=10)
        provider = TracerProvider(resource=Resource.create({"service.name": "cart", "service.instance.id": "cart-1"}))
        provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=128, schedule_delay_millis=50))
        provider.add_span_processor(SimpleSpanProcessor(sent))
        tracer = provider.get_tracer("tests")
        for i in range(60):
            with tracer.start_as_current_span("POST /checkout", kind=SpanKind.SERVER) as root:
                root.set_attribute("http.request.method", "POST")
                for j in range(4):
                    with tracer.start_as_current_span(f"charge {j}", kind=SpanKind.CLIENT):
                        pass
        assert provider.force_flush(10_000)
        n = len(sent.get_finished_spans())
        assert n == 300
        # visible to readers of the store (info/table) while the receiver runs
        assert wait_until(lambda: _stored_count(store) == n, timeout=10)
        stats = receiver.stats(token="t0k3n")
        provider.shutdown()
    assert stats["spans"]["acknowledged"] == n and stats["spans"]["rejected"] == 0
    assert stats["responses"].get("200", 0) >= 3  # 300 spans in batches of at most 128
    expected = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}"): s for s in sent.get_finished_spans()}
    spans = SpanStore(store, create=False).read_spans().to_pylist()
    assert {(r[S.TRACE_ID], r[S.SPAN_ID]) for r in spans} == set(expected)
    for r in spans:
        s = expected[(r[S.TRACE_ID], r[S.SPAN_ID])]
        assert r[S.OPERATION] == s.name and r[S.SERVICE] == "cart" and r[S.INSTANCE] == "cart-1"
        assert r[S.PARENT_SPAN_ID] == (f"{s.parent.span_id:016x}" if s.parent else None)
        assert (r[S.START_NS], r[S.END_NS]) == (s.start_time, s.end_time)
        assert r[S.KIND] == ("server" if s.kind == SpanKind.SERVER else "client")


def test_otlp_json_and_zipkin_over_loopback(tmp_path, shared_data):
    yelp = (shared_data / "zipkin-lens" / "yelp.json").read_bytes()
    tid = "0af7651916cd43dd8448eb211c80319c"
    otlp = json_request([json_span(tid, "b7ad6b7169203331", "GET /", 1_700_000_000_000_000_000,
                                   1_700_000_000_000_500_000),
                         json_span(tid, "b7ad6b7169203332", "SELECT", 1_700_000_000_000_100_000,
                                   1_700_000_000_000_200_000, parent="b7ad6b7169203331")])
    store = tmp_path / "store"
    with Receiver(store) as receiver:
        r = httpx.post(receiver.url + "/api/v2/spans", content=yelp, headers={"Content-Type": "application/json"},
                       timeout=10)
        assert r.status_code == 202
        r = httpx.post(receiver.url + "/v1/traces", content=gzip.compress(otlp),
                       headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}, timeout=10)
        assert r.status_code == 200 and r.json() == {}
    stats = receiver.final_stats
    n_yelp = len(json.loads(yelp))
    assert stats["spans"] == {"received": n_yelp + 2, "acknowledged": n_yelp + 2, "rejected": 0,
                              "stored": n_yelp + 2, "replayed": 0}
    assert _stored_count(store) == n_yelp + 2
    assert stats["requests"] == {"total": 2, "zipkin": 1, "otlp": 1}


def _send(url: str, seeds, acked: list, lock: threading.Lock, stop: threading.Event | None = None) -> int:
    """Post one 64-span request per seed; record the span ids of each 200 answer."""
    n = 0
    with httpx.Client(timeout=10) as client:
        for seed in seeds:
            if stop is not None and stop.is_set():
                break
            body, valid = proto_request(64, seed=seed)
            try:
                r = client.post(url + "/v1/traces", content=gzip.compress(body, 1),
                                headers={**PB, "Content-Encoding": "gzip"})
            except httpx.HTTPError:
                break  # the receiver is gone
            if r.status_code == 200:
                with lock:
                    acked.extend(valid)
                n += 1
    return n


def test_kill_9_right_after_acknowledgements_loses_nothing(tmp_path):
    """Nothing is converted before the crash (flush interval of an hour): every acknowledged span
    is only in the write-ahead log when the receiver is killed, and must be in the store after
    the restart, exactly once."""
    store = tmp_path / "store"
    receiver = Receiver(store, flush_interval_seconds=3600).start()
    acked, lock = [], threading.Lock()
    try:
        with ThreadPoolExecutor(4) as pool:
            done = list(pool.map(lambda k: _send(receiver.url, range(k * 100, k * 100 + 10), acked, lock), range(4)))
        assert done == [10, 10, 10, 10]
    finally:
        receiver.kill()
    assert receiver.proc.returncode == -9
    assert list((store / "wal").glob("seg-*.wal")) and SpanStore(store).span_files() == []
    with Receiver(store, flush_interval_seconds=3600) as again:  # start-up replays the log
        assert _stored_count(store) == len(acked) == 40 * 64
        assert again.stats()["spans"]["replayed"] == len(acked)
    stored = _stored_ids(store)
    assert sorted(stored) == sorted(acked)  # spans sent == spans stored, none twice


def test_kill_9_while_uploading_and_flushing(tmp_path):
    """A crash at an arbitrary moment, with uploads in flight and the flusher converting segments
    every 50 ms: every acknowledged span is stored after the restart, none twice (spans in
    flight at the crash may or may not be there: they were never acknowledged)."""
    store = tmp_path / "store"
    receiver = Receiver(store, flush_interval_seconds=0.05).start()
    acked, lock, stop = [], threading.Lock(), threading.Event()
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(_send, receiver.url, range(k * 10_000, k * 10_000 + 2_000), acked, lock, stop)
                       for k in range(4)]
            assert wait_until(lambda: len(acked) >= 100 * 64, timeout=60)
            receiver.kill()
            stop.set()
            [f.result(timeout=30) for f in futures]
    finally:
        receiver.kill()
    with Receiver(store):
        pass
    stored = _stored_ids(store)
    assert len(stored) == len(set(stored)), "a span was stored twice"
    missing = set(acked) - set(stored)
    assert not missing, f"{len(missing)} acknowledged spans lost"
    assert len(stored) - len(acked) <= 4 * 64  # at most the requests in flight at the crash


def test_queue_full_is_429_with_retry_after_and_the_receiver_keeps_serving(tmp_path):
    """A client that sends its headers and then stalls holds its admitted slot: with room for
    one request, the next is refused at once with 429 and Retry-After, before its body is read;
    once the slow request is done, uploads are accepted again."""
    store = tmp_path / "store"
    with Receiver(store, max_queue_requests=1, retry_after_seconds=3) as receiver:
        body, valid = proto_request(16, seed=1)
        host, port = receiver.url.removeprefix("http://").split(":")
        slow = socket.create_connection((host, int(port)), timeout=10)
        try:
            slow.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body[:100])
            assert wait_until(lambda: receiver.stats()["queue"]["pending_requests"] == 1, timeout=10)
            conn = http.client.HTTPConnection(host, int(port), timeout=10)  # keep-alive
            conn.request("POST", "/v1/traces", body=proto_request(16, seed=2)[0], headers=PB)
            r = conn.getresponse()
            r.read()
            assert r.status == 429 and r.getheader("Retry-After") == "3"
            slow.sendall(body[100:])
            answer = slow.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200 ")
        finally:
            slow.close()
        body3, valid3 = proto_request(16, seed=3)
        conn.request("POST", "/v1/traces", body=body3, headers=PB)  # the refused body was skipped
        r = conn.getresponse()
        r.read()
        conn.close()
        assert r.status == 200
        stats = receiver.stats()
    assert stats["errors"] == {"too_many_requests": 1} and stats["throttled"] == {"queue_full": 1}
    assert stats["queue"]["pending_requests"] == 0 and stats["queue"]["pending_bytes"] == 0
    assert sorted(_stored_ids(store)) == sorted(valid + valid3)


def test_port_in_use_is_a_clear_error(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(PortInUseError, match=f"port {port} is already in use") as info:
            serve(tmp_path / "store", port=port)
        assert info.value.port == port and isinstance(info.value, ValueError)
    finally:
        taken.close()
    assert not (tmp_path / "store").exists()  # refused before anything was written


def test_port_taken_by_another_receiver(tmp_path):
    with Receiver(tmp_path / "a") as first:
        port = int(first.url.rsplit(":", 1)[1])
        second = Receiver(tmp_path / "b", port=port)
        with pytest.raises(RuntimeError, match=f"port {port} is already in use"):
            second.start()
        assert wait_until(lambda: second.proc.poll() is not None, timeout=10)
        assert "PortInUseError" in second.stderr
        assert httpx.get(first.url + "/healthz", timeout=10).json() == {"status": "ok"}
