"""The one runner of the analyses' evaluation protocols: cases, fit, a row per case, summary.

Each protocol of :mod:`tracesleuth.evaluation.protocols` says only what is its own: its cases
(simulated scenarios under seeds, recorded faults), how it fits one case and how it scores it
into a row. The runner does the rest, once for all of them:

1. **Cases**: :func:`seeded_cases` checks the number of seeds and gives every (kind, seed) its
   own child of ``SeedSequence(random_state)``; :func:`recorded_faults` finds the recorded data
   (or the note that it is absent) and the faults a run takes, :func:`chosen_faults` the faults
   an ``evaluate_real`` was asked for.
2. **Fit**: :func:`timed` times one fit (the rows' ``fit_s``).
3. **Rows**: :func:`case_rows` and :func:`fault_rows` score every case into rows of a fixed schema
   (a case that fails is the protocol's row with a note, never a crash).
4. **Summary**: :func:`rank_of` ranks the injected service, :func:`fault_type_table` counts
   top-1 / top-3 hits per system and fault type, :func:`rank_shares` gives them as the shares
   of the scores, :func:`run_settings` the settings every result reports;
   :class:`SimulatedAndReal` holds what a protocol of simulated cases and recorded faults found.

See Also
--------
tracesleuth.evaluation.protocol : the results' JSON rows and text.
tracesleuth.evaluation.nezha : the recorded faults and their trace windows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

import numpy as np
import polars as pl

from ..errors import ParameterError
from .nezha import SYSTEMS, RealFault, default_data_dir, list_faults, read_windows

__all__ = ["SimulatedAndReal", "case_rows", "check_count", "chosen_faults", "data_folder", "fault_rows",
           "fault_type_table", "rank_of", "rank_shares", "recorded_faults", "run_settings", "seeded_cases", "timed"]

_T = TypeVar("_T")
#: The ranks a recorded fault is scored at: top-1 and top-3 of the injected service.
TOP_K = (1, 3)


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

def check_count(name: str, value, owner: str) -> int:
    """``value`` as an int when it is an int >= 1, else :class:`ParameterError` naming it.

    Parameters
    ----------
    name : str
        The parameter's name (``seeds``, ``sessions``).
    value : object
    owner : str
        The function that takes it.

    Raises
    ------
    ParameterError
        "The 'seeds' parameter of evaluate_simulated must be an int in the range [1, inf). Got 0
        instead."
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"The {name!r} parameter of {owner} must be an int in the range [1, inf). "
                             f"Got {value!r} instead.")
    return int(value)


def seeded_cases(kinds: Iterable[str], *, seeds: int, random_state,
                 owner: str = "evaluate_simulated") -> list[tuple[str, int, np.random.SeedSequence]]:
    """Every simulated case: ``(kind, i, seq)`` for each kind under ``seeds`` seeds.

    Parameters
    ----------
    kinds : iterable of str
        The scenario kinds, in the order of the rows.
    seeds : int
        Checked by :func:`check_count` (as ``seeds`` of ``owner``).
    random_state : int or None
        Case ``(kind, i)`` is drawn from child ``i`` of ``SeedSequence(random_state)``: every kind
        sees the same seeds.
    owner : str, default="evaluate_simulated"

    Returns
    -------
    list of (str, int, numpy.random.SeedSequence)

    Examples
    --------
    >>> [(kind, i) for kind, i, _ in seeded_cases(["a", "b"], seeds=2, random_state=0)]
    [('a', 0), ('a', 1), ('b', 0), ('b', 1)]
    """
    children = np.random.SeedSequence(random_state).spawn(check_count("seeds", seeds, owner))
    return [(kind, i, seq) for kind in kinds for i, seq in enumerate(children)]


def data_folder(data_dir) -> Path | None:
    """``data_dir`` as a path, or the recorded data beside the repository
    (:func:`~tracesleuth.evaluation.nezha.default_data_dir`; None when absent)."""
    return Path(data_dir) if data_dir is not None else default_data_dir()


def chosen_faults(data_dir, faults=None, systems: Sequence[str] = SYSTEMS) -> list[RealFault]:
    """The recorded faults an ``evaluate_real`` is asked for.

    Parameters
    ----------
    data_dir : path or None
        The ``nezha`` folder; None: :func:`data_folder`'s default.
    faults : sequence of RealFault or of int, optional
        Faults (or their indices in :func:`~tracesleuth.evaluation.nezha.list_faults`); default
        every fault with windows.
    systems : sequence of str, default=SYSTEMS

    Returns
    -------
    list of RealFault

    Raises
    ------
    ParameterError
        When no data folder is given or found.
    """
    folder = data_folder(data_dir)
    if folder is None or not folder.is_dir():
        raise ParameterError(f"No Nezha data folder: give 'data_dir' (the ../shared/data/nezha folder). "
                             f"Got {folder!r}.")
    every = list_faults(folder, systems)
    return every if faults is None else [every[f] if isinstance(f, (int, np.integer)) else f for f in faults]


def recorded_faults(data_dir, *, quick: bool, first_per: Callable[[RealFault], object] | None = None
                    ) -> tuple[Path | None, list[RealFault] | None, list[str]]:
    """The recorded faults of a protocol's run, or the note that the data is absent.

    Parameters
    ----------
    data_dir : path or None
        The ``nezha`` folder; None: :func:`data_folder`'s default.
    quick : bool
        Take only the first fault of each ``first_per`` key.
    first_per : callable, optional
        With ``quick``: a fault's key (None: leave the fault out).

    Returns
    -------
    folder : Path or None
        The folder looked at (the ``data_dir`` of :func:`run_settings`).
    faults : list of RealFault or None
        None when the folder is absent.
    notes : list of str
        The skipped part, when the folder is absent.
    """
    folder = data_folder(data_dir)
    if folder is None or not folder.is_dir():
        return folder, None, ["no ../shared/data/nezha: the real-data part was skipped"]
    faults = list_faults(folder)
    if quick and first_per is not None:
        firsts: dict = {}
        for f in faults:
            key = first_per(f)
            if key is not None:
                firsts.setdefault(key, f)
        faults = list(firsts.values())
    return folder, faults, []


