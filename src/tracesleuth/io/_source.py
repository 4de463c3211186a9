"""Finding input files, opening them (gzip transparently, salvaging damaged gzip) and telling their
format from content."""

from __future__ import annotations

import glob
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
#: Compressed bytes inflated at a time by :class:`GzipSalvage` (at most :data:`_MAX_OUT`
#: decompressed bytes per step, so a gzip bomb costs no more memory than other input).
GZIP_PIECE_BYTES = 1 << 16
_MAX_OUT = 1 << 20
_PARQUET_MAGIC = b"PAR1"

FORMATS = ("otlp-json", "otlp-proto", "jaeger-json", "zipkin-json", "csv", "parquet", "mi-log")
#: Log-record formats (:func:`tracesleuth.io.read_logs`), told apart from the span formats by
#: :func:`detect_format`.
LOG_FORMATS = ("otlp-logs-json", "otlp-logs-proto", "json-lines-logs", "nezha-log-csv")


def is_log_format(fmt: str) -> bool:
    """Whether ``fmt`` (from :func:`detect_format`) is a log-record format, not a span format."""
    return fmt in LOG_FORMATS


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
    """Open ``path`` for reading, decompressing gzip (told by its magic bytes, not its name).

    A gzip file is read through :class:`GzipSalvage`: when it is truncated or corrupt, the
    stream ends cleanly after the last byte that could be decompressed, and
    :func:`stream_damage` says where the damage is.
    """
    raw = open(path, "rb")
    head = raw.read(2)
    raw.seek(0)
    if head == _GZIP_MAGIC:
        return io.BufferedReader(GzipSalvage(raw), 1 << 20)  # type: ignore[return-value]
    return raw


def stream_damage(stream: BinaryIO) -> str | None:
    """What stopped a stream from :func:`open_binary` before its end (``None``: nothing, or not
    a compressed stream)."""
    raw = getattr(stream, "raw", None)
    return raw.damage if isinstance(raw, GzipSalvage) else None


def is_compressed(stream: BinaryIO) -> bool:
    """Whether ``stream`` (from :func:`open_binary`) decompresses its file."""
    return isinstance(getattr(stream, "raw", None), GzipSalvage)


class GzipSalvage(io.RawIOBase):
    """A gzip file's decompressed bytes (one member or several, as ``gzip`` writes on append)
    that end cleanly at damage instead of losing what came before it.

    :class:`gzip.GzipFile` raises on a truncated or corrupt stream, and the bytes it had
    decompressed in that read are lost with the exception (a reader asking for 16 MiB at once
    lost a whole CSV file cut at 90 %). Here input is inflated in pieces of
    :data:`GZIP_PIECE_BYTES`; when zlib reports corrupt data, the piece is inflated again byte
    by byte from a copy of the decompressor taken before it, so that every byte that can be
    decompressed is delivered, and the damage is located to the byte.

    Parameters
    ----------
    raw : binary file
        The compressed file, at its start.

    Attributes
    ----------
    damage : str or None
        Set when the stream ended early: what and at which byte of the compressed file
        (``"truncated gzip stream at byte 1234 ..."``).
    decompressed : int
        Decompressed bytes delivered so far.

    Notes
    -----
    Deflate data damaged in its middle often still inflates (to wrong bytes); only the
    member's CRC-32 at its end tells. Such a member is delivered and then reported as corrupt
    (``incorrect data check``): the file is listed as damaged, but its records are not known
    to be wrong one by one.
    """

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._started = False  # the current member has received input
        self._pending = b""  # compressed input not yet given to the decompressor
        self._out = memoryview(b"")
        self._done = False
        self._consumed = 0  # compressed bytes consumed by finished inflate calls
        self.damage: str | None = None
        self.decompressed = 0

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._raw.close()
        super().close()

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self._out:
            if self._done:
                return 0
            self._out = memoryview(self._more())
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        self._out = self._out[n:]
        self.decompressed += n
        return n

    def _more(self) -> bytes:
        if not self._pending:
            self._pending = self._raw.read(GZIP_PIECE_BYTES)
            if not self._pending:
                self._done = True
                if self._started and not self._d.eof:
                    rest = self._d.flush()
                    self.damage = (f"truncated gzip stream at byte {self._consumed} (the end of the file, after "
                                   f"{self.decompressed + len(rest):,} decompressed bytes): records after it lost")
                    return rest
                return b""
        d, data = self._d, self._pending
        if not self._started:
            if not data.strip(b"\0"):  # zero padding after the last member, as gzip tolerates
                self._consumed += len(data)
                self._pending = b""
                return b""
            self._started = True
        before = d.copy()
        try:
            out = d.decompress(data, _MAX_OUT)
        except zlib.error as e:
            out, at = self._up_to_damage(before, data)
            self.damage = (f"corrupt gzip data at byte {self._consumed + at}: {e}; records after it lost")
            self._done = True
            return out
        self._pending = d.unconsumed_tail
        self._consumed += len(data) - len(d.unconsumed_tail) - len(d.unused_data)
        if d.eof:  # a member ended: another may follow
            self._pending = d.unused_data
            self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self._started = False
        return out

    def _up_to_damage(self, d, data: bytes) -> tuple[bytes, int]:
        """What ``d`` decompresses from ``data`` before the byte it rejects, and that byte's
        offset in ``data``."""
        outs = []
        for i in range(len(data)):
            try:
                outs.append(d.decompress(data[i:i + 1]))
            except zlib.error:
                return b"".join(outs), i
            if d.eof:  # the damage is in what follows this member (a bad header)
                return b"".join(outs), i + 1
        return b"".join(outs), len(data)


