"""Reading one JSON document's records: in memory when it is small, streamed when it is large,
salvaged up to the break when it is truncated or malformed. Shared by the JSON readers.

A document of up to :data:`MAX_DOCUMENT_BYTES` is parsed whole with ``orjson``; a larger one is
streamed with ``ijson`` one record (array element) at a time, so memory stays proportional to
the largest record, not to the file. When a document does not parse, the records that are
complete before the break are still read (``ijson`` over the same bytes) and the break is logged
as one rejected record naming its byte offset and the spans lost with it (counted as occurrences
of the format's span-id key in the bytes that were not read as records).

Invalid UTF-8 is replaced by U+FFFD rather than lost; every record that contains a replacement
is reported as a warning (``spans=0``) naming the field.

Limits: the streaming parser (``ijson``'s yajl backend) stops at an integer beyond the int64
range, which is then reported as the break; memory while streaming follows the largest record
(an OTLP ``resourceSpans`` element, a Jaeger trace, a Zipkin span).
"""

from __future__ import annotations

import codecs
import gc
import io
import json
import re
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, BinaryIO, Callable, Iterator

import ijson
import orjson

from ._builder import SpanBatchBuilder

#: Largest document (bytes, after decompression) parsed whole; larger ones are streamed.
MAX_DOCUMENT_BYTES = 64 << 20
_CHUNK_BYTES = 1 << 20
_REPLACEMENT = "\ufffd"
_REPLACEMENT_UTF8 = _REPLACEMENT.encode()


class DocumentShapeError(ValueError):
    """The document parsed but is not shaped as the format requires (``field`` names where)."""

    def __init__(self, field: str | None, message: str):
        self.field = field
        super().__init__(message)


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while JSON is parsed and turned into columns.

    Parsing creates several container objects per span and none of them form cycles; without
    the pause the collector walks them again and again (about 40 % of an OTLP read). Never held
    across a ``yield``, so the caller's code runs with the collector as it was.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def json_bytes(obj: Any) -> bytes:
    """``obj`` as compact JSON; unlike plain ``orjson.dumps`` also when it holds integers beyond
    64 bits or other values orjson refuses (written as the standard library writes them)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, default=str, ensure_ascii=False, separators=(",", ":")).encode()


@lru_cache(maxsize=None)
def _member_pattern(keys: tuple[bytes, ...]) -> re.Pattern:
    return re.compile(b"(?:" + b"|".join(re.escape(k) for k in keys) + rb")\s*:")


def count_keys(data: bytes, keys: tuple[bytes, ...]) -> int:
    """Occurrences of any of ``keys`` (quoted JSON member names, ``b'"spanId"'``) used as member
    names in ``data``: followed by a colon, so that a string value that reads the same is not
    counted (quotes inside strings are escaped)."""
    return sum(1 for _ in _member_pattern(keys).finditer(data))


def utf8_error_offset(data: bytes) -> int | None:
    """Byte offset of the first invalid UTF-8 sequence in ``data``, ``None`` when it is valid."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start
    return None


def byte_offset(data: bytes, char_pos: int) -> int:
    """Byte offset in UTF-8 ``data`` of the character at ``char_pos`` (orjson reports characters)."""
    if data.isascii():
        return char_pos
    return len(data.decode("utf-8", "replace")[:char_pos].encode())


def replacement_field(obj: Any, path: str = "") -> str | None:
    """JSON path of the first member name or string in ``obj`` that contains U+FFFD."""
    if isinstance(obj, str):
        return path or "." if _REPLACEMENT in obj else None
    if isinstance(obj, dict):
        for k, v in obj.items():
            sub = f"{path}.{k}" if path else str(k)
            if _REPLACEMENT in str(k):
                return sub
            found = replacement_field(v, sub)
            if found:
                return found
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found = replacement_field(v, f"{path}[{i}]")
            if found:
                return found
    return None


def loads_repairing(data: bytes) -> tuple[Any, int | None]:
    """``orjson.loads(data)``, replacing invalid UTF-8 by U+FFFD first when needed.

    Returns
    -------
    obj : object
    bad_utf8 : int or None
        Byte offset of the first invalid UTF-8 sequence (``None`` when the input was valid).

    Raises
    ------
    orjson.JSONDecodeError
        When the (repaired) bytes are not one JSON document.
    """
    try:
        return orjson.loads(data), None
    except orjson.JSONDecodeError:
        bad = utf8_error_offset(data)
        if bad is None:
            raise
    return orjson.loads(data.decode("utf-8", "replace")), bad


def warn_replacements(builder: SpanBatchBuilder, record: int, item: Any, bad_offset: int | None) -> None:
    """Log a warning for ``item`` when it holds text repaired from invalid UTF-8."""
    if _REPLACEMENT_UTF8 not in json_bytes(item):
        return
    where = f" (first at byte {bad_offset})" if bad_offset is not None else ""
    builder.log.add(builder.source, record, f"invalid UTF-8{where} replaced by U+FFFD",
                    field=replacement_field(item), spans=0)


