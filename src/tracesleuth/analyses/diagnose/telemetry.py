"""Spans and log records of a store period, as the diagnosis reads them: one row per span with its
own time, the gap on the edge it calls through, its error, and one row per request.

A span's **exclusive (self) time** is its duration minus the time its children cover inside it
(the union of their intervals clipped to the parent's: calls made at once overlap; the model's rule,
:func:`~tracesleuth.model._requests.covered_by_children`). A span with a child in another service is
the caller's side of a call: its exclusive time is the **gap** on that edge (network, queueing,
serialisation) and is not counted as the caller's own time; whose gap it is decides
:func:`~tracesleuth.model.gaps.gap_owner`, the one rule every analysis uses. The times are first put
on one clock (:func:`~tracesleuth.model.assembly.skew_corrected_times`, the model's rule after
Jaeger's and Zipkin's: a child on another host found outside its parent is centred in it). Measured
on random shops whose services' clocks are off by a constant each, up to 50 ms
(``random_incident(skew_ms=50)``, 30 seeds per fault): without it, a slowed service first on 29 (a
wrong one named on 1), a network delay on 28, a slow leak on 29 (a wrong one named on 1); with it,
30, 30 and 30, and no fault below its figure on clocks that agree.

A span **failed** when its status is ``error`` or it has an ``exception`` event; it is the **origin**
of an error when it failed and none of its children did (Build 2 of issue 28: "an error span
without an error child"). A timeout is the exception: a call that failed while its callee's span,
which did not fail, lasted longer than the call itself gave up waiting, and the callee that outlived
it is the origin (durations, not end times, so a child's clock skew cannot make one; measured on
random shops, a callee 5-20 times slower on 5-20% of its calls, each cut at a timeout: a wrong
service named on 21 of 30 seeds, every one the caller whose call timed out, and the callee first on
5; see :func:`_origin`). A call never answered (a client span that failed with no child: a refused
connection, a callee down; a producer span with no child: a message never consumed) counts against
its **subject**, the callee its operation's answered calls went to (:func:`_with_subject`).

Error-level log records follow the same rule, one level up: an error propagates to the callers, and
each may log it on its way out (a caller that got an HTTP 500, or an empty answer, logs an ERROR too).
A span's error-level records are an **error-log origin** when no span below it in its trace (a
descendant, not only a child: a service's server span reaches its callee through its own client
span) has error-level records or is an error's origin: the deepest records are where the error
began (issue 28), and records above a call that timed out or was never answered are its error on
the way up. Like the error origin it is a trace's own: partitions of whole traces cannot change it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa

from ... import schema as S
from ...errors import ParameterError
from ...model._requests import covered_by_children
from ...model.assembly import skew_corrected_times

__all__ = ["AFTER_S", "ERROR_SEVERITY", "HISTORY_S", "LOG_COLUMNS", "PERIOD_CHOICES", "REQUEST_ORDER", "SPAN_COLUMNS",
           "SPAN_ORDER", "Period", "Telemetry", "moments_in_store", "period_words", "read_logs", "read_range",
           "read_store", "store_range", "trace_frames", "utc_text"]

#: Row order of :attr:`Telemetry.spans`: by request, then by span (``(trace_id, span_id)`` is
#: unique, so the order is total and does not depend on how the spans were read or partitioned).
SPAN_ORDER = ["request_start_ns", S.TRACE_ID, S.START_NS, S.SPAN_ID]
#: The columns of :func:`trace_frames`' spans (:attr:`Telemetry.spans` adds ``subject`` and the three
#: log columns).
SPAN_COLUMNS = [S.TRACE_ID, S.SPAN_ID, S.PARENT_SPAN_ID, S.SERVICE, S.OPERATION, S.INSTANCE, S.START_NS,
                S.DURATION_NS, "error", "exception_type", "origin", "unanswered", "own_ns", "gap_ns", "callee", "peer",
                "parent_service", "request_start_ns", "endpoint", "skew_ns"]
#: The attributes that name what a client span called, in order of preference (OpenTelemetry semantic
#: conventions: ``peer.service``, the callee's service name; ``server.address``, before version 1.21
#: ``net.peer.name``, its host): the calls of one operation to different peers (an HTTP client's spans
#: named by the method only, "GET") are told apart by them.
PEER_ATTRIBUTES = ("peer.service", "server.address", "net.peer.name")
#: Row order of :attr:`Telemetry.requests` (one row per trace: total).
REQUEST_ORDER = [S.START_NS, S.TRACE_ID]
#: The log columns the diagnosis reads (:func:`read_logs`); a record's body and attributes are not.
LOG_COLUMNS = [S.TIME_NS, S.SPAN_ID, S.SERVICE, S.SEVERITY_NUMBER, S.TEMPLATE_ID]

#: OpenTelemetry's severity number of ERROR (17-20 ERROR, 21-24 FATAL): a log record at or above it
#: is an error-level record (OpenTelemetry Logs Data Model, "Field: SeverityNumber").
ERROR_SEVERITY = 17


#: How a period was chosen (:attr:`Period.how`), in words (with its numbers: :func:`period_words`).
PERIOD_CHOICES = {
    "onset": "from the onset",
    "onset_to_moment": "the last part, up to the moment given, of the period since the onset",
    "given": "as given",
    "clean_before": ("the {n_requests} most recent requests before the onset whose series show no change, from "
                     "{n_stretches} stretch(es) of traffic"),
    "none_before": "no request before the problem period",
    "none_clean_before": "no clean request before the problem period",
    "reference": "reference",
}


def period_words(how: str, n_requests: int, n_stretches: int = 0, n_skipped: int = 0) -> str:
    """How a period was chosen, in words: :data:`PERIOD_CHOICES` with the period's numbers."""
    words = PERIOD_CHOICES[how].format(n_requests=n_requests, n_stretches=n_stretches)
    return words + (f"; {n_skipped} earlier incident(s) left out" if n_skipped else "")


