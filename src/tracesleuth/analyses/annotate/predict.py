"""What-if prediction: annotations composed along the call graph learned from traces (Monte Carlo).

Rogora et al., HotCloud 2017, Section 1 and "Future work": "assuming the authentication and
storage lookup service run in under 50 milliseconds, would a delete operation terminate in less
than 100 milliseconds?"; "we plan to support 'what-if' analysis and simulation ... using sampling
techniques such as Monte Carlo simulation". This module answers such questions from a run's
traces (the call graph: which operation calls which, in which order and overlap) and the
annotations of its operations' time.

**Changes** (:class:`Change`, :func:`parse_change`), to the time annotation of every operation
matching a pattern (``fnmatch``: ``sqlite:*``):

* ``OP+5ms`` / ``OP-5ms``: its mean shifts (a correlated annotation's ``h(x) + d``, a clustered
  one's centroids, a constant's value);
* ``OP*0.5``: its mean and standard deviation scale;
* ``OP<=50ms``: it runs under 50 ms (each call's time capped);
* a replacement annotation (:func:`replacements`; ``--replace PATTERN=FILE``): the operation's
  annotation becomes that one.

**Composition**. Each request (trace) of the run is replayed with the changed operations' calls
taking their new times; every other call keeps its recorded time and the time between calls
(a parent's own work) is kept:

1. the new time of each changed call. A shift, a scale or a cap changes the annotation by a
   location or scale (or truncates it), which changes every call alike: its recorded time is
   shifted, scaled or capped (a slow outlier stays one, and the operation keeps its real
   distribution rather than the annotation's normal model of it). A replacement ``B`` says only
   the new distribution, so by ``method``:

   * ``"sample"`` (default): each call's time is drawn from ``B`` at the call's feature (Monte
     Carlo: with a replacement, the requests are replayed ``ceil(n_draws / n_requests)`` times
     with fresh draws);
   * ``"residual"``: each call keeps its place in the distribution: its standardized residual
     between normal annotations (correlated, constant:
     ``y' = mean_B(x) + (y - mean_A(x)) * sd_B(x) / sd_A(x)``, ``A`` its annotation), its
     quantile otherwise (``y' = F_B⁻¹(F_A(y))``; without an ``A``, its rank among the
     operation's recorded times);

   calls without the feature ``B`` needs keep their recorded times;
2. bottom-up, each call whose synchronous children changed (:func:`tracesleuth.model.synchronous_children`
   rules: not producer/consumer, not FOLLOWS_FROM, not outliving it) is replayed: its children
   in start order, a child starting ``start - max(end of the children that ended before it)``
   after the latest of them (the parent's own work between them kept), children that
   overlapped overlapping again; the call ends as much later (or sooner) as its last child
   does. A changed call whose children changed too gets both: its new time plus its
   children's delay (at least 0);
3. the **target** operation's new times over the requests that call it form the predicted
   distribution. Its median, 95th percentile and, given a threshold, the share of
   calls under it are reported beside the measured ones, with 90 % bootstrap intervals
   (requests resampled, ``random_state``).

Validated against a real run where the change was made in :mod:`tracesleuth.evaluation.protocols.annotate` (the SQLite
workload with and without a delay on its database calls).
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import polars as pl

from ... import schema as S
from ...errors import ParameterError
from ...units import format_duration_ns, parse_duration
from .measurements import feature_column
from .._notes import WithNotes
from .model import Annotation, Cluster, ClusteredAnnotation, ConstantAnnotation, CorrelatedAnnotation
from .notes import NoTimeAnnotation, UnseenOperations

__all__ = ["Change", "Prediction", "changed_annotation", "parse_change", "predict", "replacements"]

_CHANGE = re.compile(r"^(?P<op>.+?)\s*(?P<how>\+|-|\*|×|<=|<)\s*(?P<value>[^+\-*×<]+)$")
#: Bootstrap resamples behind the intervals.
BOOTSTRAP = 200


@dataclass(frozen=True)
class Change:
    """A change to the time annotation of the operations matching ``pattern``.

    Attributes
    ----------
    pattern : str
        An operation key or an ``fnmatch`` pattern of them (``sqlite:*``).
    kind : {"shift", "scale", "cap", "replace"}
    value : float
        Shift and cap: ns (a shift may be negative); scale: the factor; replace: unused (0).
    annotation : Annotation or None
        The replacement annotation (``kind="replace"``).
    """

    pattern: str
    kind: str
    value: float = 0.0
    annotation: Annotation | None = None

    def text(self) -> str:
        """The change in words: ``sqlite:* + 5 ms``, ``auth:login <= 50 ms``."""
        if self.kind == "shift":
            return f"{self.pattern} {'+' if self.value >= 0 else '-'} {format_duration_ns(abs(self.value))}"
        if self.kind == "scale":
            return f"{self.pattern} × {self.value:g}"
        if self.kind == "cap":
            return f"{self.pattern} <= {format_duration_ns(self.value)}"
        return f"{self.pattern} as newly annotated ({self.annotation.kind if self.annotation else '?'})"

    def matches(self, operation: str) -> bool:
        return operation == self.pattern or fnmatch.fnmatchcase(operation, self.pattern)


def parse_change(text: str) -> Change:
    """Read a change: ``OP+5ms``, ``OP-1.5ms``, ``OP*0.5``, ``OP<=50ms`` (``OP`` a key or pattern).

    Raises
    ------
    ParameterError
        Naming the text and the forms allowed.

    Examples
    --------
    >>> parse_change("sqlite:*+5ms")
    Change(pattern='sqlite:*', kind='shift', value=5000000.0, annotation=None)
    >>> parse_change("auth:login <= 50ms").text()
    'auth:login <= 50 ms'
    """
    match = _CHANGE.match(text.strip()) if isinstance(text, str) else None
    forms = "OPERATION+5ms, OPERATION-1ms, OPERATION*0.5 or OPERATION<=50ms (OPERATION a key or a pattern like sqlite:*)"
    if match is None:
        raise ParameterError(f"Cannot read the change {text!r}: write {forms}.")
    op, how, value = match.group("op").strip(), match.group("how"), match.group("value").strip()
    try:
        if how in ("*", "×"):
            factor = float(value)
            if not (math.isfinite(factor) and factor >= 0):
                raise ValueError
            return Change(op, "scale", factor)
        ns = float(parse_duration(value))
    except (ValueError, ParameterError):
        raise ParameterError(f"Cannot read the change {text!r}: {value!r} is not "
                             f"{'a factor >= 0' if how in ('*', '×') else 'a duration such as 5ms'}; write {forms}."
                             ) from None
    if how in ("<=", "<"):
        return Change(op, "cap", ns)
    return Change(op, "shift", ns if how == "+" else -ns)


def replacements(annotations, pattern: str = "*") -> list[Change]:
    """A replacement for each time annotation of ``annotations`` whose operation matches ``pattern``.

    Parameters
    ----------
    annotations : AnnotationSet
        New annotations, e.g. derived from a run of a new version.
    pattern : str, default="*"
        An operation key or ``fnmatch`` pattern.

    Returns
    -------
    list of Change
    """
    return [Change(a.operation, "replace", annotation=a) for a in annotations
            if a.metric == "time" and (a.operation == pattern or fnmatch.fnmatchcase(a.operation, pattern))]


def changed_annotation(change: Change, annotation: Annotation) -> Annotation:
    """The annotation after a shift, scale or replacement (a cap leaves it as it is).

    Examples
    --------
    >>> from tracesleuth.analyses.annotate.model import ConstantAnnotation
    >>> a = ConstantAnnotation("db:query", "time", 100, value=2e6, sd=1e5)
    >>> changed_annotation(parse_change("db:query+5ms"), a).text()
    'db:query: time = 7 ms (constant, sd 100 µs)'
    """
    if change.kind == "replace":
        return replace(change.annotation, operation=annotation.operation, metric=annotation.metric)
    if change.kind == "cap":
        return annotation
    d, f = (change.value, 1.0) if change.kind == "shift" else (0.0, change.value)
    if isinstance(annotation, CorrelatedAnnotation):
        c = [f * v for v in annotation.coefficients]
        c[0] += d
        return replace(annotation, coefficients=tuple(c), sd=f * annotation.sd)
    if isinstance(annotation, ConstantAnnotation):
        return replace(annotation, value=f * annotation.value + d, sd=f * annotation.sd)
    if isinstance(annotation, ClusteredAnnotation):
        return replace(annotation, clusters=tuple(Cluster(f * k.centroid + d, f * k.sd, k.weight)
                                                  for k in annotation.clusters))
    raise ParameterError(f"Cannot change an annotation of kind {annotation.kind!r}.")


@dataclass(frozen=True)
class Prediction(WithNotes):
    """A what-if prediction of one operation's time (:func:`predict`).

    Attributes
    ----------
    target : str
        The operation whose time is predicted.
    changes : tuple of str
        The changes, in words.
    method : str
    n_requests : int
        Requests (traces) that call the target.
    n_changed_calls : int
        Calls of changed operations in those requests.
    measured, predicted : dict
        ``median_ns``, ``p95_ns``, ``mean_ns`` of the target's recorded and predicted times.
    median_interval_ns, p95_interval_ns : tuple of (float, float)
        90 % bootstrap intervals of the predicted median and 95th percentile.
    threshold_ns : float or None
    share_under_measured, share_under_predicted : float or None
        Share of the target's calls under the threshold, recorded and predicted.
    samples_ns : ndarray of shape (n,)
        The predicted times (for plots; not in ``to_dict``).
    measured_ns : ndarray of shape (m,)
        The recorded times.
    notes : tuple of Note
        Changes left out or replayed by rank (records, :mod:`.notes`).
    """

    target: str
    changes: tuple
    method: str
    n_requests: int
    n_changed_calls: int
    measured: dict
    predicted: dict
    median_interval_ns: tuple
    p95_interval_ns: tuple
    threshold_ns: float | None = None
    share_under_measured: float | None = None
    share_under_predicted: float | None = None
    samples_ns: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    measured_ns: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    notes: tuple = ()

    def to_dict(self) -> dict:
        """Everything but the samples, JSON-safe."""
        return {"target": self.target, "changes": list(self.changes), "method": self.method,
                "requests": self.n_requests, "changed_calls": self.n_changed_calls, "measured": dict(self.measured),
                "predicted": dict(self.predicted), "median_interval_ns": list(self.median_interval_ns),
                "p95_interval_ns": list(self.p95_interval_ns), "threshold_ns": self.threshold_ns,
                "share_under_measured": self.share_under_measured,
                "share_under_predicted": self.share_under_predicted,
                "notes": [n.to_dict() for n in self.notes]}

    def to_frame(self) -> pl.DataFrame:
        """Two rows, ``measured`` and ``predicted``: median, 95th percentile and mean (ns)."""
        return pl.DataFrame([{"run": name, **values} for name, values in (("measured", self.measured),
                                                                          ("predicted", self.predicted))])

    def describe(self) -> str:
        """The prediction in words."""
        ns = format_duration_ns
        m, p = self.measured, self.predicted
        lines = [f"What if {', '.join(self.changes)}? {self.target} over {self.n_requests:,} requests "
                 f"({self.n_changed_calls:,} changed calls; method {self.method}):",
                 f"  median {ns(m['median_ns'])} -> {ns(p['median_ns'])} (90% interval {ns(self.median_interval_ns[0])}"
                 f" - {ns(self.median_interval_ns[1])})",
                 f"  p95    {ns(m['p95_ns'])} -> {ns(p['p95_ns'])} (90% interval {ns(self.p95_interval_ns[0])}"
                 f" - {ns(self.p95_interval_ns[1])})"]
        if self.threshold_ns is not None:
            lines.append(f"  under {ns(self.threshold_ns)}: {self.share_under_measured:.1%} of calls now, "
                         f"{self.share_under_predicted:.1%} predicted")
        lines += [f"  Note: {n}" for n in self.notes]
        return "\n".join(lines)


def _summary(values: np.ndarray) -> dict:
    return {"median_ns": float(np.median(values)), "p95_ns": float(np.quantile(values, 0.95)),
            "mean_ns": float(np.mean(values))}


def _feature(frame: pl.DataFrame, rows: np.ndarray, annotation: Annotation | None) -> np.ndarray | None:
    """The feature of ``annotation`` at the calls ``rows`` (NaN where absent), None when it uses none."""
    if annotation is None or not annotation.uses_feature:
        return None
    column = feature_column(annotation.feature)
    return frame[column].gather(rows).to_numpy() if column in frame.columns else np.full(len(rows), np.nan)


def _new_times(frame: pl.DataFrame, rows: np.ndarray, change: Change, annotation: Annotation | None, method: str,
               rng: np.random.Generator) -> np.ndarray:
    """New times (ns, float) of the calls ``rows`` of one changed operation (module docstring, step 1)."""
    y = frame["time"].gather(rows).cast(pl.Float64).to_numpy()
    if change.kind == "shift":
        return np.maximum(y + change.value, 0.0)
    if change.kind == "scale":
        return y * change.value
    if change.kind == "cap":
        return np.minimum(y, change.value)
    new = changed_annotation(change, annotation) if annotation is not None else change.annotation
    x_old, x_new = _feature(frame, rows, annotation), _feature(frame, rows, new)
    usable = np.ones(len(rows), dtype=bool)
    for x in ((x_new,) if method == "sample" else (x_old, x_new)):
        if x is not None:
            usable &= np.isfinite(x)
    out = y.copy()  # calls without the features keep their times
    at = (lambda x: None if x is None else x[usable])
    k = int(usable.sum())
    if method == "sample":
        out[usable] = new.sample(rng, at(x_new), size=k)
        return out
    # Each call keeping its place in the distribution: its standardized residual between normal
    # annotations (correlated, constant), its quantile otherwise.
    if annotation is None:  # no annotation of its own: its place among its recorded times
        ranks = (np.argsort(np.argsort(y[usable])) + 0.5) / max(k, 1)
        out[usable] = new.ppf(ranks, at(x_new))
    elif annotation.kind != "clustered" and new.kind != "clustered":
        xo, xn = at(x_old), at(x_new)
        mean_old = np.broadcast_to(annotation.expected(xo if xo is not None else np.zeros(k)), (k,))
        sd_old = np.sqrt(np.broadcast_to(annotation.variance(xo if xo is not None else np.zeros(k)), (k,)))
        mean_new = np.broadcast_to(new.expected(xn if xn is not None else np.zeros(k)), (k,))
        sd_new = np.sqrt(np.broadcast_to(new.variance(xn if xn is not None else np.zeros(k)), (k,)))
        ratio = np.divide(sd_new, sd_old, out=np.ones(k), where=sd_old > 0)
        out[usable] = np.maximum(mean_new + (y[usable] - mean_old) * ratio, 0.0)
    else:
        u = np.clip(annotation.cdf(y[usable], at(x_old)), 1e-9, 1 - 1e-9)
        out[usable] = new.ppf(u, at(x_new))
    return out


class _Traces:
    """The relevant traces of a measurement frame as arrays, with each span's parent and depth."""

    def __init__(self, frame: pl.DataFrame):
        from ...model import synchronous_children

        self.frame = frame
        trace = frame[S.TRACE_ID].rle_id().to_numpy()  # frame sorted by trace
        self.bounds = np.r_[0, np.flatnonzero(np.diff(trace)) + 1, len(trace)]
        self.start = frame[S.START_NS].to_numpy().astype(np.float64)
        self.end = self.start + frame["time"].to_numpy().astype(np.float64)
        keys = frame.select(S.TRACE_ID, S.SPAN_ID).with_row_index("_row")
        parents = frame.select(S.TRACE_ID, pl.col(S.PARENT_SPAN_ID).alias(S.SPAN_ID)).join(
            keys, on=[S.TRACE_ID, S.SPAN_ID], how="left", maintain_order="left")["_row"]
        self.parent = parents.fill_null(-1).cast(pl.Int64).to_numpy()
        kind = frame[S.KIND].fill_null("unspecified").to_numpy()
        has_parent = self.parent >= 0
        parent_end = np.where(has_parent, self.end[np.maximum(self.parent, 0)], np.inf)
        self.sync = has_parent & synchronous_children(kind, frame[S.FOLLOWS_FROM].to_numpy(), end_ns=self.end,
                                                      parent_end_ns=parent_end)
        depth = np.zeros(len(self.parent), dtype=np.int64)
        at = self.parent.copy()
        while (at >= 0).any():  # parents are in the frame: depth by walking up, all spans at once
            step = at >= 0
            depth[step] += 1
            at[step] = self.parent[at[step]]
            if depth.max() > len(depth):
                raise ParameterError("The spans' parent links form a cycle; cannot replay them.")
        self.depth = depth

    def replay(self, changed: np.ndarray, new_time: np.ndarray, traces: np.ndarray) -> np.ndarray:
        """New durations (ns) of every span of ``traces`` (indices into :attr:`bounds`), changed
        spans taking ``new_time``; spans of other traces keep theirs."""
        duration = self.end - self.start
        new_duration = duration.copy()
        new_duration[changed] = new_time[changed]
        for t in traces.tolist():
            rows = np.arange(self.bounds[t], self.bounds[t + 1])
            if not changed[rows].any():
                continue
            self._replay_trace(rows, changed, new_duration)
        return new_duration

    def _replay_trace(self, rows: np.ndarray, changed: np.ndarray, new_duration: np.ndarray) -> None:
        start, end, parent, sync = self.start, self.end, self.parent, self.sync
        children: dict[int, list[int]] = {}
        for r in rows[sync[rows]].tolist():
            children.setdefault(int(parent[r]), []).append(r)
        dirty = set(rows[changed[rows]].tolist())
        for p in rows[np.argsort(-self.depth[rows], kind="stable")].tolist():
            kids = children.get(p)
            if not kids or not any(k in dirty for k in kids):
                continue
            # The children in start order; ends before starts at equal times.
            events = sorted([(start[k], 1, k) for k in kids] + [(end[k], 0, k) for k in kids])
            max_old = max_new = -np.inf
            new_end = {}
            for time, is_start, k in events:
                if is_start:
                    shift = (max_new - max_old) if max_old > -np.inf else 0.0
                    new_end[k] = start[k] + shift + new_duration[k]
                else:
                    max_old = max(max_old, end[k])
                    max_new = max(max_new, new_end[k])
            delta = max_new - max_old
            if delta != 0:
                new_duration[p] = max(new_duration[p] + delta, 0.0)
                dirty.add(p)


