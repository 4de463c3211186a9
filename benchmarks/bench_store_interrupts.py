"""Ingests interrupted at random moments: the store never holds part of one.

Runs ``python -m tracesleuth ingest --force`` on a window of the TrainTicket day's span CSV files
(``--files`` files, a few MB; ``--force`` so that every run reads its whole window, even files an
earlier run committed) into one store, ``--runs`` times, and sends each a signal at a random
moment (seeded): SIGINT, SIGTERM and SIGKILL in turn. The moment is drawn uniformly from
``[0, 1.1 T]``, ``T`` being how long an uninterrupted ingest of a window takes (measured first),
so that some runs are stopped while starting, many while they stage their parts, and some after
they commit.

After each run the store is checked (:func:`check_store`): every span part is credited to exactly
one committed manifest entry and every entry's parts exist and hold exactly the spans it
records (no part of an uncommitted ingest is visible, none of a committed one is missing), no
entry is left ``committing`` once a reader has opened the store, and the spans in the store are
the sum over the committed entries; a run that committed added exactly its window's spans, one
that did not added nothing. A run stopped by SIGINT/SIGTERM must exit 130/143 with one line
saying what was not committed (or 0 when it had finished before the signal; or be ended by the
signal when it came in the interpreter's own start, before any tracesleuth code ran). Then all
the day's files are ingested twice without ``--force``: the first adds the files no run
committed, the second adds nothing (exit 2: every file already in the store), and the counts
are unchanged.

Usage::

    python benchmarks/bench_store_interrupts.py [--runs 20] [--seed 0] [--files 16] [--json]

Exit status 0 when every check held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nezha" / "trainticket" / "2023-01-29" / "trace"
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
#: Files by which consecutive windows move.
STEP_FILES = 12
#: Seconds a run may take before it is called hung.
RUN_SECONDS = 300
#: The random moment is drawn from [0, LATE_FACTOR * T]: some signals come after the commit.
LATE_FACTOR = 1.1


def _ingest(files: list[Path], store: Path, env: dict, *force: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tracesleuth", "ingest", *map(str, files), "-o", str(store), *force],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def check_store(store: Path) -> dict:
    """The store's invariants (module docstring); ``problems`` lists what failed."""
    import pyarrow.parquet as pq

    from tracesleuth.store import COMMITTED, SpanStore, is_store

    if not is_store(store):
        return {"exists": False, "spans": 0, "ingests": 0, "problems": []}
    s = SpanStore(store, create=False)
    parts = {p.relative_to(store).as_posix(): pq.ParquetFile(p).metadata.num_rows for p in s.span_files()}
    entries = s.manifest()["ingests"]
    problems = [f"entry {e['id'][:12]} left {e.get('state')}" for e in entries if e.get("state") != COMMITTED]
    credited = Counter(p for e in entries for p in e["parts"])
    problems += [f"part {p} credited to {n} entries" for p, n in credited.items() if n > 1]
    problems += [f"part {p} in no committed entry (part of an uncommitted ingest)" for p in parts if p not in credited]
    for e in entries:
        missing = [p for p in e["parts"] if p not in parts]
        if missing:
            problems.append(f"entry {e['id'][:12]}: parts missing {missing[:2]}")
        elif sum(parts[p] for p in e["parts"]) != e["spans_read"]:
            problems.append(f"entry {e['id'][:12]}: its parts hold {sum(parts[p] for p in e['parts'])} spans, "
                            f"it records {e['spans_read']}")
    spans = sum(parts.values())
    if spans != sum(e["spans_read"] for e in entries):
        problems.append(f"{spans} spans in the store, the entries record {sum(e['spans_read'] for e in entries)}")
    if s.read_spans().num_rows != spans:
        problems.append("read_spans disagrees with the parts' footers")
    return {"exists": True, "spans": spans, "ingests": len(entries), "problems": problems}


