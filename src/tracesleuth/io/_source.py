"""Finding input files, opening them (gzip transparently) and telling their format from content."""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
import zlib
from pathlib import Path
from typing import BinaryIO

from ..errors import TraceFormatError

#: Bytes looked at (after decompression) to tell a file's format.
SNIFF_BYTES = 1 << 16
_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"

FORMATS = ("otlp-json", "otlp-proto", "jaeger-json", "zipkin-json", "csv", "parquet")


def expand_paths(paths: str | os.PathLike | list) -> list[Path]:
    """Expand files, directories (recursively, hidden entries skipped) and glob patterns into a
    sorted list of files.

    Raises
    ------
    TraceFormatError
        When a path names nothing that exists.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.is_file()
                              and not any(part.startswith((".", "_")) for part in f.relative_to(p).parts)))
        else:
            matches = sorted(Path(m) for m in glob.glob(str(p), recursive=True))
            files = [m for m in matches if m.is_file()]
            for d in (m for m in matches if m.is_dir()):
                files.extend(expand_paths(d))
            if not files:
                raise TraceFormatError(str(p), "no such file, directory or matching glob pattern")
            out.extend(files)
    return out


def open_binary(path: Path) -> BinaryIO:
    """Open ``path`` for reading, decompressing gzip (told by its magic bytes, not its name)."""
    raw = open(path, "rb")
    head = raw.read(2)
    raw.seek(0)
    if head == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _read(stream: BinaryIO, n: int) -> bytes:
    """``stream.read(n)``; corrupt gzip data (``zlib.error``) is raised as :class:`OSError`, like
    a truncated gzip stream, so that callers handle both."""
    try:
        return stream.read(n)
    except zlib.error as e:
        raise OSError(f"corrupt compressed data: {e}") from e


def peek(stream: BinaryIO, n: int = SNIFF_BYTES) -> tuple[bytes, BinaryIO]:
    """Return the first ``n`` bytes of ``stream`` and a stream that still yields them."""
    head = _read(stream, n)
    return head, chain(head, stream)


class _Chain(io.RawIOBase):
    """A raw stream that yields ``prefix`` and then the rest of ``rest``."""

    def __init__(self, prefix: bytes, rest: BinaryIO):
        self._prefix, self._rest = memoryview(prefix), rest

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        if self._prefix:
            n = min(len(b), len(self._prefix))
            b[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:] if n < len(self._prefix) else memoryview(b"")  # let the prefix go
            return n
        if not hasattr(self._rest, "readinto"):
            data = _read(self._rest, len(b))
            b[: len(data)] = data
            return len(data)
        try:
            return self._rest.readinto(b)
        except zlib.error as e:
            raise OSError(f"corrupt compressed data: {e}") from e


def chain(prefix: bytes, rest: BinaryIO) -> BinaryIO:
    """A buffered stream that yields ``prefix`` then the remainder of ``rest``."""
    return io.BufferedReader(_Chain(prefix, rest), 1 << 20)  # type: ignore[return-value]


def detect_format(head: bytes, source: str = "<stream>") -> str:
    """Tell the format of a file from its first bytes (decompressed).

    Returns one of :data:`FORMATS`.

    Raises
    ------
    TraceFormatError
        When the content matches no supported format.
    """
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        raise TraceFormatError(source, "empty file")
    first = text[:1]
    # A raw protobuf request starts with tag byte 0x0a, a newline: after stripping it, its length
    # byte may be '{' or '['. So JSON shapes are tried first and protobuf is the fallback.
    if first in (b"{", b"["):
        # Member names, not values: a value "traceID" is no Jaeger key (a name is followed by ':').
        def has(*names: bytes) -> bool:
            return any(re.search(rb'"' + n + rb'"\s*:', text) for n in names)

        if first == b"[":
            if has(b"traceId") or text.strip() in (b"[]", b"[ ]"):
                return "zipkin-json"
            if has(b"traceID"):
                return "jaeger-json"
        else:
            if has(b"resourceSpans", b"resource_spans"):
                return "otlp-json"
            if has(b"traceID", b"processes") or (has(b"data") and has(b"spans")):
                return "jaeger-json"
        if _looks_like_otlp_proto(head):
            return "otlp-proto"
        raise TraceFormatError(source, "JSON content matches none of OTLP JSON (resourceSpans), "
                                       "Jaeger JSON (data/traceID/processes) or Zipkin v2 (array of spans with traceId)")
    if _looks_like_otlp_proto(head):
        return "otlp-proto"
    try:
        line = text.split(b"\n", 1)[0].decode("utf-8")
    except UnicodeDecodeError:
        line = ""
    if line.count(",") >= 3 and all(ch.isprintable() for ch in line.strip()):
        return "csv"
    raise TraceFormatError(source, "unknown format: not OTLP JSON or protobuf, Jaeger JSON, Zipkin v2 "
                                   "JSON, CSV with a header line, or Parquet")


def _looks_like_otlp_proto(head: bytes) -> bool:
    """A raw ``ExportTraceServiceRequest`` starts with field 1 (``resource_spans``, wire type 2),
    tag byte 0x0a; the collector's file exporter prefixes each message with a 4-byte big-endian
    length."""
    if len(head) >= 5 and head[4:5] == b"\x0a" and int.from_bytes(head[:4], "big") > 0:
        return True
    if head[:1] == b"\x0a":
        try:
            head[:64].decode("ascii")
        except UnicodeDecodeError:
            return True
        # a length varint followed by a nested message tag (resource = field 1, scope_spans = 2)
        return len(head) > 2 and head[2:3] in (b"\x0a", b"\x12")
    return False


