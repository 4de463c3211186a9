"""Synthetic span stores of any size, for the scale-out tests and benchmarks (nothing committed).

Traces of an E-Shopper-like shop (Cortellessa & Traini's case study) with two entry points:
``frontend:GET /home`` (14 spans: five RPCs, client and server spans, two asynchronous
producers, a render) and ``frontend:POST /cart`` (5 spans), 4 to 1. Every span is served by one
of three instances of its service; durations are log-normal (a factor per trace and one per span); 1% of the spans have status
``error``. The root span carries ``http.method``, ``customer.tier`` (gold, silver, bronze),
``http.response.body.size`` (an integer with many values) and ``session.id`` (an identifier).
**A degradation**: 30% of the gold customers' home requests spend 200 ms more in
``items:getrecommended``, served by ``items-2``.

The store is written as a collector would receive the spans: the traces start evenly over
``hours`` hours (so the store has that many Hive partitions and traces straddle their edges), and
each span arrives when it ends plus up to 5 s of export delay (a parent after its children, the
traces of those seconds interleaved), so a trace's spans may lie in several parts and whole
traces come together only by a shuffle.
Everything follows from ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from .. import schema as S
from ..model._codes import mix64
from ..io.store import PART_SPANS, SpanStore

__all__ = ["DEGRADED_OPERATION", "SyntheticStore", "synthetic_batches", "write_synthetic_store"]

#: 2023-01-29T08:00:00Z, the first trace's start.
START_NS = 1_674_979_200_000_000_000
#: The operation the degradation slows down, and the instance it runs on.
DEGRADED_OPERATION, DEGRADED_INSTANCE = "items:getrecommended", "items-2"
#: (parent index, service, operation, kind, offset ms, duration ms) of each endpoint's spans.
SHAPES = {
    "GET /home": [
        (-1, "frontend", "GET /home", "server", 0, 120),
        (0, "frontend", "getprofile", "client", 2, 20), (1, "account", "getprofile", "server", 3, 18),
        (0, "frontend", "getcart", "client", 24, 15), (3, "cart", "getcart", "server", 25, 13),
        (0, "frontend", "getcategory", "client", 40, 10), (5, "categories", "getcategory", "server", 41, 8),
        (0, "frontend", "getbrands", "client", 52, 10), (7, "categories", "getbrands", "server", 53, 8),
        (0, "frontend", "getrecommended", "client", 64, 30), (9, "items", "getrecommended", "server", 65, 28),
        (0, "frontend", "finditems", "producer", 96, 2), (0, "frontend", "findfeatures", "producer", 99, 2),
        (0, "frontend", "render", "internal", 102, 15),
    ],
    "POST /cart": [
        (-1, "frontend", "POST /cart", "server", 0, 40),
        (0, "frontend", "addtocart", "client", 2, 30), (1, "cart", "addtocart", "server", 3, 28),
        (2, "cart", "INSERT cart_items", "client", 5, 10), (0, "frontend", "render", "internal", 33, 5),
    ],
}
#: Share of the traces that enter by each endpoint.
MIX = {"GET /home": 0.8, "POST /cart": 0.2}
#: Share of the gold customers' home requests that are degraded.
DEGRADED_SHARE = 0.3
TIERS = ("gold", "silver", "bronze")
MEAN_SPANS = sum(len(SHAPES[e]) * share for e, share in MIX.items())
#: Longest wait of a span for its export (OpenTelemetry's BatchSpanProcessor: 5 s).
EXPORT_DELAY_NS = 5_000_000_000
#: Spans per batch given to the store.
BATCH_SPANS = 4_096


@dataclass(frozen=True)
class SyntheticStore:
    """What :func:`write_synthetic_store` wrote: the store, its spans, traces and parts."""

    path: Path
    spans: int
    traces: int
    parts: int


def write_synthetic_store(path, n_spans: int, *, seed: int = 0, hours: int = 3, part_spans: int = PART_SPANS,
                          chunk_traces: int = 100_000) -> SyntheticStore:
    """Write a synthetic span store of about ``n_spans`` spans (module docstring).

    Parameters
    ----------
    path : str or Path
        The store (made; as :class:`~tracesleuth.io.store.SpanStore`).
    n_spans : int
        Spans wanted (whole traces: a few more or less).
    seed : int, default=0
    hours : int, default=3
        The traces start evenly over this many hours from :data:`START_NS`.
    part_spans : int
        Spans per part (smaller: more parts).
    chunk_traces : int
        Traces generated at once (the generator's memory: about 10 KB a trace).

    Returns
    -------
    SyntheticStore
    """
    n_traces = max(1, round(n_spans / MEAN_SPANS))
    store = SpanStore(path)
    written = [0]

    def batches():
        for batch in synthetic_batches(n_traces, seed=seed, hours=hours, chunk_traces=chunk_traces):
            written[0] += batch.num_rows
            yield batch

    parts = store.append_spans(batches(), part_spans=part_spans)
    return SyntheticStore(store.path, written[0], n_traces, len(parts))


def synthetic_batches(n_traces: int, *, seed: int = 0, hours: int = 3, chunk_traces: int = 100_000
                      ) -> Iterator[pa.RecordBatch]:
    """The spans of ``n_traces`` synthetic traces in arrival order, chunk by chunk of traces, in
    batches of at most :data:`BATCH_SPANS` spans."""
    gap_ns = hours * 3_600_000_000_000 // max(n_traces, 1)
    for first in range(0, n_traces, chunk_traces):
        rng = np.random.default_rng([seed, first])
        yield from _chunk(rng, first, min(chunk_traces, n_traces - first), gap_ns, seed).to_batches(BATCH_SPANS)


def _chunk(rng: np.random.Generator, first: int, n: int, gap_ns: int, seed: int) -> pa.Table:
    endpoint = rng.choice(list(MIX), size=n, p=list(MIX.values()))
    tier = rng.choice(len(TIERS), size=n, p=[0.2, 0.3, 0.5])
    degraded = (tier == 0) & (rng.random(n) < DEGRADED_SHARE)
    trace_number = np.arange(first, first + n, dtype=np.uint64)
    pieces = []
    for name, shape in SHAPES.items():
        rows = np.flatnonzero(endpoint == name)
        if len(rows):
            pieces.append(_traces(rng, shape, trace_number[rows], degraded[rows] & (name == "GET /home"),
                                  gap_ns, seed))
    spans = pa.concat_tables(pieces)
    roots = np.flatnonzero(pa.compute.is_null(spans.column(S.PARENT_SPAN_ID)).to_numpy(zero_copy_only=False))
    trace_of_root = (spans.column("_trace").to_numpy()[roots] - first).astype(np.int64)
    attributes = _root_attributes(rng, spans.num_rows, roots, tier[trace_of_root], seed, trace_of_root + first)
    spans = spans.drop_columns(["_trace"]).append_column(S.ATTRIBUTES, attributes)
    # A span is exported when it ends, in its process's next batch (within EXPORT_DELAY_NS).
    arrival = spans.column(S.END_NS).to_numpy() + rng.integers(0, EXPORT_DELAY_NS, size=spans.num_rows)
    return S.with_later_columns(spans.take(pa.array(np.argsort(arrival, kind="stable")))).cast(S.SPAN_SCHEMA)


def _traces(rng, shape, numbers: np.ndarray, degraded: np.ndarray, gap_ns: int, seed: int) -> pa.Table:
    n, k = len(numbers), len(shape)
    parent_local = np.array([s[0] for s in shape])
    offset = np.array([s[4] for s in shape], dtype=np.int64) * 1_000_000
    jitter = rng.lognormal(0, 0.1, size=(n, 1)) * rng.lognormal(0, 0.1, size=(n, k))  # per trace, per span
    duration = (np.array([s[5] for s in shape]) * 1_000_000 * jitter).astype(np.int64)
    keys = [f"{s[1]}:{s[2]}" for s in shape]
    if DEGRADED_OPERATION in keys:  # the slow call and everything above it take 200 ms more
        j = keys.index(DEGRADED_OPERATION)
        extra = np.where(degraded, 200_000_000, 0)
        chain, later = [j], np.zeros(k, dtype=bool)
        while parent_local[chain[-1]] >= 0:
            chain.append(parent_local[chain[-1]])
        duration[:, chain] += extra[:, None]
        later[[i for i in range(k) if offset[i] > offset[j] and i not in chain]] = True
        offset = offset[None, :] + np.where(later[None, :], extra[:, None], 0)
    start = (START_NS + numbers.astype(np.int64) * gap_ns)[:, None] + offset
    end = start + duration
    for i in range(1, k):  # parents come first: a child ends 0.1 ms before its parent at the latest
        end[:, i] = np.minimum(end[:, i], end[:, parent_local[i]] - 100_000)
    trace_ids = _hex(mix64((numbers + np.uint64(1)) ^ np.uint64(seed << 48)), 32)
    span_numbers = mix64((numbers[:, None] * np.uint64(64) + np.arange(k, dtype=np.uint64)[None, :]).ravel()
                         ^ np.uint64(seed << 56) ^ np.uint64(0x5BD1E995))
    parent_numbers = np.where(parent_local[None, :] >= 0, span_numbers.reshape(n, k)[:, np.maximum(parent_local, 0)],
                              np.uint64(0)).ravel()
    services = np.array([s[1] for s in shape], dtype=object)
    instance = rng.integers(0, 3, size=(n, k))
    if DEGRADED_OPERATION in keys:
        instance[degraded, keys.index(DEGRADED_OPERATION)] = 2
    instances = pa.array((np.tile(services, n) + "-" + instance.ravel().astype(str).astype(object)).tolist(),
                         pa.string())
    tile = lambda i: pa.array(np.tile(np.array([s[i] for s in shape], dtype=object), n).tolist(), pa.string())
    error = rng.random(n * k) < 0.01
    return pa.table({
        S.TRACE_ID: pa.array(np.repeat(np.asarray(trace_ids, dtype=object), k).tolist(), pa.string()),
        S.SPAN_ID: _hex(span_numbers, 16),
        S.PARENT_SPAN_ID: pa.array(_hex(parent_numbers, 16).to_pylist(), pa.string(),
                                   mask=np.tile(parent_local < 0, n)),
        S.SERVICE: tile(1), S.OPERATION: tile(2), S.INSTANCE: instances, S.KIND: tile(3),
        S.START_NS: pa.array(start.ravel()), S.END_NS: pa.array(end.ravel()),
        S.STATUS: pa.array(np.where(error, "error", "ok").tolist(), pa.string()),
        S.FOLLOWS_FROM: pa.array(np.zeros(n * k, dtype=bool)),
        "_trace": pa.array(np.repeat(numbers, k)),
    })


def _root_attributes(rng, n_spans: int, roots: np.ndarray, tier: np.ndarray, seed: int, trace: np.ndarray
                     ) -> pa.Array:
    """The attributes column: four entries on each root span, none elsewhere."""
    m = len(roots)
    keys = np.tile(np.array(["http.method", "customer.tier", "http.response.body.size", "session.id"], dtype=object), m)
    text = np.empty((m, 4), dtype=object)
    text[:, 0] = np.where(rng.random(m) < 0.9, "GET", "POST")
    text[:, 1] = np.array(TIERS, dtype=object)[tier]
    text[:, 2] = None
    text[:, 3] = np.asarray(_hex(mix64(trace.astype(np.uint64) ^ np.uint64(seed + 7)), 32).to_pylist(), dtype=object)
    numbers = np.zeros((m, 4), dtype=np.int64)
    numbers[:, 2] = rng.integers(200, 50_000, size=m)
    is_number = np.zeros((m, 4), dtype=bool)
    is_number[:, 2] = True
    entries = pa.StructArray.from_arrays(
        [pa.array(keys.tolist(), pa.string()), pa.array(text.ravel().tolist(), pa.string()),
         pa.array(numbers.ravel(), pa.int64(), mask=~is_number.ravel()),
         pa.array(np.zeros(4 * m), pa.float64(), mask=np.ones(4 * m, dtype=bool)),
         pa.array(np.zeros(4 * m, dtype=bool), pa.bool_(), mask=np.ones(4 * m, dtype=bool))],
        fields=list(S.ATTRIBUTE_TYPE))
    per_span = np.zeros(n_spans, dtype=np.int32)
    per_span[roots] = 4
    offsets = np.concatenate(([0], np.cumsum(per_span))).astype(np.int32)  # roots ascend: entries in span order
    return pa.ListArray.from_arrays(pa.array(offsets), entries)


def _hex(values: np.ndarray, width: int) -> pa.StringArray:
    """Lower-case hexadecimal of 64-bit values, left-padded with zeros to ``width`` (16 or 32)."""
    values = np.asarray(values, dtype=np.uint64)
    n = len(values)
    nibbles = (values[:, None] >> (np.arange(15, -1, -1, dtype=np.uint64) * np.uint64(4))) & np.uint64(15)
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[nibbles.astype(np.int64)]
    if width > 16:
        digits = np.concatenate([np.full((n, width - 16), ord("0"), dtype=np.uint8), digits], axis=1)
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(digits).tobytes()))
