"""Scale-out on Dask: the trace table of synthetic span stores of 10^6, 10^7 (and 10^8) spans.

For each size a synthetic store is written (:mod:`tracesleuth.scale.synthetic`; into ``--dir``,
deleted afterwards, never committed) and its trace table built

* on Dask, on a ``distributed.LocalCluster`` of ``--workers`` worker processes of one thread
  and ``--memory`` GB each: wall time, time of each step, the peak memory (VmHWM) of each worker
  process and of the client, and the per-partition cost of each step (task seconds per
  partition of 500,000 spans: the figures the plan for 10^10 spans in ``docs/scale-out.md``
  starts from), and the CPU time of the worker processes per partition and of the client;
* in this process (:func:`tracesleuth.model.build_trace_table` on the store read whole), up to
  ``--in-process-max`` spans: wall time, CPU time (per 500,000 spans) and peak memory (in a child process each, so that each
  peak is its own).

Every figure is the median of ``--runs`` runs (one run above 10^7 spans). Run alone: the
machine has 2 cores.

    python3 benchmarks/bench_dask.py --sizes 1e6,1e7 --runs 3
    python3 benchmarks/bench_dask.py --sizes 1e8 --runs 1 --dir /work/tmp
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s() -> float:
    """This process's CPU time so far (user + system, every thread), seconds."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def in_process(store: str) -> dict:
    """Child process: read the store and build its table; time, CPU time and peak memory."""
    import tracesleuth
    from tracesleuth.model import build_trace_table
    from tracesleuth.io.store import SpanStore

    tracesleuth.use_system_allocator()
    t0, c0 = time.perf_counter(), cpu_s()
    spans = SpanStore(store, create=False).read_spans()
    t1 = time.perf_counter()
    table = build_trace_table(spans)
    t2 = time.perf_counter()
    return {"read_s": t1 - t0, "build_s": t2 - t1, "total_s": t2 - t0, "cpu_s": cpu_s() - c0,
            "requests": table.n_requests, "peak_mb": peak_rss_mb()}


def on_dask(store: str, workers: int, memory_gb: float, partition_spans: int) -> dict:
    """Child process: the table on a fresh LocalCluster; times per step and peak memories."""
    import tracesleuth
    from tracesleuth.scale import connect, dask_trace_table

    tracesleuth.use_system_allocator()
    steps: dict[str, list[float]] = {}

    def on_progress(label: str, done: int, total: int) -> None:
        now = time.perf_counter()
        steps.setdefault(label, [now, now, total])[1] = now

    with connect("local", n_workers=workers, memory_limit=int(memory_gb * 2**30), on_progress=on_progress) as sched:
        from dask.utils import key_split
        from distributed import get_task_stream

        sched.client.run(_reset_peak)
        worker_cpu = sum(sched.client.run(cpu_s).values())
        t0, c0 = time.perf_counter(), cpu_s()
        with get_task_stream(sched.client) as stream, \
                dask_trace_table(store, scheduler=sched, partition_spans=partition_spans) as table:
            t1, c1 = time.perf_counter(), cpu_s()
            worker_cpu = sum(sched.client.run(cpu_s).values()) - worker_cpu
            requests, partitions = table.n_requests, len(table.by_trace)
        worker_peaks = sorted(sched.client.run(peak_rss_mb).values())
    # Dask's own record of each task: the seconds from its start to its end on a worker (its
    # "compute" interval), summed by the task's function.
    task_seconds: dict[str, float] = {}
    for task in stream.data:
        name = key_split(task["key"])
        task_seconds[name] = task_seconds.get(name, 0.0) + sum(
            s["stop"] - s["start"] for s in task["startstops"] if s["action"] == "compute")
    # CPU time of the worker processes (the nannies and the scheduler's are not counted) and of the
    # client, against the in-process build's CPU time: the cost without the wait of two workers
    # sharing two cores with the rest.
    out = {"total_s": t1 - t0, "requests": requests, "partitions": partitions, "worker_peak_mb": worker_peaks,
           "client_peak_mb": peak_rss_mb(), "worker_cpu_s": worker_cpu, "client_cpu_s": c1 - c0,
           "task_seconds": task_seconds, "steps": {}}
    first = t0
    for label, (start, end, total) in steps.items():
        # A step's tasks start when the previous step ends; its wall time over the tasks, times the
        # workers running them, is the cost of one task (one partition).
        out["steps"][label] = {"wall_s": end - first, "tasks": total,
                               "task_s": (end - first) * workers / max(total, 1)}
        first = end
    return out


