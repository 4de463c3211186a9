"""No behaviour change on real data: trace tables and patterns results equal the stored fingerprints.

The fingerprints (``real_data.json``) were written by ``make_golden.py`` before the analyses were
moved under one contract; a change that alters them must be intended, and regenerates them.
"""

import json
from pathlib import Path

import pytest

from make_golden import CASES, fingerprints

STORED = json.loads((Path(__file__).parent / "real_data.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_real_data_unchanged(shared_data, case):
    name = case[0]
    got = fingerprints([case], columns=STORED)[name]
    want = STORED[name]
    assert got["endpoint"] == want["endpoint"]
    assert got["table"] == want["table"]
    assert got["patterns"] == want["patterns"]