def run(runs: int = 20, seed: int = 0, files_per_run: int = 16, data: Path = DATA, workdir: Path | None = None) -> dict:
    """Interrupt ``runs`` ingests (module docstring); returns what happened and what failed."""
    files = sorted(data.glob("*.csv.gz"))
    if len(files) < files_per_run:
        raise SystemExit(f"{data}: fewer than {files_per_run} span files")
    from tracesleuth.io import read_spans

    spans_in = {f: read_spans(str(f)).n_spans for f in files}
    rng = np.random.default_rng(seed)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1] / "src"),
                                                                     os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        calibration = _ingest(files[:files_per_run], tmp / "calibration", env, "--force")
        calibration.communicate(timeout=RUN_SECONDS)
        full_s = time.perf_counter() - t0
        store = tmp / "store"
        results, failures, stored_files = [], [], set()
        for k in range(runs):
            start = (k * STEP_FILES) % (len(files) - files_per_run + 1)
            window = files[start:start + files_per_run]
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
            # came in the interpreter's own start, before any code of tracesleuth ran:
            finished = "committed as ingest" in out
            early = proc.returncode in (-sig, 1) and "/tracesleuth/" not in err and not finished
            outcome = ("finished" if finished else "killed" if proc.returncode == -signal.SIGKILL
                       else "stopped before tracesleuth ran" if early else "interrupted")
            result = {"run": k, "signal": signal.Signals(sig).name, "delay_s": round(delay, 3),
                      "exit": proc.returncode, "outcome": outcome, "committed": committed,
                      "spans_added": after["spans"] - before["spans"], "line": line}
            problems = list(after["problems"])
            if committed not in (0, 1):
                problems.append(f"{committed} entries added by one ingest")
            if result["spans_added"] != (sum(spans_in[f] for f in window) if committed else 0):
                problems.append(f"{result['spans_added']} spans added, {committed} ingest of "
                                f"{sum(spans_in[f] for f in window)} committed")
            if finished and committed != 1:
                problems.append(f"the ingest says it committed, the store has {committed} new entry")
            if sig != signal.SIGKILL and not (finished or early):
                if proc.returncode != 128 + sig:
                    problems.append(f"exit {proc.returncode}, expected {128 + sig}")
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
    day_spans = sum(spans_in.values())
    committed_spans = sum(r["spans_added"] for r in results)
    failures += [f"final: {p}" for p in once["problems"] + twice["problems"]]
    expected = committed_spans + sum(n for f, n in spans_in.items() if f not in stored_files)
    if first.returncode not in (0, 2) or once["spans"] != expected:
        failures.append(f"after ingesting the whole day (exit {first.returncode}) the store holds {once['spans']} "
                        f"spans, not the {expected} committed by the runs and the files they did not commit")
    if second.returncode != 2 or twice["spans"] != once["spans"] or twice["ingests"] != once["ingests"]:
        failures.append(f"ingesting the day again: exit {second.returncode}, spans {once['spans']} -> {twice['spans']}")
    outcomes = Counter(r["outcome"] + (" (committed)" if r["committed"] else "") for r in results)
    return {"runs": results, "outcomes": dict(outcomes), "calibration_s": round(full_s, 2), "seed": seed,
            "files_per_run": files_per_run, "day_spans": day_spans, "committed_by_runs": committed_spans,
            "after_whole_day": {"spans": once["spans"], "ingests": once["ingests"], "exit": first.returncode},
            "after_again": {"spans": twice["spans"], "ingests": twice["ingests"], "exit": second.returncode,
                            "line": err2.strip().splitlines()[-1] if err2.strip() else ""},
            "failures": failures}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--files", type=int, default=16, help="Span CSV files per ingest.")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    doc = run(args.runs, args.seed, args.files)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(f"{args.runs} ingests of {args.files} TrainTicket files, seed {args.seed} (an uninterrupted one: "
              f"{doc['calibration_s']} s; load {os.getloadavg()[0]:.2f}):")
        for r in doc["runs"]:
            print(f"  {r['run']:2d} {r['signal']:7s} at {r['delay_s']:5.2f} s: exit {r['exit']:4d}, {r['outcome']}, "
                  f"{'committed +' + format(r['spans_added'], ',') + ' spans' if r['committed'] else 'store unchanged'}"
                  + (f"  | {r['line']}" if r['line'] else "") + ("  PROBLEMS: " + "; ".join(r["problems"])
                                                                 if r["problems"] else ""))
        print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(doc["outcomes"].items())))
        a, b = doc["after_whole_day"], doc["after_again"]
        print(f"then the whole day ({doc['day_spans']:,} spans): exit {a['exit']}, store {a['spans']:,} spans in "
              f"{a['ingests']} ingests; again: exit {b['exit']}, {b['spans']:,} spans, {b['ingests']} ingests "
              f"({b['line']})")
        print("every check held" if not doc["failures"] else "FAILURES:\n  " + "\n  ".join(doc["failures"]))
    return 0 if not doc["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
