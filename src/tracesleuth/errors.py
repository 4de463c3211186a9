"""Exceptions raised by tracesleuth. All are :class:`ValueError` subclasses that name the offending
input (file, record, field, value) in their message."""

from __future__ import annotations


class TraceSleuthError(ValueError):
    """Base class of every error tracesleuth raises on bad input or bad settings."""


class TraceFormatError(TraceSleuthError):
    """A file cannot be read at all (unknown format, unreadable container).

    Parameters
    ----------
    source : str
        The file's path (or a description of the stream).
    message : str
        What is wrong.
    record : int, optional
        1-based record number (line, array element) where the problem was found.
    field : str, optional
        The offending field.
    """

    def __init__(self, source: str, message: str, *, record: int | None = None, field: str | None = None):
        self.source, self.record, self.field = source, record, field
        where = source
        if record is not None:
            where += f", record {record}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")


class NoSpansError(TraceSleuthError):
    """Nothing usable was read from the given paths (all files empty, unknown or rejected)."""


class NothingStoredError(TraceSleuthError):
    """An ingest stored nothing: every file was skipped (its content already in the store),
    empty or rejected. Nothing was committed, and no store was created.

    Attributes
    ----------
    summary : tracesleuth.ingest.IngestSummary
        What was read, rejected and skipped.
    """

    def __init__(self, message: str, *, summary=None):
        self.summary = summary
        super().__init__(message)


class ParameterError(TraceSleuthError):
    """A setting has a value outside what is allowed (named, with the allowed values and what was given)."""


class EmptyDataError(TraceSleuthError):
    """An analysis was given no data it can work on (empty table, no request in the interval)."""


class NoLogsError(TraceSleuthError):
    """No log record could be read from the given paths (all files empty, unknown, of spans, or
    rejected)."""
