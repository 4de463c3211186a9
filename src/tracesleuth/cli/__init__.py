"""The ``tracesleuth`` command line: a thin layer over the public API.

Every command that prints results takes ``--json`` and then prints exactly one JSON document.
"""

from __future__ import annotations

#: The one line a signal that stops the command line before a command ran prints (``__main__`` has
#: its own copy: it may fire before this module is imported).
STOPPED_WHILE_STARTING = "interrupted by {} while starting: nothing done\n"


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    Once the guard's module is imported SIGINT and SIGTERM raise an exception
    (:class:`~tracesleuth._signals.SignalGuard`), so that a command stopped by either cleans up
    (``ingest`` drops what it staged; a Dask cluster is closed) and exits ``128 + signal`` (130, 143)
    with one line on stderr. A Ctrl-C while that module is imported is the same line and 130; a
    SIGTERM then still ends the process at once (Python's default), before anything was done.
    """
    import sys

    try:
        import signal

        from .._signals import SignalGuard, signal_name
    except KeyboardInterrupt:  # Ctrl-C before the guard below began (while Python imported it)
        sys.stderr.write(STOPPED_WHILE_STARTING.format("SIGINT"))
        return 130
    with SignalGuard():
        try:
            from .. import use_system_allocator
            from .app import run

            use_system_allocator()
            return run(argv)
        except KeyboardInterrupt as e:  # before a command ran (while starting)
            signum = getattr(e, "signum", signal.SIGINT)
            sys.stderr.write(STOPPED_WHILE_STARTING.format(signal_name(signum)))
            return 128 + signum
