"""The evaluation protocol of performance annotations: the paper's Section 5, what-if, recorded traces.

Rogora et al., HotCloud 2017, Section 5: "we first derive annotations using the workload described
in Section 4. We then run the same workload in a special setting in which we artificially
introduce an anomaly ... we use the annotations as assertions ... As an anomaly, we introduce an
artificial network latency between the virtual machine hosting the database server and the rest
of the cluster, varying the delay from 0 to 10 milliseconds. The case of 0ms serves as a
robustness check." Figure 2: the CDF of the share of passed assertions.

Here, on the SQLite file-hosting workload of :mod:`tracesleuth.analyses.annotate.workload` (real database, real files, every
method measured by :mod:`tracesleuth.instrument`; time, since memory annotations do not survive
from one run to the next: the full run measures and reports that with one clean pair):

1. **Section 5**: annotations derived on clean runs (:data:`CLEAN_RUNS` pooled, after a warm-up
   run, thrown away: the first run in a process allocates caches that later runs find made); the
   same request plan run again, :data:`ZERO_RUNS` times without delay (the robustness check) and
   with ``0, 1, ..., 10`` ms slept before every database statement, and with 5 µs to
   0.5 ms (spun below 0.2 ms): the workload's database calls take a few microseconds, so the
   paper's delays are all far beyond them; per run the share of assertions passed, the share
   of annotations that hold, the same split between operations that call the database
   (directly or not) and the others, the CDF over annotations of their share of passed assertions, and the median
   database call (what the delay really cost: ``time.sleep`` plus the wait for a core).
2. **What-if** (the paper's future work): the request latency (``FileHost.handle``) and the
   operations that reach the database predicted from the clean run for each delayed run, once
   with the nominal change (``Database.* + d``) and once with the database's annotations
   replaced by those derived on the delayed run (Monte Carlo draws, and each call keeping its
   quantile), against the delayed run's measured median and 95th percentile.
3. **Recorded traces** (../shared/data/nezha, when present; TrainTicket and OnlineBoutique):
   the **normal** windows are the minutes before each fault (its inject-minute file: the 60 s
   that end before the injection; TrainTicket's fault-free minute too), the **fault windows**
   the two minutes after a latency fault (:data:`LATENCY_FAULTS`). Per split (``splits``
   seeded draws; the normal windows in time order cut into :data:`TRAIN_WINDOWS` strata, one
   window drawn from each to derive on and one to check, so that both span the day: the
   TrainTicket database's tables grow over it, and its afternoon queries take two to three times
   their morning time), annotations are derived on :data:`TRAIN_WINDOWS` normal windows pooled and
   checked, one window at a time (as a CI would), on :data:`TRAIN_WINDOWS` *other* normal
   windows (the false alarms: pass rate on healthy traffic) and on every fault window (pass
   rate, and the rank of the injected service in the check's ``services``). Scores: the median
   over splits of the normal windows' pass rate per system, the median over fault windows and
   splits of how far their pass rate falls below that split's normal windows', and the share
   of fault windows whose injected service is in the top three. Nothing is tuned per system:
   the estimator's defaults throughout.

Quick mode: 150 requests, delays 0, 0.02 and 5 ms, what-if at 5 ms, :data:`QUICK_SPLITS` splits of the
recorded windows.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import TraceSleuthError
from ..nezha import SYSTEMS, list_faults, read_windows
from ..protocol import describe_tables, json_rows
from ..runner import data_folder

__all__ = ["AnnotateEvaluation", "evaluate", "evaluate_real", "evaluation_report"]

#: Delays (ms) of the full run: the paper's 0 to 10 ms, and below 1 ms down to 5 µs (the
#: workload's database calls take a few µs: where do its assertions start to fail?).
DELAYS_MS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0)
QUICK_DELAYS_MS = (0.0, 0.02, 5.0)
#: Clean runs pooled to derive the annotations, and runs without delay checked (full mode): the
#: paper's clean run was 200,000 requests long, ours last under a second each, and the machine's
#: speed drifts by 10-20 % from one to the next.
CLEAN_RUNS = 3
ZERO_RUNS = 3
#: Delays (ms) whose runs the what-if predicts.
WHATIF_MS = (1.0, 5.0)
#: The operations whose time the what-if predicts (the request first).
WHATIF_TARGETS = ("filehost:FileHost.handle", "filehost:FileHost.put", "filehost:FileHost.get",
                  "filehost:FileHost.propfind", "filehost:FileHost.delete")

_RUN_SCHEMA = {"run": pl.String, "delay_ms": pl.Float64, "requests": pl.Int64, "seconds": pl.Float64,
               "db_call_median_ms": pl.Float64, "annotations": pl.Int64, "checked": pl.Int64, "assertions": pl.Int64,
               "pass_rate": pl.Float64, "holding_rate": pl.Float64, "db_pass_rate": pl.Float64,
               "other_pass_rate": pl.Float64}
_WHATIF_SCHEMA = {"delay_ms": pl.Float64, "target": pl.String, "change": pl.String, "method": pl.String,
                  "measured_median_ms": pl.Float64, "predicted_median_ms": pl.Float64, "median_error": pl.Float64,
                  "measured_p95_ms": pl.Float64, "predicted_p95_ms": pl.Float64, "p95_error": pl.Float64}
_REAL_SCHEMA = {"system": pl.String, "split": pl.Int64, "inject_time": pl.String, "fault_type": pl.String,
                "service": pl.String, "window": pl.String, "annotations": pl.Int64, "checked": pl.Int64,
                "assertions": pl.Int64, "pass_rate": pl.Float64, "normal_pass_rate": pl.Float64, "rank": pl.Int64,
                "top3": pl.String, "note": pl.String}
_NORMAL_SCHEMA = {"system": pl.String, "split": pl.Int64, "window": pl.String, "annotations": pl.Int64,
                  "checked": pl.Int64, "assertions": pl.Int64, "pass_rate": pl.Float64, "holding_rate": pl.Float64,
                  "failing": pl.String}
#: The recorded faults that slow a service down (the others change its behaviour: errors, returns).
LATENCY_FAULTS = ("cpu_contention", "cpu_consumed", "network_delay")
#: Normal windows pooled to derive, and other normal windows checked, per split.
TRAIN_WINDOWS = 6
#: Seeded splits of the normal windows (full and quick mode).
SPLITS = 5
QUICK_SPLITS = 2


def _tables(path):
    from ...io import read_spans
    from ...model import root_tables

    return root_tables(read_spans(str(path)))[0]


def _db_involved(frame: pl.DataFrame, db_operations) -> set[str]:
    """Operations with a database call among their descendants (or database operations themselves)."""
    keys = list(zip(frame[S.TRACE_ID].to_list(), frame[S.SPAN_ID].to_list()))
    parent = dict(zip(keys, frame[S.PARENT_SPAN_ID].to_list()))
    operation = dict(zip(keys, frame[S.OPERATION_KEY].to_list()))
    found = set()
    for (trace, span), op in operation.items():
        if op not in db_operations:
            continue
        at = (trace, span)
        while at in operation:
            found.add(operation[at])
            up = parent.get(at)
            at = (trace, up) if up is not None else None
    return found


def _pass_rate(checks) -> float | None:
    n = sum(c.n_windows for c in checks)
    return sum(c.n_passed for c in checks) / n if n else None


@dataclass(frozen=True)
class AnnotateEvaluation:
    """Results of :func:`evaluate`.

    Attributes
    ----------
    runs : polars.DataFrame
        One row per checked run: ``run``, ``delay_ms``, ``requests``, ``seconds``,
        ``db_call_median_ms``, ``annotations``, ``checked``, ``assertions``, ``pass_rate``,
        ``holding_rate``, ``db_pass_rate`` and ``other_pass_rate`` (operations that reach the
        database and the others).
    shares : polars.DataFrame
        One row per run and checked annotation: ``run``, ``delay_ms``, ``operation``, ``metric``,
        ``pass_share``, ``holds``, ``db_involved`` (the values of Figure 2).
    whatif : polars.DataFrame
        One row per delay, target, change and method: measured and predicted median and 95th
        percentile (ms) and their relative errors.
    derived : polars.DataFrame
        The clean run's annotations (:meth:`AnnotationsResult.to_frame`).
    real : polars.DataFrame
        One row per split and window of a recorded latency fault: ``system``, ``split``,
        ``inject_time``, ``fault_type``, ``service`` (injected), ``window``, ``annotations``,
        ``checked``, ``assertions``, ``pass_rate``, ``normal_pass_rate`` (the split's normal
        windows, median), ``rank`` of the injected service in ``services``, ``top3``, ``note``.
    normal : polars.DataFrame
        One row per split and checked normal window (:func:`evaluate_real`).
    recorded : dict
        What derivation found on a fault-free minute of recorded TrainTicket traces.
    scores : dict of str to float
        In [0, 1], higher is better: ``pass_rate_0ms`` (mean of the runs without delay),
        ``pass_rate_drop`` (that minus the largest delay's), ``whatif_within_10pct`` and
        ``whatif_residual_within_10pct`` (share of the request's median and p95 predicted within
        10 % with replaced annotations, Monte Carlo draws or quantiles kept); with the data,
        :func:`recorded_scores`.
    notes : tuple of str
    settings : dict
    results : dict
        Run label -> checked :class:`AnnotationsResult` (for the plot; not in ``to_dict``).
    """

    runs: pl.DataFrame
    shares: pl.DataFrame
    whatif: pl.DataFrame
    derived: pl.DataFrame
    real: pl.DataFrame
    recorded: dict
    scores: dict
    notes: tuple = ()
    settings: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict, repr=False, compare=False)
    normal: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=_NORMAL_SCHEMA))

    def to_frame(self) -> pl.DataFrame:
        """The runs (pass rates per delay)."""
        return self.runs

    def cdf_table(self) -> pl.DataFrame:
        """Figure 2 as numbers: per run, the share of annotations whose pass share is at most 0, 0.25,
        0.5, 0.75, 0.9 and below 1."""
        rows = []
        for run, group in self.shares.group_by("run", maintain_order=True):
            s = group["pass_share"].to_numpy()
            rows.append({"run": run[0], "annotations": len(s),
                         **{f"<= {q:g}": float(np.mean(s <= q)) for q in (0.0, 0.25, 0.5, 0.75, 0.9)},
                         "< 1": float(np.mean(s < 1))})
        return pl.DataFrame(rows)

    def per_fault_type(self) -> pl.DataFrame:
        """Recorded fault windows per system and type (over splits): how many, the injected service first or in
        the top three, the median pass rate and that of the normal windows."""
        if self.real.is_empty():
            return pl.DataFrame(schema={"system": pl.String, "fault_type": pl.String, "windows": pl.UInt32})
        hit = lambda k: (pl.col("rank").is_not_null() & (pl.col("rank") <= k)).sum()  # noqa: E731
        return (self.real.group_by("system", "fault_type", maintain_order=True)
                .agg(pl.len().alias("windows"), hit(1).alias("top1"), hit(3).alias("top3"),
                     pl.col("pass_rate").median().round(3).alias("median_pass_rate"),
                     pl.col("normal_pass_rate").median().round(3).alias("normal_pass_rate")))

    def to_dict(self) -> dict:
        """Settings, scores, notes and every table, JSON-safe."""
        return {"settings": dict(self.settings), "scores": dict(self.scores), "notes": list(self.notes),
                "runs": json_rows(self.runs), "pass_share_cdf": json_rows(self.cdf_table()),
                "shares": json_rows(self.shares), "whatif": json_rows(self.whatif),
                "derived": json_rows(self.derived.drop("text") if "text" in self.derived.columns else self.derived),
                "real": json_rows(self.real), "normal": json_rows(self.normal),
                "per_fault_type": json_rows(self.per_fault_type()),
                "recorded": dict(self.recorded)}

    def describe(self) -> str:
        """The tables and scores, in words."""
        derived = self.derived.group_by("kind").len().sort("kind") if self.derived.height else self.derived
        recorded = [f"Recorded traces: {self.recorded['summary']}"] if self.recorded.get("summary") else []
        return describe_tables(
            [("Annotations derived on the clean run, by kind", derived),
             ("Section 5: assertions per run (pass_rate: assertions passed; holding_rate: annotations that hold; "
              "db_/other_pass_rate: operations that reach the database or not)",
              self.runs.drop("seconds")),
             ("Figure 2 as numbers: share of annotations whose share of passed assertions is at most ...",
              self.cdf_table()),
             ("What-if: predicted from the clean run vs measured on the delayed run (errors relative)",
              self.whatif),
             ("Recorded normal windows: derived on six normal minutes, checked on six others (false alarms)",
              self.normal.drop("failing")),
             ("Recorded latency faults, each fault window per split: pass rate against the normal windows', rank "
              "of the injected service in 'services'", self.real),
             ("Recorded latency faults per type", self.per_fault_type())],
            self.scores, list(self.notes) + recorded)


def _section5(directory: Path, *, n_requests: int, delays, whatif_delays, random_state, memory: bool,
              clean_runs: int = 1, zero_runs: int = 1):
    from ...analyses.annotate.analysis import PerformanceAnnotations
    from ...analyses.annotate.predict import parse_change, predict, replacements
    from ...analyses.annotate.workload import DB_OPERATIONS, ENDPOINT, run_workload

    # A first run in a process allocates what later ones find made (caches, interned strings): its
    # memory and time are not the steady state's, so one is run and thrown away first.
    run_workload(directory, n_requests=min(n_requests, 100), random_state=random_state + 1, memory=memory,
                 name="warm-up")
    clean = [t for k in range(clean_runs) for t in _tables(run_workload(
        directory, n_requests=n_requests, random_state=random_state, memory=memory, name=f"clean-{k}").spans_path)]
    est = PerformanceAnnotations(random_state=random_state).fit(clean)
    involved = _db_involved(est.measurements_, set(DB_OPERATIONS))
    runs, shares, whatif, results = [], [], [], {}
    plan = [(d, k) for d in delays for k in range(zero_runs if d == 0 else 1)]
    for delay, k in plan:
        label = (f"{delay * 1000:g} µs" if 0 < delay < 0.1 else f"{delay:g} ms") + (f" ({k + 1})" if k else "")
        run = run_workload(directory, n_requests=n_requests, random_state=random_state, memory=memory,
                           db_delay_s=delay / 1000, name=f"delay-{delay:g}ms-{k}")
        tables = _tables(run.spans_path)
        checked = PerformanceAnnotations(annotations=est.annotations_, random_state=random_state).fit(tables)
        res = checked.result_
        results[label] = res
        frame = checked.measurements_
        db_calls = frame.filter(pl.col(S.OPERATION_KEY).is_in(list(DB_OPERATIONS)))["time"]
        runs.append({"run": label, "delay_ms": delay, "requests": run.n_requests, "seconds": run.seconds,
                     "db_call_median_ms": float(db_calls.median()) / 1e6 if db_calls.len() else None,
                     "annotations": len(res.annotations), "checked": len(res.checked),
                     "assertions": res.n_assertions, "pass_rate": res.pass_rate, "holding_rate": res.holding_rate,
                     "db_pass_rate": _pass_rate([c for c in res.checked if c.operation in involved]),
                     "other_pass_rate": _pass_rate([c for c in res.checked if c.operation not in involved])})
        shares += [{"run": label, "delay_ms": delay, "operation": c.operation, "metric": c.metric,
                    "pass_share": c.pass_share, "holds": c.holds, "db_involved": c.operation in involved}
                   for c in res.checked]
        if delay not in whatif_delays:
            continue
        new = PerformanceAnnotations(random_state=random_state).fit(tables).annotations_
        changes = {"nominal": [parse_change(f"filehost:Database.*+{delay:g}ms")],
                   "replaced": replacements(new, "filehost:Database.*")}
        for target in WHATIF_TARGETS:
            real = frame.filter(pl.col(S.OPERATION_KEY) == target)["time"].to_numpy()
            if not len(real):
                continue
            for change, method in (("nominal", "sample"), ("replaced", "sample"), ("replaced", "residual")):
                p = predict(est.annotations_, est.measurements_, changes[change], target=target, method=method,
                            random_state=random_state)
                m_med, m_p95 = float(np.median(real)), float(np.quantile(real, 0.95))
                whatif.append({"delay_ms": delay, "target": target, "change": change, "method": method,
                               "measured_median_ms": m_med / 1e6, "predicted_median_ms": p.predicted["median_ns"] / 1e6,
                               "median_error": p.predicted["median_ns"] / m_med - 1,
                               "measured_p95_ms": m_p95 / 1e6, "predicted_p95_ms": p.predicted["p95_ns"] / 1e6,
                               "p95_error": p.predicted["p95_ns"] / m_p95 - 1})
    return est, pl.DataFrame(runs, schema=_RUN_SCHEMA), pl.DataFrame(shares), \
        pl.DataFrame(whatif, schema=_WHATIF_SCHEMA), results, ENDPOINT


def _normal_windows(data_dir: Path, system: str) -> tuple[list[Path], list]:
    """A system's normal windows (module docstring, part 3) and its latency faults."""
    faults = list_faults(data_dir, (system,))
    normal = sorted({f.inject_file for f in faults} | {p for f in faults for p in f.baseline_files
                                                         if "fault_free" in str(p)})
    return normal, [f for f in faults if f.fault_type in LATENCY_FAULTS]


def _split(windows: list, k: int, rng: np.random.Generator) -> tuple[list, list]:
    """``k`` windows to derive on and ``k`` others to check, one of each drawn from each of ``k`` strata
    of consecutive windows (in time order): both spread over the day.

    Examples
    --------
    >>> train, test = _split(list(range(12)), 3, np.random.default_rng(0))
    >>> sorted(train + test) == list(range(12)) or len(set(train) & set(test)) == 0
    True
    """
    train, test = [], []
    for stratum in np.array_split(np.arange(len(windows)), k):
        a, b = rng.choice(stratum, 2, replace=False)
        train.append(windows[a])
        test.append(windows[b])
    return train, test


def evaluate_real(data_dir, *, systems=SYSTEMS, splits: int = SPLITS, random_state=0,
                  settings: dict | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Annotations on recorded traffic: false alarms on normal windows, detection of latency faults (part 3).

    Parameters
    ----------
    data_dir : path
        The ``nezha`` folder.
    systems : sequence of str, default=SYSTEMS
    splits : int, default=SPLITS
        Seeded draws of the normal windows derived on and checked.
    random_state : int, default=0
    settings : dict, optional
        Settings of :class:`PerformanceAnnotations` (default: its defaults).

    Returns
    -------
    normal : polars.DataFrame
        One row per split and checked normal window: ``system``, ``split``, ``window``,
        ``annotations``, ``checked``, ``assertions``, ``pass_rate``, ``holding_rate``,
        ``failing`` (its failing operations, a few).
    real : polars.DataFrame
        One row per split and fault window (columns in :class:`AnnotateEvaluation`).
    """
    from ...model import root_tables
    from ...analyses.annotate.analysis import PerformanceAnnotations

    settings = dict(settings or {})
    tables: dict = {}

    def table(path):
        if path not in tables:
            tables[path] = root_tables(read_windows((path,)))[0]
        return tables[path]

    normal_rows, fault_rows = [], []
    rng = np.random.default_rng(random_state)
    for system in systems:
        normal, faults = _normal_windows(Path(data_dir), system)
        if len(normal) < 2:
            continue
        k = min(TRAIN_WINDOWS, len(normal) // 2)
        for split in range(splits):
            train, test = _split(normal, k, rng)
            derived = PerformanceAnnotations(**settings, random_state=random_state).fit(
                [t for p in train for t in table(p)]).annotations_
            rates = []
            for path in test:
                res = PerformanceAnnotations(**settings, annotations=derived).fit(table(path)).result_
                rates.append(res.pass_rate)
                normal_rows.append({"system": system, "split": split, "window": path.name,
                                    "annotations": len(derived), "checked": len(res.checked),
                                    "assertions": res.n_assertions, "pass_rate": res.pass_rate,
                                    "holding_rate": res.holding_rate,
                                    "failing": ", ".join([c.operation for c in res.checked if not c.holds][:3])})
            reference = float(np.median([r for r in rates if r is not None])) if any(
                r is not None for r in rates) else None
            for f in faults:
                for path in f.problem_files:
                    row = {"system": system, "split": split, "inject_time": f.inject_time,
                           "fault_type": f.fault_type, "service": f.service, "window": path.name,
                           "annotations": len(derived), "normal_pass_rate": reference, "note": ""}
                    try:
                        res = PerformanceAnnotations(**settings, annotations=derived).fit(table(path)).result_
                    except TraceSleuthError as exc:
                        fault_rows.append({**row, "note": f"{type(exc).__name__}: {exc}"})
                        continue
                    ranked = [x.service for x in res.services]
                    fault_rows.append({**row, "checked": len(res.checked), "assertions": res.n_assertions,
                                       "pass_rate": res.pass_rate,
                                       "rank": ranked.index(f.service) + 1 if f.service in ranked else None,
                                       "top3": ", ".join(ranked[:3]),
                                       "note": "" if ranked else "no assertion failed"})
    read_windows.cache_clear()
    return pl.DataFrame(normal_rows, schema=_NORMAL_SCHEMA), pl.DataFrame(fault_rows, schema=_REAL_SCHEMA)


def recorded_scores(normal: pl.DataFrame, real: pl.DataFrame) -> dict:
    """The recorded part's scores (module docstring, part 3), in [0, 1].

    Returns
    -------
    dict
        ``normal_pass_rate_<system>``: median over splits of the pass rate of its checked
        normal windows (their assertions pooled); ``fault_pass_drop``: median over fault
        windows of the split's normal windows' pass rate minus theirs; ``real_top3``: share of
        fault windows whose injected service is in the top three of ``services``.
    """
    scores = {}
    if normal.height:
        pooled = (normal.with_columns(passed=pl.col("pass_rate") * pl.col("assertions"))
                  .group_by("system", "split").agg(pl.col("passed").sum() / pl.col("assertions").sum()))
        for (system,), group in pooled.group_by("system", maintain_order=True):
            scores[f"normal_pass_rate_{system}"] = float(group["passed"].median())
    if real.height:
        valid = real.filter(pl.col("pass_rate").is_not_null() & pl.col("normal_pass_rate").is_not_null())
        if valid.height:
            scores["fault_pass_drop"] = float(np.clip((valid["normal_pass_rate"] - valid["pass_rate"]).median(),
                                                      0, 1))
        scores["real_top3"] = float(np.mean([r is not None and r <= 3 for r in real["rank"].to_list()]))
    return scores


def _recorded_summary(data_dir: Path, random_state) -> dict:
    """What derivation finds on TrainTicket's fault-free minute (durations only, no attribute)."""
    from ...model import root_tables
    from ...analyses.annotate.analysis import PerformanceAnnotations

    path = data_dir / "trainticket" / "2023-01-29" / "fault_free" / "08_50_trace.csv.gz"
    if not path.is_file():
        return {}
    res = PerformanceAnnotations(random_state=random_state).fit(root_tables(read_windows((path,)))[0]).result_
    counts = res.kind_counts()
    clusters = [len(a.clusters) for a in res.annotations if a.kind == "clustered"]
    multi = sorted((a for a in res.annotations if a.kind == "clustered" and len(a.clusters) > 1),
                   key=lambda a: -a.n_samples)[:3]
    return {"file": str(path), "calls": res.n_calls, "operations": res.n_operations, "kinds": counts,
            "not_annotated": len(res.skipped), "features": list(res.features),
            "clusters_histogram": {str(k): clusters.count(k) for k in sorted(set(clusters))},
            "examples": [a.text() for a in multi],
            "summary": (f"TrainTicket fault-free minute: {res.n_calls:,} calls of {res.n_operations} operations, "
                        f"{len(res.annotations)} annotations ({counts['correlated']} correlated, {counts['clustered']} "
                        f"clustered, {counts['constant']} constant), {len(res.skipped)} operations with too few calls; "
                        f"features: {', '.join(res.features) or 'none (the CSV has no attributes)'}; clusters per "
                        f"clustered annotation: {dict(sorted({k: clusters.count(k) for k in set(clusters)}.items()))}"
                        + (f"; e.g. {multi[0].text()}" if multi else ""))}


def _memory_note(memory_runs: pl.DataFrame, results: dict) -> str:
    return (f"with memory measured too (tracemalloc), a clean run checked against the clean runs' annotations passes "
            f"{memory_runs['pass_rate'][0]:.1%} of its assertions (time alone: {results['0 ms'].pass_rate:.1%}): "
            "a call's peak allocation shifts by tens of bytes from one run to the next (allocator and cache state) "
            "while the annotations' spread within a run is a few bytes, and time is noisier under tracemalloc; the "
            "Section-5 runs measure time alone")


def evaluate(*, quick: bool = False, random_state=0, data_dir=None, workdir=None) -> AnnotateEvaluation:
    """The evaluation protocol registered for ``annotate`` (module docstring).

    Parameters
    ----------
    quick : bool, default=False
    random_state : int, default=0
        The request plan's seed and the estimators'.
    data_dir : path, optional
        The Nezha folder; default ``../shared/data/nezha`` beside the repository. Absent: the
        recorded part is skipped with a note.
    workdir : path, optional
        Where the runs go; default a temporary directory, removed at the end.

    Returns
    -------
    AnnotateEvaluation
    """
    seed = 0 if random_state is None else int(random_state)
    n_requests = 150 if quick else 600
    delays = QUICK_DELAYS_MS if quick else DELAYS_MS
    whatif_delays = (5.0,) if quick else WHATIF_MS
    notes = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tracesleuth-annotate-") as tmp:
        directory = Path(workdir) if workdir is not None else Path(tmp)
        est, runs, shares, whatif, results, endpoint = _section5(
            directory, n_requests=n_requests, delays=delays, whatif_delays=whatif_delays, random_state=seed,
            memory=False, clean_runs=1 if quick else CLEAN_RUNS, zero_runs=1 if quick else ZERO_RUNS)
        if not quick:
            memory_runs = _section5(directory / "memory", n_requests=n_requests, delays=(0.0,), whatif_delays=(),
                                    random_state=seed, memory=True, clean_runs=CLEAN_RUNS)[1]
            notes.append(_memory_note(memory_runs, results))
    data = data_folder(data_dir)
    real, normal, recorded = pl.DataFrame(schema=_REAL_SCHEMA), pl.DataFrame(schema=_NORMAL_SCHEMA), {}
    if data is None or not data.is_dir():
        notes.append("no ../shared/data/nezha: the recorded-traces part was skipped")
    else:
        normal, real = evaluate_real(data, splits=QUICK_SPLITS if quick else SPLITS, random_state=seed)
        recorded = _recorded_summary(data, seed)
    zero = runs.filter(pl.col("delay_ms") == 0)["pass_rate"]  # the mean of the runs without delay
    worst = runs.filter(pl.col("delay_ms") == runs["delay_ms"].max())["pass_rate"]
    scores = {"pass_rate_0ms": float(zero.mean()) if zero.len() else 0.0,
              "pass_rate_drop": float(np.clip(zero.mean() - worst.mean(), 0, 1)) if zero.len() else 0.0}
    for method, name in (("sample", "whatif_within_10pct"), ("residual", "whatif_residual_within_10pct")):
        request = whatif.filter((pl.col("target") == endpoint) & (pl.col("change") == "replaced")
                                & (pl.col("method") == method))
        if request.height:
            errors = np.r_[request["median_error"].to_numpy(), request["p95_error"].to_numpy()]
            scores[name] = float(np.mean(np.abs(errors) <= 0.10))
    scores.update(recorded_scores(normal, real))
    notes.append(f"{1 if quick else CLEAN_RUNS} clean run(s) pooled for the annotations, then the checked runs: "
                 f"{n_requests} requests each (the same plan, seed {seed}), every method measured (time); "
                 f"{time.perf_counter() - t0:.0f} s in all, load average {os.getloadavg()[0]:.1f} on "
                 f"{os.cpu_count()} cores")
    return AnnotateEvaluation(runs=runs, shares=shares, whatif=whatif, derived=est.result_.to_frame(), real=real,
                              normal=normal, recorded=recorded, scores=scores, notes=tuple(notes),
                              settings={"quick": bool(quick), "random_state": seed, "requests": n_requests,
                                        "delays_ms": list(delays), "whatif_ms": list(whatif_delays),
                                        "splits": QUICK_SPLITS if quick else SPLITS, "train_windows": TRAIN_WINDOWS,
                                        "data_dir": None if data is None else str(data)},
                              results=results)


def evaluation_report(ev: AnnotateEvaluation):
    """An HTML report of an evaluation: the pass-share CDF per delay (Figure 2) and the tables.

    Returns
    -------
    tracesleuth.report.Report
    """
    from ...report.document import Figure, Report, Section, Table, Text
    from ...report.sections.annotate import pass_share_cdf_figure

    def table(frame: pl.DataFrame, caption: str) -> Table:
        return Table(list(frame.columns), [list(r) for r in frame.rows()], caption=caption)

    section = Section("Section 5: annotations as assertions under database delay", key="annotate-evaluation")
    section.add(Text(f"Scores: {', '.join(f'{k} {v:.3f}' for k, v in ev.scores.items())}"))
    section.add(Figure(pass_share_cdf_figure(ev.results), caption="Share of each annotation's assertions passed, "
                       "CDF over annotations, one curve per injected delay (the paper's Figure 2)"))
    section.add(table(ev.runs, "Assertions per run"))
    section.add(table(ev.cdf_table(), "Figure 2 as numbers"))
    section.add(table(ev.whatif, "What-if predictions against the delayed runs"))
    if ev.real.height:
        section.add(table(ev.per_fault_type(), "Recorded latency faults per type: injected service first, in the "
                                               "top three of 'services'"))
        section.add(table(ev.real, "Recorded latency faults: each fault window per split"))
    if ev.normal.height:
        section.add(table(ev.normal, "Recorded normal windows checked against annotations of other normal windows"))
    for note in ev.notes:
        section.add(Text(note, muted=True))
    return Report("Performance annotations: evaluation", subtitle="Rogora et al., HotCloud 2017, Section 5",
                  sections=[section])
