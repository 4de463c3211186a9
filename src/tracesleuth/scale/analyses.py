"""The analyses on a trace table built on Dask: what runs on the workers and what stays here.

**Latency degradation patterns** (:func:`fit_patterns`). Exact by default: the table's columns
the search reads are collected and the estimator runs unchanged, so the result is the
in-process one (same seed, same patterns). Its search is cheap once the requests are encoded:
the GA counts patterns over the distinct (latency class, bin codes) cells of the requests, not
the requests (:mod:`~tracesleuth.analyses.patterns._bitsets`); what needs every value is the
mean shift of each exclusive-time column and of the latencies. For a table too large for this
process, ``sample=n`` searches a uniform sample of ``n`` requests (seeded, without replacement)
and then counts every found pattern's true and false positives and its sub-interval's requests
over **every** request, partition by partition on the workers (the counts add up), and labels
every request there: the precision, recall and F-score reported are exact; only the choice of
interval, split points and conditions comes from the sample. How far that choice can be off:
by the Dvoretzky-Kiefer-Wolfowitz inequality, with probability at least ``1 - delta`` the
sample's latency distribution function is within ``epsilon = sqrt(ln(2 / delta) / (2 n))`` of
the table's everywhere, so every latency range (a mode, a sub-interval) holds a share of the
sample within ``epsilon`` of its share of all requests (``n = 10**6``, ``delta = 0.01``:
``epsilon = 0.0016``); and for each pattern its precision on the sample is within
``sqrt(ln(2 / delta) / (2 s))`` of the exact one (Hoeffding; ``s`` the sample's requests
satisfying it), its recall within ``sqrt(ln(2 / delta) / (2 p))`` (``p`` the sample's requests of
the sub-interval). The result's notes give ``epsilon`` and, per sub-interval, the F-score on the
sample beside the exact one.

**Request-flow comparison** runs here on the collected tables of its periods (one row per
request: its categories' Kolmogorov-Smirnov and share tests, the decision tree need every
request's values), but its call views (one row per span, ten or more per request) never reach
this process: each partition's calls are reduced on the worker that builds them
(:meth:`CollectedTraceTable.map_calls <tracesleuth.scale.table.CollectedTraceTable.map_calls>`,
:mod:`tracesleuth.analyses.compare.calls`) to the pooled tests' series (about 32 bytes a call),
counts that add up (calls made, error origins, kinds, spans per service), and the calls of the few
categories whose mutations are explained. The series are written by the tasks into the table's
work directory by bucket of strata (:meth:`CollectedTraceTable.spill_directory
<tracesleuth.scale.table.CollectedTraceTable.spill_directory>`) and ranked here one bucket of both
periods at a time, so this process never holds a period's series whole. The result is the
in-process one.

**Root-cause localization** runs here on the collected tables and call view of its period. It
compares distributions of requests (PCA of a cluster's requests, Mann-Whitney tests), which need
every request's values, not sums; its per-cluster PCA and tests run on the workers, a batch of
clusters per task, through joblib's Dask backend (:func:`on_workers`): every cluster has its own
seed, so the result is the in-process one.

**Performance annotations** run here on the collected tables too, unchanged: what they need
beyond the call view, each call's span attributes (the features and the memory attribute), is
read where the spans are, by the task that builds a partition's calls
(:meth:`CollectedTraceTable.calls <tracesleuth.scale.table.CollectedTraceTable.calls>` with
``span_columns``), and reaches this process as a few ``Float64`` columns of the calls. Derivation
fits and the check's tests need every call of an operation together; the result is the in-process
one.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from .. import schema as S
from ..errors import ParameterError
from .table import ORDER, DaskTraceTable

__all__ = ["dkw_epsilon", "fit_patterns", "on_workers"]

#: The confidence the sample's error bounds are stated at (1 - delta).
CONFIDENCE = 0.99


def dkw_epsilon(n: int, delta: float = 1 - CONFIDENCE) -> float:
    """Largest difference, with probability ``1 - delta``, between a uniform sample's empirical
    distribution function of ``n`` values and the population's (Dvoretzky-Kiefer-Wolfowitz with
    Massart's constant): ``sqrt(ln(2 / delta) / (2 n))``."""
    return math.sqrt(math.log(2 / delta) / (2 * n))