def _reset_peak() -> None:
    """Reset the worker's VmHWM (Linux: writing 5 to clear_refs), so the peak is this run's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def child(kind: str, store: str, args) -> dict:
    """Run one measurement in a fresh Python process; its JSON result."""
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_dask as b; "
            f"print(json.dumps(b.{kind}({store!r}"
            + (f", {args.workers}, {args.memory}, {args.partition_spans}" if kind == "on_dask" else "") + ")))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=6 * 3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} failed: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1e6,1e7", help="Spans per store, comma-separated (default 1e6,1e7).")
    p.add_argument("--runs", type=int, default=3, help="Runs per size (one above 10^7 spans).")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory", type=float, default=4.0, help="GB per worker.")
    p.add_argument("--partition-spans", type=int, default=500_000)
    p.add_argument("--in-process-max", type=float, default=1e7, help="Largest store also built in-process.")
    p.add_argument("--dir", default=None, help="Where the stores are written (default: a temporary directory).")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from tracesleuth.scale.synthetic import write_synthetic_store

    results = []
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    for size in [int(float(s)) for s in args.sizes.split(",")]:
        base = Path(tempfile.mkdtemp(prefix="bench-dask-", dir=args.dir))
        try:
            t0 = time.perf_counter()
            made = write_synthetic_store(base / "store", size, seed=0, hours=max(3, size // 10**7 * 3))
            gen_s = time.perf_counter() - t0
            disk = sum(f.stat().st_size for f in (base / "store").rglob("*.parquet")) / 2**20
            runs = 1 if size > 10**7 else args.runs
            dask_runs = [child("on_dask", str(made.path), args) for _ in range(runs)]
            local_runs = [child("in_process", str(made.path), args) for _ in range(runs)] if (
                size <= args.in_process_max) else []
        finally:
            shutil.rmtree(base, ignore_errors=True)
        row = {"spans": made.spans, "traces": made.traces, "parts": made.parts, "store_mb": round(disk, 1),
               "generate_s": round(gen_s, 1), "runs": runs,
               "dask_s": round(median(dask_runs, "total_s"), 2),
               "dask_spans_per_s": round(made.spans / median(dask_runs, "total_s")),
               "worker_peak_mb": max(max(r["worker_peak_mb"]) for r in dask_runs),
               "client_peak_mb": round(median(dask_runs, "client_peak_mb")),
               "partitions": dask_runs[0]["partitions"],
               "worker_cpu_s_per_partition": round(median(dask_runs, "worker_cpu_s") / dask_runs[0]["partitions"], 3),
               "client_cpu_s": round(median(dask_runs, "client_cpu_s"), 2),
               # Dask's task stream: the seconds its tasks ran, per 500,000 spans read, by function.
               "task_s_per_partition": {name: round(statistics.median(r["task_seconds"].get(name, 0.0) for r in dask_runs)
                                                    * args.partition_spans / made.spans, 3)
                                        for name in dask_runs[0]["task_seconds"]},
               "steps": {label: {k: round(statistics.median(r["steps"][label][k] for r in dask_runs), 2)
                                 for k in ("wall_s", "task_s", "tasks")} for label in dask_runs[0]["steps"]},
               "requests": dask_runs[0]["requests"]}
        if local_runs:
            row.update(in_process_s=round(median(local_runs, "total_s"), 2),
                       in_process_cpu_s_per_partition=round(median(local_runs, "cpu_s") * args.partition_spans
                                                            / made.spans, 3),
                       in_process_peak_mb=round(median(local_runs, "peak_mb")),
                       in_process_spans_per_s=round(made.spans / median(local_runs, "total_s")))
            assert local_runs[0]["requests"] == row["requests"]
        results.append(row)
        if not args.json:
            print(f"{made.spans:>12,} spans ({made.parts} parts, {disk:,.0f} MB, {made.traces:,} traces; generated "
                  f"in {gen_s:.0f} s), {runs} run(s):")
            print(f"  Dask, {args.workers} workers x {args.memory:g} GB: {row['dask_s']:.1f} s "
                  f"({row['dask_spans_per_s']:,} spans/s), peak per worker {row['worker_peak_mb']:,.0f} MB, "
                  f"client {row['client_peak_mb']:,} MB, {row['partitions']} partitions")
            for label, st in row["steps"].items():
                print(f"    {label}: {st['wall_s']:.1f} s for {st['tasks']:.0f} tasks, {st['task_s']:.2f} s per task")
            tasks = row["task_s_per_partition"]
            print(f"    task-seconds per {args.partition_spans:,} spans (Dask's task stream): {sum(tasks.values()):.2f} ("
                  + ", ".join(f"{name} {v:.2f}" for name, v in tasks.items()) + ")")
            print(f"    CPU: the workers {row['worker_cpu_s_per_partition']:.2f} s a partition of "
                  f"{args.partition_spans:,} spans, the client {row['client_cpu_s']:.1f} s in all")
            if local_runs:
                print(f"  in-process: {row['in_process_s']:.1f} s ({row['in_process_spans_per_s']:,} spans/s), "
                      f"peak {row['in_process_peak_mb']:,} MB, CPU {row['in_process_cpu_s_per_partition']:.2f} s per "
                      f"{args.partition_spans:,} spans (the workers' CPU a partition: "
                      f"{row['worker_cpu_s_per_partition'] / row['in_process_cpu_s_per_partition']:.2f} times; "
                      f"the task-seconds {sum(tasks.values()) / row['in_process_cpu_s_per_partition']:.2f} times)")
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
