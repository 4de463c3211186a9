"""Fingerprints of trace tables and latency-degradation-pattern results on real recorded traces.

``python tests/golden/make_golden.py`` writes ``real_data.json`` beside it; ``test_golden.py``
asserts that the current code gives the same fingerprints. Regenerate only for an intended
change of behaviour, and say so in the commit.

A table's fingerprint is a SHA-256 of its columns that existed when the file was written (new
columns may be added without changing it), rows in trace-id order; a patterns result's is its
``to_dict()`` with timings left out.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[2] / "shared" / "data" / "nezha"

#: (name, files relative to DATA, endpoint or None, patterns settings)
CASES = [
    ("trainticket-08", "trainticket/2023-01-29/trace/08_4*_trace.csv.gz", None, {"solver": "bnb"}),
    ("trainticket-08-trips-left", "trainticket/2023-01-29/trace/08_4*_trace.csv.gz",
     "ts-travel-service:/api/v1/travelservice/trips/left", {"solver": "ga", "generations": 60, "random_state": 0}),
    ("onlineboutique", "onlineboutique/2022-08-22/trace/*_trace.csv.gz", None,
     {"solver": "ga", "generations": 60, "random_state": 0}),
]


def table_fingerprint(frame: pl.DataFrame, columns: list[str] | None = None) -> dict:
    """Columns and a SHA-256 of their values (rows sorted by trace id, then span id)."""
    columns = list(frame.columns) if columns is None else columns
    f = frame.select(columns).sort("trace_id", "span_id")
    digest = hashlib.sha256()
    for name in columns:
        digest.update(name.encode())
        digest.update(f[name].cast(pl.String).fill_null("<null>").str.join("\x1f").item().encode())
    return {"columns": columns, "rows": f.height, "sha256": digest.hexdigest()}


def fingerprints(cases=CASES, columns: dict | None = None) -> dict:
    """Fingerprints of every case (``columns``: the table columns to hash, per case)."""
    from tracesleuth.io import read_spans
    from tracesleuth.model import build_trace_table
    try:
        from tracesleuth.analyses.patterns import LatencyDegradationPatterns
    except ImportError:  # before the analyses/ layout
        from tracesleuth.analyses.patterns import LatencyDegradationPatterns

    out = {}
    for name, pattern, endpoint, settings in cases:
        files = sorted(str(p) for p in DATA.glob(pattern))
        table = build_trace_table(read_spans(files), endpoint)
        result = LatencyDegradationPatterns(**settings).fit(table).result_.to_dict()
        result.pop("seconds", None)
        out[name] = {"files": len(files), "endpoint": table.endpoint,
                     "table": table_fingerprint(table.frame, None if columns is None else columns[name]["table"]["columns"]),
                     "patterns": result}
    return out


if __name__ == "__main__":
    doc = fingerprints()
    (HERE / "real_data.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print({k: (v["table"]["rows"], len(v["table"]["columns"]), v["patterns"]["found"]) for k, v in doc.items()},
          file=sys.stderr)
