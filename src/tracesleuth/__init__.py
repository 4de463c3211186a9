"""tracesleuth: why are requests in a distributed system slow? Analyses of distributed traces.

Layout: :mod:`tracesleuth.schema` (the span columns and their units), :mod:`tracesleuth.io`
(formats in), :mod:`tracesleuth.model` (trace assembly and the per-request trace table),
one sub-package per analysis (:mod:`tracesleuth.analyses.patterns`, ...), :mod:`tracesleuth.cli`.
"""

__version__ = "0.1.0"

from ._lazy import lazy_exports  # noqa: E402 - the front door below, imported on first use

#: The front door (:mod:`tracesleuth.api`): the verbs a notebook user reaches for, and the classes
#: behind them; nothing heavy is imported until one is used.
__getattr__, __dir__ = lazy_exports(__name__, {
    "read_spans": ".io:read_spans", "read_logs": ".io:read_logs",
    **{name: f".api:{name}" for name in ("open_store", "trace_table", "patterns", "compare", "localize", "paths",
                                         "annotate", "diagnose", "write_report")},
    "LatencyDegradationPatterns": ".analyses.patterns:LatencyDegradationPatterns",
    "RequestFlowComparison": ".analyses.compare:RequestFlowComparison",
    "RootCauseLocalization": ".analyses.localize:RootCauseLocalization",
    "CausalPaths": ".analyses.paths:CausalPaths",
    "PerformanceAnnotations": ".analyses.annotate:PerformanceAnnotations",
    "Diagnosis": ".analyses.diagnose:Diagnosis",
})


def use_system_allocator() -> bool:
    """Give Arrow's allocations to the system allocator (``malloc``), for a lower peak memory.

    Arrow's default allocator (mimalloc) keeps memory freed by each thread for that thread's
    reuse, so the reader threads and the Parquet decoder and writer each hold on to a share.
    Measured with ``benchmarks/bench_foundation.py`` (2 cores, 3 runs each): the TrainTicket
    day's CSV ingest peaks at 2.45-2.54x the spans' Arrow size instead of 3.4-3.8x, a 500,000
    span OTLP JSON ingest at 1.50-1.51x instead of 1.74-1.83x; neither is slower.
    The ``tracesleuth`` command calls this when it starts; a program using the API can call it
    first thing too. It changes nothing when the environment variable
    ``ARROW_DEFAULT_MEMORY_POOL`` chooses Arrow's allocator.

    Returns
    -------
    bool
        Whether Arrow now allocates with the system allocator.
    """
    import os

    import pyarrow as pa

    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        pa.set_memory_pool(pa.system_memory_pool())
    return pa.default_memory_pool().backend_name == "system"