# --------------------------------------------------------------------------------------------
# Fit and rows
# --------------------------------------------------------------------------------------------

def timed(fit: Callable[[], _T]) -> tuple[_T, float]:
    """``fit()`` and the seconds it took (wall clock, :func:`time.perf_counter`)."""
    t0 = time.perf_counter()
    out = fit()
    return out, time.perf_counter() - t0


def case_rows(cases: Iterable[_T], score: Callable[[_T], Iterable[dict]], schema: dict) -> pl.DataFrame:
    """The rows of every case, in order: ``score(case)`` gives a case's rows (one or more).

    Parameters
    ----------
    cases : iterable
    score : callable
        A case -> its rows (dicts of the schema's columns).
    schema : dict of str to polars.DataType

    Returns
    -------
    polars.DataFrame
    """
    return pl.DataFrame([row for case in cases for row in score(case)], schema=schema)


def fault_rows(faults: Iterable[RealFault], score: Callable[[RealFault], dict], schema: dict) -> pl.DataFrame:
    """One row per recorded fault; the trace windows read for them are then let go
    (:func:`~tracesleuth.evaluation.nezha.read_windows` keeps a few sets).

    Parameters
    ----------
    faults : iterable of RealFault
    score : callable
        A fault -> its row.
    schema : dict of str to polars.DataType

    Returns
    -------
    polars.DataFrame
    """
    frame = case_rows(faults, lambda f: [score(f)], schema)
    read_windows.cache_clear()
    return frame


# --------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------

def rank_of(item: str, ranking: Sequence[str]) -> int | None:
    """The 1-based rank of ``item`` in ``ranking``, None when it is not ranked.

    Examples
    --------
    >>> rank_of("db", ["cart", "db"]), rank_of("web", ["cart", "db"])
    (2, None)
    """
    return list(ranking).index(item) + 1 if item in ranking else None


def fault_type_table(real: pl.DataFrame, ranks: dict[str, str], extra: Sequence[pl.Expr] = ()) -> pl.DataFrame:
    """Top-1 and top-3 hit counts per system and fault type (TrainTicket first).

    Parameters
    ----------
    real : polars.DataFrame
        One row per fault, with ``system``, ``fault_type`` and the rank columns (1-based, null
        when not ranked).
    ranks : dict of str to str
        Rank column -> the prefix of its counts' columns (``"estimator_"`` gives
        ``estimator_top1``, ``estimator_top3``).
    extra : sequence of polars.Expr
        More aggregations, after the counts.

    Returns
    -------
    polars.DataFrame
        ``system``, ``fault_type``, ``faults`` and the counts; with no fault, the first three
        columns and no row.
    """
    if real.is_empty():
        return pl.DataFrame(schema={"system": pl.String, "fault_type": pl.String, "faults": pl.UInt32})
    hits = [(pl.col(col).is_not_null() & (pl.col(col) <= k)).sum().alias(f"{prefix}top{k}")
            for col, prefix in ranks.items() for k in TOP_K]
    return (real.group_by("system", "fault_type", maintain_order=True)
            .agg(pl.len().alias("faults"), *hits, *extra)
            .sort("system", "fault_type", descending=[True, False]))


def rank_shares(ranks: Sequence[int | None], name: str = "top{k}", ks: Sequence[int] = TOP_K) -> dict[str, float]:
    """The share of faults whose rank is at most ``k``, for each ``k`` (unranked: a miss).

    Parameters
    ----------
    ranks : sequence of int or None
        Not empty.
    name : str, default="top{k}"
        The scores' names, ``{k}`` filled in.
    ks : sequence of int, default=(1, 3)

    Returns
    -------
    dict of str to float

    Examples
    --------
    >>> rank_shares([1, 2, None, 5], name="real_top{k}")
    {'real_top1': 0.25, 'real_top3': 0.5}
    """
    return {name.format(k=k): float(np.mean([r is not None and r <= k for r in ranks])) for k in ks}


def run_settings(quick: bool, random_state, folder: Path | None) -> dict:
    """The settings a protocol's result reports: ``quick``, ``random_state``, ``data_dir``."""
    return {"quick": bool(quick), "random_state": random_state, "data_dir": None if folder is None else str(folder)}


@dataclass(frozen=True)
class SimulatedAndReal:
    """What a protocol scored on simulated cases and on recorded faults found (the base of its result).

    Attributes
    ----------
    simulated : polars.DataFrame
        One row per simulated case (or more: the protocol's ``evaluate_simulated``).
    real : polars.DataFrame
        One row per recorded fault (its ``evaluate_real``); empty when the data was absent.
    scores : dict of str to float
        In [0, 1], higher is better; the protocol's result names them.
    notes : tuple of str
        What was skipped and why.
    settings : dict
        :func:`run_settings`.
    """

    simulated: pl.DataFrame
    real: pl.DataFrame
    scores: dict
    notes: tuple = ()
    settings: dict = field(default_factory=dict)

    def _head(self) -> dict:
        """The JSON document's first keys: settings, scores and notes."""
        return {"settings": dict(self.settings), "scores": dict(self.scores), "notes": list(self.notes)}
