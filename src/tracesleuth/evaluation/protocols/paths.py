"""Evaluation of the causal-path analysis (issue 18, items 5-6): accuracy against parallelism on
simulated requests, and recovery on real TrainTicket traces made black-box.

:func:`evaluate` is the protocol registered for ``paths`` (``tracesleuth evaluate paths``).

* **Parallelism** (the slides' "accuracy vs parallelism"): the simulator's requests
  (:func:`~tracesleuth.analyses.paths.synthetic.spaced_requests`) start every ``gap`` seconds, from no overlap (1 s, equal
  gaps) to many requests in flight (Poisson arrivals, mean gap 50 ms to 2 ms); per gap, the nesting algorithm's request-weighted recovery
  rate of the true path patterns (:func:`~tracesleuth.analyses.paths.analysis.recovery_rate`), and the convolution
  algorithm's recall and precision of the true (incoming call, outgoing call) pairs
  (:data:`CONVOLUTION` settings).
* **Real data** (../shared/data/nezha/trainticket): every one-minute window read together, trace
  ids dropped (:func:`~tracesleuth.analyses.paths.messages.messages_from_tables`), at the recorded concurrency; the
  recovery rate overall and per entry (the root's first call: the API behind TrainTicket's
  gateway) for the busiest entries.

* **Added delay** (the slides' validation): 200 ms added to every call into one node (``meta``)
  of requests that do not overlap; the node's latency by the nesting algorithm and the delay of
  its return after its call by the convolution, without and with the delay: both must rise by
  200 ms.

* **MakeTrace** (:func:`~tracesleuth.analyses.paths.maketrace.make_trace`, the slides' accuracy against message loss and
  delay variation): logs of the default tracelets at a 20 ms mean gap, with 0-10% of the
  messages dropped, and with the waits' variation (standard deviation over mean) from 0.1 to 1;
  both algorithms scored as above.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..protocol import describe_tables, json_rows
from ..runner import data_folder, run_settings, timed

__all__ = ["PathsEvaluation", "evaluate", "recovery_by_entry"]

GAPS_S = (1.0, 0.05, 0.02, 0.01, 0.005, 0.002)
#: The convolution's settings on the simulated requests (their calls are 0.1-10 ms apart).
CONVOLUTION = {"quantum_ns": 1_000_000, "max_delay_ns": 100_000_000}


def _entry(key: str) -> str:
    """A path key's root and first call (``gateway(travel(...); ...)`` -> ``gateway -> travel``)."""
    root, _, rest = key.partition("(")
    if not rest:
        return root
    depth, first = 0, []
    for ch in rest:
        if ch in "(;)" and depth == 0:
            break
        depth += ch == "("
        depth -= ch == ")"
        first.append(ch)
    return f"{root} -> {''.join(first).strip()}"


#: The added-delay validation: this many ms on every call into this node.
ADDED_MS, DELAYED_NODE = 200, "meta"


def _added_delay(n_requests: int, random_state) -> pl.DataFrame:
    """The delayed node's latency (nesting) and return delay (convolution), without and with the delay."""
    from ...analyses.paths.analysis import CausalPaths
    from ...analyses.paths.synthetic import spaced_requests

    row = {"node": DELAYED_NODE, "added_ms": ADDED_MS}
    for when, delayed in (("before", None), ("after", DELAYED_NODE)):
        tables = spaced_requests(n_requests, 1.0, random_state=random_state, delayed=delayed, delay_s=ADDED_MS / 1e3)
        nesting = CausalPaths().fit(tables).result_
        lat = [(n["latency_median_ns"], p.count) for p in nesting.patterns for n in p.nodes
               if n["node"] == DELAYED_NODE]
        row[f"nesting_{when}_ms"] = sum(v * c for v, c in lat) / max(sum(c for _, c in lat), 1) / 1e6
        graph = CausalPaths(algorithm="convolution", quantum_ns=1_000_000, max_delay_ns=2 * ADDED_MS * 1_000_000
                            ).fit(tables).result_.graph
        back = [e.delay_ns for e in graph if e.effect == (DELAYED_NODE, e.cause[0]) and e.cause[1] == DELAYED_NODE]
        row[f"convolution_{when}_ms"] = float(np.median(back)) / 1e6 if back else None
    return pl.DataFrame([row]).select("node", "added_ms", "nesting_before_ms", "nesting_after_ms",
                                      "convolution_before_ms", "convolution_after_ms")