def iter_json_items(
    stream: BinaryIO,
    builder: SpanBatchBuilder,
    *,
    items_of: Callable[[Any], list],
    prefix_of: Callable[[bytes], str],
    span_keys: tuple[bytes, ...],
    spans_in: Callable[[Any], int],
) -> Iterator[tuple[int, Any]]:
    """Yield ``(record, item)`` for each record of one JSON document, 1-based.

    Parameters
    ----------
    stream : binary file
        The document.
    builder : SpanBatchBuilder
        Names the source; breaks and document-level problems go to its log.
    items_of : callable
        Parsed document -> its list of records; raises :class:`DocumentShapeError` when the
        document is not of the expected shape.
    prefix_of : callable
        The document's first bytes -> the ``ijson`` prefix of its records (``"item"``,
        ``"data.item"``, ...), used to stream large documents and to salvage broken ones.
    span_keys : tuple of bytes
        Quoted member names that occur once per span (``b'"spanId"'``): counts spans lost.
    spans_in : callable
        A record -> the number of spans it holds (as ``span_keys`` would count them).
    """
    head, error = read_up_to(stream, MAX_DOCUMENT_BYTES + 1)
    if len(head) <= MAX_DOCUMENT_BYTES or error is not None:
        yield from _in_memory(head, builder, items_of, prefix_of, span_keys, spans_in)
        if error is not None:  # the records before it were read; the caller reports the rest
            raise error
    else:
        yield from _streamed(head, stream, builder, prefix_of(head), span_keys, spans_in)


def read_up_to(stream: BinaryIO, n: int) -> tuple[bytes, OSError | None]:
    """Up to ``n`` bytes of ``stream``, read in chunks, and the error that stopped the read
    early (a corrupt or truncated gzip member), if any: the bytes before it are kept."""
    chunks, size = [], 0
    while size < n:
        try:
            chunk = stream.read(min(_CHUNK_BYTES, n - size))
        except (OSError, EOFError) as e:
            return b"".join(chunks), e if isinstance(e, OSError) else OSError(str(e))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), None


def _in_memory(data, builder, items_of, prefix_of, span_keys, spans_in):
    try:
        with gc_paused():
            doc, bad = loads_repairing(data)
    except orjson.JSONDecodeError as e:
        yield from _salvage(data, e, builder, prefix_of(data), span_keys, spans_in)
        return
    try:
        items = items_of(doc)
    except DocumentShapeError as e:
        builder.log.add(builder.source, 0, str(e), field=e.field, spans=count_keys(data, span_keys),
                        excerpt=data[:200])
        return
    for record, item in enumerate(items, 1):
        if bad is not None:
            warn_replacements(builder, record, item, bad)
        yield record, item


def _salvage(data, error, builder, prefix, span_keys, spans_in):
    bad = utf8_error_offset(data)
    text = data if bad is None else data.decode("utf-8", "replace").encode()
    offset = byte_offset(text, error.pos)
    record, read = 0, 0
    try:
        for item in ijson.items(io.BytesIO(text), prefix, use_float=True):
            record += 1
            read += spans_in(item)
            if bad is not None:
                warn_replacements(builder, record, item, bad)
            yield record, item
    except ijson.JSONError:
        pass
    lost = max(count_keys(data, span_keys) - read, 0)
    reason = error.msg if hasattr(error, "msg") else str(error)
    builder.log.add(builder.source, record + 1, f"malformed JSON at byte {offset}: {reason}; "
                    f"{record} complete record(s) before it were read", spans=lost,
                    excerpt=data[max(offset - 60, 0):offset + 60])


class _CountingReader(io.RawIOBase):
    """Yields ``head`` then ``rest``, repairing invalid UTF-8, counting bytes and span-id keys."""

    def __init__(self, head: bytes, rest: BinaryIO, keys: tuple[bytes, ...]):
        self._pending, self._rest, self._keys = head, rest, keys
        self._tail = b""
        self._overlap = max(len(k) for k in keys) + 15  # a name, blanks and its colon
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._buf = memoryview(b"")
        self._eof = False
        #: Bytes read from the input so far.
        self.consumed = 0
        #: Occurrences of the span-id keys in the bytes read so far.
        self.keys_seen = 0
        #: Offset of the first invalid UTF-8 sequence (``None`` while there was none).
        self.bad_offset: int | None = None

    def readable(self) -> bool:
        return True

    def _next(self) -> bytes:
        if self._pending:
            raw, self._pending = self._pending, b""
        else:
            raw = self._rest.read(_CHUNK_BYTES)
        if not raw:
            self._eof = True
            return self._decoder.decode(b"", final=True).encode()
        window = self._tail + raw
        self.keys_seen += count_keys(window, self._keys) - count_keys(self._tail, self._keys)
        self._tail = window[-self._overlap:]
        start, self.consumed = self.consumed, self.consumed + len(raw)
        if raw.isascii() and not self._decoder.getstate()[0]:
            return raw
        text = self._decoder.decode(raw)
        if self.bad_offset is None and _REPLACEMENT in text:
            self.bad_offset = start + (utf8_error_offset(raw) or 0)
        return text.encode()

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self._buf:
            if self._eof:
                return 0
            self._buf = memoryview(self._next())
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def drain(self) -> None:
        """Read (and count) the rest of the input."""
        while not self._eof:
            self._next()


def _streamed(head, rest, builder, prefix, span_keys, spans_in):
    reader = _CountingReader(head, rest, span_keys)
    record, read = 0, 0
    try:
        for item in ijson.items(io.BufferedReader(reader, _CHUNK_BYTES), prefix, use_float=True):
            record += 1
            read += spans_in(item)
            if reader.bad_offset is not None:
                warn_replacements(builder, record, item, reader.bad_offset)
            yield record, item
    except ijson.JSONError as e:
        at = reader.consumed
        reader.drain()
        reason = str(e).split("\n", 1)[0]
        builder.log.add(builder.source, record + 1, f"malformed JSON at or before byte {at}: {reason}; "
                        f"{record} complete record(s) before it were read",
                        spans=max(reader.keys_seen - read, 0))
        return
    if reader.keys_seen > read:
        builder.log.add(builder.source, record + 1, f"{reader.keys_seen - read} span(s) found outside the "
                        f"records expected at {prefix!r}", field=prefix, spans=reader.keys_seen - read)