@dataclass(frozen=True)
class Period:
    """A time range of the store and what it holds.

    Attributes
    ----------
    start_ns, end_ns : int
        Unix epoch ns, ``[start_ns, end_ns)`` of the requests' start times.
    n_requests : int
    how : str
        How it was chosen, a key of :data:`PERIOD_CHOICES` (:attr:`why`: in words).
    ranges : tuple of (int, int)
        The stretches ``[start, end)`` it is made of (a baseline can skip an earlier incident);
        empty: the whole period.
    n_skipped : int
        Earlier incidents a clean baseline left out.
    """

    start_ns: int
    end_ns: int
    n_requests: int
    how: str = "given"
    ranges: tuple = ()
    n_skipped: int = 0

    def __post_init__(self):
        if self.how not in PERIOD_CHOICES:
            raise ValueError(f"Period.how must be one of {sorted(PERIOD_CHOICES)}. Got {self.how!r} instead.")

    @property
    def why(self) -> str:
        """How it was chosen, in words."""
        return period_words(self.how, self.n_requests, len(self.ranges), self.n_skipped)

    @property
    def parts(self) -> tuple:
        """:attr:`ranges`, or the whole period as one range."""
        return self.ranges or ((self.start_ns, self.end_ns),)

    def to_dict(self) -> dict:
        return {"start": utc_text(self.start_ns), "end": utc_text(self.end_ns),
                "start_ns": self.start_ns, "end_ns": self.end_ns, "requests": self.n_requests, "how": self.how,
                "stretches": len(self.ranges), "incidents_left_out": self.n_skipped, "why": self.why}


