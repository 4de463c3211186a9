"""CSV/Parquet span files: presets, mappings, streaming and bad rows."""

import gzip

import polars as pl
import pyarrow.parquet as pq
import pytest

from tracesleuth.errors import NoSpansError, TraceFormatError
from tracesleuth.io import TabularMapping, read_spans

NEZHA_HEADER = "TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration\n"


def nezha_rows():
    return [
        "b0103bb0161ad7fa352fe1828eeb643a,520b067330e3ede5,root,ts-gateway-service-6f6cfc45b-h5m2n,/*,"
        "1674981768697000000,1674981769015316530,318316\n",
        "b0103bb0161ad7fa352fe1828eeb643a,5e89765a7f60ff70,520b067330e3ede5,ts-gateway-service-6f6cfc45b-h5m2n,"
        "HTTP POST,1674981768699127513,1674981769015277277,316149\n",
        "b0103bb0161ad7fa352fe1828eeb643a,7e28bdb6a47af144,5e89765a7f60ff70,ts-auth-service-7f8d7d756d-k7b9j,"
        "/api/v1/users/login,1674981768701000000,1674981769012521162,311521\n",
    ]


def test_nezha_preset_from_content(tmp_path):
    f = tmp_path / "window.data"             # misleading name: told by content
    f.write_bytes(gzip.compress((NEZHA_HEADER + "".join(nezha_rows())).encode()))
    r = read_spans(f)
    assert r.formats == {str(f): "csv"} and r.n_spans == 3 and r.spans_rejected == 0
    rows = r.spans.to_pylist()
    assert rows[0]["parent_span_id"] is None and rows[0]["service"] == "ts-gateway-service"
    assert rows[0]["instance"] == "ts-gateway-service-6f6cfc45b-h5m2n"
    assert rows[2]["service"] == "ts-auth-service" and rows[2]["kind"] == "unspecified"
    assert rows[0]["end_ns"] - rows[0]["start_ns"] == 318316530  # Duration (us) agrees: 318316 us


def test_bad_rows_are_rejected_with_line_numbers(tmp_path):
    good = nezha_rows()
    lines = [NEZHA_HEADER, good[0], "only,three,fields\n", "\n", good[1].replace("1674981768699127513", "soon"),
             good[2].replace("ts-auth", "ts-\xff").encode("latin-1").decode("latin-1")]
    f = tmp_path / "bad.csv"
    data = b"".join(l.encode("utf-8") if "\xff" not in l else l.encode("latin-1") for l in lines)
    f.write_bytes(data)
    r = read_spans(f)
    assert r.n_spans == 1
    rej = {(x["record"], x["reason"].split(":")[0], x["field"]) for x in r.rejects.to_pylist()}
    assert (3, "malformed CSV row", None) in rej
    assert (5, "missing or not an integer timestamp", "start_ns") in rej
    assert (6, "bytes that are not valid UTF-8", None) in rej
    assert r.spans_rejected == 3   # spans in (4 data rows) = 1 read + 3 rejected


def test_negative_duration_and_missing_ids(tmp_path):
    rows = nezha_rows()
    rows[1] = rows[1].replace("1674981769015277277", "1674981768000000000")
    rows[2] = rows[2].replace("7e28bdb6a47af144", "")
    f = tmp_path / "t.csv"
    f.write_text(NEZHA_HEADER + "".join(rows))
    r = read_spans(f)
    reasons = {x["record"]: (x["field"], x["reason"]) for x in r.rejects.to_pylist()}
    assert reasons[3] == ("end_ns", "negative duration (end before start)")
    assert reasons[4][0] == "span_id"
    assert r.n_spans == 1 and r.spans_rejected == 2


def test_custom_mapping_with_duration_in_ms(tmp_path):
    f = tmp_path / "custom.csv"
    f.write_text("tid,sid,pid,svc,name,begin_ms,took_ms,method\n"
                 "a1,01,,web,home,1000.5,20,GET\n"
                 "a1,02,01,db,query,1001,5.25,GET\n")
    m = TabularMapping(trace_id="tid", span_id="sid", parent_span_id="pid", service="svc", operation="name",
                       start="begin_ms", start_unit="ms", end=None, duration="took_ms", duration_unit="ms",
                       instance=None, kind=None, status=None, follows_from=None, attribute_columns=("method",))
    r = read_spans(f, mapping=m)
    rows = r.spans.to_pylist()
    assert rows[0]["start_ns"] == 1_000_500_000 and rows[0]["end_ns"] == 1_020_500_000
    assert rows[1]["end_ns"] - rows[1]["start_ns"] == 5_250_000
    assert rows[0]["attributes"][0]["key"] == "method" and rows[0]["attributes"][0]["str"] == "GET"
    assert rows[0]["trace_id"] == "a1".rjust(32, "0")


