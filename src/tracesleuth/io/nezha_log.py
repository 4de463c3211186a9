"""The Nezha log CSV: container log lines with the trace context of the span that wrote them.

Recorded by the Nezha authors (Yu et al., "Nezha: Interpretable Fine-Grained Root Causes Analysis
for Microservices on Multi-Modal Observability Data", FSE 2023) on TrainTicket; one file per
minute. Header::

    Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log

``Log`` is the container runtime's JSON line (Docker's ``json-file`` log driver):
``{"log": "16:43:25.207 INFO  t.s.TravelServiceImpl#457 TraceID: ... [message]\\n",
"stream": "stdout", "time": "2023-01-29T08:43:25.207Z"}``; the level is in the text.

Field mapping (column -> canonical):

============== ===============================================================================
TimeUnixNano   ``time_ns`` (Unix epoch ns, unchanged); ``Timestamp`` (RFC 3339) when it is empty
TraceID        ``trace_id``
SpanID         ``span_id``
PodName        ``instance``; ``service`` is the pod name without its Kubernetes
               ``-<replicaset hash>-<pod id>`` suffix, the rule of the Nezha span preset
               (:data:`tracesleuth.io.tabular.PRESETS`)
Log            ``body``: its ``log`` member, the one trailing newline the runtime adds removed;
               its ``stream`` member -> attribute ``log.iostream`` (semantic conventions). A value
               that is not such JSON is kept whole as the body, and reported
Node           attribute ``host.ip`` (the node's address)
Container      attribute ``k8s.container.name``
(level)        ``severity_text`` and ``severity_number`` from the level at the start of the text
               (:data:`~tracesleuth.io._logs.LEVEL_IN_TEXT`); none when the text has none
(JSON line)    a text that is itself a structured log line (OnlineBoutique's Go, Node.js and Python
               services: ``{"message": ..., "severity": "info", ...}``) is opened
               (:func:`~tracesleuth.io.json_lines_logs.structured`): its message is the body, its
               level the severity, its other members are attributes
============== ===============================================================================
"""

from __future__ import annotations

from typing import BinaryIO, Callable, Iterator

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema as S
from ._jsondoc import loads_repairing
from ._builder import attribute_lists
from ._logs import LogBatchBuilder, severity_from_text, time_ns
from .json_lines_logs import open_structured
from .tabular import PRESETS, _extract_all, iter_csv_batches, read_csv_header, utf8_frame

__all__ = ["HEADER", "REQUIRED", "read_nezha_log_csv"]

#: The header of the Nezha log CSV, and the columns a file must have to be read as one.
HEADER = ("Timestamp", "TimeUnixNano", "Node", "PodName", "Container", "TraceID", "SpanID", "Log")
REQUIRED = ("TimeUnixNano", "PodName", "TraceID", "SpanID", "Log")
#: Semantic-convention keys of the attributes this format carries.
ATTR_LOG_IOSTREAM = "log.iostream"
ATTR_K8S_CONTAINER_NAME = "k8s.container.name"
ATTR_HOST_IP = "host.ip"
#: The pod-name rule of the Nezha span preset: one rule for spans and logs of the same pods.
_POD_SERVICE = PRESETS["nezha"].service_pattern
_NOT_JSON = "the Log column is not the container runtime's JSON ({\"log\": ...}): kept as its raw text"


def read_nezha_log_csv(stream: BinaryIO, builder: LogBatchBuilder, *,
                       damaged: Callable[[], str | None] | None = None) -> Iterator[pa.RecordBatch]:
    """Read a Nezha log CSV file (module docstring), streaming block by block.

    Parameters
    ----------
    stream : binary file
        The decompressed file, header first.
    builder : LogBatchBuilder
        Names the source, holds the reject log and checks the records.
    damaged : callable, optional
        What cut the stream short (a damaged gzip stream), or None; a last line cut by it is
        rejected whole (see :func:`tracesleuth.io.tabular.read_csv`).

    Yields
    ------
    pyarrow.RecordBatch
        Records in :data:`~tracesleuth.schema.LOG_SCHEMA`, a block of lines at a time.

    Raises
    ------
    TraceFormatError
        When the header is not UTF-8 CSV or lacks the columns of :data:`REQUIRED`.
    """
    from ..errors import TraceFormatError

    names = read_csv_header(stream, builder.source)
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise TraceFormatError(builder.source, f"the header ({', '.join(names)}) lacks the Nezha log columns "
                                               f"{', '.join(missing)}", record=1)
    for batch, records in iter_csv_batches(stream, builder, names, damaged=damaged):
        yield _convert(batch, records, builder)


def _convert(batch: pa.RecordBatch, records: np.ndarray, builder: LogBatchBuilder) -> pa.RecordBatch:
    present = [c for c in HEADER if c in batch.schema.names and c != "Log"]
    df, _ = utf8_frame(batch, present, records, builder, repair=True)  # a log record is evidence: kept
    body, streams = _decoded(batch.column("Log"), df["_record"], builder)
    pods = df["PodName"]
    services = _extract_all(_POD_SERVICE, pods.drop_nulls().unique().to_list())
    time = df["TimeUnixNano"].str.strip_chars().str.to_integer(strict=False)
    bad = (time.is_null() | (time < 0)).fill_null(True)
    if "Timestamp" in df.columns and bad.any():
        time = _from_timestamps(df, time, bad, builder)
    n = df.height
    severity, severity_text, inner = pa.nulls(n, pa.int32()), severity_from_text(body), None
    opened = open_structured(body)  # OnlineBoutique's services write JSON lines
    if opened is not None:
        body, severity, levels, inner = opened
        severity_text = pc.coalesce(levels, severity_from_text(body))
    raw = pa.table({
        "_record": df["_record"].to_arrow(),
        "_time": time.to_arrow(),
        "_raw_trace": df["TraceID"].to_arrow(),
        "_raw_span": df["SpanID"].to_arrow(),
        S.SERVICE: pods.replace_strict(services, default=pods, return_dtype=pl.String).to_arrow(),
        S.INSTANCE: pods.to_arrow(),
        "_severity": severity,
        S.SEVERITY_TEXT: severity_text,
        S.BODY: body,
    })
    strings = {ATTR_LOG_IOSTREAM: streams}
    for name, column in ((ATTR_K8S_CONTAINER_NAME, "Container"), (ATTR_HOST_IP, "Node")):
        if column in df.columns:
            strings[name] = df[column].to_arrow()
    attributes = string_attributes(strings, n)
    if inner is not None:
        attributes = pl.from_arrow(attributes).list.concat(pl.from_arrow(attribute_lists(inner))).to_arrow()
    return builder.validate(raw, attributes)


