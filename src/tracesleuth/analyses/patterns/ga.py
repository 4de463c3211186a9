"""The genetic algorithm of Cortellessa & Traini (2020), Section 3.1, vectorised over populations.

Ingredients, as in the paper (defaults are the paper's settings):

* **Representation**: a pattern, at most one condition per attribute. Here an individual is a
  row of ``n_attributes`` slots; slot ``j`` is absent or the code range ``[lo, hi)`` of a
  condition on attribute ``j`` (threshold indices for a continuous attribute, one value for a
  categorical one; see :mod:`tracesleuth.analyses.patterns._bitsets`).
* **Mutation**: one of *add* (a random condition on a random attribute; no effect when the
  attribute already has one), *remove* (a random condition) or *modify* (a random condition:
  one endpoint is redrawn and the endpoints reordered, no effect when they coincide; a
  categorical condition gets another value), chosen uniformly.
* **Crossover** (union and split): the two parents' conditions are pooled and randomly
  partitioned between two children; when both parents have different conditions on the same
  attribute, each child receives one of them. As in DEAP's ``varOr`` only the first child is kept.
* **Fitness**: ``Q(P, I)`` (eq. 5), computed by bit strings (Section 3.2); the empty pattern
  scores 0 (a pattern must say something).
* **Search**: ``(mu + lambda)`` with tournament selection of size 20, crossover probability
  0.8, mutation probability 0.2, ``mu = lambda = 100``, 400 generations (DEAP's
  ``eaMuPlusLambda`` with ``varOr``). Each individual starts with two random conditions (the
  authors' implementation). The best pattern ever evaluated is kept (a hall of fame of one),
  ties broken by fewer conditions.

**Why not DEAP.** DEAP drives one Python call per individual per operator and per fitness
evaluation: 400 generations x 100 offspring x one search per DP sub-interval is 10^5-10^6 Python
calls, seconds before any bit is counted. Here the population of *every* sub-interval of the
dynamic program evolves in one array of shape ``(n_sub_intervals, mu, n_attributes)``: each
operator is a handful of numpy calls per generation, and one evaluator call per generation counts
all offspring of all sub-intervals (a pattern's per-class counts serve every sub-interval). The
random stream is numpy's, seeded by ``random_state``.

References
----------
V. Cortellessa and L. Traini. ICPE 2020, Section 3.1. https://doi.org/10.1145/3358960.3379126
F.-A. Fortin et al. "DEAP: Evolutionary Algorithms Made Easy". JMLR 13, 2012.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ._bitsets import PatternEvaluator, SearchResult, admissible_f_score

__all__ = ["GASettings", "genetic_search"]

#: Bit strings at least this many words long are worth a cross-generation evaluation cache.
_CACHE_MIN_WORDS = 64


@dataclass(frozen=True)
class GASettings:
    """Settings of the genetic algorithm (defaults: Cortellessa & Traini 2020, Section 3.1).

    Attributes
    ----------
    population_size : int, default=100
        ``mu``.
    offspring_size : int, default=100
        ``lambda``.
    generations : int, default=400
    crossover_probability : float, default=0.8
    mutation_probability : float, default=0.2
        ``crossover_probability + mutation_probability <= 1``; the rest is plain reproduction.
    tournament_size : int, default=20
    initial_conditions : int, default=2
        Conditions of each initial individual (fewer when there are fewer attributes).
    patience : int or None, default=None
        Stop evolving a sub-interval's population when its best pattern has not improved for this
        many generations (its ``history`` then repeats its last value). None: all ``generations``
        for every population, as the paper. Beyond the paper: the best patterns usually settle
        long before 400 generations, and the search runs once per pair of split points.
    """

    population_size: int = 100
    offspring_size: int = 100
    generations: int = 400
    crossover_probability: float = 0.8
    mutation_probability: float = 0.2
    tournament_size: int = 20
    initial_conditions: int = 2
    patience: int | None = None


class _Space:
    """Random conditions and variation operators over code ranges."""

    def __init__(self, n_bins: np.ndarray, categorical: np.ndarray, rng: np.random.Generator):
        self.n_bins = np.asarray(n_bins, dtype=np.int64)
        self.categorical = np.asarray(categorical, dtype=bool)
        self.m = self.n_bins.size
        self.rng = rng

    def random_conditions(self, attr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A uniformly random condition on each attribute index in ``attr`` (any shape)."""
        nb = self.n_bins[attr]
        cat = self.categorical[attr]
        a = (self.rng.random(attr.shape) * (nb + 1)).astype(np.int64)  # in [0, nb]
        b = (self.rng.random(attr.shape) * nb).astype(np.int64)  # in [0, nb - 1]
        b = b + (b >= a)  # distinct from a, uniform over the other nb values
        lo = np.where(cat, np.minimum(a, nb - 1), np.minimum(a, b))
        hi = np.where(cat, lo + 1, np.maximum(a, b))
        return lo, hi

    def initial(self, shape: tuple[int, ...], k: int) -> tuple[np.ndarray, np.ndarray]:
        lo = np.full(shape + (self.m,), -1, dtype=np.int64)
        hi = np.full(shape + (self.m,), -1, dtype=np.int64)
        k = min(k, self.m)
        if k == 0:
            return lo, hi
        chosen = np.argsort(self.rng.random(shape + (self.m,)), axis=-1)[..., :k]
        clo, chi = self.random_conditions(chosen)
        np.put_along_axis(lo, chosen, clo, axis=-1)
        np.put_along_axis(hi, chosen, chi, axis=-1)
        return lo, hi

    def crossover(self, lo1, hi1, lo2, hi2) -> tuple[np.ndarray, np.ndarray]:
        """First child of union-and-split, row-wise over ``(..., n_attributes)`` arrays."""
        has1, has2 = lo1 >= 0, lo2 >= 0
        same = (lo1 == lo2) & (hi1 == hi2)
        conflict = has1 & has2 & ~same
        coin = self.rng.random(lo1.shape) < 0.5
        take_first = np.where(conflict, coin, has1)
        keep = np.where(conflict, True, (has1 | has2) & coin)
        lo = np.where(keep, np.where(take_first, lo1, lo2), -1)
        hi = np.where(keep, np.where(take_first, hi1, hi2), -1)
        return lo, hi

    def mutate(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add, remove or modify (uniformly), row-wise over 2-D ``(n, n_attributes)`` arrays."""
        n, m = lo.shape
        rng = self.rng
        lo, hi = lo.copy(), hi.copy()
        rows = np.arange(n)
        kind = rng.integers(0, 3, size=n)
        active = lo >= 0
        any_active = active.any(axis=1)
        # a random active slot per row (argmax of uniform scores over active slots)
        score = np.where(active, rng.random((n, m)), -1.0)
        slot = score.argmax(axis=1)
        # add
        new_attr = rng.integers(0, m, size=n)
        add_lo, add_hi = self.random_conditions(new_attr)
        add = (kind == 0) & ~active[rows, new_attr]
        lo[rows[add], new_attr[add]] = add_lo[add]
        hi[rows[add], new_attr[add]] = add_hi[add]
        # remove
        rem = (kind == 1) & any_active
        lo[rows[rem], slot[rem]] = -1
        hi[rows[rem], slot[rem]] = -1
        # modify
        mod = (kind == 2) & any_active
        nb = self.n_bins[slot]
        cat = self.categorical[slot]
        cur_lo, cur_hi = lo[rows, slot], hi[rows, slot]
        endpoint = rng.random(n) < 0.5
        value = (rng.random(n) * (nb + 1)).astype(np.int64)
        other = np.where(endpoint, cur_hi, cur_lo)
        c_lo, c_hi = np.minimum(value, other), np.maximum(value, other)
        shift = 1 + (rng.random(n) * np.maximum(nb - 1, 1)).astype(np.int64)  # another category
        k_lo = (cur_lo + shift) % np.maximum(nb, 1)
        new_lo = np.where(cat, k_lo, c_lo)
        new_hi = np.where(cat, k_lo + 1, c_hi)
        effective = mod & np.where(cat, nb > 1, c_lo != c_hi)
        lo[rows[effective], slot[effective]] = new_lo[effective]
        hi[rows[effective], slot[effective]] = new_hi[effective]
        return lo, hi


class _Counter:
    """Per-class counts of patterns; for long bit strings deduplicated and cached across generations."""

    def __init__(self, evaluator: PatternEvaluator):
        self.evaluator = evaluator
        self.cache: dict[bytes, np.ndarray] | None = {} if evaluator.n_words >= _CACHE_MIN_WORDS else None
        self.n_evaluated = 0

    def __call__(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if self.cache is None:  # short bit strings: counting is cheaper than deduplicating
            self.n_evaluated += lo.shape[0]
            return self.evaluator.class_counts(lo, hi)
        genomes = np.concatenate([lo, hi], axis=1).astype(np.int32)
        keys = [row.tobytes() for row in genomes]
        todo: dict[bytes, int] = {}
        for i, key in enumerate(keys):
            if key not in self.cache and key not in todo:
                todo[key] = i
        if todo:
            idx = np.fromiter(todo.values(), dtype=np.int64, count=len(todo))
            counts = self.evaluator.class_counts(lo[idx], hi[idx])
            self.n_evaluated += idx.size
            for key, row in zip(todo, counts):
                self.cache[key] = row
        return np.stack([self.cache[key] for key in keys])


def _fitness(counts: np.ndarray, n_conditions: np.ndarray, first: np.ndarray, last: np.ndarray, n_pos: np.ndarray,
             least_precision: np.ndarray):
    """F-score and tp of patterns ``(Q, N)`` for the sub-interval of their population ``q`` (0 when the
    pattern is empty or below the sub-interval's least precision)."""
    cum = np.concatenate([np.zeros(counts.shape[:-1] + (1,), np.int64), np.cumsum(counts, axis=-1)], axis=-1)
    shape = counts.shape[:2] + (1,)
    upper = np.take_along_axis(cum, np.broadcast_to((last + 1)[:, None, None], shape), axis=-1)[..., 0]
    lower = np.take_along_axis(cum, np.broadcast_to((first + 1)[:, None, None], shape), axis=-1)[..., 0]
    tp = upper - lower
    support = cum[..., -1]
    f = np.where(n_conditions > 0, admissible_f_score(tp, support, n_pos[:, None], least_precision[:, None]), 0.0)
    return f, tp, support


def genetic_search(
    evaluator: PatternEvaluator,
    categorical: np.ndarray,
    sub_intervals: Sequence[tuple[int, int]],
    *,
    settings: GASettings = GASettings(),
    random_state: int | np.random.Generator | None = None,
    least_precision: np.ndarray | None = None,
) -> list[SearchResult]:
    """Run the GA for several sub-intervals at once, one population each.

    Parameters
    ----------
    evaluator : PatternEvaluator
        Bit strings of the encoded requests; its latency classes define the sub-intervals.
    categorical : ndarray of bool, shape (n_attributes,)
        True for categorical attributes (conditions of one code).
    sub_intervals : sequence of (first, last)
        Split point index pairs, ``first < last``; positives are the classes ``first+1 .. last``.
    settings : GASettings
    random_state : int, Generator or None
        Seed of the numpy random stream; equal seeds give equal results.
    least_precision : ndarray of float, shape (n_sub_intervals,), optional
        A pattern below this precision scores 0 in its sub-interval
        (:func:`~._bitsets.min_precision`; beyond the paper). Default: 0 (the paper).

    Returns
    -------
    list of SearchResult
        One per sub-interval, in the given order.
    """
    rng = np.random.default_rng(random_state)
    s = settings
    pairs = np.asarray(sub_intervals, dtype=np.int64).reshape(-1, 2)
    first, last = pairs[:, 0], pairs[:, 1]
    Q = pairs.shape[0]
    m = evaluator.n_attributes
    space = _Space(evaluator.n_bins, categorical, rng)
    counter = _Counter(evaluator)
    class_cum = np.concatenate(([0], np.cumsum(evaluator.class_sizes)))
    n_pos = class_cum[last + 1] - class_cum[first + 1]
    least = np.zeros(Q) if least_precision is None else np.asarray(least_precision, dtype=np.float64)
    mu, lam = s.population_size, s.offspring_size

    act = np.arange(Q)  # populations still searching (all, unless ``patience`` freezes some)

    def evaluate(lo: np.ndarray, hi: np.ndarray):
        n_pop, n = lo.shape[:2]
        counts = counter(lo.reshape(n_pop * n, m), hi.reshape(n_pop * n, m)).reshape(n_pop, n, -1)
        ncond = (lo >= 0).sum(axis=-1)
        f, tp, support = _fitness(counts, ncond, first[act], last[act], n_pos[act], least[act])
        return f, counts, ncond

    pop_lo, pop_hi = space.initial((Q, mu), s.initial_conditions)
    pop_f, pop_counts, pop_ncond = evaluate(pop_lo, pop_hi)

    best_f = np.full(Q, -1.0)
    best_ncond = np.zeros(Q, dtype=np.int64)
    best_lo = np.full((Q, m), -1, dtype=np.int64)
    best_hi = np.full((Q, m), -1, dtype=np.int64)
    best_counts = np.zeros((Q, evaluator.n_classes), dtype=np.int64)
    history = np.zeros((Q, s.generations + 1))
    stall = np.zeros(Q, dtype=np.int64)

    def update_best(f, ncond, lo, hi, counts) -> np.ndarray:
        """Keep each active population's best ever; returns which improved."""
        rows = np.arange(act.size)
        order = np.lexsort((ncond, -f), axis=-1)[:, 0]
        cf, cn = f[rows, order], ncond[rows, order]
        better = (cf > best_f[act]) | ((cf == best_f[act]) & (cn < best_ncond[act]))
        g = act[better]
        best_f[g] = cf[better]
        best_ncond[g] = cn[better]
        best_lo[g] = lo[rows, order][better]
        best_hi[g] = hi[rows, order][better]
        best_counts[g] = counts[rows, order][better]
        return better

    update_best(pop_f, pop_ncond, pop_lo, pop_hi, pop_counts)
    history[:, 0] = best_f
    cx_p, mut_p = s.crossover_probability, s.mutation_probability
    for gen in range(1, s.generations + 1):
        n_act = act.size
        # varOr: each offspring comes from crossover, mutation or reproduction
        u = rng.random((n_act, lam))
        p1 = rng.integers(0, mu, size=(n_act, lam))
        p2 = rng.integers(0, max(mu - 1, 1), size=(n_act, lam))
        p2 = np.where(mu > 1, p2 + (p2 >= p1), p1)
        qq = np.arange(n_act)[:, None]
        a_lo, a_hi = pop_lo[qq, p1], pop_hi[qq, p1]
        b_lo, b_hi = pop_lo[qq, p2], pop_hi[qq, p2]
        x_lo, x_hi = space.crossover(a_lo, a_hi, b_lo, b_hi)
        is_cx = (u < cx_p)[..., None]
        off_lo = np.where(is_cx, x_lo, a_lo)
        off_hi = np.where(is_cx, x_hi, a_hi)
        mut_q, mut_i = np.nonzero((u >= cx_p) & (u < cx_p + mut_p))
        if mut_q.size:
            off_lo[mut_q, mut_i], off_hi[mut_q, mut_i] = space.mutate(a_lo[mut_q, mut_i], a_hi[mut_q, mut_i])
        off_f, off_counts, off_ncond = evaluate(off_lo, off_hi)
        improved = update_best(off_f, off_ncond, off_lo, off_hi, off_counts)
        history[:, gen] = best_f
        stall[act] = np.where(improved, 0, stall[act] + 1)

        # (mu + lambda): tournaments over parents and offspring
        pool_lo = np.concatenate([pop_lo, off_lo], axis=1)
        pool_hi = np.concatenate([pop_hi, off_hi], axis=1)
        pool_f = np.concatenate([pop_f, off_f], axis=1)
        pool_counts = np.concatenate([pop_counts, off_counts], axis=1)
        pool_ncond = np.concatenate([pop_ncond, off_ncond], axis=1)
        aspirants = rng.integers(0, mu + lam, size=(n_act, mu, s.tournament_size))
        winner_pos = pool_f[np.arange(n_act)[:, None, None], aspirants].argmax(axis=2)  # first best aspirant
        winners = np.take_along_axis(aspirants, winner_pos[..., None], axis=2)[..., 0]
        pop_lo, pop_hi = pool_lo[qq, winners], pool_hi[qq, winners]
        pop_f, pop_counts, pop_ncond = pool_f[qq, winners], pool_counts[qq, winners], pool_ncond[qq, winners]
        if s.patience is not None:  # freeze the populations whose best settled
            keep = stall[act] < s.patience
            if not keep.all():
                act = act[keep]
                pop_lo, pop_hi, pop_f = pop_lo[keep], pop_hi[keep], pop_f[keep]
                pop_counts, pop_ncond = pop_counts[keep], pop_ncond[keep]
                if act.size == 0:
                    history[:, gen + 1:] = best_f[:, None]
                    break

    results = []
    for q in range(Q):
        counts = best_counts[q]
        tp = int(counts[first[q] + 1 : last[q] + 1].sum())
        fp = int(counts.sum()) - tp
        f = float(max(best_f[q], 0.0))
        results.append(
            SearchResult(
                first=int(first[q]), last=int(last[q]), lo=best_lo[q].copy(), hi=best_hi[q].copy(),
                class_counts=counts.copy(), tp=tp, fp=fp, n_positives=int(n_pos[q]), f_score=f,
                n_evaluated=counter.n_evaluated, exhaustive=False, history=history[q].copy(),
            )
        )
    return results
