"""Write the small example inputs the README's commands read, from the recorded data beside the
repository (``../shared/data``: the Nezha TrainTicket day, MIT licence, see ``LICENSE-nezha``).

Each file is one of the *other* input formats tracesleuth reads, made from real spans of one
minute (the window ending 08:45 on 2023-01-29, a fault's), the first ``REQUESTS`` requests of the
endpoint below:

- ``messages.csv``: the black-box message log of those requests (``tracesleuth paths --messages``),
  each call a CALL and a RETURN between services, without trace ids.
- ``envoy/<service>.log``: per calling service, Envoy's default access-log line of each call it
  made (one proxy per file), the input of ``tracesleuth paths ... --messages`` in a service mesh.
- ``mi-trace.log.gz``: Mi et al.'s trace log (2012, Figure 2: ``T_ID:``, ``FUNC:<method>_start|_end``),
  the input of ``tracesleuth localize --paper``.

Run from the repository's root: ``python examples/make_examples.py``; it rewrites the files (the
same bytes each time).
"""

from __future__ import annotations

import gzip
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from tracesleuth.analyses.paths import messages_from_tables
from tracesleuth.io import read_spans
from tracesleuth.model import build_trace_table

#: The recorded minute and its endpoint.
SOURCE = Path("../shared/data/nezha/trainticket/2023-01-29/trace/08_45_trace.csv.gz")
ENDPOINT = "ts-travel-service:/api/v1/travelservice/trips/left"
#: How many of its requests (the first, by start): small files, every path still seen many times.
REQUESTS = 150
#: The Envoy logs written: the services whose calls are most often made in these requests.
ENVOY_NODES = ("ts-travel-service", "ts-basic-service")


def _stamp(ns: int, *, iso: bool) -> str:
    moment = datetime.fromtimestamp(ns // 10**9, tz=timezone.utc)
    if iso:
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % 10**9 // 10**6:03d}Z"
    return moment.strftime("%Y-%m-%d %H:%M:%S") + f".{ns % 10**9 // 1000:06d}"


def main(out: Path = Path(__file__).parent) -> None:
    spans = pl.from_arrow(read_spans([SOURCE]).spans)
    keep = build_trace_table(spans, endpoint=ENDPOINT).frame.sort("start_ns").head(REQUESTS)["trace_id"]
    mine = spans.filter(pl.col("trace_id").is_in(keep.implode()))
    messages, _ = messages_from_tables([build_trace_table(mine, endpoint=ENDPOINT)])
    messages.write_csv(out / "messages.csv")

    number = {t: k for k, t in enumerate(keep.to_list())}
    events = []
    for r in mine.iter_rows(named=True):
        where = f"T_ID:{number[r['trace_id']]} SERVICE:{r['service']} HOST:{r['instance']} FUNC:{r['operation']}"
        events += [(r["start_ns"], 0, f"[{_stamp(r['start_ns'], iso=False)}] [DEBUG] {where}_start"),
                   (r["end_ns"], 1, f"[{_stamp(r['end_ns'], iso=False)}] [DEBUG] {where}_end")]
    text = "\n".join(line for *_, line in sorted(events, key=lambda e: (e[0], -e[1]))) + "\n"
    (out / "mi-trace.log.gz").write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))

    by_id = {(r["trace_id"], r["span_id"]): r for r in mine.iter_rows(named=True)}
    (out / "envoy").mkdir(exist_ok=True)
    for node in ENVOY_NODES:
        lines = []
        for r in mine.sort("start_ns").iter_rows(named=True):
            parent = by_id.get((r["trace_id"], r["parent_span_id"]))
            if parent is None or parent["service"] != node or r["service"] == node:
                continue
            ms = max((r["end_ns"] - r["start_ns"]) // 10**6, 0)
            lines.append(f'[{_stamp(r["start_ns"], iso=True)}] "POST {r["operation"]} HTTP/1.1" 200 - 0 0 {ms} {ms} '
                         f'"-" "{node}" "{r["trace_id"]}" "{r["service"]}:8080" "{r["instance"]}:8080"')
        (out / "envoy" / f"{node}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
