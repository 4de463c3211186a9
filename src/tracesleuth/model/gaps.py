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
The caller's own work, where the analysis measured it, counts as one more of its edges, at the
median relative rise of its operations' exclusive times: a CPU-starved caller is slow at its own
work as well as at the client side of its calls, while a slow callee does not touch it. One edge,
not one per operation: a service with many operations (ts-food-service has 11, most of them too
short or too rare to show a CPU contention's pauses) would otherwise outvote its calls. Every
rise is read beyond the host's common slowdown ``c`` where the analysis measured one
(``(1 + rise) / (1 + c) - 1``; ``diagnose``'s :func:`~tracesleuth.analyses.diagnose.evidence.common_slowdown`):
a host slowed as a whole moves every edge and every service's work alike, and that is evidence
for neither end. Let ``a`` be the median support of the caller's gaps into its other callees and
of its own work, and ``b`` that of the callee's gaps from its other callers; an end with no other
edge (and, for the caller, no own work measured) counts :data:`NO_OTHER_EDGE` (1/2), as likely as
not. The gap is the caller's when ``a > b``, else the callee's (a tie goes to the callee: the edge
leads into it, and a user looks there first). So

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
* the host's slowdown is nobody's. Measured on the live shop: cart-service burning half a core,
  its lone caller web-service's gap into it 1.24 -> 1.84 ms (+49%), every service's times 10%
  slower (the common slowdown), web-service's other calls +14% to +32% (not found risen). By the
  raw sizes they supported web-service by 0.55 and it was first (0.43, uncertain); beyond the
  common slowdown (+35% against +4% to +20%) by 0.42, and cart-service is named (0.66).
* a lone caller is judged by its own work, not by a constant. Measured on the live shop:
  account-service burning half a core, every service's times 15% slower with the host, so the test
  did not find the gap from web-service (1.70 -> 2.49 ms, +47%) risen beyond it, and by its size
  (+28% beyond the host's) it supported account-service by 0.25; recommendation-service, the lone
  caller (1.19 -> 2.92 ms, +145%, +113% beyond), took the gap with its 1/2 and was named at 0.71.
  Its own work, a database query, rose 0.059 -> 0.076 ms (+29%, +12% beyond): a support of 0.11.
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


def gap_owner(edges: pl.DataFrame, own: pl.DataFrame | None = None, common: float = 0.0) -> pl.Series:
    """The owner of each edge's gap rise (module docstring).

    Parameters
    ----------
    edges : polars.DataFrame
        One row per edge the analysis measured, risen or not: ``caller`` and ``callee`` (service
        names, str), ``rise`` (float, the relative rise of the edge's gap: problem / baseline - 1;
        negative when it fell) and ``rose`` (bool: the analysis's own test found it risen).
    own : polars.DataFrame, optional
        One row per item of a service's own work the analysis measured (an operation's exclusive
        time): ``service`` (str) and ``rise`` (float, as in ``edges``). A caller's own work is
        evidence for it like its other calls (module docstring); without it, only the edges count.
    common : float, default=0.0
        The host's common slowdown (>= 0; 0.15 for 15%): every rise is read beyond it.

    Returns
    -------
    polars.Series
        ``owner`` (str, the caller or the callee), shape (len(edges),), in the rows' order.

    Raises
    ------
    KeyError
        ``edges`` lacks one of the four columns, or ``own`` one of its two.
    """
    for frame, columns in ((edges, ("caller", "callee", "rise", "rose")), (own, ("service", "rise"))):
        missing = [c for c in columns if frame is not None and c not in frame.columns]
        if missing:
            raise KeyError(f"the gap rule needs a {missing[0]!r} column; got {frame.columns}")

    def beyond(rise: pl.Expr) -> pl.Expr:   # the rise beyond the host's common slowdown
        return (1 + rise.cast(pl.Float64)) / (1 + common) - 1

    rows = edges.select("caller", "callee", beyond(pl.col("rise")).alias("rise"),
                        pl.col("rose").cast(pl.Boolean)).with_row_index("_row")

    def others(end: str, name: str) -> pl.DataFrame:  # the median support of the end's other edges
        other = rows.select(end, pl.col("_row").alias("_other"), pl.col("rise").alias("_rise_other"),
                            pl.col("rose").alias("_rose_other"))
        by_size = pl.min_horizontal(pl.col("_rise_other").clip(0.0) / pl.col("rise"), 1.0)
        if end == "callee":   # another caller's gap the test found risen counts fully for the callee
            by_size = pl.when(pl.col("_rose_other") & (pl.col("_rise_other") > 0)).then(1.0).otherwise(by_size)
        supports = [rows.join(other, on=end).filter(pl.col("_other") != pl.col("_row"))
                    .select("_row", by_size.alias("_support"))]
        if end == "caller" and own is not None:   # the caller's own work: one edge, its median rise
            work = own.group_by(pl.col("service").alias("caller")).agg(beyond(pl.col("rise")).median()
                                                                       .alias("_rise_other"))
            supports.append(rows.join(work, on="caller").select("_row", by_size.alias("_support")))
        return pl.concat(supports).group_by("_row").agg(pl.col("_support").median().alias(name))

    return (rows.join(others("caller", "_out"), on="_row", how="left")
            .join(others("callee", "_in"), on="_row", how="left")
            .sort("_row")
            .with_columns(pl.col("_out", "_in").fill_null(NO_OTHER_EDGE))   # an end with no other edge
            .select(pl.when(pl.col("rose") & (pl.col("rise") > 0) & (pl.col("_out") > pl.col("_in")))
                    .then(pl.col("caller")).otherwise(pl.col("callee")).alias("owner"))
            .to_series())
