"""Ingests interrupted at random moments: the store never holds part of one.

Runs ``python -m tracesleuth ingest --force`` on a window of the TrainTicket day's span CSV files
(``--files`` files, a few MB) and the log files of the same minutes, spans and logs in one ingest
(``--force`` so that every run reads its whole window, even files an earlier run committed), into
one store, ``--runs`` times, and sends each a signal at a random moment (seeded): SIGINT,
SIGTERM and SIGKILL in turn. The moment is drawn uniformly from
``[0, 1.1 T]``, ``T`` being how long an uninterrupted ingest of a window takes (measured first),
so that some runs are stopped while starting, many while they stage their parts, and some after
they commit.

After each run the store is checked (:func:`check_store`): every span and log part is credited
to exactly one committed manifest entry and every entry's parts exist and hold exactly the spans
and log records it records (no part of an uncommitted ingest is visible, none of a committed one
is missing), no entry is left ``committing`` once a reader has opened the store, the spans and
logs in the store are the sums over the committed entries, and every template id of a stored
log record is one of the store's templates (the templates' state was committed with the parts);
a run that committed added exactly its window's spans and log records, one that did not added
nothing. A run stopped by SIGINT/SIGTERM must exit 130/143 with one line
saying what was not committed (or 0 when it had finished before the signal; or be ended by the
signal when it came before the command line's signal guard, ``tracesleuth.cli.main``, began:
in the interpreter's start or while Python imported the package). Then all
the day's span and log files are ingested twice without ``--force``: the first adds the files no
run committed, the second adds nothing (exit 2: every file already in the store), and the counts
are unchanged.

Usage::

    python benchmarks/bench_store_interrupts.py [--runs 20] [--seed 0] [--files 16] [--json]

Exit status 0 when every check held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

DAY = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nezha" / "trainticket" / "2023-01-29"
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
#: Span files by which consecutive windows move.
STEP_FILES = 12
#: Seconds a run may take before it is called hung.
RUN_SECONDS = 300
#: The random moment is drawn from [0, LATE_FACTOR * T]: some signals come after the commit.
LATE_FACTOR = 1.1
#: A traceback frame of tracesleuth.cli.main: the signal guard had begun.
IN_MAIN = re.compile(r'tracesleuth[/\\]cli[/\\]__init__\.py", line \d+, in main\b')
#: The store's tables checked: (name, the store's listing, the entry's parts, the entry's count).
TABLES = (("spans", "span_files", "parts", "spans_read"), ("logs", "log_files", "log_parts", "logs_read"))


def _ingest(files: list[Path], store: Path, env: dict, *force: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tracesleuth", "ingest", *map(str, files), "-o", str(store), *force],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def check_store(store: Path) -> dict:
    """The store's invariants (module docstring); ``problems`` lists what failed."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tracesleuth.io.store import COMMITTED, SpanStore, is_store

    if not is_store(store):
        return {"exists": False, "spans": 0, "logs": 0, "ingests": 0, "problems": []}
    s = SpanStore(store, create=False)
    s.ingests()  # a reader opens the store: a commit its writer left half done is rolled forward here
    entries = s.manifest()["ingests"]  # (read raw before that, a kill -9 after the commit point shows "committing")
    problems = [f"entry {e['id'][:12]} left {e.get('state')}" for e in entries if e.get("state") != COMMITTED]
    doc = {"exists": True, "ingests": len(entries)}
    for name, listing, parts_key, count_key in TABLES:
        parts = {p.relative_to(store).as_posix(): pq.ParquetFile(p).metadata.num_rows for p in getattr(s, listing)()}
        credited = Counter(p for e in entries for p in e.get(parts_key, ()))
        problems += [f"{name} part {p} credited to {n} entries" for p, n in credited.items() if n > 1]
        problems += [f"{name} part {p} in no committed entry (part of an uncommitted ingest)"
                     for p in parts if p not in credited]
        for e in entries:
            missing = [p for p in e.get(parts_key, ()) if p not in parts]
            if missing:
                problems.append(f"entry {e['id'][:12]}: {name} parts missing {missing[:2]}")
            elif sum(parts[p] for p in e.get(parts_key, ())) != e.get(count_key, 0):
                problems.append(f"entry {e['id'][:12]}: its {name} parts hold "
                                f"{sum(parts[p] for p in e.get(parts_key, ()))}, it records {e.get(count_key, 0)}")
        doc[name] = sum(parts.values())
        if doc[name] != sum(e.get(count_key, 0) for e in entries):
            problems.append(f"{doc[name]} {name} in the store, the entries record "
                            f"{sum(e.get(count_key, 0) for e in entries)}")
    if s.read_spans().num_rows != doc["spans"]:
        problems.append("read_spans disagrees with the parts' footers")
    logs = s.read_logs(columns=["template_id"])
    if logs.num_rows != doc["logs"]:
        problems.append("read_logs disagrees with the parts' footers")
    elif logs.num_rows and not (pc.max(logs["template_id"]).as_py() < s.log_summary()["templates"]):
        problems.append("stored log records name templates the store's miner does not have")
    return doc | {"problems": problems}


