"""Planted performance relations, for the common test and the tests of this analysis.

Traces of a small file service (``files``): each request (``files:WebDAV.request``) calls some
of these operations in turn, whose time and memory follow known laws of their arguments
(recorded as :mod:`tracesleuth.instrument` records them, span attributes
``tracesleuth.arg.<argument>.<measure>`` and ``tracesleuth.memory.peak_bytes``):

============================= ========= ===========================================================
operation                     metric    law (what derivation must find)
============================= ========= ===========================================================
``FileStore.delete``          time      0.3 ms + 2 ms x depth(path) + Normal(0, 0.1 ms): correlated, degree 1
``FileStore.propfind``        time      20 µs + 0.5 µs x n + 0.08 µs x n² + Normal(0, 5 µs), n = size(entries)
                                        log-uniform in [1, 300]: correlated, degree 2
``FileStore.propfind``        memory    1 KiB + 200 B x size(entries), exactly: correlated, degree 1
``FileStore.get_owner``       time      70 % Normal(200 µs, 20 µs), 30 % Normal(2 ms, 200 µs), whatever
                                        length(path): clustered, 2 clusters
``FileStore.get_owner``       memory    512 B always: constant
``FileStore.mkcol``           time      60 % Normal(1 ms, 50 µs), 40 % Normal(4 ms, 0.3 ms): clustered, 2
``FileStore.rescan``          time      3 calls in all: not annotated (too few)
============================= ========= ===========================================================
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ... import schema as S
from ...instrument import ARGUMENT_PREFIX, MEMORY_ATTRIBUTE

__all__ = ["EXPECTED", "planted_case", "planted_spans", "planted_score"]

SERVICE = "files"
ROOT = "WebDAV.request"
#: ``(operation key, metric) -> (kind, feature or clusters, degree)``; ``None`` kind: not annotated.
EXPECTED = {
    ("files:FileStore.delete", "time"): ("correlated", "depth(path)", 1),
    ("files:FileStore.propfind", "time"): ("correlated", "size(entries)", 2),
    ("files:FileStore.propfind", "memory"): ("correlated", "size(entries)", 1),
    ("files:FileStore.get_owner", "time"): ("clustered", 2, None),
    ("files:FileStore.get_owner", "memory"): ("constant", None, None),
    ("files:FileStore.mkcol", "time"): ("clustered", 2, None),
    ("files:FileStore.rescan", "time"): (None, None, None),
}


def _attribute(key: str, value) -> dict:
    return {"key": key, "str": None, "int": int(value), "float": None, "bool": None}


def planted_spans(n_requests: int = 400, *, random_state=0, delay_ns: int = 0) -> pa.Table:
    """Spans of ``n_requests`` requests with the laws of the module docstring.

    Parameters
    ----------
    n_requests : int, default=400
    random_state : int or numpy Generator, default=0
    delay_ns : int, default=0
        Added to every call of ``FileStore.get_owner`` and ``FileStore.delete`` (a slower
        dependency), and to the requests that make them.

    Returns
    -------
    pyarrow.Table
        In :data:`~tracesleuth.schema.SPAN_SCHEMA`.
    """
    rng = np.random.default_rng(random_state)
    rows = {name: [] for name in S.PRE_EVENTS_SPAN_SCHEMA.names}
    t0 = 1_700_000_000_000_000_000
    span_counter = 0

    def add(trace, span, parent, operation, start, duration, attributes):
        for name, value in ((S.TRACE_ID, trace), (S.SPAN_ID, span), (S.PARENT_SPAN_ID, parent), (S.SERVICE, SERVICE),
                            (S.OPERATION, operation), (S.INSTANCE, "files-0"), (S.KIND, "internal"),
                            (S.START_NS, int(start)), (S.END_NS, int(start + duration)), (S.STATUS, "ok"),
                            (S.FOLLOWS_FROM, False), (S.ATTRIBUTES, attributes)):
            rows[name].append(value)

    rescans = 0
    for r in range(n_requests):
        trace = f"{r + 1:032x}"
        root = f"{(span_counter := span_counter + 1):016x}"
        start = t0 + r * 50_000_000
        cursor = start + 10_000
        calls = []
        depth = int(rng.integers(1, 9))
        calls.append(("FileStore.delete", 300_000 + 2_000_000 * depth + rng.normal(0, 100_000) + delay_ns,
                      [_attribute(ARGUMENT_PREFIX + "path.depth", depth)]))
        n = int(np.exp(rng.uniform(0.0, np.log(300.0))))
        calls.append(("FileStore.propfind", 20_000 + 500 * n + 80 * n * n + rng.normal(0, 5_000),
                      [_attribute(ARGUMENT_PREFIX + "entries.size", n), _attribute(MEMORY_ATTRIBUTE, 1024 + 200 * n)]))
        owner = rng.normal(200_000, 20_000) if rng.random() < 0.7 else rng.normal(2_000_000, 200_000)
        calls.append(("FileStore.get_owner", owner + delay_ns,
                      [_attribute(ARGUMENT_PREFIX + "path.length", int(rng.integers(5, 80))),
                       _attribute(MEMORY_ATTRIBUTE, 512)]))
        if r % 2 == 0:
            calls.append(("FileStore.mkcol", rng.normal(1_000_000, 50_000) if rng.random() < 0.6
                          else rng.normal(4_000_000, 300_000), []))
        if rescans < 3 and r % 50 == 7:
            rescans += 1
            calls.append(("FileStore.rescan", 5_000_000, []))
        for operation, duration, attributes in calls:
            duration = max(int(duration), 1_000)
            add(trace, f"{(span_counter := span_counter + 1):016x}", root, operation, cursor, duration, attributes)
            cursor += duration + 5_000
        add(trace, root, None, ROOT, start, cursor - start + 10_000, [])
    return S.with_later_columns(pa.table(rows, schema=S.PRE_EVENTS_SPAN_SCHEMA))


def planted_score(annotations, skipped) -> float:
    """Share of :data:`EXPECTED` found: kind, feature or cluster count, and degree all right."""
    skipped_keys = {(o, m) for o, m, _ in skipped}
    hits = 0
    for key, (kind, what, degree) in EXPECTED.items():
        a = annotations.get(*key)
        if kind is None:
            hits += a is None and key in skipped_keys
        elif a is not None and a.kind == kind:
            if kind == "correlated":
                hits += a.feature == what and a.degree == degree
            elif kind == "clustered":
                hits += len(a.clusters) == what
            else:
                hits += 1
    return hits / len(EXPECTED)


def planted_case(random_state=0):
    """The common test's case: derivation must recover every planted law (floor 1.0)."""
    from ...model import build_trace_table
    from .. import PlantedCase

    table = build_trace_table(planted_spans(400, random_state=random_state))
    return PlantedCase(args=(table,), settings={"random_state": random_state},
                       score=lambda est: planted_score(est.annotations_, est.result_.skipped), floor=1.0)
