"""Protobuf wire format, read by hand: varints and the fields of a serialized message.

What the OTLP protobuf readers (:mod:`.otlp_proto`, :mod:`.otlp_logs`) frame and salvage with,
and what :func:`tracesleuth.io._source.detect_format` looks at a protobuf file's first record
with. Standard library only, so that each imports it without importing the other. Reference:
https://protobuf.dev/programming-guides/encoding/.
"""

from __future__ import annotations

from typing import BinaryIO, Iterator

#: Wire type of length-delimited fields.
_LEN = 2


class _WireError(ValueError):
    """The protobuf framing is broken (truncated, or an impossible tag)."""


def _read_varint(stream: BinaryIO) -> tuple[int | None, int]:
    """A varint from ``stream``: ``(value, bytes read)``; ``(None, 0)`` at a clean end of file."""
    value = shift = n = 0
    while True:
        byte = stream.read(1)
        if not byte:
            if n == 0:
                return None, 0
            raise _WireError("truncated varint")
        n += 1
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value, n
        shift += 7
        if shift > 63:
            raise _WireError("varint longer than 10 bytes")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise _WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise _WireError("varint longer than 10 bytes")


def _fields(buf: bytes, *, partial: bool = False) -> Iterator[tuple[int, int, bytes | None]]:
    """``(field number, wire type, payload)`` of each field of a serialized message (payload
    only for length-delimited fields). With ``partial``, a cut-off last field is yielded as far
    as it goes instead of raising."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _WireError("field number 0")
        if wire == 0:
            _, pos = _varint(buf, pos)
            yield number, wire, None
            continue
        if wire == _LEN:
            length, pos = _varint(buf, pos)
            end = pos + length
            if end > n and not partial:
                raise _WireError("length-delimited field runs past the end")
            yield number, wire, buf[pos:end]
            pos = end
            continue
        size = {1: 8, 5: 4}.get(wire)
        if size is None:
            raise _WireError(f"unsupported wire type {wire}")
        pos += size
        yield number, wire, None
    if pos > n and not partial:
        raise _WireError("fixed-size field runs past the end")