def predict(annotations, measurements: pl.DataFrame, changes: Sequence[Change], *, target: str | None = None,
            method: str = "sample", n_draws: int = 2000, threshold_ns: float | None = None,
            random_state=None) -> Prediction:
    """Predict an operation's time when some operations' time annotations change (module docstring).

    Parameters
    ----------
    annotations : AnnotationSet
        The run's annotations (their ``time`` ones are used).
    measurements : polars.DataFrame
        The run's measurement frame (:func:`~.measurements.measurements_from_tables`): the call
        graph and recorded times.
    changes : sequence of Change
        The first change whose pattern matches an operation applies to it.
    target : str, optional
        The operation whose time is predicted; default the most frequent root operation.
    method : {"sample", "residual"}, default="sample"
        How a replacement's new times are made (module docstring, step 1).
    n_draws : int, default=2000
        With ``"sample"`` and a replacement: predicted times drawn at least (the requests
        replayed as many times as needed).
    threshold_ns : float, optional
        Report the share of the target's calls under it.
    random_state : int, numpy Generator or None

    Returns
    -------
    Prediction

    Raises
    ------
    ParameterError
        No change, a change matching no operation, an unknown target or method.
    """
    if method not in ("residual", "sample"):
        raise ParameterError(f"The 'method' parameter of predict must be a str among {{'residual', 'sample'}}. "
                             f"Got {method!r} instead.")
    if not changes:
        raise ParameterError("No change given: give at least one, e.g. 'sqlite:*+5ms'.")
    rng = np.random.default_rng(random_state)
    ops = measurements[S.OPERATION_KEY].unique().sort().to_list()
    # A replacement of an operation the traces never call (a new version's new call) cannot be
    # replayed on the recorded call graph: left out and said, unless no replacement is left.
    unseen = [c for c in changes if c.kind == "replace" and not any(c.matches(op) for op in ops)]
    if unseen and len(unseen) < sum(c.kind == "replace" for c in changes):
        changes = [c for c in changes if c not in unseen]
    else:
        unseen = []
    for change in changes:
        if not any(change.matches(op) for op in ops):
            import difflib

            close = difflib.get_close_matches(change.pattern, ops, n=3)
            raise ParameterError(f"The change {change.text()!r} matches no operation of the traces"
                                 + (f"; did you mean {', '.join(close)}?" if close else "."))
    roots = measurements.filter(pl.col(S.PARENT_SPAN_ID).is_null())[S.OPERATION_KEY]
    if target is None:
        if roots.len() == 0:
            raise ParameterError("No root span in the traces: give the target operation.")
        target = roots.value_counts(sort=True)[S.OPERATION_KEY][0]
    if target not in ops:
        raise ParameterError(f"The target {target!r} is no operation of the traces.")
    frame = measurements.filter(pl.col(S.TRACE_ID).is_in(
        measurements.filter(pl.col(S.OPERATION_KEY) == target)[S.TRACE_ID].unique().implode())
    ).sort(S.TRACE_ID, S.START_NS, maintain_order=True)
    traces = _Traces(frame)
    op_of = frame[S.OPERATION_KEY].to_numpy()
    changed = np.zeros(frame.height, dtype=bool)
    assigned = {}
    for op in np.unique(op_of).tolist():
        change = next((c for c in changes if c.matches(op)), None)
        if change is not None:
            assigned[op] = change
            changed |= op_of == op
    is_target = op_of == target
    trace_ids = np.arange(len(traces.bounds) - 1)
    drawn = method == "sample" and any(c.kind == "replace" for c in assigned.values())
    replicates = max(1, math.ceil(n_draws / max(len(trace_ids), 1))) if drawn else 1
    unannotated = sorted(op for op in assigned if annotations is None or annotations.get(op, "time") is None)
    notes = [UnseenOperations(tuple(c.pattern for c in unseen))] if unseen else []
    notes += [NoTimeAnnotation(op) for op in unannotated if assigned[op].kind == "replace" and method == "residual"]
    trace_index = np.repeat(trace_ids, np.diff(traces.bounds))
    samples, trace_of_sample = [], []
    for _ in range(replicates):
        new_time = np.zeros(frame.height)
        for op, change in assigned.items():
            rows = np.flatnonzero(op_of == op)
            annotation = None if op in unannotated else annotations.get(op, "time")
            new_time[rows] = _new_times(frame, rows, change, annotation, method, rng)
        durations = traces.replay(changed, new_time, trace_ids)
        samples.append(durations[is_target])
        trace_of_sample.append(trace_index[is_target])
    predicted = np.concatenate(samples)
    groups = np.concatenate(trace_of_sample)
    measured = (traces.end - traces.start)[is_target]
    # Bootstrap over requests: each trace drawn k times counts its predicted calls k times.
    medians, p95s = [], []
    for _ in range(BOOTSTRAP):
        picks = np.bincount(rng.integers(0, len(trace_ids), len(trace_ids)), minlength=len(trace_ids))
        values = np.repeat(predicted, picks[groups])
        medians.append(np.median(values))
        p95s.append(np.quantile(values, 0.95))
    share = (lambda v: float(np.mean(v < threshold_ns))) if threshold_ns is not None else (lambda v: None)
    return Prediction(target=target, changes=tuple(c.text() for c in changes), method=method,
                      n_requests=len(trace_ids), n_changed_calls=int(changed.sum()), measured=_summary(measured),
                      predicted=_summary(predicted),
                      median_interval_ns=tuple(float(v) for v in np.quantile(medians, [0.05, 0.95])),
                      p95_interval_ns=tuple(float(v) for v in np.quantile(p95s, [0.05, 0.95])),
                      threshold_ns=threshold_ns, share_under_measured=share(measured),
                      share_under_predicted=share(predicted), samples_ns=predicted, measured_ns=measured,
                      notes=tuple(notes))
