"""Root-cause localization (Mi et al. 2012): the statistics and the estimator on planted data."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from scipy.stats import chi2

from tracesleuth.analyses.localize import RootCauseLocalization
from tracesleuth.analyses.localize.instances import dissimilarity_ratios
from tracesleuth.analyses.localize.notes import ConstantLatencies, TooFewToSplit
from tracesleuth.analyses.localize.spe import principal_methods, q_threshold, spe_split
from tracesleuth.errors import ParameterError
from tracesleuth.model import build_trace_table


def test_q_threshold_matches_chi_square_when_residual_eigenvalues_are_equal():
    # With r equal eigenvalues l, SPE/l is chi-square with r degrees of freedom; Jackson &
    # Mudholkar's approximation is close to its quantile.
    lam = np.full(6, 2.0)
    assert q_threshold(lam, 0.05) == pytest.approx(2.0 * chi2.ppf(0.95, 6), rel=0.03)
    assert q_threshold(np.zeros(3), 0.05) == 0.0


def test_principal_methods_take_each_components_largest_unused_loading():
    components = np.array([[0.9, 0.1, 0.4], [0.8, 0.1, 0.6], [0.1, 0.99, 0.1]])
    assert principal_methods(components).tolist() == [0, 2, 1]


def test_spe_split_finds_requests_that_break_the_correlation():
    rng = np.random.default_rng(0)
    size = rng.normal(10, 3, 500)
    y = np.column_stack([size * 1.0, size * 2.0, size * 0.5]) + rng.normal(0, 0.1, (500, 3))
    y[:10, 2] += 8.0  # ten requests where the third method alone is slow
    for robust in (False, True):
        split = spe_split(y, variance=0.95, beta=0.01, robust=robust, random_state=0)
        assert split.anomalous[:10].all()
        assert split.anomalous[10:].mean() < 0.05


def test_spe_split_says_why_it_cannot_split():
    assert spe_split(np.ones((5, 3)), variance=0.95, beta=0.05) == TooFewToSplit(5, 10)
    assert spe_split(np.ones((50, 3)), variance=0.95, beta=0.05) == ConstantLatencies(50)


def test_spe_split_with_fewer_requests_than_methods_uses_the_most_variable_ones():
    rng = np.random.default_rng(1)
    y = rng.normal(0, 1, (12, 40))
    y[:, 7] *= 100
    split = spe_split(y, variance=0.95, beta=0.05, robust=False)
    assert split.n_methods == 5 and 7 in split.principal


def test_dissimilarity_ratios_single_out_the_odd_instance():
    rng = np.random.default_rng(2)
    rows = [("a", v) for v in rng.normal(10, 1, 200)] + [("b", v) for v in rng.normal(10, 1, 200)]
    rows += [("c", v) for v in rng.normal(10, 1, 200)] + [("d", v) for v in rng.normal(30, 1, 200)]
    frame = pl.DataFrame(rows, schema=["instance", "latency"], orient="row")
    found, note = dissimilarity_ratios("s:m", frame, n_bins=10, factor=1.5)
    assert note is None
    assert found[0].instance == "d" and found[0].stands_out
    assert not any(f.stands_out for f in found[1:])
    assert sum(f.dissimilarity_ratio for f in found) == pytest.approx(1.0)
    two, note = dissimilarity_ratios("s:m", frame.filter(pl.col("instance").is_in(["a", "d"])), n_bins=10, factor=1.5)
    assert (note.kind, note.reason, note.n_instances) == ("instances_alike", "two_instances", 2)
    assert not any(f.stands_out for f in two)


def _spans(n: int, slow_from: int, seed: int = 0, n_instances: int = 4) -> pa.Table:
    """Requests api -> (db, cache); from request ``slow_from`` on, db on instance db-3 is slow."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        t0 = i * 10_000_000
        inst = f"db-{i % n_instances}"
        db = rng.lognormal(np.log(2e6), 0.1) + (6e6 if i >= slow_from and inst == "db-3" else 0)
        cache = rng.lognormal(np.log(1e6), 0.1)
        own = rng.lognormal(np.log(1e6), 0.1)
        end = int(t0 + own + db + cache)
        tid = f"{i:032x}"
        rows.append((tid, f"{i:08x}a", None, "api", "GET /", "api-0", "server", t0, end))
        rows.append((tid, f"{i:08x}b", f"{i:08x}a", "db", "query", inst, "server", int(t0 + own / 2),
                     int(t0 + own / 2 + db)))
        rows.append((tid, f"{i:08x}c", f"{i:08x}a", "cache", "get", "cache-0", "server", int(t0 + own / 2 + db),
                     int(t0 + own / 2 + db + cache)))
    cols = list(zip(*rows))
    return pa.table({"trace_id": cols[0], "span_id": cols[1], "parent_span_id": pa.array(cols[2], pa.string()),
                     "service": cols[3], "operation": cols[4], "instance": cols[5], "kind": cols[6],
                     "start_ns": pa.array(cols[7], pa.int64()), "end_ns": pa.array(cols[8], pa.int64()),
                     "status": ["unset"] * len(rows), "follows_from": [False] * len(rows),
                     "attributes": pa.nulls(len(rows), pa.list_(pa.struct([("key", pa.string()),
                                                                           ("value", pa.string())])))})


