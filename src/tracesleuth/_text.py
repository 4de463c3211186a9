"""Text helpers for display that analyses and the report share (standard library only).

:func:`shorten` lives here, below the analyses, so that an estimator can shorten a long call
structure for its result without importing the report (:mod:`tracesleuth.report.document`
re-exports it for the sections).
"""

from __future__ import annotations

__all__ = ["shorten"]


def shorten(text: str, limit: int = 90) -> str:
    """``text`` cut to at most ``limit`` characters, ending in "…" when cut (long call structures)."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
