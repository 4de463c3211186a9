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

Nesting is bounded (:data:`MAX_DEPTH`): before a document is parsed its bracket depth is
measured (:class:`DepthScanner`, vectorized); a record nested deeper is replaced, byte for byte,
by a placeholder string, so that neither parser ever sees it, and is yielded as a
:class:`TooDeep` for the reader to reject (with the depth and byte offset). A streamed document
stops at the first bracket beyond the limit (reported as its break). Without the bound, the
salvage parser's memory grows with the square of the depth (a 64 KB document nested 32,000
deep took 2.6 GB) and recursive code hits Python's recursion limit at about 1,000 levels.

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
import numpy as np
import orjson

from ._builder import SpanBatchBuilder

#: Largest document (bytes, after decompression) parsed whole; larger ones are streamed.
MAX_DOCUMENT_BYTES = 64 << 20
_CHUNK_BYTES = 1 << 20
_REPLACEMENT = "\ufffd"
_REPLACEMENT_UTF8 = _REPLACEMENT.encode()
#: Deepest nesting of JSON arrays and objects accepted, counted from the document's top level
#: (1 inside the outermost brackets). What the formats need: a Zipkin span is at depth 2 and its
#: tags at 3; a Jaeger span at 5 (``{"data": [{"spans": [{``), its tags' values at 7; an OTLP
#: JSON span at 7 and its attribute values at 10, each nested ``arrayValue``/``kvlistValue``
#: adding 3 (so 18 levels of nested attribute values fit). Deeper records are rejected unparsed.
MAX_DEPTH = 64
#: Phrase ending the reason of every reject that means "the file could not be read to its end"
#: (:func:`tracesleuth.io.iter_span_batches` lists such files as damaged).
REST_NOT_READ = "the rest of the file was not read"
#: Words opening the reason of every reject for nesting beyond :data:`MAX_DEPTH` (or beyond
#: protobuf's own decoding limit): the collector refuses such a request as a whole.
NESTED_TOO_DEEP = "nested too deep"
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


class DocumentShapeError(ValueError):
    """The document parsed but is not shaped as the format requires (``field`` names where)."""

    def __init__(self, field: str | None, message: str):
        self.field = field
        super().__init__(message)


class DepthScanner:
    """Nesting depth of JSON text fed piece by piece: the structural brackets (those outside
    strings) and the depth after each, computed with numpy (a few passes over the bytes, memory
    linear in the piece; no parsing).

    Attributes
    ----------
    depth : int
        Depth at the end of the text fed so far.
    """

    def __init__(self) -> None:
        self.depth = 0
        self._in_string = False
        self._backslashes = 0  # length of the run of backslashes that ended the previous piece

    def feed(self, data: bytes | bytearray | memoryview) -> tuple[np.ndarray, np.ndarray]:
        """Scan the next piece.

        Returns
        -------
        positions : ndarray of shape (n_brackets,)
            Offsets in ``data`` of the brackets outside strings.
        depths : ndarray of shape (n_brackets,)
            The depth after each (after ``[``/``{``: the depth inside it).
        """
        arr = np.frombuffer(data, np.uint8)
        if not len(arr):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        is_quote = arr == _QUOTE
        after_backslash = np.flatnonzero(is_quote[1:] & (arr[:-1] == _BACKSLASH)) + 1
        if is_quote[0] and self._backslashes:
            after_backslash = np.concatenate(([0], after_backslash))
        if len(after_backslash):
            is_quote[after_backslash[self._escaped(arr, after_backslash)]] = False
        # inside a string: an odd number of (unescaped) quotes up to here, counting the state carried in
        inside = np.bitwise_xor.accumulate(is_quote.view(np.uint8))
        if self._in_string:
            inside ^= 1
        # [ ] { } (0x5B 0x5D 0x7B 0x7D) and only Y _ y DEL besides share these bits: one cheap pass
        candidates = (arr & 0xD9) == 0x59
        candidates &= inside == 0
        positions = np.flatnonzero(candidates)
        values = arr[positions]
        keep = (values == 0x5B) | (values == 0x5D) | (values == 0x7B) | (values == 0x7D)
        positions, values = positions[keep], values[keep]
        self._in_string = bool(inside[-1])
        del inside, candidates, is_quote
        depths = np.cumsum(np.where((values & 0x04) == 0, 1, -1), dtype=np.int64)  # [ { open, ] } close
        depths += self.depth
        if len(depths):
            self.depth = int(depths[-1])
        last = len(arr) - 1
        run = 0
        while run <= last and arr[last - run] == _BACKSLASH:
            run += 1
        self._backslashes = run if run <= last else self._backslashes + run
        return positions, depths

    def _escaped(self, arr: np.ndarray, quotes: np.ndarray) -> np.ndarray:
        """Which ``quotes`` are escaped: preceded by an odd run of backslashes. Runs are counted
        one step back at a time for all quotes at once, up to 16 steps; longer runs are measured
        from the start of each run of backslashes (found in one pass)."""
        run = np.zeros(len(quotes), np.int64)
        alive = np.arange(len(quotes))
        for step in range(1, 17):
            at = quotes[alive] - step
            start = at < 0
            if start.any():  # the run reaches back into the previous piece
                run[alive[start]] += self._backslashes
            alive, at = alive[~start], at[~start]
            alive = alive[arr[at] == _BACKSLASH]
            if not len(alive):
                break
            run[alive] += 1
        else:  # runs longer than 16: measured from where each run of backslashes starts
            backslash = arr == _BACKSLASH
            starts = np.flatnonzero(backslash[1:] & ~backslash[:-1]) + 1
            if backslash[0]:
                starts = np.concatenate(([0], starts))
            q = quotes[alive]
            first = starts[np.searchsorted(starts, q - 1, "right") - 1]
            run[alive] = q - first + np.where(first == 0, self._backslashes, 0)
        return run % 2 == 1


