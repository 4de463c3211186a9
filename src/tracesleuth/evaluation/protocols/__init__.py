"""The analyses' evaluation protocols, one module per analysis: simulate (or read recorded
faults) with ground truth, fit, then score.

Each module's ``evaluate(*, quick, random_state)`` is named by the registry
(:data:`tracesleuth.analyses.ANALYSES`, its ``evaluation`` part); ``tracesleuth evaluate NAME``
runs it. They sit in the evaluation layer with the simulators and recorded data they use
(:mod:`tracesleuth.evaluation.eshopper`, :mod:`tracesleuth.evaluation.nezha`, ...), above the
analyses and the report.
"""