def _read(stream: BinaryIO, n: int) -> bytes:
    """``stream.read(n)``; corrupt gzip data (``zlib.error``) is raised as :class:`OSError`, like
    a truncated gzip stream, so that callers handle both."""
    try:
        return stream.read(n)
    except zlib.error as e:
        raise OSError(f"corrupt compressed data: {e}") from e


def head_bytes(path, n: int = SNIFF_BYTES) -> bytes:
    """The first ``n`` bytes of a file as its readers see them (gzip, told by its magic bytes,
    decompressed), inflating no more than that: for telling a file's format without opening it
    for reading (:func:`open_binary` inflates up to 1 MiB at a time, the whole of a small file).
    Corrupt or truncated compressed data ends the head early (the readers report the damage)."""
    with open(path, "rb") as raw:
        data = raw.read(GZIP_PIECE_BYTES)
        if data[:2] != _GZIP_MAGIC:
            return data[:n] + (raw.read(n - len(data)) if len(data) < n else b"")
        d, out = zlib.decompressobj(16 + zlib.MAX_WBITS), bytearray()
        while data and len(out) < n and not d.eof:
            try:
                out += d.decompress(data, n - len(out))
            except zlib.error:
                break
            data = d.unconsumed_tail or raw.read(GZIP_PIECE_BYTES)
        return bytes(out)


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
    """Tell the format of a file from its first bytes (decompressed): a span format or a log one.

    Returns one of :data:`FORMATS` or :data:`LOG_FORMATS` (:func:`is_log_format` tells which).
    Spans and logs share containers, so the signals are told apart by content: OTLP JSON by its
    top-level member (``resourceSpans`` or ``resourceLogs``); OTLP protobuf by its first record
    (:func:`_otlp_proto_signal`: a span opens with its 16-byte trace id, field 1, a log record
    with a fixed64 time or another field); CSV by its header (the Nezha log header
    ``Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log`` is logs, any other
    header spans); a JSON object per line that is none of the span documents but has a message
    or time member is a JSON-lines log (:func:`_looks_like_json_log`).

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
    from .mi_log import looks_like_mi_log

    if looks_like_mi_log(text):  # before JSON: its lines open with '[' too
        return "mi-log"
    # A raw protobuf request starts with tag byte 0x0a, a newline: after stripping it, its length
    # byte may be '{' or '['. So JSON shapes are tried first and protobuf is the fallback.
    if first in (b"{", b"["):
        # Member names, not values: a value "traceID" is no Jaeger key (a name is followed by ':').
        def has(*names: bytes) -> bool:
            return any(re.search(rb'"' + n + rb'"\s*:', text) for n in names)

        if first == b"[":
            if has(b"traceId") or b"".join(text.split()) == b"[]":  # an empty array: read as no spans
                return "zipkin-json"
            if has(b"traceID"):
                return "jaeger-json"
        else:
            if has(b"resourceSpans", b"resource_spans"):
                return "otlp-json"
            if has(b"resourceLogs", b"resource_logs"):
                return "otlp-logs-json"
            if _looks_like_json_log(text):
                return "json-lines-logs"
            if has(b"traceID", b"processes") or (has(b"data") and has(b"spans")) \
                    or re.fullmatch(rb'\{\s*"data"\s*:\s*(?:\[\s*\]|null)\s*\}\s*', text):  # no traces
                return "jaeger-json"
        if _looks_like_otlp_proto(head):
            return _otlp_proto_signal(head)
        raise TraceFormatError(source, "JSON content matches none of OTLP JSON (resourceSpans, resourceLogs), "
                                       "Jaeger JSON (data/traceID/processes), Zipkin v2 (array of spans with traceId) "
                                       "or JSON-lines logs (an object per line with a message or time)")
    if _looks_like_otlp_proto(head):
        return _otlp_proto_signal(head)
    try:
        line = text.split(b"\n", 1)[0].decode("utf-8")
    except UnicodeDecodeError:
        line = ""
    if line.count(",") >= 3 and all(ch.isprintable() for ch in line.strip()):
        from .nezha_log import REQUIRED

        names = {n.strip().strip('"') for n in line.strip().split(",")}
        return "nezha-log-csv" if names.issuperset(REQUIRED) else "csv"
    raise TraceFormatError(source, "unknown format: not OTLP JSON or protobuf (spans or logs), Jaeger JSON, "
                                   "Zipkin v2 JSON, CSV with a header line, Parquet, a Mi et al. trace log, or "
                                   "JSON-lines logs")


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




def _otlp_proto_signal(head: bytes) -> str:
    """``"otlp-proto"`` or ``"otlp-logs-proto"``: which request the protobuf ``head`` holds.

    ``ExportTraceServiceRequest`` and ``ExportLogsServiceRequest`` share their framing
    (``resource_*`` = field 1, ``scope_*`` = field 2, ``spans``/``log_records`` = field 2), so the
    first record decides. A span always opens with its trace id or span id (fields 1 and 2, both
    length-delimited: tags ``0x0a``, ``0x12``); a log record has no length-delimited field 1 or
    2 (its field 1 is the ``fixed64`` time, tag ``0x09``; field 2 the severity number, a varint)
    and opens with one of those or a later field (protobuf writes fields in number order). A head
    with no record (an empty request) is read as spans, as before logs were read.
    """
    from ._protowire import _WireError, _fields

    # the file exporter's stream: the first request, after its 4-byte length
    body = head if head[:1] == b"\x0a" else head[4:4 + int.from_bytes(head[:4], "big")]
    try:
        for number, wire, resource in _fields(body, partial=True):
            if number != 1 or wire != 2 or resource is None:
                continue
            for n2, w2, scope in _fields(resource, partial=True):
                if n2 != 2 or w2 != 2 or scope is None:
                    continue
                for n3, w3, record in _fields(scope, partial=True):
                    if n3 == 2 and w3 == 2 and record:
                        return "otlp-proto" if record[:1] in (b"\x0a", b"\x12") else "otlp-logs-proto"
    except _WireError:
        pass
    return "otlp-proto"


#: Member names that make a JSON object a log line (:func:`_looks_like_json_log`): a message or
#: a time, as the JSON-lines log reader maps them (:mod:`tracesleuth.io.json_lines_logs`).
_LOG_LINE_MEMBERS = re.compile(rb'"(?:message|msg|body|event|log|@m|@mt|@message|timestamp|time|@timestamp|ts|'
                               rb'asctime|@t)"\s*:')


def _looks_like_json_log(text: bytes) -> bool:
    """Whether the first line of ``text`` is a JSON object with a message or time member (and none
    of the span documents' members): parsed when it is whole; when it runs past the bytes looked
    at (a line of a megabyte), told by its member names alone."""
    import orjson

    line, newline, _ = text.partition(b"\n")
    if not _LOG_LINE_MEMBERS.search(line):
        return False
    if not newline and len(text) >= SNIFF_BYTES - 3:  # cut by the sniff: the names decide
        return not re.search(rb'"(?:resourceSpans|resource_spans|data|processes|resourceLogs|resource_logs)"\s*:', line)
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and not ({"resourceSpans", "resource_spans", "data", "processes",
                                           "resourceLogs", "resource_logs"} & obj.keys())
