"""Helpers of the demo tests: finding the processes of a run through /proc."""

from __future__ import annotations

import os
import time
from pathlib import Path

PROC = Path("/proc")


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """``(pid, command line)`` of every live process (not this one) whose command line contains
    ``text``. Zombies have an empty command line and are not listed (see :func:`zombie_children`)."""
    out = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            out.append((int(entry.name), cmd.strip()))
    return out


def zombie_children(pid: int | None = None) -> list[int]:
    """Children of ``pid`` (default: this process) that exited and were never reaped."""
    pid = os.getpid() if pid is None else pid
    out = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z" and int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def wait_until_gone(text: str, timeout_s: float) -> list[tuple[int, str]]:
    """Wait up to ``timeout_s`` for every process mentioning ``text`` to exit; return the rest."""
    deadline = time.monotonic() + timeout_s
    left = processes_mentioning(text)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_mentioning(text)
    return left


def wait_for(predicate, timeout_s: float, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()
