"""What the OTLP JSON and OTLP protobuf readers share: span kind and status codes, typed attribute
values, ids, and how resource attributes become a span's service, instance and attributes.

Reference: OpenTelemetry protocol, ``opentelemetry/proto/trace/v1/trace.proto`` and
``common/v1/common.proto`` (https://github.com/open-telemetry/opentelemetry-proto), and the OTLP
JSON encoding rules of the OTLP specification
(https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): ids are hexadecimal strings,
64-bit integers may be JSON strings, enums may be integers or their names.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any, Iterable

from .. import schema as S
from ._builder import SpanBatchBuilder, normalize_kind

#: OTLP ``Status.code`` (integer or enum name) to :data:`~tracesleuth.schema.STATUS_CODES`.
STATUS_BY_CODE: dict[Any, str] = {
    0: "unset", 1: "ok", 2: "error",
    "STATUS_CODE_UNSET": "unset", "STATUS_CODE_OK": "ok", "STATUS_CODE_ERROR": "error",
    "0": "unset", "1": "ok", "2": "error", None: "unset",
}
#: OTLP ``Span.kind`` integers and enum names, resolved once (``normalize_kind`` for the rest).
KIND_BY_CODE: dict[Any, str] = {
    **{i: normalize_kind(i) for i in range(6)},
    **{name: normalize_kind(name) for name in (
        "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT",
        "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER")},
    None: "unspecified",
}
_HEX = frozenset("0123456789abcdefABCDEF")
_DOUBLE_NAMES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class OtlpValueError(ValueError):
    """A field of an OTLP record has a value of the wrong type; ``field`` names it."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def kind_of(value: Any) -> str:
    """Span kind from an OTLP ``kind`` (``2``, ``"SPAN_KIND_SERVER"``, missing)."""
    if value.__class__ is bool:  # JSON true is not a kind
        return "unspecified"
    k = KIND_BY_CODE.get(value)
    return k if k is not None else normalize_kind(value)


def status_of(value: Any, builder: SpanBatchBuilder, record: int) -> str:
    """Status from an OTLP ``Status.code``; a code OTLP does not define is logged as a warning
    and read as ``"unset"``."""
    status = STATUS_BY_CODE.get(value) if value.__class__ is not bool else None
    if status is None:
        builder.log.add(builder.source, record, f"unknown status code {value!r:.40}; read as unset",
                        field="status.code", spans=0)
        return "unset"
    return status


def hex_id(value: Any, n_bytes: int, field: str) -> str:
    """An OTLP JSON id as hexadecimal text.

    The OTLP JSON encoding writes ids as hexadecimal strings; the plain protobuf JSON mapping
    (and some exporters) write base64 instead, which is accepted when it decodes to exactly
    ``n_bytes`` bytes. Anything else is returned unchanged for the builder to reject.

    Raises
    ------
    OtlpValueError
        When ``value`` is not a string.
    """
    if value.__class__ is not str:
        raise OtlpValueError(field, f"id must be a string, got {type(value).__name__}")
    if len(value) == 2 * n_bytes or _HEX.issuperset(value):
        return value
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        try:
            raw = base64.urlsafe_b64decode(value)
        except (binascii.Error, ValueError):
            return value
    return raw.hex() if len(raw) == n_bytes else value


def json_any_value(value: Any, field: str = "value") -> Any:
    """Convert an OTLP JSON ``AnyValue`` object to a plain Python value.

    ``stringValue`` gives ``str``, ``intValue`` (JSON string or number) ``int``, ``doubleValue``
    (number, or ``"NaN"``/``"Infinity"``/``"-Infinity"``) ``float``, ``boolValue`` ``bool``;
    ``arrayValue`` a list and ``kvlistValue`` a dict of converted values (the builder stores both
    as JSON text); ``bytesValue`` its base64 text, as OTLP JSON carries it. An empty ``AnyValue``
    gives ``None`` (the attribute is dropped); a member whose value is JSON null counts as absent,
    as in protobuf's JSON mapping.

    Raises
    ------
    OtlpValueError
        When a value does not have the type its field declares.
    """
    if value.__class__ is not dict:
        raise OtlpValueError(field, f"AnyValue must be an object, got {type(value).__name__}")
    for name, x in value.items():
        if x is None:
            continue
        if name in ("stringValue", "string_value"):
            if x.__class__ is not str:
                raise OtlpValueError(f"{field}.{name}", f"must be a string, got {type(x).__name__}")
            return x
        if name in ("intValue", "int_value"):
            return _json_number(x, (int,), int, f"{field}.{name}", "an integer or a decimal string")
        if name in ("doubleValue", "double_value"):
            return _json_number(x, (float, int), _double, f"{field}.{name}", "a number")
        if name in ("boolValue", "bool_value"):
            if x.__class__ is not bool:
                raise OtlpValueError(f"{field}.{name}", f"must be true or false, got {x!r:.40}")
            return x
        if name in ("arrayValue", "array_value"):
            values = _values_of(x, f"{field}.{name}")
            return [json_any_value(v, f"{field}.{name}.values[{i}]") for i, v in enumerate(values)]
        if name in ("kvlistValue", "kvlist_value"):
            values = _values_of(x, f"{field}.{name}")
            out = {}
            for i, kv in enumerate(values):
                key, v = json_key_value(kv, f"{field}.{name}.values[{i}]")
                out[key] = v
            return out
        if name in ("bytesValue", "bytes_value"):
            if x.__class__ is not str:
                raise OtlpValueError(f"{field}.{name}", f"must be base64 text, got {type(x).__name__}")
            return x
    return None