def fit_patterns(estimator, table, *, sample: int | None = None, random_state=None
                 ) -> tuple[np.ndarray, pl.DataFrame, Any]:
    """Fit a :class:`~tracesleuth.analyses.patterns.LatencyDegradationPatterns` on a trace table,
    built on Dask or in this process.

    Parameters
    ----------
    estimator : LatencyDegradationPatterns or DegradedClusters
        Fitted in place (on the sample, with ``sample``); nothing else is written to it.
    table : DaskTraceTable or TraceTable
    sample : int, optional
        A Dask-built table: search a uniform sample of this many requests, then score and label
        every request on the workers (module docstring). None (or at least the table's
        requests): exact, the whole table collected.
    random_state : int, optional
        Seeds the sample (the estimator has its own).

    Returns
    -------
    (labels, requests, result)
        ``labels``: ndarray of int64, shape (n_requests,), for every request of the table in
        table order (``estimator.labels_``; with ``sample``, ``estimator.predict`` of every
        request on the workers, while ``estimator.labels_`` stay the sample's);
        ``requests``: polars DataFrame of their ``trace_id``, ``span_id`` and ``latency_ns``;
        ``result``: the :class:`~tracesleuth.analyses.patterns.DegradationPatternsResult`
        (``estimator.result_``; with ``sample``, a copy scored on every request with a
        :class:`~tracesleuth.analyses.patterns.notes.SampleScored` note).

    Raises
    ------
    ParameterError
        ``sample`` < 2, given for a table built in this process, or with a clustering baseline
        (no ``predict``).
    """
    if sample is not None and not isinstance(table, DaskTraceTable):
        raise ParameterError("--sample samples a table built on Dask: give --scheduler too")
    if sample is not None and sample < 2:
        raise ParameterError(f"--sample must be at least 2 requests; got {sample}")
    if sample is None or sample >= table.n_requests:
        collected = table.to_trace_table() if isinstance(table, DaskTraceTable) else table
        estimator.fit(collected)
        return estimator.labels_, collected.frame.select(S.TRACE_ID, S.SPAN_ID, S.LATENCY_NS), estimator.result_
    if not hasattr(estimator, "predict"):
        method = estimator.get_params().get("method")
        raise ParameterError(f"--sample scores patterns on every request; the solver {method!r} finds "
                             "clusters, not patterns: use --solver ga or bnb, or leave out --sample")
    sampled = _sample(table, sample, random_state)
    estimator.fit(sampled)
    return _exact_scores(estimator, table, sample, random_state, int(sampled.frame[S.LATENCY_NS].max()))


def _sample(table: DaskTraceTable, n: int, random_state):
    """A uniform sample of ``n`` requests of the table (without replacement), in table order."""
    rng = np.random.default_rng(random_state)
    chosen = np.sort(rng.choice(table.n_requests, size=n, replace=False))
    bounds = np.concatenate(([0], np.cumsum(table.part_rows)))
    taken = table.scheduler.map(_take, [(p, chosen[(chosen >= a) & (chosen < b)] - a)
                                        for p, a, b in zip(table.parts, bounds[:-1], bounds[1:])],
                                "sampling the requests")
    frame = pl.concat([f for f in taken if f.height]).sort(ORDER)
    from ..model.table import TraceTable

    return TraceTable(frame=frame, endpoint=table.endpoint, operations=table.operations, assembly=table.assembly,
                      endpoints=table.endpoints, dropped_attributes=table.dropped_attributes)


