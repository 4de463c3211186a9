"""The E-Shopper session simulator (Cortellessa & Traini, ICPE 2020, Sections 4.2-4.3): call tree,
asynchronous calls, injected delays, labels, determinism, and the trace table built from its spans."""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from tracesleuth import schema as S
from tracesleuth.errors import ParameterError
from tracesleuth.evaluation.eshopper import (
    ASYNC_NOISE_NS, ASYNC_RPCS, DELAY_NS, DEVIATED_DELAY_NS, HOMEPAGE_CALLS, RPCS, SERVICES, SYNC_RPCS,
    Degradation, simulate_eshopper,
)

N = 1000


@pytest.fixture(scope="module")
def normal():
    return simulate_eshopper(n_requests=N, random_state=11)


@pytest.fixture(scope="module")
def noised():
    return simulate_eshopper(n_requests=N, random_state=11, noised=True)


def spans_frame(session) -> pl.DataFrame:
    return pl.from_arrow(session.spans).with_columns(
        duration=pl.col(S.END_NS) - pl.col(S.START_NS),
        rpc=pl.col(S.SERVICE) + ":" + pl.col(S.OPERATION))


def by_hand(session) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Latency (root span duration) and summed exclusive time per (trace, rpc), computed from the
    spans alone: a span's duration minus its synchronous (not follows_from) children's."""
    df = spans_frame(session)
    kids = (df.filter(~pl.col(S.FOLLOWS_FROM) & pl.col(S.PARENT_SPAN_ID).is_not_null())
            .group_by(S.TRACE_ID, S.PARENT_SPAN_ID).agg(child_ns=pl.col("duration").sum()))
    df = df.join(kids, left_on=[S.TRACE_ID, S.SPAN_ID], right_on=[S.TRACE_ID, S.PARENT_SPAN_ID], how="left")
    df = df.with_columns(exclusive=pl.col("duration") - pl.col("child_ns").fill_null(0))
    latency = df.filter(pl.col(S.PARENT_SPAN_ID).is_null()).select(S.TRACE_ID, latency=pl.col("duration"))
    exclusive = df.group_by(S.TRACE_ID, "rpc", S.KIND).agg(pl.col("exclusive").sum())
    return latency, exclusive


# ----------------------------------------------------------------------------------------------
# Shape of a request (Section 4.2)
# ----------------------------------------------------------------------------------------------

def test_call_tree_matches_the_paper():
    assert len(HOMEPAGE_CALLS) == 13
    assert len(RPCS) == 8 and len(SERVICES) == 5
    assert len(SYNC_RPCS) == 6 and len(ASYNC_RPCS) == 2
    assert set(ASYNC_RPCS) == {"items-service:finditems", "items-service:findfeaturesitems"}
    assert HOMEPAGE_CALLS[0].rpc == "web-service:gethome" and HOMEPAGE_CALLS[0].parent is None
    # "the first two get RPCs invoked by web-service are asynchronous"
    assert [c.asynchronous for c in HOMEPAGE_CALLS if c.parent == 0][:2] == [True, True]
    assert sum(c.asynchronous for c in HOMEPAGE_CALLS) == 2


def test_spans_are_in_the_canonical_schema(normal):
    assert normal.spans.schema.equals(S.SPAN_SCHEMA)
    assert normal.spans.num_rows == 25 * N
    df = spans_frame(normal)
    assert df[S.TRACE_ID].str.contains(r"^[0-9a-f]{32}$").all()
    assert df[S.SPAN_ID].str.contains(r"^[0-9a-f]{16}$").all()
    assert set(df[S.KIND].unique()) == {"server", "client"}
    assert (df[S.END_NS] > df[S.START_NS]).all()
    assert df[S.INSTANCE].null_count() == 0
    assert df.select(pl.struct(S.TRACE_ID, S.SPAN_ID).is_unique().all()).item()
    # every parent is in its trace; one root per trace
    ids = df.select(S.TRACE_ID, pl.col(S.SPAN_ID).alias(S.PARENT_SPAN_ID))
    children = df.filter(pl.col(S.PARENT_SPAN_ID).is_not_null())
    assert children.join(ids, on=[S.TRACE_ID, S.PARENT_SPAN_ID], how="anti").height == 0
    assert df.filter(pl.col(S.PARENT_SPAN_ID).is_null()).group_by(S.TRACE_ID).len()["len"].to_list() == [1] * N


def test_every_request_has_13_calls_of_8_rpcs_over_5_services(normal):
    df = spans_frame(normal)
    per = df.filter(pl.col(S.KIND) == "server").group_by(S.TRACE_ID).agg(
        calls=pl.len(), rpcs=pl.col("rpc").n_unique(), services=pl.col(S.SERVICE).n_unique())
    assert per.height == N
    assert per["calls"].unique().to_list() == [13]
    assert per["rpcs"].unique().to_list() == [8]
    assert per["services"].unique().to_list() == [5]
    assert df.filter(pl.col(S.KIND) == "client").group_by(S.TRACE_ID).len()["len"].unique().to_list() == [12]


def test_each_call_is_a_client_span_in_the_caller_and_a_server_span_in_the_callee(normal):
    df = spans_frame(normal)
    servers = df.filter(pl.col(S.KIND) == "server", pl.col(S.PARENT_SPAN_ID).is_not_null())
    clients = df.filter(pl.col(S.KIND) == "client").select(
        S.TRACE_ID, pl.col(S.SPAN_ID).alias(S.PARENT_SPAN_ID), client_op=pl.col(S.OPERATION),
        client_start=pl.col(S.START_NS), client_end=pl.col(S.END_NS))
    pairs = servers.join(clients, on=[S.TRACE_ID, S.PARENT_SPAN_ID])
    assert pairs.height == servers.height == 12 * N
    assert (pairs["client_op"] == pairs[S.OPERATION]).all()
    assert ((pairs["client_start"] < pairs[S.START_NS]) & (pairs[S.END_NS] < pairs["client_end"])).all()


def test_only_the_two_asynchronous_calls_follow_from_gethome(normal):
    df = spans_frame(normal)
    asyn = df.filter(pl.col(S.FOLLOWS_FROM))
    assert asyn.height == 2 * N
    assert set(asyn[S.KIND].unique()) == {"client"}
    assert set(asyn[S.SERVICE].unique()) == {"web-service"}
    assert {f"items-service:{op}" for op in asyn[S.OPERATION].unique()} == set(ASYNC_RPCS)


def test_synchronous_calls_run_one_after_the_other_inside_their_caller(normal):
    df = spans_frame(normal).filter(~pl.col(S.FOLLOWS_FROM), pl.col(S.KIND) == "client")
    gaps = df.sort(S.TRACE_ID, S.PARENT_SPAN_ID, S.START_NS).with_columns(
        prev_end=pl.col(S.END_NS).shift(1).over(S.TRACE_ID, S.PARENT_SPAN_ID))
    assert (gaps.drop_nulls("prev_end").select(pl.col(S.START_NS) >= pl.col("prev_end")).to_series()).all()


def test_base_times_are_milliseconds_and_multimodal_where_cached(normal):
    _, ex = by_hand(normal)
    clean = ex.filter(pl.col(S.KIND) == "server").join(normal.injections.select(S.TRACE_ID).unique(),
                                                       on=S.TRACE_ID, how="anti")
    med = clean.group_by("rpc").agg(pl.col("exclusive").median() / 1e6)
    assert med["exclusive"].min() >= 1.0 and med["exclusive"].max() <= 60.0
    # getrecommended: cache hits ~4 ms, misses ~14 ms per call -> a dip between the modes
    rec = clean.filter(pl.col("rpc") == "items-service:getrecommended")["exclusive"].to_numpy() / 1e6
    counts, _ = np.histogram(rec, bins=[0, 12, 16, 22, 30, 60])
    assert counts[0] > counts[1] < counts[2]


# ----------------------------------------------------------------------------------------------
# Degradations (Section 4.3)
# ----------------------------------------------------------------------------------------------

def test_degradations_have_different_types_over_synchronous_rpcs():
    for seed in range(30):
        s = simulate_eshopper(n_requests=5, random_state=seed)
        a1, a2 = s.degradations
        assert (a1.name, a2.name) == ("A1", "A2")
        assert a1.type != a2.type and {a1.type, a2.type} <= {1, 2, 3}
        assert set(a1.rpcs) | set(a2.rpcs) <= set(SYNC_RPCS)
        assert not a1.noised and not a2.noised


def test_noised_degradations_pick_a_deviating_rpc_and_an_async_call(noised, normal):
    for d, plain in zip(noised.degradations, normal.degradations):
        assert d.rpcs == plain.rpcs          # same seed: same degradations, plus the noises
        assert d.deviating_rpc in d.rpcs
        assert d.async_rpc in ASYNC_RPCS


def test_about_ten_percent_of_requests_per_degradation():
    s = simulate_eshopper(n_requests=5000, random_state=5)
    counts = Counter(s.labels["degradation"].to_list())
    assert set(counts) == {"A1", "A2", None}
    for name in ("A1", "A2"):
        assert 0.085 <= counts[name] / 5000 <= 0.115


def test_labels_are_not_in_the_spans(noised):
    """Nothing but timing tells an affected request apart: same structure, same attributes."""
    df = spans_frame(noised)
    assert df.columns[:len(S.SPAN_COLUMNS)] == list(S.SPAN_COLUMNS)
    text = pl.concat([df[c].cast(pl.String) for c in (S.SERVICE, S.OPERATION, S.INSTANCE, S.KIND, S.STATUS)])
    attrs = df.select(pl.col(S.ATTRIBUTES).explode().struct.unnest()).with_columns(pl.col("int").cast(pl.String))
    values = set(text.to_list()) | set(attrs["key"].to_list()) | set(attrs["str"].drop_nulls().to_list())
    assert not any(tok in v for v in values for tok in ("A1", "A2", "degrad", "inject", "noise"))
    label = noised.labels.select(S.TRACE_ID, "degradation")
    shape = (df.join(label, on=S.TRACE_ID)
             .with_columns(pl.col(S.ATTRIBUTES).list.eval(pl.element().struct.field("key")).list.join(","))
             .group_by(pl.col("degradation").is_null().alias("clean"))
             .agg(pl.struct(S.SERVICE, S.OPERATION, S.KIND, S.STATUS, S.FOLLOWS_FROM, S.ATTRIBUTES)
                  .unique().sort().alias("shape")))
    assert shape["shape"][0].to_list() == shape["shape"][1].to_list()


def test_injected_delays_appear_exactly_in_the_affected_rpcs_exclusive_times(noised):
    """Twin sessions: same seed, one with no request marked. Every exclusive time differs by
    exactly what was injected in that RPC of that request, and nothing else changes."""
    twin = simulate_eshopper(n_requests=N, random_state=11, noised=True, p_affected=0.0)
    assert twin.injections.height == 0
    assert twin.labels[S.TRACE_ID].to_list() == noised.labels[S.TRACE_ID].to_list()
    lat, ex = by_hand(noised)
    lat0, ex0 = by_hand(twin)
    injected = noised.injections.group_by(S.TRACE_ID, rpc=pl.col(S.SERVICE) + ":" + pl.col(S.OPERATION)).agg(
        pl.col("delay_ns").sum())
    diff = (ex.join(ex0, on=[S.TRACE_ID, "rpc", S.KIND], suffix="_0")
            .join(injected, on=[S.TRACE_ID, "rpc"], how="left")
            .with_columns(expected=pl.when(pl.col(S.KIND) == "server").then(pl.col("delay_ns")).fill_null(0)))
    assert diff.height == ex.height == ex0.height
    assert (diff["exclusive"] - diff["exclusive_0"] == diff["expected"]).all()
    # Latency grows by the synchronous delays only: t x 50 ms (+10 ms with the first noise).
    sync = (noised.injections.filter(pl.col("noise") != "async")
            .group_by(S.TRACE_ID).agg(pl.col("delay_ns").sum()))
    lat_diff = (lat.join(lat0, on=S.TRACE_ID, suffix="_0").join(sync, on=S.TRACE_ID, how="left")
                .with_columns(pl.col("delay_ns").fill_null(0)))
    assert (lat_diff["latency"] - lat_diff["latency_0"] == lat_diff["delay_ns"]).all()


def test_a_degradation_adds_its_type_times_50ms_and_the_first_noise_10ms_more(noised):
    inj = noised.injections.join(noised.labels, on=[S.TRACE_ID, "degradation"])
    types = {d.name: d.type for d in noised.degradations}
    per = inj.filter(pl.col("noise") != "async").group_by(S.TRACE_ID, "degradation").agg(
        total=pl.col("delay_ns").sum(), deviated=(pl.col("noise") == "deviation").sum())
    for name, total, deviated in per.select("degradation", "total", "deviated").iter_rows():
        assert total == types[name] * DELAY_NS + deviated * (DEVIATED_DELAY_NS - DELAY_NS)
    assert per.height == noised.labels["degradation"].drop_nulls().len()


def test_each_noise_hits_about_half_of_a_degradations_requests(noised):
    inj = noised.injections
    for d in noised.degradations:
        n_affected = noised.labels.filter(pl.col("degradation") == d.name).height
        dev = inj.filter(pl.col("degradation") == d.name, pl.col("noise") == "deviation")
        asy = inj.filter(pl.col("degradation") == d.name, pl.col("noise") == "async")
        assert 0.3 <= dev.height / n_affected <= 0.7
        assert 0.3 <= asy.height / n_affected <= 0.7
        assert set(dev["delay_ns"]) == {DEVIATED_DELAY_NS}
        assert set(asy["delay_ns"]) == {ASYNC_NOISE_NS}
        assert set(asy[S.SERVICE] + ":" + asy[S.OPERATION]) == {d.async_rpc}


def test_asynchronous_calls_do_not_extend_the_latency():
    """The second noise delays an asynchronous call by 100 ms; the request latency is unchanged,
    though the call now often ends after gethome."""
    plain = Degradation("A1", ("cart-service:getcart",))
    noisy = Degradation("A1", ("cart-service:getcart",), async_rpc="items-service:findfeaturesitems")
    a = simulate_eshopper(n_requests=400, random_state=2, degradations=[plain], p_affected=0.5)
    b = simulate_eshopper(n_requests=400, random_state=2, degradations=[noisy], p_affected=0.5)
    lat_a, ex_a = by_hand(a)
    lat_b, ex_b = by_hand(b)
    assert lat_a.sort(S.TRACE_ID).equals(lat_b.sort(S.TRACE_ID))
    hit = b.injections.filter(pl.col("noise") == "async")
    assert hit.height > 50
    key = [S.TRACE_ID, "rpc", S.KIND]
    d = ex_b.join(ex_a, on=key, suffix="_a").filter(pl.col("rpc") == "items-service:findfeaturesitems")
    d = d.join(hit.select(S.TRACE_ID, "delay_ns"), on=S.TRACE_ID, how="left").with_columns(pl.col("delay_ns").fill_null(0))
    assert (d["exclusive"] - d["exclusive_a"] == d["delay_ns"]).all()
    df = spans_frame(b)
    root_end = df.filter(pl.col(S.PARENT_SPAN_ID).is_null()).select(S.TRACE_ID, root_end=pl.col(S.END_NS))
    late = df.filter(pl.col(S.FOLLOWS_FROM)).join(root_end, on=S.TRACE_ID).filter(pl.col(S.END_NS) > pl.col("root_end"))
    assert late.height > 50


def test_same_seed_same_session_other_seed_other_session(normal):
    again = simulate_eshopper(n_requests=N, random_state=11)
    assert again.spans.equals(normal.spans)
    assert again.labels.equals(normal.labels) and again.injections.equals(normal.injections)
    assert again.degradations == normal.degradations
    other = simulate_eshopper(n_requests=N, random_state=12)
    assert not other.spans.equals(normal.spans)
    gen = [simulate_eshopper(n_requests=50, random_state=np.random.default_rng(4)) for _ in range(2)]
    assert gen[0].spans.equals(gen[1].spans)
    seq = np.random.SeedSequence(4)
    twice = [simulate_eshopper(n_requests=50, random_state=seq) for _ in range(2)]
    assert twice[0].spans.equals(twice[1].spans)


def test_labels_for_aligns_and_rejects_strangers(normal):
    ids = normal.labels[S.TRACE_ID].to_list()[::-1][:10]
    labels = normal.labels_for(ids)
    assert labels.tolist() == [normal.label_map()[t] for t in ids]
    with pytest.raises(ParameterError, match="not in this session"):
        normal.labels_for(["0" * 32])


def test_imposed_degradations_are_validated():
    with pytest.raises(ParameterError, match="synchronous RPCs"):
        Degradation("A1", ("items-service:finditems",))
    with pytest.raises(ParameterError, match="'deviating_rpc'"):
        Degradation("A1", ("cart-service:getcart",), deviating_rpc="web-service:gethome")
    with pytest.raises(ParameterError, match="'async_rpc'"):
        Degradation("A1", ("cart-service:getcart",), async_rpc="cart-service:getcart")
    with pytest.raises(ParameterError, match="distinct names"):
        simulate_eshopper(degradations=[Degradation("A", ("cart-service:getcart",))] * 2)


@pytest.mark.parametrize("kwargs, match", [
    ({"n_requests": 0}, "'n_requests'"),
    ({"n_requests": 2.5}, "'n_requests'"),
    ({"p_affected": 0.6}, "'p_affected'"),
    ({"random_state": -1}, "'random_state'"),
    ({"random_state": "x"}, "'random_state'"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        simulate_eshopper(**kwargs)


# ----------------------------------------------------------------------------------------------
# Through the normal path: the trace table
# ----------------------------------------------------------------------------------------------

def test_trace_table_of_the_spans_matches_the_hand_computation(noised):
    from tracesleuth.model import build_trace_table

    table = build_trace_table(noised.spans)
    assert table.endpoint == "web-service:gethome"
    assert table.n_requests == N
    assert table.assembly.orphan_spans == 0 and table.assembly.traces_with_several_roots == 0
    frame = table.frame
    lat, ex = by_hand(noised)
    got = frame.select(S.TRACE_ID, "latency_ns").join(lat, on=S.TRACE_ID)
    assert got.height == N and (got["latency_ns"] == got["latency"]).all()
    long = frame.select(S.TRACE_ID, *table.continuous_columns).unpivot(
        index=S.TRACE_ID, variable_name="col", value_name="table_ns")
    long = long.with_columns(rpc=pl.col("col").str.slice(len("exclusive_ns["), None).str.strip_suffix("]"))
    hand = ex.group_by(S.TRACE_ID, "rpc").agg(pl.col("exclusive").sum())
    cmp = long.join(hand, on=[S.TRACE_ID, "rpc"], how="full", coalesce=True)
    assert cmp.height == hand.height
    assert (cmp["table_ns"] == cmp["exclusive"]).all()
    calls = frame.select(pl.col("calls[account-service:getprofile]"), pl.col("calls[categories-service:getcategory]"))
    assert calls.unique().rows() == [(2, 4)]


def test_trace_table_exposes_the_injected_delays(noised):
    from tracesleuth.model import build_trace_table

    frame = build_trace_table(noised.spans).frame
    truth = noised.labels_for(frame[S.TRACE_ID].to_list())
    for d in noised.degradations:
        hit = truth == d.name
        for rpc in d.rpcs:
            col = frame[f"exclusive_ns[{rpc}]"].to_numpy()
            # the affected RPC's exclusive time is at least the delay in every affected request
            assert (col[hit] >= DELAY_NS).all()


def test_spans_round_trip_through_parquet(tmp_path, normal):
    import pyarrow.parquet as pq

    path = tmp_path / "session.parquet"
    pq.write_table(normal.spans, path)
    assert pq.read_table(path).equals(normal.spans)
    assert isinstance(normal.spans, pa.Table)
