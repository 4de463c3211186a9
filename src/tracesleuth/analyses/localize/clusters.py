"""Clusters of requests by call sequence, their adjustment (Algorithm 1) and latency matrices.

Mi et al., *Localizing root causes of performance anomalies in cloud computing systems by
analyzing request trace logs*, Sci China Inf Sci 2012, Section 4.1 (clustering) and 4.2.1
(Algorithm 1), 4.2.2 (the latency matrix ``Y``).

**Call sequence.** A request's calls (its spans) in start order, each a *method*: an operation key
``service:operation``. Requests with the same sequence form a cluster (one pass, no distance
computed: the paper's incremental clustering only ever joins a request to a cluster at distance
zero). Two requests whose concurrent calls started in another order are the same sequence here:
the cluster key is the trace table's ``signature`` (the call structure with siblings in a
canonical order), so that the order in which parallel calls happen to start does not split a
cluster.

**Columns.** Position ``j`` of a cluster's sequence is a column of ``Y``, named by the triple
``(caller key, operation key, occurrence)``: the ``occurrence``-th call (0-based, in start order)
of that operation by that caller in the request. Requests of one cluster have the same triples,
so the same columns.

**Adjustment** (Algorithm 1). Clusters are ranked by size; the largest are *major* until their
summed share of the endpoint's requests exceeds ``alpha`` (the one that crosses it included).
Each other (*minor*) cluster is merged into the most similar major one: the paper's two
standards, made precise as

1. *method count*: the minor cluster has at least as many calls of every (caller, operation)
   pair as the major one (so every column of the major cluster has a value in the minor's
   requests; their extra calls are not columns and are left out of ``Y``);
2. *nearest*: among those, the least string-edit distance between the two sequences (ties:
   the larger major cluster).

A minor cluster that no major cluster's methods fit into is not merged (the paper's Algorithm 1
would put it in the first major cluster with no value for the missing columns); its requests are
counted as not analysed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ... import schema as S
from .._statistics import edit_distance

__all__ = ["Cluster", "LatencyMatrix", "adjust_clusters", "cluster_requests", "latency_matrices", "per_operation",
           "with_occurrences"]

_OCC = "occurrence"
_CALLER = "caller"  # caller key with the entry span's null made "" (join keys must not be null)
_PAIR = "pair"  # code (UInt32) of the call's (caller, operation): the calls are matched to columns by integers


@dataclass
class Cluster:
    """One cluster of requests with the same call sequence, within one endpoint.

    Attributes
    ----------
    id : int
        Index among all clusters of the fit (every endpoint's), stable for a given input.
    endpoint : str
    requests : numpy.ndarray
        Shape (n,), int64: global request ids (see :func:`cluster_requests`).
    sequence : tuple of str
        The representative request's operation keys in start order (the centroid).
    columns : polars.DataFrame
        The columns of ``Y``: ``caller``, ``operation_key``, ``occurrence``, ``column`` (0..n-1,
        in the sequence's order).
    major : bool
        Selected as major by Algorithm 1.
    merged_into : int or None
        For a minor cluster, the id of the major cluster it was merged into (None: not merged).
    """

    id: int
    endpoint: str
    requests: np.ndarray
    sequence: tuple
    columns: pl.DataFrame
    major: bool = False
    merged_into: int | None = None

    @property
    def size(self) -> int:
        return len(self.requests)


@dataclass(frozen=True)
class LatencyMatrix:
    """The latency matrix of one major cluster and the requests merged into it.

    Attributes
    ----------
    cluster : Cluster
        The major cluster.
    requests : numpy.ndarray
        Shape (m,): global request ids, the rows of ``values``.
    values : numpy.ndarray
        Shape (m, n), float64 ns: ``Y[i, j]`` the latency of column ``j`` in request ``i``.
    columns : polars.DataFrame
        ``cluster.columns`` with ``service`` (the service a call is attributed to: the service
        called, for a client span that calls a server; else its own) and ``client``.
    n_merged_clusters, n_merged_requests : int
        Minor clusters and requests merged in.
    """

    cluster: Cluster
    requests: np.ndarray
    values: np.ndarray
    columns: pl.DataFrame
    n_merged_clusters: int
    n_merged_requests: int


def with_occurrences(calls: pl.DataFrame) -> pl.DataFrame:
    """The calls with ``caller`` ("" for the entry span), ``pair`` (an integer code of the
    call's caller and operation) and ``occurrence``: the call's 0-based rank among its request's
    calls of the same (caller, operation) in start order.

    Parameters
    ----------
    calls : polars.DataFrame
        A call view (:meth:`tracesleuth.model.TraceTable.calls`) with a global ``request`` id,
        rows in request and start order.
    """
    calls = calls.with_columns(pl.col(S.CALLER_KEY).fill_null("").alias(_CALLER))
    pair = pl.concat_str(_CALLER, pl.lit("\x00"), S.OPERATION_KEY).cast(pl.Categorical).to_physical().alias(_PAIR)
    calls = calls.with_columns(pair)
    codes = calls[_PAIR].to_numpy().astype(np.int64)
    key = calls[S.REQUEST].to_numpy().astype(np.int64) * (int(codes.max(initial=0)) + 1) + codes
    order = np.argsort(key, kind="stable")  # rows of one (request, caller, operation) together, in start order
    sorted_key = key[order]
    first = np.r_[0, np.flatnonzero(sorted_key[1:] != sorted_key[:-1]) + 1]
    rank = np.arange(len(key)) - np.repeat(first, np.diff(np.r_[first, len(key)]))
    occurrence = np.empty(len(key), dtype=np.int32)
    occurrence[order] = rank
    return calls.with_columns(pl.Series(_OCC, occurrence))


def per_operation(calls: pl.DataFrame) -> pl.DataFrame:
    """One row per request, caller and operation: the calls' latencies summed (``columns="operation"``).

    A method called in a loop a varying number of times makes a new call sequence for every
    count (the long tail of Figure 5); summed per operation, those sequences have the same
    columns, so the minor clusters merge into the major ones and small clusters get fewer
    columns than requests. Rows keep the order of each group's first call.

    Parameters
    ----------
    calls : polars.DataFrame
        A call view with a global ``request`` id, in request and start order.
    """
    first = [c for c in calls.columns if c not in (S.REQUEST, S.CALLER_KEY, S.OPERATION_KEY, S.DURATION_NS,
                                                   S.EXCLUSIVE_NS)]
    return (calls.group_by(S.REQUEST, S.CALLER_KEY, S.OPERATION_KEY, maintain_order=True)
            .agg(pl.col(S.DURATION_NS).sum(), pl.col(S.EXCLUSIVE_NS).sum(), *[pl.col(c).first() for c in first])
            .sort(S.REQUEST, maintain_order=True))


def cluster_requests(calls: pl.DataFrame, signatures: pl.Series, endpoint: str, first_id: int,
                     request_offset: int = 0) -> list[Cluster]:
    """Group one endpoint's requests by call sequence (Section 4.1): one pass, identical sequences.

    Parameters
    ----------
    calls : polars.DataFrame
        The endpoint's calls from :func:`with_occurrences`.
    signatures : polars.Series
        Shape (n_requests,): each request's call-structure signature (the trace table's
        ``signature`` column); request ``request_offset + i`` has ``signatures[i]``.
    endpoint : str
    first_id : int
        Id of the first cluster returned.
    request_offset : int, default=0
        Global id of the endpoint's first request.

    Returns
    -------
    list of Cluster
        Largest first (ties: the sequence's first appearance); none major yet.
    """
    frame = pl.DataFrame({S.REQUEST: np.arange(len(signatures), dtype=np.int64) + request_offset, "key": signatures})
    groups = (frame.with_row_index("order").group_by("key", maintain_order=True)
              .agg(pl.col(S.REQUEST), pl.col("order").first()).sort(
                  [pl.col(S.REQUEST).list.len(), "order"], descending=[True, False]))
    reps = groups[S.REQUEST].list.first().to_numpy()
    rep_calls = calls.filter(pl.col(S.REQUEST).is_in(reps)).partition_by(S.REQUEST, as_dict=True,
                                                                          maintain_order=True)
    clusters = []
    for i, (requests, rep) in enumerate(zip(groups[S.REQUEST], reps)):
        rc = rep_calls[(int(rep),)]
        columns = rc.select(_CALLER, S.OPERATION_KEY, _PAIR, _OCC).with_row_index("column").with_columns(
            pl.col("column").cast(pl.Int32))
        clusters.append(Cluster(id=first_id + i, endpoint=endpoint, requests=requests.to_numpy(),
                                sequence=tuple(rc[S.OPERATION_KEY].to_list()), columns=columns))
    return clusters


def adjust_clusters(clusters: list[Cluster], alpha: float, merge: bool = True) -> None:
    """Algorithm 1 on one endpoint's clusters (largest first): mark the major ones, merge the others.

    Sets ``major`` and ``merged_into`` in place (module docstring: the two similarity standards).

    Parameters
    ----------
    clusters : list of Cluster
        One endpoint's, largest first (:func:`cluster_requests`).
    alpha : float
        In (0, 1]: the share of requests the major clusters must exceed.
    merge : bool, default=True
        False: only select the major clusters (the paper's "without adjustment" rows of Table 2).
    """
    total = sum(c.size for c in clusters)
    share = 0.0
    majors = []
    for c in clusters:
        c.major = True
        majors.append(c)
        share += c.size / total
        if share > alpha:
            break
    if not merge:
        return
    counts = {c.id: _pair_counts(c) for c in majors}
    for c in clusters[len(majors):]:
        mine = _pair_counts(c)
        best = None
        for m in majors:
            if any(mine.get(k, 0) < n for k, n in counts[m.id].items()):
                continue  # the method-count standard: every column of m must be in c
            d = edit_distance(c.sequence, m.sequence)
            if best is None or d < best[0]:
                best = (d, m.id)
        c.merged_into = None if best is None else best[1]


def _pair_counts(cluster: Cluster) -> dict:
    return {(a, b): n for a, b, n in cluster.columns.group_by(_CALLER, S.OPERATION_KEY).len().iter_rows()}


def latency_matrices(calls: pl.DataFrame, clusters: list[Cluster], latency: str) -> list[LatencyMatrix]:
    """``Y`` of every major cluster, with the requests of the minor clusters merged into it.

    Parameters
    ----------
    calls : polars.DataFrame
        Every endpoint's calls from :func:`with_occurrences` (global request ids).
    clusters : list of Cluster
        After :func:`adjust_clusters`.
    latency : {"exclusive_ns", "duration_ns"}
        The call's column used as its latency.

    Returns
    -------
    list of LatencyMatrix
        In the order of the major clusters in ``clusters``.
    """
    majors = [c for c in clusters if c.major]
    if not majors:
        return []
    target_of = np.full(int(calls[S.REQUEST].max()) + 1, -1, dtype=np.int64)
    for c in clusters:
        t = c.id if c.major else c.merged_into
        if t is not None:
            target_of[c.requests] = t
    colmap = pl.concat([c.columns.with_columns(pl.lit(c.id, pl.Int64).alias("target")) for c in majors])
    # Each call of a major cluster's request (or of a request merged into it) to its column: a join
    # on integers, streamed (the calls' string columns are never copied per call).
    keys = ["target", _PAIR, _OCC]
    calls = calls.lazy().with_columns(target=pl.lit(pl.Series(target_of[calls[S.REQUEST].to_numpy()])))
    calls = calls.filter(pl.col("target") >= 0)
    columns = colmap.lazy().select(*keys, "column")
    picked = (calls.select(*keys, S.REQUEST, pl.col(latency).cast(pl.Float64).alias("latency"))
              .join(columns, on=keys, how="inner").select("target", S.REQUEST, "column", "latency"))
    by_target = picked.collect(engine="streaming").partition_by("target", as_dict=True)
    # The service each column is attributed to, over every call of it: the most frequent of the
    # services called (a client span's server, else the span's own; ties: the first by name).
    services = (calls.group_by(*keys, pl.coalesce(S.SERVER_SERVICE, S.SERVICE).alias(S.SERVICE))
                .agg(pl.len().alias("n"), (pl.col(S.KIND) == "client").any().alias("client"))
                .join(columns, on=keys, how="inner")
                .group_by("target", "column", S.SERVICE).agg(pl.col("n").sum(), pl.col("client").any()))
    attributed_by_target = (services.collect(engine="streaming")
                            .sort(["target", "column", "n", S.SERVICE], descending=[False, False, True, False])
                            .group_by("target", "column", maintain_order=True)
                            .agg(pl.col(S.SERVICE).first(), pl.col("client").any())
                            .partition_by("target", as_dict=True, include_key=False))
    out = []
    for c in majors:
        part = by_target.get((c.id,))
        merged = [m for m in clusters if m.merged_into == c.id]
        requests = np.concatenate([c.requests] + [m.requests for m in merged])
        requests.sort()
        values = np.zeros((len(requests), c.columns.height))
        if part is not None:
            rows = np.searchsorted(requests, part[S.REQUEST].to_numpy())
            values[rows, part["column"].to_numpy()] = part["latency"].to_numpy()
            attributed = attributed_by_target[(c.id,)]
        else:
            attributed = pl.DataFrame(schema={"column": pl.Int32, S.SERVICE: pl.String, "client": pl.Boolean})
        columns = c.columns.join(attributed, on="column", how="left").sort("column")
        out.append(LatencyMatrix(cluster=c, requests=requests, values=values, columns=columns,
                                 n_merged_clusters=len(merged), n_merged_requests=int(sum(m.size for m in merged))))
    return out
