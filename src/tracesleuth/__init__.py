"""tracesleuth: why are requests in a distributed system slow? Analyses of distributed traces.

Layers, from the top; a module imports only from its own layer or those below (the contracts in
pyproject.toml's ``[tool.importlinter]``, checked by ``tests/test_layers.py``), and no two modules
import each other:

1. ``__main__`` - ``python -m tracesleuth``: runs the command line.
2. :mod:`tracesleuth.cli` - the command line and each analysis's command
   (:mod:`tracesleuth.cli.commands`): it uses every layer below.
3. :mod:`tracesleuth.demo` - the live demo: services, the collector and the load, then evaluation
   and report; the CLI offers it, so it sits below the CLI.
4. :mod:`tracesleuth.evaluation` (protocols with ground truth: they fit, score and may write a
   report) | :mod:`tracesleuth.scale` (the analyses on Dask; the CLI picks it with ``--scheduler``)
   | :mod:`tracesleuth.api` (the front door below: thin verbs over the layers under it).
5. :mod:`tracesleuth.report` - HTML reports and each analysis's sections
   (:mod:`tracesleuth.report.sections`), built from fitted results.
6. :mod:`tracesleuth.analyses` - the estimators, their results and the metrics they rank by; the
   registry (:data:`tracesleuth.analyses.ANALYSES`) names the parts above as strings.
7. :mod:`tracesleuth.model` - trace assembly, the per-request trace table, call views, summaries.
8. :mod:`tracesleuth.ingest` (reads every format, writes the store) | :mod:`tracesleuth.collector`
   (the OTLP/Zipkin receiver, writing the store too).
9. :mod:`tracesleuth.io` (formats in, the span store :mod:`tracesleuth.io.store` among them) |
   :mod:`tracesleuth.instrument` (measurements of a running Python program).
10. :mod:`tracesleuth.schema` (the span columns and their units) | :mod:`tracesleuth.units`
    (durations) | ``_text`` (display text) | ``_signals`` (SIGINT/SIGTERM as exceptions) |
    ``_lazy`` (lazy exports): imported by all, importing only the errors.
11. :mod:`tracesleuth.errors` - the error types every layer raises.

The front door: ``import tracesleuth as ts`` gives ``ts.read_spans``, ``ts.read_logs``,
``ts.open_store``, ``ts.trace_table``, one verb per analysis (``ts.patterns``, ``ts.compare``,
``ts.localize``, ``ts.paths``, ``ts.annotate``, ``ts.diagnose``), ``ts.write_report`` and the
estimator classes, each imported on first use (:mod:`tracesleuth.api`).
"""

__version__ = "0.1.0"

from ._lazy import lazy_exports as _lazy_exports  # noqa: E402 - the front door below, imported on first use

#: The front door (:mod:`tracesleuth.api`): the verbs a notebook user reaches for, and the classes
#: behind them; nothing heavy is imported until one is used.
__getattr__, __dir__ = _lazy_exports(__name__, {
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
