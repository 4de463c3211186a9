"""Edge and operation comparisons pooled across categories: where the time went, at any volume.

Spectroscope (Sambasivan et al., NSDI 2011, Section 3.2) tests response times per category, so
it needs volume in every category it tests: a period of 70 requests spread over 30 categories
has almost none with ``min_requests`` in both periods, and a slowed service goes unseen. What a
performance engineer looks at next is the same question asked of the parts every request shares,
pooled over all categories of the endpoint:

* **operation self time**: per operation key (``service:operation``) of a non-client span, the
  exclusive (self) time of every call, baseline vs problem;
* **edge gap**: per edge ``caller key -> callee key`` of a client span calling a server span,
  the gap (client time outside the server span: network and queueing), attributed to the
  service called (so an ``HTTP GET`` edge names the service it calls).

Pooling across categories must not let a change of the workload mix pass for a slowdown: an
operation does more work in some request types than in others (a ``GET /`` that renders a
checkout page takes longer than one that renders the home page), so more checkout requests
raise its pooled mean with nothing broken. Each series is therefore **stratified by what the
span does**, the set of operation keys its span calls (its direct children; none for a leaf):
the ``GET /`` spans that call the checkout service form one stratum, those that call the catalog
and the ads another, so a change of their mix moves no stratum. Strata finer than that (the
whole request's category, as Spectroscope's own tests use) would split a small period into
strata of one or two calls and lose the very volume pooling is for; coarser ones (none) would
take a mix change for a slowdown. The series is tested with the van Elteren test (a stratified Wilcoxon rank-sum test: Lehmann,
*Nonparametrics*, 1975, Section 3.3; van Elteren, Bull. Int. Stat. Inst. 37, 1960): within each
stratum present in both periods the problem calls' rank sum ``W_k`` is compared with its
expectation ``m_k (N_k + 1) / 2``, with the tie-corrected variance
``n_k m_k / 12 ((N_k + 1) - sum(t^3 - t) / (N_k (N_k - 1)))``, and the strata are combined with
van Elteren's locally most powerful weights ``1 / (N_k + 1)``:
``Z = sum w_k (W_k - E_k) / sqrt(sum w_k^2 Var_k)``, one-sided (only a rise is a suspicion).
Strata seen in one period only (spans that now call something new, or no longer call) leave the
pooled tests: their change is the structural mutations' to explain. A series is tested where its
common strata hold at least
``min_calls`` calls in each period. The p-values of all series of the endpoint form one family
under the analysis's multiple-test control (:func:`~.mutations.adjust_p_values`, Holm by
default), so two stationary periods report no change with probability at least ``1 - alpha``
however many series there are.

Effect sizes, both reported:

* ``added_ns``: time the change added to the problem period with the mix held fixed,
  ``sum_k m_k (problem mean_k - baseline mean_k)`` over the common strata ``k``, ns: the
  same currency as Spectroscope's contributions (Section 3.4), so pooled evidence and mutations
  add up in :func:`~.services.rank_services`;
* ``auc``: the common-language effect size ``sum U_k / sum n_k m_k``, the probability that a
  problem call is slower than a baseline call of the same stratum (0.5: no shift).

A service's time (:class:`ServiceTime`, what :mod:`.services` ranks by)
------------------------------------------------------------------------
All strata of one service tested together (same test, its own family of p-values, one per
service) and summed into one scale-free severity, the relative rise of the service's time
against its own baseline speed, ``sum_k m_k (problem mean_k - baseline mean_k) /
sum_k m_k baseline mean_k``. The service's time is its spans' self time and the gaps of the
calls into it, with one correction: a gap is the client span's time outside the server span,
so it holds the caller's own client-side work (serialising, a CPU-starved caller's pauses) as
well as the network and the callee's queue. A rise that a caller's gaps show on every service
it calls is the caller's, not each callee's: for the gaps of caller ``C`` into service ``S``
with relative rise ``r``, and ``o`` the median relative rise of ``C``'s gaps into its other
services, the share ``f = min(1, o / r)`` (0 when ``o <= 0``, or ``C`` calls no other service)
of the stratum's time goes to ``C`` (its *client* time) and ``1 - f`` to ``S``. (Where one service
must own a whole edge, as in ``localize`` and ``diagnose``, :func:`~tracesleuth.model.gaps.gap_owner`
decides from the rises of both ends' other edges; this graded split stays the comparison's: moved
onto that rule it ranked the injected service first in 1 fewer simulated and 2 fewer recorded
faults, because a caller's tiny share then carries the edge's whole relative rise as its severity.) A service's
severity is the larger of the relative rises of its own time (self time and its share of the
gaps into it) and of its client time. In the tests, a gap stratum goes with the side that
takes most of it.

Calls made (:class:`CallDrop`)
------------------------------
A code fault that returns early or throws makes its service stop calling downstream. Per
operation key of a span that is not itself a client call, the number of calls into other
services among its children, per span; the evidence is the problem spans that make **fewer
calls than every baseline span** of the operation, tested with the tail test above (one stratum
per operation; one family) and measured by their share of the operation's problem spans, in
[0, 1]. Below the baseline's least, not a lower mean: a change of the workload mix
reweights the call counts the operation already had (a ``GET /`` that renders more product
pages than checkouts makes fewer calls on average) but makes no span call less than any did
before, while a truncated call is new. This is Spectroscope's structural mutation asked of one
operation pooled over categories, with the volume a small period's categories lack. Calls that
vary with the data (a search that returns no trip makes no call per trip) can fall below the
baseline's least too: the evidence says which operation, how often and by how much.

Why not :func:`scipy.stats.mannwhitneyu` per series: it has no strata; and scipy has no van
Elteren test. Here all strata of all series are ranked in one polars pass
(``rank().over(...)``), which keeps 100,000 requests per period fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
from scipy import stats

from ... import schema as S
from ...units import format_duration_ns
from .mutations import adjust_p_values

__all__ = ["CallDrop", "Pooled", "PooledChange", "ServiceTime", "SpilledSeries", "call_counts_of", "pooled_changes",
           "pooled_from", "series_of", "spill_series", "with_children"]


@dataclass(frozen=True)
class PooledChange:
    """An operation's self time or an edge's gap that rose, pooled over all categories.

    Attributes
    ----------
    kind : {"self", "gap"}
    service : str
        The operation's service (``self``), or the service called (``gap``).
    key : str
        The operation key (``self``), or ``"caller -> callee"`` (``gap``).
    baseline_mean_ns, problem_mean_ns : float
        Mean per call, ns.
    baseline_calls, problem_calls : int
    p_value : float
        One-sided Mann-Whitney U p-value after the multiple-test control.
    auc : float
        Probability that a problem call is slower than a baseline call.
    added_ns : float
        ``(problem_mean_ns - baseline_mean_ns) * problem_calls``, ns.
    """

    kind: str
    service: str
    key: str
    baseline_mean_ns: float
    problem_mean_ns: float
    baseline_calls: int
    problem_calls: int
    p_value: float
    auc: float
    added_ns: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def describe(self) -> str:
        what = f"self time of {self.key}" if self.kind == "self" else f"gap into {self.service} ({self.key})"
        return (f"{what} up {format_duration_ns(self.problem_mean_ns - self.baseline_mean_ns)} per call "
                f"({format_duration_ns(self.baseline_mean_ns)} -> {format_duration_ns(self.problem_mean_ns)}, "
                f"{self.problem_calls} calls, pooled over categories)")


@dataclass(frozen=True)
class ServiceTime:
    """A service's time in the problem period against its baseline speed, pooled over categories.

    A service's time is the exclusive (self) time of its spans that are not client calls plus the
    gaps of the calls into it (network and queueing on the way in): what its callers wait for
    that is not spent further down; the part of a gap rise that the caller shows on every service
    it calls is the caller's *client* time instead (module docstring). Per stratum (operation or
    edge key, and what the span calls), the problem calls are compared with the baseline calls
    of the same stratum; ``added_ns`` and ``expected_ns`` are those of the larger relative rise
    of the two (own time, client time).

    Attributes
    ----------
    service : str
    added_ns : float
        Time added in the problem period, ``sum_k m_k (problem mean_k - baseline mean_k)``, ns.
    expected_ns : float
        The same calls at their stratum's baseline mean, ``sum_k m_k baseline mean_k``, ns.
    baseline_calls, problem_calls : int
        Calls in the strata common to both periods.
    exceedances : int
        Problem calls slower than every baseline call of their stratum.
    p_value : float
        One-sided (a rise) van Elteren and tail test of all its strata together, after the
        multiple-test control over the services.
    auc : float
        Probability that a problem call is slower than a baseline call of its stratum.
    """

    service: str
    added_ns: float
    expected_ns: float
    baseline_calls: int
    problem_calls: int
    exceedances: int
    p_value: float
    auc: float

    @property
    def severity(self) -> float:
        """Relative rise of the service's time, ``added_ns / expected_ns`` (0.5: 50% slower; scale-free;
        ``expected_ns`` counted at least 1 ns, the clock's resolution)."""
        return self.added_ns / max(self.expected_ns, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "severity": self.severity}

    def describe(self) -> str:
        return (f"time of {self.service} x{1 + self.severity:.2g} its baseline speed "
                f"(+{format_duration_ns(self.added_ns)} over {self.problem_calls} calls, "
                f"{self.exceedances} slower than any baseline call of theirs, p={self.p_value:.2g})")


