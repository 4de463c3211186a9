"""Shared helpers of the report tests: a seeded E-Shopper session whose spans carry script
payloads (in an operation name, an attribute key and value, and an instance), and an HTML
reader that lists tags and script contents."""

from __future__ import annotations

import json
from dataclasses import dataclass
from html.parser import HTMLParser

import pyarrow as pa

from tracesleuth import schema as S
from tracesleuth.evaluation.eshopper import Degradation, simulate_eshopper
from tracesleuth.analyses.patterns import LatencyDegradationPatterns

#: The operation name given to cart-service's ``getcart`` (the RPC degradation A1 delays).
OPERATION_PAYLOAD = "<script>alert(1)</script>getcart"
#: An attribute of every ``getcart`` span: key and value try to close the script element.
ATTRIBUTE_KEY_PAYLOAD = "note</script>"
ATTRIBUTE_PAYLOAD = "</script><script>document.title='PWNED';document.body.dataset.pwned='1'</script>"
#: The instance of every ``getcart`` server span: an element with an event handler.
INSTANCE_PAYLOAD = "<img src=x onerror=\"document.title='PWNED'\">"
TITLE = "Report <test> & checks"
GENERATIONS = 100


@dataclass(frozen=True)
class Analysed:
    """A session with payloads, its trace table, the fitted estimator and its report."""

    spans: pa.Table
    session: object
    table: object
    estimator: LatencyDegradationPatterns
    report: object


def payload_spans(session) -> pa.Table:
    """The session's spans with the payloads put on cart-service's getcart spans."""
    rows = session.spans.to_pylist()
    for r in rows:
        if r[S.OPERATION] == "getcart":
            r[S.OPERATION] = OPERATION_PAYLOAD
            r[S.ATTRIBUTES] = list(r[S.ATTRIBUTES] or []) + [
                {"key": ATTRIBUTE_KEY_PAYLOAD, "str": ATTRIBUTE_PAYLOAD, "int": None, "float": None, "bool": None}]
            if r[S.KIND] == "server":
                r[S.INSTANCE] = INSTANCE_PAYLOAD
    return pa.Table.from_pylist(rows, schema=S.SPAN_SCHEMA)


def simulated_session(n_requests: int = 400):
    """A seeded session where A1 delays getcart and A2 two other RPCs."""
    return simulate_eshopper(n_requests=n_requests, random_state=3, degradations=[
        Degradation("A1", ("cart-service:getcart",)),
        Degradation("A2", ("web-service:gethome", "categories-service:getbrands"))])


class Elements(HTMLParser):
    """Start tags with their attributes, and the text inside each ``<script>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in_script: dict | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))

    def handle_data(self, data):
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None


def parse(page: str) -> Elements:
    p = Elements()
    p.feed(page)
    p.close()
    return p


def figure_specs(page: str) -> list[dict]:
    """The JSON of every figure data block of a page (not the shared templates' block)."""
    return [json.loads(text) for attrs, text in parse(page).scripts
            if attrs.get("type") == "application/json" and attrs.get("class") == "ts-figure"]


def strings(value):
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)
