"""Ingest: read trace and log files (:mod:`tracesleuth.io`) into a span store
(:mod:`tracesleuth.io.store`), streaming, as one transaction.

It sits above both: it reads every format and writes the store, so neither of them imports the
other for it. The store's transactions, layout and idempotence rules are described in
:mod:`tracesleuth.io.store`; this module decides which files are read (by content hash), which
table each goes to (:func:`file_kinds`), and counts what was read and rejected
(:class:`IngestSummary`: ``spans in = read + rejected``).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ._signals import Interrupted, SignalGuard, signal_name
from .errors import NothingStoredError, TraceFormatError
from .io.store import LOG_REJECTS, LOGS, ONE_PART, REJECTS, SPANS, SpanStore, Transaction, file_sha256, with_templates

__all__ = ["IngestInterrupted", "IngestSummary", "file_kinds", "ingest"]

#: Rejected records an ingest summary shows as examples at most.
MAX_EXAMPLES = 10


@dataclass(frozen=True)
class IngestSummary:
    """Counts of one ingest: spans read, spans rejected, parts written, files by format.

    Attributes
    ----------
    spans_read, spans_rejected : int
        Spans stored and spans lost with rejected records (``spans in = read + rejected``).
    rejected_records, warnings : int
        Records that lost spans, and entries where the span was kept with a stated change.
    parts : tuple of str
        The span parts written, relative to the store directory.
    formats : dict of str to str
        The format read from each span file.
    reasons : list of dict
        Rejects grouped by reason, as :func:`tracesleuth.io.rejects_by_reason` gives them.
    seconds : float
        Wall time of the ingest.
    damaged_files : tuple of str
        Files not read to their end (truncated or corrupt compressed data, a document broken
        before its end): the records after the damage are lost, and a reject says where.
    examples : list of dict
        This ingest's first rejected records and warnings (rows of
        :data:`~tracesleuth.schema.REJECT_SCHEMA`); other writers' rejects in the same store are
        not among them.
    skipped_files : list of dict
        Files not read: ``{"path", "sha256", "reason"}``, their content being in the store
        already (or being ingested by another ingest, or the same as another file of this one);
        ``force=True`` reads them.
    ingest_id : str
        The ingest's manifest entry id (empty when nothing was committed).
    logs_read, logs_rejected : int
        Log records stored and log records lost with rejected entries.
    log_formats : dict of str to str
        The format read from each log file.
    log_warnings : int
        Log entries kept with a stated change (a cut body, an id made null, ...).
    log_reasons : list of dict
        Log rejects and warnings grouped by reason: ``{"reason", "entries", "records_lost"}``.
    log_parts : tuple of str
        The log parts written, relative to the store directory.
    templates : int
        Log templates in the store after this ingest (0 when it read no log).
    """

    spans_read: int
    spans_rejected: int
    rejected_records: int
    warnings: int
    parts: tuple
    formats: dict
    reasons: list
    seconds: float
    damaged_files: tuple = ()
    examples: list = ()
    skipped_files: list = ()
    ingest_id: str = ""
    logs_read: int = 0
    logs_rejected: int = 0
    log_formats: dict = dataclasses.field(default_factory=dict)
    log_warnings: int = 0
    log_reasons: list = ()
    log_parts: tuple = ()
    templates: int = 0

    def to_dict(self) -> dict:
        """JSON-safe dictionary."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {
            "parts": list(self.parts), "damaged_files": list(self.damaged_files), "examples": list(self.examples),
            "skipped_files": list(self.skipped_files), "log_reasons": list(self.log_reasons),
            "log_parts": list(self.log_parts)}


class IngestInterrupted(Interrupted):
    """An ingest stopped by SIGINT or SIGTERM (a :class:`KeyboardInterrupt`, so that whatever
    catches Ctrl-C catches it).

    Attributes
    ----------
    signum : int
        The signal (``signal.SIGINT`` for a plain KeyboardInterrupt).
    committed : bool
        Whether the ingest had passed its commit point (then it is in the store whole; else
        nothing of it is).
    message : str
        One line: what was, and was not, committed.
    """

    def __init__(self, signum: int, committed: bool, message: str):
        self.committed, self.message = committed, message
        super().__init__(signum, message)


