"""Entry-span attributes in the trace table: numbers stay numeric, identifiers are never
categories, and every key left out is reported with its reason."""

import polars as pl
import pytest

from spans import span, table
from tracesleuth import schema as S
from tracesleuth.model import build_trace_table
from tracesleuth.model.attributes import CONSTANT, IDENTIFIER, TOO_MANY_VALUES, is_identifier


def requests(attributes: list[dict]) -> pl.DataFrame:
    """One trace per attribute dict: a root web:home span carrying it, and one child."""
    rows = []
    for i, attrs in enumerate(attributes):
        tid = str(i + 1)
        rows += [span(tid, "1", None, "web", "home", 0, 100 + i, attributes=attrs),
                 span(tid, "2", "1", "a", "get", 10, 40)]
    return table(rows)


def test_numeric_attributes_are_numeric_columns_beside_the_categories():
    n = 60  # more values than max_categories=50 for the varying keys
    attrs = [{"http.response.body.size": 1000 + i,             # int, many values: number only
              "db.latency_ratio": 0.5 + i / 7,                # float, many values: number only
              "http.response.status_code": 200 if i % 3 else 500,  # int, 2 values: number and category
              "response_size": str(10 * i),                   # Zipkin tag: a number as text
              "http.method": "GET" if i % 2 else "POST"}      # text: category only
             for i in range(n)]
    tt = build_trace_table(requests(attrs))
    f = tt.frame
    assert tt.numeric_attribute_columns == (
        "num[db.latency_ratio]", "num[http.response.body.size]", "num[http.response.status_code]",
        "num[response_size]")
    assert f.schema["num[http.response.body.size]"] == pl.Int64
    assert f.schema["num[db.latency_ratio]"] == pl.Float64
    assert f.schema["num[response_size]"] == pl.Int64
    assert f.schema["num[http.response.status_code]"] == pl.Int64
    by_latency = f.sort("latency_ns")
    assert by_latency["num[http.response.body.size]"].to_list() == [1000 + i for i in range(n)]
    assert by_latency["num[db.latency_ratio]"].to_list() == pytest.approx([0.5 + i / 7 for i in range(n)])
    assert by_latency["num[response_size]"].to_list() == [10 * i for i in range(n)]
    # Categories: the text key and the numeric key with few values (in text form, as before).
    assert set(tt.categorical_columns) >= {"attr[http.method]", "attr[http.response.status_code]"}
    assert "attr[http.response.body.size]" not in f.columns and "attr[db.latency_ratio]" not in f.columns
    assert set(by_latency["attr[http.response.status_code]"].unique()) == {"200", "500"}
    # Numbers are not offered to the patterns analysis (its inputs are unchanged).
    assert not set(tt.numeric_attribute_columns) & set(tt.continuous_columns + tt.categorical_columns)
    assert tt.dropped_attributes == ()


def test_mixed_and_missing_numeric_values():
    attrs = [{"rows": 3}, {"rows": 4.5}, {}, {"rows": "7"}, {"version": "1.2"}, {"version": "1.3"}, {"flag": True},
             {"flag": False}, {"mixed": "12"}, {"mixed": "twelve"}, {"dup": "a"}, {"dup": "b"}]
    attrs += [{"ratio": f"{i / 3:.4f}", "big": str(2**62 + i)} for i in range(60)] + [{"ratio": "1e3"}]
    tt = build_trace_table(requests(attrs))
    f = tt.frame.sort("latency_ns")
    assert f.schema["num[rows]"] == pl.Float64        # typed int and float, and text: Float64
    assert f["num[rows]"].head(4).to_list() == [3.0, 4.5, None, 7.0] and f["num[rows]"].null_count() == f.height - 3
    # Numbers as text only: a category while few (a version), a number when too many for one.
    assert "num[version]" not in f.columns and set(f["attr[version]"].drop_nulls()) == {"1.2", "1.3"}
    assert f.schema["num[ratio]"] == pl.Float64 and "attr[ratio]" not in f.columns
    assert f["num[ratio]"].drop_nulls().to_list() == pytest.approx([float(f"{i / 3:.4f}") for i in range(60)] + [1e3])
    assert f.schema["num[big]"] == pl.Int64 and f["num[big]"].drop_nulls().to_list() == [2**62 + i for i in range(60)]
    assert "num[flag]" not in f.columns and f["attr[flag]"].drop_nulls().to_list() == ["true", "false"]
    assert "num[mixed]" not in f.columns and set(f["attr[mixed]"].drop_nulls()) == {"12", "twelve"}


def test_a_key_repeated_in_one_span_takes_its_first_value():
    rows = []
    for i, values in enumerate([("GET", "PUT"), ("POST",)]):
        s = span(str(i + 1), "1", None, "web", "home", 0, 100 + i)
        s["attributes"] = [{"key": "http.method", "str": v, "int": None, "float": None, "bool": None} for v in values]
        rows.append(s)
    f = build_trace_table(table(rows)).frame.sort("latency_ns")
    assert f["attr[http.method]"].to_list() == ["GET", "POST"]