def _json_number(x: Any, types: tuple, parse, field: str, what: str) -> Any:
    """``parse(x)`` when JSON gave a number of ``types`` or a text (protobuf's JSON mapping writes
    64-bit integers, NaN and the infinities as strings); else, or when the text is no number,
    :class:`OtlpValueError` saying it ``must be`` ``what``."""
    if x.__class__ in types or x.__class__ is str:
        try:
            return parse(x)
        except ValueError:
            pass
    raise OtlpValueError(field, f"must be {what}, got {x!r:.40}")


def _double(x: Any) -> float:
    """A double from a JSON number or text, the names ``NaN``/``Infinity``/``-Infinity`` included."""
    return _DOUBLE_NAMES[x] if x.__class__ is str and x in _DOUBLE_NAMES else float(x)


def json_key_value(kv: Any, field: str) -> tuple[str, Any]:
    """Convert an OTLP JSON ``KeyValue`` object to ``(key, python value)``.

    Raises
    ------
    OtlpValueError
        When the entry is not an object with a string ``key``, or its value is malformed.
    """
    if kv.__class__ is not dict:
        raise OtlpValueError(field, f"attribute must be an object, got {type(kv).__name__}")
    key = kv.get("key")
    if key.__class__ is not str:
        raise OtlpValueError(f"{field}.key", f"must be a string, got {type(key).__name__}")
    value = kv.get("value")
    return key, (None if value is None else json_any_value(value, f"{field}.value"))


def _values_of(x: Any, field: str) -> list:
    if x.__class__ is not dict:
        raise OtlpValueError(field, f"must be an object, got {type(x).__name__}")
    values = x.get("values", [])
    if values.__class__ is not list:
        raise OtlpValueError(f"{field}.values", f"must be a list, got {type(values).__name__}")
    return values


def proto_any_value(value: Any) -> Any:
    """Convert an OTLP protobuf ``AnyValue`` message to a plain Python value (the rules of
    :func:`json_any_value`; ``bytes_value`` becomes its base64 text, as OTLP JSON writes it)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [proto_any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: proto_any_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, which)


class ResourceContext:
    """A resource's service, instance and converted attributes, computed once per resource and
    copied onto each of its spans.

    Parameters
    ----------
    items : iterable of (str, object)
        The resource attributes as ``(key, python value)``.
    builder : SpanBatchBuilder
        The reader's builder (for its source and reject log: over-long values are reported once
        per resource, with ``record``).
    record : int
        Record the resource was read from.

    Attributes
    ----------
    service : str or None
        ``service.name``.
    instance : str or None
        The first of :data:`~tracesleuth.schema.INSTANCE_ATTRIBUTES` present.
    keys : frozenset of str
        The attribute keys (to let span attributes win on a key clash).
    columns : tuple of 5 lists
        Keys and the str/int/float/bool value columns, as :meth:`SpanBatchBuilder.add_attribute`
        would append them.
    """

    __slots__ = ("service", "instance", "keys", "columns")

    def __init__(self, items: Iterable[tuple[str, Any]], builder: SpanBatchBuilder, record: int):
        scratch = SpanBatchBuilder(builder.source, builder.log, limits=builder.limits)
        values: dict[str, Any] = {}
        for key, value in items:
            if key in values:  # a repeated key (the spec forbids it): the first wins, as in the collector
                continue
            values[key] = value
        for key, value in values.items():
            scratch.add_attribute(key, value, record)
        service = values.get(S.ATTR_SERVICE_NAME)
        self.service = service if isinstance(service, str) else None
        self.instance = next((str(values[k]) for k in S.INSTANCE_ATTRIBUTES
                              if values.get(k) not in (None, "")), None)
        self.columns = (scratch.attr_key, scratch.attr_str, scratch.attr_int, scratch.attr_float,
                        scratch.attr_bool)
        self.keys = frozenset(scratch.attr_key)

    def extend(self, builder: SpanBatchBuilder, span_keys: list[str]) -> None:
        """Append the resource attributes to the span being added, except those whose key the
        span itself sets (``span_keys``)."""
        keys, strs, ints, floats, bools = self.columns
        if not keys:
            return
        if self.keys.isdisjoint(span_keys):
            builder.attr_key.extend(keys)
            builder.attr_str.extend(strs)
            builder.attr_int.extend(ints)
            builder.attr_float.extend(floats)
            builder.attr_bool.extend(bools)
            return
        taken = set(span_keys)
        for j, key in enumerate(keys):
            if key not in taken:
                builder.attr_key.append(key)
                builder.attr_str.append(strs[j])
                builder.attr_int.append(ints[j])
                builder.attr_float.append(floats[j])
                builder.attr_bool.append(bools[j])
