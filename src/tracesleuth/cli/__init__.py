"""The ``tracesleuth`` command line: a thin layer over the public API.

Every command that prints results takes ``--json`` and then prints exactly one JSON document.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    From its first instant SIGINT and SIGTERM raise an exception (:class:`~tracesleuth._signals.SignalGuard`),
    so that a command stopped by either cleans up (``ingest`` drops what it staged; a Dask
    cluster is closed) and exits ``128 + signal`` (130, 143) with one line on stderr.
    """
    import sys

    try:
        import signal

        from .._signals import SignalGuard, signal_name
    except KeyboardInterrupt:  # Ctrl-C before the guard below began (while Python imported it)
        sys.stderr.write("interrupted by SIGINT while starting: nothing done\n")
        return 130
    with SignalGuard():
        try:
            from .. import use_system_allocator
            from .app import run

            use_system_allocator()
            return run(argv)
        except KeyboardInterrupt as e:  # before a command ran (while starting)
            signum = getattr(e, "signum", signal.SIGINT)
            sys.stderr.write(f"interrupted by {signal_name(signum)} while starting: nothing done\n")
            return 128 + signum