#: Bytes scanned at a time by :func:`max_depth` and :func:`cut_deep_records` (the scanner's
#: temporaries then stay in cache: 25 % faster than one pass over a large document).
SCAN_PIECE_BYTES = 1 << 20


def _scan(data) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """``(offset, positions, depths)`` of ``data``, a piece of :data:`SCAN_PIECE_BYTES` at a time."""
    scanner, view = DepthScanner(), memoryview(data)
    for at in range(0, len(view), SCAN_PIECE_BYTES):
        positions, depths = scanner.feed(view[at:at + SCAN_PIECE_BYTES])
        yield at, positions, depths


def max_depth(data: bytes | bytearray | memoryview) -> tuple[int, int]:
    """The deepest nesting of JSON ``data`` and the byte offset of its first bracket beyond
    :data:`MAX_DEPTH` (of its deepest bracket when none is; ``(0, -1)`` without brackets)."""
    deepest, where, first_over = 0, -1, -1
    for at, positions, depths in _scan(data):
        if not len(depths):
            continue
        k = int(np.argmax(depths))
        if int(depths[k]) > deepest:
            deepest, where = int(depths[k]), at + int(positions[k])
        if first_over < 0 and deepest > MAX_DEPTH:
            first_over = at + int(positions[int(np.argmax(depths > MAX_DEPTH))])
    return deepest, first_over if first_over >= 0 else where


class TooDeep:
    """A record nested deeper than :data:`MAX_DEPTH`, cut out of its document unparsed.

    Attributes
    ----------
    depth : int
        Its deepest nesting (from the document's top level).
    offset : int
        Byte offset of its first bracket beyond the limit.
    spans : int
        Spans counted in its bytes (by the format's span-id key).
    excerpt : bytes
        Its first bytes.
    """

    __slots__ = ("depth", "offset", "spans", "excerpt")

    def __init__(self, depth: int, offset: int, spans: int, excerpt: bytes):
        self.depth, self.offset, self.spans, self.excerpt = depth, offset, spans, excerpt

    @property
    def reason(self) -> str:
        """The reject reason."""
        return (f"{NESTED_TOO_DEEP}: {self.depth} levels at byte {self.offset}, beyond the limit of {MAX_DEPTH}; "
                f"record rejected unread")

    def report(self, builder: SpanBatchBuilder, record: int) -> None:
        """Log the record as rejected."""
        builder.log.add(builder.source, record, self.reason, spans=self.spans, excerpt=self.excerpt)


_PLACEHOLDER = b"\\u0000tracesleuth-too-deep:"


