"""Every command README.md's quick start shows, then every example of the commands' ``--help``
(:data:`tracesleuth.cli._examples.EXAMPLES`), runs as written on ../shared/data and examples/.

The commands run in order, from a directory laid out as the repository's root (``examples/`` in
it, ``../shared`` beside it), with the block's variable assignments (``TT=``, ``OB=``) before each.
``bash`` reads each command as written (variables, quotes, globs) and gives back its words; a
``tracesleuth ...`` command then runs in this process through :func:`tracesleuth.cli.main`, the
function the ``tracesleuth`` script calls (the script itself, ``python -m tracesleuth`` and their
exit codes are run as processes by tests/cli), so the libraries are imported once, not once per
command (2 s of a command's 2-3 s). Left out, each for the reason given in :data:`ELSEWHERE`:
commands that run for minutes or serve until stopped, which their own tests run.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tracesleuth.cli._examples import EXAMPLES

ROOT = Path(__file__).resolve().parents[1]

#: ``dask``: some of the examples start a LocalCluster (``--scheduler local``), so this runs on the
#: worker that runs the other tests of many processes (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.real_data, pytest.mark.dask]

#: Commands the quick start shows that this test does not run, and where they are run instead.
ELSEWHERE = {
    "tracesleuth evaluate ": "an evaluation runs for minutes: tests/evaluation and each analysis's evaluation tests",
    "python benchmarks/": "a benchmark (~12 min of live services): run by hand, its figures in the issue notes",
    "tracesleuth collect ": "serves until stopped: tests/collector runs it",
    "tracesleuth demo": "live services for minutes: tests/demo (the live tier) runs them",
    "--scheduler tcp://": "needs a running Dask scheduler at that address: tests/scale runs the same on a LocalCluster",
}
#: Commands whose documented answer is exit 1 (a failed performance test), not a mistake.
EXIT_ONE_ALLOWED = ("--fail-under",)


def quick_start() -> tuple[list[str], list[str]]:
    """The variable assignments and the commands (continuation lines joined) of the quick start."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quick start\s*```bash\n(.*?)```", text, re.S)
    assert block, "README.md has no ```bash block under '## Quick start'"
    variables, commands, pending = [], [], ""
    for line in block.group(1).splitlines():
        line = pending + line.strip() if pending else line.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if re.match(r"^[A-Z_]+=\S+$", line):
            variables.append(line)
        elif line.startswith("tracesleuth ") or line.startswith("python"):
            commands.append(re.sub(r"\s+#.*$", "", line))
    return variables, commands


VARIABLES, COMMANDS = quick_start()


def test_the_quick_start_is_found():
    assert any(c.startswith("tracesleuth ingest") for c in COMMANDS) and len(COMMANDS) > 30


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, shared_data):
    """A directory laid out as the repository's root: examples/ in it, ../shared beside it."""
    base = tmp_path_factory.mktemp("readme")
    (base / "shared").symlink_to(shared_data.parent, target_is_directory=True)
    repo = base / "repo"
    repo.mkdir()
    (repo / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return repo


def _expanded(command: str) -> str:
    """``command`` with the block's variables written out (``$TT/trace`` -> ``../shared/...``)."""
    for name, value in (v.split("=", 1) for v in VARIABLES):
        command = command.replace(f"${name}", value)
    return command


def _elsewhere(command: str) -> str | None:
    return next((why for key, why in ELSEWHERE.items() if key in command), None)


def _words(command: str, workdir: Path) -> list[str]:
    """The words ``bash`` makes of ``command`` in ``workdir`` (the block's variables set): what a
    program started by it would get as its arguments."""
    script = "; ".join([*VARIABLES, f"set -- {command}", 'printf "%s\\0" "$@"'])
    done = subprocess.run(["bash", "-c", script], cwd=workdir, capture_output=True, text=True, check=True)
    return done.stdout.split("\0")[:-1]


def test_every_quick_start_and_help_example_runs_as_written(workdir, monkeypatch, capsys):
    """One run in the README's order (later commands read what earlier ones wrote: store/, tt.yaml),
    then the help's examples the README does not show."""
    from tracesleuth.cli import main

    monkeypatch.chdir(workdir)
    failures, ran = [], 0
    shown = {_expanded(c) for c in COMMANDS}
    helps = [e for examples in EXAMPLES.values() for e in examples if e not in shown]
    for command in dict.fromkeys([*COMMANDS, *helps]):
        if _elsewhere(command) is not None:
            continue
        words = _words(command, workdir)
        assert words[0] == "tracesleuth", f"not a tracesleuth command (add it to ELSEWHERE with a reason): {command}"
        code = main(words[1:])
        captured = capsys.readouterr()
        ran += 1
        allowed = (0, 1) if any(flag in command for flag in EXIT_ONE_ALLOWED) else (0,)
        if code not in allowed:
            failures.append(f"{command}\n  exit {code}: {(captured.err or captured.out).strip()[-600:]}")
    assert not failures, f"{len(failures)} of {ran} README commands failed:\n" + "\n".join(failures)
    assert ran >= 50
