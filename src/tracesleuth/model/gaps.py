"""Whose is a gap that rose, as one service: the caller's or the callee's (issue 28, Build 2: one
rule where an analysis names a service per edge: ``localize``'s changes and ``diagnose``'s gap
evidence).

A *gap* is the time of a client span outside the server span it calls: the network, the callee's
accept queue, and the caller's own client-side work (serialising, a CPU-starved caller's pauses).
Which service a rise of it points to depends on where else time rose: a network delay or a slow
accept queue at a service delays the calls *into* it; a slow or starved caller delays every call
it *makes*, whoever it calls. So each end's *other* edges are the evidence.

For an edge ``caller -> callee`` whose gap rose (by the analysis's own test) with relative rise
``r > 0`` (problem over baseline, less 1), each other edge of an end supports that end by
``min(1, o / r)`` for its relative rise ``o`` (clipped at 0); an edge into the callee from another
caller supports the callee by 1 when the analysis's test found it risen too, whatever its size.
Let ``a`` be the median support of the caller's gaps into its other callees, and ``b`` that of the
callee's gaps from its other callers; an end with no other edge counts :data:`NO_OTHER_EDGE` (1/2),
as likely as not. The gap is the caller's when ``a > b``, else the callee's (a tie goes to the
callee: the edge leads into it, and a user looks there first). So

* a rise the caller shows on every call it makes, about as large, is the caller's; one on this
  edge only, with the callee's other callers unaffected or absent, is the callee's;
* a rise every caller of the callee shows is the callee's (a service starved of CPU is slow to
  accept while its own calls pause too: measured on TrainTicket's ts-food-service, whose calls to
  three services rose 11-26x while the other callers of its callees saw nothing; the previous rules
  gave it to ts-travel-service);
* the median makes one other edge that rose by chance move nothing;
* the burden of proof is the caller's. A slow callee is slow to accept every caller, and a
  significant rise of another caller's gap into it is that evidence even when smaller: gaps of
  different baselines rise by different ratios. A host slowed as a whole (a service burning
  CPU) raises every gap a little and significantly, the caller's other calls included, so a
  caller takes the gap only with rises on its other calls about as large as this one's. Measured
  on the live shop, where the injected callee is the culprit in both:
  - account-service burning half a core. The gap from recommendation-service, its lone caller,
    rose 1.44 -> 3.96 ms (+175%), the one from web-service 1.81 -> 2.59 ms (+43%, significant).
    By the sizes alone, web-service's support is 0.25, below the lone caller's 1/2.
  - items-service burning two cores. The gap from web-service, its lone caller, rose
    3.98 -> 10.9 ms (+175%). web-service's calls to categories-service rose 1.30 -> 1.85 ms
    (+42%, significant). Counting such a rise fully for the caller too gave the gap to
    web-service.
* an edge the analysis's test did not find risen stays the callee's (at noise-sized rises the
  other edges' medians are noise too).

``compare`` splits a gap stratum's time between the two ends by shares of the same evidence (its
module docstring); a split is not a naming, and moved onto this rule it ranked worse (measured:
1 simulated and 2 recorded faults fewer first).
"""

from __future__ import annotations

import polars as pl

__all__ = ["NO_OTHER_EDGE", "gap_owner"]

#: The support ``a`` or ``b`` of an end with no other edge: as likely as not (module docstring), so
#: that a lone end neither wins nor loses by itself.
NO_OTHER_EDGE = 0.5


def gap_owner(edges: pl.DataFrame) -> pl.Series:
    """The owner of each edge's gap rise (module docstring).

    Parameters
    ----------
    edges : polars.DataFrame
        One row per edge the analysis measured, risen or not: ``caller`` and ``callee`` (service
        names, str), ``rise`` (float, the relative rise of the edge's gap: problem / baseline - 1;
        negative when it fell) and ``rose`` (bool: the analysis's own test found it risen).

    Returns
    -------
    polars.Series
        ``owner`` (str, the caller or the callee), shape (len(edges),), in the rows' order.

    Raises
    ------
    KeyError
        ``edges`` lacks one of the four columns.
    """
    for column in ("caller", "callee", "rise", "rose"):
        if column not in edges.columns:
            raise KeyError(f"the gap rule needs a {column!r} column; got {edges.columns}")
    rows = edges.select("caller", "callee", pl.col("rise").cast(pl.Float64),
                        pl.col("rose").cast(pl.Boolean)).with_row_index("_row")

    def others(end: str, name: str, risen_counts: bool) -> pl.DataFrame:  # median support of the other edges
        other = rows.select(end, pl.col("_row").alias("_other"), pl.col("rise").alias("_rise_other"),
                            pl.col("rose").alias("_rose_other"))
        by_size = pl.min_horizontal(pl.col("_rise_other").clip(0.0) / pl.col("rise"), 1.0)
        by_test = pl.when(pl.col("_rose_other") & (pl.col("_rise_other") > 0)).then(1.0).otherwise(by_size)
        return (rows.join(other, on=end).filter(pl.col("_other") != pl.col("_row"))
                .with_columns((by_test if risen_counts else by_size).alias("_support"))
                .group_by("_row").agg(pl.col("_support").median().alias(name)))

    return (rows.join(others("caller", "_out", False), on="_row", how="left")
            .join(others("callee", "_in", True), on="_row", how="left")
            .sort("_row")
            .with_columns(pl.col("_out", "_in").fill_null(NO_OTHER_EDGE))   # an end with no other edge
            .select(pl.when(pl.col("rose") & (pl.col("rise") > 0) & (pl.col("_out") > pl.col("_in")))
                    .then(pl.col("caller")).otherwise(pl.col("callee")).alias("owner"))
            .to_series())
