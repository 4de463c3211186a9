"""Scale-out: the trace table and the analyses over span stores larger than one process's memory.

The in-process path (:func:`tracesleuth.model.build_trace_table`) holds a store's spans in one
process. Here the same per-partition functions run task by task, on Dask or (``serial``) one
after another in this process: the store's row groups are split by trace id through the work
directory and turned into a trace table partition by partition (:mod:`.table`); the endpoint and
the attribute columns are reductions over the partitions. The analyses then run on that table
(:mod:`.analyses`): what is big and adds up is done on the workers, the rest in this process
(each function says which).

``tracesleuth table|patterns|compare|localize|paths|annotate|diagnose|analyze STORE --scheduler
serial|local|threads|ADDRESS`` uses this, and so does the default (``serial``) for one store of more
spans than one partition (:func:`tracesleuth.cli._common.choose_scheduler`); for other input, or
``--scheduler whole``, nothing here is imported. Dask is needed only for a Dask scheduler.

Modules: :mod:`.cluster` (the scheduler: serial, a local cluster, threads or an address; progress),
:mod:`.spans` (a store's parts, checked), :mod:`.table` (the trace table by partitions),
:mod:`.analyses` (patterns, compare, localize on a Dask-built table), :mod:`.telemetry` (the
diagnosis's rows of spans and requests by partitions), :mod:`.synthetic` (stores of any size for
tests and benchmarks).
"""

from .._lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "DaskTraceTable": ".table:DaskTraceTable",
    "CollectedTraceTable": ".table:CollectedTraceTable",
    "Scheduler": ".cluster:Scheduler",
    "SchedulerError": ".cluster:SchedulerError",
    "connect": ".cluster:connect",
    "dask_trace_table": ".table:dask_trace_table",
    "store_parts": ".spans:store_parts",
})
__all__ = ["CollectedTraceTable", "DaskTraceTable", "Scheduler", "SchedulerError", "connect", "dask_trace_table",
           "store_parts"]
