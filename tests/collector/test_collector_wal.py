"""The write-ahead log and its conversion into parts: record framing, cut-short and damaged
segments, idempotent conversion (a crash between a part's rename and the segment's deletion),
segment numbers never reused, group commit, one receiver per store."""

from __future__ import annotations

import shutil
import threading

import pyarrow as pa
import pytest
from receiver_support import proto_request

from tracesleuth import schema as S
from tracesleuth.collector import CollectorError, CollectorSettings
from tracesleuth.collector._decode import decode
from tracesleuth.collector._engine import Collector
from tracesleuth.collector._flush import SegmentPartStore, convert_segment
from tracesleuth.collector._wal import WriteAheadLog, encode_record, read_segment, segment_name
from tracesleuth.io import read_spans


def _decoded(seed: int, n: int = 20, bad: dict | None = None):
    body, valid = proto_request(n, seed=seed, bad=bad)
    return decode("otlp-proto", body, f"test #{seed}"), valid


def _segment(directory, seq: int, records: list[bytes]):
    path = directory / f"{segment_name(seq)}.wal"
    path.write_bytes(b"".join(records))
    return path


def _ids(table: pa.Table) -> list:
    return sorted(zip(table.column(S.TRACE_ID).to_pylist(), table.column(S.SPAN_ID).to_pylist()))


@pytest.fixture
def store(tmp_path):
    s = SegmentPartStore(tmp_path / "store")
    (s.path / "wal").mkdir()
    return s


def test_records_round_trip(store):
    a, _ = _decoded(1, bad={2: "end_before_start"})
    b, _ = _decoded(2)
    path = _segment(store.path / "wal", 0, [encode_record(a.spans, a.rejects), encode_record(b.spans, b.rejects)])
    got = read_segment(path)
    assert (got.records, got.tail_bytes, got.damaged) == (2, 0, False)
    assert got.spans.equals(pa.concat_tables([a.spans, b.spans]))
    assert got.rejects.equals(a.rejects) and got.rejects.num_rows == 1


def test_record_cut_short_by_a_crash_is_dropped_and_the_rest_kept(store):
    a, valid = _decoded(3)
    b, _ = _decoded(4)
    whole, cut = encode_record(a.spans, a.rejects), encode_record(b.spans, b.rejects)
    for keep in (5, 40, len(cut) - 1):  # inside the frame header, inside the payload, one byte short
        path = _segment(store.path / "wal", keep, [whole, cut[:keep]])
        got = read_segment(path)
        assert (got.records, got.tail_bytes, got.damaged) == (1, keep, False)
        result = convert_segment(store, path)
        assert result.spans == 20 and not path.exists()
    assert read_spans(str(store.path)).spans.num_rows == 60


