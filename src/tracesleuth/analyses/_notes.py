"""What a result has to say beside its findings, as records: the one base of every analysis's notes.

A note records one decision an analysis took (a test skipped for want of requests, a rule relaxed,
a part of the input left out, a period chosen). Each is a small frozen dataclass, a subclass of
:class:`Note`, with

* ``kind`` - a stable identifier (a class attribute) that tests and programs match on;
* the numbers behind the decision, as fields (counts, thresholds, durations in ns, names);
* :meth:`~Note.describe` - the sentence the command line and the report print; ``str(note)`` is
  that sentence, so a renderer that prints notes needs nothing else;
* :meth:`~Note.to_dict` - ``{"kind": ..., <the fields>..., "words": <the sentence>}``, JSON-safe.

A program asks ``result.notes_of("categories_untested")`` (:class:`WithNotes`, or
:func:`notes_of`) and reads the fields, never a substring of the prose. Every analysis's result
keeps its notes as a tuple of these records (``tests/analyses/test_common.py`` checks it); each
analysis defines its own subclasses next to its result (e.g. :mod:`.patterns.notes`,
:mod:`.compare.notes`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Iterable

__all__ = ["Note", "WithNotes", "notes_of"]


def _json_safe(value: Any) -> Any:
    """Tuples as lists, recursively (a note's fields are numbers, text, None and tuples of them)."""
    if isinstance(value, (tuple, list)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Note:
    """Base of every note: ``kind`` names it; subclasses hold its numbers and word them.

    A subclass is a frozen dataclass that sets ``kind`` (a ``ClassVar``, unique within its
    analysis), declares the numbers behind the decision as fields and words them in
    :meth:`describe`. Its docstring says which decision it records.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> from typing import ClassVar
    >>> @dataclass(frozen=True)
    ... class TooFew(Note):  # requests left out: fewer than ``minimum`` in their category
    ...     kind: ClassVar[str] = "too_few"
    ...     n_requests: int
    ...     minimum: int
    ...     def describe(self) -> str:
    ...         return f"{self.n_requests} requests, fewer than {self.minimum}: left out."
    >>> note = TooFew(3, minimum=10)
    >>> str(note)
    '3 requests, fewer than 10: left out.'
    >>> note.to_dict()
    {'kind': 'too_few', 'n_requests': 3, 'minimum': 10, 'words': '3 requests, fewer than 10: left out.'}
    >>> notes_of([note], "too_few") == (note,)
    True
    """

    kind: ClassVar[str] = "note"

    def describe(self) -> str:  # pragma: no cover - abstract
        """The sentence the command line and the report print."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.describe()

    def numbers(self) -> dict[str, Any]:
        """The record's fields (JSON-safe: tuples as lists), without ``kind`` and ``words``."""
        return {f.name: _json_safe(getattr(self, f.name)) for f in fields(self)}

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: ``kind``, the record's fields (tuples as lists) and ``words`` (:meth:`describe`)."""
        return {"kind": self.kind, **self.numbers(), "words": self.describe()}


def notes_of(notes: Iterable[Note], kind: str) -> tuple[Note, ...]:
    """The notes of one ``kind``, in their order.

    Parameters
    ----------
    notes : iterable of Note
    kind : str
        e.g. ``"causes_split"``.

    Returns
    -------
    tuple of Note
    """
    return tuple(n for n in notes if n.kind == kind)


class WithNotes:
    """Mixin of the results that hold ``notes`` (a tuple of :class:`Note`): :meth:`notes_of`."""

    notes: tuple

    def notes_of(self, kind: str) -> tuple[Note, ...]:
        """The notes of one ``kind`` (e.g. ``"causes_split"``), in their order."""
        return notes_of(self.notes, kind)
