import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (a CI run must not turn red on a draw the
# previous run did not make). To search wider, run repeatedly with HYPOTHESIS_PROFILE=explore
# (random draws); a failure prints the @reproduce_failure blob to pin it as a regression test.
# Under pytest-xdist, one thread of numerical work per worker (the libraries' pools are as large
# as the machine: two workers of two threads each on two cores kept 4 threads runnable, and the
# live demo, which holds beside one CPU-bound process, measured a load of 3.1 and called its run
# overloaded). Set before any test module imports numpy or polars; a variable already set is kept.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS"):
        os.environ.setdefault(_var, "1")

settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "golden"))

from tiers import SLOW  # noqa: E402

TESTS = Path(__file__).resolve().parent

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

#: Markers a test gets from a fixture it uses, directly or through another fixture (the markers
#: are described in pyproject.toml): reading ../shared/data is ``real_data``; a headless browser
#: is ``browser``, slow by definition as the live demo and Dask are (``live`` is set by
#: the demo's modules, ``dask`` by the scale-out modules, ``slow`` by the measured list in tiers.py).
FIXTURE_MARKERS = {"shared_data": ("real_data",), "chromium": ("browser", "slow")}
#: Markers that make a test slow whatever it measured: processes to start (the live demo's, a
#: browser, a Dask LocalCluster's workers: 5-15 s before the first check).
SLOW_BY_DEFINITION = ("live", "browser", "dask")
#: Markers of tests that run many processes at once (the live demo's services; a LocalCluster's
#: workers and its session-wide cluster): under pytest-xdist (pyproject's addopts: ``-n logical
#: --dist loadscope``) they all run on one worker, one after another, and first (the longest unit of
#: work; ``--no-loadscope-reorder`` keeps this order), so that the live demo, whose tests hold beside
#: one CPU-bound process (tests/demo/test_live.py), never shares the machine with a cluster or
#: another demo, and the cluster is started once. Every other test is grouped by its module, so a
#: module's shared fixtures are built once (:func:`pytest_xdist_make_scheduler`).
ONE_WORKER = ("live", "dask")
#: The modules whose tests carry those markers (the scheduler, in pytest-xdist's controller, sees
#: node ids only, not markers; the collection checks that this list is complete).
ONE_WORKER_MODULES = frozenset({"demo/test_live.py", "demo/test_live_faults.py", "scale/test_dask_analyses.py",
                                "scale/test_dask_cli.py", "scale/test_dask_table.py", "test_readme.py"})
#: The work unit of those modules.
PROCESSES = "processes"


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the markers are added here
def pytest_collection_modifyitems(config, items):
    modules, together = {}, set()
    for item in items:
        module = item.path.resolve().relative_to(TESTS).as_posix()
        if module in SLOW:
            modules[module] = item.module
            if getattr(item, "originalname", item.name) in SLOW[module]:
                item.add_marker("slow")
        used = set(getattr(item, "fixturenames", ()))
        for fixture, markers in FIXTURE_MARKERS.items():
            if fixture in used:
                for name in markers:
                    item.add_marker(name)
        if any(item.get_closest_marker(m) for m in SLOW_BY_DEFINITION) and not item.get_closest_marker("slow"):
            item.add_marker("slow")
        if any(item.get_closest_marker(m) for m in ONE_WORKER):
            together.add(module)
    # The order the workers take the modules in (``--no-loadscope-reorder``): the process-heavy unit
    # first, then the modules holding slow tests, then the rest, so that the run ends on short
    # modules and neither worker waits long for the other (longest work first).
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (item.path.resolve().relative_to(TESTS).as_posix() not in ONE_WORKER_MODULES,
                                 item.path not in slow))  # stable
    stale = [f"{module}::{name}" for module, mod in modules.items() for name in SLOW[module] if not hasattr(mod, name)]
    if stale:
        raise pytest.UsageError(f"tests/tiers.py lists tests that do not exist (renamed?): {', '.join(sorted(stale))}")
    if together - ONE_WORKER_MODULES:
        raise pytest.UsageError(f"tests marked {' or '.join(ONE_WORKER)} in modules missing from ONE_WORKER_MODULES "
                                f"(tests/conftest.py): {', '.join(sorted(together - ONE_WORKER_MODULES))}")


@pytest.hookimpl(optionalhook=True)  # (a hook of pytest-xdist: unknown without it, -p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` with this suite's work units: the modules of :data:`ONE_WORKER_MODULES`
    as one (:data:`PROCESSES`), every other module as its own. (pytest-xdist's ``loadgroup`` marks
    groups by renaming node ids, which pytest >= 9 ignores: every test became its own unit, a
    module's fixtures were built once per worker, and two live demos ran at once.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            relative = module[len("tests/"):] if module.startswith("tests/") else module
            return PROCESSES if relative in ONE_WORKER_MODULES else module

    return ModuleScheduling(config, log)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not beside the repository")
    return SHARED_DATA
