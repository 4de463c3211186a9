"""The recorded faults of ../shared/data/nezha (TrainTicket, OnlineBoutique) and their trace windows.

Shared by the analyses' real-data evaluations (``compare``, ``localize``). The data (MIT licence)
holds one-minute trace files ``trace/HH_MM_trace.csv.gz`` and, per system, a fault list of the
injected faults (``inject_time``, ``inject_type``, ``inject_pod``); see the data's README.

Windows of a fault injected during minute ``HH:MM``:

* **inject-minute file** ``HH_MM``: the 60 s ending at the inject minute, wholly before
  ``inject_time``;
* **problem files** ``HH_MM`` + 1 and + 2 minutes: the fault's first two minutes;
* **baseline files**: TrainTicket's fault-free minute (``fault_free/08_50``); OnlineBoutique has
  none: its inject-minute file.

A second protocol, :func:`adjacent_baseline`, takes the inject-minute file as the baseline for
both systems: the minute just before the fault, so no drift of hours lies between the periods
(TrainTicket's fault-free minute is at 08:50 and its faults run until 15:42), at the price of a
thin baseline (one minute) that can still hold the end of an earlier fault.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path

from ..errors import ParameterError

__all__ = ["SYSTEMS", "RealFault", "adjacent_baseline", "default_data_dir", "list_faults", "read_windows"]

_FOLDERS = {
    "trainticket": ("trainticket/2023-01-29", "2023-01-29-fault_list.json"),
    "onlineboutique": ("onlineboutique/2022-08-22", "2022-08-22-fault_list.json"),
}
#: The systems of the data, in the order evaluations list them.
SYSTEMS = tuple(_FOLDERS)
_TRAINTICKET_BASELINE = "trainticket/2023-01-29/fault_free/08_50_trace.csv.gz"
_POD_SUFFIX = re.compile(r"-[0-9a-f]{8,10}-[0-9a-z]{5}$")


@dataclass(frozen=True)
class RealFault:
    """One injected fault of the Nezha fault lists, with its files.

    Attributes
    ----------
    system : {"trainticket", "onlineboutique"}
    inject_time : str
        ``"YYYY-MM-DD HH:MM:SS"``, wall clock = span times rendered in UTC (data README).
    fault_type : str
        ``return``, ``exception``, ``cpu_contention``, ``cpu_consumed`` or ``network_delay``.
    service : str
        ``inject_pod`` without its Kubernetes ``-<replicaset>-<pod>`` suffix.
    problem_files : tuple of Path
        The two files after the inject minute.
    baseline_files : tuple of Path
    inject_file : Path
        The inject-minute file (before the fault).
    pod : str
        ``inject_pod`` as listed: the instance the fault was injected into.
    """

    system: str
    inject_time: str
    fault_type: str
    service: str
    problem_files: tuple
    baseline_files: tuple
    inject_file: Path | None = None
    pod: str = ""


def adjacent_baseline(fault: RealFault) -> RealFault:
    """``fault`` with its inject-minute file as the baseline (the module docstring's second protocol).

    Examples
    --------
    >>> f = RealFault("trainticket", "2023-01-29 13:31:54", "cpu_contention", "ts-contacts-service",
    ...               (Path("13_32"), Path("13_33")), (Path("fault_free/08_50"),), Path("13_31"))
    >>> [p.name for p in adjacent_baseline(f).baseline_files]
    ['13_31']
    """
    return replace(fault, baseline_files=(fault.inject_file,))


def default_data_dir() -> Path | None:
    """``../shared/data/nezha`` beside the repository (found from this file), or None."""
    for parent in Path(__file__).resolve().parents:
        candidate = parent.parent / "shared" / "data" / "nezha"
        if (parent / "pyproject.toml").is_file() and candidate.is_dir():
            return candidate
    return None


def list_faults(data_dir, systems=SYSTEMS) -> list[RealFault]:
    """The faults of the fault lists whose windows exist, in time order.

    Parameters
    ----------
    data_dir : path
        The ``nezha`` folder.
    systems : sequence of str, default=SYSTEMS

    Returns
    -------
    list of RealFault
        Faults whose inject-minute, problem and baseline files all exist (faults without trace
        files upstream are left out).

    Raises
    ------
    ParameterError
        An unknown system.
    """
    data_dir = Path(data_dir)
    out = []
    for system in systems:
        if system not in _FOLDERS:
            raise ParameterError(f"The 'systems' must be among {', '.join(SYSTEMS)}. Got {system!r} instead.")
        folder, fault_list = _FOLDERS[system]
        listing = data_dir / folder / fault_list
        if not listing.is_file():
            continue
        entries = [f for group in json.loads(listing.read_text()).values() for f in group]
        for f in sorted(entries, key=lambda f: f["inject_time"]):
            t = datetime.strptime(f["inject_time"], "%Y-%m-%d %H:%M:%S")
            minute = lambda k: data_dir / folder / "trace" / f"{(t + timedelta(minutes=k)):%H_%M}_trace.csv.gz"  # noqa: E731
            problem = (minute(1), minute(2))
            baseline = (data_dir / _TRAINTICKET_BASELINE,) if system == "trainticket" else (minute(0),)
            if not all(p.is_file() for p in problem + baseline + (minute(0),)):
                continue
            out.append(RealFault(system, f["inject_time"], f["inject_type"], _POD_SUFFIX.sub("", f["inject_pod"]),
                                 problem, baseline, minute(0), f["inject_pod"]))
    return out


@lru_cache(maxsize=8)
def read_windows(files: tuple):
    """The spans of some of the data's files (Nezha CSV mapping), cached (8 sets).

    Parameters
    ----------
    files : tuple of Path

    Returns
    -------
    pyarrow.Table
        Spans in :data:`tracesleuth.schema.SPAN_SCHEMA`.
    """
    from ..io import read_spans

    return read_spans([str(f) for f in files], mapping="nezha").spans
