"""The incident mode's code faults, live: what the stored spans and logs show of them.

One short incident run per fault (a baseline phase, then the fault in one service for a share of
its requests). The ground truth - which requests the fault hit - comes from the run's
``fault-hits.csv``, never from the telemetry; the tests check that the stored spans and log
records show exactly those requests as faulty, and nothing in the baseline:

* ``exception`` in ``account-service``: its server span has status error with the exception's
  message and an ``exception`` event, its callers' client spans have status error, its callers
  answer (no homepage request gets the 500); an ERROR record with the exception in each hit span,
  "call to account-service getprofile failed" in each caller's;
* ``early-return`` in ``recommendation-service``: the hit span lacks its downstream call (the
  carousel's first slide calls ``account-service``) or its query (the second makes no call), with
  no error anywhere; its "fetched" log statement is missing, the one every other span ran.

Only the answered requests are asserted on, and a run in which the machine let too few be answered
skips with its measured cause: the structure of the traces is asserted, never time, so an
overloaded but complete run still counts.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

import polars as pl
import pytest

from demo_support import processes_mentioning
from tracesleuth.demo import DEFAULT_FAULT_SHARE, DEFAULT_RATE_PER_S, run_incident
from tracesleuth.io import read_logs, read_spans
from tracesleuth.schema import SEVERITY_ERROR

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")]

#: Seconds and rate of load of each run (half baseline, half problem): 48 + 48 homepage requests,
#: 96 calls of account-service and 96 of recommendation-service per phase. Half the default rate:
#: the structure of the traces needs no more, and a busy machine carries it.
DURATION_S, RATE_PER_S, SEED = 24, DEFAULT_RATE_PER_S / 2, 3
#: Share of each phase's requests that must be answered for the run to be asserted on.
MIN_ANSWERED_SHARE = 0.8
#: Bounds on the share of the faulty service's calls a code fault hits (share 0.5, ~96 calls: the
#: binomial's 0.2 and 0.8 are 5.9 standard deviations away).
HIT_SHARE_BOUNDS = (0.2, 0.8)


def _run(tmp_path_factory, service: str, fault: str):
    workdir = tmp_path_factory.mktemp(fault) / "run"
    result = run_incident(service, fault=fault, duration_s=DURATION_S, rate_per_s=RATE_PER_S, seed=SEED,
                          workdir=workdir)
    assert processes_mentioning(str(result.workdir)) == []
    return result


def _completed(result) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The stored spans of the requests that were answered (with their ``phase`` and ``call``),
    and the fault hits among them; a skip, with the measured cause, when the machine let too few
    requests complete. A request that timed out leaves spans missing or in error for a reason
    other than the fault: only the answered ones are asserted on. An overloaded run whose
    requests were answered stays: the structure of its traces is asserted, never time."""
    labels = pl.concat([pl.read_csv(path, schema_overrides={"trace_id": pl.String})
                        .with_columns(pl.lit(name).alias("phase")) for name, path in result.labels_paths.items()])
    answered = labels.filter(pl.col("status") == 200)
    for phase in ("baseline", "problem"):
        n = labels.filter(pl.col("phase") == phase).height
        done = answered.filter(pl.col("phase") == phase).height
        if done < MIN_ANSWERED_SHARE * n:
            pytest.skip(f"the live run is incomplete: {done} of {n} {phase} requests answered "
                        f"({result.health.reason() or result.health.load_words()})")
    spans = pl.from_arrow(read_spans([result.store_path]).spans).with_columns(
        pl.col(c).cast(pl.String) for c in ("trace_id", "span_id", "parent_span_id", "service", "operation", "kind",
                                           "status"))
    spans = spans.join(answered.select("trace_id", "phase"), on="trace_id")
    calls = [next((int(parse_qs(a["str"]).get("call", [-1])[0]) for a in attrs if a["key"] == "url.query"), -1)
             for attrs in spans["attributes"].to_list()]
    hits = pl.read_csv(result.fault_hits_path, schema_overrides={"trace_id": pl.String, "span_id": pl.String,
                                                                 "skipped": pl.String})
    return (spans.with_columns(pl.Series("call", calls, dtype=pl.Int64)),
            hits.filter(pl.col("trace_id").is_in(answered["trace_id"].implode())))


def _answers(result) -> list[int]:
    """The HTTP status of every homepage request of the run (0: no answer came)."""
    return [status for path in result.labels_paths.values() for status in pl.read_csv(path)["status"].to_list()]


