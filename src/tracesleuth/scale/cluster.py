"""Where the partitions' work runs (``--scheduler serial|local|threads|ADDRESS``) and how its progress
is shown.

* ``serial``: no Dask: each step's partitions one after another in this process, the spans
  split by trace id on disk first (:func:`~tracesleuth.scale.table.shuffle_by_trace`), so the
  memory is one partition's and a table's, never the whole store's. The command line's default
  for one store of more spans than one partition (:func:`tracesleuth.cli._common.choose_scheduler`).
* ``threads``: Dask's threaded scheduler in this process (no cluster; one machine's cores).
* ``local``: a :class:`distributed.LocalCluster` started for the command and stopped after it:
  one worker process per core (at most :data:`LOCAL_WORKERS`), one thread each, each with a
  memory limit (:data:`WORKER_MEMORY`, or the machine's memory shared out when smaller). Workers
  spill to disk before they reach it, and a task on a worker that dies is run again elsewhere
  (Dask's retries), which the table's steps allow: each writes its own files atomically.
* ``ADDRESS`` (``tcp://host:8786``, ``host:8786``): an existing scheduler. Its workers must
  reach the store and the work directory at the same paths (a shared file system).

Dask and distributed are imported only here, when a Dask scheduler is asked for: the rest of
tracesleuth (``serial`` included) runs without them.
"""

from __future__ import annotations

import os
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from ..errors import ParameterError, TraceSleuthError

__all__ = ["LOCAL_WORKERS", "SCHEDULERS", "Scheduler", "SchedulerError", "WORKER_MEMORY", "connect"]

#: The scheduler names ``--scheduler`` takes besides an address.
SCHEDULERS = ("local", "serial", "threads")
#: Workers of a ``local`` cluster at most (one per core below that).
LOCAL_WORKERS = 4
#: Memory limit of each ``local`` worker (bytes) at most.
WORKER_MEMORY = 4 * 2**30
#: Seconds to wait for a scheduler at an address.
CONNECT_TIMEOUT_S = 10

#: ``on_progress(label, done, total)``: called as the tasks of a step finish.
Progress = Callable[[str, int, int], None]


class SchedulerError(TraceSleuthError):
    """A Dask scheduler cannot be reached or started (the message names its address)."""


@dataclass
class Scheduler:
    """A scheduler in use (what :func:`connect` yields).

    Attributes
    ----------
    name : str
        ``"serial"``, ``"threads"``, ``"local"`` or the address given.
    client : distributed.Client or None
        None for ``serial`` and ``threads``.
    dashboard : str or None
        The Dask dashboard's URL (None for ``serial`` and ``threads``, or when the scheduler has
        none).
    on_progress : callable or None
        Told how many tasks of each step are done.
    """

    name: str
    client: object = None
    dashboard: str | None = None
    on_progress: Progress | None = None
    _stack: ExitStack | None = field(default=None, repr=False)

    def keep(self, resource):
        """Close ``resource`` (a :class:`~tracesleuth.scale.table.DaskTraceTable`...) when the
        scheduler's ``with`` block ends; returns it."""
        if self._stack is not None:
            self._stack.callback(resource.close)
        return resource

    @property
    def serial(self) -> bool:
        """Whether the work runs in this process one partition after another, without Dask."""
        return self.name == "serial"

    @property
    def address(self) -> str | None:
        """The scheduler's address (None for ``threads``)."""
        return None if self.client is None else self.client.scheduler.address

    @property
    def n_workers(self) -> int:
        """Workers (threads for ``threads``, 1 for ``serial``)."""
        if self.serial:
            return 1
        if self.client is None:
            return os.cpu_count() or 1
        return len(self.client.scheduler_info().get("workers", {})) or 1

    def map(self, function: Callable, arguments: Sequence[tuple], label: str) -> list:
        """``[function(*a) for a in arguments]``: one task each, on Dask, or in this process one
        after another for ``serial``; the results in order (as :meth:`compute`).

        ``function`` and its arguments must pickle (a cluster's workers run them).
        """
        arguments = list(arguments)
        if not self.serial:
            from dask import delayed

            return self.compute([delayed(function)(*a) for a in arguments], label)
        report = self.on_progress or (lambda *_: None)
        report(label, 0, len(arguments))
        results = []
        for k, a in enumerate(arguments, start=1):
            results.append(function(*a))
            report(label, k, len(arguments))
        return results

    def compute(self, tasks: Sequence, label: str) -> list:
        """Compute Dask collections or delayed values; their results, in order.

        Tasks that raise re-raise here (a :class:`~tracesleuth.errors.TraceSleuthError` raised on
        a worker arrives as itself). Progress goes to :attr:`on_progress` as tasks finish.

        Raises
        ------
        SchedulerError
            A task killed every worker Dask ran it on (memory), or the scheduler went away.
        """
        import dask

        tasks = list(tasks)
        if not tasks:
            return []
        report = self.on_progress or (lambda *_: None)
        report(label, 0, len(tasks))
        if self.client is None:
            from dask.callbacks import Callback

            done = [0]

            class _Ticks(Callback):  # counts the top-level tasks as they finish
                def _posttask(self, key, result, dsk, state, worker_id):
                    if key in keys:
                        done[0] += 1
                        report(label, done[0], len(tasks))

            keys = {t.key for t in tasks if hasattr(t, "key")}
            with _Ticks():
                return list(dask.compute(*tasks, scheduler="threads"))
        from distributed import as_completed
        from distributed.comm import CommClosedError
        from distributed.scheduler import KilledWorker

        try:
            futures = self.client.compute(tasks)
            for k, _ in enumerate(as_completed(futures), start=1):
                report(label, k, len(tasks))
            return self.client.gather(futures)
        except KilledWorker as e:  # Dask ran it again on other workers, and they died too
            raise SchedulerError(f"{label}: a task killed every worker that ran it ({e}); give the workers more "
                                 "memory, or make the partitions smaller") from None
        except CommClosedError as e:
            raise SchedulerError(f"{label}: lost the Dask scheduler {self.name}: {e}") from None


