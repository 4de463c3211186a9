"""Black-box message logs: the input of the causal-path analyses, and traces turned into them.

Aguilera, Mogul, Wiener, Reynolds and Muthitacharoen, *Performance debugging for distributed
systems of black boxes*, SOSP 2003: the only input is the messages seen between components, with
no request identifier. For RPC-style systems (the nesting algorithm) a message is

``(timestamp, sender, receiver, CALL or RETURN, call id)``

where the call id only pairs a call with its return (an RPC sequence number); for free-form
messages (the convolution algorithm) the kind and call id are absent.

Columns (:data:`MESSAGE_SCHEMA`): ``timestamp_ns`` (int64, Unix ns), ``sender``, ``receiver``
(node names), ``kind`` (``"call"``, ``"return"`` or null), ``call_id`` (string, nullable).

:func:`messages_from_tables` turns recorded traces into such a log with the ground truth kept
aside: every call between two services becomes a CALL at the callee's span start and a RETURN at
its end (times after the trace table's clock-skew correction, so a call's messages nest inside
its caller's), the trace ids are dropped, and the true causal path of every request is returned
beside the messages. So any real trace set becomes black-box input with a known answer.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from ... import schema as S

__all__ = ["CLIENT", "MESSAGE_SCHEMA", "call_pairs", "messages_from_tables", "parse_path_key", "path_key"]

#: Columns of a message log.
MESSAGE_SCHEMA = pa.schema([("timestamp_ns", pa.int64()), ("sender", pa.string()), ("receiver", pa.string()),
                            ("kind", pa.string()), ("call_id", pa.string())])
#: The node that sends a request's first call (the outside world).
CLIENT = "<client>"


def path_key(tree: dict) -> str:
    """A causal path's canonical text: ``A -> [B; C -> [D]]`` style, ``B(C; D)`` here.

    Parameters
    ----------
    tree : dict
        ``{"node": NAME, "calls": [TREE, ...]}``, calls in the order of their CALL messages.
    """
    calls = tree.get("calls") or ()
    return tree["node"] + ("(" + "; ".join(path_key(c) for c in calls) + ")" if calls else "")


def parse_path_key(key: str) -> dict:
    """The tree of a :func:`path_key` (its inverse; node names must not hold ``(``, ``)`` or ``;``).

    Raises
    ------
    ParameterError
        When ``key`` is not a path key.
    """
    from ...errors import ParameterError

    def node(i: int) -> tuple[dict, int]:
        j = i
        while j < len(key) and key[j] not in "(;)":
            j += 1
        tree = {"node": key[i:j].strip(), "calls": []}
        if j < len(key) and key[j] == "(":
            j += 1
            while True:
                child, j = node(j)
                tree["calls"].append(child)
                if j < len(key) and key[j] == ";":
                    j += 1
                    continue
                if j < len(key) and key[j] == ")":
                    return tree, j + 1
                raise ParameterError(f"not a path key: {key!r}")
        return tree, j

    tree, end = node(0)
    if end != len(key) or not tree["node"]:
        raise ParameterError(f"not a path key: {key!r}")
    return tree


def call_pairs(tree: dict, caller: str = CLIENT) -> set:
    """The (incoming call, outgoing call) edge pairs of a causal path: ``((A, B), (B, C))`` for
    every node ``B`` called by ``A`` that calls ``C``."""
    out = set()
    for child in tree["calls"]:
        out.add(((caller, tree["node"]), (tree["node"], child["node"])))
        out |= call_pairs(child, tree["node"])
    return out


def messages_from_tables(tables: Sequence[Any]) -> tuple[pl.DataFrame, Counter]:
    """A message log from trace tables, and the true causal paths of their requests.

    Parameters
    ----------
    tables : sequence of TraceTable
        One per endpoint (:func:`tracesleuth.model.build_trace_table`); their call views are read.

    Returns
    -------
    (polars.DataFrame, collections.Counter)
        The messages in :data:`MESSAGE_SCHEMA`, in time order (a call's messages nest inside its
        caller's: at equal times returns come before calls, inner returns before outer ones and
        outer calls before inner ones), and ``{path_key(tree): requests}`` for every request.
        A call is a span whose parent span belongs to another service, or a root span (called by
        :data:`CLIENT`); spans inside one service are not messages.
    """
    parts, truth = [], Counter()
    offset = 0
    for table in tables:
        if table.frame.height == 0:
            continue
        calls = table.calls()
        if calls.height == 0:
            continue
        starts = table.frame.select(pl.col(S.START_NS).alias("_request_start")).with_row_index(S.REQUEST)
        c = (calls.select(S.REQUEST, S.SPAN_ID, S.PARENT_SPAN_ID, S.SERVICE, "start_offset_ns", S.DURATION_NS)
             .join(starts.with_columns(pl.col(S.REQUEST).cast(calls.schema[S.REQUEST])), on=S.REQUEST, how="left")
             .with_columns((pl.col("_request_start") + pl.col("start_offset_ns")).alias("_t_call")))
        c = c.with_columns((pl.col("_t_call") + pl.col(S.DURATION_NS)).alias("_t_ret"))
        parent = c.select(S.REQUEST, pl.col(S.SPAN_ID).alias(S.PARENT_SPAN_ID),
                          pl.col(S.SERVICE).alias("_parent_service"))
        c = c.join(parent, on=[S.REQUEST, S.PARENT_SPAN_ID], how="left", maintain_order="left")
        c = c.with_columns((pl.col("_parent_service").is_null() | (pl.col("_parent_service") != pl.col(S.SERVICE)))
                           .alias("_is_call"))
        # Each span's nearest call at or above it: the call whose callee's time it is part of.
        key = c.select(S.REQUEST, S.SPAN_ID, S.PARENT_SPAN_ID, "_is_call")
        owner = key.with_columns(pl.when("_is_call").then(pl.col(S.SPAN_ID)).otherwise(None).alias("_owner"),
                                 pl.when("_is_call").then(None).otherwise(pl.col(S.PARENT_SPAN_ID)).alias("_up"))
        for _ in range(256):  # climbs one level per round; traces are far shallower
            pending = owner["_owner"].is_null() & owner["_up"].is_not_null()
            if not pending.any():
                break
            up = key.select(S.REQUEST, pl.col(S.SPAN_ID).alias("_up"), pl.col("_is_call").alias("_up_is_call"),
                            pl.col(S.PARENT_SPAN_ID).alias("_up_parent"))
            owner = owner.join(up, on=[S.REQUEST, "_up"], how="left", maintain_order="left").with_columns(
                pl.when(pl.col("_owner").is_null() & pl.col("_up_is_call")).then(pl.col("_up"))
                .otherwise(pl.col("_owner")).alias("_owner"),
                pl.when(pl.col("_owner").is_null() & ~pl.col("_up_is_call").fill_null(True)).then(pl.col("_up_parent"))
                .otherwise(None).alias("_up")).drop("_up_is_call", "_up_parent")
        calls_only = c.with_columns(owner["_owner"]).filter("_is_call")
        # A call's caller call: the owner of its parent span.
        caller = owner.select(S.REQUEST, pl.col(S.SPAN_ID).alias(S.PARENT_SPAN_ID), pl.col("_owner").alias("_caller"))
        calls_only = calls_only.join(caller, on=[S.REQUEST, S.PARENT_SPAN_ID], how="left", maintain_order="left")
        calls_only = calls_only.with_columns(pl.col("_parent_service").fill_null(CLIENT).alias("_sender"))
        truth.update(_true_paths(calls_only))
        n = calls_only.height
        ids = pl.Series("call_id", np.arange(offset, offset + n)).cast(pl.String)
        offset += n
        depth = _depths(calls_only)
        base = calls_only.select("_sender", S.SERVICE, "_t_call", "_t_ret").with_columns(ids, pl.Series("_d", depth))
        parts.append(pl.concat([
            base.select(pl.col("_t_call").alias("timestamp_ns"), pl.col("_sender").alias("sender"),
                        pl.col(S.SERVICE).alias("receiver"), pl.lit("call").alias("kind"), "call_id",
                        pl.lit(1).alias("_rank"), pl.col("_d").alias("_order")),
            base.select(pl.col("_t_ret").alias("timestamp_ns"), pl.col(S.SERVICE).alias("sender"),
                        pl.col("_sender").alias("receiver"), pl.lit("return").alias("kind"), "call_id",
                        pl.lit(0).alias("_rank"), (-pl.col("_d")).alias("_order"))]))
    if not parts:
        return pl.from_arrow(MESSAGE_SCHEMA.empty_table()), truth
    messages = pl.concat(parts).sort("timestamp_ns", "_rank", "_order").drop("_rank", "_order")
    return messages.with_columns(pl.col("timestamp_ns").cast(pl.Int64)), truth


def _depths(calls: pl.DataFrame) -> np.ndarray:
    """Each call's depth among the calls of its request (0 for the root call)."""
    index = {(r, s): k for k, (r, s) in enumerate(zip(calls[S.REQUEST].to_list(), calls[S.SPAN_ID].to_list()))}
    callers = [index.get((r, p)) for r, p in zip(calls[S.REQUEST].to_list(), calls["_caller"].to_list())]
    depth = np.full(len(callers), -1, dtype=np.int64)
    for k in range(len(callers)):
        chain, j = [], k
        while j is not None and depth[j] < 0 and len(chain) <= len(callers):
            chain.append(j)
            j = callers[j]
        d = -1 if j is None else int(depth[j])
        for j in reversed(chain):
            d += 1
            depth[j] = d
    return depth


def _true_paths(calls: pl.DataFrame) -> Counter:
    """``{path_key: requests}`` of the calls' requests (children in call-time order)."""
    rows = calls.select(S.REQUEST, S.SPAN_ID, "_caller", S.SERVICE, "_t_call").sort(S.REQUEST, "_t_call").rows()
    children: dict = {}
    roots = []
    for request, span, caller, service, _ in rows:
        node = {"node": service, "calls": []}
        children[(request, span)] = node
        if caller is None:
            roots.append(node)
        else:
            parent = children.get((request, caller))
            if parent is None:  # a caller that starts after its callee (clock skew): a root of its own
                roots.append(node)
            else:
                parent["calls"].append(node)
    return Counter(path_key(r) for r in roots)