def ingest(paths, store: SpanStore | str | os.PathLike, *, format: str | None = None, mapping=None,
           on_batch=None, force: bool = False) -> IngestSummary:
    """Read trace and log files into a span store, streaming, as one transaction.

    Parameters
    ----------
    paths : str, path or list
        Files, directories or glob patterns (see :func:`tracesleuth.io.iter_span_batches`), of
        spans and log records together: each file's kind is told from its content
        (:func:`tracesleuth.io.detect_format`, :func:`tracesleuth.io.is_log_format`). Log records
        go to the store's log table, each given its template
        (:class:`~tracesleuth.io.log_templates.LogTemplateMiner`, whose state the store keeps).
    store : SpanStore or path
        Destination, created at the commit when absent (an ingest that stores nothing, or a
        mistyped path, leaves no store behind).
    format : str, optional
        Force one format (span or log) for every file, as for :func:`tracesleuth.io.read_spans`
        and :func:`tracesleuth.io.read_logs`.
    mapping
        As for :func:`tracesleuth.io.read_spans` (span CSV/Parquet).
    on_batch : callable, optional
        Called with each span batch (progress reporting).
    force : bool, default=False
        Read files whose content (SHA-256) the store already holds, or that another file of this
        ingest has; by default they are skipped and listed in ``skipped_files``.

    Returns
    -------
    IngestSummary

    Raises
    ------
    TraceFormatError
        When a path names nothing that exists (before anything is created), or ``store``
        exists and is not a span store.
    NothingStoredError
        When nothing was stored (every file skipped, empty or rejected); its ``summary`` says
        what was read and rejected. Nothing was committed and no store was created.
    IngestInterrupted
        On SIGINT or SIGTERM (in the main thread): nothing was committed (or, when the signal
        came during the commit, the whole ingest was); its ``message`` says which.

    Notes
    -----
    All of the ingest's parts appear at once, at its commit, or none does (a
    :class:`Transaction`; see the module docstring), whatever stops it: an exception, a signal,
    kill -9 or a power cut. An ingest with log files templates them one ingest at a time (it
    holds the templates lock from loading the miner's state to committing it).
    """
    from .io import RejectLog, expand_paths, iter_log_batches, iter_span_batches, rejects_by_reason

    files = list(dict.fromkeys(str(f) for f in expand_paths(paths)))  # raises before anything is created
    path = store.path if isinstance(store, SpanStore) else Path(store)
    t0 = time.perf_counter()
    log, log_log, formats, log_formats, damaged = RejectLog(), RejectLog(), {}, {}, []
    read = {"spans": 0, "logs": 0}
    txn = Transaction(path)
    given = [str(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])]
    with SignalGuard() as signals:
        try:
            hashes = {f: file_sha256(f) for f in files}
            txn.begin()
            skipped = txn.claim(hashes, force=force)
            todo = [f for f in files if f not in skipped]
            kinds = file_kinds(todo, format)
            span_files = [f for f in todo if kinds[f] == SPANS.kind]
            log_files = [f for f in todo if kinds[f] == LOGS.kind]

            def span_batches():
                for b in iter_span_batches(span_files, format=format, mapping=mapping, log=log, formats=formats,
                                           damaged=damaged):
                    read["spans"] += b.num_rows
                    if on_batch is not None:
                        on_batch(b)
                    yield b

            def log_batches(miner):
                for b in iter_log_batches(log_files, format=format, log=log_log, formats=log_formats,
                                          damaged=damaged):
                    read["logs"] += b.num_rows
                    yield with_templates(b, miner)

            staged = txn.append(SPANS, span_batches()) if span_files else []
            if log_files:
                staged += txn.append(LOGS, log_batches(txn.templates()))
            rejects, log_rejects = log.to_arrow(), log_log.to_arrow()
            for table, rows in ((REJECTS, rejects), (LOG_REJECTS, log_rejects)):
                if rows.num_rows:
                    txn.append(table, rows.to_batches(), ONE_PART)
            summary = IngestSummary(
                spans_read=sum(log.spans_read.values()), spans_rejected=log.spans_rejected,
                rejected_records=log.n_rejected_records, warnings=log.n_warnings, parts=(), formats=formats,
                reasons=rejects_by_reason(rejects), seconds=time.perf_counter() - t0,
                damaged_files=tuple(str(f) for f in damaged), examples=rejects.slice(0, MAX_EXAMPLES).to_pylist(),
                skipped_files=[{"path": f, "sha256": hashes[f], "reason": r} for f, r in skipped.items()],
                logs_read=read["logs"], logs_rejected=log_log.spans_rejected, log_formats=log_formats,
                log_warnings=log_log.n_warnings,
                log_reasons=[{"reason": r["reason"], "entries": r["records"], "records_lost": r["spans"]}
                             for r in rejects_by_reason(log_rejects)])
            if not staged:
                signals.hold()
                txn.abort()
                raise NothingStoredError(_nothing_stored(files, skipped, summary), summary=summary)
            entry = {"paths": given, "spans_read": summary.spans_read, "spans_rejected": summary.spans_rejected,
                     "logs_read": summary.logs_read, "logs_rejected": summary.logs_rejected,
                     "files": [{"path": f, "sha256": hashes[f], "bytes": os.path.getsize(f), "kind": kinds[f],
                                "format": formats.get(f) or log_formats.get(f)} for f in todo if hashes[f]]}
            signals.hold()  # the commit, and what follows it, is not cut short
            finals = txn.commit(entry)
        except KeyboardInterrupt as e:
            signals.hold()
            txn.abort()
            signum = getattr(e, "signum", signal.SIGINT)
            what = f"{read['spans']:,} spans" + (f", {read['logs']:,} log records" if read["logs"] else "")
            raise IngestInterrupted(signum, False, (
                f"interrupted by {signal_name(signum)}: nothing committed; {len(formats) + len(log_formats)} of "
                f"{len(files)} file(s) read ({what}) discarded")) from None
        except BaseException:
            signals.hold()
            txn.abort()
            raise
        held = signals.held
    summary = dataclasses.replace(summary, parts=tuple(finals[SPANS.kind]), log_parts=tuple(finals[LOGS.kind]),
                                  templates=txn.n_templates, seconds=time.perf_counter() - t0, ingest_id=txn.id)
    if held:
        raise IngestInterrupted(held[0], True, (
            f"interrupted by {signal_name(held[0])} during the commit, which was completed: the ingest "
            f"is in the store whole ({summary.spans_read:,} spans and {summary.logs_read:,} log records in "
            f"{len(summary.parts) + len(summary.log_parts)} part(s))"))
    return summary


