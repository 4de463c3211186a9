"""Property tests of the JSON-lines log reader: random records, written under random spellings of
the field names that loggers use, read back as written; random damage never crashes the reader,
and every line is a record read or a record rejected."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log_writers import rfc3339
from tracesleuth import schema as S
from tracesleuth.errors import NoLogsError
from tracesleuth.io import RejectLog, iter_log_batches, read_logs
from tracesleuth.io._logs import SEVERITY_BY_NAME, severity_number
from tracesleuth.io.json_lines_logs import DECIMAL_ID_FIELDS, FIELDS

T1 = "4bf92f3577b34da6a3ce929d0e0e4736"

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
#: Spellings a record may use; Datadog's decimal ids and Google's trace path have their own tests.
TRACE_NAMES = [n for n in FIELDS["trace_id"] if n not in DECIMAL_ID_FIELDS and "googleapis" not in n]
SPAN_NAMES = [n for n in FIELDS["span_id"] if n not in DECIMAL_ID_FIELDS and "googleapis" not in n]
BODY_NAMES = list(FIELDS["body"])
LEVEL_NAMES = [n for n in FIELDS["level"] if n != "levelno"]
SERVICE_NAMES = [n for n in FIELDS["service"]]
T_MIN_NS, T_MAX_NS = 1_500_000_000_000_000_000, 1_900_000_000_000_000_000


def hex_id(n_digits: int):
    return st.integers(1, 16 ** n_digits - 1).map(lambda i: f"{i:0{n_digits}x}")


@st.composite
def time_written(draw):
    """(ns, the value a logger writes): RFC 3339 with nanoseconds, epoch ns, ms or s."""
    form = draw(st.sampled_from(["rfc3339", "ns", "ms", "s"]))
    if form == "rfc3339":
        ns = draw(st.integers(T_MIN_NS, T_MAX_NS))
        return ns, rfc3339(ns)
    if form == "ns":
        ns = draw(st.integers(T_MIN_NS, T_MAX_NS))
        return ns, ns
    ms = draw(st.integers(T_MIN_NS // 10**6, T_MAX_NS // 10**6))
    return (ms * 10**6, ms) if form == "ms" else (ms * 10**6, ms / 1000)


def _nested(key: str, value) -> dict:
    """``{"a.b": v}`` as a nested object ``{"a": {"b": v}}`` (ECS writes both)."""
    head, _, rest = key.partition(".")
    return {head: _nested(rest, value) if rest else value}


@st.composite
def records(draw):
    """(JSON object, the row it must read as)."""
    ns, written = draw(time_written())
    trace = draw(st.one_of(st.none(), hex_id(32)))
    span = draw(st.one_of(st.none(), hex_id(16))) if trace else None
    level = draw(st.one_of(st.none(), st.sampled_from(sorted(SEVERITY_BY_NAME)).map(
        lambda n: draw(st.sampled_from([n, n.lower(), n.title()])))))
    body = draw(text)
    service = draw(text.map(str.strip).filter(bool))
    extra = draw(st.dictionaries(st.text("abcdefgh", min_size=1, max_size=6).map(lambda k: "x_" + k),
                                 st.one_of(text, st.integers(-2**63, 2**63 - 1), st.booleans(),
                                           st.floats(allow_nan=False, allow_infinity=False)), max_size=4))
    obj: dict = {}
    pieces = [(draw(st.sampled_from(FIELDS["time"][:6])), written), (draw(st.sampled_from(BODY_NAMES)), body),
              (draw(st.sampled_from(SERVICE_NAMES)), service)]
    if level is not None:
        pieces.append((draw(st.sampled_from(LEVEL_NAMES)), level))
    if trace:
        pieces.append((draw(st.sampled_from(TRACE_NAMES)), trace))
    if span:
        pieces.append((draw(st.sampled_from(SPAN_NAMES)), span))
    for key, value in pieces + list(extra.items()):
        if "." in key and draw(st.booleans()):
            head = key.partition(".")[0]
            if head in obj and not isinstance(obj[head], dict):
                obj[key] = value
                continue
            obj.setdefault(head, {}).update(_nested(key, value)[head])
        else:
            obj[key] = value
    expected = {S.TIME_NS: ns, S.TRACE_ID: trace, S.SPAN_ID: span, S.SERVICE: service,
                S.SEVERITY_NUMBER: severity_number(level) if level else 0, S.SEVERITY_TEXT: level, S.BODY: body,
                S.ATTRIBUTES: sorted(extra.items())}
    return obj, expected


def _value(a: dict):
    for f in ("str", "int", "float", "bool"):
        if a[f] is not None:
            return a[f]
    return None


@SETTINGS
@given(st.lists(records(), min_size=1, max_size=8))
def test_json_lines_read_back_as_written(tmp_path_factory, items):
    path = tmp_path_factory.mktemp("p") / "x.log"
    path.write_bytes(b"".join(orjson.dumps(obj) + b"\n" for obj, _ in items))
    result = read_logs(path, format="json-lines-logs")
    assert result.records_rejected == 0
    rows = result.logs.to_pylist()
    got = [{**{k: r[k] for k in (S.TIME_NS, S.TRACE_ID, S.SPAN_ID, S.SERVICE, S.SEVERITY_NUMBER,
                                S.SEVERITY_TEXT, S.BODY)},
            S.ATTRIBUTES: sorted((a["key"], _value(a)) for a in r[S.ATTRIBUTES])} for r in rows]
    assert got == [e for _, e in items]


@SETTINGS
@given(st.lists(records(), min_size=1, max_size=8), st.integers(0, 2**32 - 1))
def test_damaged_json_lines_never_crash_and_every_line_is_counted(tmp_path_factory, items, seed):
    rng = random.Random(seed)
    data = bytearray(b"".join(orjson.dumps(obj) + b"\n" for obj, _ in items))
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(data))
        action = rng.choice(["cut", "garbage", "invalid-utf8", "newline"])
        if action == "cut":
            del data[at:at + rng.randint(1, 20)]
        elif action == "garbage":
            data[at:at] = bytes(rng.randrange(32, 127) for _ in range(rng.randint(1, 10)))
        elif action == "invalid-utf8":
            data[at:at] = b"\xff\xfe"
        else:
            data[at:at] = b"\n"
    path = tmp_path_factory.mktemp("d") / "x.log"
    path.write_bytes(bytes(data))
    log = RejectLog()
    n_read = sum(b.num_rows for b in iter_log_batches(path, format="json-lines-logs", log=log))
    lines = [line for line in bytes(data).split(b"\n") if line.strip()]
    assert n_read + log.spans_rejected == len(lines)
    assert all(r[4] in (0, 1) for r in log.rows)


def test_datadog_and_google_ids(tmp_path):
    path = tmp_path / "x.log"
    path.write_bytes(orjson.dumps({"time": 1714557600, "msg": "dd", "dd.trace_id": "1234567890123",
                                   "dd.span_id": 987654321}) + b"\n"
                     + orjson.dumps({"timestamp": "2024-05-01T10:00:00Z", "message": "gcp", "severity": "ERROR",
                                     "logging.googleapis.com/trace": f"projects/p/traces/{T1}",
                                     "logging.googleapis.com/spanId": "00f067aa0ba902b7"}) + b"\n")
    rows = read_logs(path).logs.to_pylist()
    assert (rows[0][S.TRACE_ID], rows[0][S.SPAN_ID]) == ("0" * 16 + f"{1234567890123:016x}", f"{987654321:016x}")
    assert (rows[1][S.TRACE_ID], rows[1][S.SPAN_ID], rows[1][S.SEVERITY_NUMBER]) == (
        "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 17)


@pytest.mark.parametrize("member, value, number", [("level", 30, 9), ("level", 50, 17), ("levelno", 40, 17),
                                                   ("level", 17, 17), ("level", "FINE", 6), ("@l", "Warning", 13)])
def test_numeric_and_named_levels(tmp_path, member, value, number):
    path = tmp_path / "x.log"
    path.write_bytes(orjson.dumps({"time": 1714557600, "msg": "m", member: value}) + b"\n")
    assert read_logs(path).logs.column(S.SEVERITY_NUMBER).to_pylist() == [number]


def test_nothing_but_damage_raises(tmp_path):
    path = tmp_path / "x.log"
    path.write_bytes(b"{not json\n")
    with pytest.raises(NoLogsError):
        read_logs(path, format="json-lines-logs")
