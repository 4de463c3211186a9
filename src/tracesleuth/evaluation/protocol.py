"""What every evaluation protocol's result shares: its tables as JSON rows and as text.

Each analysis's ``evaluate`` (registered in :mod:`tracesleuth.analyses`) returns a result with
``to_dict()`` and ``describe()``; these two helpers give them one look and one JSON rule.
"""

from __future__ import annotations

import math
from typing import Iterable

import polars as pl

__all__ = ["describe_tables", "json_rows"]


def json_rows(frame: pl.DataFrame) -> list[dict]:
    """The rows of ``frame`` as dicts, with NaN and infinite floats as None (JSON has neither)."""
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
            for row in frame.to_dicts()]


def describe_tables(tables: Iterable[tuple[str, pl.DataFrame]], scores: dict, notes: Iterable[str] = ()) -> str:
    """Titled tables, then ``Scores: name=value, ...`` and one ``Note:`` line per note.

    Parameters
    ----------
    tables : iterable of (str, polars.DataFrame)
        Tables with no row are left out.
    scores : dict of str to float
    notes : iterable of str
    """
    parts = []
    with pl.Config(tbl_rows=100, tbl_cols=20, fmt_str_lengths=80, tbl_width_chars=220, tbl_hide_dataframe_shape=True):
        for title, frame in tables:
            if frame.height:
                parts += [title, str(frame)]
    parts.append("Scores: " + ", ".join(f"{k}={v:.3f}" for k, v in scores.items()))
    parts += [f"Note: {n}" for n in notes]
    return "\n".join(parts)
