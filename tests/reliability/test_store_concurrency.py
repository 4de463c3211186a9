"""Many writers, one span store: simultaneous ``tracesleuth ingest`` runs and a receiver.

Each round starts three ``python -m tracesleuth ingest`` subprocesses and a receiver
(``tracesleuth.collector.serve`` in a subprocess, converting its write-ahead log into parts every
50 ms) at the same moment, into one store, while a client uploads to the receiver. Afterwards:
every span of every run and every acknowledged upload is in the store exactly once (counted by
span id), every part is readable, no temporary file is left, and the manifest credits each
ingest with exactly the parts and spans it wrote. Each round uses a new store, which the four
writers race to create.

``TRACESLEUTH_CONCURRENCY_ROUNDS`` sets the number of rounds (default 3, about 15 s on two cores;
the issue's target was checked by hand with 20).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx
import pyarrow as pa
import polars as pl
import pyarrow.parquet as pq
import pytest

from spans import span, table
from tracesleuth import schema as S
from tracesleuth.errors import TraceFormatError
from tracesleuth.io.store import LOCK, MANIFEST, SpanStore

sys.path.insert(0, str(Path(__file__).parents[1] / "collector"))
from receiver_support import Receiver, proto_request  # noqa: E402

ROUNDS = int(os.environ.get("TRACESLEUTH_CONCURRENCY_ROUNDS", "3"))
INGESTS = 3
#: Spans per input file, files per ingest run, rejected rows per file. An ingest reserves its
#: part after its first row group (131,072 spans) and writes it while it reads the rest: with
#: 300,000 spans the ingests' writing overlaps.
FILE_SPANS, FILES, BAD_ROWS = 150_000, 2, 2
_T0 = 1_700_000_000_000_000_000
#: Seconds an ingest subprocess may take.
INGEST_SECONDS = 120
PB = {"Content-Type": "application/x-protobuf"}


def _write_inputs(folder: Path, run: int) -> tuple[list[Path], set[str]]:
    """CSV files of one ingest run (span ids unique to the run, traces of 8 spans, a few rejected
    rows); returns the files and the span ids they hold."""
    folder.mkdir(parents=True)
    files, ids = [], set()
    for f in range(FILES):
        n = pl.int_range(f * FILE_SPANS, (f + 1) * FILE_SPANS, eager=True)
        root = n - n % 8
        spans = pl.DataFrame({"n": n, "root": root}).select(
            trace_id=pl.format(f"{run + 1:016x}{{}}", (pl.col("n") // 8 + 1).cast(pl.Utf8).str.zfill(16)),
            span_id=_span_id(run, pl.col("n")),
            parent_span_id=pl.when(pl.col("n") == pl.col("root")).then(None).otherwise(_span_id(run, pl.col("root"))),
            service=pl.lit(f"svc-{run}"),
            operation=pl.format("op-{}", pl.col("n") % 5),
            start_ns=_T0 + pl.col("n") * 1000,
            end_ns=_T0 + pl.col("n") * 1000 + 500 + pl.col("n") % 7,
        )
        bad = pl.DataFrame({"trace_id": [""] * BAD_ROWS, "span_id": ["f" * 16] * BAD_ROWS}).with_columns(
            parent_span_id=pl.lit(None, pl.Utf8), service=pl.lit("svc"), operation=pl.lit("op"),
            start_ns=pl.lit(_T0), end_ns=pl.lit(_T0 + 1))  # rejected: no trace id
        path = folder / f"spans-{f}.csv"
        pl.concat([spans, bad], how="vertical_relaxed").write_csv(path)
        files.append(path)
        ids.update(spans["span_id"].to_list())
    return files, ids


def _span_id(run: int, n: pl.Expr) -> pl.Expr:
    return pl.format(f"{run + 1:04x}{{}}", (n + 1).cast(pl.Utf8).str.zfill(12))


class _Uploader(threading.Thread):
    """Uploads OTLP protobuf requests of 64 spans to ``url`` until stopped; keeps the span ids
    of the acknowledged ones."""

    def __init__(self, url: str, seed: int):
        super().__init__(daemon=True)
        self.url, self.seed = url, seed
        self.acked: list[str] = []
        self.failures: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=30) as client:
            k = 0
            while not self.stop.is_set() or k < 5:
                body, valid = proto_request(64, seed=self.seed + k)
                k += 1
                r = client.post(self.url + "/v1/traces", content=body, headers=PB)
                if r.status_code == 200:
                    self.acked += [span_id for _, span_id in valid]
                else:
                    self.failures.append(f"{r.status_code}: {r.text[:200]}")


def _check_store(store: Path, runs: list[dict], collected: list[str]) -> None:
    """Every span of every run and upload exactly once, every part readable, no temporary file
    left, one manifest entry per run crediting it with its own parts and spans."""
    parts = SpanStore(store).span_files()
    span_ids: list[str] = []
    ids_by_part: dict[str, list[str]] = {}
    for part in parts:
        t = pq.read_table(part, schema=S.SPAN_SCHEMA)  # every column of every page: readable
        ids_by_part[str(part.relative_to(store))] = t.column(S.SPAN_ID).to_pylist()
        span_ids += ids_by_part[str(part.relative_to(store))]
    for part in sorted((store / "rejects").glob("part-*.parquet")):
        pq.read_table(part, schema=S.REJECT_SCHEMA)
    left = [p.name for p in store.rglob("*.tmp")]
    assert not left, f"temporary files left behind: {left}"

    doubled = [i for i, n in Counter(span_ids).items() if n > 1]
    assert not doubled, f"{len(doubled)} spans stored more than once, e.g. {doubled[:3]}"
    expected = set(collected).union(*(r["ids"] for r in runs))
    lost = expected - set(span_ids)
    assert not lost, f"{len(lost)} spans lost, e.g. {sorted(lost)[:3]}"
    assert len(span_ids) == len(expected), "spans in the store that no writer wrote"
    assert SpanStore(store, create=False).read_spans().num_rows == len(expected)

    entries = SpanStore(store, create=False).manifest()["ingests"]
    credited: list[str] = []
    for run in runs:
        mine = [e for e in entries if e["paths"] == [str(p) for p in run["files"]]]
        assert len(mine) == 1, f"run {run['name']}: {len(mine)} manifest entries"
        entry = mine[0]
        assert entry["parts"] == run["summary"]["parts"]
        assert entry["spans_read"] == len(run["ids"]) and entry["spans_rejected"] == FILES * BAD_ROWS
        assert set().union(*(ids_by_part[p] for p in entry["parts"])) == run["ids"], \
            f"run {run['name']}: its manifest entry credits it with spans it did not write"
        credited += entry["parts"]
    assert len(credited) == len(set(credited)), "a part credited to two ingests"


def test_simultaneous_ingests_and_a_receiver_share_a_store(tmp_path):
    inputs = [_write_inputs(tmp_path / "in" / f"run-{i}", i) for i in range(INGESTS)]
    for round_ in range(ROUNDS):
        store = tmp_path / f"store-{round_}"  # created by the writers, all at once
        runs = [{"name": f"r{round_}-i{i}", "files": files, "ids": ids} for i, (files, ids) in enumerate(inputs)]
        procs = [subprocess.Popen([sys.executable, "-m", "tracesleuth", "ingest", *map(str, run["files"]),
                                   "-o", str(store), "--json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for run in runs]
        receiver = Receiver(store, flush_interval_seconds=0.05).start()
        uploader = _Uploader(receiver.url, seed=1_000_000 * (round_ + 1))
        try:
            uploader.start()
            for run, proc in zip(runs, procs):
                out, err = proc.communicate(timeout=INGEST_SECONDS)
                assert proc.returncode == 0, f"ingest {run['name']} exited {proc.returncode}: {err[-2000:]}"
                run["summary"] = json.loads(out)
                assert run["summary"]["spans_read"] == len(run["ids"])
            uploader.stop.set()
            uploader.join(60)
            stats = receiver.stop()
        finally:
            uploader.stop.set()
            receiver.kill()
            for proc in procs:
                if proc.poll() is None:  # pragma: no cover - only after a failure
                    proc.kill()
                    proc.communicate()
        assert not uploader.failures, uploader.failures[:3]
        assert stats["spans"]["stored"] == len(uploader.acked)
        _check_store(store, runs, uploader.acked)
        print(f"round {round_ + 1}: {sum(len(r['ids']) for r in runs):,} ingested + {len(uploader.acked):,} "
              f"received spans, each stored once, in {len(SpanStore(store).span_files())} parts")
        assert (store / LOCK).is_file() and (store / MANIFEST).is_file()


def test_a_crashed_writer_temporary_part_is_never_read_nor_reused(tmp_path):
    """A part being written (a reserved temporary file) is invisible to readers, and the next
    writer takes another number: the writer that reserved it may still publish it."""
    store = SpanStore(tmp_path / "s")
    spans = pa.table({S.SPAN_ID: ["1"]})  # not a span table: never read
    reserved = store._next_part("spans")
    pq.write_table(spans, reserved.with_name("." + reserved.name + ".tmp"))
    assert store.span_files() == [] and store.read_spans().num_rows == 0
    written = store.append_spans(table([span("1", "2", None, "svc", "op", 0, 1)]).to_batches())
    assert [p.name for p in written] == ["part-000001.parquet"] and reserved.name == "part-000000.parquet"
    assert store.read_spans().num_rows == 1


def test_a_foreign_directory_is_refused_and_left_untouched(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(TraceFormatError, match="refusing"):
        SpanStore(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