def _maketrace(duration_s: float, random_state) -> pl.DataFrame:
    """Both algorithms on MakeTrace logs, against the drop rate and the delay variation."""
    from ...analyses.paths.analysis import CausalPaths, recovery_rate
    from ...analyses.paths.convolution import call_pair_scores
    from ...analyses.paths.maketrace import make_trace

    rows = []
    for knob, values in (("drop_rate", (0.0, 0.01, 0.05, 0.1)), ("delay_cv", (0.1, 0.3, 0.5, 1.0))):
        for value in values:
            messages, truth = make_trace(duration_s=duration_s, mean_gap_ms=20.0, random_state=random_state,
                                         **{knob: value})
            nesting = CausalPaths().fit(messages).result_
            recall, precision = call_pair_scores(CausalPaths(
                algorithm="convolution", quantum_ns=100_000, max_delay_ns=50_000_000).fit(messages).result_.graph, truth)
            rows.append({"knob": knob, "value": value, "messages": messages.height,
                         "recovery": recovery_rate(truth, nesting.pattern_counts()),
                         "convolution_recall": recall, "convolution_precision": precision})
    return pl.DataFrame(rows, schema={"knob": pl.String, "value": pl.Float64, "messages": pl.Int64,
                                      "recovery": pl.Float64, "convolution_recall": pl.Float64,
                                      "convolution_precision": pl.Float64})


def recovery_by_entry(truth: Counter, found: Counter, top: int = 5) -> pl.DataFrame:
    """The recovery rate per entry (root and first call) for the ``top`` busiest entries.

    Returns
    -------
    polars.DataFrame
        ``entry``, ``requests`` (true), ``recovered`` (requests whose path was recovered, each
        pattern counted at most as often as it occurred), ``recovery`` in [0, 1]; busiest first.
    """
    rows: dict = {}
    for key, n in truth.items():
        r = rows.setdefault(_entry(key), [0, 0])
        r[0] += n
        r[1] += min(n, found.get(key, 0))
    frame = pl.DataFrame([{"entry": e, "requests": n, "recovered": k} for e, (n, k) in rows.items()],
                         schema={"entry": pl.String, "requests": pl.Int64, "recovered": pl.Int64})
    return frame.with_columns((pl.col("recovered") / pl.col("requests")).alias("recovery")).sort(
        "requests", "entry", descending=[True, False]).head(top)


@dataclass(frozen=True)
class PathsEvaluation:
    """Results of :func:`evaluate`.

    Attributes
    ----------
    maketrace : polars.DataFrame
        ``knob`` (``drop_rate`` or ``delay_cv``), ``value``, ``messages``, ``recovery``
        (nesting), ``convolution_recall``, ``convolution_precision``.
    added_delay : polars.DataFrame
        ``node``, ``added_ms``, ``nesting_before_ms``, ``nesting_after_ms``,
        ``convolution_before_ms``, ``convolution_after_ms``.
    parallelism : polars.DataFrame
        ``gap_ms``, ``requests``, ``messages``, ``recovery`` and ``fit_s`` (nesting),
        ``convolution_recall``, ``convolution_precision`` and ``convolution_s``.
    real : polars.DataFrame
        :func:`recovery_by_entry` of the TrainTicket traces; empty without the data.
    scores : dict of str to float
        ``simulated_no_overlap_recovery`` (gap 1 s), ``simulated_mean_recovery`` (over the
        gaps), ``convolution_mean_recall`` (over the gaps), ``added_delay_seen`` (the share of
        the two algorithms whose rise is within 10% of the delay added), and with the data ``real_recovery`` and ``real_top5_entries_recovery``, in [0, 1].
    notes : tuple of str
    settings : dict
    """

    parallelism: pl.DataFrame
    real: pl.DataFrame
    scores: dict
    added_delay: pl.DataFrame = field(default_factory=pl.DataFrame)
    maketrace: pl.DataFrame = field(default_factory=pl.DataFrame)
    notes: tuple = ()
    settings: dict = field(default_factory=dict)

    def to_frame(self) -> pl.DataFrame:
        """The parallelism curve."""
        return self.parallelism

    def to_dict(self) -> dict:
        """Settings, scores, notes and both tables, JSON-safe."""
        return {"settings": dict(self.settings), "scores": dict(self.scores), "notes": list(self.notes),
                "parallelism": json_rows(self.parallelism), "real": json_rows(self.real),
                "added_delay": json_rows(self.added_delay), "maketrace": json_rows(self.maketrace)}

    def describe(self) -> str:
        """Both tables and the scores, in words."""
        return describe_tables(
            [("Recovery of the true path patterns against parallelism (simulated requests)", self.parallelism),
             ("MakeTrace: against message loss and delay variation (20 ms mean gap)", self.maketrace),
             ("200 ms added to every call into one node: its latency (nesting) and its return delay "
              "(convolution), ms", self.added_delay),
             ("TrainTicket traces made black-box: recovery per entry (busiest first)", self.real)],
            self.scores, self.notes)


