"""The ``tracesleuth`` command line: a thin layer over the public API.

Every command that prints results takes ``--json`` and then prints exactly one JSON document.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    from .. import use_system_allocator
    from .app import run

    use_system_allocator()
    return run(argv)