def _stored_logs(result) -> pl.DataFrame:
    """The run's stored log records."""
    assert result.collector_stats["logs"]["rejected"] == 0
    logs = read_logs([result.store_path]).logs
    return pl.from_arrow(logs).with_columns(pl.col(c).cast(pl.String) for c in ("trace_id", "span_id", "service"))


def _attribute(records: pl.DataFrame, key: str, field: str = "str") -> list:
    return [next((a[field] for a in attrs if a["key"] == key), None) for attrs in records["attributes"].to_list()]


# -- exception -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def exception_run(tmp_path_factory):
    return _run(tmp_path_factory, "account-service", "exception")


def test_exception_fault_marks_exactly_the_hit_spans(exception_run):
    result = exception_run
    assert (result.fault.kind, result.fault.share) == ("exception", DEFAULT_FAULT_SHARE)
    spans, hits = _completed(result)
    # No homepage request got the callee's 500: its callers handled them.
    assert 500 not in _answers(result)
    served = spans.filter((pl.col("service") == "account-service") & (pl.col("kind") == "server"))
    problem = served.filter(pl.col("phase") == "problem")
    assert served.filter((pl.col("phase") == "baseline") & (pl.col("status") == "error")).height == 0
    assert set(hits["kind"]) == {"exception"} and set(hits["trace_id"]) <= set(problem["trace_id"])
    share = hits.height / problem.height
    assert HIT_SHARE_BOUNDS[0] <= share <= HIT_SHARE_BOUNDS[1], (hits.height, problem.height)
    # The spans in error are the hit ones, no other.
    assert set(problem.filter(pl.col("status") == "error")["span_id"]) == set(hits["span_id"])
    # Each hit span's caller: its client span in error, its own server span not (it carried on).
    clients = spans.filter(pl.col("span_id").is_in(problem["parent_span_id"].implode()))
    assert clients.height == problem.height and set(clients["kind"]) == {"client"}
    hit_parents = problem.filter(pl.col("span_id").is_in(hits["span_id"].implode()))["parent_span_id"]
    assert set(clients.filter(pl.col("status") == "error")["span_id"]) == set(hit_parents)
    callers = spans.filter(pl.col("span_id").is_in(clients["parent_span_id"].implode()))
    assert set(callers["operation"]) == {"gethome", "getrecommended"}
    assert set(callers["status"]) == {"unset"}
    # Nothing else failed: the errors are the hit spans and their client spans (an asynchronous
    # call timing out on a busy machine is not the fault's).
    assert spans.filter((pl.col("status") == "error") & (pl.col("kind") != "producer")).height == 2 * hits.height


def test_exception_fault_leaves_exception_events(exception_run):
    result = exception_run
    spans, hits = _completed(result)
    hit = spans.filter(pl.col("span_id").is_in(hits["span_id"].implode()))
    assert hit.height == hits.height
    for events, message in zip(hit["events"].to_list(), hit["status_message"].to_list()):
        [event] = [e for e in events or [] if e["name"] == "exception"]
        attrs = {a["key"]: a["str"] for a in event["attributes"]}
        assert attrs["exception.type"].endswith("RowError") and attrs["exception.stacktrace"]
        assert message == f"RowError: {attrs['exception.message']}"
    others = spans.filter(~pl.col("span_id").is_in(hits["span_id"].implode()))
    assert not any(e["name"] == "exception" for events in others["events"].to_list() for e in events or [])


def test_exception_fault_logs_errors_in_the_spans(exception_run):
    result = exception_run
    spans, hits = _completed(result)
    stored = _stored_logs(result)
    assert stored.filter(pl.col("trace_id").is_null()).height == 0          # every record has its trace context
    logs = stored.filter(pl.col("trace_id").is_in(spans["trace_id"].unique().implode()))
    errors = logs.filter(pl.col("severity_text") == "ERROR")
    # The faulty service: one ERROR with the exception per hit span, in that span.
    raised = errors.filter(pl.col("service") == "account-service")
    assert sorted(raised["span_id"]) == sorted(hits["span_id"])
    assert set(_attribute(raised, "exception.type")) == {"RowError"}
    # Its callers: "call to account-service getprofile failed" in the caller's server span.
    handled = errors.filter(pl.col("service") != "account-service")
    assert set(handled["body"]) == {"call to account-service getprofile failed: HTTP 500"}
    callers = spans.filter(pl.col("span_id").is_in(hits["span_id"].implode())).select("parent_span_id").join(
        spans.select(pl.col("span_id").alias("parent_span_id"), pl.col("parent_span_id").alias("caller")),
        on="parent_span_id")["caller"]
    assert sorted(handled["span_id"]) == sorted(callers)
    # No ERROR in the baseline.
    baseline = set(spans.filter(pl.col("phase") == "baseline")["trace_id"])
    assert not set(errors["trace_id"]) & baseline


