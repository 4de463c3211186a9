"""The causal paths' decisions, as records (the analyses' one
:class:`~tracesleuth.analyses._notes.Note` base: ``kind``, the numbers, ``describe()``).

======================== ==================================================================
kind                     decision
======================== ==================================================================
``messages_left_out``    :class:`MessagesLeftOut` - messages or pairs nesting could not use
``no_causal_path``       :class:`NoCausalPath` - nesting recovered no path
``no_causal_edge``       :class:`NoCausalEdge` - convolution found no spike
======================== ==================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from .._notes import Note

__all__ = ["MessagesLeftOut", "NoCausalEdge", "NoCausalPath"]


@dataclass(frozen=True)
class MessagesLeftOut(Note):
    """Messages or call pairs the nesting algorithm could not use, by reason (the keys of
    :attr:`.nesting.CallPairs.counts`).

    Attributes
    ----------
    returns_without_call, duplicate_calls, never_answered, under_unanswered, out_of_order, free_form : int
    """

    kind: ClassVar[str] = "messages_left_out"
    returns_without_call: int = 0
    duplicate_calls: int = 0
    never_answered: int = 0
    under_unanswered: int = 0
    out_of_order: int = 0
    free_form: int = 0

    def describe(self) -> str:
        lost = [(f.name, getattr(self, f.name)) for f in fields(self) if getattr(self, f.name)]
        return "Left out: " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in lost) + "."


@dataclass(frozen=True)
class NoCausalPath(Note):
    """The nesting algorithm recovered no causal path: no answered call without a candidate
    parent (the log lacks CALL and RETURN messages with call ids, or every call is nested).

    Attributes
    ----------
    n_call_pairs : int
        Answered calls.
    """

    kind: ClassVar[str] = "no_causal_path"
    n_call_pairs: int

    def describe(self) -> str:
        return ("No causal path: no answered call without a candidate parent. Check that the log has CALL and "
                "RETURN messages with call ids.")


@dataclass(frozen=True)
class NoCausalEdge(Note):
    """The convolution algorithm found no causal edge: no cross-correlation spike above
    ``n_sigma`` at the quantum and delays tried.

    Attributes
    ----------
    n_messages : int
    quantum_ns, max_delay_ns : int
    """

    kind: ClassVar[str] = "no_causal_edge"
    n_messages: int
    quantum_ns: int
    max_delay_ns: int

    def describe(self) -> str:
        return "No causal edge: no cross-correlation spike. Try a finer quantum_ns, a longer max_delay_ns or a longer log."
