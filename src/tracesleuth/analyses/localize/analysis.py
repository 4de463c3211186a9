"""Root-cause localization from one period's traces: anomalous methods, then their instances.

:class:`RootCauseLocalization` implements Mi, Wang, Zhou, Lyu and Cai, *Localizing root causes of
performance anomalies in cloud computing systems by analyzing request trace logs*, Sci China Inf
Sci 2012, doi:10.1007/s11432-012-4747-8 (../shared/papers/mi-2012-localizing-root-causes-trace-logs.md):

1. requests are clustered by call sequence and the clusters adjusted (:mod:`.clusters`,
   Section 4.1, Algorithm 1);
2. in each major cluster, PCA on the latency matrix splits normal from anomalous requests by the
   squared prediction error against the Q-statistic, and B4 picks the principal methods
   (:mod:`.spe`, Sections 4.2.2 and 4.3.1);
3. a principal method is anomalous in a cluster when a Mann-Whitney U test tells its latencies in
   the anomalous requests from those in the normal ones at level ``test_level``; its suspicious
   score is the number of clusters in which it is anomalous (Section 4.3.2);
4. the instances of the top methods are compared by the Jensen-Shannon divergence of their latency
   histograms (:mod:`.instances`, Section 5, Algorithm 2);
5. the methods' services are ranked (the question users bring: which service).

No baseline period is needed: the normal requests of each cluster are the reference (and, for the
changes within the window, the calls before each change point).

**Departures from the paper, each a setting** (``robust=False, combined=False, log=False,
min_effect=0.5, alarm_test=False, changes=False`` is the paper's method; :func:`.spe.spe_split`
gives the reasons): the normal subspace estimated robustly (as ROBPCA does) so that a fault
slowing a fifth or a third of the requests does not become "normal"; a request also anomalous
when its Hotelling T**2 inside the normal subspace is extreme; log latencies; a least effect size
for a method to count as anomalous; a cluster tested only when it has more anomalous requests than
its thresholds' false alarms; the changes within the window and the ranking of services by
slowdown (below). The evaluation (:mod:`tracesleuth.evaluation.protocols.localize`) reports both methods side by side.

**Method, latency and service.** A method is an operation key ``service:operation``. Its latency
is the span's exclusive (self) time by default (``latency="exclusive"``): with nested calls, a
method's duration contains its callees', so every caller of a slow method would be as anomalous
as the method itself (the paper's logs give durations, ``latency="duration"``). A client span that
calls a server is attributed to the service it calls (its self time is the time outside the
server span: network and queueing on the way to that service); its instances are the server
spans' instances.

**Ties.** Methods with the same score are ordered by the effect size of their latency change: the
common-language effect size ``U / (n_anomalous n_normal)`` (the probability that a latency from
the anomalous set exceeds one from the normal set; 0.5 = no difference), averaged over the
clusters where the method is anomalous, higher first; then by name.

**Changes within the window** (``changes=True``, beyond the paper; :mod:`.changes`). Every
operation's self time and every edge's gap is also tested, pooled over all requests that make
the call, for a rise inside the window (a change point: the calls after it slower than those
before). It needs no cluster to be large, which the paper's split does: on TrainTicket, three
minutes hold about 160 requests in 22 call sequences, and a slowed service's 9 calls fall into
clusters of 2 to 8 requests that no PCA can split.

**Services.** With ``changes=True`` (the default), a service is as suspicious as the largest
slowdown the evidence attributes to it, in one currency, x-fold: the rise of one of its series
inside the window (median after / before the change point), or the slowdown of one of its
anomalous methods in the paper's split (median in the anomalous / in the normal requests);
services are ranked by it, highest first. (The two kinds of evidence have different p-values, on
different numbers of calls; the size of a slowdown is what they share, and what tells a fault
from the chronic tail of a busy operation: on the recorded faults, the injected service's
series rose 13-3,400x, the noise of windows without a fault 1.2-15x.) With ``changes=False``, as
the paper: a service is as suspicious as its most suspicious anomalous method, in the order of
the method ranking, with that method's score. (A sum over methods would favour the services with
many methods: on OnlineBoutique, the product catalog's and the currency service's many calls
appear in every cluster.)

**Since when.** When the top service's evidence is a change within the window, its change point.
Otherwise, over the anomalous requests of the clusters where the top method is anomalous,
ordered by start time, the most likely single change point of the anomalous share (two Bernoulli
segments, maximum likelihood) is reported as ``onset_ns`` when the share after it is at least
twice the share before and a two-proportion test at ``test_level`` finds them different.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import polars as pl
from joblib import Parallel, delayed
from scipy.stats import binomtest, mannwhitneyu

from ... import schema as S
from ...errors import EmptyDataError, ParameterError
from ...units import format_duration_ns
from .._contract import Analysis, Interval, Options, Seed, ServiceSuspect
from .._notes import Note, WithNotes
from .._statistics import proportion_p_values
from ..._text import shorten
from ...model.flows import in_request_order
from .changes import SeriesChange, window_changes
from .clusters import adjust_clusters, cluster_requests, latency_matrices, per_operation, with_occurrences
from .instances import InstanceSuspect, dissimilarity_ratios
from .notes import (AlmostAllAnomalous, ClusterNotTested, ClustersSkipped, ClustersTooSmall, FalseAlarmsOnly,
                    FasterWhenAnomalous, InstancesUnknown, MinorClustersLeftOut, NoClusterSplit, OneClusterOnly,
                    TooFewAnomalous, WeakChange)
from .spe import spe_split

__all__ = ["ClusterSummary", "LocalizationResult", "MethodSuspect", "RootCauseLocalization", "ServiceSuspect"]

LATENCIES = {"exclusive": S.EXCLUSIVE_NS, "duration": S.DURATION_NS}
#: Fewest anomalous requests a cluster needs for its Mann-Whitney tests.
MIN_ANOMALOUS = 3

_FRAME_SCHEMA = {"rank": pl.Int64, "operation_key": pl.String, "service": pl.String, "score": pl.Int64,
                 "tested": pl.Int64, "effect": pl.Float64, "p_value": pl.Float64, "normal_median_ns": pl.Float64,
                 "anomalous_median_ns": pl.Float64, "anomalous": pl.Boolean}


@dataclass(frozen=True)
class MethodSuspect:
    """A principal method and how suspicious it is.

    Attributes
    ----------
    operation_key : str
    service : str
        The service it is attributed to (the service called, for a client span).
    score : int
        Suspicious score: the major clusters in which it is anomalous (Section 4.3.2).
    tested : int
        The major clusters in which it was a principal method and tested.
    effect : float
        Common-language effect size, in [0, 1] (module docstring), averaged over the clusters
        where it is anomalous (over those where it was tested when none).
    p_value : float
        The smallest Mann-Whitney p-value over its clusters.
    normal_median_ns, anomalous_median_ns : float
        Median latency in the normal and anomalous requests of the clusters where it is anomalous
        (where it was tested, when none), ns.
    """

    operation_key: str
    service: str
    score: int
    tested: int
    effect: float
    p_value: float
    normal_median_ns: float
    anomalous_median_ns: float

    @property
    def anomalous(self) -> bool:
        """Anomalous in at least one cluster."""
        return self.score > 0

    def describe(self) -> str:
        return (f"{self.operation_key} anomalous in {self.score} of {self.tested} clusters (median "
                f"{format_duration_ns(self.normal_median_ns)} normal -> "
                f"{format_duration_ns(self.anomalous_median_ns)} anomalous)")

    def to_dict(self) -> dict:
        return {"operation_key": self.operation_key, "service": self.service, "score": self.score,
                "tested": self.tested, "effect": self.effect, "p_value": self.p_value,
                "normal_median_ns": self.normal_median_ns, "anomalous_median_ns": self.anomalous_median_ns,
                "anomalous": self.anomalous}


@dataclass(frozen=True)
class ClusterSummary:
    """One major cluster and what its PCA split found.

    Attributes
    ----------
    cluster : int
    endpoint : str
    sequence : str
        Its call sequence, shortened for display.
    n_requests : int
        Its own requests plus the merged ones.
    n_methods : int
        Columns of its latency matrix.
    n_merged_clusters, n_merged_requests : int
    n_split_methods : int or None
        Columns the PCA split used: those whose latency varies, or only the most variable ones
        when the cluster has fewer than about twice as many requests (:func:`.spe.spe_split`).
    n_components : int or None
        Principal components kept (None: not split).
    threshold : float or None
        The Q-statistic, ns**2.
    n_anomalous : int
        Requests with SPE above it.
    principal : tuple of str
        Its principal methods.
    anomalous_methods : tuple of str
        Those the Mann-Whitney test found anomalous.
    note : ClusterNotTested or None
        Why it was not split or tested, when so (a note of :mod:`.notes`: its kind, numbers and
        ``str()``, the words of the clusters table).
    """

    cluster: int
    endpoint: str
    sequence: str
    n_requests: int
    n_methods: int
    n_merged_clusters: int
    n_merged_requests: int
    n_split_methods: int | None = None
    n_components: int | None = None
    threshold: float | None = None
    n_anomalous: int = 0
    principal: tuple[str, ...] = ()
    anomalous_methods: tuple[str, ...] = ()
    note: ClusterNotTested | None = None

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v.to_dict() if isinstance(v, Note) else v)
                for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class LocalizationResult(WithNotes):
    """What :class:`RootCauseLocalization` found.

    Attributes
    ----------
    endpoints : tuple of str
    n_requests : int
        Requests of every endpoint.
    n_clusters : int
        Clusters of identical call sequences.
    n_analysed : int
        Requests in the latency matrices of the major clusters that were split.
    n_anomalous : int
        Requests found anomalous (SPE above the threshold).
    methods : tuple of MethodSuspect
        Every principal method tested, most suspicious first (module docstring).
    top_k : int
        How many methods are "top" (their instances are compared).
    instances : tuple of InstanceSuspect
        The instances of the top anomalous methods, by method rank then ratio.
    services : tuple of ServiceSuspect
        Most suspicious first; only services with an anomalous method.
    clusters : tuple of ClusterSummary
        The major clusters.
    onset_ns : int or None
        Since when (Unix ns): the change point of the top service's change within the window, or
        when the anomalous requests of the top method's clusters became frequent.
    changes : tuple of SeriesChange
        Series whose time rose inside the window, largest rise first (empty when ``changes``
        was off).
    n_series : int
        Series tested for a change.
    level : float
        The significance level the fit used (``test_level``).
    notes : tuple of Note
        Why a part of the input was not analysed, why instances could not be told apart... as
        records (:mod:`.notes`).
    """

    endpoints: tuple[str, ...]
    n_requests: int
    n_clusters: int
    n_analysed: int
    n_anomalous: int
    methods: tuple[MethodSuspect, ...] = ()
    top_k: int = 5
    instances: tuple[InstanceSuspect, ...] = ()
    services: tuple[ServiceSuspect, ...] = ()
    clusters: tuple[ClusterSummary, ...] = ()
    onset_ns: int | None = None
    changes: tuple[SeriesChange, ...] = ()
    n_series: int = 0
    level: float = 0.05
    notes: tuple[Note, ...] = field(default=())

    @property
    def anomalous_methods(self) -> tuple[MethodSuspect, ...]:
        """The methods anomalous in at least one cluster, most suspicious first."""
        return tuple(m for m in self.methods if m.anomalous)

    @property
    def caveats(self) -> tuple[Note, ...]:
        """Why the top answer may mislead (weak evidence, an inverted split), as records
        (:mod:`.notes`: ``weak_change``, ``one_cluster_only``, ``faster_when_anomalous``)."""
        found = self.anomalous_methods
        out = []
        top_change = self._top_change()
        if top_change is not None:
            if not top_change.significant(self.level):
                out.append(WeakChange(top_change.key, top_change.calls_before + top_change.calls_after,
                                      top_change.p_value, top_change.p_family, self.n_series))
            return tuple(out)
        n_split = sum(1 for c in self.clusters if c.n_components)
        if found and found[0].score == 1 and n_split > 1:
            out.append(OneClusterOnly(found[0].operation_key, n_split))
        if found and found[0].anomalous_median_ns < found[0].normal_median_ns:
            out.append(FasterWhenAnomalous(found[0].operation_key, found[0].anomalous_median_ns,
                                           found[0].normal_median_ns))
        return tuple(out)

    def _top_change(self) -> SeriesChange | None:
        """The change the top service's rank comes from, if its rank comes from one."""
        if not self.services or not self.changes:
            return None
        top = self.services[0]
        mine = [c for c in self.changes if c.service == top.service]
        return mine[0] if mine and mine[0].rise >= top.score else None

    def to_frame(self) -> pl.DataFrame:
        """One row per tested principal method, most suspicious first."""
        rows = [{"rank": i + 1, **{k: v for k, v in m.to_dict().items()}} for i, m in enumerate(self.methods)]
        return pl.DataFrame(rows, schema=_FRAME_SCHEMA)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict; top-level ``services`` (``service``, ``score``, ``evidence``), ``instances``,
        ``notes`` and ``caveats``."""
        out = {
            "endpoints": list(self.endpoints), "n_requests": self.n_requests, "n_clusters": self.n_clusters,
            "n_analysed": self.n_analysed, "n_anomalous": self.n_anomalous, "onset_ns": self.onset_ns,
            "services": [s.to_dict() for s in self.services],
            "methods": [m.to_dict() for m in self.methods], "top_k": self.top_k,
            "instances": [i.to_dict() for i in self.instances],
            "changes": [c.to_dict() for c in self.changes], "n_series": self.n_series,
            "clusters": [c.to_dict() for c in self.clusters],
            "notes": [n.to_dict() for n in self.notes], "caveats": [c.to_dict() for c in self.caveats],
        }
        json.dumps(out)  # a failure here is a bug, not bad input
        return out

    def describe(self) -> str:
        """A few lines in words, saying when the result is not to be trusted."""
        where = self.endpoints[0] if len(self.endpoints) == 1 else f"{len(self.endpoints)} endpoints"
        lines = [f"{where}: {self.n_requests:,} requests in {self.n_clusters:,} call sequences; "
                 f"{self.n_analysed:,} analysed in {len(self.clusters)} major clusters, "
                 f"{self.n_anomalous:,} anomalous."]
        found = self.anomalous_methods
        if not self.services:
            split = ("no principal method's latency differs between the normal and the anomalous requests of any "
                     "cluster" if self.n_analysed else "no cluster could be split (see the notes)")
            rose = f", and none of the {self.n_series:,} series tested rose within the window" if self.n_series else ""
            lines.append(f"Nothing anomalous: {split}{rose}." + ("" if self.n_analysed else
                         " Nothing could be analysed fully: try more requests, a longer window, or another endpoint."))
        else:
            lines.append("Most suspicious services:")
            lines += [f"  {s.service}: {s.evidence[0]}" for s in self.services[:3]]
            if self.n_series:
                lines.append(f"  ({len(self.changes):,} of {self.n_series:,} series rose within the window; "
                             "services ranked by their largest slowdown, x-fold)")
            elif len(found) > 1 and found[0].score == found[1].score:
                lines.append(f"  (the top methods tie on score {found[0].score}; ordered by effect size)")
            lines += [f"  {c}" for c in self.caveats]
            out = [i for i in self.instances if found and i.stands_out and i.operation_key == found[0].operation_key]
            if out:
                lines.append(f"  Instances standing out for {found[0].operation_key}: "
                             + ", ".join(f"{i.instance} ({i.dissimilarity_ratio:.2f})" for i in out))
            if self.onset_ns is not None:
                from datetime import datetime, timezone
                when = datetime.fromtimestamp(self.onset_ns / 1e9, tz=timezone.utc).isoformat(timespec="seconds")
                lines.append(f"  Since {when}" + (": the change point of its rise." if self._top_change() is not None
                                                       else ": anomalous requests became frequent then."))
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)


def _tables(x: Any) -> list:
    tables = [x] if hasattr(x, "frame") and hasattr(x, "endpoint") else list(x) if isinstance(x, Sequence) else None
    if not tables or not all(hasattr(t, "frame") and hasattr(t, "endpoint") for t in tables):
        raise ParameterError("RootCauseLocalization.fit takes a TraceTable (from build_trace_table) or a "
                             f"non-empty sequence of them; got {type(x).__name__}.")
    if len({t.endpoint for t in tables}) < len(tables):
        raise ParameterError("Each endpoint's trace table may be given once.")
    if sum(t.frame.height for t in tables) == 0:
        raise EmptyDataError("No request to analyse: the trace tables are empty.")
    return tables


class RootCauseLocalization(Analysis):
    """Localize anomalous methods and their instances from one period's traces (Mi et al. 2012).

    Parameters
    ----------
    alpha : float, default=0.75
        The paper's alpha (Table 1): the share of an endpoint's requests the major clusters hold
        (Algorithm 1), in (0, 1].
    variance : float, default=0.95
        gamma: the share of a cluster's latency variance the principal components explain, in (0, 1).
    spe_level : float, default=0.05
        beta: significance level of the Q-statistic that separates anomalous requests, in (0, 1).
    test_level : float, default=0.05
        lambda: significance level of the Mann-Whitney U tests, in (0, 1).
    adjust_clusters : bool, default=True
        Merge minor clusters into major ones (Algorithm 1); False analyses the major clusters only
        (Table 2's "N" rows).
    latency : {"exclusive", "duration"}, default="exclusive"
        A method's latency: its span's self time or its whole duration (module docstring).
    top_k : int, default=5
        Methods whose instances are compared (the most suspicious anomalous ones).
    n_bins : int, default=10
        Bins of the instance latency histograms (Algorithm 2's ``binNum``).
    instance_factor : float, default=1.5
        An instance stands out when its dissimilarity ratio is at least this times the median
        ratio of its method's instances (:mod:`.instances`).
    robust : bool, default=True
        Estimate each cluster's normal subspace robustly, as ROBPCA does (from its least
        outlying half of requests, then reweighted; :func:`.spe.spe_split`), instead of from all
        its requests: a fault that slows many requests does not become "normal". False: the
        paper's classical PCA.
    combined : bool, default=True
        Also call a request anomalous when its Hotelling T**2 in the normal subspace exceeds
        the chi-square quantile at ``1 - spe_level``. False: the SPE alone, as the paper.
    random_state : int, numpy Generator or None, default=None
        Draws the outlyingness directions, and the requests the robust subspace is fitted on in
        clusters of more than 2,000 requests; the same seed gives the same result.
    log : bool, default=True
        Split on ``log(1 + latency in µs)`` instead of the latency: latencies are right-skewed
        (about lognormal) while the SPE and T**2 thresholds assume Gaussian columns, and a
        slowdown is then measured relative to the method's usual time, not in absolute ns (a
        20 ms rise in a 2 ms method outweighs one in a 200 ms method). False: the paper's raw
        latencies. The Mann-Whitney tests are rank tests and do not change.
    alternative : {"two-sided", "greater"}, default="two-sided"
        The Mann-Whitney alternative: a method is anomalous when its latency differs either way
        between the anomalous and the normal requests (the paper's test), or only when it is
        higher in the anomalous ones ("greater"). On the recorded faults the two-sided test
        ranks the injected service better (a fault also makes some methods faster: requests that
        fail early, callers that wait less often).
    min_effect : float, default=0.64
        The least common-language effect size (Vargha & Delaney's A: 0.56 small, 0.64 medium,
        0.71 large) for a significant difference to count as anomalous ("differ obviously",
        Section 4.3.2): with thousands of requests a test finds tiny differences significant,
        and the requests the PCA split calls anomalous are, for every method, a little slower
        on average, since some of them were picked for that method's own noise. For
        "two-sided", ``|A - 0.5| >= min_effect - 0.5``; 0.5 turns it off (the paper).
    alarm_test : bool, default=True
        Test a cluster's methods only when its anomalous share is significantly above the false
        alarms its thresholds make by design (``spe_level``, or ``1 - (1 - spe_level)**2`` when
        combined; one-sided binomial test at ``test_level``). Otherwise the anomalous requests of
        a cluster with no fault are its most extreme normal ones, picked for their latencies, and
        the methods they are slow in come out "anomalous". False: the paper (every split
        cluster's methods tested).
    changes : bool, default=True
        Also test every operation's self time and every edge's gap, pooled over all requests,
        for a rise within the window, and rank services by their largest slowdown
        (:mod:`.changes`; module docstring). False: the paper's evidence and ranking only.
    n_splits : int, default=9
        Change points tried per series (evenly spaced cut times).
    columns : {"call", "operation"}, default="call"
        The columns of a cluster's latency matrix: one per call of its sequence (the paper), or
        one per operation with the calls' latencies summed (:func:`.clusters.per_operation`):
        sequences that differ only in how often a loop ran then merge, and small clusters have
        fewer columns.

    Attributes
    ----------
    result_ : LocalizationResult
    n_features_in_ : int
        Number of endpoints fitted.

    Raises
    ------
    ParameterError
        From ``fit``: a setting is not allowed, or the input is not trace tables.
    EmptyDataError
        From ``fit``: no request.

    Examples
    --------
    >>> from tracesleuth.model import build_trace_table               # doctest: +SKIP
    >>> est = RootCauseLocalization().fit(build_trace_table(spans))   # doctest: +SKIP
    >>> est.result_.services[0].service                               # doctest: +SKIP
    """

    #: The trace tables' columns the fit reads (beside the call view): a table collected from
    #: partitions (:mod:`tracesleuth.scale`) need hold no other.
    table_columns = (S.SIGNATURE, S.START_NS)

    _constraints = {
        "alpha": [Interval(float, 0, 1, closed="right")],
        "variance": [Interval(float, 0, 1, closed="neither")],
        "spe_level": [Interval(float, 0, 1, closed="neither")],
        "test_level": [Interval(float, 0, 1, closed="neither")],
        "adjust_clusters": [Options((True, False))],
        "latency": [Options(tuple(LATENCIES))],
        "top_k": [Interval(int, 1, None)],
        "n_bins": [Interval(int, 2, None)],
        "instance_factor": [Interval(float, 1, None, closed="neither")],
        "robust": [Options((True, False))],
        "combined": [Options((True, False))],
        "random_state": [Seed()],
        "log": [Options((True, False))],
        "columns": [Options(("call", "operation"))],
        "alternative": [Options(("two-sided", "greater"))],
        "min_effect": [Interval(float, 0.5, 1, closed="left")],
        "alarm_test": [Options((True, False))],
        "changes": [Options((True, False))],
        "n_splits": [Interval(int, 1, None)],
    }

    def __init__(self, *, alpha: float = 0.75, variance: float = 0.95, spe_level: float = 0.05,
                 test_level: float = 0.05, adjust_clusters: bool = True, latency: str = "exclusive", top_k: int = 5,
                 n_bins: int = 10, instance_factor: float = 1.5, robust: bool = True, combined: bool = True,
                 random_state=None, log: bool = True, columns: str = "call", alternative: str = "two-sided",
                 min_effect: float = 0.64, alarm_test: bool = True, changes: bool = True, n_splits: int = 9):
        self.alpha = alpha
        self.variance = variance
        self.spe_level = spe_level
        self.test_level = test_level
        self.adjust_clusters = adjust_clusters
        self.latency = latency
        self.top_k = top_k
        self.n_bins = n_bins
        self.instance_factor = instance_factor
        self.robust = robust
        self.combined = combined
        self.random_state = random_state
        self.log = log
        self.columns = columns
        self.alternative = alternative
        self.min_effect = min_effect
        self.alarm_test = alarm_test
        self.changes = changes
        self.n_splits = n_splits

    def fit(self, tables) -> "RootCauseLocalization":
        """Localize the anomalous methods and instances of one period.

        Parameters
        ----------
        tables : TraceTable or sequence of TraceTable
            One endpoint's trace table, or one per endpoint (clusters never mix endpoints; a
            method's score counts its clusters in all of them). Built with spans
            (:func:`~tracesleuth.model.build_trace_table`), whose call view is read.

        Returns
        -------
        self

        Raises
        ------
        ParameterError
            A setting is not allowed; the input is not trace tables, or holds no spans.
        EmptyDataError
            No request.
        """
        return super().fit(tables)

    def _fit(self, tables) -> dict[str, Any]:
        tables = _tables(tables)
        latency = LATENCIES[self.latency]
        notes: list[Note] = []
        calls_parts, raw_parts, clusters, offset = [], [], [], 0
        for t in tables:
            raw = in_request_order(t.map_calls(_calls_read, columns=_CALL_COLUMNS)).with_columns(
                pl.col(S.REQUEST) + offset)
            part = with_occurrences(per_operation(raw) if self.columns == "operation" else raw)
            if t.frame.height:
                found = cluster_requests(part, t.frame[S.SIGNATURE], t.endpoint, len(clusters), offset)
                adjust_clusters(found, self.alpha, merge=self.adjust_clusters)
                clusters += found
            calls_parts.append(part)
            raw_parts.append(raw)
            offset += t.frame.height
        calls, raw_calls = pl.concat(calls_parts, rechunk=False), pl.concat(raw_parts, rechunk=False)
        starts = np.concatenate([t.frame[S.START_NS].to_numpy() for t in tables])
        not_merged = [c for c in clusters if not c.major and c.merged_into is None]
        if not_merged:
            notes.append(MinorClustersLeftOut(sum(c.size for c in not_merged), len(not_merged),
                                              bool(self.adjust_clusters)))

        summaries, tests, anomalous_requests = [], [], []
        n_analysed = 0
        matrices = latency_matrices(calls, clusters, latency)
        seeds = np.random.SeedSequence(_entropy(self.random_state)).spawn(len(matrices))
        # One task per cluster, each with its own seed: in this process unless a joblib backend is
        # configured (tracesleuth.scale runs them on Dask workers); the same result either way.
        split = Parallel()(delayed(self._cluster)(lm, np.random.default_rng(seed)) for lm, seed in zip(matrices, seeds))
        for lm, (summary, found) in zip(matrices, split):
            summaries.append(summary)
            if summary.n_components is not None:
                n_analysed += len(lm.requests)
            tests += found
            if summary.n_anomalous:
                anomalous_requests.append((lm, found))
        methods = _methods(tests)
        changes, n_series = (), 0
        if self.changes:
            timed = raw_calls.with_columns(
                (pl.Series(starts)[raw_calls[S.REQUEST]] + pl.col(S.START_OFFSET_NS)).alias(S.START_NS))
            changes, n_series = window_changes(timed, n_splits=self.n_splits, level=self.test_level,
                                               min_effect=self.min_effect)
            services = _services_by_slowdown(methods, changes)
        else:
            services = _services(methods)
        top = [m for m in methods if m.anomalous][: self.top_k]
        instances = self._instances(top, raw_calls, anomalous_requests, latency, notes)
        onset = _onset(top[0].operation_key, tests, starts, self.test_level) if top else None
        top_change = [c for c in changes if services and c.service == services[0].service]
        if top_change and top_change[0].rise >= services[0].score:
            onset = top_change[0].onset_ns
        skipped = [s for s in summaries if s.note]
        if skipped and not n_analysed:
            notes.append(NoClusterSplit(skipped[0].cluster, skipped[0].note.kind, str(skipped[0].note)))
        elif skipped:
            notes.append(ClustersSkipped(len(skipped), len(summaries)))
        small = [s for s in summaries if s.n_split_methods is None or s.n_split_methods < s.n_methods]
        if summaries and 2 * len(small) > len(summaries):
            notes.append(ClustersTooSmall(len(small), len(summaries), int(np.median([s.n_requests for s in small])),
                                          int(np.median([s.n_methods for s in small]))))
        result = LocalizationResult(
            endpoints=tuple(t.endpoint for t in tables), n_requests=offset, n_clusters=len(clusters),
            n_analysed=n_analysed, n_anomalous=sum(s.n_anomalous for s in summaries), methods=tuple(methods),
            top_k=self.top_k, instances=tuple(instances), services=tuple(services), clusters=tuple(summaries),
            onset_ns=onset, changes=changes, n_series=n_series, level=self.test_level, notes=tuple(notes))
        return {"result_": result, "n_features_in_": len(tables)}

    def _cluster(self, lm, rng: np.random.Generator) -> tuple[ClusterSummary, list[dict]]:
        """Split one major cluster and test its principal methods; the summary and the test rows."""
        c = lm.cluster
        keys = lm.columns[S.OPERATION_KEY].to_list()
        base = dict(cluster=c.id, endpoint=c.endpoint, sequence=shorten(" ".join(c.sequence)),
                    n_requests=len(lm.requests), n_methods=lm.values.shape[1],
                    n_merged_clusters=lm.n_merged_clusters, n_merged_requests=lm.n_merged_requests)
        split = spe_split(lm.values, variance=self.variance, beta=self.spe_level, robust=self.robust,
                          combined=self.combined, log=self.log, random_state=rng)
        if isinstance(split, ClusterNotTested):
            return ClusterSummary(**base, note=split), []
        anomalous = split.anomalous
        n_anom = int(anomalous.sum())
        principal = tuple(dict.fromkeys(keys[j] for j in split.principal))
        summary = dict(base, n_split_methods=split.n_methods, n_components=split.n_components, threshold=split.threshold, n_anomalous=n_anom,
                       principal=principal)
        if n_anom < MIN_ANOMALOUS or len(anomalous) - n_anom < MIN_ANOMALOUS:
            why = (TooFewAnomalous(n_anom, MIN_ANOMALOUS) if n_anom < MIN_ANOMALOUS
                   else AlmostAllAnomalous(n_anom, len(anomalous)))
            return ClusterSummary(**summary, note=None if n_anom == 0 else why), []
        if self.alarm_test:
            expected = 1 - (1 - self.spe_level) ** 2 if self.combined else self.spe_level
            p_share = binomtest(n_anom, len(anomalous), expected, alternative="greater").pvalue
            if p_share >= self.test_level:
                return ClusterSummary(**summary, note=FalseAlarmsOnly(n_anom, len(anomalous), float(expected),
                                                                      float(p_share))), []
        y_a, y_n = lm.values[anomalous][:, split.principal], lm.values[~anomalous][:, split.principal]
        u, p = mannwhitneyu(y_a, y_n, alternative=self.alternative, axis=0)
        effect = np.asarray(u) / (y_a.shape[0] * y_n.shape[0])
        p = np.where(np.isfinite(p), p, 1.0)
        large = (effect >= self.min_effect if self.alternative == "greater"
                 else np.abs(effect - 0.5) >= self.min_effect - 0.5)
        rows = []
        services = lm.columns[S.SERVICE].to_list()
        for i, j in enumerate(split.principal):
            rows.append({"cluster": c.id, "operation_key": keys[j], "service": services[j] or keys[j].split(":", 1)[0],
                         "p": float(p[i]), "effect": float(effect[i]),
                         "hit": bool(p[i] < self.test_level and large[i]),
                         "normal": y_n[:, i], "anomalous": y_a[:, i],
                         "requests": lm.requests[anomalous], "all_requests": lm.requests})
        flagged = tuple(dict.fromkeys(r["operation_key"] for r in rows if r["hit"]))
        return ClusterSummary(**summary, anomalous_methods=flagged), rows

    def _instances(self, top, calls, anomalous_requests, latency, notes) -> list[InstanceSuspect]:
        """Algorithm 2 for each top method, over the anomalous requests of every cluster."""
        if not top:
            return []
        requests = np.unique(np.concatenate([lm.requests[_anomalous_mask(lm, rows)] for lm, rows in anomalous_requests
                                             if rows])) if anomalous_requests else np.array([], dtype=np.int64)
        keys = [m.operation_key for m in top]
        mine = calls.filter(pl.col(S.REQUEST).is_in(requests) & pl.col(S.OPERATION_KEY).is_in(keys))
        out = []
        for key in keys:
            frame = mine.filter(pl.col(S.OPERATION_KEY) == key)
            known = frame.filter(pl.col(_INSTANCE_OF).is_not_null()).select(
                pl.col(_INSTANCE_OF).cast(pl.String).alias("instance"),
                pl.col(latency).cast(pl.Float64).alias("latency"))
            if known.height < frame.height:
                notes.append(InstancesUnknown(key, frame.height - known.height, frame.height))
            found, alike = dissimilarity_ratios(key, known, n_bins=self.n_bins, factor=self.instance_factor)
            out += found
            if alike is not None and key == keys[0]:
                notes.append(alike)
        return out


#: The call-view columns localization reads (a table built by partitions reads only these).
_CALL_COLUMNS = [S.REQUEST, S.SPAN_ID, S.PARENT_SPAN_ID, S.OPERATION_KEY, S.SERVICE, S.INSTANCE, S.KIND, S.CALLER_KEY,
                 S.SERVER_SERVICE, S.DURATION_NS, S.EXCLUSIVE_NS, S.START_OFFSET_NS, S.GAP_NS]
#: The instance a call ran on, for Algorithm 2 (:func:`_calls_read`).
_INSTANCE_OF = "instance_of"
_NAMES = [S.OPERATION_KEY, S.SERVICE, S.INSTANCE, S.KIND, S.CALLER_KEY, S.SERVER_SERVICE, _INSTANCE_OF]


def _calls_read(calls: pl.DataFrame) -> pl.DataFrame:
    """What localization keeps of a piece of the call view (whole requests; run where the piece is
    built, :meth:`~tracesleuth.model.TraceTable.map_calls`): :data:`_CALL_COLUMNS` but the span
    ids, with ``instance_of``, the instance the call ran on for Algorithm 2 (a client span's is the
    instance of the server span it calls, the first in the view's order; the span's own otherwise),
    and the names Categorical (4 bytes a call each: 11.6 million calls of 10^6 requests hold about
    1.4 GB less than as strings)."""
    servers = (calls.filter((pl.col(S.KIND) == "server") & pl.col(S.PARENT_SPAN_ID).is_not_null())
               .group_by(S.REQUEST, pl.col(S.PARENT_SPAN_ID).alias(S.SPAN_ID), maintain_order=True)
               .agg(pl.col(S.INSTANCE).first().alias("server_instance")))
    client = (pl.col(S.KIND) == "client") & pl.col(S.SERVER_SERVICE).is_not_null()
    return (calls.join(servers, on=[S.REQUEST, S.SPAN_ID], how="left", maintain_order="left")
            .with_columns(pl.when(client).then(pl.col("server_instance")).otherwise(pl.col(S.INSTANCE))
                          .alias(_INSTANCE_OF))
            .drop(S.SPAN_ID, S.PARENT_SPAN_ID, "server_instance")
            .with_columns(pl.col(_NAMES).cast(pl.Categorical)))


def _entropy(random_state):
    """A SeedSequence entropy from a ``random_state`` (a Generator gives a draw of it)."""
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63 - 1))
    return random_state


def _anomalous_mask(lm, rows) -> np.ndarray:
    return np.isin(lm.requests, rows[0]["requests"])


def _methods(tests: list[dict]) -> list[MethodSuspect]:
    """Per method: clusters where it is anomalous, where tested, effect, p and medians."""
    by_key: dict[str, list[dict]] = {}
    for r in tests:
        by_key.setdefault(r["operation_key"], []).append(r)
    out = []
    for key, rows in by_key.items():
        per_cluster: dict[int, dict] = {}
        for r in rows:  # a method with several principal columns in a cluster: an anomalous one, the most significant
            best = per_cluster.get(r["cluster"])
            if best is None or (r["hit"], -r["p"]) > (best["hit"], -best["p"]):
                per_cluster[r["cluster"]] = r
        chosen = list(per_cluster.values())
        hits = [r for r in chosen if r["hit"]]
        basis = hits or chosen
        out.append(MethodSuspect(
            operation_key=key, service=rows[0]["service"], score=len(hits), tested=len(chosen),
            effect=float(np.mean([r["effect"] for r in basis])), p_value=min(r["p"] for r in chosen),
            normal_median_ns=float(np.median(np.concatenate([r["normal"] for r in basis]))),
            anomalous_median_ns=float(np.median(np.concatenate([r["anomalous"] for r in basis])))))
    out.sort(key=lambda m: (-m.score, -m.effect, m.operation_key))
    return out


def _services(methods: list[MethodSuspect]) -> list[ServiceSuspect]:
    """Services by their most suspicious anomalous method (methods come most suspicious first)."""
    by_service: dict[str, list[MethodSuspect]] = {}
    for m in methods:
        if m.anomalous:
            by_service.setdefault(m.service, []).append(m)
    return [ServiceSuspect(service=s, score=float(ms[0].score), evidence=tuple(m.describe() for m in ms))
            for s, ms in by_service.items()]  # dicts keep the methods' order: the best method's rank


def _services_by_slowdown(methods: list[MethodSuspect], changes: Sequence[SeriesChange]) -> list[ServiceSuspect]:
    """Services by the largest slowdown attributed to them, x-fold (module docstring, "Services"):
    a change within the window (its rise) or an anomalous method (anomalous / normal median)."""
    evidence: dict[str, list[tuple[float, str]]] = {}
    for c in changes:
        evidence.setdefault(c.service, []).append((c.rise, c.describe()))
    for m in methods:
        if m.anomalous:
            evidence.setdefault(m.service, []).append((m.anomalous_median_ns / max(m.normal_median_ns, 1.0),
                                                       m.describe()))
    ranked = []
    for service, items in evidence.items():
        items.sort(key=lambda x: -x[0])  # stable: changes before methods of the same size
        ranked.append(ServiceSuspect(service=service, score=float(items[0][0]), evidence=tuple(t for _, t in items)))
    ranked.sort(key=lambda s: (-s.score, s.service))
    return ranked


def _onset(key: str, tests: list[dict], starts: np.ndarray, level: float) -> int | None:
    """The change point of the anomalous share over the requests of ``key``'s anomalous clusters."""
    rows = [r for r in tests if r["operation_key"] == key and r["hit"]]
    if not rows:
        return None
    every = np.unique(np.concatenate([r["all_requests"] for r in rows]))
    anomalous = np.isin(every, np.concatenate([r["requests"] for r in rows]))
    order = np.argsort(starts[every], kind="stable")
    x = anomalous[order].astype(np.float64)
    n = len(x)
    if n < 4:
        return None
    k = np.arange(1, n)  # split before index k
    before = np.cumsum(x)[:-1]
    after = x.sum() - before

    def loglik(hits, size):
        p = np.clip(hits / size, 1e-12, 1 - 1e-12)
        return hits * np.log(p) + (size - hits) * np.log(1 - p)

    ll = loglik(before, k) + loglik(after, n - k)
    best = int(np.argmax(ll))
    p0, p1 = before[best] / k[best], after[best] / (n - k[best])
    split = int(k[best])
    if p1 < 2 * p0 or proportion_p_values(after[best], n - split, before[best], split)[()] >= level:
        return None
    return int(starts[every][order][split])
