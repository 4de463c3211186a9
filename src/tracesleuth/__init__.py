"""tracesleuth: why are requests in a distributed system slow? Analyses of distributed traces.

Layout: :mod:`tracesleuth.schema` (the span columns and their units), :mod:`tracesleuth.io`
(formats in), :mod:`tracesleuth.model` (trace assembly and the per-request trace table),
one sub-package per analysis (:mod:`tracesleuth.patterns`, ...), :mod:`tracesleuth.cli`.
"""

__version__ = "0.1.0"
