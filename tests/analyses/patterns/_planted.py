"""A seeded encoded problem with a planted pattern, shared by the GA and B&B tests."""

from __future__ import annotations

import numpy as np

from tracesleuth.analyses.patterns._bitsets import PatternEvaluator

N_BINS = np.array([4, 4, 4, 4, 3, 3])
CATEGORICAL = np.array([False, False, False, False, True, True])


def planted_problem(seed: int, *, planted_lo, planted_hi, n: int = 3000, flip: float = 0.01):
    """Positives (latency class 1) are the requests satisfying the planted pattern, with noise.

    Classes: 0 below the interval, 1 the interval ``[s_0, s_1)``, 2 above. Returns the evaluator,
    the planted pattern's F-score and the codes.
    """
    rng = np.random.default_rng(seed)
    m = N_BINS.size
    codes = np.stack([rng.integers(-1 if j == 0 else 0, N_BINS[j], size=n) for j in range(m)], axis=1)
    lo, hi = np.asarray(planted_lo), np.asarray(planted_hi)
    on = lo >= 0
    sat = np.all(~on | ((codes >= np.where(on, lo, 0)) & (codes < np.where(on, hi, 1))), axis=1)
    positive = sat ^ (rng.random(n) < flip)
    latency_class = np.where(positive, 1, np.where(rng.random(n) < 0.5, 0, 2))
    ev = PatternEvaluator(codes, N_BINS, latency_class, 3)
    counts = ev.class_counts(lo[None], hi[None])[0]
    tp = counts[1]
    planted_f = 2 * tp / (counts.sum() + positive.sum())
    return ev, float(planted_f), codes