# -- early return ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def early_return_run(tmp_path_factory):
    return _run(tmp_path_factory, "recommendation-service", "early-return")


#: What each call of recommendation-service's getrecommended does below its server span: the
#: carousel's first slide (call 10) calls account-service and queries, the second (12) queries.
EXPECTED_CHILDREN = {10: {("getprofile", "client"), ("SELECT", "client")}, 12: {("SELECT", "client")}}
SKIPPED = {10: "getprofile", 12: "query"}


def test_early_return_fault_leaves_out_exactly_the_hit_calls(early_return_run):
    result = early_return_run
    spans, hits = _completed(result)
    assert 500 not in _answers(result)                                     # no error answered
    assert spans.filter((pl.col("status") == "error") & (pl.col("kind") != "producer")).height == 0
    served = spans.filter((pl.col("service") == "recommendation-service") & (pl.col("kind") == "server"))
    children = (spans.filter(pl.col("parent_span_id").is_in(served["span_id"].implode()))
                .group_by("parent_span_id").agg(pl.struct("operation", "kind").alias("children")))
    below = {r["parent_span_id"]: {(c["operation"], c["kind"]) for c in r["children"]} for r in children.to_dicts()}
    incomplete = {}
    for row in served.to_dicts():
        assert row["call"] in EXPECTED_CHILDREN, row
        if below.get(row["span_id"], set()) != EXPECTED_CHILDREN[row["call"]]:
            incomplete[row["span_id"]] = (row["phase"], row["call"], below.get(row["span_id"], set()))
    # Incomplete spans are the problem phase's hit ones, missing what the fault skipped, and nothing else.
    assert set(hits["kind"]) == {"early-return"}
    assert set(incomplete) == set(hits["span_id"])
    skipped = dict(zip(hits["span_id"], hits["skipped"]))
    for span_id, (phase, call, found) in incomplete.items():
        assert phase == "problem" and skipped[span_id] == SKIPPED[call] and found == set(), (span_id, found)
    problem = served.filter(pl.col("phase") == "problem")
    assert HIT_SHARE_BOUNDS[0] <= hits.height / problem.height <= HIT_SHARE_BOUNDS[1], (hits.height, problem.height)
    # account-service served one call fewer per first slide hit.
    profiles = spans.filter((pl.col("service") == "account-service") & (pl.col("kind") == "server")
                            & (pl.col("phase") == "problem"))
    requests = spans.filter((pl.col("operation") == "gethome") & (pl.col("kind") == "server")
                            & (pl.col("phase") == "problem")).height
    assert profiles.height == 2 * requests - int((hits["skipped"] == "getprofile").sum())


def test_early_return_fault_leaves_out_the_log_statement(early_return_run):
    result = early_return_run
    spans, hits = _completed(result)
    logs = _stored_logs(result).filter(pl.col("trace_id").is_in(spans["trace_id"].unique().implode()))
    served = spans.filter((pl.col("service") == "recommendation-service") & (pl.col("kind") == "server"))
    mine = logs.filter(pl.col("span_id").is_in(served["span_id"].implode()))
    lines = pl.Series(_attribute(mine, "code.line.number", "int"))
    per_span = (mine.with_columns(lines.alias("line")).group_by("span_id")
                .agg(pl.col("line").unique().sort().alias("lines")))
    statements = {r["span_id"]: tuple(r["lines"]) for r in per_span.to_dicts()}
    assert set(statements) == set(served["span_id"])                # every span wrote its entering line
    normal = {v for k, v in statements.items() if k not in set(hits["span_id"])}
    faulty = {v for k, v in statements.items() if k in set(hits["span_id"])}
    # Two statements on the normal path, one on the early return's: the missing one is the
    # statement that every other span of the operation ran.
    assert len(normal) == 1 and len(faulty) == 1
    [normal_lines], [faulty_lines] = normal, faulty
    assert len(normal_lines) == 2 and set(faulty_lines) < set(normal_lines)
    assert logs.filter(pl.col("severity_number") >= SEVERITY_ERROR).height == 0       # no ERROR at all