@dataclass(frozen=True)
class CallDrop:
    """An operation whose spans make significantly fewer calls into other services, pooled over categories.

    Attributes
    ----------
    service, key : str
        The operation's service and key.
    baseline_calls_per_span, problem_calls_per_span : float
        Mean calls into other services among a span's children.
    baseline_spans, problem_spans : int
    p_value : float
        Tail test of ``fewer`` (module docstring), after the multiple-test control.
    fewer : int
        Problem spans that make fewer calls than every baseline span of the operation.
    drop : float
        ``fewer / problem_spans``: the share of the operation's problem spans that call less
        than it ever did in the baseline, in (0, 1].
    """

    service: str
    key: str
    baseline_calls_per_span: float
    problem_calls_per_span: float
    baseline_spans: int
    problem_spans: int
    p_value: float
    fewer: int
    drop: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def describe(self) -> str:
        return (f"{self.fewer} of {self.problem_spans} calls of {self.key} ({self.drop:.0%}) make fewer calls into "
                f"other services than any of its {self.baseline_spans} baseline calls ({self.problem_calls_per_span:.2g} "
                f"per call, {self.baseline_calls_per_span:.2g} before; p={self.p_value:.2g}, pooled over categories)")


@dataclass(frozen=True)
class Pooled:
    """What :func:`pooled_changes` found.

    Attributes
    ----------
    changes : tuple of PooledChange
        Significant rises of a service's self time or of the gap into it, most added time first.
    n_tests : int
        Series tested for ``changes`` (the size of that family).
    service_times : tuple of ServiceTime
        Every service whose time rose, significant or not, most severe first.
    call_drops : tuple of CallDrop
        Operations that make significantly fewer calls, largest drop first.
    """

    changes: tuple[PooledChange, ...] = ()
    n_tests: int = 0
    service_times: tuple[ServiceTime, ...] = ()
    call_drops: tuple[CallDrop, ...] = ()