@pytest.mark.parametrize("key, values", [
    ("client.port", lambda i: 40000 + i),             # OTel: ports
    ("server.port", lambda i: 8080 + i % 2),          # an identifier even with 2 values
    ("net.peer.port", lambda i: str(50000 + i)),
    ("thread.id", lambda i: i % 4 + 1),
    ("service.instance.id", lambda i: f"pod-{i % 3}"),
    ("process.pid", lambda i: 100 + i % 2),
    ("guid:x-request-id", lambda i: f"req-{i}"),      # Envoy's Zipkin tag
    ("requestId", lambda i: f"r{i % 5}"),
    ("app.installed_app_id", lambda i: f"a{i % 3}"),
    ("user.uuid", lambda i: f"u{i % 3}"),
    ("session", lambda i: f"6f1c0d2e-9a4b-4c3d-8e7f-0a1b2c3d4e{i % 3:02x}"),   # UUID values
    ("parent", lambda i: f"{i % 3:016x}a"),                                   # hex id values
])
def test_identifiers_are_never_categories_nor_numbers_and_are_reported(key, values):
    attrs = [{key: values(i), "http.method": "GET" if i % 2 else "POST"} for i in range(8)]
    tt = build_trace_table(requests(attrs))
    assert S.attribute_column(key) not in tt.frame.columns
    assert S.numeric_attribute_column(key) not in tt.frame.columns
    assert tt.dropped_attributes == ((key, IDENTIFIER),)
    assert tt.categorical_columns[-1] == "attr[http.method]"


def test_dropped_attributes_name_every_key_left_out_and_why():
    attrs = [{"telemetry.sdk.version": "1.2", "http.route": f"/r/{i}", "http.method": "GET" if i % 2 else "POST",
              "client.port": 1000 + i, "db.rows": 7} for i in range(60)]
    tt = build_trace_table(requests(attrs))
    assert tt.dropped_attributes == (("client.port", IDENTIFIER), ("db.rows", CONSTANT),
                                     ("http.route", TOO_MANY_VALUES), ("telemetry.sdk.version", CONSTANT))
    assert [c for c in tt.frame.columns if c.startswith(("attr[", "num["))] == ["attr[http.method]"]
    # max_categories decides what is too many
    wide = build_trace_table(requests(attrs), max_categories=100)
    assert "attr[http.route]" in wide.frame.columns and ("http.route", TOO_MANY_VALUES) not in wide.dropped_attributes


def test_no_attributes_no_columns():
    tt = build_trace_table(requests([{}, {}]))
    assert tt.dropped_attributes == () and tt.numeric_attribute_columns == ()
    spans = requests([{}, {}]).drop_columns([S.ATTRIBUTES])
    assert build_trace_table(spans).dropped_attributes == ()


@pytest.mark.parametrize("partition_spans", [1, 3, 7])
def test_attribute_columns_are_chosen_over_all_partitions(partition_spans):
    """A key constant within each partition but varying over all of them is kept."""
    attrs = [{"region": "eu" if i < 4 else "us", "size": i // 4, "client.port": i} for i in range(8)]
    whole = build_trace_table(requests(attrs))
    parts = build_trace_table(requests(attrs), partition_spans=partition_spans)
    assert parts.frame.equals(whole.frame, null_equal=True) and parts.frame.columns == whole.frame.columns
    assert parts.dropped_attributes == whole.dropped_attributes == (("client.port", IDENTIFIER),)
    assert {"attr[region]", "num[size]", "attr[size]"} <= set(whole.frame.columns)


def test_is_identifier_rule():
    for key in ("client.port", "server.port", "net.peer.port", "network.peer.port", "thread.id", "session.id",
                "messaging.message.id", "faas.invocation_id", "k8s.pod.uid", "process.pid", "user_id", "requestId",
                "userID", "x-request-id", "guid:x-request-id", "correlationid", "id", "UUID"):
        assert is_identifier(key), key
    for key in ("http.response.status_code", "http.route", "http.method", "db.system", "valid", "paid", "period",
                "service.version", "k8s.pod.name", "idle", "response_size"):
        assert not is_identifier(key), key
    assert is_identifier("x", pl.Series(["6F1C0D2E-9A4B-4C3D-8E7F-0A1B2C3D4E5F", None]))
    assert is_identifier("x", pl.Series(["0x00f38190ce0a9635", "a4424f20bffee416"]))
    assert not is_identifier("x", pl.Series(["a4424f20bffee416", "GET"]))     # not every value
    assert not is_identifier("x", pl.Series(["1674981768697000000"]))        # decimal digits: a number
    assert not is_identifier("x", pl.Series(["cafe", "beef"]))               # short hex words
    assert not is_identifier("x", pl.Series([], dtype=pl.String))


def test_zipkin_production_traces_report_their_attributes(shared_data):
    pytest.importorskip("tracesleuth.io.zipkin")
    from tracesleuth.io import read_spans

    tt = build_trace_table(read_spans(shared_data / "zipkin-lens" / "smartthings-mobile-web-install.json"))
    keys = {k for k, _ in tt.dropped_attributes}
    kept = {S.column_key(c) for c in tt.frame.columns if c.startswith(("attr[", "num["))}
    assert not keys & kept
    assert all(reason in (IDENTIFIER, CONSTANT, TOO_MANY_VALUES) for _, reason in tt.dropped_attributes)
    assert not any(is_identifier(k) for k in kept)
