"""Ingests as transactions: all their parts at once or none, whatever stops them; a file already
in the store is skipped; an ingest that stores nothing leaves no store."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from spans import span, table
from tracesleuth import schema as S
from tracesleuth.errors import NothingStoredError
from tracesleuth.ingest import IngestInterrupted, ingest
from tracesleuth.io.store import COMMITTED, MANIFEST, SPANS, STAGING, SpanStore, Transaction, is_store

HOUR_MS = 3_600_000
SRC = Path(__file__).resolve().parents[2] / "src"


def _spans(n: int, *, first: int = 0, hours: int = 1):
    """``n`` spans of traces of 4, spread over ``hours`` hours (one partition each)."""
    return table(span(f"{(first + i) // 4 + 1:x}", f"{first + i + 1:x}", None, "svc", f"op{i % 3}",
                      (i % hours) * HOUR_MS + i, (i % hours) * HOUR_MS + i + 1) for i in range(n))


def _csv(path: Path, n: int, first: int = 0) -> Path:
    rows = "".join(f"{(first + i) // 4 + 1:032x},{first + i + 1:016x},,web,home,{100 + i},{200 + i}\n"
                   for i in range(n))
    path.write_text("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\n" + rows)
    return path


def _visible(store: Path) -> dict:
    """What readers see: tracesleuth's listing, an external Hive glob, and the span count."""
    s = SpanStore(store, create=False)
    files = s.span_files()
    external = sorted(p.relative_to(store).as_posix() for p in store.glob("spans/**/part-*.parquet"))
    hive = ds.dataset(store / "spans", format="parquet", partitioning="hive").count_rows()
    return {"files": [f.relative_to(store).as_posix() for f in files], "external": external, "rows": hive,
            "spans": s.read_spans().num_rows}


def test_staged_parts_are_invisible_until_the_commit(tmp_path):
    store = SpanStore(tmp_path / "s")
    store.append_spans(_spans(10).to_batches())
    before = _visible(store.path)
    txn = Transaction(store.path)
    txn.begin()
    staged = txn.append(SPANS, _spans(30, first=100, hours=3).to_batches(max_chunksize=7))
    assert len(staged) == 3 and all(p.is_relative_to(store.path / STAGING) for p in staged)
    assert _visible(store.path) == before  # tracesleuth's readers, and a Hive glob
    finals = txn.commit({"paths": ["x"], "spans_read": 30, "spans_rejected": 0})
    after = _visible(store.path)
    assert after["spans"] == after["rows"] == 40 and len(after["files"]) == 4 == len(after["external"])
    assert sorted(finals["spans"]) == sorted(set(after["files"]) - set(before["files"]))
    assert [int(Path(f).stem.split("-")[1]) for f in sorted(finals["spans"])] == [1, 2, 3]  # numbered at commit
    (entry,) = store.manifest()["ingests"]
    assert entry["state"] == COMMITTED and entry["id"] == txn.id and "moves" not in entry
    assert not (store.path / STAGING).exists()


def test_an_aborted_transaction_leaves_nothing_and_no_new_store(tmp_path):
    txn = Transaction(tmp_path / "new")
    txn.begin()
    txn.append(SPANS, _spans(5).to_batches())
    assert (tmp_path / "new" / STAGING).is_dir() and not is_store(tmp_path / "new")
    txn.abort()
    assert not (tmp_path / "new").exists()
    store = SpanStore(tmp_path / "s")
    store.append_spans(_spans(5).to_batches())
    before = _visible(store.path)
    txn = Transaction(store.path)
    txn.begin()
    txn.append(SPANS, _spans(5, first=50).to_batches())
    txn.abort()
    assert _visible(store.path) == before and store.manifest()["ingests"] == []
    assert sorted(p.name for p in store.path.iterdir()) == sorted(["rejects", "spans", MANIFEST,
                                                                  "tracesleuth-store.lock"])