def file_kinds(files, format: str | None = None) -> dict[str, str]:
    """Each file's table, ``"spans"`` or ``"logs"``, from ``format`` when given, else from its
    content (:func:`tracesleuth.io.detect_format` on its first bytes, decompressed).

    Parameters
    ----------
    files : list of str or Path
        Files (not directories: see :func:`tracesleuth.io.expand_paths`).
    format : str, optional
        A span or log format every file is in.

    Returns
    -------
    dict of str to str
        ``{file: "spans" | "logs"}``; a file whose format cannot be told (empty, unreadable,
        unknown) is ``"spans"``: the span readers report it.
    """
    from .io import detect_format, is_log_format
    from .io._source import head_bytes

    if format is not None:
        return dict.fromkeys(map(str, files), LOGS.kind if is_log_format(format) else SPANS.kind)

    def kind(f: str) -> str:
        try:
            head = head_bytes(f)
            if head.strip() and is_log_format(detect_format(head, f)):
                return LOGS.kind
        except (OSError, TraceFormatError):
            pass
        return SPANS.kind

    return {f: kind(f) for f in map(str, files)}


def _nothing_stored(files: list[str], skipped: dict, summary: IngestSummary) -> str:
    """Why an ingest stored nothing, in one line."""
    if files and len(skipped) == len(files):
        return (f"nothing to store: every file ({len(files)}) is already in the store or being ingested "
                f"(same content; --force adds them again)")
    parts = [f"{len(skipped)} file(s) skipped (already in the store)"] if skipped else []
    if summary.spans_rejected:
        parts.append(f"{summary.spans_rejected:,} span(s) rejected")
    if summary.logs_rejected:
        parts.append(f"{summary.logs_rejected:,} log record(s) rejected")
    return (f"nothing stored: no span or log record could be read from {len(files) - len(skipped)} file(s)"
            + (f" ({'; '.join(parts)})" if parts else "") + "; see the reasons")
