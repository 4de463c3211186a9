"""The analyses' report sections, one module per analysis.

Each module's ``build_sections(fitted, context)`` turns a fitted estimator's result into
sections of :mod:`tracesleuth.report.document` (never refitting); the registry
(:data:`tracesleuth.analyses.ANALYSES`, its ``section`` part) names them. They sit in the report
layer, above the analyses whose results they show.
"""
