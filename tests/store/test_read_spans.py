"""One way to load spans: ``read_spans`` on a span store gives what it gives on the files ingested."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from spans import span, table
from tracesleuth import schema as S
from tracesleuth.errors import NoSpansError, TraceFormatError
from tracesleuth.io import RejectLog, read_spans, rejects_by_reason
from tracesleuth.report.input import _reject_summary
from tracesleuth.ingest import ingest
from tracesleuth.io.store import SpanStore

CSV = ("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\n"
       "a1,01,,web,home,100,200\n"
       "a1,02,01,db,q,150,120\n"      # negative duration
       "zz,03,01,db,q,150,160\n"      # bad trace id
       "a2,04,,web,home,300,380\n"
       "a2,05,04,db,q,310,320\n")


def _files(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.csv").write_text(CSV)
    pq.write_table(table([span(f"{i + 10:x}", f"{i + 1:x}", None, "svc", f"op{i % 3}", i, i + 2)
                          for i in range(50)]), d / "b.parquet")
    return d


def _sorted(spans):
    return S.plain_spans(spans).sort_by([(S.TRACE_ID, "ascending"), (S.SPAN_ID, "ascending")])


def test_read_spans_on_a_store_equals_on_the_files(tmp_path):
    src = _files(tmp_path)
    seen = []
    from_files = read_spans(str(src), on_batch=lambda b: seen.append(b.num_rows))
    assert sum(seen) == from_files.n_spans == 53 and from_files.spans_rejected == 2
    ingest(str(src), tmp_path / "store")
    seen.clear()
    from_store = read_spans(tmp_path / "store", on_batch=lambda b: seen.append(b.num_rows))
    assert sum(seen) == from_store.n_spans
    assert _sorted(from_store.spans).equals(_sorted(from_files.spans))
    assert from_store.rejects.equals(from_files.rejects)
    assert from_store.spans_rejected == from_files.spans_rejected
    assert from_store.formats == {str(tmp_path / "store"): "store"}
    assert read_spans([str(tmp_path / "store")]).n_spans == 53  # a list of one store, as the CLI passes it


def test_read_spans_store_errors(tmp_path):
    src = _files(tmp_path)
    ingest(str(src), tmp_path / "store")
    with pytest.raises(TraceFormatError, match="span store is read on its own"):
        read_spans([tmp_path / "store", src / "a.csv"])
    SpanStore(tmp_path / "empty")
    with pytest.raises(NoSpansError, match="no spans could be read.*holds no spans"):
        read_spans(tmp_path / "empty")


def test_ingest_of_a_missing_path_creates_no_store(tmp_path):
    with pytest.raises(TraceFormatError, match="nope"):
        ingest(str(tmp_path / "nope"), tmp_path / "store")
    assert not (tmp_path / "store").exists()


def test_rejects_by_reason_is_the_one_grouping(tmp_path):
    log = RejectLog()
    log.add("f", 1, "b", spans=1)
    log.add("f", 2, "a", spans=1)
    log.add("f", 3, "c", spans=0)
    log.add("f", 4, "c", spans=0)
    log.add("f", 5, "d", spans=3)
    groups = rejects_by_reason(log.to_arrow())
    assert [g["reason"] for g in groups] == ["d", "a", "b", "c"]  # spans lost, records, reason
    assert groups[-1] == {"reason": "c", "records": 2, "spans": 0}
    assert rejects_by_reason(S.REJECT_SCHEMA.empty_table()) == [] == rejects_by_reason(None)
    assert [tuple(g.values()) for g in groups] == log.reasons()

    src = _files(tmp_path)
    summary = ingest(str(src), tmp_path / "store")
    result = read_spans(tmp_path / "store")
    assert summary.reasons == rejects_by_reason(result.rejects)
    reasons, _ = _reject_summary(result.rejects)
    assert reasons == [[g["reason"], g["records"], g["spans"]] for g in summary.reasons]


def test_a_part_written_before_events_were_kept_reads_with_them_null(tmp_path):
    """A store part of the older schema (no status message, events or links columns) beside new
    ones: read_spans, scan, the Dask path's part check and a re-read as Parquet all take it."""
    from spans import event, link

    from tracesleuth.scale.spans import read_part, store_parts

    store = SpanStore(tmp_path / "store")
    new = table([span("a1", "1", None, "web", "home", 0, 10, status="error", status_message="boom",
                      events=[event(S.EXCEPTION_EVENT, 5, {S.ATTR_EXCEPTION_TYPE: "KeyError"})],
                      links=[link("b1", "2")])])
    store.append_spans(new.to_batches())
    old_part = store.span_files()[0].with_name("part-000007.parquet")
    old = table([span("a2", "3", None, "web", "home", 1, 11)]).drop_columns(list(S.LATER_SPAN_COLUMNS))
    assert old.schema.equals(S.PRE_EVENTS_SPAN_SCHEMA)
    pq.write_table(old, old_part)
    spans = _sorted(store.read_spans())
    assert spans.schema.equals(S.SPAN_SCHEMA)
    assert spans.column(S.EVENTS).to_pylist() == [new.column(S.EVENTS).to_pylist()[0], None]
    assert spans.column(S.STATUS_MESSAGE).to_pylist() == ["boom", None]
    assert store.scan().collect().height == 2 and store.scan().collect()[S.LINKS].null_count() == 1
    parts = store_parts(store)
    assert parts.n_spans == 2 and read_part(old_part).schema.equals(S.SPAN_SCHEMA)
    assert read_spans(str(old_part)).spans.column(S.EVENTS).to_pylist() == [[]]
    # a part missing only some of the later columns is not an older part: refused, named
    pq.write_table(new.drop_columns([S.LINKS]), old_part)
    with pytest.raises(TraceFormatError, match=S.LINKS):
        store_parts(store)
