"""Attribute encoding and bit-string fitness evaluation (Cortellessa & Traini 2020, Section 3.2).

**Encoding.** A continuous attribute gets the mean-shift thresholds ``t_0 < ... < t_K`` of its
values (:func:`~tracesleuth.analyses.patterns.split_points.attribute_thresholds`); a request's *bin code*
is ``b`` when ``t_b <= a_j < t_{b+1}``. A categorical attribute's codes index its sorted values.
A missing value has code ``-1``. A condition is then a code range ``[lo, hi)``: the continuous
condition ``<j, t_lo, t_hi>`` or, with ``hi == lo + 1``, the categorical condition
``<j, categories[lo]>``. One representation serves the GA, branch and bound and the DP.

**Inequality checks.** For every attribute ``j`` and threshold index ``t`` the check
``<j, e_t>`` is the bit string ``B[i] = (a_j(r_i) >= e_t)`` (codes: ``code_j >= t``; a missing
value is never ``>=``). A condition ``[lo, hi)`` is ``B_lo AND NOT B_hi`` and a pattern is the AND
of its conditions; ``|tp|`` and ``|fp|`` are popcounts. Exactly the scheme of Section 3.2.

**Two layout choices** keep one precomputed table valid for every sub-interval of the dynamic
program and keep the cost independent of duplicated requests:

* Requests are ordered by *latency class*: class 0 is below ``s_0``, class ``c + 1`` is the
  elementary sub-interval ``[s_c, s_{c+1})``, the last class is at or above ``s_k``. The positives
  of any sub-interval ``[s_a, s_b)`` are the classes ``a + 1 .. b``: the paper's ``B^pos`` and
  ``B^neg`` are the in-range and out-of-range segments of one bit string. Each class segment is
  padded to whole 64-bit words, so per-class popcounts are word sums.
* Requests with the same latency class and the same code on every attribute satisfy exactly the
  same patterns; they share one bit (a *cell*) with an integer weight. The weighted popcount
  ``sum(w_i * b_i)`` is computed over binary weight planes, ``sum_p 2^p popcount(S AND M_p)``,
  where cells are sorted by decreasing weight inside each class so that plane ``p`` only spans the
  words of cells with ``w >= 2^p``. With no duplicates there is one plane and this is the plain
  popcount; with 10^6 requests and few distinct cells the strings are thousands of times shorter.
  Short strings (at most :data:`_BYTE_TABLE_WORDS` words, e.g. the paper's session of 1,000
  requests: 6 words) skip the planes: a table gives, for each byte position and each of the 256
  byte values, the weight of the cells whose bits are set, so a weighted popcount is one lookup
  per byte and one sum per class (three numpy calls, not four per plane).

References
----------
V. Cortellessa and L. Traini. ICPE 2020, Section 3.2. https://doi.org/10.1145/3358960.3379126
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from ._model import Condition

__all__ = ["AttributeEncoding", "PatternEvaluator", "SearchResult", "admissible_f_score", "interval_counts",
           "min_precision", "prune", "simplify"]

#: Upper bound on the bytes of condition bit strings materialised at once.
_CHUNK_BYTES = 32 * 1024 * 1024

#: Bit strings up to this many words count weights by byte lookup (a table of 8 * 256 int64 per
#: word: 4 MiB at this size) instead of weight planes.
_BYTE_TABLE_WORDS = 256


@dataclass(frozen=True)
class AttributeEncoding:
    """How one attribute is turned into bin codes.

    Attributes
    ----------
    name : str
        Column name in the trace table.
    kind : {"continuous", "categorical"}
    n_bins : int
        Number of codes: mean-shift bins (continuous) or distinct values (categorical).
    thresholds : ndarray of int64, shape (n_bins + 1,) or None
        Continuous: ``[min, split points..., max + 1]`` in ns.
    categories : tuple of str
        Categorical: the sorted distinct values (code ``c`` is ``categories[c]``).
    n_missing : int
        Requests with no value.
    """

    name: str
    kind: str
    n_bins: int
    thresholds: np.ndarray | None = field(default=None, repr=False)
    categories: tuple[str, ...] = ()
    n_missing: int = 0

    @property
    def categorical(self) -> bool:
        return self.kind == "categorical"

    def condition(self, lo: int, hi: int) -> Condition:
        """Decode the code range ``[lo, hi)`` into a :class:`Condition`.

        Continuous open ends: ``lo == 0`` has no lower bound (``t_0`` is the minimum value) and
        ``hi == n_bins`` no upper bound (``t_K`` is the maximum + 1), identical on the data.
        """
        lo, hi = int(lo), int(hi)
        if not 0 <= lo < hi <= self.n_bins:
            raise ValueError(f"code range [{lo}, {hi}) outside [0, {self.n_bins}] for {self.name!r}")
        if self.categorical:
            return Condition.categorical(self.name, self.categories[lo])
        low = int(self.thresholds[lo]) if lo > 0 else None
        high = int(self.thresholds[hi]) if hi < self.n_bins else None
        return Condition.continuous(self.name, low, high)


def interval_counts(counts: np.ndarray, first: int, last: int) -> np.ndarray:
    """Sum per-class counts over the classes ``first + 1 .. last``: the sub-interval ``[s_first, s_last)``.

    Parameters
    ----------
    counts : ndarray of shape (..., n_classes)
    first, last : int
        Split point indices, ``first < last``.
    """
    return counts[..., first + 1 : last + 1].sum(axis=-1)


def _unique_cells(codes: np.ndarray, latency_class: np.ndarray, n_bins: np.ndarray, n_classes: int):
    """Group requests by (latency class, codes): representative row, weight and a sort key."""
    radices = np.concatenate(([n_classes], np.asarray(n_bins, dtype=np.int64) + 1))
    log_size = float(np.sum(np.log2(radices.astype(np.float64))))
    if log_size < 62:
        key = latency_class.astype(np.int64)
        for j in range(codes.shape[1]):
            key = key * int(radices[j + 1]) + (codes[:, j].astype(np.int64) + 1)
        _, rep, weight = np.unique(key, return_index=True, return_counts=True)
        return rep, weight  # np.unique orders by key: class first, then codes
    matrix = np.column_stack([latency_class.astype(np.int64), codes.astype(np.int64)])
    _, rep, weight = np.unique(matrix, axis=0, return_index=True, return_counts=True)
    return rep, weight


@dataclass(frozen=True)
class _Plane:
    shift: int
    words: np.ndarray | None  # None: every word
    mask: np.ndarray
    starts: np.ndarray
    classes: np.ndarray


class PatternEvaluator:
    """Count, for many patterns at once, the requests of each latency class that satisfy them.

    Parameters
    ----------
    codes : ndarray of int, shape (n_requests, n_attributes)
        Bin codes, ``-1`` for a missing value.
    n_bins : ndarray of int, shape (n_attributes,)
        Codes per attribute (``codes[:, j] < n_bins[j]``).
    latency_class : ndarray of int, shape (n_requests,)
        Class of each request, in ``[0, n_classes)``.
    n_classes : int

    Attributes
    ----------
    class_sizes : ndarray of int64, shape (n_classes,)
        Requests per class.
    n_cells : int
        Distinct (class, codes) combinations, the length of the bit strings before padding.
    n_words : int
        Words of one bit string.
    """

    def __init__(self, codes: np.ndarray, n_bins: np.ndarray, latency_class: np.ndarray, n_classes: int):
        codes = np.asarray(codes)
        if codes.ndim != 2:
            raise ValueError("codes must be 2-D (n_requests, n_attributes)")
        self.n_bins = np.asarray(n_bins, dtype=np.int64)
        self.n_attributes = int(codes.shape[1])
        self.n_classes = int(n_classes)
        latency_class = np.asarray(latency_class, dtype=np.int64)
        self.class_sizes = np.bincount(latency_class, minlength=self.n_classes).astype(np.int64)
        self.n_requests = int(latency_class.size)

        rep, weight = _unique_cells(codes, latency_class, self.n_bins, self.n_classes)
        cell_class = latency_class[rep]
        # inside each class: heaviest cells first (weight planes span prefixes), ties by key order
        order = np.lexsort((np.arange(rep.size), -weight, cell_class))
        rep, weight, cell_class = rep[order], weight[order], cell_class[order]
        cell_codes = codes[rep].astype(np.int64)
        self.n_cells = int(rep.size)

        per_class = np.bincount(cell_class, minlength=self.n_classes)
        class_words = (per_class + 63) // 64
        word_start = np.concatenate(([0], np.cumsum(class_words)))
        self.n_words = int(word_start[-1])
        self._class_word_start = word_start
        cell_start = np.concatenate(([0], np.cumsum(per_class)))
        rank = np.arange(self.n_cells) - cell_start[cell_class]
        self._bit = word_start[cell_class] * 64 + rank  # bit position of each cell
        n_bits = self.n_words * 64

        # Inequality-check bit strings, one row per (attribute, threshold index 0..n_bins).
        self._offsets = np.concatenate(([0], np.cumsum(self.n_bins + 1)))
        checks = np.zeros((int(self._offsets[-1]), self.n_words), dtype=np.uint64)
        bits = np.zeros(n_bits, dtype=bool)
        for j in range(self.n_attributes):
            col = cell_codes[:, j]
            for t in range(int(self.n_bins[j]) + 1):
                bits[:] = False
                bits[self._bit] = col >= t
                checks[self._offsets[j] + t] = _pack(bits)
        self._checks = checks

        # Weight planes.
        planes = []
        max_weight = int(weight.max()) if weight.size else 0
        for p in range(max(1, max_weight.bit_length())):
            heavy = weight >= (1 << p)
            k = np.bincount(cell_class[heavy], minlength=self.n_classes)  # prefix length per class
            n_plane_words = (k + 63) // 64
            present = np.flatnonzero(n_plane_words > 0)
            bits[:] = False
            bits[self._bit] = ((weight >> p) & 1).astype(bool)
            mask_all = _pack(bits)
            if np.array_equal(n_plane_words, class_words):
                words = None
                mask = mask_all
                starts = word_start[present]
            else:
                words = np.concatenate([np.arange(word_start[c], word_start[c] + n_plane_words[c]) for c in present])
                mask = mask_all[words]
                starts = np.concatenate(([0], np.cumsum(n_plane_words[present])[:-1]))
            planes.append(_Plane(p, words, mask, starts.astype(np.int64), present))
        self._planes = tuple(planes)
        self._byte_table = None
        if self.n_words <= _BYTE_TABLE_WORDS and sys.byteorder == "little" and self.n_words > 0:
            bit_weight = np.zeros(n_bits, dtype=np.int64)
            bit_weight[self._bit] = weight
            values = (np.arange(256)[None, :] >> np.arange(8)[:, None]) & 1  # (bit, byte value)
            table = bit_weight.reshape(-1, 8) @ values  # (byte position, byte value)
            self._byte_table = table.ravel()
            self._byte_offsets = np.arange(self.n_words * 8, dtype=np.intp) * 256
            present = np.flatnonzero(class_words > 0)
            self._byte_classes = present
            self._byte_starts = (word_start[present] * 8).astype(np.intp)

    # ----------------------------------------------------------------------------------------

    def class_counts(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Requests of each latency class satisfying each pattern.

        Parameters
        ----------
        lo, hi : ndarray of int, shape (n_patterns, n_attributes)
            Pattern ``i`` has the condition ``[lo[i, j], hi[i, j])`` on attribute ``j`` when
            ``lo[i, j] >= 0`` (no condition when ``-1``); ``0 <= lo < hi <= n_bins[j]``.

        Returns
        -------
        ndarray of int64, shape (n_patterns, n_classes)
            The empty pattern counts every request.
        """
        lo = np.asarray(lo)
        hi = np.asarray(hi)
        n = lo.shape[0]
        active = lo >= 0
        n_active = active.sum(axis=1)
        if n and n_active.all() and n * int(n_active.max()) * self.n_words * 8 <= _CHUNK_BYTES:
            return self._counts_of(lo, hi, active, n_active)  # one chunk, no empty pattern
        out = np.empty((n, self.n_classes), dtype=np.int64)
        empty = n_active == 0
        out[empty] = self.class_sizes
        todo = np.flatnonzero(~empty)
        if todo.size == 0:
            return out
        per_row_bytes = max(1, int(n_active[todo].max())) * self.n_words * 8
        chunk = max(1, _CHUNK_BYTES // per_row_bytes)
        for start in range(0, todo.size, chunk):
            rows = todo[start : start + chunk]
            out[rows] = self._counts_of(lo[rows], hi[rows], active[rows], n_active[rows])
        return out

    def condition_bits(self, attribute: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Bit strings of single conditions: the requests satisfying each.

        Parameters
        ----------
        attribute, lo, hi : ndarray of int, shape (n,)
            Condition ``[lo[i], hi[i])`` on attribute ``attribute[i]``; ``lo[i] == -1``: no condition
            (every bit set, padding included, which weighs nothing).

        Returns
        -------
        ndarray of uint64, shape (n, n_words)
            A pattern's string is the AND of its conditions' strings; :meth:`count_bits` counts it.
        """
        attribute, lo, hi = (np.asarray(x, dtype=np.int64) for x in (attribute, lo, hi))
        active = lo >= 0
        start = self._offsets[attribute]
        bits = self._checks[np.where(active, start + lo, 0)] & ~self._checks[np.where(active, start + hi, 0)]
        bits[~active] = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
        return bits

    def count_bits(self, sat: np.ndarray) -> np.ndarray:
        """Requests of each latency class among the set bits of bit strings ``sat`` ``(n, n_words)``
        (weighted popcounts), shape ``(n, n_classes)``."""
        return self._weighted_popcount(sat)

    def _counts_of(self, lo, hi, active, n_active) -> np.ndarray:
        ii, jj = np.nonzero(active)  # row-major: conditions grouped by pattern
        a = self._offsets[jj] + lo[ii, jj]
        b = self._offsets[jj] + hi[ii, jj]
        sat = self._checks[a]
        sat &= ~self._checks[b]
        starts = np.concatenate(([0], np.cumsum(n_active)[:-1]))
        if sat.shape[0] != lo.shape[0]:
            sat = np.bitwise_and.reduceat(sat, starts, axis=0)
        return self._weighted_popcount(sat)

    def _weighted_popcount(self, sat: np.ndarray) -> np.ndarray:
        out = np.zeros((sat.shape[0], self.n_classes), dtype=np.int64)
        if self._byte_table is not None:
            weights = self._byte_table[np.ascontiguousarray(sat).view(np.uint8) + self._byte_offsets]
            out[:, self._byte_classes] = np.add.reduceat(weights, self._byte_starts, axis=1)
            return out
        for plane in self._planes:
            words = sat if plane.words is None else sat[:, plane.words]
            ones = np.bitwise_count(words & plane.mask)
            sums = np.add.reduceat(ones, plane.starts, axis=1, dtype=np.int64)
            out[:, plane.classes] += sums << plane.shift
        return out


def _pack(bits: np.ndarray) -> np.ndarray:
    """Bool array of length 64 * w -> w little-endian uint64 words (bit i of word k = bits[64k + i])."""
    return np.packbits(bits, bitorder="little").view("<u8").astype(np.uint64, copy=False)


@dataclass(frozen=True)
class SearchResult:
    """Best pattern found for one sub-interval ``[s_first, s_last)`` by a search (GA or B&B).

    Attributes
    ----------
    first, last : int
        Split point indices of the sub-interval.
    lo, hi : ndarray of int, shape (n_attributes,)
        The pattern as code ranges (``-1``: no condition on the attribute). All ``-1`` when no
        pattern with a true positive was found.
    class_counts : ndarray of int64, shape (n_classes,)
        Requests of each latency class satisfying the pattern.
    tp, fp, n_positives : int
    f_score : float
        ``Q(P, [s_first, s_last))``; 0 when ``tp == 0``.
    n_evaluated : int
        Patterns whose bits were counted. GA: over all the sub-intervals searched together (one
        batch), repeats served from the cache not counted; B&B: for this sub-interval.
    exhaustive : bool
        True when the search proved optimality (B&B finished within its budget); always False
        for the GA.
    history : ndarray of float, shape (n_generations + 1,)
        GA only: best F-score after each generation (empty for B&B).
    """

    first: int
    last: int
    lo: np.ndarray
    hi: np.ndarray
    class_counts: np.ndarray
    tp: int
    fp: int
    n_positives: int
    f_score: float
    n_evaluated: int
    exhaustive: bool = False
    history: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def n_conditions(self) -> int:
        return int(np.count_nonzero(self.lo >= 0))


def _without_each(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pattern's conditions (attribute indices) and, row ``r``, the pattern without condition ``r``."""
    active = np.flatnonzero(lo >= 0)
    trial_lo = np.repeat(lo[None], active.size, axis=0)
    trial_hi = np.repeat(hi[None], active.size, axis=0)
    trial_lo[np.arange(active.size), active] = -1
    trial_hi[np.arange(active.size), active] = -1
    return active, trial_lo, trial_hi


def simplify(evaluator: PatternEvaluator, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop conditions that do not change which requests satisfy the pattern.

    A condition is redundant when removing it leaves every latency class count unchanged (the
    satisfied set can only grow when a condition is removed, so equal counts mean an equal set).
    Conditions are tried in attribute order, one removal at a time, until none is redundant.
    The pattern keeps at least one condition.
    """
    lo = np.array(lo, copy=True)
    hi = np.array(hi, copy=True)
    target = evaluator.class_counts(lo[None], hi[None])[0]
    while True:
        active, trial_lo, trial_hi = _without_each(lo, hi)
        if active.size <= 1:
            return lo, hi
        same = np.flatnonzero((evaluator.class_counts(trial_lo, trial_hi) == target).all(axis=1))
        if same.size == 0:
            return lo, hi
        lo[active[same[0]]] = -1
        hi[active[same[0]]] = -1


# --------------------------------------------------------------------------------------------
# Beyond the paper: a pattern must lift its sub-interval above chance; the shortest pattern wins
# --------------------------------------------------------------------------------------------


def min_precision(n_positives: np.ndarray, n_requests: int, min_lift: float | None) -> np.ndarray:
    """Least precision of an admissible pattern for sub-intervals of ``n_positives`` requests.

    A sub-interval holding a share ``b`` of all requests is described by chance with precision
    ``b`` (the empty pattern). A pattern is admissible when it lifts that share by ``min_lift``:
    precision ``>= min(min_lift * b, 1 - (1 - b) / min_lift)``: the share of the sub-interval's
    requests multiplied by ``min_lift``, or, when that is out of reach (``b`` near or above
    ``1 / min_lift``), the share of other requests divided by it. Without this, a pattern true of
    nearly every request (``op exclusive < 62 ms``) scores the F-score ``2b / (1 + b)`` of chance,
    0.67 for a sub-interval holding half the requests, and wins over a real cause that explains
    a part. Beyond the paper; ``None`` gives 0 (every pattern admissible, as the paper).

    Parameters
    ----------
    n_positives : ndarray of int, shape (n_sub_intervals,)
    n_requests : int
    min_lift : float or None

    Returns
    -------
    ndarray of float, shape (n_sub_intervals,)
    """
    n_positives = np.asarray(n_positives, dtype=np.float64)
    if min_lift is None or n_requests <= 0:
        return np.zeros(n_positives.shape)
    b = n_positives / n_requests
    return np.minimum(min_lift * b, 1.0 - (1.0 - b) / min_lift)


def admissible_f_score(tp: np.ndarray, support: np.ndarray, n_positives, least_precision) -> np.ndarray:
    """F-score (eq. 5) of patterns, 0 where the precision ``tp / support`` is below ``least_precision``.

    The F-score is :func:`~tracesleuth.analyses.metrics.f_score_from_counts` of ``(tp, support -
    tp, n_positives)`` bit for bit, written out because the searches call this once per
    generation or step on small arrays, where that function's general checks cost more than the
    arithmetic: counts below 2**53 are exact in float64, so ``tp + fp + n_positives`` is
    ``support + n_positives``, and where ``tp == 0`` the quotient is 0 already.
    """
    tp = np.asarray(tp, dtype=np.float64)
    support = np.asarray(support, dtype=np.float64)
    f = 2.0 * tp / np.maximum(support + n_positives, 1.0)
    precision = tp / np.maximum(support, 1.0)
    return np.where(precision >= np.asarray(least_precision) - 1e-12, f, 0.0)


def prune(evaluator: PatternEvaluator, lo: np.ndarray, hi: np.ndarray, first: int, last: int, *,
          tolerance: float, least_precision: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The shortest pattern within ``tolerance`` of the F-score of ``(lo, hi)``, by backward elimination.

    Repeatedly removes the condition whose removal lowers the F-score of the sub-interval
    ``[s_first, s_last)`` the least, while the F-score stays within ``tolerance`` of the
    original's and the pattern stays admissible (:func:`admissible_f_score`). With
    ``tolerance=0`` this is :func:`simplify`: only conditions that change nothing go (every class
    count compared), as the paper's patterns were reported. A pattern keeps at least one condition. Beyond the paper: the GA keeps
    conditions that happen to hold for its sub-interval's requests (``x exclusive < 861 us``);
    they make patterns long without explaining anything.

    Returns
    -------
    lo, hi : ndarray of int, shape (n_attributes,)
    """
    if tolerance <= 0:
        return simplify(evaluator, lo, hi)
    lo = np.array(lo, copy=True)
    hi = np.array(hi, copy=True)
    n_pos = int(evaluator.class_sizes[first + 1 : last + 1].sum())

    def scores(counts):
        tp = counts[:, first + 1 : last + 1].sum(axis=1)
        return admissible_f_score(tp, counts.sum(axis=1), n_pos, least_precision)

    target = float(scores(evaluator.class_counts(lo[None], hi[None]))[0])
    while True:
        active, trial_lo, trial_hi = _without_each(lo, hi)
        if active.size <= 1:
            return lo, hi
        f = scores(evaluator.class_counts(trial_lo, trial_hi))
        best = int(np.argmax(f))
        if f[best] < target - tolerance or f[best] <= 0:
            return lo, hi
        lo, hi = trial_lo[best], trial_hi[best]
