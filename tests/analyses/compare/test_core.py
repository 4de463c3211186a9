"""Core of the request-flow comparison (Spectroscope, Sambasivan et al., NSDI 2011)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tests.spans import span, table
from tracesleuth.analyses.compare import ComparisonResult, RequestFlowComparison
from tracesleuth.analyses.compare.categories import divergence, edit_distance, parse_signature
from tracesleuth.errors import EmptyDataError, ParameterError
from tracesleuth.evaluation.eshopper import Degradation, simulate_eshopper
from tracesleuth.model import build_trace_table


# --------------------------------------------------------------------------------------------
# Hand-built request flows: frontend -> (HTTP GET) -> orders:list -> (db) orders:query
# --------------------------------------------------------------------------------------------

def _flows(n_full, n_early, *, seed, prefix, list_ms=5.0, slow_ms=0.0, n_slow=0):
    """``n_full`` complete requests and ``n_early`` where orders:list returns before its query."""
    rng = np.random.default_rng(seed)
    rows, t0 = [], 0.0
    for i in range(n_full + n_early):
        tid = f"{prefix}{i:06d}"
        early = i >= n_full
        own = list_ms + rng.gamma(4, 0.25) + (slow_ms if i < n_slow else 0.0)
        db = 0.0 if early else 3 + rng.gamma(4, 0.25)
        net = 0.2 + rng.gamma(2, 0.05)
        server = own + db
        client = server + net
        root = client + 1 + rng.gamma(2, 0.2)
        rows.append(span(tid, "1", None, "frontend", "GET /orders", t0, t0 + root))
        rows.append(span(tid, "2", "1", "frontend", "HTTP GET", t0 + 0.5, t0 + 0.5 + client, kind="client"))
        rows.append(span(tid, "3", "2", "orders", "list", t0 + 0.6, t0 + 0.6 + server,
                         status="error" if early else "unset"))
        if not early:
            rows.append(span(tid, "4", "3", "orders", "query", t0 + 0.7 + own / 2, t0 + 0.7 + own / 2 + db,
                             kind="client"))
        t0 += 50
    return build_trace_table(table(rows))


def test_signature_parsing_and_edit_distance():
    s = parse_signature("f:GET /a(b)(f:HTTP GET(o:list(o:q,o:r)),f:x)", ["f:GET /a(b)", "f:HTTP GET", "o:list",
                                                                        "o:q", "o:r", "f:x"])
    assert [n.key for n in s.nodes] == ["f:GET /a(b)", "f:HTTP GET", "o:list", "o:q", "o:r", "f:x"]
    assert [n.depth for n in s.nodes] == [0, 1, 2, 3, 3, 1]
    assert s.subtree(1) == "f:HTTP GET(o:list(o:q,o:r))"
    assert edit_distance(list("kitten"), list("sitting")) == 3
    early = parse_signature("f:GET /a(b)(f:HTTP GET(o:list),f:x)", ["f:GET /a(b)", "f:HTTP GET", "o:list", "f:x"])
    assert edit_distance(early.tokens(), s.tokens()) == 2
    node, changed = divergence(early, s)
    assert early.nodes[node].key == "o:list" and changed == ("o:q", "o:r")
    assert divergence(s, s) is None


def test_planted_slowdown_names_the_service():
    base = build_trace_table(simulate_eshopper(n_requests=600, random_state=1, p_affected=0.0).spans)
    prob = build_trace_table(simulate_eshopper(
        n_requests=600, random_state=2, p_affected=0.3,
        degradations=[Degradation("A1", rpcs=("cart-service:getcart",))]).spans)
    est = RequestFlowComparison(random_state=0).fit(prob, base)
    r = est.result_
    assert r.significant and r.reason is None
    assert r.services[0].service == "cart-service"
    assert any("cart-service:getcart" in e for e in r.services[0].evidence)
    top = r.mutations[0]
    assert top.kind == "response-time" and top.contribution_ns > 0 and top.rank == 1
    assert top.operations[0].operation_key == "cart-service:getcart"
    assert any(e.callee_service == "cart-service" for e in top.edges)
    assert est.categories_.height == 1 and est.categories_["baseline_count"][0] == 600
    d = r.to_dict()
    json.dumps(d)
    assert d["services"][0]["service"] == "cart-service" and set(d["services"][0]) >= {"service", "score", "evidence"}
    assert r.to_frame().height == len(r.mutations)
    assert "cart-service" in r.describe()


def test_planted_early_return_is_a_structural_mutation_diverging_at_the_service():
    base = _flows(300, 0, seed=1, prefix="a")
    prob = _flows(200, 100, seed=2, prefix="b")
    r = RequestFlowComparison(random_state=0).fit(prob, base).result_
    assert r.significant
    structural = [m for m in r.mutations if m.kind == "structural"]
    assert len(structural) == 1
    m = structural[0]
    assert m.category == "frontend:GET /orders(frontend:HTTP GET(orders:list))"
    assert m.precursors and m.precursors[0].category.endswith("(orders:list(orders:query)))")
    assert m.precursors[0].edit_distance == 1
    assert m.divergence == "orders:list" and m.divergence_service == "orders"
    assert r.services[0].service == "orders"
    assert any("diverges at orders:list" in e for e in r.services[0].evidence)


def test_periods_of_different_volume_are_normalised():
    """Same mix, three times the requests: shares equal, so no structural mutation."""
    base = _flows(100, 20, seed=1, prefix="a")
    prob = _flows(300, 60, seed=2, prefix="b")
    r = RequestFlowComparison().fit(prob, base).result_
    assert not [m for m in r.mutations if m.kind == "structural"]


def test_identical_periods_are_no_significant_change():
    t = _flows(150, 30, seed=3, prefix="a")
    r = RequestFlowComparison().fit(t, t).result_
    assert not r.significant and r.reason.kind == "no_significant_change" and r.reason.n_categories_tested >= 1
    assert r.to_dict()["reason"]["kind"] == "no_significant_change"
    assert r.services == () and r.mutations == ()
    assert "no significant change" in r.describe()
    assert r.to_frame().height == 0 and r.to_frame().columns
    json.dumps(r.to_dict())


def test_two_halves_of_a_stationary_session_are_no_significant_change():
    session = build_trace_table(simulate_eshopper(n_requests=1200, random_state=5, p_affected=0.0).spans)
    spans = pl.from_arrow(session.spans)
    half = session.frame["trace_id"][:600]
    first = build_trace_table(spans.filter(pl.col("trace_id").is_in(half.implode())).to_arrow())
    second = build_trace_table(spans.filter(~pl.col("trace_id").is_in(half.implode())).to_arrow())
    r = RequestFlowComparison().fit(second, first).result_
    assert not r.significant, r.describe()
    mixed = _flows(400, 100, seed=9, prefix="m")
    spans = pl.from_arrow(mixed.spans)
    ids = mixed.frame["trace_id"].to_numpy()[np.random.default_rng(0).permutation(500)[:250]]
    a = build_trace_table(spans.filter(pl.col("trace_id").is_in(ids)).to_arrow())
    b = build_trace_table(spans.filter(~pl.col("trace_id").is_in(ids)).to_arrow())
    assert not RequestFlowComparison().fit(b, a).result_.significant


def test_bad_input():
    t = _flows(30, 0, seed=1, prefix="a")
    one = _flows(1, 0, seed=1, prefix="o")
    with pytest.raises(EmptyDataError, match="one request"):
        RequestFlowComparison().fit(one, t)
    empty = type(t)(frame=t.frame.clear(), endpoint=t.endpoint, operations=t.operations)
    with pytest.raises(EmptyDataError, match="baseline period has no request"):
        RequestFlowComparison().fit(t, empty)
    other = build_trace_table(simulate_eshopper(n_requests=20, random_state=1).spans)
    with pytest.raises(ParameterError, match="different endpoints"):
        RequestFlowComparison().fit(other, t)
    with pytest.raises(ParameterError, match="TraceTable"):
        RequestFlowComparison().fit(t.frame, t)
    with pytest.raises(ParameterError, match="'correction' parameter of RequestFlowComparison"):
        RequestFlowComparison(correction="fdr").fit(t, t)
    with pytest.raises(ParameterError, match="'sm_threshold'"):
        RequestFlowComparison(sm_threshold=-0.1).fit(t, t)
    assert issubclass(EmptyDataError, ValueError) and issubclass(ParameterError, ValueError)


def test_no_category_in_common_is_reported():
    base = _flows(100, 0, seed=1, prefix="a")
    prob = _flows(0, 100, seed=2, prefix="b")
    r = RequestFlowComparison().fit(prob, base).result_
    assert r.significant
    assert [n.kind for n in r.notes_of("no_common_category")] == ["no_common_category"]
    assert r.mutations[0].kind == "structural" and r.mutations[0].divergence_service == "orders"


def test_speedups_rank_after_slowdowns():
    base = _flows(300, 0, seed=1, prefix="a", list_ms=20)
    prob = _flows(300, 0, seed=2, prefix="b", list_ms=5)
    r = RequestFlowComparison().fit(prob, base).result_
    assert r.significant and all(m.contribution_ns < 0 for m in r.mutations)
    assert r.services == ()  # a speed-up of response time is no suspicion
    (note,) = r.notes_of("nothing_slower")
    assert note.n_mutations == len(r.mutations) > 0


#: The recorded TrainTicket day, under ../shared/data (the ``shared_data`` fixture).
TRAINTICKET_DAY = "nezha/trainticket/2023-01-29"


def test_trainticket_fault_window_smoke(shared_data):
    from tracesleuth.io import read_spans

    day = shared_data / TRAINTICKET_DAY
    base_files = sorted((day / "fault_free").iterdir())
    prob_files = sorted((day / "trace").iterdir())
    assert base_files and prob_files, day
    base = build_trace_table(read_spans(base_files[:1]))
    prob = build_trace_table(read_spans(prob_files[:1]), endpoint=base.endpoint)
    r = RequestFlowComparison(random_state=0).fit(prob, base).result_
    assert isinstance(r, ComparisonResult)
    json.dumps(r.to_dict())
    if r.significant:
        assert (r.mutations or r.pooled) and all(0 < s.score <= 1 for s in r.services)
        ranks = [m.rank for m in r.mutations]
        assert ranks == sorted(ranks)


def test_untested_categories_are_a_note_with_their_numbers():
    base = _flows(100, 0, seed=1, prefix="a")
    prob = _flows(100, 0, seed=2, prefix="b", slow_ms=20, n_slow=100)
    r = RequestFlowComparison(min_requests=500).fit(prob, base).result_
    (note,) = r.notes_of("categories_untested")
    assert (note.n_categories, note.min_requests) == (1, 500)
    doc = json.loads(json.dumps(r.to_dict()))["notes"]
    assert [n["kind"] for n in doc] == [n.kind for n in r.notes]
    assert doc[0]["words"] == str(r.notes[0]) and "not tested for a response-time change" in doc[0]["words"]