def _exact_scores(estimator, table: DaskTraceTable, sample: int, random_state, sample_slowest: int):
    """Score the sample's patterns over every request (on the workers) and label every request
    (``estimator.predict``). A latency interval open at the top (up to the sample's slowest
    request) is extended to the table's slowest request, with its last sub-interval."""
    from ..analyses.patterns import pattern_quality
    from ..analyses.patterns.notes import SampleScored

    result = estimator.result_
    if result.found and result.interval.high_ns == sample_slowest + 1:
        slowest = table.slowest_ns
        result = replace(result, interval=replace(result.interval, high_ns=slowest + 1),
                         split_points=result.split_points[:-1] + (slowest + 1,),
                         sub_intervals=tuple(replace(s, high_ns=slowest + 1) if s.high_ns == sample_slowest + 1 else s
                                             for s in result.sub_intervals))
    subs = result.sub_intervals
    counted = table.scheduler.map(_count_part, [(p, estimator, result) for p in table.parts],
                                  "scoring the patterns on every request")
    rescored = []
    for s, (tp, satisfied, positives) in zip(subs, sum(c["counts"] for c in counted).tolist()):
        if s.pattern is None:
            rescored.append(replace(s, n_positives=positives))
            continue
        q = pattern_quality(tp, satisfied - tp, positives)
        rescored.append(replace(s, precision=q.precision, recall=q.recall, f_score=q.f_score, tp=q.tp, fp=q.fp,
                                n_positives=positives, support=q.support))
    pairs = [(s.index, s.f_score, r.f_score) for s, r in zip(subs, rescored) if s.f_score is not None]
    note = SampleScored(sample, table.n_requests, random_state, dkw_epsilon(sample), CONFIDENCE,
                        tuple(i for i, _, _ in pairs), tuple(a for _, a, _ in pairs), tuple(b for _, _, b in pairs))
    result = replace(result, sub_intervals=tuple(rescored), n_requests=table.n_requests,
                     n_positives=sum(c["in_interval"] for c in counted), notes=result.notes + (note,)).presented()
    frame = pl.concat([c["requests"] for c in counted])
    labels = np.concatenate([c["labels"] for c in counted])
    order = frame.with_row_index("_row").sort(ORDER)["_row"].to_numpy()
    return labels[order], frame[order].drop(S.START_NS), result


def _take(path, rows: np.ndarray) -> pl.DataFrame:
    if len(rows) == 0:
        return pl.DataFrame()
    return pl.read_parquet(path)[rows]


def _count_part(path, estimator, result) -> dict[str, Any]:
    """Per sub-interval: requests satisfying its pattern inside it, satisfying it (those the
    scores leave out, ``result.scored``, not counted), inside it; and the label of each request
    (``estimator.predict``)."""
    frame = pl.read_parquet(path)
    latency = frame[S.LATENCY_NS].to_numpy()
    subs = result.sub_intervals
    counts = np.zeros((len(subs), 3), dtype=np.int64)
    scored = result.scored(latency)
    for k, s in enumerate(subs):
        inside = (latency >= s.low_ns) & (latency < s.high_ns)
        sat = s.pattern.satisfied_by(frame) if s.pattern is not None else np.zeros(len(latency), dtype=bool)
        counts[k] = (int((sat & inside).sum()), int((sat & scored).sum()), int(inside.sum()))
    low, high = (subs[0].low_ns, subs[-1].high_ns) if subs else (0, 0)
    return {"counts": counts, "in_interval": int(((latency >= low) & (latency < high)).sum()),
            "labels": estimator.predict(frame), "requests": frame.select(S.TRACE_ID, S.SPAN_ID, S.START_NS, S.LATENCY_NS)}


@contextmanager
def on_workers(scheduler):
    """Run joblib's parallel loops (root-cause localization's per-cluster PCA and tests) on the
    scheduler's workers: joblib's Dask backend (threads for ``threads``), every worker used;
    one after another for ``serial``.

    Parameters
    ----------
    scheduler : Scheduler
    """
    import joblib

    if scheduler.serial:
        backend, n_jobs = "sequential", 1
    else:
        backend, n_jobs = ("threading" if scheduler.client is None else "dask"), -1
    with joblib.parallel_config(backend=backend, n_jobs=n_jobs):
        yield
