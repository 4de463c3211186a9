"""The report document: parts escape what they hold, figures embed as inert JSON, one offline file."""

from __future__ import annotations

import json
import re

import plotly.graph_objects as go
import pytest
from report_support import parse

from tracesleuth.report import (
    Bullets, Code, Details, Figure, KeyValues, Report, Section, SectionLike, Strong, Swatch, Table, Text, script_json,
)

EVIL = "</script><script>alert(1)</script><!-- & \u2028"


def test_script_json_keeps_the_value_and_removes_markup():
    text = json.dumps({"s": EVIL, "n": [1, 2.5]})
    safe = script_json(text)
    assert json.loads(safe) == json.loads(text)
    assert not re.search(r"[<>&\u2028\u2029]", safe)


def test_parts_escape_every_string():
    section = Section(EVIL).add(
        Text([EVIL, Code(EVIL), Strong(EVIL), Swatch("#123456", EVIL)]),
        Table([EVIL, "n"], [[EVIL, 3], [Code(EVIL), None]], caption=EVIL),
        KeyValues([(EVIL, EVIL)]),
        Bullets([EVIL]),
        Details([EVIL, Strong(EVIL)], [Text(EVIL), Bullets([EVIL])]),
    )
    page = Report(EVIL, subtitle=EVIL, sections=[section], footer=EVIL).to_html()
    tags = parse(page)
    assert [t for t, _ in tags.tags].count("script") == 0       # no figure: no script at all
    assert "<script>alert" not in page and "&lt;/script&gt;&lt;script&gt;alert(1)" in page
    assert page.count("<details><summary>") == 1 and page.count("</details>") == 1
    csp = next(a["content"] for t, a in tags.tags if t == "meta" and a.get("http-equiv"))
    assert "script-src 'none'" in csp


def test_swatch_rejects_anything_but_a_colour():
    with pytest.raises(ValueError, match="CSS colour"):
        Report("t", sections=[Section("s").add(Text(Swatch("red;background:url(x)")))]).to_html()


def test_table_checks_row_width_and_aligns_numbers():
    with pytest.raises(ValueError, match="2 cells"):
        Table(["a", "b"], [[1]])
    html = Table(["name", "count"], [["x", 1_234], ["y", None]]).render(None)
    assert '<td class="num">1,234</td>' in html and "<td>x</td>" in html and "—" in html


def test_figure_is_embedded_as_inert_json_and_drawn_by_one_script():
    fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4], name=EVIL, hovertext=[EVIL, "ok"]))
    page = Report("figures", sections=[Section("a").add(Figure(fig)), Section("b").add(Figure(fig))]).to_html()
    tags = parse(page)
    scripts = tags.scripts
    data = [(a, t) for a, t in scripts if a.get("type") == "application/json" and a.get("class") == "ts-figure"]
    shared = [t for a, t in scripts if a.get("type") == "application/json" and a.get("class") == "ts-templates"]
    code = [(a, t) for a, t in scripts if a.get("type") is None]
    assert len(data) == 2 and len(code) == 2           # plotly.js and the bootstrap
    assert "Plotly" in code[0][1] and "Plotly.newPlot" in code[1][1]
    # The figures' plotly template (7 KB) is held once, and referenced by both.
    assert len(shared) == 1 and len(json.loads(shared[0])) == 1
    for attrs, text in data:
        spec = json.loads(text)
        assert spec["figure"]["data"][0]["name"] == EVIL    # the value survives, escaped only as JSON
        assert spec["template"] == 0 and "template" not in spec["figure"]["layout"]
        assert "<" not in text and ">" not in text and "&" not in text
        assert re.fullmatch(r"figure-\d+", attrs["data-target"])
        assert any(a.get("id") == attrs["data-target"] for t, a in tags.tags if t == "div")
    # Only the page's own scripts may run (by hash); nothing may be fetched.
    csp = next(a["content"] for t, a in tags.tags if t == "meta" and a.get("http-equiv"))
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"].count("'sha256-") == 2 and "unsafe" not in directives["script-src"]


def test_no_external_reference():
    fig = go.Figure(go.Scatter(x=[1], y=[1]))
    tags = parse(Report("t", sections=[Section("s").add(Figure(fig))]).to_html())
    for tag, attrs in tags.tags:
        for key in ("src", "href"):
            assert not re.match(r"\s*(https?:)?//", attrs.get(key) or ""), (tag, attrs)
    assert not any(t == "link" for t, _ in tags.tags)


class Custom:
    """A section written by hand: the protocol, not the dataclass."""

    title = "Custom <section>"
    anchor = "custom"

    def render(self, context):
        return Text("hand-made").render(context)


def test_any_section_like_object_is_accepted_and_anchored():
    report = Report("r").add(Section("Same")).add(Section("Same")).add(Custom())
    assert isinstance(Custom(), SectionLike)
    page = report.to_html()
    assert 'id="same"' in page and 'id="same-2"' in page and 'href="#custom"' in page
    assert "Custom &lt;section&gt;" in page and "hand-made" in page
    with pytest.raises(TypeError, match="title, anchor and render"):
        report.add(object())
    with pytest.raises(TypeError, match="render"):
        Section("x").add("not a part")


def test_write_creates_one_file(tmp_path):
    path = Report("r", sections=[Section("s").add(Text("t"))]).write(tmp_path / "sub" / "r.html")
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in path.parent.iterdir()] == ["r.html"]


def test_the_partial_plotly_bundle_is_embedded_when_it_draws_every_figure():
    from plotly.offline import get_plotlyjs_version

    from tracesleuth.report.document import PARTIAL_BUNDLE, plotly_js

    # Built from the plotly.js release the plotly package ships (else: rebuild, tools/plotly-bundle).
    assert PARTIAL_BUNDLE.read_text().startswith(f"/*! plotly.js {get_plotlyjs_version()} ")
    code, name = plotly_js({"bar", "scatter", "heatmap"})
    assert name == "partial" and 1_000_000 < len(code) < 1_300_000
    bars = Report("t", sections=[Section("s").add(Figure(go.Figure(go.Bar(x=[1], y=[1]))))]).to_html()
    assert code in bars and len(bars) < 1_300_000
    # A trace type the partial bundle lacks: the full bundle, so that the figure is drawn.
    assert plotly_js({"bar", "sunburst"})[1] == "full"
    pie = Report("t", sections=[Section("s").add(Figure(go.Figure(go.Pie(values=[1, 2]))))]).to_html()
    assert len(pie) > 4_000_000


def test_insert_places_a_section():
    report = Report("r").add(Section("b")).insert(0, Section("a"))
    assert [s.title for s in report.sections] == ["a", "b"]