def cut_deep_records(data: bytes, record_depth: int, span_keys: tuple[bytes, ...] | Callable[[bytes], int]
                     ) -> tuple[bytes, dict[str, TooDeep]]:
    """Replace each record of ``data`` that is nested deeper than :data:`MAX_DEPTH` by a
    placeholder string of the same length (byte offsets stay valid).

    Parameters
    ----------
    data : bytes
        A JSON document.
    record_depth : int
        Depth inside a record's own brackets (2 for the elements of a top-level array).
    span_keys : tuple of bytes, or callable
        Counts the spans of the records cut (:func:`count_spans`).

    Returns
    -------
    data : bytes
        ``data`` itself when nothing is too deep, else a copy with the records replaced.
    cut : dict of str to TooDeep
        The placeholder strings (as parsed) and the records they replace.
    """
    if all(not len(depths) or int(depths.max()) <= MAX_DEPTH for _, _, depths in _scan(data)):
        return data, {}  # the common case: nothing kept but a maximum per piece
    pieces = list(_scan(data))
    positions = np.concatenate([p + at for at, p, _ in pieces])
    depths = np.concatenate([d for _, _, d in pieces])
    del pieces
    over = np.flatnonzero(depths > MAX_DEPTH)
    brackets = np.frombuffer(data, np.uint8)[positions]
    opens = (brackets != ord("]")) & (brackets != ord("}"))
    del brackets
    starts = np.flatnonzero(opens & (depths == record_depth))
    ends = np.flatnonzero(~opens & (depths == record_depth - 1))
    out, cut = bytearray(data), {}
    k = 0
    while k < len(over):
        i = int(over[k])
        s = np.searchsorted(starts, i, "right") - 1
        e = np.searchsorted(ends, i)
        start = int(positions[starts[s]]) if s >= 0 and record_depth <= MAX_DEPTH else 0
        end_bracket = int(ends[e]) if e < len(ends) else len(positions) - 1
        end = int(positions[ends[e]]) + 1 if e < len(ends) else len(data)
        inside = slice(int(over[k]), end_bracket + 1)
        depth = int(depths[inside].max())
        placeholder = b'"' + _PLACEHOLDER + str(len(cut)).encode() + b'"'
        if end - start < len(placeholder):  # cannot happen for a record deeper than the limit
            placeholder = b"null"
        key = placeholder[1:-1].decode("unicode_escape")
        cut[key] = TooDeep(depth, int(positions[i]), count_spans(data[start:end], span_keys),
                           bytes(data[start:start + 120]))
        out[start:end] = placeholder + b" " * (end - start - len(placeholder))
        k = int(np.searchsorted(over, end_bracket, "right"))
    return bytes(out), cut


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


