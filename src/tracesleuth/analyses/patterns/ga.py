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
the offspring of all sub-intervals that were never counted before (a pattern's per-class counts
serve every sub-interval). The random stream is numpy's, seeded by ``random_state``.

**What a generation costs, and the choices that keep it small.** With the paper's session
(1,000 requests, 11 attributes, 15 sub-intervals) the bit-work of the fitness evaluations is a
few milliseconds in all; what costs is the number of numpy calls per generation and the size of
their arrays (a call on 1,500 x 11 integers costs tens of microseconds). So:

* *A condition is one small integer* (its id: 0 for none, else the index of the code range
  among the attribute's ranges), so an individual is one ``int8``/``int16`` row and crossover
  is a few element-wise calls on one array, not on a pair of ``lo``/``hi`` arrays.
* *Fitness counts are cached by genome.* An individual's ids read as a mixed-radix number are
  its key; the per-class counts of a key are computed once (a dense index when the space of
  patterns is small, a dict otherwise) and each generation only counts the patterns never seen.
  Once a population has converged, almost every offspring is a repeat. In a dense index the
  new genomes of a generation are told apart by the index itself (each key's last occurrence
  marks its slot), without sorting them. A new genome is counted as the AND of its conditions' bit
  strings, tabled per (attribute, id) (one reduction, not the general ``class_counts``).
* *Mutation reads tables.* The outcome of *modify* depends only on the attribute, the current
  condition and two small integer draws, so it is tabled once per search (a row of ids per
  attribute and condition) and a mutation is one lookup; copies (reproduction, a crossover's
  conflicting conditions) go by index, which costs less than a masked copy of every slot.
* *Tournaments are sampled, not run.* The winner of a tournament of ``k`` aspirants drawn with
  replacement from a pool of ``N`` is the best drawn (the first drawn among equals, as DEAP's
  ``selTournament``). Its rank ``r`` in the pool sorted by fitness has
  ``P(rank >= r) = ((N - r) / N)^k``, so ``r = floor(N (1 - U^(1/k)))`` with ``U`` uniform gives
  the fitness of the winner, and a uniform pick among the individuals of that fitness gives the
  winner itself (the first drawn among equals is uniform among them). Two random numbers per
  tournament instead of ``k``, and the same distribution: exactly DEAP's tournament, drawn
  independently for each of the ``mu`` winners.

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

#: Pattern spaces up to this many genomes get a dense key -> cache-row index (4 bytes a key, 4 MiB
#: at most); larger ones a dict. The paper's session has 524,288 possible patterns.
_DENSE_KEYS = 1 << 20

#: Mixed-radix keys must fit an int64 (a larger space of patterns keys genomes by a checked hash).
_MAX_KEY_BITS = 62

#: Mixed-radix keys of fewer bits are computed in float64, where they are exact integers.
_EXACT_FLOAT_BITS = 52

#: Seed of the hash multipliers of genome keys (fixed: a key never depends on ``random_state``).
_HASH_SEED = 20200420

#: *Modify* outcomes are tabled (one entry per attribute, condition and draw) up to this many
#: entries, built in about 2 ms; a mutation then saves about 30 us a generation. Beyond (building
#: 41,000 entries took 14 ms: 20 attributes of 12 bins), a mutation computes them from the ranges.
_MODIFY_TABLE = 1 << 14

#: The fitness cache keeps the bit string of every condition when they take at most this many bytes
#: (the paper's session: 11 attributes x 4 ids x 6 words); a new genome's string is then one
#: AND-reduction of its conditions' strings.
_CONDITION_BITS_BYTES = 1 << 22


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
    """Conditions as ids and the variation operators over rows of ids.

    Attribute ``j`` has ``n_conditions[j]`` conditions, ids ``1 .. n_conditions[j]`` (0: none): a
    continuous attribute of ``nb`` bins every code range ``[lo, hi)``, ``0 <= lo < hi <= nb``,
    ordered by ``lo`` then ``hi``; a categorical one every value ``[c, c + 1)``.
    """

    def __init__(self, n_bins: np.ndarray, categorical: np.ndarray, rng: np.random.Generator):
        self.n_bins = np.asarray(n_bins, dtype=np.int64)
        self.categorical = np.asarray(categorical, dtype=bool)
        self.m = self.n_bins.size
        self.rng = rng
        nb = self.n_bins
        self.n_conditions = np.where(self.categorical, nb, nb * (nb + 1) // 2).astype(np.int64)
        width = int(self.n_conditions.max(initial=0)) + 1
        self.dtype = np.int8 if width <= 127 else np.int16 if width <= 32767 else np.int32
        self.lo_of = np.full((self.m, width), -1, dtype=np.int64)
        self.hi_of = np.full((self.m, width), -1, dtype=np.int64)
        for j in range(self.m):
            if self.categorical[j]:
                lo = np.arange(nb[j])
                hi = lo + 1
            else:
                lo, hi = np.triu_indices(int(nb[j]) + 1, k=1)
            self.lo_of[j, 1 : lo.size + 1] = lo
            self.hi_of[j, 1 : hi.size + 1] = hi
        self._slots = np.arange(self.m)
        self._slot_rows = self._slots * width  # row starts of attribute j in the flattened tables
        self._draws = int(nb.max(initial=0)) + 1  # values of a redrawn endpoint: 0 .. n_bins
        self._n_values = nb + 1  # per attribute: values of a redrawn endpoint
        self._n_shifts = np.maximum(nb - 1, 1)  # and shifts of a categorical value
        self._modify_table = self._tabled_modify() if self.m * width * 2 * self._draws <= _MODIFY_TABLE else None

    def decode(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Code ranges ``lo, hi`` (``-1``: no condition) of rows of ids ``(..., n_attributes)``."""
        at = self._slot_rows + ids  # flat indices into the (attribute, id) tables
        return self.lo_of.take(at), self.hi_of.take(at)

    def encode(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Ids of code ranges ``(..., n_attributes)`` (the inverse of :meth:`decode`)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        nb = self.n_bins
        ranges = 1 + lo * nb - lo * (lo - 1) // 2 + (hi - lo - 1)
        ids = np.where(self.categorical, lo + 1, ranges)
        return np.where(lo >= 0, ids, 0).astype(self.dtype)

    def random_conditions(self, attr: np.ndarray) -> np.ndarray:
        """A uniformly random condition id on each attribute index in ``attr`` (any shape)."""
        n = self.n_conditions[attr]
        return (1 + (self.rng.random(attr.shape) * n).astype(np.int64)).astype(self.dtype)

    def initial(self, shape: tuple[int, ...], k: int) -> np.ndarray:
        """Individuals of ``k`` random conditions on distinct attributes."""
        ids = np.zeros(shape + (self.m,), dtype=self.dtype)
        k = min(k, self.m)
        if k == 0:
            return ids
        chosen = np.argsort(self.rng.random(shape + (self.m,)), axis=-1)[..., :k]
        np.put_along_axis(ids, chosen, self.random_conditions(chosen), axis=-1)
        return ids

    def coins(self, shape: tuple[int, ...]) -> np.ndarray:
        """Fair coins of shape ``shape + (n_attributes,)``, one random bit each: bit ``j % 64`` of
        raw word ``j // 64`` for attribute ``j`` (unpacked from the words' little-endian bytes)."""
        n_words = max(1, -(-self.m // 64))
        raw = self.rng.bit_generator.random_raw(shape + (n_words,)).astype("<u8", copy=False)
        return np.unpackbits(raw.view(np.uint8), axis=-1, count=self.m, bitorder="little").view(bool)

    def crossover(self, x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
        """First child of union-and-split, row-wise over ``(..., n_attributes)`` ids.

        A condition of one parent only, or shared by both, goes to the child with probability 1/2;
        of two different conditions on one attribute, the child takes one at random (the first
        parent's on heads).
        """
        heads = -self.coins(x1.shape[:-1]).view(np.int8).astype(x1.dtype, copy=False)  # all ones or 0
        child = np.maximum(x1, x2)  # the one condition when there is no conflict (0: none)
        child &= heads
        conflict = np.minimum(x1, x2) > 0
        conflict &= x1 != x2
        at = conflict.ravel().nonzero()[0]  # rare: each parent's own condition on one attribute
        if at.size:
            f1, f2, fh = x1.ravel().take(at), x2.ravel().take(at), heads.ravel().take(at)
            child.ravel()[at] = f2 ^ ((f1 ^ f2) & fh)
        return child

    def mutate(self, ids: np.ndarray) -> np.ndarray:
        """Add, remove or modify (uniformly), row-wise over 2-D ``(n, n_attributes)`` ids.

        *Add* puts a random condition on a random attribute (no effect when it has one); *remove*
        drops a random condition; *modify* redraws one endpoint of a random continuous range (no
        effect when the endpoints coincide) or gives a categorical condition another value. All
        the random numbers of a call are drawn at once; each row changes in one slot at most (a
        row without condition has nothing to remove or modify: its slot 0 stays 0).
        """
        n, m = ids.shape
        ids = ids.copy()
        r = self.rng.random((n, m + 6))
        u_kind, u_attr, u_cond, u_value, u_end, u_shift = r[:, m:].T
        kind = (u_kind * 3).astype(np.int64)
        slot = np.where(ids > 0, r[:, :m], -1.0).argmax(axis=1)  # a random active slot, if any
        target = np.where(kind == 0, (u_attr * m).astype(np.int64), slot)
        at = np.arange(0, n * m, m) + target  # flat indices of the changed slots
        cur = ids.take(at).astype(np.int64)
        added = np.where(cur > 0, cur, 1 + (u_cond * self.n_conditions.take(target)).astype(np.int64))
        value = (u_value * self._n_values.take(target)).astype(np.int64)
        shift = (u_shift * self._n_shifts.take(target)).astype(np.int64)
        high_end = u_end < 0.5
        if self._modify_table is not None:
            draw = np.where(self.categorical.take(target), shift, value + high_end * self._draws)
            width, n_draws = self._modify_table.shape[1:]
            modified = self._modify_table.take((target * width + cur) * n_draws + draw)
        else:
            modified = self._modified(target, cur, value, high_end, shift)
        ids.put(at, np.where(kind == 0, added, np.where(kind == 1, 0, modified)))
        return ids

    def _modified(self, j: np.ndarray, cur: np.ndarray, value: np.ndarray, high_end: np.ndarray,
                  shift: np.ndarray) -> np.ndarray:
        """Ids after *modify* of conditions ``cur`` on attributes ``j`` (``cur`` itself when it has no
        effect, 0 for no condition): the endpoint ``hi`` (``high_end``, else ``lo``) redrawn as
        ``value`` in ``0 .. n_bins`` and the endpoints reordered; a categorical value moved by
        ``1 + shift`` (``shift`` in ``0 .. n_bins - 2``) among the values."""
        nb, cat = self.n_bins[j], self.categorical[j]
        lo, hi = self.lo_of[j, cur], self.hi_of[j, cur]
        other = np.where(high_end, hi, lo)
        c_lo, c_hi = np.minimum(value, other), np.maximum(value, other)
        k_lo = (lo + 1 + shift) % np.maximum(nb, 1)
        new = np.where(cat, k_lo + 1, 1 + c_lo * nb - c_lo * (c_lo - 1) // 2 + (c_hi - c_lo - 1))
        effective = np.where(cat, nb > 1, c_lo != c_hi) & (cur > 0) & (cur <= self.n_conditions[j])
        return np.where(effective, new, cur)

    def _tabled_modify(self) -> np.ndarray:
        """:meth:`_modified` of every (attribute, condition, draw), shape ``(n_attributes, width, 2 *
        draws)``: draw ``value + high_end * draws`` for a continuous attribute, ``shift`` for a
        categorical one (one table lookup per mutation instead of a dozen array operations)."""
        width = self.lo_of.shape[1]
        j, cur, x, high = np.meshgrid(self._slots, np.arange(width), np.arange(self._draws), [False, True],
                                      indexing="ij")
        continuous = self._modified(j, cur, x, high, np.zeros_like(x))
        categorical = self._modified(j, cur, np.zeros_like(x), np.zeros_like(high), x)
        table = np.where(self.categorical[:, None, None, None], categorical[..., :1], continuous)
        return np.concatenate([table[..., 0], table[..., 1]], axis=-1).astype(self.dtype)


class _Scores:
    """F-scores of genomes for every sub-interval, each genome counted once (cached by genome).

    A genome's key is its ids read as a mixed-radix number when the space of patterns fits an
    int64, else a 64-bit multiplicative hash of them whose hits are checked against the stored
    genome (a collision is counted apart, never confused). Keys map to rows by a dense index
    (small spaces) or by binary search in a sorted array. Row ``r`` of ``f`` holds the F-score of a
    pattern for each sub-interval (0 for the empty pattern and below the sub-interval's least
    precision, as :func:`~._bitsets.admissible_f_score`); ``n_conditions[r]`` its conditions. A
    generation's fitness is then one gather; only patterns never seen are counted.
    """

    def __init__(self, evaluator: PatternEvaluator, space: _Space, first: np.ndarray, last: np.ndarray,
                 n_pos: np.ndarray, least_precision: np.ndarray):
        self.evaluator = evaluator
        self.space = space
        radix = space.n_conditions + 1
        log_size = float(np.sum(np.log2(radix.astype(np.float64))))
        self.hashed = log_size >= _MAX_KEY_BITS
        if self.hashed:  # odd multipliers from a fixed seed: not the search's random stream
            self.weights = np.random.default_rng(_HASH_SEED).integers(0, 2**63, size=radix.size, dtype=np.uint64)
            self.weights = self.weights * np.uint64(2) + np.uint64(1)
        else:
            self.weights = np.cumprod(np.concatenate(([1], radix)))[:-1].astype(np.int64)
        # keys below 2**53 are exact in float64: a float dot product (BLAS) computes them faster
        exact = not self.hashed and log_size < _EXACT_FLOAT_BITS
        self._float_weights = self.weights.astype(np.float64) if exact else None
        size = None if self.hashed else int(np.prod(radix))
        self.index = np.full(size, -1, dtype=np.int32) if size is not None and size <= _DENSE_KEYS else None
        self.sorted_keys = np.empty(0, dtype=self.weights.dtype)
        self.sorted_rows = np.empty(0, dtype=np.int32)
        classes = np.arange(evaluator.n_classes)
        self.positive = ((classes > first[:, None]) & (classes <= last[:, None])).T.astype(np.int64)  # (C, Q)
        self.n_pos = n_pos
        self.least = np.asarray(least_precision, dtype=np.float64)
        self.f = np.zeros((64, first.size))
        self.n_conditions = np.zeros(64, dtype=np.int64)
        self.genomes = np.zeros((64 if self.hashed else 0, space.m), dtype=space.dtype)
        self.n_rows = 0
        self.n_evaluated = 0
        # the bit string of every (attribute, id), so that a genome's string is one AND-reduction
        width = space.lo_of.shape[1]
        self.condition_bits = None
        if space.m * width * evaluator.n_words * 8 <= _CONDITION_BITS_BYTES:
            self.condition_bits = evaluator.condition_bits(
                np.repeat(np.arange(space.m), width), space.lo_of.ravel(), space.hi_of.ravel())

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        """Cache rows of genomes ``(..., n_attributes)``, shape ``ids.shape[:-1]``."""
        flat = ids.reshape(-1, ids.shape[-1])
        if self._float_weights is not None:
            keys = (flat.astype(np.float64) @ self._float_weights).astype(np.int64)
        else:
            keys = flat.astype(self.weights.dtype) @ self.weights
        where = self._lookup(keys, flat)
        missing = np.flatnonzero(where < 0)
        if missing.size and self.index is not None:  # dense keys: repeats found by the index itself
            self._add_dense(keys[missing], flat, missing, where)
        elif missing.size:
            new_keys, first, inverse = np.unique(keys[missing], return_index=True, return_inverse=True)
            rows = self._add(flat[missing[first]])
            where[missing] = rows[inverse]
            fresh = self._lookup(new_keys) < 0  # not a collision with a stored genome
            if fresh.any():
                at = np.searchsorted(self.sorted_keys, new_keys[fresh])
                self.sorted_keys = np.insert(self.sorted_keys, at, new_keys[fresh])
                self.sorted_rows = np.insert(self.sorted_rows, at, rows[fresh])
            if self.hashed:  # two genomes of one new key: each its own row
                wrong = missing[(self.genomes[where[missing]] != flat[missing]).any(axis=1)]
                for i in wrong.tolist():
                    where[i] = self._add(flat[i : i + 1])[0]
        return where.reshape(ids.shape[:-1])

    def _add_dense(self, keys: np.ndarray, flat: np.ndarray, missing: np.ndarray, where: np.ndarray) -> None:
        """Count the genomes ``flat[missing]`` (keys ``keys``, none cached) once per key and fill their
        rows into ``where``: each key's last occurrence marks itself in the index (``-2 - i``), so
        the occurrences that read back their own mark are the distinct genomes (no sort)."""
        marks = np.arange(keys.size)
        self.index[keys] = -2 - marks
        last = -2 - self.index[keys].astype(np.int64)
        distinct = np.flatnonzero(last == marks)
        rows = self._add(flat[missing[distinct]])
        self.index[keys[distinct]] = rows
        where[missing] = self.index[keys]

    def _lookup(self, keys: np.ndarray, flat: np.ndarray | None = None) -> np.ndarray:
        """Rows of ``keys`` (-1: not cached; with ``flat``, hashed keys of another genome too)."""
        if self.index is not None:
            return self.index[keys]
        if self.sorted_keys.size == 0:
            return np.full(keys.shape, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.sorted_keys, keys), self.sorted_keys.size - 1)
        where = np.where(self.sorted_keys[pos] == keys, self.sorted_rows[pos], -1).astype(np.int64)
        if self.hashed and flat is not None:
            hit = np.flatnonzero(where >= 0)
            where[hit[(self.genomes[where[hit]] != flat[hit]).any(axis=1)]] = -1
        return where

    def _add(self, genomes: np.ndarray) -> np.ndarray:
        """Count and score new genomes; their row numbers."""
        if self.condition_bits is not None:
            strings = self.condition_bits.take(self.space._slot_rows + genomes, axis=0)
            counts = self.evaluator.count_bits(np.bitwise_and.reduce(strings, axis=1))
        else:
            counts = self.evaluator.class_counts(*self.space.decode(genomes))
        self.n_evaluated += genomes.shape[0]
        tp = counts @ self.positive  # (n, Q)
        support = counts.sum(axis=1)[:, None]
        f = admissible_f_score(tp, support, self.n_pos[None, :], self.least[None, :])
        ncond = (genomes > 0).sum(axis=1)
        f[ncond == 0] = 0.0  # a pattern must say something
        start, stop = self.n_rows, self.n_rows + genomes.shape[0]
        if stop > self.f.shape[0]:
            size = max(stop, 2 * self.f.shape[0])
            self.f = np.concatenate([self.f[:start], np.zeros((size - start, self.f.shape[1]))])
            self.n_conditions = np.concatenate([self.n_conditions[:start], np.zeros(size - start, np.int64)])
        self.f[start:stop] = f
        self.n_conditions[start:stop] = ncond
        if self.hashed:
            if stop > self.genomes.shape[0]:
                self.genomes = np.concatenate([self.genomes[:start], np.zeros_like(self.genomes, shape=(
                    max(stop, 2 * self.genomes.shape[0]) - start, self.genomes.shape[1]))])
            self.genomes[start:stop] = genomes
        self.n_rows = stop
        return np.arange(start, stop, dtype=np.int32)


def _tournament(f: np.ndarray, mu: int, size: int, rng: np.random.Generator, *, flat: bool = False) -> np.ndarray:
    """Winners (pool indices, shape ``(P, mu)``; with ``flat``, indices into ``f.ravel()``) of ``mu``
    tournaments of ``size`` aspirants drawn with replacement from each row of ``f`` ``(P, N)``: the
    best drawn, the first drawn among equals (DEAP's ``selTournament``), sampled by its rank (see the
    module docstring)."""
    n_pop, n = f.shape
    base = (np.arange(n_pop) * n)[:, None]
    order = f.argsort(axis=1)
    order += base  # ascending, as flat indices
    order = order.ravel()
    sorted_f = f.take(order)
    new_group = np.empty(n_pop * n, dtype=bool)  # each row starts a group of equal fitness
    np.not_equal(sorted_f[1:], sorted_f[:-1], out=new_group[1:])
    new_group[::n] = True
    starts = np.append(new_group.nonzero()[0], new_group.size)  # and the end of the last group
    group = new_group.cumsum()  # 1 + the group of each sorted position
    u = rng.random((2, n_pop, mu))
    rank = np.power(u[0], 1.0 / size, out=u[0])
    np.subtract(1.0, rank, out=rank)
    rank *= n
    rank = np.minimum(rank.astype(np.int64), n - 1)  # floor(N (1 - U^(1/k))), 0: the best
    g = group.take(base + (n - 1) - rank)  # 1 + the group at the winner's rank
    lo, hi = starts.take(g - 1), starts.take(g)
    pick = np.minimum(lo + (u[1] * (hi - lo)).astype(np.int64), hi - 1)  # uniform among equals
    winners = order.take(pick)
    return winners if flat else winners - base


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
    space = _Space(evaluator.n_bins, categorical, rng)
    class_cum = np.concatenate(([0], np.cumsum(evaluator.class_sizes)))
    n_pos = class_cum[last + 1] - class_cum[first + 1]
    least = np.zeros(Q) if least_precision is None else np.asarray(least_precision, dtype=np.float64)
    scores = _Scores(evaluator, space, first, last, n_pos, least)
    act = np.arange(Q)  # populations still searching (all, unless ``patience`` freezes some)

    def fitness(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """F-scores (each population's own sub-interval) and numbers of conditions of ``ids``."""
        rows = scores(ids).astype(np.int64)
        return scores.f.take(rows * Q + act[:, None]), scores.n_conditions.take(rows)

    pop = space.initial((Q, s.population_size), s.initial_conditions)
    pop_f, pop_n = fitness(pop)
    best = _HallOfFame(Q, space)
    best.update(act, pop_f, pop_n, pop)
    history = np.zeros((Q, s.generations + 1))
    history[:, 0] = best.f
    stall = np.zeros(Q, dtype=np.int64)
    for gen in range(1, s.generations + 1):
        off = _vary(pop, space, s, rng)
        off_f, off_n = fitness(off)
        improved = best.update(act, off_f, off_n, off)
        history[:, gen] = best.f
        stall[act] = np.where(improved, 0, stall[act] + 1)
        # (mu + lambda): tournaments over parents and offspring
        pool = np.concatenate([pop, off], axis=1)
        pool_f = np.concatenate([pop_f, off_f], axis=1)
        winners = _tournament(pool_f, s.population_size, s.tournament_size, rng, flat=True)
        pop = np.take(pool.reshape(-1, pool.shape[-1]), winners, axis=0)
        pop_f = np.take(pool_f, winners)
        if s.patience is not None:  # freeze the populations whose best settled
            keep = stall[act] < s.patience
            if not keep.all():
                act, pop, pop_f = act[keep], pop[keep], pop_f[keep]
                if act.size == 0:
                    history[:, gen + 1:] = best.f[:, None]
                    break
    return best.results(evaluator, first, last, n_pos, history, scores.n_evaluated)


def _vary(pop: np.ndarray, space: _Space, s: GASettings, rng: np.random.Generator) -> np.ndarray:
    """DEAP's ``varOr``: each of ``offspring_size`` offspring per population ``(P, mu, n_attributes)``
    comes from crossover of two distinct parents, mutation of one, or reproduction."""
    n_pop, mu, m = pop.shape
    u = rng.random((3, n_pop, s.offspring_size))
    p1 = (u[1] * mu).astype(np.int64)
    p2 = (u[2] * max(mu - 1, 1)).astype(np.int64)
    p2 = p2 + (p2 >= p1) if mu > 1 else p1
    base = (np.arange(n_pop) * mu)[:, None]
    flat = pop.reshape(-1, m)
    a, b = np.take(flat, p1 + base, axis=0), np.take(flat, p2 + base, axis=0)
    cx_p, mut_p = s.crossover_probability, s.mutation_probability
    off = space.crossover(a, b)
    rows = (u[0] >= cx_p).ravel().nonzero()[0]  # no crossover, as flat (population, offspring) indices
    if rows.size:
        mutated = u[0].ravel().take(rows) < cx_p + mut_p
        flat_off, flat_a = off.reshape(-1, m), a.reshape(-1, m)
        kept = rows[~mutated]  # reproduction
        flat_off[kept] = flat_a.take(kept, axis=0)
        rows = rows[mutated]
        if rows.size:
            flat_off[rows] = space.mutate(flat_a.take(rows, axis=0))
    return off


class _HallOfFame:
    """Each population's best pattern ever evaluated; ties go to fewer conditions, then to the first."""

    def __init__(self, n_populations: int, space: _Space):
        self.m = space.m
        self.space = space
        self.f = np.full(n_populations, -1.0)
        self.n_conditions = np.zeros(n_populations, dtype=np.int64)
        self.ids = np.zeros((n_populations, space.m), dtype=space.dtype)

    def update(self, act: np.ndarray, f: np.ndarray, ncond: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Offer the individuals ``ids`` of the active populations ``act``; returns which improved."""
        top = f.max(axis=1)
        better = top >= self.f[act]
        if not better.any():
            return better
        rows = np.arange(act.size)
        i = np.where(f == top[:, None], ncond, self.m + 1).argmin(axis=1)  # the first of the fewest conditions
        cn = ncond[rows, i]
        better &= (top > self.f[act]) | (cn < self.n_conditions[act])
        g = act[better]
        self.f[g], self.n_conditions[g], self.ids[g] = top[better], cn[better], ids[rows[better], i[better]]
        return better

    def results(self, evaluator: PatternEvaluator, first: np.ndarray, last: np.ndarray, n_pos: np.ndarray,
                history: np.ndarray, n_evaluated: int) -> list[SearchResult]:
        best_lo, best_hi = self.space.decode(self.ids)
        best_counts = evaluator.class_counts(best_lo, best_hi)
        results = []
        for q in range(self.f.size):
            counts = best_counts[q]
            tp = int(counts[first[q] + 1 : last[q] + 1].sum())
            results.append(SearchResult(
                first=int(first[q]), last=int(last[q]), lo=best_lo[q], hi=best_hi[q], class_counts=counts, tp=tp,
                fp=int(counts.sum()) - tp, n_positives=int(n_pos[q]), f_score=float(max(self.f[q], 0.0)),
                n_evaluated=n_evaluated, exhaustive=False, history=history[q].copy(),
            ))
        return results