def _from_timestamps(df: pl.DataFrame, time: pl.Series, bad: pl.Series, builder: LogBatchBuilder) -> pl.Series:
    """``time`` with the rows where ``TimeUnixNano`` is not a time (missing, negative: the day's
    file has 45 ERROR records with an overflowed -6795364578871345152) taken from the
    ``Timestamp`` column (RFC 3339; without a zone read as UTC), one warning per record."""
    out = time.to_list()
    for i in bad.arg_true().to_list():
        record, raw, stamp = df["_record"][i], df["TimeUnixNano"][i], df["Timestamp"][i]
        ns, naive = time_ns(stamp) if stamp else (None, False)
        if ns is None:
            out[i] = None  # rejected by the builder: no time at all
            continue
        out[i] = ns
        if naive:
            builder.naive_time(record)
        builder.log.add(builder.source, record, f"TimeUnixNano {raw!r:.40} is not a time: the Timestamp column read "
                        "instead", field="TimeUnixNano", spans=0, excerpt=stamp)
    return pl.Series(out, dtype=pl.Int64)


#: The members of the container runtime's JSON line that are read.
_LOG_LINE = pl.Struct({"log": pl.String, "stream": pl.String})


def _decoded(raw_log: pa.Array, records: pl.Series, builder: LogBatchBuilder) -> tuple[pa.Array, pa.Array]:
    """Body and stream of each ``Log`` value (bytes): decoded natively, all at once (polars'
    JSON decoder, in parallel); when some value is not such JSON, value by value
    (:func:`_bodies`), which keeps and reports it."""
    log = pl.from_arrow(raw_log)
    try:
        decoded = log.cast(pl.String).str.json_decode(_LOG_LINE)
    except pl.exceptions.PolarsError:
        decoded = None
    if decoded is not None:
        fields = decoded.struct.unnest()
        text = fields["log"]
        if text.null_count() == log.null_count():  # every value had its "log" member
            return (text.str.strip_suffix("\n").to_arrow().cast(pa.string()),
                    fields["stream"].to_arrow().cast(pa.string()))
    bodies, streams = _bodies(raw_log.to_pylist(), records.to_list(), builder)
    return pa.array(bodies, pa.string()), pa.array(streams, pa.string())


def _bodies(values: list, records: list, builder: LogBatchBuilder) -> tuple[list, list]:
    """The ``log`` and ``stream`` members of each ``Log`` value (bytes), one by one. Invalid UTF-8
    is replaced by U+FFFD (a warning per record); a value that is not such JSON is its own body
    (a warning per record)."""
    bodies, streams = [], []
    for value, record in zip(values, records):
        if value is None:
            bodies.append(None)
            streams.append(None)
            continue
        try:
            doc, bad = loads_repairing(value)
            text = doc["log"]
            if text.__class__ is not str:
                raise TypeError
        except (orjson.JSONDecodeError, TypeError, KeyError):
            bodies.append(value.decode("utf-8", "replace"))
            streams.append(None)
            if value:
                builder.log.add(builder.source, record, _NOT_JSON, field="Log", spans=0, excerpt=value)
            continue
        if bad is not None:
            builder.log.add(builder.source, record, f"invalid UTF-8 (first at byte {bad}) replaced by U+FFFD",
                            field="Log", spans=0, excerpt=value)
        bodies.append(text[:-1] if text.endswith("\n") else text)
        stream = doc.get("stream")
        streams.append(stream if stream.__class__ is str else None)
    return bodies, streams


def string_attributes(columns: dict[str, pa.Array], n: int) -> pa.ListArray:
    """String attributes from whole columns, ``{key: values}`` (a null value is left out of its
    record's list), as one attribute list per row; vectorized."""
    if not columns:
        return pa.array([[]] * n, type=pa.list_(S.ATTRIBUTE_TYPE))
    k = len(columns)
    # row-major: row 0's k values, then row 1's, ...
    order = pa.array(np.arange(k * n).reshape(k, n).T.ravel())
    values = pa.concat_arrays([_plain_string(v) for v in columns.values()]).take(order)
    keys = pa.array(list(columns), pa.string()).take(pa.array(np.tile(np.arange(k), n)))
    counts = np.full(n, k, np.int64)
    if values.null_count:
        present = pc.is_valid(values)
        counts = present.to_numpy(zero_copy_only=False).reshape(n, k).sum(axis=1)
        values, keys = values.filter(present), keys.filter(present)
    structs = pa.StructArray.from_arrays(
        [keys, values, pa.nulls(len(values), pa.int64()), pa.nulls(len(values), pa.float64()),
         pa.nulls(len(values), pa.bool_())], fields=list(S.ATTRIBUTE_TYPE))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), structs)


def _plain_string(values) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values.cast(pa.string())
