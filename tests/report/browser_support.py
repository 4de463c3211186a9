"""Headless Chromium for the report tests: find it, install Debian's package when missing, run it.

The browser is Debian's ``chromium`` package (``/usr/bin/chromium``). When it is absent and the
tests run as root, :func:`ensure_chromium` installs it with ``apt-get`` (refreshing the package
lists once if the first attempt fails, as on a fresh machine); when that is impossible it returns
the reason, and the caller skips with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
#: Seconds allowed for one apt-get step (the package and its dependencies are ~100 MB).
INSTALL_TIMEOUT_S = 900
#: Seconds allowed for one browser run.
BROWSER_TIMEOUT_S = 60
#: Flags for a quiet, offline, sandbox-free headless run (the tests run as root in a container).
HEADLESS_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
    "--enable-logging=stderr", "--v=0",
)


def _apt(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run(["apt-get", *args], capture_output=True, text=True, env=env, timeout=INSTALL_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


def ensure_chromium() -> tuple[Path | None, str]:
    """Path of a usable Chromium, installing Debian's ``chromium`` when it is missing.

    Returns
    -------
    path : Path or None
        The browser, or None when it is missing and could not be installed.
    how : str
        ``"present"``, ``"installed in N s"``, or why it is unavailable (the skip reason).
    """
    if CHROMIUM.exists():
        return CHROMIUM, "present"
    if shutil.which("apt-get") is None:
        return None, "chromium is missing and apt-get is not available to install it"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return None, "chromium is missing and installing it with apt-get needs root"
    t0 = time.perf_counter()
    try:
        done = _apt("install", "-y", "--no-install-recommends", "chromium")
        if done.returncode != 0:  # stale or missing package lists (a fresh machine): refresh once
            _apt("update")
            done = _apt("install", "-y", "--no-install-recommends", "chromium")
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"installing chromium with apt-get failed: {e}"
    if done.returncode != 0 or not CHROMIUM.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return None, f"'apt-get install -y chromium' failed (exit {done.returncode}): {' | '.join(tail)}"
    return CHROMIUM, f"installed in {time.perf_counter() - t0:.0f} s"


@dataclass(frozen=True)
class BrowserRun:
    """What one headless run produced."""

    dom: str
    stderr: str
    seconds: float

    def console_messages(self) -> list[str]:
        """Lines of the browser log holding a console message or an uncaught JavaScript error.

        With ``--enable-logging=stderr`` Chromium logs every console message of the page, errors
        and Content-Security-Policy violations included, as ``[...:INFO:CONSOLE:<line>] "text",
        source: <url>``.
        """
        return [line for line in self.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def run_headless(browser: Path, page: Path, user_data_dir: Path, *, screenshot: Path | None = None,
                 window: str = "1280,2400", virtual_time_budget_ms: int = 5000) -> BrowserRun:
    """Load ``page`` in headless Chromium; dump its DOM (or take a screenshot).

    Raises
    ------
    subprocess.TimeoutExpired
        When the browser runs longer than :data:`BROWSER_TIMEOUT_S`.
    """
    args = [str(browser), *HEADLESS_FLAGS, f"--user-data-dir={user_data_dir}", f"--window-size={window}",
            f"--virtual-time-budget={virtual_time_budget_ms}"]
    args.append(f"--screenshot={screenshot}" if screenshot is not None else "--dump-dom")
    t0 = time.perf_counter()
    done = subprocess.run([*args, page.resolve().as_uri()], capture_output=True, text=True,
                          timeout=BROWSER_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return BrowserRun(dom=done.stdout, stderr=done.stderr, seconds=time.perf_counter() - t0)


if __name__ == "__main__":  # pragma: no cover - manual use: python tests/report/browser_support.py
    print(ensure_chromium())