#: Seed of the hashes that name a stratum (any fixed value: only equality matters).
_SEED = 0x5EC7


def _exceedance_p(x: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """P(X >= x) for the number of problem calls above their stratum's baseline maximum.

    Under no change (calls exchangeable within a stratum) a stratum's count has mean
    ``m / (n + 1)`` and variance ``m n (N + 1) / ((n + 1)^2 (n + 2))`` (exceedances over the
    maximum of ``n`` draws); the sum over strata is approximated by the negative binomial of the
    same mean and variance (exact for one stratum with ``n = m``, where the count is geometric;
    Poisson-like when ``n >> m``).
    """
    var = np.maximum(var, mean * (1 + 1e-9))
    r = mean ** 2 / (var - mean)
    return np.where(x > 0, stats.nbinom.sf(x - 1, r, mean / var), 1.0)


def with_children(calls: pl.DataFrame) -> pl.DataFrame:
    """The call view with, per span, ``stratum``: the set of operation keys its children call, as
    the sum of their distinct keys' 64-bit hashes (0 for a leaf; order-free, and a collision of
    two sets needs a 64-bit coincidence: grouping on it is much faster than on the joined key
    strings, 100,000 requests per period: 4.6 s -> well under 1 s); and ``calls_out``: its
    children that call another service's server span."""
    children = (calls.filter(pl.col(S.PARENT_SPAN_ID).is_not_null())
                .group_by(S.REQUEST, pl.col(S.PARENT_SPAN_ID).alias(S.SPAN_ID))
                .agg(pl.col(S.OPERATION_KEY).unique().hash(seed=_SEED).sum().alias("stratum"),
                     pl.col(S.SERVER_SERVICE).is_not_null().sum().cast(pl.Int64).alias("calls_out")))
    return calls.join(children, on=[S.REQUEST, S.SPAN_ID], how="left").with_columns(
        pl.col("stratum").fill_null(0), pl.col("calls_out").fill_null(0))


#: The name columns of :func:`series_of`, Categorical there (4 bytes a row), String in results.
_NAMES = ["kind", S.SERVICE, "caller", "key"]


def series_of(calls: pl.DataFrame) -> pl.DataFrame:
    """The series the pooled tests rank, one row per call and series of a call view of whole
    requests, :func:`with_children`: ``kind``, ``service``, ``caller`` (the client span's service, for a gap; null for
    a self time), ``key`` (Categorical), ``stratum`` (UInt64) and ``value`` (Int64, ns).

    Rows of pieces of a period's requests concatenate into the period's series (the row order
    does not matter to :func:`pooled_from`)."""
    client = pl.col(S.SERVER_SERVICE).is_not_null()
    own = calls.filter(~client & pl.col(S.EXCLUSIVE_NS).is_not_null()).select(
        pl.lit("self").alias("kind"), S.SERVICE, pl.lit(None, pl.String).alias("caller"),
        pl.col(S.OPERATION_KEY).alias("key"), "stratum", pl.col(S.EXCLUSIVE_NS).cast(pl.Int64).alias("value"))
    gap = calls.filter(client & pl.col(S.GAP_NS).is_not_null()).select(
        pl.lit("gap").alias("kind"), pl.col(S.SERVER_SERVICE).alias(S.SERVICE), pl.col(S.SERVICE).alias("caller"),
        (pl.col(S.CALLER_KEY).fill_null("(entry)") + " -> " + pl.col(S.OPERATION_KEY)).alias("key"), "stratum",
        pl.col(S.GAP_NS).cast(pl.Int64).alias("value"))
    return pl.concat([own, gap]).with_columns(pl.col(_NAMES).cast(pl.Categorical))


@dataclass(frozen=True)
class SpilledSeries:
    """A period's :func:`series_of` written to disk piece by piece (:func:`spill_series`), its
    strata in :data:`SPILL_BUCKETS` buckets: what :func:`pooled_from` ranks one bucket at a time,
    so the command's process never holds a period's series whole.

    Attributes
    ----------
    files : tuple of (str, dict, int)
        Per piece, its Arrow IPC file, ``{bucket: [record batch, ...]}`` and its rows.
    """

    files: tuple

    @property
    def height(self) -> int:
        """Rows in all the pieces."""
        return sum(rows for _, _, rows in self.files)

    def bucket(self, k: int) -> pl.DataFrame:
        """The rows of the strata of bucket ``k``, from every piece."""
        batches = []
        for path, groups, _ in self.files:
            if groups.get(k):
                with pa.ipc.open_file(pa.memory_map(path)) as reader:
                    batches += [reader.get_batch(i) for i in groups[k]]
        return pl.from_arrow(pa.Table.from_batches(batches)) if batches else pl.DataFrame()


def _rows_of_bucket(series, k: int) -> pl.DataFrame:
    """The rows of ``series`` (a frame or a :class:`SpilledSeries`) whose stratum is in bucket ``k``."""
    return series.bucket(k) if isinstance(series, SpilledSeries) else series.filter(_bucket(series) == k)


def _bucket(series: pl.DataFrame) -> pl.Series:
    """Each row's stratum bucket, from the names' text (the same in every process)."""
    names = [pl.col(c).cast(pl.String) for c in ("kind", S.SERVICE, "key")]
    return series.select(pl.struct(*names, "stratum").hash(seed=_SEED) % SPILL_BUCKETS).to_series()


def spill_series(series: pl.DataFrame, path) -> tuple[str, dict, int]:
    """Write one piece's :func:`series_of` to ``path`` (Arrow IPC, uncompressed: read once, from the
    page cache) sorted by stratum bucket, one record batch per bucket; ``(path, {bucket: [batch]},
    rows)`` for :class:`SpilledSeries`."""
    bucket = _bucket(series).to_numpy()
    counts = np.bincount(bucket, minlength=SPILL_BUCKETS)
    table = series.to_arrow()
    table = table.take(np.argsort(bucket, kind="stable")).combine_chunks()
    ends, groups = np.cumsum(counts), {}
    with pa.ipc.new_file(str(path), table.schema) as writer:
        for k in np.flatnonzero(counts).tolist():
            first = writer.stats.num_record_batches
            writer.write_table(table.slice(int(ends[k] - counts[k]), int(counts[k])))
            groups[k] = list(range(first, writer.stats.num_record_batches))
    return str(path), groups, series.height


def call_counts_of(calls: pl.DataFrame) -> pl.DataFrame:
    """The calls-made series (module docstring) of a call view of whole requests,
    :func:`with_children`, as counts: per
    operation (``service``, ``key``) of the spans that are no client call and ``value`` = minus a
    span's children's calls into other services (a rise of the value is a drop of the calls), the
    spans ``count``. Counts of pieces of a period add up."""
    return (calls.filter(pl.col(S.SERVER_SERVICE).is_null())
            .group_by(S.SERVICE, pl.col(S.OPERATION_KEY).alias("key"), (-pl.col("calls_out")).alias("value"))
            .agg(pl.len().cast(pl.Int64).alias("count")))


#: Strata buckets of the periods' series written to disk (:func:`spill_series`): the command's
#: process ranks one bucket of both periods at a time.
SPILL_BUCKETS = 16
#: The columns naming a stratum.
_STRATUM = ["kind", S.SERVICE, "key", "stratum"]


def _per_stratum(base, prob) -> pl.DataFrame:
    """One row per stratum (``kind``, ``service``, ``key``, ``stratum``; ``caller`` follows from the
    key) of the two periods' :func:`series_of` present in both periods:
    calls ``n`` (baseline), ``m`` (problem), ``N``, the problem rank sum ``W`` and its expectation
    ``E`` and tie-corrected variance ``V``, ``U``, the means, the exceedances ``x`` over the
    baseline maximum, and the van Elteren weight ``w``; sorted (same input, same bits out).

    ``base`` and ``prob`` are frames, or :class:`SpilledSeries` (then ranked one bucket of strata
    at a time: every figure of a stratum is its own, so the rows are those of the frames)."""
    if not (isinstance(base, SpilledSeries) or isinstance(prob, SpilledSeries)):
        return _finished(_stratum_sums(base, prob))
    found = [_stratum_sums(_rows_of_bucket(base, k), _rows_of_bucket(prob, k)) for k in range(SPILL_BUCKETS)]
    found = [f for f in found if f is not None]
    return _finished(pl.concat(found) if found else None)


def _stratum_sums(base: pl.DataFrame, prob: pl.DataFrame) -> pl.DataFrame | None:
    """:func:`_per_stratum`'s sums of the strata of ``base`` and ``prob`` (unsorted, names
    Categorical); None when either is empty."""
    if base.height == 0 or prob.height == 0:
        return None
    strat = _STRATUM
    both = pl.concat([base.with_columns(pl.lit(False).alias("problem")),
                      prob.with_columns(pl.lit(True).alias("problem"))])
    # One 64-bit id per stratum: ranking and grouping on it is much faster than on three strings.
    both = both.with_columns(pl.struct(strat).hash(seed=_SEED).alias("sid"))
    # Ranks: a tie group of t equal values spans ranks [min, max], t = max - min + 1, and takes
    # the average rank; sum(t^3 - t) over tie groups = sum(t^2 - 1) over their members.
    low = pl.col("value").rank("min").over("sid")
    high = pl.col("value").rank("max").over("sid")
    both = both.with_columns(((low + high) / 2.0).alias("rank"), (high - low + 1).cast(pl.Float64).alias("t"))
    per = both.group_by("sid").agg(
        *[pl.col(c).first() for c in (*strat, "caller")],
        ((pl.col("t") ** 2 - 1).sum()).alias("ties"),
        pl.len().cast(pl.Float64).alias("N"),
        pl.col("problem").sum().cast(pl.Float64).alias("m"),
        pl.col("rank").filter(pl.col("problem")).sum().alias("W"),
        pl.col("value").filter(~pl.col("problem")).sum().alias("sum_b"),
        pl.col("value").filter(pl.col("problem")).sum().alias("sum_p"),
        (pl.col("value").filter(pl.col("problem"))
         > pl.col("value").filter(~pl.col("problem")).max()).sum().cast(pl.Float64).alias("x"),
    ).with_columns((pl.col("N") - pl.col("m")).alias("n")).filter((pl.col("m") > 0) & (pl.col("n") > 0))
    return per.drop("sid").with_columns(pl.col(_NAMES).cast(pl.String))


def _finished(per: pl.DataFrame | None) -> pl.DataFrame:
    """:func:`_stratum_sums`' rows sorted, with their means, weights and moments."""
    if per is None:
        return pl.DataFrame()
    # Values are integer ns, so the per-stratum sums are exact whatever the row order; the strata
    # are put in one order before their float sums below: same input, same bits out.
    per = per.with_columns((pl.col("sum_p") / pl.col("m")).alias("mean_p"),
                           (pl.col("sum_b") / pl.col("n")).alias("mean_b"))
    return per.sort(_STRATUM).with_columns(
        (1.0 / (pl.col("N") + 1)).alias("w"),
        (pl.col("m") * (pl.col("N") + 1) / 2).alias("E"),
        (pl.col("n") * pl.col("m") / 12 * ((pl.col("N") + 1) - pl.col("ties").fill_null(0.0)
                                           / pl.max_horizontal(pl.col("N") * (pl.col("N") - 1), 1.0))).alias("V"),
        (pl.col("W") - pl.col("m") * (pl.col("m") + 1) / 2).alias("U"),
    )


def _combined(per: pl.DataFrame, by: list[str], min_calls: int) -> pl.DataFrame:
    """The strata of each group ``by`` combined: calls, van Elteren ``z``, the tail test's inputs,
    ``auc``, ``added_ns``, ``expected_ns`` and the pooled means; groups with at least
    ``min_calls`` calls in each period, a variance and a rise (``added_ns > 0``), sorted by ``by``;
    ``p_raw`` is the one-sided p-value of the rank and tail tests together (the smaller,
    doubled), before the multiple-test control."""
    agg = per.group_by(by).agg(
        pl.col("n").sum().alias("calls_b"), pl.col("m").sum().alias("calls_p"),
        (pl.col("w") * (pl.col("W") - pl.col("E"))).sum().alias("num"),
        (pl.col("w") ** 2 * pl.col("V")).sum().alias("den"),
        pl.col("x").sum().alias("x"), (pl.col("m") / (pl.col("n") + 1)).sum().alias("lam"),
        (pl.col("m") * pl.col("n") * (pl.col("N") + 1) / ((pl.col("n") + 1) ** 2 * (pl.col("n") + 2))).sum()
        .alias("var_x"),
        (pl.col("U").sum() / (pl.col("n") * pl.col("m")).sum()).alias("auc"),
        (pl.col("m") * (pl.col("mean_p") - pl.col("mean_b"))).sum().alias("added_ns"),
        (pl.col("m") * pl.col("mean_b")).sum().alias("expected_ns"),
        (pl.col("sum_b").sum() / pl.col("n").sum()).alias("mean_b"),
        (pl.col("sum_p").sum() / pl.col("m").sum()).alias("mean_p"),
        maintain_order=True,
    ).filter((pl.col("calls_b") >= min_calls) & (pl.col("calls_p") >= min_calls) & (pl.col("added_ns") > 0)
             & (pl.col("den") > 0)).sort(by)
    if agg.height == 0:
        return agg.with_columns(pl.lit(None, pl.Float64).alias("p_raw"))
    z = (agg["num"] / agg["den"].sqrt()).to_numpy()
    tail = _exceedance_p(agg["x"].to_numpy(), agg["lam"].to_numpy(), agg["var_x"].to_numpy())
    return agg.with_columns(pl.Series("p_raw", np.minimum(1.0, 2 * np.minimum(stats.norm.sf(z), tail))))


def pooled_changes(base_calls: pl.DataFrame, prob_calls: pl.DataFrame, *, alpha: float, correction: str,
                   min_calls: int) -> Pooled:
    """Self times, gaps, services' times and calls made, pooled over categories (module docstring).

    Parameters
    ----------
    base_calls, prob_calls : polars.DataFrame
        Call views (:meth:`TraceTable.calls`) of the baseline and of the problem period.
    alpha : float
    correction : {"holm", "bonferroni", "none"}
    min_calls : int
        Calls a series needs in each period, in the strata common to both, to be tested.

    Returns
    -------
    Pooled
    """
    base_calls, prob_calls = with_children(base_calls), with_children(prob_calls)
    return pooled_from(series_of(base_calls), series_of(prob_calls), call_counts_of(base_calls),
                       call_counts_of(prob_calls), alpha=alpha, correction=correction, min_calls=min_calls)


def pooled_from(base_series, prob_series, base_counts: pl.DataFrame, prob_counts: pl.DataFrame, *, alpha: float,
                correction: str, min_calls: int) -> Pooled:
    """:func:`pooled_changes` of the periods' :func:`series_of` and :func:`call_counts_of` (each
    period's pieces concatenated, or written to disk (:class:`SpilledSeries`), resp. summed): what
    a period read piece by piece gives.

    Returns
    -------
    Pooled
    """
    if base_series.height == 0 or prob_series.height == 0:
        return Pooled()
    per = _per_stratum(base_series, prob_series)
    if per.height == 0:
        return Pooled()
    series = ["kind", S.SERVICE]
    top = (per.group_by([*series, "key"], maintain_order=True)
           .agg((pl.col("m") * (pl.col("mean_p") - pl.col("mean_b"))).sum().alias("a"))
           .sort("a", "key", descending=[True, False]).group_by(series, maintain_order=True).agg(pl.col("key").first()))
    agg = _combined(per, series, min_calls).join(top, on=series, how="left")
    out = []
    for row, pval in _significant(agg, alpha, correction):
        out.append(PooledChange(kind=row["kind"], service=row[S.SERVICE], key=row["key"],
                                baseline_mean_ns=float(row["mean_b"]), problem_mean_ns=float(row["mean_p"]),
                                baseline_calls=int(row["calls_b"]), problem_calls=int(row["calls_p"]),
                                p_value=pval, auc=float(row["auc"]), added_ns=float(row["added_ns"])))
    out.sort(key=lambda c: (-c.added_ns, c.kind, c.key))
    calls = _fewer_calls(base_counts, prob_counts, min_calls)
    drops = [CallDrop(service=row[S.SERVICE], key=row["key"], baseline_calls_per_span=float(row["mean_b"]),
                      problem_calls_per_span=float(row["mean_p"]), baseline_spans=int(row["n"]),
                      problem_spans=int(row["m"]), p_value=pval, fewer=int(row["x"]), drop=float(row["x"] / row["m"]))
             for row, pval in _significant(calls, alpha, correction, "p_tail")]
    drops.sort(key=lambda d: (-d.drop, d.key))
    return Pooled(changes=tuple(out), n_tests=agg.height, service_times=_service_times(per, correction),
                  call_drops=tuple(drops))


def _fewer_calls(base: pl.DataFrame, prob: pl.DataFrame, min_calls: int) -> pl.DataFrame:
    """Per operation of :func:`call_counts_of`: spans ``n`` and ``m``, mean calls ``mean_b`` and
    ``mean_p``, the problem spans ``x`` that call less than every baseline span, and ``p_tail``, the
    tail test's p-value of ``x`` (:func:`_exceedance_p`); operations with ``min_calls`` spans a side
    whose mean fell.

    No ranks: the tail test needs only each operation's baseline least (the series holds minus the
    calls, so its maximum), so counts of each value are enough (the sums below are of integers:
    exact, whatever the pieces)."""
    keys = [S.SERVICE, "key"]
    spans = pl.col("count").sum().cast(pl.Float64)
    b = base.group_by(keys).agg(spans.alias("n"), (-pl.col("value") * pl.col("count")).sum().alias("_calls_b"),
                                pl.col("value").max().alias("most")).with_columns(
        (pl.col("_calls_b") / pl.col("n")).alias("mean_b")).drop("_calls_b")
    p = prob.join(b.select(*keys, "most"), on=keys).group_by(keys).agg(
        spans.alias("m"), (-pl.col("value") * pl.col("count")).sum().alias("_calls_p"),
        pl.col("count").filter(pl.col("value") > pl.col("most")).sum().cast(pl.Float64).alias("x")).with_columns(
        (pl.col("_calls_p") / pl.col("m")).alias("mean_p")).drop("_calls_p")
    j = b.join(p, on=keys).filter((pl.col("n") >= min_calls) & (pl.col("m") >= min_calls)
                                  & (pl.col("mean_p") < pl.col("mean_b"))).sort(keys)
    lam = (j["m"] / (j["n"] + 1)).to_numpy()
    var = (j["m"] * j["n"] * (j["n"] + j["m"] + 1) / ((j["n"] + 1) ** 2 * (j["n"] + 2))).to_numpy()
    return j.with_columns(pl.Series("p_tail", _exceedance_p(j["x"].to_numpy(), lam, var), dtype=pl.Float64))


def _significant(agg: pl.DataFrame, alpha: float, correction: str, column: str = "p_raw"):
    """``(row, p-value)`` of the rows of :func:`_combined` significant under the multiple-test
    control, by the p-values of ``column``."""
    if agg.height == 0:
        return []
    pv = adjust_p_values(agg[column].to_numpy(), correction)
    return [(row, float(p)) for row, p in zip(agg.iter_rows(named=True), pv.tolist()) if p < alpha]


def _attributed(per: pl.DataFrame) -> pl.DataFrame:
    """The strata of :func:`_per_stratum` with each gap stratum's time split between the service
    called and the caller (module docstring, *A service's time*): columns ``owner``, ``share``
    (of the stratum's time that goes to ``owner``) and ``test`` (the owner that takes the
    stratum in the significance test: the side with the larger share, the callee on a tie)."""
    rise = (pl.col("m") * (pl.col("mean_p") - pl.col("mean_b"))).sum()
    expected = (pl.col("m") * pl.col("mean_b")).sum()
    edges = per.filter(pl.col("kind") == "gap").group_by("caller", S.SERVICE).agg(
        pl.when(expected > 0).then(rise / expected).otherwise(0.0).alias("r")).sort("caller", S.SERVICE)
    # The median rise of each caller's *other* edges: every edge of the caller against every other.
    others = (edges.join(edges.select("caller", pl.col(S.SERVICE).alias("other"), pl.col("r").alias("r_other")),
                         on="caller").filter(pl.col("other") != pl.col(S.SERVICE))
              .group_by("caller", S.SERVICE).agg(pl.col("r_other").median().alias("others")))
    edges = edges.join(others, on=["caller", S.SERVICE], how="left").with_columns(
        pl.when((pl.col("others") > 0) & (pl.col("r") > 0))
        .then(pl.min_horizontal(pl.col("others") / pl.col("r"), 1.0)).otherwise(0.0).alias("f"))
    per = per.join(edges.select("caller", S.SERVICE, "f"), on=["caller", S.SERVICE], how="left").with_columns(
        pl.col("f").fill_null(0.0))
    callee = per.with_columns(pl.col(S.SERVICE).alias("owner"), pl.lit("own").alias("part"),
                              (1.0 - pl.col("f")).alias("share"), (pl.col("f") <= 0.5).alias("test"))
    caller = per.filter(pl.col("f") > 0).with_columns(pl.col("caller").alias("owner"), pl.lit("client").alias("part"),
                                                      pl.col("f").alias("share"), (pl.col("f") > 0.5).alias("test"))
    return pl.concat([callee, caller]).drop("f")


def _service_times(per: pl.DataFrame, correction: str) -> tuple[ServiceTime, ...]:
    """:class:`ServiceTime` of every service whose time rose (``pooled_changes``' third result)."""
    parts = _attributed(per)
    size = parts.group_by("owner", "part").agg(
        (pl.col("share") * pl.col("m") * (pl.col("mean_p") - pl.col("mean_b"))).sum().alias("added"),
        (pl.col("share") * pl.col("m") * pl.col("mean_b")).sum().alias("expected"),
    ).with_columns((pl.col("added") / pl.max_horizontal("expected", 1.0)).alias("sev")).sort(
        "owner", "sev", "part", descending=[False, True, False]).group_by("owner", maintain_order=True).first()
    tested = parts.filter(pl.col("test")).drop(S.SERVICE).rename({"owner": S.SERVICE})
    agg = _combined(tested, [S.SERVICE], 1).drop("added_ns", "expected_ns").join(
        size.rename({"owner": S.SERVICE}), on=S.SERVICE, how="inner").filter(pl.col("added") > 0)
    if agg.height == 0:
        return ()
    pv = adjust_p_values(agg["p_raw"].to_numpy(), correction)
    out = [ServiceTime(service=row[S.SERVICE], added_ns=float(row["added"]),
                       expected_ns=float(row["expected"]), baseline_calls=int(row["calls_b"]),
                       problem_calls=int(row["calls_p"]), exceedances=int(row["x"]), p_value=float(p),
                       auc=float(row["auc"]))
           for row, p in zip(agg.iter_rows(named=True), pv.tolist())]
    out.sort(key=lambda t: (-t.severity, t.service))
    return tuple(out)