@pytest.fixture(scope="module")
def planted():
    return build_trace_table(_spans(1200, slow_from=800))


def test_the_slow_method_its_service_and_its_instance_are_found(planted):
    res = RootCauseLocalization(random_state=0).fit(planted).result_
    assert res.methods[0].operation_key == "db:query" and res.methods[0].anomalous
    assert res.services[0].service == "db"
    top = [i for i in res.instances if i.operation_key == "db:query"]
    assert top[0].instance == "db-3" and top[0].stands_out
    assert res.onset_ns is not None and abs(res.onset_ns - 800 * 10_000_000) < 80 * 10_000_000
    d = res.to_dict()
    assert d["services"][0]["service"] == "db" and d["instances"]
    assert res.to_frame().height == len(res.methods)
    assert "db" in res.describe()


def test_no_fault_gives_no_confident_answer():
    table = build_trace_table(_spans(1200, slow_from=10**9, seed=3))
    res = RootCauseLocalization(random_state=0).fit(table).result_
    assert not res.services or res.services[0].score < 1.0 or "Weak" in res.describe()


def test_same_seed_same_result_and_the_paper_settings_run(planted):
    a = RootCauseLocalization(random_state=5).fit(planted).result_
    b = RootCauseLocalization(random_state=5).fit(planted).result_
    assert a.to_dict() == b.to_dict()
    paper = RootCauseLocalization(robust=False, combined=False, latency="duration").fit(planted).result_
    assert paper.n_analysed == planted.n_requests


def test_bad_input_is_refused_with_a_clear_error(planted):
    with pytest.raises(ParameterError, match="TraceTable"):
        RootCauseLocalization().fit("spans.json")
    with pytest.raises(ParameterError, match="once"):
        RootCauseLocalization().fit([planted, planted])
    with pytest.raises(ParameterError, match="alpha"):
        RootCauseLocalization(alpha=0).fit(planted)


def test_tiny_and_constant_inputs_say_nothing_anomalous():
    tiny = build_trace_table(_spans(6, slow_from=3))
    res = RootCauseLocalization().fit(tiny).result_
    assert not res.anomalous_methods and "Nothing could be analysed" in res.describe()
    (split,) = res.notes_of("no_cluster_split")  # why, as a record: which cluster, and its reason
    why = res.clusters[0].note
    assert (split.cluster, split.reason_kind, split.reason) == (res.clusters[0].cluster, why.kind, str(why))
    (small,) = res.notes_of("clusters_too_small")
    assert (small.n_small, small.n_clusters, small.median_requests) == (1, 1, 6)
    assert [n["kind"] for n in res.to_dict()["notes"]] == ["no_cluster_split", "clusters_too_small"]


def test_report_section_shows_the_answer_and_says_when_there_is_none(planted):
    from tracesleuth.report.sections.localize import localization_section
    from tracesleuth.report.document import Report

    res = RootCauseLocalization(random_state=0).fit(planted).result_
    page = Report("t").add(localization_section(res)).to_html()
    assert res.services[0].service in page and res.anomalous_methods[0].operation_key in page
    assert "Major clusters" in page and "Nothing anomalous" not in page
    tiny = RootCauseLocalization().fit(build_trace_table(_spans(6, slow_from=3))).result_
    page = Report("t").add(localization_section(tiny)).to_html()
    assert "Nothing could be analysed" in page