def _child(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    """Run ``body`` in a new Python process (tracesleuth from this tree) and let it die as it does."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(Path(__file__).parents[1])]))
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)


def test_a_writer_killed_while_staging_leaves_the_store_as_it_was(tmp_path):
    store = SpanStore(tmp_path / "s")
    store.append_spans(_spans(10).to_batches())
    before = _visible(store.path)
    done = _child(tmp_path, f"""
        import os
        from spans import span, table
        from tracesleuth.io.store import SPANS, Transaction
        txn = Transaction({str(store.path)!r})
        txn.begin()
        txn.append(SPANS, table(span("a", f"{{i + 1:x}}", None, "svc", "op", i, i + 1) for i in range(20)).to_batches())
        os._exit(9)  # as kill -9: no clean-up runs, the owner lock is released by the kernel
    """)
    assert done.returncode == 9, done.stderr
    (left,) = (store.path / STAGING).iterdir()  # its staged parts are still there ...
    assert list(left.rglob("part-*.parquet"))
    assert _visible(store.path) == before  # ... and never read
    store.append_spans(_spans(1, first=90).to_batches())  # the next writer cleans up
    assert not (store.path / STAGING).exists()


def test_a_commit_cut_after_its_commit_point_is_rolled_forward_by_the_next_reader(tmp_path):
    store = SpanStore(tmp_path / "s")
    store.append_spans(_spans(10).to_batches())
    done = _child(tmp_path, f"""
        import os
        import tracesleuth.io.store as st
        from spans import span, table
        rename, moved = os.replace, []

        def dying_replace(src, dst):  # the manifest goes in place; the second part moved kills the process
            if "/{STAGING}/" in str(src) and not str(src).endswith(".tmp"):
                moved.append(dst)
                if len(moved) == 2:
                    os._exit(9)
            rename(src, dst)

        st.os.replace = dying_replace
        txn = st.Transaction({str(store.path)!r})
        txn.begin()
        hour = 3_600_000
        txn.append(st.SPANS, table(span("a", f"{{i + 1:x}}", None, "svc", "op", i * hour, i * hour + 1)
                                   for i in range(3)).to_batches())
        txn.commit({{"paths": ["x"], "spans_read": 3, "spans_rejected": 0}})
    """)
    assert done.returncode == 9, done.stderr
    entries = json.loads((store.path / MANIFEST).read_text())["ingests"]
    assert [e["state"] for e in entries] == ["committing"]  # the process died in the middle
    assert len(list(store.path.glob("spans/**/part-*.parquet"))) == 2  # 1 before, 1 of its 3 moved
    seen = _visible(store.path)  # the reader rolls it forward first
    assert seen["spans"] == 13 and len(seen["files"]) == 4
    (entry,) = store.manifest()["ingests"]
    assert entry["state"] == COMMITTED and len(entry["parts"]) == 3 and set(entry["parts"]) <= set(seen["files"])
    assert not (store.path / STAGING).exists()
    nxt = store.append_spans(_spans(1, first=90).to_batches())  # numbers continue after the rolled-forward parts
    assert int(nxt[0].stem.split("-")[1]) == 4


def test_an_error_after_the_commit_point_leaves_the_commit_to_recovery(tmp_path, monkeypatch):
    import tracesleuth.io.store as st

    src = _csv(tmp_path / "a.csv", 12)

    def disk_error(store_path, entry):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(st, "_roll_forward", disk_error)
    with pytest.raises(OSError, match="No space"):
        ingest(str(src), tmp_path / "s")
    assert [e["state"] for e in json.loads((tmp_path / "s" / MANIFEST).read_text())["ingests"]] == ["committing"]
    assert list((tmp_path / "s" / STAGING).iterdir())  # its staged parts kept for the roll-forward
    monkeypatch.undo()
    assert SpanStore(tmp_path / "s").read_spans().num_rows == 12  # the next reader finishes it
    assert [e["state"] for e in SpanStore(tmp_path / "s").manifest()["ingests"]] == [COMMITTED]


def test_the_same_input_twice_is_stored_once_and_force_adds_it_again(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _csv(src / "a.csv", 40)
    _csv(src / "b.csv", 20, first=1000)
    shutil.copy(src / "a.csv", src / "a-copy.csv")  # the same content under another name
    first = ingest(str(src), tmp_path / "s")
    assert first.spans_read == 60 and [f["path"] for f in first.skipped_files] == [str(src / "a.csv")]
    assert "same content as" in first.skipped_files[0]["reason"]
    with pytest.raises(NothingStoredError, match="already in the store") as e:
        ingest(str(src), tmp_path / "s")
    assert len(e.value.summary.skipped_files) == 3 and e.value.summary.spans_read == 0
    store = SpanStore(tmp_path / "s")
    assert store.read_spans().num_rows == 60 and len(store.ingests()) == 1
    (entry,) = store.ingests()
    assert sorted(f["path"] for f in entry["files"]) == [str(src / "a-copy.csv"), str(src / "b.csv")]
    _csv(src / "c.csv", 8, first=2000)  # a new file beside the old ones: only it is read
    more = ingest(str(src), store)
    assert more.spans_read == 8 and len(more.skipped_files) == 3
    forced = ingest(str(src / "b.csv"), store, force=True)
    assert forced.spans_read == 20 and store.read_spans().num_rows == 88


def test_an_ingest_that_stores_nothing_leaves_no_store(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\nzz,03,01,db,q,150,160\n")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(NothingStoredError, match="nothing stored") as e:
        ingest([str(bad), str(tmp_path / "empty.csv")], tmp_path / "s")
    assert e.value.summary.spans_rejected == 1 and e.value.summary.reasons
    assert not (tmp_path / "s").exists()
    (tmp_path / "mine").mkdir()  # an empty directory the user made stays, empty
    with pytest.raises(NothingStoredError):
        ingest(str(bad), tmp_path / "mine")
    assert list((tmp_path / "mine").iterdir()) == []


def test_an_interrupted_ingest_commits_nothing_and_says_so(tmp_path):
    src = _csv(tmp_path / "a.csv", 50)
    store = SpanStore(tmp_path / "s")
    store.append_spans(_spans(3).to_batches())
    before = _visible(store.path)

    def stop(batch):
        raise KeyboardInterrupt

    with pytest.raises(IngestInterrupted) as e:
        ingest(str(src), store, on_batch=stop)
    assert e.value.signum == signal.SIGINT and not e.value.committed
    assert e.value.message == "interrupted by SIGINT: nothing committed; 1 of 1 file(s) read (50 spans) discarded"
    assert _visible(store.path) == before and not (store.path / STAGING).exists()
    assert ingest(str(src), store).spans_read == 50  # not recorded as ingested: read again


def test_a_file_being_ingested_is_skipped_by_a_simultaneous_ingest(tmp_path):
    from tracesleuth.io.store import file_sha256

    src = _csv(tmp_path / "a.csv", 12)
    other = Transaction(tmp_path / "s")  # another ingest, staging the same file
    other.begin()
    assert other.claim({str(src): file_sha256(src)}) == {}
    with pytest.raises(NothingStoredError) as e:
        ingest(str(src), tmp_path / "s")
    assert f"being ingested by another ingest (pid {os.getpid()})" in e.value.summary.skipped_files[0]["reason"]
    other.abort()
    assert ingest(str(src), tmp_path / "s").spans_read == 12


def test_cli_ingest_skips_what_is_stored_and_exits_2_when_nothing_is(tmp_path, capsys):
    from tracesleuth.cli import main

    src = _csv(tmp_path / "a.csv", 12)
    assert main(["ingest", str(src), "-o", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    assert main(["ingest", str(src), "-o", str(tmp_path / "s")]) == 2
    captured = capsys.readouterr()
    assert "Skipped 1 file(s)" in captured.out and "already in the store" in captured.out
    assert captured.err.count("\n") == 1 and "nothing to store" in captured.err and "--force" in captured.err
    assert main(["ingest", str(src), "-o", str(tmp_path / "s"), "--force", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["spans_read"] == 12 and doc["skipped_files"] == [] and doc["ingest_id"]
    assert main(["ingest", str(tmp_path / "nothing.csv"), "-o", str(tmp_path / "t")]) == 2  # no such file
    bad = tmp_path / "bad.csv"
    bad.write_text("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\nzz,03,01,db,q,150,160\n")
    capsys.readouterr()
    assert main(["ingest", str(bad), "-o", str(tmp_path / "t"), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["type"] == "NothingStoredError" and doc["spans_rejected"] == 1 and not (tmp_path / "t").exists()


def test_cli_ingest_stopped_by_sigterm_says_what_it_discarded(tmp_path, capsys, monkeypatch):
    import tracesleuth.io as tio
    from tracesleuth.cli import main

    read = tio.iter_span_batches

    def then_sigterm(*args, **kwargs):  # the first batch, then SIGTERM, as `kill` would send it
        for k, batch in enumerate(read(*args, **kwargs)):
            if k == 1:
                os.kill(os.getpid(), signal.SIGTERM)
            yield batch

    monkeypatch.setattr(tio, "iter_span_batches", then_sigterm)
    src = tmp_path / "in"
    src.mkdir()
    for k in range(3):
        _csv(src / f"{k}.csv", 10, first=100 * k)
    previous = signal.getsignal(signal.SIGTERM)
    assert main(["ingest", str(src), "-o", str(tmp_path / "s")]) == 143
    assert signal.getsignal(signal.SIGTERM) is previous  # the handlers are given back
    err = capsys.readouterr().err
    assert err.startswith("interrupted by SIGTERM: nothing committed; ") and "of 3 file(s) read (10 spans) discarded" in err
    assert err.count("\n") == 1 and not (tmp_path / "s").exists()


def test_the_collector_parts_stay_visible_beside_transactions(tmp_path):
    from tracesleuth.collector._flush import SegmentPartStore, convert_segment
    from tracesleuth.collector._wal import encode_record, segment_name

    store = SegmentPartStore(tmp_path / "store")
    (store.path / "wal").mkdir()
    path = store.path / "wal" / f"{segment_name(1)}.wal"
    path.write_bytes(encode_record(_spans(6, hours=2), S.REJECT_SCHEMA.empty_table()))
    txn = Transaction(store.path)
    txn.begin()
    txn.append(SPANS, _spans(4, first=50).to_batches())
    assert convert_segment(store, path).spans == 6  # published at once, while the ingest stages
    assert store.read_spans().num_rows == 6
    txn.commit({"paths": ["x"], "spans_read": 4, "spans_rejected": 0})
    names = sorted(p.name for p in store.span_files())
    assert store.read_spans().num_rows == 10 and len(names) == 3 and len(set(n[:11] for n in names)) == 3


@pytest.mark.slow
def test_twenty_ingests_interrupted_at_random_moments(shared_data):
    """benchmarks/bench_store_interrupts.py: 20 ingests of 16 TrainTicket span files and their log
    files each, stopped by SIGINT, SIGTERM and SIGKILL at seeded random moments; after each the
    store holds exactly the spans and logs of the committed ingests, never part of one; then the
    day ingested twice leaves the counts unchanged the second time (about 3 minutes on a busy
    2-core machine)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_store_interrupts.py"
    spec = importlib.util.spec_from_file_location("bench_store_interrupts", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.run(runs=20, seed=0, day=shared_data / "nezha" / "trainticket" / "2023-01-29")
    print(json.dumps(result["outcomes"]))
    assert result["failures"] == []  # (every check of the module docstring, after every run)
    whole, again = result["after_whole_day"], result["after_again"]
    assert whole["spans"] >= result["day_spans"] and whole["logs"] >= result["day_logs"] > 0  # every file, at least once
    assert again == whole | {"exit": 2, "line": again["line"]}
    assert sum(r["committed"] for r in result["runs"]) >= 1  # some ran to their commit, ...
    assert any(r["outcome"] in ("interrupted", "killed") for r in result["runs"])  # ... some were stopped


@pytest.mark.parametrize("part_spans", [16, 1000], ids=["while-publishing", "before-the-next-row-group"])
def test_an_interrupt_while_a_row_group_is_written_waits_for_the_write_before_closing(tmp_path, monkeypatch,
                                                                                     part_spans):
    """A signal while the main thread waits for the background row group (to publish the part,
    or to hand over the next row group): the part is dropped only once that write has ended (a
    writer closed under its write crashed the process, SIGSEGV; a part being published was
    left behind as a temporary file)."""
    import tracesleuth.io.store as store_module
    import concurrent.futures
    import threading
    import time

    writing = threading.Event()
    closed_while_writing = []
    write_table, close, result = pq.ParquetWriter.write_table, pq.ParquetWriter.close, concurrent.futures.Future.result

    def slow_write(self, *args, **kwargs):
        writing.set()
        time.sleep(0.3)
        try:
            return write_table(self, *args, **kwargs)
        finally:
            writing.clear()

    def checked_close(self):
        closed_while_writing.append(writing.is_set())
        return close(self)

    def interrupted_result(self, timeout=None):
        if writing.wait(2):  # the signal arrives while the row group is written
            raise KeyboardInterrupt
        return result(self, timeout)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", slow_write)
    monkeypatch.setattr(pq.ParquetWriter, "close", checked_close)
    monkeypatch.setattr(concurrent.futures.Future, "result", interrupted_result)
    monkeypatch.setattr(store_module, "ROW_GROUP_SPANS", 8)  # a row group per batch
    store = SpanStore(tmp_path / "s")
    with pytest.raises(KeyboardInterrupt):
        store.append_spans(_spans(40).to_batches(max_chunksize=8), part_spans=part_spans)
    assert closed_while_writing and not any(closed_while_writing)
    assert not list((tmp_path / "s").rglob("*.parquet*"))  # the unfinished part removed
