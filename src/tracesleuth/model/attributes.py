"""Entry-span attributes as trace-table columns: categorical, numeric, or left out and reported.

Each request of the trace table (:mod:`.table`) carries the attributes of its entry span (span
and resource attributes alike). An attribute key becomes

* ``attr[KEY]`` (String, :func:`~tracesleuth.schema.attribute_column`), a category, when it has
  at least 2 and at most ``max_categories`` distinct values over the requests;
* ``num[KEY]`` (:func:`~tracesleuth.schema.numeric_attribute_column`), a number in the
  attribute's own unit, when every value is a number, with at least 2 distinct values: an Int64
  column when every value is an integer, else Float64. Typed numbers (``int``, ``float``
  attributes: OpenTelemetry's ``http.response.body.size``, ``db.response.returned_rows``) are
  always numbers, and with few enough values (an HTTP status code) *also* a category (as text).
  Numbers written as text only (Zipkin tags and CSV columns carry every value as text) are
  numbers only when they have too many values for a category (``response_size``); with few, they stay
  a category only (``"1.2"`` is more likely a version than a quantity). Text is a number when
  it parses as a finite float (``"12"``, ``"-0.5"``, ``"1e3"``; not ``"nan"``, ``"inf"``);
* left out otherwise, and reported as ``(KEY, reason)`` with the reasons
  :data:`IDENTIFIER` (:func:`is_identifier`: ports, ids, UUIDs; never a category nor a number,
  whatever its cardinality), :data:`CONSTANT` (fewer than 2 distinct values) and
  :data:`TOO_MANY_VALUES` (more than ``max_categories`` distinct values, not numeric).

The choice is made once over every request (never partition-wise: a key constant in one
partition may vary over all of them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from .. import schema as S

#: Reasons an entry-span attribute key has no column (``TraceTable.dropped_attributes``).
IDENTIFIER = "identifier"
CONSTANT = "constant"
TOO_MANY_VALUES = "too many distinct values"

#: Last words of identifier keys (the key split at ``.``, ``_``, ``-``, ``:``, ``/``, spaces and
#: lower-to-upper case changes, compared in lower case): the OpenTelemetry semantic conventions
#: name identifiers ``*.id`` (``service.instance.id``, ``thread.id``, ``session.id``,
#: ``messaging.message.id``), ``*_id`` (``faas.invocation_id``), ``*.uid`` (``k8s.pod.uid``),
#: ``*.pid`` (``process.pid``) and ports ``*.port`` (``server.port``, ``client.port``,
#: ``net.peer.port``, ``network.peer.port``); Zipkin and Envoy tags add ``guid:x-request-id``,
#: ``requestId``.
IDENTIFIER_WORDS = frozenset({"id", "ids", "uid", "uuid", "guid", "pid", "ppid", "tid", "port"})
#: Endings of identifier keys written as one word (``requestid``, ``userid``, ``traceid``).
IDENTIFIER_ENDINGS = ("requestid", "traceid", "spanid", "sessionid", "correlationid", "messageid", "userid",
                      "uuid", "guid")
#: Values that are identifiers: a UUID, or 16 or more hexadecimal digits (a trace or span id, a
#: hash), with an optional ``0x``. A key is an identifier when every value is one of these and
#: not every value is only decimal digits (that is a number).
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
HEX_ID_PATTERN = r"^(0[xX])?[0-9a-fA-F]{16,}$"

_WORDS = re.compile(r"[.\-_:/\s]+|(?<=[a-z0-9])(?=[A-Z])")


def is_identifier(key: str, values: pl.Series | None = None) -> bool:
    """Whether an attribute is an identifier (ports, ids): never a category nor a number.

    Parameters
    ----------
    key : str
        The attribute key. It names an identifier when its last word is one of
        :data:`IDENTIFIER_WORDS` or ends with one of :data:`IDENTIFIER_ENDINGS`.
    values : polars.Series of str, optional
        The key's text values (nulls ignored). They are identifiers when every one matches
        :data:`UUID_PATTERN` or :data:`HEX_ID_PATTERN` and some value is not only decimal
        digits.

    Returns
    -------
    bool

    Examples
    --------
    >>> import polars as pl
    >>> [is_identifier(k) for k in ("client.port", "thread.id", "guid:x-request-id", "requestId",
    ...                             "http.response.status_code", "http.route")]
    [True, True, True, True, False, False]
    >>> is_identifier("session", pl.Series(["6f1c0d2e-9a4b-4c3d-8e7f-0a1b2c3d4e5f"]))
    True
    """
    if _identifier_key(key):
        return True
    if values is None:
        return False
    flags = pl.DataFrame({"v": values}).select(text=pl.col("v").drop_nulls().len() > 0, **_id_value_flags(pl.col("v")))
    return _identifier_values(*flags.row(0))


def _identifier_key(key: str) -> bool:
    words = [w for w in _WORDS.split(key) if w]
    last = words[-1].lower() if words else key.lower()
    return last in IDENTIFIER_WORDS or last.endswith(IDENTIFIER_ENDINGS)


def _id_value_flags(text: pl.Expr) -> dict[str, pl.Expr]:
    """Whether every text value looks like an identifier, and whether every one is only decimal
    digits (both true of no value: they combine over partitions with ``and``)."""
    text = text.drop_nulls()
    return {"ids_only": (text.str.contains(UUID_PATTERN) | text.str.contains(HEX_ID_PATTERN)).all(),
            "digits_only": text.str.contains(r"^[0-9]+$").all()}


def _identifier_values(text: bool, ids_only: bool, digits_only: bool) -> bool:
    return bool(text and ids_only and not digits_only)


@dataclass(frozen=True)
class AttributeColumns:
    """Which entry-span attribute keys get a column (:func:`choose_columns`).

    Attributes
    ----------
    categorical : tuple of str
        Keys with an ``attr[KEY]`` column, sorted.
    numeric : dict of str to str
        Keys with a ``num[KEY]`` column: ``"exact"`` (Int64) or ``"number"`` (Float64).
    dropped : tuple of (str, str)
        ``(key, reason)`` of the keys with no column, sorted by key.
    """

    categorical: tuple = ()
    numeric: dict = field(default_factory=dict)
    dropped: tuple = ()


def attribute_summary(attributes: pa.ChunkedArray | pa.Array | None, max_categories: int) -> pl.DataFrame:
    """What deciding the attribute columns needs to know of some requests' entry-span attributes.

    The summaries of disjoint sets of requests (partitions) combine with
    :func:`merge_attribute_summaries` into the summary of all of them, and the columns chosen
    from it (:func:`choose_columns`) are those chosen from all requests at once: each key's
    distinct values are kept up to one more than a category may have, its distinct numbers up to
    two, and the rest are ``and``/``or`` of flags.

    Parameters
    ----------
    attributes : pyarrow.ChunkedArray or Array of list<struct>, shape (n_requests,), or None
    max_categories : int

    Returns
    -------
    polars.DataFrame
        One row per key: ``key``, ``values`` (distinct values as text, at most
        ``max_categories + 1``), ``numbers`` (Float64) and ``integers`` (Int64) (distinct, at
        most 2 each), ``numeric``, ``integer`` (every value a number, an integer), ``typed``
        (some value not text), ``text`` (some value text), ``ids_only``, ``digits_only`` (every
        text value an identifier, only decimal digits).
    """
    long = _long(attributes)
    if long is None:
        return _EMPTY_SUMMARY.clear()
    return long.group_by("key").agg(
        values=pl.col("value").unique().head(max_categories + 1),
        numbers=pl.col("number").drop_nulls().unique().head(2),
        integers=pl.col("exact").drop_nulls().unique().head(2),
        numeric=pl.col("number").is_not_null().all(),
        integer=pl.col("exact").is_not_null().all(),
        typed=pl.col("str").is_null().any(),  # some value is not text: with numeric, a typed number
        text=pl.col("str").is_not_null().any(),
        **_id_value_flags(pl.col("str")),
    ).select(_EMPTY_SUMMARY.columns).cast(_EMPTY_SUMMARY.schema)


def merge_attribute_summaries(summaries, max_categories: int) -> pl.DataFrame:
    """The :func:`attribute_summary` of the union of the requests of several summaries."""
    frames = [s for s in summaries if s.height]
    if not frames:
        return _EMPTY_SUMMARY.clear()
    return pl.concat(frames).group_by("key").agg(
        pl.col("values").list.explode(keep_nulls=False, empty_as_null=False).unique().head(max_categories + 1),
        pl.col("numbers").list.explode(keep_nulls=False, empty_as_null=False).unique().head(2),
        pl.col("integers").list.explode(keep_nulls=False, empty_as_null=False).unique().head(2),
        pl.col("numeric", "integer", "ids_only", "digits_only").all(),
        pl.col("typed", "text").any(),
    ).select(_EMPTY_SUMMARY.columns)


def choose_columns(summary: pl.DataFrame, max_categories: int) -> AttributeColumns:
    """The attribute columns of the requests a summary describes (rules of the module docstring)."""
    categorical, numeric, dropped = [], {}, []
    for row in summary.sort("key").iter_rows(named=True):
        key, n_values = row["key"], len(row["values"])
        if _identifier_key(key) or _identifier_values(row["text"], row["ids_only"], row["digits_only"]):
            dropped.append((key, IDENTIFIER))
            continue
        keep_category = 2 <= n_values <= max_categories
        n_numbers = len(row["integers"]) if row["integer"] else len(row["numbers"])
        if row["numeric"] and n_numbers >= 2 and (row["typed"] or not keep_category):
            numeric[key] = "exact" if row["integer"] else "number"
        elif not keep_category:
            dropped.append((key, CONSTANT if n_values < 2 else TOO_MANY_VALUES))
        if keep_category:
            categorical.append(key)
    return AttributeColumns(tuple(categorical), numeric, tuple(dropped))


def attribute_frame(attributes: pa.ChunkedArray | pa.Array | None, columns: AttributeColumns) -> pl.DataFrame:
    """The chosen ``attr[KEY]`` and ``num[KEY]`` columns of some requests.

    Returns
    -------
    polars.DataFrame
        Shape (n_requests, n_categorical + n_numeric): ``attr[KEY]`` columns (String; numbers
        in their text form) in key order, then ``num[KEY]`` columns (Int64 or Float64) in key
        order; null where the entry span has no such attribute. When a key is repeated in one
        span, its first value is taken. No column (width 0) when none is chosen.
    """
    n = 0 if attributes is None else len(attributes)
    long = _long(attributes)
    if not (columns.categorical or columns.numeric):
        return pl.DataFrame()
    if long is None:
        long = _EMPTY_LONG.clear()
    index = pl.DataFrame({"_req": np.arange(n, dtype=np.int64)})
    out = [index.join(_wide(long, "value", list(columns.categorical)), on="_req", how="left",
                      maintain_order="left").select(pl.col(k).cast(pl.String).alias(S.attribute_column(k))
                                                    for k in columns.categorical)]
    if columns.numeric:
        wide = {v: index.join(_wide(long, v, [k for k, kind in columns.numeric.items() if kind == v]),
                              on="_req", how="left", maintain_order="left") for v in set(columns.numeric.values())}
        out.append(pl.DataFrame([wide[v][k].cast(pl.Int64 if v == "exact" else pl.Float64)
                                 .alias(S.numeric_attribute_column(k)) for k, v in sorted(columns.numeric.items())]))
    return pl.concat(out, how="horizontal")


def entry_attribute_columns(attributes: pa.ChunkedArray | pa.Array | None, max_categories: int
                            ) -> tuple[pl.DataFrame, tuple[tuple[str, str], ...]]:
    """The ``attr[KEY]`` and ``num[KEY]`` columns of the requests' entry-span attributes.

    Parameters
    ----------
    attributes : pyarrow.ChunkedArray or Array of list<struct>, shape (n_requests,), or None
        Each request's entry-span attributes (:data:`~tracesleuth.schema.ATTRIBUTE_TYPE`), in
        table row order.
    max_categories : int
        Most distinct values of a category.

    Returns
    -------
    columns : polars.DataFrame
        Shape (n_requests, n_categorical + n_numeric), as :func:`attribute_frame`.
    dropped : tuple of (str, str)
        ``(key, reason)`` of every key with no column, sorted by key; reasons as in the module
        docstring.

    See Also
    --------
    attribute_summary, merge_attribute_summaries, choose_columns : the same choice made over
        partitions of the requests (:mod:`tracesleuth.scale`).
    """
    chosen = choose_columns(attribute_summary(attributes, max_categories), max_categories)
    return attribute_frame(attributes, chosen), chosen.dropped


def _long(attributes) -> pl.DataFrame | None:
    """One row per (request, attribute entry) with a value: ``_req``, ``key``, ``str``, ``value``
    (text), ``exact`` (Int64) and ``number`` (finite Float64); None when there is none."""
    if attributes is None or len(attributes) == 0:
        return None
    n = len(attributes)
    long = (pl.DataFrame({"_req": np.arange(n, dtype=np.int64), "_a": pl.Series(attributes)})
            .explode("_a").drop_nulls("_a").unnest("_a"))
    if long.height == 0:
        return None
    return long.select(
        "_req", "key", "str",
        value=pl.coalesce(pl.col("str"), pl.col("int").cast(pl.String), pl.col("float").cast(pl.String),
                          pl.col("bool").cast(pl.String)),
        # Numbers, typed or as text; integers exactly (a float64 holds them only up to 2**53).
        exact=pl.coalesce(pl.col("int"), pl.col("str").cast(pl.Int64, strict=False)),
        number=pl.coalesce(pl.col("int").cast(pl.Float64), pl.col("float"),
                           pl.col("str").cast(pl.Float64, strict=False)),
    ).drop_nulls("value").with_columns(
        number=pl.when(pl.col("number").is_finite()).then(pl.col("number")))


def _wide(long: pl.DataFrame, value: str, keys: list[str]) -> pl.DataFrame:
    """``_req`` and one column per key of ``value`` (each request's first value of the key)."""
    chosen = long.filter(pl.col("key").is_in(keys))
    wide = chosen.pivot(on="key", index="_req", values=value, aggregate_function="first") if chosen.height else (
        pl.DataFrame(schema={"_req": pl.Int64}))
    return wide.with_columns(pl.lit(None, long.schema[value]).alias(k) for k in keys if k not in wide.columns)


_EMPTY_LONG = pl.DataFrame(schema={"_req": pl.Int64, "key": pl.String, "str": pl.String, "value": pl.String,
                                   "exact": pl.Int64, "number": pl.Float64})
_EMPTY_SUMMARY = pl.DataFrame(schema={
    "key": pl.String, "values": pl.List(pl.String), "numbers": pl.List(pl.Float64), "integers": pl.List(pl.Int64),
    "numeric": pl.Boolean, "integer": pl.Boolean, "typed": pl.Boolean, "text": pl.Boolean, "ids_only": pl.Boolean,
    "digits_only": pl.Boolean})
