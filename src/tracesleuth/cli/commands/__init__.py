"""The analyses' commands of the ``tracesleuth`` command line, one module per analysis.

Each module's ``register(app, evaluate_app)`` adds the analysis's command and its evaluation
command; the registry (:data:`tracesleuth.analyses.ANALYSES`, its ``command`` part) names them,
and :mod:`tracesleuth.cli.app` registers every one from there. They sit in the CLI layer because
they use its pieces (:mod:`tracesleuth.cli._common`), the analyses and their evaluation
protocols, and the scale-out (:mod:`tracesleuth.scale`, for ``--scheduler``).
"""