def run(runs: int = 20, seed: int = 0, files_per_run: int = 16, day: Path = DAY, workdir: Path | None = None) -> dict:
    """Interrupt ``runs`` ingests (module docstring); returns what happened and what failed."""
    from tracesleuth.io import read_logs, read_spans

    span_files = sorted((day / "trace").glob("*.csv.gz"))
    if len(span_files) < files_per_run:
        raise SystemExit(f"{day / 'trace'}: fewer than {files_per_run} span files")
    log_of = {f: day / "log" / f.name.replace("_trace", "_log") for f in span_files}
    log_of = {f: g for f, g in log_of.items() if g.is_file()}  # (the logs of some windows only)
    files = span_files + sorted(log_of.values())
    records_in = {f: read_spans(str(f)).n_spans for f in span_files} | {
        g: read_logs(str(g)).n_records for g in log_of.values()}
    rng = np.random.default_rng(seed)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1] / "src"),
                                                                     os.environ.get("PYTHONPATH")])),
               PYTHONFAULTHANDLER="1")  # a crash prints where each thread was

    def window_of(k: int) -> list[Path]:
        start = (k * STEP_FILES) % (len(span_files) - files_per_run + 1)
        spans = span_files[start:start + files_per_run]
        return spans + [log_of[f] for f in spans if f in log_of]

    def added(window: list[Path], kind: str) -> int:
        return sum(records_in[f] for f in window if (f.parent.name == "log") == (kind == "logs"))

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        calibration = _ingest(window_of(0), tmp / "calibration", env, "--force")
        calibration.communicate(timeout=RUN_SECONDS)
        full_s = time.perf_counter() - t0
        store = tmp / "store"
        results, failures, stored_files = [], [], set()
        for k in range(runs):
            window = window_of(k)
            sig = SIGNALS[k % len(SIGNALS)]
            delay = float(rng.uniform(0, LATE_FACTOR * full_s))
            before = check_store(store)
            proc = _ingest(window, store, env, "--force")
            time.sleep(delay)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=RUN_SECONDS)
            after = check_store(store)
            committed = after["ingests"] - before["ingests"]
            line = err.strip().splitlines()[-1] if err.strip() else ""
            # Done before the signal (it then came while the interpreter was ending), or the signal
            # came before tracesleuth.cli.main (whose guard turns it into an exit 128 + signal) ran:
            # in the interpreter's own start, or while Python imported the package to run it.
            finished = "committed as ingest" in out
            early = not finished and proc.returncode in (-sig, 1) and not IN_MAIN.search(err)
            outcome = ("finished" if finished else "killed" if proc.returncode == -signal.SIGKILL
                       else "stopped before tracesleuth.cli.main ran" if early else "interrupted")
            result = {"run": k, "signal": signal.Signals(sig).name, "delay_s": round(delay, 3),
                      "exit": proc.returncode, "outcome": outcome, "committed": committed,
                      "spans_added": after["spans"] - before["spans"], "logs_added": after["logs"] - before["logs"],
                      "line": line}
            problems = list(after["problems"])
            if committed not in (0, 1):
                problems.append(f"{committed} entries added by one ingest")
            for kind in ("spans", "logs"):
                if result[f"{kind}_added"] != (added(window, kind) if committed else 0):
                    problems.append(f"{result[f'{kind}_added']} {kind} added, {committed} ingest of "
                                    f"{added(window, kind)} committed")
            if finished and committed != 1:
                problems.append(f"the ingest says it committed, the store has {committed} new entry")
            if sig != signal.SIGKILL and not (finished or early):
                if proc.returncode != 128 + sig:
                    problems.append(f"exit {proc.returncode}, expected {128 + sig}"
                                    + (f"; stderr ends {err[-3000:]!r}" if proc.returncode < 0 else ""))
                if not line.startswith("interrupted by"):
                    problems.append(f"no interruption line (stderr ends {line!r})")
                elif ("nothing committed" in line or "nothing done" in line) != (committed == 0):
                    problems.append(f"the line says {line!r} but {committed} entry was committed")
            result["problems"] = problems
            if committed:
                stored_files.update(window)
            failures += [f"run {k}: {p}" for p in problems]
            results.append(result)
        first = _ingest(files, store, env)
        first.communicate(timeout=RUN_SECONDS)
        once = check_store(store)
        second = _ingest(files, store, env)
        _, err2 = second.communicate(timeout=RUN_SECONDS)
        twice = check_store(store)
    failures += [f"final: {p}" for p in once["problems"] + twice["problems"]]
    for kind in ("spans", "logs"):
        expected = sum(r[f"{kind}_added"] for r in results) + added([f for f in files if f not in stored_files], kind)
        if first.returncode not in (0, 2) or once[kind] != expected:
            failures.append(f"after ingesting the whole day (exit {first.returncode}) the store holds {once[kind]} "
                            f"{kind}, not the {expected} committed by the runs and the files they did not commit")
    if second.returncode != 2 or any(twice[k] != once[k] for k in ("spans", "logs", "ingests")):
        failures.append(f"ingesting the day again: exit {second.returncode}, {once} -> {twice}")
    outcomes = Counter(r["outcome"] + (" (committed)" if r["committed"] else "") for r in results)
    return {"runs": results, "outcomes": dict(outcomes), "calibration_s": round(full_s, 2), "seed": seed,
            "files_per_run": files_per_run, "day_spans": added(files, "spans"), "day_logs": added(files, "logs"),
            "after_whole_day": {k: once[k] for k in ("spans", "logs", "ingests")} | {"exit": first.returncode},
            "after_again": {k: twice[k] for k in ("spans", "logs", "ingests")} | {
                "exit": second.returncode, "line": err2.strip().splitlines()[-1] if err2.strip() else ""},
            "failures": failures}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--files", type=int, default=16, help="Span CSV files per ingest (with their log files).")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    doc = run(args.runs, args.seed, args.files)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(f"{args.runs} ingests of {args.files} TrainTicket span files and their log files, seed {args.seed} "
              f"(an uninterrupted one: "
              f"{doc['calibration_s']} s; load {os.getloadavg()[0]:.2f}):")
        for r in doc["runs"]:
            print(f"  {r['run']:2d} {r['signal']:7s} at {r['delay_s']:5.2f} s: exit {r['exit']:4d}, {r['outcome']}, "
                  + (f"committed +{r['spans_added']:,} spans +{r['logs_added']:,} logs" if r['committed']
                     else "store unchanged")
                  + (f"  | {r['line']}" if r['line'] else "") + ("  PROBLEMS: " + "; ".join(r["problems"])
                                                                 if r["problems"] else ""))
        print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(doc["outcomes"].items())))
        a, b = doc["after_whole_day"], doc["after_again"]
        print(f"then the whole day ({doc['day_spans']:,} spans, {doc['day_logs']:,} log records): exit {a['exit']}, "
              f"store {a['spans']:,} spans and {a['logs']:,} logs in {a['ingests']} ingests; again: exit {b['exit']}, "
              f"{b['spans']:,} spans and {b['logs']:,} logs in {b['ingests']} ingests ({b['line']})")
        print("every check held" if not doc["failures"] else "FAILURES:\n  " + "\n  ".join(doc["failures"]))
    return 0 if not doc["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