def test_header_without_mapping_is_reported(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("a,b,c,d\n1,2,3,4\n")
    with pytest.raises(NoSpansError, match="lacks the columns"):
        read_spans(f)
    with pytest.raises(TraceFormatError, match="unknown column mapping"):
        read_spans(f, mapping="nope")


def test_parquet_roundtrip_keeps_attributes(tmp_path):
    from spans import span, table

    t = table([span("1", "1", None, "web", "home", 0, 10, attributes={"http.method": "GET", "n": 3, "ok": True}),
               span("1", "2", "1", "db", "q", 1, 5, kind="client")])
    f = tmp_path / "spans.bin"
    pq.write_table(t, f)
    r = read_spans(f)
    assert r.formats[str(f)] == "parquet"
    assert r.spans.to_pylist() == t.to_pylist()


def test_directory_glob_and_streaming_batches(tmp_path):
    for i in range(3):
        (tmp_path / f"w{i}.csv").write_text(NEZHA_HEADER + "".join(r.replace("b0103bb0", f"c{i}03bb0") for r in nezha_rows()))
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "notes.txt").write_text("hello\n")
    r = read_spans(tmp_path)
    assert r.n_spans == 9
    per_file = {x["source"].rsplit("/", 1)[-1]: x["reason"] for x in r.rejects.to_pylist()}
    assert per_file["empty.csv"] == "empty file" and "unknown format" in per_file["notes.txt"]
    assert read_spans(str(tmp_path / "w*.csv")).n_spans == 9
    with pytest.raises(TraceFormatError, match="no such file"):
        read_spans(tmp_path / "missing*.csv")


def test_block_boundaries_do_not_lose_rows(tmp_path):
    from tracesleuth.io import RejectLog, SpanBatchBuilder
    from tracesleuth.io.tabular import read_csv
    import io

    rows = [NEZHA_HEADER] + [r.replace("b0103bb0", f"{i:08x}") for i in range(200) for r in nezha_rows()]
    data = "".join(rows).encode()
    log = RejectLog()
    b = SpanBatchBuilder("mem", log, batch_spans=50)
    batches = list(read_csv(io.BytesIO(data), b, block_bytes=777))
    assert sum(x.num_rows for x in batches) == 600 and log.spans_rejected == 0
    df = pl.concat([pl.from_arrow(x) for x in batches])
    assert df["trace_id"].n_unique() == 200


def test_trainticket_full_day_reads_every_row(shared_data):
    d = shared_data / "nezha/trainticket/2023-01-29/trace"
    r = read_spans(d)
    # 84 gzip CSV windows; every data row is read, none rejected
    assert r.n_spans == 328848 and r.spans_rejected == 0
    assert set(r.formats.values()) == {"csv"} and len(r.formats) == 84


def test_gzipped_parquet_and_corrupt_parquet(tmp_path):
    from spans import span, table

    t = table([span("1", "1", None, "web", "home", 0, 10)])
    f = tmp_path / "spans.parquet"
    pq.write_table(t, f)
    gz = tmp_path / "spans.parquet.gz"
    gz.write_bytes(gzip.compress(f.read_bytes()))
    assert read_spans(gz).spans.to_pylist() == t.to_pylist()
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\x00" * 100)
    with pytest.raises(NoSpansError, match="bad.parquet"):
        read_spans(bad)


def test_all_zero_ids(tmp_path):
    f = tmp_path / "z.csv"
    f.write_text("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\n"
                 "a1,01,0000000000000000,web,home,100,200\n"    # all-zero parent: a root
                 "00000000000000000000000000000000,02,01,db,q,150,160\n")
    r = read_spans(f)
    assert r.n_spans == 1 and r.spans.column("parent_span_id").to_pylist() == [None]
    assert r.rejects.to_pylist()[0]["field"] == "trace_id"
