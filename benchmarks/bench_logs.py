"""Reading and templating log records: records per second and peak memory, on real logs.

Input: the Nezha TrainTicket log day (../shared/data/nezha/trainticket/2023-01-29: the 48 files of
``log/`` and the fault-free minute of ``fault_free_log/``, 106,689 records, 78 MiB of CSV). Each
measurement runs in a fresh process, ``--runs`` times; the median is printed.

* reading: :func:`tracesleuth.io.read_logs` over the 49 files (target >= 100,000 records/s);
* templating: :meth:`tracesleuth.io.log_templates.LogTemplateMiner.assign` over the records read,
  a new miner, in batches of 65,536 records as a store ingest would give them (target >= 20,000
  records/s);
* memory: the peak resident memory of reading the day 1, 2 and 4 times over (the same files
  listed again through symbolic links), minus the process's memory before the read; linear in
  records when each further 100,000 records take the same MiB (the first read also pays for the
  thread pools' and allocators' start).

The machine is shared: the load average is printed beside the figures, and each process's CPU
time too (records per CPU second: what an idle core would give).

Usage::

    python benchmarks/bench_logs.py                  # 3 runs each
    python benchmarks/bench_logs.py --runs 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DAY = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nezha" / "trainticket" / "2023-01-29"
#: Records per batch handed to the miner.
TEMPLATE_BATCH = 65_536
#: Copies of the day read for the memory measurement.
MEMORY_COPIES = (1, 2, 4)


def day_files() -> list[Path]:
    return sorted((DAY / "log").glob("*.csv.gz")) + sorted((DAY / "fault_free_log").glob("*.csv.gz"))


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _child(mode: str, paths: list[str]) -> None:
    """One measurement in this process; prints JSON on stdout."""
    import tracesleuth.io.store  # noqa: F401 - imported before timing (read_logs checks for a store)
    from tracesleuth.io import nezha_log, read_logs  # noqa: F401
    from tracesleuth.io.log_templates import LogTemplateMiner

    before = _rss_mib()
    wall, cpu = time.perf_counter(), time.process_time()
    result = read_logs(paths)
    out = {"records": result.n_records, "rejected": result.records_rejected,
           "seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu,
           "peak_rss_mib": _rss_mib() - before}
    if mode == "template":
        miner = LogTemplateMiner()
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in result.logs.to_batches(max_chunksize=TEMPLATE_BATCH):
            miner.assign(batch)
        out.update(seconds=time.perf_counter() - wall, cpu_seconds=time.process_time() - cpu,
                   templates=miner.n_templates_)
    print(json.dumps(out))


def _runs(mode: str, paths: list, runs: int) -> list[dict]:
    results = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, __file__, "--child", mode, *map(str, paths)], check=True,
                              capture_output=True, text=True)
        results.append(json.loads(done.stdout))
    return results


def _rates(results: list[dict]) -> dict:
    rates = [r["records"] / r["seconds"] for r in results]
    cpu = [r["records"] / r["cpu_seconds"] for r in results]
    return {"records": results[0]["records"], "records_per_s_median": round(statistics.median(rates)),
            "records_per_s_runs": [round(r) for r in rates],
            "records_per_cpu_s_median": round(statistics.median(cpu))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="runs per measurement; the median is reported (default 3)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1:])
        return 0
    files = day_files()
    if not files:
        print(f"no Nezha log files under {DAY}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    reading = _rates(read := _runs("read", files, args.runs))
    reading["rejected"] = read[0]["rejected"]
    templating = _rates(tpl := _runs("template", files, args.runs))
    templating["templates"] = tpl[0]["templates"]
    memory = []
    with tempfile.TemporaryDirectory(prefix="tracesleuth-bench-logs-") as tmp:
        for copies in MEMORY_COPIES:
            paths = []
            for c in range(copies):
                for f in files:
                    link = Path(tmp) / f"{c}_{f.parent.name}_{f.name}"
                    if not link.exists():
                        link.symlink_to(f)
                    paths.append(link)
            r = _runs("read", paths, 1)[0]
            step = {"records": r["records"], "peak_rss_mib": round(r["peak_rss_mib"], 1)}
            if memory:  # the memory each further 100,000 records took: level when linear
                prev = memory[-1]
                step["mib_per_100k_more_records"] = round((r["peak_rss_mib"] - prev["peak_rss_mib"])
                                                          / (r["records"] - prev["records"]) * 1e5, 1)
            memory.append(step)
    machine = {"cpus": os.cpu_count(), "python": sys.version.split()[0],
               "load_average_1min_before": round(load_before, 2),
               "load_average_1min_after": round(os.getloadavg()[0], 2)}
    results = {"machine": machine, "reading": reading, "templating": templating, "memory": memory}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"Nezha TrainTicket log day: {len(files)} files, {reading['records']:,} records "
          f"({reading['rejected']} rejected), {templating['templates']} templates")
    print(f"{'':<11} {'records/s (median)':>19} {'runs':>26} {'records/CPU s':>14} {'target':>9}")
    for name, r, target in (("reading", reading, 100_000), ("templating", templating, 20_000)):
        print(f"{name:<11} {r['records_per_s_median']:>19,} {str(r['records_per_s_runs']):>26} "
              f"{r['records_per_cpu_s_median']:>14,} {target:>9,}")
    print("peak memory of a read (RSS above the process's start):")
    for m in memory:
        more = m.get("mib_per_100k_more_records")
        print(f"  {m['records']:>9,} records: {m['peak_rss_mib']:>7} MiB"
              + (f" (+{more} MiB per 100k more records)" if more is not None else ""))
    print(f"({args.runs} runs each, one process per run; {machine['cpus']} CPUs, load average "
          f"{machine['load_average_1min_before']} before, {machine['load_average_1min_after']} after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
