"""Latency degradation patterns (Cortellessa & Traini, ICPE 2020).

Which conditions on operations' exclusive times, instances and request attributes explain the
requests whose latency falls in a degraded interval:

* :class:`LatencyDegradationPatterns` - the analysis (``fit(table) -> self``, ``result_``,
  ``labels_``, ``predict(table)``), a thin sequence of the stages of :mod:`.stages` and the
  refinements of :mod:`.refinements` (rules beyond the paper, each tested on its own);
* :class:`DegradedClusters` - the paper's clustering baselines (:mod:`.baselines`);
* :mod:`.results`, :mod:`.notes` - what a fit gives: frozen results and notes as records
  (``kind``, numbers, ``describe()``);
* :class:`Condition`, :class:`Pattern`, :class:`LatencyInterval` - the paper's vocabulary;
* :mod:`.split_points` - mean-shift split points, the automatic interval (the paper's rule and
  the robust one), ``"350ms:700ms"``;
* :mod:`.candidates` - the columns a pattern may use (identifiers, pass-through and asynchronous
  operations left out, with the reason);
* :data:`PAPER_SETTINGS` - the paper's method exactly (the defaults add what is beyond it);
* :mod:`.ga`, :mod:`.bnb`, :mod:`.dp` - the genetic algorithm, branch and bound and the dynamic
  program; :mod:`._bitsets` - the bit-string fitness evaluation.

``f_score`` (the pattern quality ``Q(P, I)`` from counts), ``format_duration_ns`` and
``parse_duration`` are re-exported from their homes, :mod:`tracesleuth.analyses.metrics`
(as ``f_score_from_counts``) and :mod:`tracesleuth.units`.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "f_score": "..metrics:f_score_from_counts",  # the name this package gave it first
    "format_duration_ns": "...units:format_duration_ns", "parse_duration": "...units:parse_duration",
    **{name: f"._model:{name}" for name in ("Condition", "LatencyInterval", "Pattern", "PatternQuality",
                                            "pattern_quality")},
    **{name: f".analysis:{name}" for name in ("ConditionEffect", "DegradationPatternsResult",
                                              "LatencyDegradationPatterns", "PAPER_SETTINGS", "SubIntervalPattern")},
    "DegradedClusters": ".baselines:DegradedClusters",
    "degraded_interval": ".split_points:degraded_interval", "parse_interval": ".split_points:parse_interval",
})

__all__ = [
    "Condition",
    "ConditionEffect",
    "DegradationPatternsResult",
    "DegradedClusters",
    "LatencyDegradationPatterns",
    "LatencyInterval",
    "PAPER_SETTINGS",
    "Pattern",
    "PatternQuality",
    "SubIntervalPattern",
    "degraded_interval",
    "f_score",
    "format_duration_ns",
    "parse_duration",
    "parse_interval",
    "pattern_quality",
]
