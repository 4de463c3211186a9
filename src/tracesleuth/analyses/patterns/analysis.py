"""Latency degradation patterns: which conditions on operations explain slow requests.

:class:`LatencyDegradationPatterns` implements Cortellessa & Traini (ICPE 2020): given a latency
interval ``I`` of "degraded" requests and candidate split points inside it, it partitions ``I``
into sub-intervals by the dynamic program of eq. (8), each sub-interval with the pattern (a
conjunction of conditions on exclusive times, instances and root attributes) of the highest
F-score ``Q(P, I)``, found by the genetic algorithm of Section 3.1 (``solver="ga"``) or the
branch and bound of Krushevskaja & Sandler (``solver="bnb"``).

``fit`` is a thin sequence of the stages of :mod:`.stages` (interval rule, split points, search,
dynamic program) and the refinements of :mod:`.refinements` (none with :data:`PAPER_SETTINGS`);
the results are the records of :mod:`.results` and :mod:`.notes`. The clustering baselines of the
paper (``"kmeans"``, ``"hierarchical"``, ``"meanshift"``) are their own estimator,
:class:`~tracesleuth.analyses.patterns.baselines.DegradedClusters`: they give no pattern.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np
import polars as pl

from ...errors import EmptyDataError, ParameterError
from .._contract import NONE, Analysis, InstanceOf, Interval, Options, Seed, Strings
from ._bitsets import PatternEvaluator
from ._data import LATENCY_COLUMN, Inputs, encode, read_table
from ._model import ATTR_PREFIX, CONTINUOUS_PREFIX, INSTANCE_PREFIX, LatencyInterval
from .candidates import asynchronous_operations, identifier_columns, operation_of, pass_through_columns
from .ga import GASettings
from .notes import (AsynchronousLeftOut, AttributeLeftOut, BudgetExhausted, NoDegradation, NoPatternBetterThanChance,
                    Note, PredictColumns, UncertainLeftOut)
from .refinements import CompoundLabels, MergeNeighbours, Refinement, SplitCauses, UncertainBand
from .results import (MAX_PATTERNS_SHOWN, MIN_F_SHOWN, CompoundLabel, ConditionEffect, DegradationPatternsResult,
                      SubIntervalPattern, assign_labels, compound_labels)
from .split_points import IntervalChoice
from .stages import (BranchAndBoundSearch, DensitySplitPoints, Encoded, GeneticSearch, GivenInterval,
                     GivenSplitPoints, PaperInterval, RobustInterval, describe_runs, no_degradation, partition_runs)

__all__ = ["CompoundLabel", "ConditionEffect", "DegradationPatternsResult", "LatencyDegradationPatterns",
           "PAPER_SETTINGS", "PatternsWarning", "SubIntervalPattern", "choose_interval"]

SOLVERS = ("ga", "bnb")
PARTITION_OBJECTIVES = ("sum", "weighted")
INTERVAL_RULES = ("robust", "paper")
#: The paper's method exactly (Cortellessa & Traini 2020): its automatic interval rule, every
#: pattern admissible, every sub-interval of the split points, only redundant conditions dropped,
#: every operation offered, and no refinement (:mod:`.refinements`): no uncertain band, no merged
#: neighbours (``split_penalty=0``), no split causes, no compound labels. The defaults add what is
#: documented as beyond the paper.
PAPER_SETTINGS = {"interval_rule": "paper", "split_bandwidth_quantile": None, "max_split_points": 6,
                  "split_penalty": 0.0, "min_support": 1, "min_lift": None,
                  "prune_tolerance": 0.0, "exclude_async": False, "pass_through_share": None, "patience": None,
                  "split_causes": False, "compound_labels": False, "uncertain_z": None,
                  "min_f": 0.0, "max_patterns_shown": None}
#: Slack on ``crossover_probability + mutation_probability <= 1`` for floats such as 0.7 + 0.3.
_PROBABILITY_SLACK = 1e-12


# ============================================================================================
# Parameter validation
# ============================================================================================


def _fail(name: str, expected: str, value: Any) -> None:
    raise ParameterError(
        f"The {name!r} parameter of LatencyDegradationPatterns must be {expected}. Got {value!r} instead."
    )


# ============================================================================================
# The estimator
# ============================================================================================


class LatencyDegradationPatterns(Analysis):
    """Find the latency degradation patterns of a set of requests (Cortellessa & Traini, 2020).

    Given a latency interval ``I`` of degraded requests (automatic or given) and candidate split
    points inside it (density minima by mean shift, or given), the analysis partitions ``I`` into
    sub-intervals and gives each the pattern of highest F-score ``Q(P, I)`` (eq. 5), maximising
    the sum of scores (eqs. 7-8). A pattern is a conjunction of conditions on exclusive times
    (``exclusive_ns[K]`` in a range), instances and root attributes (Section 5); a request with a
    missing value satisfies no condition on it.

    Parameters
    ----------
    solver : {"ga", "bnb"}, default="ga"
        ``"ga"``: the genetic algorithm (Section 3.1, :class:`~.stages.GeneticSearch`). ``"bnb"``:
        branch and bound over single-bin conditions (Krushevskaja & Sandler 2013,
        :class:`~.stages.BranchAndBoundSearch`). The clustering baselines (Section 4.5) are
        :class:`~tracesleuth.analyses.patterns.baselines.DegradedClusters`.
    interval : str, (int, int), LatencyInterval or None, default=None
        The degraded interval ``I``, e.g. ``"350ms:700ms"`` (half-open, units ns/us/ms/s; an open
        side means the data's min or max) or ``(low_ns, high_ns)``. None: chosen by
        ``interval_rule`` and explained in ``result_.interval_reason``.
    interval_rule : {"robust", "paper"}, default="robust"
        The automatic interval. ``"paper"``: from the first split point above the most populous
        latency mode (:func:`~tracesleuth.analyses.patterns.split_points.degraded_interval`).
        ``"robust"`` (beyond the paper): on a log scale, from the fastest large mode's tail cut or
        the density gap above it, whichever is lower; a slow tail without a mode is explained too,
        and a tail no heavier than chance is not
        (:func:`~tracesleuth.analyses.patterns.split_points.automatic_interval`).
    tail_z : float, default=2.0
        ``"robust"`` rule: the tail cut in standard deviations of the reference mode.
    uncertain_z : float or None, default=0.5
        ``"robust"`` rule: the requests below the automatic interval but more than this many
        standard deviations of the reference mode above its centre are left out of the pattern
        scores, neither true nor false positives (:class:`~.refinements.UncertainBand`, which
        gives the measured case and why 0.5, not the former 1): where a degraded mode overlaps
        the normal tail, its faster requests lie below the interval's start, and counting them
        as false positives makes the search add conditions that describe latency, not cause (a
        pattern naming an optional call that makes the request slower). They are still labelled
        by the patterns they satisfy. Beyond the paper; None: every request below the interval
        is normal.
    split_points : sequence of int or str, or None, default=None
        Inner split points of ``I`` (ns, or strings such as ``"420ms"``). None: the density minima
        of the latencies in ``I`` (mean shift).
    attributes : sequence of str or None, default=None
        Restrict the conditions to these columns or operation/attribute keys (``"svc:op"`` selects
        ``exclusive_ns[svc:op]`` and ``instance[svc:op]``; ``"version"`` selects
        ``attr[version]``). None: every exclusive-time, instance and attribute column.
    categorical : bool, default=True
        Use the categorical columns (instances and root attributes, Section 5).
    max_split_points : int, default=4
        At most this many inner split points (least populated sub-intervals are merged): the
        search runs once per pair of split points, ``(k + 1)(k + 2) / 2`` times for ``k`` inner
        points (15 for 4). The paper sets no limit; :data:`PAPER_SETTINGS` keeps 6.
    min_support : int, default=15
        Least requests of a sub-interval: split points leaving fewer between them are merged away,
        and an interval holding fewer is no degradation to explain (beyond the paper; 1: the
        paper, where a sub-interval of one request scores F = 1).
    min_lift : float or None, default=2.0
        A pattern must lift its sub-interval's share of the requests: precision at least
        ``min(min_lift * b, 1 - (1 - b) / min_lift)`` for a sub-interval holding a share ``b``
        (:func:`~tracesleuth.analyses.patterns._bitsets.min_precision`), else it scores 0. Beyond
        the paper, whose F-score rewards describing the normal requests of a band; None: off.
    prune_tolerance : float, default=0.01
        Conditions are dropped from a found pattern while its F-score stays within this much of
        the pattern's (the shortest pattern within the tolerance,
        :func:`~tracesleuth.analyses.patterns._bitsets.prune`). 0: only conditions that change
        nothing go (the paper's patterns as found).
    exclude_async : bool, default=True
        Leave out the operations the request never waits for (every call below a producer/consumer
        or ``FOLLOWS_FROM`` link; needs a TraceTable with spans). Beyond the paper.
    pass_through_share : float or None, default=0.95
        Leave out the operations whose exclusive time is at least this share of the request latency
        (median, over the requests calling them; at least half do): a gateway span with no traced
        child restates the latency. Beyond the paper; None: off.
    partition_objective : {"sum", "weighted"}, default="sum"
        What the dynamic program maximises. ``"sum"``: the sum of the sub-intervals' F-scores,
        eq. (7) of the paper. ``"weighted"``: each F-score weighted by its sub-interval's share of
        the requests in ``I`` (the mean F-score of a degraded request). The plain sum rewards
        splitting: a pattern explaining a whole mode perfectly (F = 1) scores about 1.33 once the
        mode is cut in halves (F = 2/3 each), so latency modes that have no distinct cause (an
        optional call, a cache miss) become separate sub-intervals with weak patterns; the
        weighted objective splits only where different patterns explain the parts better.
    split_penalty : float, default=0.5
        Subtracted from each sub-interval's score in the dynamic program, so that a partition
        into ``p`` sub-intervals pays ``p * split_penalty``: a split is kept only when the two
        parts' scores exceed the whole's by more than the penalty. The paper's sum of F-scores
        (eq. 7, ``split_penalty=0``) rewards splitting itself: one cause explained perfectly
        (F = 1) scores 1.5 once its band is cut in two halves explained at F = 0.75 by the cause
        and an unrelated bimodality. With 0.5, a sub-interval adds to the partition only when its
        pattern explains more of it than it misses (F > 0.5), and the halves need F > 0.75 each.
        Neighbouring sub-intervals are then merged when one pattern explains their union at least
        as well as the parts' patterns explain their parts (F-score against their mean weighted by
        the parts' requests): the hull of the parts' ranges when they
        condition the same attributes (a delay of 50 ms in one, 60 ms in the next), or the best
        pattern of the union when what tells the parts' requests apart adds little time (a
        chance difference of another operation between the halves of one delay's band). Beyond
        the paper; 0: the paper's objective, no merging.
    split_causes : bool, default=True
        A sub-interval's pattern is split in two when its requests fall into two groups told
        apart by an operation it does not name (``op >= t`` vs ``op < t``, each group at least
        ``min_support`` requests) whose median exclusive time differs between the groups by at
        least three quarters of the time the pattern's own cause conditions add: the rule by
        which neighbouring sub-intervals stay apart, applied inside one. One pattern per
        sub-interval (the paper) otherwise covers two causes whose latencies overlap, e.g. a
        delay of two operations and a normal slow mode of one of them (cache misses), or two
        degradations sharing an operation. Repeated on each part; a split on an operation the
        pattern does not name is preferred to one inside the range of its own cause (a delay and a
        slow normal mode of that operation, told apart at a density minimum of its times). Beyond
        the paper.
    compound_labels : bool, default=True
        A request slow for two independent causes lands in a slower sub-interval than either
        cause alone, where the pattern of one of them (often a normal slow mode, e.g. cache
        misses) labels it. It is labelled with a faster sub-interval's pattern instead when it
        carries that pattern's cause as well: it meets that pattern's conditions but those on the
        slower pattern's cause operations, its cause operations take as much time as in that
        pattern's own requests, and the slower pattern's cause occurs without it about as often
        as with it (independent). A request fitting two faster patterns keeps
        its label. Each move is a note. Beyond the paper (a request belongs to the sub-interval
        holding its latency).
    min_f : float, default=0.5
        A pattern whose F-score is below this is not presented as an explanation (the command
        line, the report, ``result_.describe()`` and ``result_.shown_by_range()`` leave it out,
        counted): a sub-interval none of whose patterns reaches it gets an
        :class:`~.notes.Unexplained` note ("no pattern explains it; best F ...; its requests mix
        causes") suggesting a narrower period or ``compare``. Why 0.5: below it a pattern misses
        more of its sub-interval than it explains (the harmonic mean of precision and recall is
        below 0.5 only when one of them is below 1/3); on the TrainTicket day 2023-01-29
        (``trips/left``) ten patterns of F 0.06-0.25 over one sub-interval were offered as
        explanations, among them conditions such as ``exclusive < 154.5 ms``. It matches
        ``split_penalty=0.5``. The labels are unchanged (``labels_``, :meth:`predict`): a
        request still belongs to the pattern it satisfies; the floor is about what is claimed,
        not how requests are grouped. Beyond the paper; 0 (:data:`PAPER_SETTINGS`): every pattern.
    max_patterns_shown : int or None, default=3
        At most this many patterns of one sub-interval (best F first) are presented, the rest
        counted (``result_.to_dict()["ranges"]``). Beyond the paper; None: all.
    bandwidth_quantile : float, default=0.3
        Quantile of the mean-shift bandwidth estimate (as ``sklearn.cluster.estimate_bandwidth``).
    split_bandwidth_quantile : float or None, default=0.1
        The same for the split points of ``I`` (density minima of the latencies inside it). A
        finer bandwidth than the attributes' offers the dynamic program the minima between
        degraded bands that overlap (two degradations a few tens of ms apart); the least
        populated are merged (``max_split_points``, ``min_support``) and the dynamic program
        keeps only the splits that better patterns justify. Beyond the paper; None: as
        ``bandwidth_quantile`` (the paper's one mean-shift setting).
    min_bin_fraction : float, default=0.01
        Mean-shift seed bins need this fraction of the values.
    max_categories : int, default=100
        Categorical columns with more distinct values are left out (and reported).
    population_size, offspring_size, generations : int, default=100, 100, 400
        GA ``mu``, ``lambda`` and generations.
    crossover_probability, mutation_probability : float, default=0.8, 0.2
    tournament_size : int, default=20
    patience : int or None, default=100
        GA: stop when no sub-interval's best pattern improved for this many generations
        (:class:`~tracesleuth.analyses.patterns.ga.GASettings`). Beyond the paper; None: every
        generation.
    max_nodes : int or None, default=2000
        Branch and bound: nodes expanded per sub-interval at most.
    time_budget_s : float or None, default=None
        Branch and bound: seconds per sub-interval at most.
    random_state : int, numpy Generator or None, default=None
        Seeds the GA; equal seeds give equal patterns.

    Attributes
    ----------
    result_ : DegradationPatternsResult
        The partition, its patterns and scores.
    labels_ : ndarray of int64, shape (n_requests,)
        Per table row: the index of the sub-interval whose pattern the request satisfies (the one
        holding its latency when it satisfies several, else the first; a faster one whose cause
        it carries too with ``compound_labels``); -1 for none. :meth:`predict` gives the same
        labels for any table.
    interval_ : LatencyInterval or None
    split_points_ : ndarray of int64, shape (k + 1,)
    encodings_ : tuple of AttributeEncoding
        The attributes as searched: thresholds (continuous) or categories.
    refinements_ : tuple of Refinement
        The rules beyond the paper these settings applied (:meth:`refinements`; none with
        :data:`PAPER_SETTINGS`).

    Raises
    ------
    ParameterError
        A setting out of range, an unknown attribute, a malformed interval or split point,
        a ``predict`` table without ``latency_ns``.
    EmptyDataError
        An empty table, no request with a latency, or no usable attribute (a table without
        exclusive-time, instance or attribute columns). No degradation to explain (one latency mode, a
        given interval holding no request or too few) is not an error: ``result_.found`` is
        False and ``result_.reason`` says why, with the numbers and what to try.

    Notes
    -----
    :data:`PAPER_SETTINGS` gives the paper's method exactly; the defaults add the robust
    interval, least support and lift, pruning and the left-out columns of
    :mod:`~tracesleuth.analyses.patterns.candidates`, each documented as beyond the paper.

    See Also
    --------
    tracesleuth.analyses.patterns.split_points.degraded_interval : the automatic interval rule.

    References
    ----------
    V. Cortellessa and L. Traini. "Detecting Latency Degradation Patterns in Service-based
    Systems". ICPE 2020. https://doi.org/10.1145/3358960.3379126

    D. Krushevskaja and M. Sandler. "Understanding latency variations of black box services".
    WWW 2013. https://doi.org/10.1145/2488388.2488450

    Examples
    --------
    >>> from tracesleuth.analyses.patterns import LatencyDegradationPatterns
    >>> from tracesleuth.analyses.patterns.synthetic import make_degraded_session
    >>> session = make_degraded_session(1000, random_state=1)
    >>> model = LatencyDegradationPatterns(random_state=0).fit(session.frame)
    >>> model.result_.found, len(model.result_.sub_intervals)
    (True, 2)
    >>> all(s.f_score > 0.95 for s in model.result_.sub_intervals)
    True
    """

    def __init__(
        self,
        *,
        solver: str = "ga",
        interval: Any = None,
        interval_rule: str = "robust",
        tail_z: float = 2.0,
        uncertain_z: float | None = 0.5,
        split_points: Sequence[int | str] | None = None,
        attributes: Sequence[str] | None = None,
        categorical: bool = True,
        max_split_points: int = 4,
        min_support: int = 15,
        min_lift: float | None = 2.0,
        prune_tolerance: float = 0.01,
        exclude_async: bool = True,
        pass_through_share: float | None = 0.95,
        partition_objective: str = "sum",
        split_penalty: float = 0.5,
        split_causes: bool = True,
        compound_labels: bool = True,
        min_f: float = MIN_F_SHOWN,
        max_patterns_shown: int | None = MAX_PATTERNS_SHOWN,
        bandwidth_quantile: float = 0.3,
        split_bandwidth_quantile: float | None = 0.1,
        min_bin_fraction: float = 0.01,
        max_categories: int = 100,
        population_size: int = 100,
        offspring_size: int = 100,
        generations: int = 400,
        crossover_probability: float = 0.8,
        mutation_probability: float = 0.2,
        tournament_size: int = 20,
        patience: int | None = 100,
        max_nodes: int | None = 2000,
        time_budget_s: float | None = None,
        random_state: int | np.random.Generator | None = None,
    ):
        self.solver = solver
        self.interval = interval
        self.interval_rule = interval_rule
        self.tail_z = tail_z
        self.uncertain_z = uncertain_z
        self.split_points = split_points
        self.attributes = attributes
        self.categorical = categorical
        self.max_split_points = max_split_points
        self.min_support = min_support
        self.min_lift = min_lift
        self.prune_tolerance = prune_tolerance
        self.exclude_async = exclude_async
        self.pass_through_share = pass_through_share
        self.partition_objective = partition_objective
        self.split_penalty = split_penalty
        self.split_causes = split_causes
        self.compound_labels = compound_labels
        self.min_f = min_f
        self.max_patterns_shown = max_patterns_shown
        self.bandwidth_quantile = bandwidth_quantile
        self.split_bandwidth_quantile = split_bandwidth_quantile
        self.min_bin_fraction = min_bin_fraction
        self.max_categories = max_categories
        self.population_size = population_size
        self.offspring_size = offspring_size
        self.generations = generations
        self.crossover_probability = crossover_probability
        self.mutation_probability = mutation_probability
        self.tournament_size = tournament_size
        self.patience = patience
        self.max_nodes = max_nodes
        self.time_budget_s = time_budget_s
        self.random_state = random_state

    # ----------------------------------------------------------------------------------------

    _constraints = {
        "solver": [Options(SOLVERS)],
        "interval": [InstanceOf((None, str, tuple, list, LatencyInterval),
                                "None, 'A:B' (e.g. '350ms:700ms'), (low_ns, high_ns) or a LatencyInterval")],
        "split_points": [NONE, InstanceOf((list, tuple, np.ndarray), "a sequence of ints (ns) or duration strings")],
        "attributes": [NONE, Strings()],
        "categorical": [Options((True, False))],
        "interval_rule": [Options(INTERVAL_RULES)],
        "tail_z": [Interval(float, 0.0, None, closed="neither")],
        "uncertain_z": [NONE, Interval(float, 0.0, None)],
        "max_split_points": [Interval(int, 0, None)],
        "min_support": [Interval(int, 1, None)],
        "min_lift": [NONE, Interval(float, 1.0, None)],
        "prune_tolerance": [Interval(float, 0.0, 1.0)],
        "exclude_async": [Options((True, False))],
        "pass_through_share": [NONE, Interval(float, 0.0, 1.0, closed="right")],
        "partition_objective": [Options(PARTITION_OBJECTIVES)],
        "split_penalty": [Interval(float, 0.0, 1.0)],
        "split_causes": [Options((True, False))],
        "compound_labels": [Options((True, False))],
        "min_f": [Interval(float, 0.0, 1.0)],
        "max_patterns_shown": [NONE, Interval(int, 1, None)],
        "bandwidth_quantile": [Interval(float, 0.0, 1.0, closed="right")],
        "split_bandwidth_quantile": [NONE, Interval(float, 0.0, 1.0, closed="right")],
        "min_bin_fraction": [Interval(float, 0.0, 1.0)],
        "max_categories": [Interval(int, 1, None)],
        "population_size": [Interval(int, 2, None)],
        "offspring_size": [Interval(int, 1, None)],
        "generations": [Interval(int, 0, None)],
        "crossover_probability": [Interval(float, 0.0, 1.0)],
        "mutation_probability": [Interval(float, 0.0, 1.0)],
        "tournament_size": [Interval(int, 1, None)],
        "patience": [NONE, Interval(int, 1, None)],
        "max_nodes": [NONE, Interval(int, 1, None)],
        "time_budget_s": [NONE, Interval(float, 0.0, None, closed="right")],
        "random_state": [Seed()],
    }

    # ----------------------------------------------------------------------------------------

    def fit(self, table: Any) -> "LatencyDegradationPatterns":
        """Find the patterns of ``table``; every fitted attribute is set together at the end.

        Parameters
        ----------
        table : TraceTable or polars.DataFrame
            One row per request with ``latency_ns`` (int64 ns) and ``exclusive_ns[K]`` /
            ``instance[K]`` / ``attr[KEY]`` columns (a plain DataFrame's columns are recognised by
            these prefixes; a TraceTable names them in ``continuous_columns`` and
            ``categorical_columns``).

        Returns
        -------
        self
        """
        return super().fit(table)

    def _fit(self, table: Any) -> dict[str, Any]:
        """Interval rule, split points, search, dynamic program, refinements (:mod:`.stages`)."""
        self._check_probabilities()
        data = read_table(table, attributes=self.attributes, categorical=self.categorical)
        refinements = self.refinements()
        out: dict[str, Any] = {"labels_": np.full(data.frame.height, -1, dtype=np.int64), "interval_": None,
                               "split_points_": np.empty(0, dtype=np.int64), "encodings_": (),
                               "refinements_": refinements}
        chosen = self._interval_rule().choose(data.latency)
        if isinstance(chosen, NoDegradation):
            return self._nothing(out, data, chosen, None)
        data.notes.extend(chosen.notes)
        out["interval_"] = chosen.interval
        why = no_degradation(chosen.interval, data.latency, int(self.min_support))
        if why is not None:
            return self._nothing(out, data, why, chosen.interval)
        interval = chosen.interval
        bounds, notes = self._split_point_rule().bounds(data.latency, interval)
        data.notes.extend(notes)
        out["split_points_"] = bounds
        band = next((b for r in refinements if (b := r.band(chosen, data.latency)) is not None), None)
        encoded = self._encode(table, data, bounds, interval, band)
        out["encodings_"] = encoded.encodings
        partition, runs = partition_runs(encoded, self._searcher(), min_lift=self.min_lift,
                                         weighted=self.partition_objective == "weighted",
                                         split_penalty=float(self.split_penalty))
        for refinement in refinements:
            runs, notes = refinement.refine(runs, encoded)
            data.notes.extend(notes)
        subs, satisfied = describe_runs(runs, encoded, exhaustive=self.solver == "bnb", min_lift=self.min_lift)
        data.notes.extend(self._search_notes(subs))
        labels, compound = assign_labels(satisfied, data.latency, [(s.low_ns, s.high_ns) for s in subs]), ()
        for refinement in refinements:
            labels, rules, notes = refinement.relabel(labels, runs, subs, encoded)
            compound += rules
            data.notes.extend(notes)
        out["labels_"][data.rows] = labels
        out["result_"] = DegradationPatternsResult(
            found=True, solver=self.solver, n_requests=int(data.latency.size), interval=interval,
            interval_source="given" if self.interval is not None else "automatic", interval_reason=chosen.reason,
            split_points=tuple(int(b) for b in bounds), sub_intervals=tuple(subs), score=float(partition.score),
            n_positives=int(interval.contains(data.latency).sum()), attributes=tuple(e.name for e in encoded.encodings),
            skipped_attributes=tuple(encoded.skipped), notes=tuple(data.notes), uncertain_ns=band,
            compound=tuple(compound), min_f=float(self.min_f), max_patterns_shown=self.max_patterns_shown).presented()
        return out

    # ---- the stages these settings choose --------------------------------------------------

    def refinements(self) -> tuple[Refinement, ...]:
        """The refinements these settings apply, in order (none with :data:`PAPER_SETTINGS`):
        :class:`~.refinements.UncertainBand` (``uncertain_z``), :class:`~.refinements.MergeNeighbours`
        (``split_penalty > 0``), :class:`~.refinements.SplitCauses` (``split_causes``),
        :class:`~.refinements.CompoundLabels` (``compound_labels``)."""
        least = int(self.min_support)
        chosen: list[Refinement] = []
        if self.uncertain_z is not None:
            chosen.append(UncertainBand(float(self.uncertain_z)))
        if self.split_penalty > 0:
            chosen.append(MergeNeighbours())
        if self.split_causes:
            chosen.append(SplitCauses(min_support=least))
        if self.compound_labels:
            chosen.append(CompoundLabels(min_support=least))
        return tuple(chosen)

    def _mean_shift(self) -> dict[str, float]:
        return {"quantile": float(self.bandwidth_quantile), "min_bin_fraction": float(self.min_bin_fraction)}

    def _interval_rule(self) -> GivenInterval | PaperInterval | RobustInterval:
        if self.interval is not None:
            return GivenInterval(self.interval)
        if self.interval_rule == "paper":
            return PaperInterval(**self._mean_shift())
        return RobustInterval(tail_z=float(self.tail_z), **self._mean_shift())

    def _split_point_rule(self) -> DensitySplitPoints | GivenSplitPoints:
        if self.split_points is not None:
            return GivenSplitPoints(self.split_points, int(self.min_support))
        quantile = self.bandwidth_quantile if self.split_bandwidth_quantile is None else self.split_bandwidth_quantile
        return DensitySplitPoints(int(self.max_split_points), int(self.min_support), float(quantile),
                                  float(self.min_bin_fraction))

    def _searcher(self) -> GeneticSearch | BranchAndBoundSearch:
        if self.solver == "bnb":
            return BranchAndBoundSearch(self.max_nodes, self.time_budget_s)
        return GeneticSearch(GASettings(
            population_size=int(self.population_size), offspring_size=int(self.offspring_size),
            generations=int(self.generations), crossover_probability=float(self.crossover_probability),
            mutation_probability=float(self.mutation_probability), tournament_size=int(self.tournament_size),
            patience=None if self.patience is None else int(self.patience)), self.random_state)

    # ---- fit's helpers ---------------------------------------------------------------------

    def _check_probabilities(self) -> None:
        if self.crossover_probability + self.mutation_probability > 1.0 + _PROBABILITY_SLACK:
            _fail("crossover_probability",
                  f"at most 1 - mutation_probability = {1.0 - self.mutation_probability:g} (their sum must be <= 1)",
                  self.crossover_probability)

    def _encode(self, table: Any, data: Inputs, bounds: np.ndarray, interval: LatencyInterval,
                band: int | None) -> Encoded:
        """The requests binned, their latency classes, and the evaluator over the scored ones."""
        encodings, codes, skipped = encode(data, self._mean_shift(), int(self.max_categories),
                                           self._excluded_columns(table, data))
        if not encodings:
            detail = "; ".join(f"{a}: {r}" for a, r in skipped) or "the table has no exclusive_ns/instance/attr column"
            raise EmptyDataError(f"No attribute to build conditions from ({detail}).")
        latency = data.latency
        latency_class = np.searchsorted(bounds, latency, side="right")
        scored = np.ones(latency.size, dtype=bool) if band is None else ~((latency >= band) & (latency < interval.low_ns))
        if band is not None:
            data.notes.append(UncertainLeftOut(int((~scored).sum()), int(band), int(interval.low_ns),
                                               float(self.uncertain_z)))
        evaluator = PatternEvaluator(codes if band is None else codes[scored], np.array([e.n_bins for e in encodings]), latency_class[scored],
                                     bounds.size + 1)
        return Encoded(data, tuple(encodings), codes, bounds, latency_class, evaluator,
                       prune_tolerance=float(self.prune_tolerance), skipped=tuple(skipped))

    def _excluded_columns(self, table: Any, data: Inputs) -> dict[str, AttributeLeftOut]:
        """Columns left out of the conditions (identifiers, pass-through, asynchronous) and why."""
        excluded = dict(identifier_columns(data.frame, data.categorical, data.rows))
        if self.pass_through_share is not None:
            excluded.update(pass_through_columns(data.frame, data.continuous, data.rows, data.latency,
                                                 float(self.pass_through_share)))
        if self.exclude_async:
            asynchronous = asynchronous_operations(table)
            for name in data.continuous + data.categorical:
                key = operation_of(name)
                if key in asynchronous:
                    excluded[name] = AsynchronousLeftOut(asynchronous[key])
        return excluded

    def _search_notes(self, subs: Sequence[SubIntervalPattern]) -> list[Note]:
        """Branch and bound's unfinished searches; no pattern at all."""
        notes: list[Note] = []
        unfinished = tuple(s.index for s in subs if s.exhaustive is False)
        if self.solver == "bnb" and unfinished:
            notes.append(BudgetExhausted(unfinished, self.max_nodes, self.time_budget_s))
        if all(s.pattern is None for s in subs):
            notes.append(NoPatternBetterThanChance(self.min_lift))
        return notes

    def _nothing(self, out: dict, data: Inputs, reason: NoDegradation, interval: LatencyInterval | None) -> dict:
        out["result_"] = DegradationPatternsResult(
            found=False, solver=self.solver, n_requests=int(data.latency.size), reason=reason, interval=interval,
            interval_source=None if interval is None else ("given" if self.interval is not None else "automatic"),
            notes=tuple(data.notes), n_positives=0 if interval is None else int(interval.contains(data.latency).sum()))
        return out

    # ---- labels of any table ---------------------------------------------------------------

    def predict(self, table: Any) -> np.ndarray:
        """The labels the fitted patterns give the requests of any table.

        A request takes the index of the sub-interval whose pattern it satisfies (the one holding
        its latency first), after the ``compound`` rules of the fit, as :attr:`labels_` does on
        the fitted table (``predict`` of that table equals ``labels_``). An automatic interval
        is open at the top (it holds every request slower than its start), so a request slower
        than every fitted one belongs to the last sub-interval.

        Parameters
        ----------
        table : TraceTable or polars.DataFrame
            With ``latency_ns`` and the columns the patterns name. A column the patterns use
            that the table lacks counts as 0 exclusive time (an instance or attribute column: no
            value); columns the fit did not know are ignored. Both are said in a
            :class:`PatternsWarning` whose ``note`` is a :class:`~.notes.PredictColumns`.

        Returns
        -------
        labels : ndarray of int64, shape (n_requests,)
            -1: no pattern, no latency, or nothing was found by the fit.

        Raises
        ------
        ParameterError
            The estimator is not fitted, or the table is not a table or has no ``latency_ns``.
        """
        if not hasattr(self, "result_"):
            raise ParameterError("This LatencyDegradationPatterns is not fitted yet: call fit(table) before predict.")
        frame = _frame_of(table)
        result = self.result_
        labels = np.full(frame.height, -1, dtype=np.int64)
        if not result.found:
            return labels
        frame = self._complete(frame, result)
        rows = np.flatnonzero(frame.get_column(LATENCY_COLUMN).is_not_null().to_numpy())
        known = frame[rows] if rows.size < frame.height else frame
        latency = known.get_column(LATENCY_COLUMN).cast(pl.Int64).to_numpy()
        subs = result.sub_intervals
        satisfied = [np.zeros(known.height, bool) if s.pattern is None else s.pattern.satisfied_by(known) for s in subs]
        top = result.interval.high_ns if result.interval_source == "automatic" else None
        ranges = [(s.low_ns, _OPEN_TOP if s.high_ns == top else s.high_ns) for s in subs]
        plain = assign_labels(satisfied, latency, ranges)
        fits = [rule.fit.satisfied_by(known) for rule in result.compound]
        labels[rows] = compound_labels(plain, result.compound, fits)
        return labels

    @staticmethod
    def _complete(frame: pl.DataFrame, result: DegradationPatternsResult) -> pl.DataFrame:
        """The table with the columns the patterns use and it lacks (0 ns, or no value), warned."""
        used = {c.attribute for s in result.sub_intervals if s.pattern is not None for c in s.pattern}
        used |= {c.attribute for rule in result.compound for c in rule.fit}
        missing = tuple(sorted(a for a in used if a not in frame.columns))
        fitted = set(result.attributes) | {a for a, _ in result.skipped_attributes}
        unknown = tuple(c for c in frame.columns if c.startswith(_ATTRIBUTE_PREFIXES) and c not in fitted)
        if missing or unknown:
            warnings.warn(PatternsWarning(PredictColumns(missing, unknown)), stacklevel=3)
        return frame.with_columns(
            [pl.lit(0, dtype=pl.Int64).alias(a) if a.startswith(CONTINUOUS_PREFIX) else pl.lit(None, dtype=pl.Utf8).alias(a)
             for a in missing])


_ATTRIBUTE_PREFIXES = (CONTINUOUS_PREFIX, INSTANCE_PREFIX, ATTR_PREFIX)
#: The top of an automatic interval's last sub-interval for ``predict``: no latency reaches it.
_OPEN_TOP = np.iinfo(np.int64).max


class PatternsWarning(UserWarning):
    """``predict`` on a table whose columns differ from the fit's; ``note`` says which."""

    def __init__(self, note: Note):
        super().__init__(note.describe())
        self.note = note


def _frame_of(table: Any) -> pl.DataFrame:
    frame = table if isinstance(table, pl.DataFrame) else getattr(table, "frame", None)
    if not isinstance(frame, pl.DataFrame):
        raise ParameterError("The 'table' argument of LatencyDegradationPatterns.predict must be a TraceTable or a "
                             f"polars DataFrame. Got {type(table).__name__} instead.")
    if LATENCY_COLUMN not in frame.columns:
        raise ParameterError(f"The table has no {LATENCY_COLUMN!r} column: predict labels requests by their latency "
                             f"as well as their pattern (columns: {frame.columns[:8]}...).")
    return frame


def choose_interval(latency_ns: np.ndarray, *, rule: str = "robust", tail_z: float = 2.0,
                    uncertain_z: float | None = None, **mean_shift: float) -> IntervalChoice | NoDegradation:
    """The automatic degraded interval of :class:`LatencyDegradationPatterns`, or why there is none.

    Parameters
    ----------
    latency_ns : ndarray of int64, shape (n_requests,)
    rule : {"robust", "paper"}, default="robust"
        :class:`~.stages.RobustInterval` or :class:`~.stages.PaperInterval`.
    tail_z : float, default=2.0
    uncertain_z : float or None, default=None
        ``"robust"`` rule: the uncertain band (:class:`~.refinements.UncertainBand`).
    **mean_shift
        ``quantile`` and ``min_bin_fraction``.

    Returns
    -------
    IntervalChoice or NoDegradation
        The choice with its reason, or why there is no degradation (a note: kind, numbers, and in
        words what to try).
    """
    from dataclasses import replace

    latency = np.asarray(latency_ns)
    stage = RobustInterval(tail_z=tail_z, **mean_shift) if rule == "robust" else PaperInterval(**mean_shift)
    chosen = stage.choose(latency)
    if isinstance(chosen, NoDegradation) or uncertain_z is None:
        return chosen
    return replace(chosen, uncertain_ns=UncertainBand(float(uncertain_z)).band(chosen, latency))
