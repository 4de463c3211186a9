"""Whose is a gap that rose: the caller's or the callee's. One rule, used by every analysis
(``compare``, ``localize``, ``diagnose``; issue 28, Build 2).

A *gap* is the time of a client span outside the server span it calls: the network, the callee's
accept queue, and the caller's own client-side work (serialising, a CPU-starved caller's pauses).
Which service a rise of it points to depends on where else time rose:

* a network delay or a slow accept queue at a service delays every caller's calls *into* it;
* a slow or starved caller delays every call it *makes*, whoever it calls.

So the gap of an edge ``caller -> callee`` that rose is the callee's unless a larger share of the
caller's *other* outgoing edges rose than of the callee's *other* incoming edges. Ties (for
instance a caller that calls one service only, or an edge that is the only one into its callee and
out of its caller) go to the callee: the edge leads into it, and a user looks there first.

Each analysis decides with its own test whether an edge *rose* (``compare``: the relative rise of
the edge's mean gap; ``localize``: a change point of the edge's gap series; ``diagnose``: a one-sided
shift test between the periods); this module decides whose it is.
"""

from __future__ import annotations

import polars as pl

__all__ = ["gap_owner"]


def gap_owner(edges: pl.DataFrame) -> pl.Series:
    """The owner of each edge's gap (module docstring).

    Parameters
    ----------
    edges : polars.DataFrame
        One row per edge that was tested (risen or not): ``caller`` and ``callee`` (service names,
        str) and ``rose`` (bool).

    Returns
    -------
    polars.Series
        ``owner`` (str), shape (len(edges),), in the rows' order: the caller or the callee. An
        edge that did not rise gets the callee (it has no owner to find; callers ignore it).

    Raises
    ------
    KeyError
        ``edges`` lacks one of the three columns.
    """
    for column in ("caller", "callee", "rose"):
        if column not in edges.columns:
            raise KeyError(f"gap_owner needs a {column!r} column; got {edges.columns}")
    rose = pl.col("rose").cast(pl.Int64)
    others = lambda total, n: (total - rose) / (n - 1).clip(1)  # noqa: E731 - share among the other edges
    shares = edges.with_columns(
        others(rose.sum().over("caller"), pl.len().over("caller")).alias("_caller_share"),
        others(rose.sum().over("callee"), pl.len().over("callee")).alias("_callee_share"))
    return shares.select(pl.when(pl.col("rose") & (pl.col("_caller_share") > pl.col("_callee_share")))
                         .then(pl.col("caller")).otherwise(pl.col("callee")).alias("owner")).to_series()

