"""Headless Chromium for the report tests: find it, run it.

The browser is Debian's ``chromium`` package (``/usr/bin/chromium``), or any ``chromium`` /
``chromium-browser`` on the PATH. The tests never install it: ``.ci/run`` does, when it is missing
(``apt-get install -y chromium``); without one, :func:`find_chromium` says so and the tests skip.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Where Debian's package puts the browser; looked for first.
CHROMIUM = Path("/usr/bin/chromium")
#: Other names a Chromium goes by on the PATH.
CHROMIUM_NAMES = ("chromium", "chromium-browser")
#: Seconds allowed for one browser run (a bound on a hang, not a timing the tests assert).
BROWSER_TIMEOUT_S = 60
#: Flags for a quiet, offline, sandbox-free headless run (the tests run as root in a container).
HEADLESS_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
    "--enable-logging=stderr", "--v=0",
)


def find_chromium() -> tuple[Path | None, str]:
    """Path of an installed Chromium.

    Returns
    -------
    path : Path or None
        The browser, or None when none is installed.
    how : str
        Where it was found, or why there is none (the skip reason).
    """
    if CHROMIUM.exists():
        return CHROMIUM, f"found at {CHROMIUM}"
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found), f"found on the PATH at {found}"
    return None, (f"no Chromium installed (neither {CHROMIUM} nor {' / '.join(CHROMIUM_NAMES)} on the PATH); "
                  "install it with 'apt-get install -y chromium', as .ci/run does")


@dataclass(frozen=True)
class BrowserRun:
    """What one headless run produced."""

    dom: str
    stderr: str
    returncode: int

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
    done = subprocess.run([*args, page.resolve().as_uri()], capture_output=True, text=True,
                          timeout=BROWSER_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return BrowserRun(dom=done.stdout, stderr=done.stderr, returncode=done.returncode)


if __name__ == "__main__":  # pragma: no cover - manual use: python tests/report/browser_support.py
    print(find_chromium())