@contextmanager
def connect(scheduler: str, *, n_workers: int | None = None, memory_limit: int | None = None,
            processes: bool = True, on_progress: Progress | None = None) -> Iterator[Scheduler]:
    """Use a Dask scheduler for the time of a ``with`` block.

    Parameters
    ----------
    scheduler : str
        ``"serial"``, ``"threads"``, ``"local"`` or a scheduler's address (``tcp://host:8786``).
    n_workers : int, optional
        ``local``: worker processes (default one per core, at most :data:`LOCAL_WORKERS`).
    memory_limit : int, optional
        ``local``: bytes per worker (default :data:`WORKER_MEMORY`, or the machine's memory over
        the workers when smaller).
    processes : bool, default=True
        ``local``: workers in processes (False: threads of this process, quicker to start).
    on_progress : callable, optional
        ``on_progress(label, done, total)`` as the tasks of each step finish.

    Yields
    ------
    Scheduler
        What is given to :meth:`Scheduler.keep` is closed when the block ends, before the
        scheduler.

    Raises
    ------
    SchedulerError
        Dask is not installed, the address cannot be reached within :data:`CONNECT_TIMEOUT_S`
        seconds, or the local cluster cannot start; the message names the address.
    ParameterError
        ``scheduler`` is empty.
    """
    if not scheduler:
        raise ParameterError("--scheduler: give 'local', 'serial', 'threads' or a Dask scheduler's address "
                             "(tcp://host:8786)")
    if scheduler == "serial":
        with ExitStack() as stack:
            chosen = Scheduler("serial", on_progress=on_progress)
            chosen._stack = stack
            yield chosen
        return
    try:
        import dask.dataframe  # noqa: F401 - both are optional dependencies: say so before anything runs
        if scheduler != "threads":
            import distributed  # noqa: F401
    except ImportError as e:
        raise SchedulerError(f"--scheduler {scheduler} needs Dask, which is not installed ({e}): "
                             "pip install 'tracesleuth[dask]'") from None
    with ExitStack() as stack:
        if scheduler == "threads":
            chosen = Scheduler("threads", on_progress=on_progress)
        else:
            client = _client(scheduler, stack, n_workers, memory_limit, processes)
            chosen = Scheduler(scheduler, client, client.dashboard_link, on_progress)
        chosen._stack = stack
        yield chosen


def _client(scheduler: str, stack: ExitStack, n_workers, memory_limit, processes):
    """A distributed client of a new local cluster or of the scheduler at an address (both closed
    by ``stack``)."""
    import dask
    from distributed import Client, LocalCluster

    # Worker log lines (a restarted worker, a spilled partition) are Dask's, not the command's output.
    stack.enter_context(dask.config.set({"distributed.logging.distributed": "error"}))
    if scheduler == "local":
        # A worker of one thread uses one core: Dask sets that for OpenMP (Arrow's pool too) and
        # BLAS before a worker starts; polars' pool is set the same way. Dask also sets glibc's
        # MALLOC_TRIM_THRESHOLD_, which turns off glibc's adaptive mmap threshold: then every large
        # numpy array is a fresh mmap whose pages fault in, a partition's task spent half its time
        # in the kernel (measured: step 2 on 330,000 spans 0.37 s, 0.2 s of it system time; without
        # it 0.20 s, as in one process). Unset, glibc keeps its defaults.
        stack.enter_context(dask.config.set({"distributed.nanny.pre-spawn-environ.POLARS_MAX_THREADS": 1,
                                             "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}))
        workers = n_workers or max(1, min(os.cpu_count() or 1, LOCAL_WORKERS))
        memory = memory_limit or min(WORKER_MEMORY, _total_memory() // workers)
        try:
            cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                                                       memory_limit=memory, dashboard_address=":0", silence_logs=50))
        except Exception as e:  # noqa: BLE001 - any failure to start is reported in one line
            raise SchedulerError(f"--scheduler local: the local Dask cluster did not start: {e}") from None
        return stack.enter_context(Client(cluster))
    address = scheduler if "://" in scheduler else f"tcp://{scheduler}"
    try:
        client = Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError) as e:
        raise SchedulerError(f"--scheduler {scheduler}: cannot reach a Dask scheduler at {address} within "
                             f"{CONNECT_TIMEOUT_S} s ({type(e).__name__}); start one (dask scheduler) or use "
                             "--scheduler local") from None
    return stack.enter_context(client)


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 8 * 2**30