@dataclass(frozen=True)
class Telemetry:
    """Spans, requests and log records of one stretch of a store.

    Attributes
    ----------
    spans : polars.DataFrame
        One row per span, shape (n_spans, 24), in :data:`SPAN_ORDER`: ``trace_id``, ``span_id``,
        ``parent_span_id``, ``service``, ``operation``, ``instance``, ``start_ns``, ``duration_ns``,
        ``error`` (bool), ``exception_type``, ``origin`` (bool, the span is an error's origin),
        ``unanswered`` (bool, a failed client span, or a producer span, with no child, of an operation
        whose answered calls to its peer all went to one service) and ``subject`` (that service for
        an unanswered call, else the span's own: the service the span is evidence about;
        :func:`_with_subject`), ``own_ns`` (exclusive time of a span that calls no other service,
        else 0), ``gap_ns`` (exclusive time of a span that calls another service, else 0),
        ``callee`` (that service, else null), ``peer`` (a client or producer span's
        :data:`PEER_ATTRIBUTES`, else null),
        ``request_start_ns`` and ``endpoint`` (its request's), ``parent_service``, ``error_logs``
        (its error-level log records), ``log_records`` (all its log records), ``error_log_origin``
        (bool: it has error-level records and no span below it in its trace has any or is an error's
        origin), ``skew_ns`` (the shift its times were given to put them on its caller's clock,
        :func:`~tracesleuth.model.assembly.skew_corrected_times`; 0 for most).
    requests : polars.DataFrame
        One row per trace with an entry span, shape (n_requests, 8): ``trace_id``, ``start_ns``,
        ``latency_ns``, ``endpoint`` (``service:operation`` of its entry span), ``error`` (a span
        failed), ``spans`` (its span count), ``error_log`` (it wrote an error-level record),
        ``log_records`` (how many it wrote), in :data:`REQUEST_ORDER` (by ``start_ns``, then
        ``trace_id``).
    logs : polars.DataFrame or None
        ``time_ns``, ``span_id``, ``service``, ``severity_number``, ``template_id``,
        ``request_start_ns`` and ``endpoint`` (null when the record's span is not in the spans); None when the
        store holds no log records.
    """

    spans: pl.DataFrame
    requests: pl.DataFrame
    logs: pl.DataFrame | None

    @classmethod
    def from_tables(cls, spans, logs=None) -> "Telemetry":
        """Build from Arrow (or polars) spans in :data:`~tracesleuth.schema.SPAN_SCHEMA` and,
        optionally, log records in :data:`~tracesleuth.schema.LOG_SCHEMA` (or its
        :data:`LOG_COLUMNS`): :func:`trace_frames`, then :meth:`from_frames`.

        Raises
        ------
        EmptyDataError
            No span has an entry span (no request to diagnose).
        """
        return cls.from_frames(*trace_frames(spans), logs)

    @classmethod
    def from_frames(cls, spans: pl.DataFrame, requests: pl.DataFrame, logs=None) -> "Telemetry":
        """Build from :func:`trace_frames`' two frames and, optionally, log records.

        The frames may be the concatenation of :func:`trace_frames` over partitions of whole
        traces (``tracesleuth diagnose --scheduler``: :mod:`tracesleuth.scale.telemetry`), sorted by
        :data:`SPAN_ORDER` and :data:`REQUEST_ORDER`: every column of theirs is a trace's own, so
        the result is that of :meth:`from_tables` on all the spans. The log records are joined here,
        to the spans of every trace, by span id.

        Parameters
        ----------
        spans : polars.DataFrame
            :func:`trace_frames`' spans, shape (n_spans, 20): :data:`SPAN_COLUMNS`, in
            :data:`SPAN_ORDER`.
        requests : polars.DataFrame
            :func:`trace_frames`' requests, shape (n_requests, 8), in :data:`REQUEST_ORDER`.
        logs : pyarrow.Table or polars.DataFrame, optional
            Log records with at least :data:`LOG_COLUMNS`; None or empty: the store has none.

        Raises
        ------
        EmptyDataError
            No request (no trace has an entry span).
        """
        from ...errors import EmptyDataError

        if requests.height == 0:
            raise EmptyDataError("No trace has an entry span: there is no request to diagnose.")
        frame = spans
        log_frame = None
        if logs is not None and len(logs) > 0:
            log_frame = _log_frame(logs, frame)
            per_span = log_frame.group_by(S.SPAN_ID).agg(
                (pl.col(S.SEVERITY_NUMBER) >= ERROR_SEVERITY).sum().cast(pl.Int64).alias("error_logs"),
                pl.len().cast(pl.Int64).alias("log_records"))
            frame = frame.join(per_span, on=S.SPAN_ID, how="left", maintain_order="left")
            errored = frame.filter(pl.col("error_logs") > 0)[S.TRACE_ID].unique()
            per_request = (log_frame.join(frame.select(S.SPAN_ID, S.TRACE_ID), on=S.SPAN_ID, how="inner")
                           .group_by(S.TRACE_ID).agg(pl.len().cast(pl.Int64).alias("_logs")))
            requests = (requests.join(per_request, on=S.TRACE_ID, how="left", maintain_order="left")
                        .with_columns(pl.col(S.TRACE_ID).is_in(errored.implode()).alias("error_log"),
                                      pl.col("_logs").fill_null(0).alias("log_records")).drop("_logs"))
        else:
            frame = frame.with_columns(pl.lit(None, pl.Int64).alias("error_logs"),
                                       pl.lit(None, pl.Int64).alias("log_records"))
        frame = frame.with_columns(pl.col("error_logs").fill_null(0), pl.col("log_records").fill_null(0))
        return cls(_with_error_log_origin(_with_subject(frame)), requests, log_frame)

    def during(self, period: Period) -> "Telemetry":
        """The requests starting in the period's ranges, with their spans and log records."""
        def inside(frame, column):
            condition = pl.lit(False)
            for start_ns, end_ns in period.parts:
                condition = condition | ((pl.col(column) >= start_ns) & (pl.col(column) < end_ns))
            return frame.filter(condition)

        logs = None if self.logs is None else inside(self.logs, "request_start_ns")
        return Telemetry(inside(self.spans, "request_start_ns"), inside(self.requests, S.START_NS), logs)

    @property
    def n_requests(self) -> int:
        return self.requests.height

    @property
    def has_logs(self) -> bool:
        """The store has log records (maybe none in this period)."""
        return self.logs is not None

    @property
    def logged(self) -> bool:
        """This period holds a log record: its log series mean something. Where none was collected
        every service would read as having fallen silent at once (measured on the recorded
        TrainTicket day, whose records end at 10:00:08: the faults after it had every baseline
        template "stopped", and the service with the most templates weighed as a culprit)."""
        return self.logs is not None and self.logs.height > 0


