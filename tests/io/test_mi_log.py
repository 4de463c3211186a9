"""The request trace logs of Mi et al. 2012 (Figure 2): start/end events nested into spans."""

from __future__ import annotations

import gzip

from tracesleuth.io import RejectLog, detect_format, iter_span_batches, read_spans
from tracesleuth.model import build_trace_table

#: The paper's Figure 2, as its table draws it.
FIGURE_2 = """\
| [2011-08-01 16:31:31.690272] | [DEBUG] | [15330] | [./Example.h:117] | T_ID:001 | FUNC:MethodA_start |
| [2011-08-01 16:31:31.832724] | [DEBUG] | [15330] | [./Example.h:117] | T_ID:001 | FUNC:MethodB_start |
| [2011-08-01 16:31:32.193131] | [DEBUG] | [15330] | [./Example.h:122] | T_ID:001 | FUNC:MethodB_end   |
| [2011-08-01 16:31:32.200272] | [DEBUG] | [15330] | [./Example.h:117] | T_ID:001 | FUNC:MethodC_start |
| [2011-08-01 16:31:33.780275] | [DEBUG] | [15330] | [./Example.h:122] | T_ID:001 | FUNC:MethodC_end   |
| [2011-08-01 16:31:33.991376] | [DEBUG] | [15330] | [./Example.h:122] | T_ID:001 | FUNC:MethodA_end   |
"""


def read(path):
    log = RejectLog()
    rows = [r for b in iter_span_batches(path, log=log) for r in b.to_pylist()]
    return rows, log


def test_figure_2_nests_b_and_c_under_a(tmp_path):
    path = tmp_path / "example.log"
    path.write_text(FIGURE_2)
    rows, log = read(path)
    assert not log.rows
    by = {r["operation"]: r for r in rows}
    assert set(by) == {"MethodA", "MethodB", "MethodC"}
    assert by["MethodA"]["parent_span_id"] is None and by["MethodA"]["kind"] == "server"
    assert by["MethodB"]["parent_span_id"] == by["MethodC"]["parent_span_id"] == by["MethodA"]["span_id"]
    assert by["MethodB"]["end_ns"] - by["MethodB"]["start_ns"] == 360_407_000
    assert len({r["trace_id"] for r in rows}) == 1 and by["MethodB"]["instance"] == "pid-15330"
    assert by["MethodA"]["service"] == "example"  # no SERVICE: field, no component: the file's name
    assert {"key": "mi.request_id", "str": "001", "int": None, "float": None, "bool": None} in by["MethodA"]["attributes"]


def test_space_separated_interleaved_out_of_order_with_service_and_host(tmp_path):
    lines = [
        "[2024-03-01 10:00:00.000100] [INFO] [7] T_ID:r1 HOST:10.0.0.1 FUNC:Front.save_start",
        "[2024-03-01 10:00:00.000200] [INFO] [7] T_ID:r2 HOST:10.0.0.2 FUNC:Front.save_start",
        "[2024-03-01 10:00:00.000900] [INFO] [7] T_ID:r1 HOST:10.0.0.1 FUNC:Front.save_end",
        "[2024-03-01 10:00:00.000300] [INFO] [7] T_ID:r1 SERVICE:lock HOST:10.0.0.9 FUNC:acquire_start",
        "[2024-03-01 10:00:00.000400] [INFO] [7] T_ID:r1 SERVICE:lock HOST:10.0.0.9 FUNC:acquire_end",
        "[2024-03-01T10:00:00.000800+00:00] [INFO] [7] T_ID:r2 HOST:10.0.0.2 FUNC:Front.save_end",
    ]
    path = tmp_path / "front.log"
    path.write_text("\n".join(lines) + "\n")
    assert detect_format(path.read_bytes()) == "mi-log"
    rows, log = read(path)
    assert not log.rows and len(rows) == 3
    acquire = next(r for r in rows if r["operation"] == "acquire")
    save_r1 = next(r for r in rows if r["operation"] == "Front.save" and r["instance"] == "10.0.0.1")
    assert acquire["parent_span_id"] == save_r1["span_id"] and acquire["service"] == "lock"
    assert acquire["instance"] == "10.0.0.9" and save_r1["service"] == "Front"
    assert save_r1["end_ns"] - save_r1["start_ns"] == 800_000


def test_bad_events_are_rejected_with_their_line_and_the_rest_kept(tmp_path):
    lines = [
        "[2024-03-01 10:00:00.000100] T_ID:a FUNC:A_start",
        "[2024-03-01 10:00:00.000200] T_ID:a FUNC:B_start",           # never ends
        "[2024-03-01 10:00:00.000300] T_ID:a FUNC:C_end",             # no start
        "[2024-03-01 10:00:00.000400] T_ID:a FUNC:A_end",
        "some other log line",
        "[2024-13-01 10:00:00.000500] T_ID:b FUNC:A_start",           # month 13
        "[2024-03-01 10:00:00.000600] T_ID:c FUNC:D_start",           # never ends
        "[2024-03-01 10:00:00.000700] T_ID:e FUNC:E_start",
        "[2024-03-01 10:00:00.000800] T_ID:e FUNC:E_end",
    ]
    path = tmp_path / "bad.log"
    path.write_text("\n".join(lines) + "\n")
    rows, log = read(path)
    assert sorted(r["operation"] for r in rows) == ["A", "E"]
    reasons = {(r[1], r[2]): r[3] for r in log.rows}
    assert "never ends" in reasons[(2, "FUNC")] and "B around" not in reasons[(2, "FUNC")]
    assert "no open FUNC:C_start" in reasons[(3, "FUNC")]
    assert "unreadable" in reasons[(6, "timestamp")]
    assert "never ends" in reasons[(7, "FUNC")]
    assert "1 lines without both" in reasons[(5, None)]
    assert log.spans_rejected == 4


def test_read_spans_detects_a_gzip_log_and_builds_requests(tmp_path):
    lines = []
    for i in range(30):
        t = 1_000 + 10 * i
        lines += [f"[2024-03-01 10:00:{t // 1000:02d}.{t % 1000:03d}000] T_ID:{i} FUNC:Api.get_start",
                  f"[2024-03-01 10:00:{t // 1000:02d}.{t % 1000 + 1:03d}000] T_ID:{i} FUNC:Db.query_start",
                  f"[2024-03-01 10:00:{t // 1000:02d}.{t % 1000 + 5:03d}000] T_ID:{i} FUNC:Db.query_end",
                  f"[2024-03-01 10:00:{t // 1000:02d}.{t % 1000 + 6:03d}000] T_ID:{i} FUNC:Api.get_end"]
    path = tmp_path / "app.log.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    result = read_spans(str(path))
    assert result.formats == {str(path): "mi-log"} and result.n_spans == 60
    table = build_trace_table(result)
    assert table.endpoint == "Api:Api.get" and table.n_requests == 30
    assert table.frame["latency_ns"].to_list() == [6_000_000] * 30
