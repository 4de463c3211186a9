"""The same API checks on every registered analysis (as scikit-learn's ``test_common.py``).

Each analysis of :data:`tracesleuth.analyses.ANALYSES` must: clone, leave its settings untouched
by ``fit``, give the same result for the same seed, give a JSON-safe ``to_dict``, keep its notes as
records (kind, numbers, words), keep its previous
fit whole when a refit fails, refuse bad settings with a ParameterError naming the setting, reach
its quality floor on its planted case, build its report sections without refitting, answer
``tracesleuth NAME --help`` and run its evaluation protocol.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
from sklearn.base import clone

from tracesleuth.analyses import ANALYSES, AnalysisResult, ReportContext, get_analysis
from tracesleuth.analyses._contract import Analysis, check_settings
from tracesleuth.errors import ParameterError, TraceSleuthError

NAMES = [spec.name for spec in ANALYSES]


@pytest.fixture(scope="module", params=NAMES)
def fitted(request):
    """(spec, planted case, fitted estimator) of each analysis."""
    spec = get_analysis(request.param)
    case = spec.load("planted")(0)
    est = spec.load("estimator")(**case.settings).fit(*case.args)
    return spec, case, est


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


def test_registry_names_are_unique_and_found():
    assert len(set(NAMES)) == len(NAMES)
    for name in NAMES:
        assert get_analysis(name).name == name
    with pytest.raises(ParameterError, match="analyses are"):
        get_analysis("no-such-analysis")


def test_estimator_is_an_analysis_with_declared_settings(fitted):
    spec, case, est = fitted
    cls = spec.load("estimator")
    assert issubclass(cls, Analysis)
    params = cls().get_params()
    assert set(cls._constraints) <= set(params), "a constraint names no setting"
    assert "random_state" in params, "every analysis takes a random_state"
    check_settings(cls())  # the defaults are allowed


def test_clone_and_set_params(fitted):
    spec, case, est = fitted
    twin = clone(est)
    assert type(twin) is type(est) and not hasattr(twin, "result_")
    assert all(_same(v, est.get_params()[k]) for k, v in twin.get_params().items())
    twin.set_params(random_state=7)
    assert twin.random_state == 7 and est.random_state == case.settings.get("random_state")


def test_fit_leaves_settings_untouched_and_returns_self(fitted):
    spec, case, _ = fitted
    est = spec.load("estimator")(**case.settings)
    before = copy.deepcopy(est.get_params())
    assert est.fit(*case.args) is est
    assert all(_same(v, before[k]) for k, v in est.get_params().items())


def test_same_seed_same_result(fitted):
    spec, case, est = fitted
    again = spec.load("estimator")(**case.settings).fit(*case.args)
    assert again.result_.to_dict() == est.result_.to_dict()


def test_result_follows_the_protocol(fitted):
    spec, case, est = fitted
    res = est.result_
    assert isinstance(res, AnalysisResult)
    json.dumps(res.to_dict())
    assert res.to_frame().height >= 0
    assert isinstance(res.describe(), str) and res.describe()
    with pytest.raises(AttributeError):  # frozen
        res.__setattr__(next(iter(res.__dataclass_fields__)), None)


def test_notes_are_records_with_a_kind_and_words(fitted):
    import importlib

    from tracesleuth.analyses._notes import Note

    spec, case, est = fitted
    res = est.result_
    assert isinstance(res.notes, tuple) and all(isinstance(n, Note) for n in res.notes)
    doc = json.loads(json.dumps(res.to_dict()))["notes"]
    assert [d["kind"] for d in doc] == [n.kind for n in res.notes]
    assert all({"kind", "words"} <= set(d) and d["words"] == str(n) == n.describe() for n, d in zip(res.notes, doc))
    assert all(res.notes_of(n.kind) and all(m.kind == n.kind for m in res.notes_of(n.kind)) for n in res.notes)
    # Every note the analysis can emit: its own kind, a docstring saying which decision it records.
    package = ".".join(type(est).__module__.split(".")[:3])  # tracesleuth.analyses.<family>
    module = importlib.import_module(f"{package}.notes")
    kinds = [c.kind for c in vars(module).values()
             if isinstance(c, type) and issubclass(c, Note) and c.__module__ == module.__name__ and "kind" in vars(c)]
    assert kinds and len(set(kinds)) == len(kinds) and "note" not in kinds
    assert all(c.__doc__ for c in vars(module).values() if isinstance(c, type) and issubclass(c, Note))


def test_quality_floor_on_planted_data(fitted):
    spec, case, est = fitted
    assert case.score(est) >= case.floor


def test_bad_setting_names_the_setting_and_keeps_the_previous_fit(fitted):
    spec, case, est = fitted
    est = clone(est).fit(*case.args)
    state = {k: v for k, v in vars(est).items() if k.endswith("_")}
    name = next(iter(est._constraints))
    est.set_params(**{name: object()})
    with pytest.raises(ParameterError, match=repr(name)):
        est.fit(*case.args)
    assert all(vars(est)[k] is v for k, v in state.items())


def test_failed_refit_on_bad_input_keeps_the_previous_fit(fitted):
    spec, case, est = fitted
    est = clone(est).fit(*case.args)
    state = {k: v for k, v in vars(est).items() if k.endswith("_")}
    first = case.args[0]
    if hasattr(first, "frame"):  # a TraceTable: the same with no request
        empty = dataclasses.replace(first, frame=first.frame.head(0))
    else:
        empty = first.head(0)
    with pytest.raises(TraceSleuthError):
        est.fit(empty, *case.args[1:])
    assert {k for k in vars(est) if k.endswith("_")} == set(state)
    assert all(vars(est)[k] is v for k, v in state.items())


def test_report_sections_do_not_refit(fitted, monkeypatch):
    spec, case, est = fitted
    from tracesleuth.evaluation.eshopper import simulate_eshopper
    from tracesleuth.model import build_trace_table

    session = simulate_eshopper(n_requests=200, random_state=3)
    table = build_trace_table(session.spans)
    if spec.reads_store:  # it reads spans over time (an incident), not a table: its planted case
        model = spec.load("estimator")(**case.settings).fit(*case.args)
    elif spec.needs_baseline:  # the second half of the session against the first
        import polars as pl

        spans = pl.from_arrow(session.spans) if not isinstance(session.spans, pl.DataFrame) else session.spans
        ids = table.frame.sort("start_ns")["trace_id"]
        first = spans.filter(pl.col("trace_id").is_in(ids.head(ids.len() // 2).implode()))
        second = spans.filter(~pl.col("trace_id").is_in(ids.head(ids.len() // 2).implode()))
        model = spec.load("estimator")(**case.settings).fit(build_trace_table(second), build_trace_table(first))
        table = build_trace_table(second)
    else:
        model = spec.load("estimator")(**case.settings).fit(table)
    monkeypatch.setattr(type(model), "_fit", lambda *a, **k: pytest.fail("a report section refitted"))
    sections = spec.load("section")(model, ReportContext(session.spans, table, labels=session.label_map()))
    assert sections and all(s.title for s in sections)


def test_cli_command_is_registered(fitted, capsys):
    from tracesleuth.cli import main

    spec = fitted[0]
    assert main([spec.name, "--help"]) == 0
    assert spec.name in capsys.readouterr().out


def test_evaluation_protocol_scores(fitted):
    spec = fitted[0]
    ev = spec.load("evaluation")(quick=True, random_state=0)
    assert isinstance(ev, AnalysisResult)
    json.dumps(ev.to_dict())
    assert ev.scores and all(0.0 <= v <= 1.0 for v in ev.scores.values())