def _with_error_log_origin(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``error_log_origin``: the span has error-level log records and no descendant
    in its trace has any or is an error's origin (:func:`_origin`: records above a call that timed
    out, or was never answered, are that error on its way up, as its error is the callee's;
    measured on random shops whose callers log a failed call: the caller named on 9 of 30 timeouts
    and 20 of 30 unavailable callees before, as its records were the deepest).

    The spans with records, and the error origins, mark their ancestors, one level per step (parent
    ids within the trace), until no new ancestor is found: as many steps as the deepest chain above
    a record, each a join of the marked spans only. A parent id that is not in the trace (an
    orphan's) ends its chain.
    """
    keys = [S.TRACE_ID, S.SPAN_ID]
    links = frame.select(S.TRACE_ID, S.SPAN_ID, S.PARENT_SPAN_ID)

    def parents(of: pl.DataFrame) -> pl.DataFrame:
        return (links.join(of, on=keys, how="semi").filter(pl.col(S.PARENT_SPAN_ID).is_not_null())
                .select(S.TRACE_ID, pl.col(S.PARENT_SPAN_ID).alias(S.SPAN_ID)).unique())

    step = parents(frame.filter((pl.col("error_logs") > 0) | pl.col("origin")).select(keys))
    above = step.head(0)
    while step.height:
        above = pl.concat([above, step])
        step = parents(step).join(above, on=keys, how="anti")   # a cycle of malformed parent ids ends here
    # ``above`` is unique (every step is, and new): the left join keeps one row per span.
    below = (frame.select(keys).join(above.with_columns(pl.lit(True).alias("_below")), on=keys, how="left",
                                     maintain_order="left")["_below"].fill_null(False))
    return frame.with_columns(((pl.col("error_logs") > 0) & ~below).alias("error_log_origin"))


def _with_subject(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``subject``: the service a span is evidence about. A span's own, but for an
    unanswered call (a client span that failed with no child: a refused connection, a callee down
    or crashing before it could record a span; a producer span with no child: a message never
    consumed) the service its operation's answered calls to the same peer (:data:`PEER_ATTRIBUTES`,
    where the spans name one) went to, when they all went to one: the call stands for that
    service's span that never came, its time is the gap on that edge (``callee`` set, ``own_ns``
    moved to ``gap_ns``). Calls of an operation and peer never answered in these spans, or
    answered by several services, stay the caller's (``unanswered`` False).

    Learned from all the spans, not one trace: measured on random shops, 20-100% of the calls into
    a service refused, the caller named on 27 of 30 seeds as the error's origin and the culprit
    first on none; with every client span named "GET" (an HTTP client's, OpenTelemetry semantic
    conventions 1.21), without the peer, the caller named on 19 of 20.
    """
    if not frame["unanswered"].any():   # the common case: no join over every span
        return frame.with_columns(pl.col(S.SERVICE).alias("subject"))
    frame = frame.with_columns(pl.col("peer").fill_null("").alias("_peer"))
    keys = [S.SERVICE, S.OPERATION, "_peer"]
    targets = (frame.join(frame.filter(pl.col("unanswered")).select(keys).unique(), on=keys, how="semi")
               .filter(pl.col("callee").is_not_null())
               .group_by(keys).agg(pl.col("callee").n_unique().alias("_n"), pl.col("callee").first().alias("_to"))
               .filter(pl.col("_n") == 1).drop("_n"))
    frame = frame.join(targets, on=keys, how="left", maintain_order="left").drop("_peer")
    to = pl.col("unanswered") & pl.col("_to").is_not_null()
    return frame.with_columns(
        pl.when(to).then(pl.col("_to")).otherwise(pl.col(S.SERVICE)).alias("subject"),
        pl.when(to).then(pl.col("_to")).otherwise(pl.col("callee")).alias("callee"),
        pl.when(to).then(pl.col("own_ns")).otherwise(pl.col("gap_ns")).alias("gap_ns"),
        pl.when(to).then(0).otherwise(pl.col("own_ns")).alias("own_ns"),
        to.alias("unanswered")).drop("_to")


def trace_frames(spans) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The spans and requests of :class:`Telemetry`, before log records: what each trace gives by
    itself (a span's parent, children and request are in its trace), so that partitions of whole
    traces give, concatenated and sorted, the frames of all their spans at once.

    Parameters
    ----------
    spans : pyarrow.Table or polars.DataFrame
        Spans in :data:`~tracesleuth.schema.SPAN_SCHEMA` (at least its ids, names, times,
        ``status`` and ``events``; ``kind`` where known, else no span is a client's); a span listed
        twice in its trace counts once (its first row).

    Returns
    -------
    spans : polars.DataFrame
        One row per span of a trace with an entry span, shape (n_spans, 20): the columns of
        :attr:`Telemetry.spans` but ``subject``, ``error_logs``, ``log_records`` and
        ``error_log_origin`` (:data:`SPAN_COLUMNS`; ``unanswered`` is true for every failed client span
        and every producer span with no child, :meth:`Telemetry.from_frames` keeps it for those
        whose callee it learns), in :data:`SPAN_ORDER`.
    requests : polars.DataFrame
        One row per trace with an entry span: :attr:`Telemetry.requests` (``error_log`` False,
        ``log_records`` 0), in :data:`REQUEST_ORDER`.
    """
    frame = _span_frame(spans)
    requests = _requests(frame)
    frame = frame.join(requests.select(S.TRACE_ID, pl.col(S.START_NS).alias("request_start_ns"), "endpoint"),
                       on=S.TRACE_ID, how="inner")
    return frame.select(SPAN_COLUMNS).sort(SPAN_ORDER), requests


def _span_frame(spans) -> pl.DataFrame:
    columns = [S.TRACE_ID, S.SPAN_ID, S.PARENT_SPAN_ID, S.SERVICE, S.OPERATION, S.INSTANCE, S.START_NS, S.END_NS,
               S.STATUS, S.EVENTS]
    given = spans.column_names if isinstance(spans, pa.Table) else spans.columns
    attributes = [S.ATTRIBUTES] if S.ATTRIBUTES in given else []
    start, end, _ = skew_corrected_times(spans)   # times on one clock (the model's rule, module docstring)
    if isinstance(spans, pa.Table):
        spans = pl.from_arrow(spans.select(columns + [S.KIND] * (S.KIND in given) + attributes))
    spans = spans.with_columns(pl.Series(S.START_NS, start), pl.Series(S.END_NS, end),
                               pl.Series("skew_ns", start - spans[S.START_NS].to_numpy()))
    kind = pl.col(S.KIND) if S.KIND in given else pl.lit("unspecified").alias(S.KIND)
    cast = {c: pl.String for c in (S.TRACE_ID, S.SPAN_ID, S.PARENT_SPAN_ID, S.SERVICE, S.OPERATION, S.INSTANCE, S.KIND)}
    frame = spans.select(*columns, "skew_ns", kind, *attributes).cast(cast).with_row_index("_row")
    # Events are rare: their lists are read only on the spans that have any; attributes only on
    # client and producer spans (the peer called).
    with_events = frame.filter(pl.col(S.EVENTS).list.len() > 0).select(
        "_row", _exception_type().alias("exception_type"))
    peers = (frame.filter(pl.col(S.KIND).is_in(["client", "producer"]) & (pl.col(S.ATTRIBUTES).list.len() > 0))
             .select("_row", _peer().alias("peer")) if attributes
             else pl.DataFrame(schema={"_row": pl.UInt32, "peer": pl.String}))
    frame = (frame.drop(S.EVENTS, *attributes)
             .join(with_events, on="_row", how="left", maintain_order="left")
             .join(peers, on="_row", how="left", maintain_order="left")
             .with_columns((pl.col(S.END_NS) - pl.col(S.START_NS)).clip(0).alias(S.DURATION_NS),
                           ((pl.col(S.STATUS) == "error") | pl.col("exception_type").is_not_null()).alias("error"))
             .drop(S.STATUS, "_row").unique(subset=[S.TRACE_ID, S.SPAN_ID], keep="first", maintain_order=True))
    frame = frame.with_row_index("_row")
    parents = frame.select(S.TRACE_ID, pl.col(S.SPAN_ID).alias(S.PARENT_SPAN_ID), pl.col("_row").alias("_parent_row"),
                           pl.col(S.SERVICE).alias("parent_service"), pl.col(S.START_NS).alias("_ps"),
                           pl.col(S.END_NS).alias("_pe"), pl.col("error").alias("_parent_error"),
                           pl.col(S.DURATION_NS).alias("_parent_ns"))
    frame = frame.join(parents, on=[S.TRACE_ID, S.PARENT_SPAN_ID], how="left", maintain_order="left")
    with_parent = frame.filter(pl.col("_ps").is_not_null())
    children = (with_parent.with_columns((pl.col(S.SERVICE) != pl.col("parent_service")).alias("_cross"))
                # the longest cross-service child first: the callee (ties: the earliest, then by span id)
                .sort(S.DURATION_NS, S.START_NS, S.SPAN_ID, descending=[True, False, False])
                .group_by(S.TRACE_ID, S.PARENT_SPAN_ID)
                .agg(pl.col("error").any().alias("_child_error"),
                     pl.col(S.DURATION_NS).filter(~pl.col("error")).max().alias("_longest_ok_child_ns"),
                     pl.col(S.SERVICE).filter(pl.col("_cross")).first().alias("callee"))
                .rename({S.PARENT_SPAN_ID: S.SPAN_ID}))
    frame = (frame.join(children, on=[S.TRACE_ID, S.SPAN_ID], how="left", maintain_order="left")
             .join(_children_ns(with_parent), on="_row", how="left", maintain_order="left").drop("_row"))
    exclusive = (pl.col(S.DURATION_NS) - pl.col("_children_ns").fill_null(0)).clip(0)
    calls_out = pl.col("callee").is_not_null()
    return frame.with_columns(
        pl.when(calls_out).then(0).otherwise(exclusive).alias("own_ns"),
        pl.when(calls_out).then(exclusive).otherwise(0).alias("gap_ns"),
        _origin().alias("origin"),
        (pl.col("_children_ns").is_null() & ((pl.col(S.KIND) == "client") & pl.col("error")
                                             | (pl.col(S.KIND) == "producer"))).alias("unanswered"),
        pl.col("_ps").is_null().alias("_root"),
    ).drop("_ps", "_pe", "_parent_row", "_children_ns", "_child_error", "_parent_error", "_parent_ns",
           "_longest_ok_child_ns", S.KIND)


def _children_ns(with_parent: pl.DataFrame) -> pl.DataFrame:
    """``_row`` (a parent's row) and ``_children_ns``: the time its children cover inside it, the union
    of their intervals clipped to it (:func:`~tracesleuth.model._requests.covered_by_children`, the
    exclusive time every analysis reads), not their sum: calls made at once overlap. Measured on
    random shops whose spans make their calls at once (``random_incident(parallel=True)``, 30
    seeds), with the sum floored at 0: one slowed instance's service first on 29 (its instance on
    28) and a slow leak's culprit on 29, each with one "no change in the store"; with the union 30,
    30 and 30, every other fault as before."""
    start = pl.max_horizontal(S.START_NS, "_ps")
    columns = with_parent.select(pl.col("_parent_row").cast(pl.Int64), start.alias("_s"),
                                 pl.max_horizontal(pl.min_horizontal(S.END_NS, "_pe"), start).alias("_e"),
                                 pl.col("_ps"))
    parents, covered = covered_by_children(*(columns[c].to_numpy() for c in columns.columns))
    return pl.DataFrame({"_row": parents, "_children_ns": covered},
                        schema={"_row": pl.UInt32, "_children_ns": pl.Int64})


def _origin() -> pl.Expr:
    """Whether a span is an error's origin (module docstring): it failed and no child did, unless a
    child that did not fail lasted longer than it (it gave up waiting: a timeout); or it did not
    fail, its parent did, and it lasted longer than its parent (the call it outlived timed out)."""
    gave_up = (pl.col("_longest_ok_child_ns") > pl.col(S.DURATION_NS)).fill_null(False)
    outlived = (~pl.col("error") & pl.col("_parent_error")
                & (pl.col(S.DURATION_NS) > pl.col("_parent_ns"))).fill_null(False)
    return (pl.col("error") & ~pl.col("_child_error").fill_null(False) & ~gave_up) | outlived


def _peer() -> pl.Expr:
    """The first of :data:`PEER_ATTRIBUTES` a span has, as a string (null when it has none)."""
    return pl.coalesce([pl.col(S.ATTRIBUTES).list.eval(
        pl.element().filter(pl.element().struct.field("key") == key).struct.field("str")).list.first()
        for key in PEER_ATTRIBUTES])


def _exception_type() -> pl.Expr:
    """The ``exception.type`` of a span's first ``exception`` event ("" when it has none; null when
    the span has no ``exception`` event)."""
    types = pl.col(S.EVENTS).list.eval(
        pl.when(pl.element().struct.field("name") == "exception").then(
            pl.element().struct.field("attributes").list.eval(
                pl.when(pl.element().struct.field("key") == "exception.type")
                .then(pl.element().struct.field("str")).otherwise(None)
            ).list.drop_nulls().list.first().fill_null("")
        ).otherwise(None)).list.drop_nulls()
    return types.list.first()


def _requests(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per trace with a root span (no parent in the data); its earliest root is the entry
    (ties: the first by span id). In :data:`REQUEST_ORDER`."""
    roots = (frame.filter(pl.col("_root")).sort(S.START_NS, S.SPAN_ID)
             .group_by(S.TRACE_ID, maintain_order=True).first()
             .select(S.TRACE_ID, S.START_NS, pl.col(S.DURATION_NS).alias("latency_ns"),
                     pl.concat_str(S.SERVICE, S.OPERATION, separator=":").alias("endpoint")))
    errors = frame.group_by(S.TRACE_ID).agg(pl.col("error").any(), pl.len().cast(pl.Int64).alias("spans"))
    return (roots.join(errors, on=S.TRACE_ID, how="left")
            .with_columns(pl.lit(False).alias("error_log"), pl.lit(0, pl.Int64).alias("log_records"))
            .sort(REQUEST_ORDER))


def _log_frame(logs, spans: pl.DataFrame) -> pl.DataFrame:
    logs = pl.from_arrow(logs.select(LOG_COLUMNS)) if isinstance(logs, pa.Table) else logs.select(LOG_COLUMNS)
    logs = logs.cast({S.SPAN_ID: pl.String, S.SERVICE: pl.String})
    owners = spans.select(S.SPAN_ID, "request_start_ns", "endpoint").unique(subset=[S.SPAN_ID], keep="first",
                                                                             maintain_order=True)
    return logs.join(owners, on=S.SPAN_ID, how="left", maintain_order="left")


def utc_text(time_ns: int) -> str:
    """``time_ns`` (Unix epoch ns) as ISO 8601 UTC with milliseconds: ``2023-01-29T08:43:04.120Z``."""
    from datetime import datetime, timezone

    moment = datetime.fromtimestamp(time_ns / 1e9, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


#: How much of a store's history before the moment ``diagnose`` reads, seconds: the onset search
#: looks back 15 minutes and the baseline gathers clean traffic before it, skipping earlier
#: incidents; six hours hold many of them, and the memory stays bounded on a store of weeks.
HISTORY_S = 6 * 3600
#: How much after the moment (or the problem period's end) it reads, seconds: the problem period
#: runs up to 5 minutes from the onset; a minute more keeps the traces that end later.
AFTER_S = 6 * 60


def read_range(around_ns: tuple) -> tuple[int, int]:
    """The span start times ``[low_ns, high_ns)`` a diagnosis around ``around_ns`` reads: from
    :data:`HISTORY_S` before its first moment to :data:`AFTER_S` after its second (Unix epoch ns)."""
    return around_ns[0] - HISTORY_S * 10**9, around_ns[1] + AFTER_S * 10**9


def read_logs(store, span_range: tuple | None = None):
    """The log records a diagnosis reads: the :data:`LOG_COLUMNS` of a store's records (of those
    written in ``span_range``, ``[low_ns, high_ns)``, when given), in store order; None when the
    store holds no log part.

    Parameters
    ----------
    store : SpanStore
    span_range : (int, int), optional
        :func:`read_range`'s.

    Returns
    -------
    pyarrow.Table or None
        Shape (n_records, 5).
    """
    if not store.log_files():
        return None
    low, high = span_range if span_range is not None else (None, None)
    return store.read_logs(start_ns=low, end_ns=high, columns=LOG_COLUMNS)


def read_store(path: Path, *, around_ns: tuple | None = None):
    """The spans and log records (None when there are none) of a span store.

    Parameters
    ----------
    path : Path
    around_ns : (int, int), optional
        Read only the spans and records from ``HISTORY_S`` before the first to ``AFTER_S`` after
        the second (Unix epoch ns; :func:`read_range`); default: the whole store.

    Returns
    -------
    (polars.DataFrame or pyarrow.Table, pyarrow.Table or None)
        The spans in :data:`~tracesleuth.schema.SPAN_SCHEMA`, in store order; the records'
        :data:`LOG_COLUMNS` (:func:`read_logs`).

    Raises
    ------
    ParameterError
        When ``path`` is not a span store (it says how to make one).

    See Also
    --------
    tracesleuth.scale.telemetry.partitioned_telemetry : the same spans, built partition by partition.
    """
    import polars as pl

    from ...io.store import open_store

    store = open_store(path)
    if around_ns is None:
        return store.read_spans(dictionary=False), read_logs(store)
    low, high = read_range(around_ns)
    spans = store.scan().filter(pl.col("start_ns").is_between(low, high, closed="left")).collect()
    return spans, read_logs(store, (low, high))


def moments_in_store(store: Path, around_ns: tuple | None = None) -> tuple[int, int]:
    """The moments a diagnosis reads around (``diagnose``'s and ``analyze --at``'s ``around_ns``:
    a moment twice, or a period; Unix epoch ns), checked against the store; None: its last span's
    start, twice.

    Raises
    ------
    ParameterError
        The moments are all outside the store (naming the store's range).
    """
    first, last = store_range(store)
    if around_ns is None:
        return last, last
    if around_ns[1] < first or around_ns[0] > last:
        raise ParameterError(f"{utc_text(around_ns[0])} is outside the store, which holds spans from "
                             f"{utc_text(first)} to {utc_text(last)}.")
    return around_ns


def store_range(store: Path) -> tuple[int, int]:
    """The first and last span start of a store (Unix epoch ns), read from one column."""
    import polars as pl

    from ...io.store import open_store

    first, last = open_store(store).scan().select(
        pl.col("start_ns").min().alias("first"), pl.col("start_ns").max().alias("last")).collect().row(0)
    if first is None:
        raise ParameterError(f"{store}: the store holds no span")
    return int(first), int(last)
