"""Child processes of a demo run: started in one process group, stopped in order, never left behind.

Every child is started in a process group of its own (the first child's; not the terminal's
foreground group, so a Ctrl-C reaches the supervisor only, which then stops the children in
order). :meth:`Supervisor.close` sends SIGTERM to whatever is still running, waits, then sends
SIGKILL to the group; an ``atexit`` hook does the same if the interpreter exits without closing;
and each child watches its parent (:func:`._protocol.watch_parent`), so even a supervisor killed
by SIGKILL leaves nothing running.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TraceSleuthError


class DemoError(TraceSleuthError):
    """The demo could not run: a process did not start, stopped early or did not answer (the
    message names which, and ends with the last lines of its log)."""


class DemoInterrupted(KeyboardInterrupt):
    """The demo was stopped by a signal (SIGINT, SIGTERM or SIGHUP); every child was stopped.

    Attributes
    ----------
    signum : int
    """

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


@dataclass
class Child:
    """One child process: its name, the process, its log file, and its stdout events (JSON lines)
    when it reports some."""

    name: str
    process: subprocess.Popen
    log_path: Path
    events: queue.Queue | None = None
    reader: threading.Thread | None = None
    returncode: int | None = None
    expected_exit: bool = False
    _log: object = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


class Supervisor:
    """Start, watch and stop the child processes of one demo run.

    Parameters
    ----------
    logs_dir : Path
        Each child's stderr (and stdout, when it reports no events) goes to ``<name>.log`` there.
    env : dict
        The children's environment.
    """

    def __init__(self, logs_dir, *, env: dict):
        self.logs_dir = Path(logs_dir)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.env = env
        self.children: list[Child] = []
        self.pgid: int | None = None
        self._closed = False
        atexit.register(self._kill_now)

    # -- starting --------------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str], *, pass_fds: tuple = (), events: bool = False) -> Child:
        """Start ``argv`` as child ``name`` in the run's process group.

        With ``events``, its stdout is read line by line as JSON events (:meth:`next_event`).
        """
        if self._closed:
            raise DemoError("the demo's processes were already stopped")
        log_path = self.logs_dir / f"{name}.log"
        log = open(log_path, "ab")
        try:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if events else log, stderr=log,
                env=self.env, pass_fds=pass_fds, close_fds=True,
                process_group=0 if self.pgid is None else self.pgid)
        except OSError as e:
            log.close()
            raise DemoError(f"cannot start the demo's {name} process: {e}") from e
        except BaseException:
            log.close()
            raise
        if self.pgid is None:
            self.pgid = process.pid
        child = Child(name, process, log_path, _log=log)
        if events:
            child.events = queue.Queue()
            child.reader = threading.Thread(target=self._read_events, args=(child,), name=f"{name}-events",
                                            daemon=True)
            child.reader.start()
        self.children.append(child)
        return child

    @staticmethod
    def _read_events(child: Child) -> None:
        for raw in child.process.stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "output", "text": line}
            child.events.put(event if isinstance(event, dict) else {"event": "output", "text": line})
        child.events.put({"event": "eof"})

    # -- watching --------------------------------------------------------------------------------

    def check(self) -> None:
        """Raise DemoError if a child stopped when it should not have."""
        for c in self.children:
            if not c.expected_exit and c.process.poll() is not None:
                raise DemoError(f"the demo's {c.name} process (pid {c.pid}) exited with code {c.process.returncode} "
                                f"before the end of the run; its log {c.log_path} ends with:\n{c.log_tail()}")

    def next_event(self, child: Child, timeout_s: float) -> dict | None:
        """The next event of ``child``, or None after ``timeout_s``."""
        try:
            return child.events.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def wait_event(self, child: Child, event: str, timeout_s: float) -> dict:
        """Wait for ``child``'s event named ``event``; DemoError when it exits or time runs out."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DemoError(f"the demo's {child.name} process did not report {event!r} within {timeout_s:g} s; "
                                f"its log {child.log_path} ends with:\n{child.log_tail()}")
            ev = self.next_event(child, min(left, 0.5))
            if ev is not None and ev.get("event") == event:
                return ev
            if ev is not None and ev.get("event") == "eof":
                child.process.wait(timeout=5)
                raise DemoError(f"the demo's {child.name} process exited (code {child.process.returncode}) before "
                                f"reporting {event!r}; its log {child.log_path} ends with:\n{child.log_tail()}")
            self.check()

    # -- stopping --------------------------------------------------------------------------------

    def stop(self, children: list[Child], *, timeout_s: float) -> None:
        """SIGTERM ``children`` (a graceful stop), wait up to ``timeout_s``, then SIGKILL them."""
        for c in children:
            c.expected_exit = True
            if c.running():
                _signal(c.process, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for c in children:
            try:
                c.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(c.process, signal.SIGKILL)
                c.process.wait(timeout=10)
            self._reaped(c)

    def close(self, *, timeout_s: float = 5.0) -> None:
        """Stop every child still running (SIGTERM, then SIGKILL to the whole group), reap them all.

        The first child started (the collector) is stopped last, so that the others can still
        export their spans to it while they stop; each wave gets ``timeout_s``.
        """
        if self._closed:
            return
        first = self.children[:1]
        self.stop([c for c in self.children[1:] if c.running()], timeout_s=timeout_s)
        self.stop([c for c in first if c.running()], timeout_s=timeout_s)
        self._kill_group()
        for c in self.children:
            if c.returncode is None:
                c.process.wait(timeout=10)
                self._reaped(c)
        self._closed = True
        atexit.unregister(self._kill_now)

    def _kill_group(self) -> None:
        # Only while a child of ours is alive is the group certainly still ours.
        if self.pgid is not None and any(c.running() for c in self.children):
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _kill_now(self) -> None:
        """atexit: the interpreter exits with children still running."""
        if not self._closed:
            for c in self.children:
                if c.running():
                    _signal(c.process, signal.SIGKILL)
            self._kill_group()
            for c in self.children:
                try:
                    c.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass

    def _reaped(self, c: Child) -> None:
        c.returncode = c.process.returncode
        if c._log is not None:
            c._log.close()
            c._log = None
        if c.reader is not None:
            c.reader.join(timeout=5)
        if c.process.stdout is not None:
            c.process.stdout.close()

    def cpu_seconds(self, children: list[Child] | None = None) -> float | None:
        """CPU time (user + system) the running ``children`` (default: all) used so far, in seconds.

        Read from ``/proc/<pid>/stat`` (Linux); None when it cannot be read. A child that has
        exited counts for nothing here.
        """
        tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0
        total = 0.0
        for c in self.children if children is None else children:
            if not c.running():
                continue
            try:
                stat = Path(f"/proc/{c.pid}/stat").read_text()
            except OSError:
                return None
            fields = stat[stat.rindex(")") + 2:].split()
            total += (int(fields[11]) + int(fields[12])) / tick      # utime, stime (proc(5))
        return total if tick else None

    @property
    def pids(self) -> list[int]:
        """Pids of every child started."""
        return [c.pid for c in self.children]


def _signal(process: subprocess.Popen, sig: int) -> None:
    try:
        process.send_signal(sig)
    except ProcessLookupError:
        pass


@contextmanager
def termination_raises():
    """While inside, SIGTERM and SIGHUP raise :class:`DemoInterrupted` in the main thread (as
    SIGINT raises KeyboardInterrupt), so that clean-up code runs; no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise DemoInterrupted(signum)

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)