def count_spans(data: bytes, counter: tuple[bytes, ...] | Callable[[bytes], int]) -> int:
    """Spans in ``data``: ``counter(data)`` (a format's own count), or the occurrences of the
    member names ``counter`` (:func:`count_keys`)."""
    return counter(data) if callable(counter) else count_keys(data, counter)


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
    count: Callable[[bytes], int] | None = None,
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
        A record -> the number of spans it holds (as ``count``, else ``span_keys``, would count
        them).
    count : callable, optional
        Bytes -> the spans in them, where ``span_keys`` also count something else (OTLP's links
        have a ``spanId``): used for a document read in memory; a streamed one counts
        ``span_keys`` (and reads its records' spans by them too).
    """
    head, error = read_up_to(stream, MAX_DOCUMENT_BYTES + 1)
    if len(head) <= MAX_DOCUMENT_BYTES or error is not None:
        yield from _in_memory(head, builder, items_of, prefix_of, count or span_keys, spans_in)
        if error is not None:  # the records before it were read; the caller reports the rest
            raise error
    else:
        streamed_spans_in = spans_in if count is None else (lambda item: count_keys(json_bytes(item), span_keys))
        yield from _streamed(head, stream, builder, prefix_of(head), span_keys, streamed_spans_in)


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


def _record_depth(prefix: str) -> int:
    """Depth inside a record's own brackets, from its ``ijson`` prefix (``"item"``: 2)."""
    return len(prefix.split(".")) + 1 if prefix else 1


def _in_memory(data, builder, items_of, prefix_of, span_keys, spans_in):
    prefix = prefix_of(data)
    text, cut = cut_deep_records(data, _record_depth(prefix), span_keys)
    try:
        with gc_paused():
            doc, bad = loads_repairing(text)
    except orjson.JSONDecodeError as e:
        yield from _salvage(data, text, cut, e, builder, prefix, span_keys, spans_in)
        return
    if cut and doc.__class__ is str and doc in cut:  # the document is the one record
        yield 1, cut.pop(doc)
        return
    try:
        items = items_of(doc)
    except DocumentShapeError as e:
        builder.log.add(builder.source, 0, str(e), field=e.field, spans=count_spans(data, span_keys),
                        excerpt=data[:200])
        return
    if not cut and bad is None:
        yield from enumerate(items, 1)
        return
    for record, item in enumerate(items, 1):
        if cut and item.__class__ is str and item in cut:
            yield record, cut.pop(item)
            continue
        if bad is not None:
            warn_replacements(builder, record, item, bad)
        yield record, item
    _report_cut_outside_records(builder, cut)


def _report_cut_outside_records(builder, cut: dict) -> None:
    """Deep values that were not records (a member beside the records): logged at record 0."""
    for too_deep in cut.values():
        builder.log.add(builder.source, 0, f"a value outside the records is {too_deep.reason}",
                        spans=too_deep.spans, excerpt=too_deep.excerpt)


def _salvage(data, text, cut, error, builder, prefix, span_keys, spans_in):
    """Read the records complete before the break of ``text`` (``data`` with its too-deep
    records cut out), then log the break with the spans lost in it."""
    bad = utf8_error_offset(text)
    if bad is not None:
        text = text.decode("utf-8", "replace").encode()
    offset = byte_offset(text, error.pos)
    record, read = 0, 0
    try:
        for item in ijson.items(io.BytesIO(text), prefix, use_float=True):
            record += 1
            if cut and item.__class__ is str and item in cut:
                too_deep = cut.pop(item)
                read += too_deep.spans  # accounted for by its own reject
                yield record, too_deep
                continue
            read += spans_in(item)
            if bad is not None:
                warn_replacements(builder, record, item, bad)
            yield record, item
    except ijson.JSONError:
        pass
    lost = max(count_spans(data, span_keys) - read - sum(c.spans for c in cut.values()), 0)
    _report_cut_outside_records(builder, cut)
    reason = error.msg if hasattr(error, "msg") else str(error)
    builder.log.add(builder.source, record + 1, f"malformed JSON at byte {offset}: {reason}; "
                    f"{record} complete record(s) before it were read; {REST_NOT_READ}", spans=lost,
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
        #: Offset of the first bracket nested deeper than :data:`MAX_DEPTH`; the parser is
        #: given the bytes before it only (``None`` while there was none).
        self.too_deep: int | None = None
        self._depth = DepthScanner()
        self._stopped = False

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
        at = None
        if self.too_deep is None:
            positions, depths = self._depth.feed(raw)
            over = np.flatnonzero(depths > MAX_DEPTH)
            if len(over):
                at = int(positions[over[0]])
                self.too_deep, self._stopped = self.consumed + at, True
        window = self._tail + raw
        self.keys_seen += count_keys(window, self._keys) - count_keys(self._tail, self._keys)
        self._tail = window[-self._overlap:]
        start, self.consumed = self.consumed, self.consumed + len(raw)
        if at is not None:  # the parser gets the bytes before the too-deep bracket, and no more
            return self._decoder.decode(raw[:at], final=True).encode()
        if raw.isascii() and not self._decoder.getstate()[0]:
            return raw
        text = self._decoder.decode(raw)
        if self.bad_offset is None and _REPLACEMENT in text:
            self.bad_offset = start + (utf8_error_offset(raw) or 0)
        return text.encode()

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self._buf:
            if self._eof or self._stopped:
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
        where = (f"{NESTED_TOO_DEEP}: more than {MAX_DEPTH} levels at byte {reader.too_deep} (the limit)"
                 if reader.too_deep is not None else f"malformed JSON at or before byte {at}: {reason}")
        builder.log.add(builder.source, record + 1, f"{where}; {record} complete record(s) before it were "
                        f"read; {REST_NOT_READ}", spans=max(reader.keys_seen - read, 0))
        return
    if reader.keys_seen > read:
        builder.log.add(builder.source, record + 1, f"{reader.keys_seen - read} span(s) found outside the "
                        f"records expected at {prefix!r}", field=prefix, spans=reader.keys_seen - read)