def evaluate(*, quick: bool = False, random_state=0, data_dir=None) -> PathsEvaluation:
    """The evaluation protocol registered for ``paths`` (module docstring).

    Parameters
    ----------
    quick : bool, default=False
        500 simulated requests per gap and 8 TrainTicket windows, instead of 5,000 and all 84.
    random_state : int or None, default=0
        Seeds the simulated requests, the added-delay runs and the MakeTrace logs.
    data_dir : path, optional
        The ``nezha`` folder whose TrainTicket traces are read (default:
        :func:`~tracesleuth.evaluation.runner.data_folder`); without them the real part is
        skipped with a note.

    Returns
    -------
    PathsEvaluation
    """
    from ...analyses.paths.analysis import CausalPaths, recovery_rate
    from ...analyses.paths.messages import messages_from_tables
    from ...analyses.paths.synthetic import spaced_requests

    rows = []
    n = 500 if quick else 5000
    for gap in GAPS_S:
        tables = spaced_requests(n, gap, random_state=random_state, poisson=gap < 1.0)
        messages, truth = messages_from_tables(tables)
        res, nesting_s = timed(lambda: CausalPaths().fit(messages).result_)
        conv, convolution_s = timed(lambda: CausalPaths(algorithm="convolution", **CONVOLUTION).fit(tables).result_)
        rows.append({"gap_ms": gap * 1000, "requests": sum(truth.values()), "messages": messages.height,
                     "recovery": recovery_rate(truth, res.pattern_counts()), "fit_s": nesting_s,
                     "convolution_recall": conv.graph_recall, "convolution_precision": conv.graph_precision,
                     "convolution_s": convolution_s})
    parallelism = pl.DataFrame(rows)
    scores = {"simulated_no_overlap_recovery": rows[0]["recovery"],
              "simulated_mean_recovery": float(parallelism["recovery"].mean()),
              "convolution_mean_recall": float(parallelism["convolution_recall"].fill_null(0.0).mean())}
    added = _added_delay(100 if quick else 1000, random_state)
    maketrace = _maketrace(30.0 if quick else 120.0, random_state)
    rise = [added[f"{a}_after_ms"][0] - added[f"{a}_before_ms"][0] for a in ("nesting", "convolution")]
    scores["added_delay_seen"] = sum(abs(r - ADDED_MS) <= 0.1 * ADDED_MS for r in rise) / 2
    notes, real = [], pl.DataFrame(schema={"entry": pl.String, "requests": pl.Int64, "recovered": pl.Int64,
                                           "recovery": pl.Float64})
    data = data_folder(data_dir)
    windows = sorted((data / "trainticket").glob("*/trace/*_trace.csv.gz")) if data is not None else []
    if not windows:
        notes.append("no ../shared/data/nezha/trainticket: the real-data part was skipped")
    else:
        from ...io import read_spans
        from ...model import build_trace_table

        windows = windows[:8] if quick else windows
        messages, truth = messages_from_tables([build_trace_table(read_spans([str(w) for w in windows]))])
        found = CausalPaths().fit(messages).result_.pattern_counts()
        real = recovery_by_entry(truth, found)
        scores["real_recovery"] = recovery_rate(truth, found)
        scores["real_top5_entries_recovery"] = float(real["recovered"].sum() / real["requests"].sum())
        notes.append(f"TrainTicket: {len(windows)} one-minute windows, {sum(truth.values()):,} requests, "
                     f"{messages.height:,} messages")
    return PathsEvaluation(parallelism=parallelism, real=real, scores=scores, notes=tuple(notes), added_delay=added,
                           maketrace=maketrace,
                           settings=run_settings(quick, random_state, data))
