"""``import tracesleuth as ts``: the verbs a notebook user reaches for, light to import, each the
real thing (the same result as the estimator it calls)."""

import subprocess
import sys

import pytest

import tracesleuth as ts
from tracesleuth.analyses import ANALYSES
from tracesleuth.errors import ParameterError

VERBS = ("read_spans", "read_logs", "open_store", "trace_table", "patterns", "compare", "localize", "paths",
         "annotate", "diagnose", "write_report")


def test_the_front_door_lists_every_verb_and_estimator():
    names = set(dir(ts))
    assert set(VERBS) <= names
    assert {type(spec.load("estimator")()).__name__ for spec in ANALYSES} <= names
    for verb in VERBS:
        assert callable(getattr(ts, verb)) and getattr(ts, verb).__doc__, verb


@pytest.mark.parametrize("module", ["tracesleuth", "tracesleuth.cli.app"])
def test_importing_tracesleuth_imports_nothing_heavy(module):
    """The package and the command line load no numerical library until a command runs: ``--help``
    and a usage mistake answer at once (the CLI took 2.7 s of CPU to print its help when the
    diagnose command imported its reader at module level)."""
    heavy = ("polars", "sklearn", "scipy", "pandas", "pyarrow", "numpy", "dask", "plotly")
    code = f"import sys, {module}; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["patterns", "localize", "paths", "annotate", "compare"])
def test_each_verb_is_a_thin_call_of_its_estimator(name):
    """The verb with settings gives the result the estimator with the same settings gives."""
    spec = next(s for s in ANALYSES if s.name == name)
    case = spec.load("planted")(0)
    verb = getattr(ts, name)
    by_verb = verb(*case.args, **case.settings)
    by_class = spec.load("estimator")(**case.settings).fit(*case.args)
    assert type(by_verb) is type(by_class)
    assert by_verb.result_.to_dict() == by_class.result_.to_dict()


def test_write_report_of_fitted_verbs(tmp_path):
    spec = next(s for s in ANALYSES if s.name == "localize")
    case = spec.load("planted")(0)
    fitted = ts.localize(*case.args, **case.settings)
    table = case.args[0]
    path = ts.write_report(fitted, spans=None, table=table, output=tmp_path / "r.html")
    assert path.exists() and "Where it went wrong" in path.read_text(encoding="utf-8")
    with pytest.raises(ParameterError, match="not a fitted analysis"):
        ts.write_report(object(), spans=None, table=table, output=tmp_path / "x.html")


@pytest.mark.slow  # an ingest of three recorded minutes, then the diagnosis: ~10 s
def test_diagnose_reads_a_store_around_the_moment(tmp_path, shared_data):
    """The verb on a store's directory and a moment as text: the store's spans and logs around it."""
    from tracesleuth.ingest import ingest

    day = shared_data / "nezha" / "onlineboutique" / "2022-08-22" / "trace"
    ingest([str(day / f"05_2{m}_trace.csv.gz") for m in (7, 8, 9)], tmp_path / "store")
    from tracesleuth.analyses.diagnose import Diagnosis
    from tracesleuth.analyses.diagnose.telemetry import read_store
    from tracesleuth.units import parse_instant

    found = ts.diagnose(tmp_path / "store", at="2022-08-22T05:28:36")
    at = parse_instant("2022-08-22T05:28:36", "at")
    direct = Diagnosis(at=at).fit(*read_store(tmp_path / "store", around_ns=(at, at)))
    assert found.result_.services and found.result_.to_dict() == direct.result_.to_dict()
    with pytest.raises(ParameterError, match="not a span store"):
        ts.diagnose(tmp_path, at="2022-08-22T05:28:36")
