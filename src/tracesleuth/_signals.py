"""SIGINT and SIGTERM as exceptions, so that what a process was doing is cleaned up or finished.

Python turns SIGINT into :class:`KeyboardInterrupt`; SIGTERM, by default, ends the process at
once, whatever it was writing. Inside a :class:`SignalGuard` both raise :class:`Interrupted`
(a :class:`KeyboardInterrupt`), and after :meth:`SignalGuard.hold` both only wait until the
guard ends, so that a step that must not be cut in its middle (a commit) is not.
"""

from __future__ import annotations

import signal
import threading

__all__ = ["HANDLED_SIGNALS", "Interrupted", "SignalGuard", "signal_name"]

#: The signals a guard turns into exceptions.
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    """``"SIGINT"`` for ``signal.SIGINT``."""
    return signal.Signals(signum).name


class Interrupted(KeyboardInterrupt):
    """A signal stopped the work (a :class:`KeyboardInterrupt`, so that whatever catches Ctrl-C
    catches it). The exit status that reports it is ``128 + signum``.

    Attributes
    ----------
    signum : int
    """

    def __init__(self, signum: int, message: str = ""):
        self.signum = signum
        super().__init__(message or f"interrupted by {signal_name(signum)}")


class SignalGuard:
    """While inside (in the main thread; elsewhere it does nothing): SIGINT and SIGTERM raise
    :class:`Interrupted`; after :meth:`hold`, they wait for the guard's end instead
    (:attr:`held`). A signal ignored when entering (a background job's SIGINT) stays ignored;
    the previous handlers come back at the end, so guards nest.

    Examples
    --------
    >>> with SignalGuard() as guard:
    ...     pass            # SIGINT or SIGTERM here raises Interrupted
    ...     guard.hold()
    ...     pass            # here they wait
    >>> guard.held
    []
    """

    def __enter__(self) -> "SignalGuard":
        self.received: list[int] = []
        self._holding = False
        self._held_from = 0
        self._previous: dict = {}
        if threading.current_thread() is threading.main_thread():
            for sig in HANDLED_SIGNALS:
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, frame) -> None:
        self.received.append(signum)
        if not self._holding:
            raise Interrupted(signum)

    def hold(self) -> None:
        """From now until the guard ends, SIGINT and SIGTERM only wait (see :attr:`held`)."""
        if not self._holding:
            self._holding, self._held_from = True, len(self.received)

    @property
    def held(self) -> list[int]:
        """The signals received since :meth:`hold` (they raised nothing)."""
        return self.received[self._held_from:] if self._holding else []