def test_damaged_record_is_kept_aside_and_whole_records_stored(store):
    a, valid = _decoded(5)
    b, _ = _decoded(6)
    c, _ = _decoded(7)
    second = bytearray(encode_record(b.spans, b.rejects))
    second[len(second) // 2] ^= 0xFF
    path = _segment(store.path / "wal", 0, [encode_record(a.spans, a.rejects), bytes(second),
                                           encode_record(c.spans, c.rejects)])
    result = convert_segment(store, path)
    assert result.damaged and result.spans == 20
    assert (store.path / "wal" / "damaged" / path.name).exists() and not path.exists()
    assert _ids(read_spans(str(store.path)).spans) == sorted(valid)


def test_conversion_is_idempotent_across_a_crash_before_the_segment_is_deleted(store):
    """A crash after the part was renamed into place but before the segment was deleted: the
    segment is converted again at start-up, and must not store its spans twice."""
    a, valid = _decoded(8, bad={0: "short_trace_id"})
    path = _segment(store.path / "wal", 3, [encode_record(a.spans, a.rejects)])
    saved = path.with_suffix(".copy")
    shutil.copy(path, saved)
    first = convert_segment(store, path)
    assert (first.spans, first.rejects, first.already_done) == (19, 1, False)
    parts = sorted(p.name for p in store.path.rglob("part-*.parquet"))
    assert parts == ["part-000000-seg-000000000003.parquet"] * 2  # one in spans/, one in rejects/
    shutil.move(saved, path)  # the segment is back, as after the crash
    again = convert_segment(store, path)
    assert (again.spans, again.rejects, again.already_done) == (0, 0, True)
    assert not path.exists()
    result = read_spans(str(store.path))
    assert _ids(result.spans) == sorted(valid) and result.rejects.num_rows == 1


def test_segment_numbers_continue_after_the_highest_part(tmp_path):
    store = tmp_path / "store"
    collector = Collector(store, CollectorSettings(flush_interval_seconds=3600))
    collector.start()
    collector.wal._seq = 41  # as if 41 segments had been written before
    a, _ = _decoded(9)
    done = threading.Event()
    collector.wal.submit(encode_record(a.spans, a.rejects), lambda e: done.set())
    assert done.wait(10)
    collector.close()
    assert [p.name for p in (store / "spans").rglob("*.parquet")] == ["part-000000-seg-000000000041.parquet"]
    again = Collector(store, CollectorSettings())
    again.start()
    try:
        assert again.wal._seq == 42  # never 0 again: seg-0 would be taken for already converted
    finally:
        again.close()


def test_group_commit_syncs_waiting_records_together(tmp_path):
    commits = []
    wal = WriteAheadLog(tmp_path, first_seq=0, max_segment_bytes=1 << 30,
                        on_commit=lambda records, nbytes: commits.append(records))
    a, _ = _decoded(10)
    record = encode_record(a.spans, a.rejects)
    outcomes, all_done = [], threading.Event()

    def done(error):
        outcomes.append(error)
        if len(outcomes) == 50:
            all_done.set()

    for _ in range(50):  # queued before the writer runs: one write, one fsync
        wal.submit(record, done)
    wal.start()
    assert all_done.wait(10)
    wal.close()
    assert commits == [50] and outcomes == [None] * 50
    (segment,) = wal.take_sealed()
    assert read_segment(segment[0]).records == 50


def test_segments_are_sealed_at_their_size_limit(tmp_path):
    a, _ = _decoded(11)
    record = encode_record(a.spans, a.rejects)
    wal = WriteAheadLog(tmp_path, first_seq=0, max_segment_bytes=2 * len(record))
    wal.start()
    for _ in range(5):
        ok = threading.Event()
        wal.submit(record, lambda e: ok.set())
        assert ok.wait(10)
    wal.close()
    sizes = [size for _, size in wal.take_sealed()]
    assert sizes == [2 * len(record), 2 * len(record), len(record)]
    assert wal.backlog_bytes == 5 * len(record)


def test_one_receiver_per_store(tmp_path):
    first = Collector(tmp_path / "store", CollectorSettings())
    first.start()
    try:
        with pytest.raises(CollectorError, match="already used by another receiver"):
            Collector(tmp_path / "store", CollectorSettings()).start()
    finally:
        first.close()
    second = Collector(tmp_path / "store", CollectorSettings())
    second.start()  # released at close
    second.close()


def test_events_links_and_status_messages_survive_the_wal_into_parts(store):
    """A request's exception event, link and status message are stored: decode, WAL record,
    Parquet part, read back; a record written before they were kept reads with them null."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    body, valid = proto_request(8, seed=11)
    request = ExportTraceServiceRequest.FromString(body)
    sp = request.resource_spans[0].scope_spans[0].spans[3]
    sp.status.code, sp.status.message = 2, "card declined"
    ev = sp.events.add()
    ev.time_unix_nano, ev.name = sp.start_time_unix_nano + 10, S.EXCEPTION_EVENT
    kv = ev.attributes.add()
    kv.key, kv.value.string_value = S.ATTR_EXCEPTION_TYPE, "PaymentError"
    ln = sp.links.add()
    ln.trace_id, ln.span_id = bytes(range(1, 17)), bytes(range(1, 9))
    new = decode("otlp-proto", request.SerializeToString(), "with events")
    old, _ = _decoded(12)
    old_spans = old.spans.drop_columns(list(S.LATER_SPAN_COLUMNS))
    path = _segment(store.path / "wal", 5, [encode_record(old_spans, old.rejects), encode_record(new.spans, new.rejects)])
    assert read_segment(path).spans.schema == S.SPAN_SCHEMA
    convert_segment(store, path)
    spans = read_spans(str(store.path)).spans
    row = spans.filter(pa.compute.equal(spans.column(S.SPAN_ID), sp.span_id.hex())).to_pylist()[0]
    assert row[S.STATUS_MESSAGE] == "card declined" and row[S.STATUS] == "error"
    assert row[S.EVENTS] == [{"time_ns": sp.start_time_unix_nano + 10, "name": S.EXCEPTION_EVENT, S.ATTRIBUTES: [
        {"key": S.ATTR_EXCEPTION_TYPE, "str": "PaymentError", "int": None, "float": None, "bool": None}]}]
    assert row[S.LINKS] == [{S.TRACE_ID: bytes(range(1, 17)).hex(), S.SPAN_ID: bytes(range(1, 9)).hex(),
                             S.ATTRIBUTES: []}]
    assert spans.num_rows == 8 + 20 and spans.column(S.EVENTS).null_count == 20  # the old record's spans
