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
    words = [w for w in _WORDS.split(key) if w]
    last = words[-1].lower() if words else key.lower()
    if last in IDENTIFIER_WORDS or last.endswith(IDENTIFIER_ENDINGS):
        return True
    if values is None:
        return False
    values = values.drop_nulls()
    if values.len() == 0:
        return False
    looks = values.str.contains(UUID_PATTERN) | values.str.contains(HEX_ID_PATTERN)
    return bool(looks.all()) and not bool(values.str.contains(r"^[0-9]+$").all())


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
        Shape (n_requests, n_categorical + n_numeric): ``attr[KEY]`` columns (String; numbers in
        their text form) sorted by name, then ``num[KEY]`` columns (Int64 or Float64) sorted by
        name; null where the entry span has no such attribute. When a key is repeated in one
        span, its first value is taken (all of them count as distinct values).
    dropped : tuple of (str, str)
        ``(key, reason)`` of every key with no column, sorted by key; reasons as in the module
        docstring.
    """
    if attributes is None or len(attributes) == 0:
        return pl.DataFrame(), ()
    n = len(attributes)
    long = (pl.DataFrame({"_req": np.arange(n, dtype=np.int64), "_a": pl.Series(attributes)})
            .explode("_a").drop_nulls("_a").unnest("_a"))
    if long.height == 0:
        return pl.DataFrame(), ()
    long = long.select(
        "_req", "key", "str",
        value=pl.coalesce(pl.col("str"), pl.col("int").cast(pl.String), pl.col("float").cast(pl.String),
                          pl.col("bool").cast(pl.String)),
        # Numbers, typed or as text; integers exactly (a float64 holds them only up to 2**53).
        exact=pl.coalesce(pl.col("int"), pl.col("str").cast(pl.Int64, strict=False)),
        number=pl.coalesce(pl.col("int").cast(pl.Float64), pl.col("float"),
                           pl.col("str").cast(pl.Float64, strict=False)),
    ).drop_nulls("value").with_columns(
        number=pl.when(pl.col("number").is_finite()).then(pl.col("number")))
    keys = long.group_by("key").agg(
        n=pl.col("value").n_unique(),
        n_numbers=pl.col("number").drop_nulls().n_unique(),
        n_integers=pl.col("exact").drop_nulls().n_unique(),
        numeric=pl.col("number").is_not_null().all(),
        integer=pl.col("exact").is_not_null().all(),
        typed=pl.col("str").is_null().any(),  # some value is not text: with numeric, a typed number
    ).sort("key")
    texts = long.select("key", "str").drop_nulls("str").unique(maintain_order=True).partition_by(
        "key", as_dict=True, include_key=False)
    categorical, numeric, dropped = [], {}, []
    for key, n_values, n_numbers, n_integers, is_num, is_int, typed in keys.iter_rows():
        text = texts.get((key,))
        if is_identifier(key, None if text is None else text["str"]):
            dropped.append((key, IDENTIFIER))
            continue
        keep_category = 2 <= n_values <= max_categories
        if is_num and (n_integers if is_int else n_numbers) >= 2 and (typed or not keep_category):
            numeric[key] = "exact" if is_int else "number"
        elif not keep_category:
            dropped.append((key, CONSTANT if n_values < 2 else TOO_MANY_VALUES))
        if keep_category:
            categorical.append(key)
    index = pl.DataFrame({"_req": np.arange(n, dtype=np.int64)})
    columns = [index]
    if categorical:
        wide = long.filter(pl.col("key").is_in(categorical)).pivot(on="key", index="_req", values="value",
                                                                   aggregate_function="first")
        columns.append(index.join(wide, on="_req", how="left", maintain_order="left").select(
            pl.col(k).alias(S.attribute_column(k)) for k in categorical))
    if numeric:
        nums = long.filter(pl.col("key").is_in(list(numeric)))
        wide = {v: index.join(nums.pivot(on="key", index="_req", values=v, aggregate_function="first"),
                              on="_req", how="left", maintain_order="left") for v in set(numeric.values())}
        columns.append(pl.DataFrame([wide[v][k].cast(pl.Int64 if v == "exact" else pl.Float64)
                                     .alias(S.numeric_attribute_column(k)) for k, v in sorted(numeric.items())]))
    return pl.concat(columns, how="horizontal").drop("_req"), tuple(dropped)
