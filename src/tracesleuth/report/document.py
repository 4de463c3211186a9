"""The report document: sections of escaped content and plotly figures, rendered to one HTML file.

A :class:`Report` is a title and a list of sections; a section is anything with a ``title``, an
``anchor`` and a ``render(context) -> str`` (the :class:`SectionLike` protocol). The ready-made
:class:`Section` is built from *parts* - :class:`Text`, :class:`Table`, :class:`KeyValues`,
:class:`Bullets`, :class:`Figure` - so an analysis adds a section without writing any markup.

Escaping rule
-------------
Every string a part holds is text, never markup: it is escaped with :func:`html.escape` when
rendered. The only markup is the document's own (tags written in this module). Plotly figures
are embedded as JSON inside ``<script type="application/json">`` data blocks (their templates,
the same for most figures, in one shared block), where ``<``, ``>``
and ``&`` are written as ``\\u003c``, ``\\u003e``, ``\\u0026`` (and U+2028/U+2029 as escapes), so
no string in a figure can close the block or open a tag; one inline script draws them. Strings
a figure shows that come from traces are HTML-escaped by the figure's builder too (plotly reads
a few tags such as ``<b>`` in its text; escaped, they show literally). A Content-Security-Policy
in the page admits only the page's own scripts, by their SHA-256 hashes, and no network access,
so even a script that got into the page would neither run nor load anything.

The file is self-contained: plotly.js is embedded once, inline, and nothing is fetched when the
page opens. The plotly.js embedded is a partial bundle of the release the plotly package ships -
the core (scatter, every layout component) plus the ``bar`` and ``heatmap`` traces
(:data:`PARTIAL_TRACE_TYPES`), 1.2 MB instead of 4.8 MB (built by ``tools/plotly-bundle``) - or,
when a figure uses another trace type or the plotly package moved to another plotly.js release,
the full bundle (:func:`plotly.offline.get_plotlyjs`): a page never lacks what it draws.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import numbers
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Protocol, Sequence, runtime_checkable

from .._text import shorten

__all__ = [
    "Bullets", "Code", "Details", "Figure", "KeyValues", "Part", "RenderContext", "Report", "Section", "SectionLike",
    "Strong", "Swatch", "Table", "Text", "escape", "plot_text", "plotly_js", "script_json", "shorten",
]

#: Placeholder for a missing value in tables.
MISSING = "—"
#: The partial plotly.js bundle (``tools/plotly-bundle``) and the trace types it draws.
PARTIAL_BUNDLE = Path(__file__).with_name("vendor") / "plotly-report.min.js"
PARTIAL_TRACE_TYPES = frozenset({"scatter", "bar", "heatmap"})


# ============================================================================================
# Escaping
# ============================================================================================


def escape(value: Any) -> str:
    """``str(value)`` escaped for HTML text and attribute values (``& < > " '``)."""
    return html.escape(str(value), quote=True)


def plot_text(value: Any) -> str:
    """A string shown by a plotly figure (hover text, tick or legend label, title), escaped.

    Plotly interprets a few tags (``<b>``, ``<br>``, ``<a href>``) in its text and decodes
    entities after it has split the tags, so an escaped string is shown exactly as it was.
    """
    return html.escape(str(value), quote=False)


_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")


def script_json(text: str) -> str:
    """JSON text made safe to place inside a ``<script>`` element.

    ``<``, ``>``, ``&``, U+2028 and U+2029 only occur inside JSON strings, where their ``\\uXXXX``
    escapes mean the same characters, so the JSON value is unchanged while ``</script>`` or
    ``<!--`` can no longer appear.
    """
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group(0)], text)


def _css_color(color: str) -> str:
    """A colour from the report's own palettes (``#rrggbb`` or ``rgb(...)``/``rgba(...)``)."""
    if not re.fullmatch(r"#[0-9a-fA-F]{3,8}|rgba?\([0-9., ]+\)", color):
        raise ValueError(f"not a CSS colour of the report's palettes: {color!r}")
    return color


# ============================================================================================
# Inline fragments and parts
# ============================================================================================


@dataclass(frozen=True)
class Code:
    """Inline code (an operation key, an attribute value): shown in a monospace font."""

    text: str


@dataclass(frozen=True)
class Strong:
    """Emphasised inline text."""

    text: str


@dataclass(frozen=True)
class Swatch:
    """A small square of ``color`` before ``text``, to tie a table row to a figure's colour.

    Parameters
    ----------
    color : str
        ``#rrggbb`` or ``rgb(...)``/``rgba(...)`` (the report's own palettes only).
    text : str, default=""
    """

    color: str
    text: str = ""


Fragment = Any  # str, number, None, Code, Strong, Swatch or a sequence of them


def render_fragment(value: Fragment) -> str:
    """Escaped HTML of an inline value: text, a number (formatted), None (a dash) or a fragment."""
    if value is None:
        return MISSING
    if isinstance(value, Code):
        return f"<code>{escape(value.text)}</code>"
    if isinstance(value, Strong):
        return f"<strong>{escape(value.text)}</strong>"
    if isinstance(value, Swatch):
        return (f'<span class="swatch" style="background:{escape(_css_color(value.color))}"></span>'
                f"{escape(value.text)}")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        v = float(value)
        return MISSING if math.isnan(v) else f"{v:.3f}"
    if isinstance(value, (list, tuple)):
        return "".join(render_fragment(v) for v in value)
    return escape(value)


def _is_numeric(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class RenderContext:
    """State shared by the parts of one rendering: unique element ids and the figures drawn."""

    def __init__(self) -> None:
        self.n_figures = 0
        self.trace_types: set[str] = set()
        self.templates: list[str] = []
        self._ids: set[str] = set()

    def template_index(self, template_json: str) -> int:
        """Index of a plotly template (its JSON) in :attr:`templates`, added when new."""
        if template_json not in self.templates:
            self.templates.append(template_json)
        return self.templates.index(template_json)

    def unique_id(self, base: str) -> str:
        """An element id made from ``base`` (letters, digits, ``-``), unique in the document."""
        slug = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-") or "part"
        candidate, k = slug, 2
        while candidate in self._ids:
            candidate, k = f"{slug}-{k}", k + 1
        self._ids.add(candidate)
        return candidate


@runtime_checkable
class Part(Protocol):
    """A block of a section: renders itself to escaped HTML."""

    def render(self, context: RenderContext) -> str:
        """The part's HTML."""


@dataclass(frozen=True)
class Text:
    """A paragraph.

    Parameters
    ----------
    content : str or sequence of fragments
        Text (escaped), or a sequence of strings, numbers, :class:`Code`, :class:`Strong` and
        :class:`Swatch` rendered one after the other.
    muted : bool, default=False
        A secondary remark (smaller, grey).
    """

    content: Fragment
    muted: bool = False

    def render(self, context: RenderContext) -> str:
        cls = ' class="muted"' if self.muted else ""
        return f"<p{cls}>{render_fragment(self.content)}</p>"


@dataclass(frozen=True)
class Bullets:
    """A bulleted list; each item is a fragment (see :class:`Text`)."""

    items: Sequence[Fragment]

    def render(self, context: RenderContext) -> str:
        if not self.items:
            return ""
        return "<ul>" + "".join(f"<li>{render_fragment(i)}</li>" for i in self.items) + "</ul>"


@dataclass(frozen=True)
class KeyValues:
    """A two-column list of named values (numbers are formatted, ``None`` shows a dash)."""

    items: Sequence[tuple[str, Fragment]]

    def render(self, context: RenderContext) -> str:
        rows = "".join(f"<tr><th>{escape(k)}</th><td>{render_fragment(v)}</td></tr>" for k, v in self.items)
        return f'<table class="kv"><tbody>{rows}</tbody></table>'


@dataclass(frozen=True)
class Table:
    """A table of values; numeric columns are right-aligned.

    Parameters
    ----------
    columns : sequence of str
        Column headers.
    rows : sequence of sequence
        Cells: fragments (see :class:`Text`); floats are shown with 3 decimals, ints with
        thousands separators, ``None`` as a dash.
    caption : str, optional
    """

    columns: Sequence[str]
    rows: Sequence[Sequence[Fragment]]
    caption: str | None = None

    def __post_init__(self) -> None:
        widths = {len(r) for r in self.rows}
        if widths - {len(self.columns)}:
            raise ValueError(f"Table rows must have {len(self.columns)} cells (the columns). "
                             f"Got rows of {sorted(widths)} cells instead.")

    def render(self, context: RenderContext) -> str:
        numeric = [bool(self.rows) and all(_is_numeric(r[j]) or r[j] is None for r in self.rows)
                   and any(_is_numeric(r[j]) for r in self.rows) for j in range(len(self.columns))]
        num = ' class="num"'
        head = "".join(f"<th{num if n else ''}>{escape(c)}</th>" for c, n in zip(self.columns, numeric))
        body = "".join(
            "<tr>" + "".join(f"<td{num if n else ''}>{render_fragment(v)}</td>" for v, n in zip(row, numeric))
            + "</tr>" for row in self.rows)
        caption = f"<caption>{escape(self.caption)}</caption>" if self.caption else ""
        return f'<div class="table-wrap"><table class="data">{caption}<thead><tr>{head}</tr></thead>' \
               f"<tbody>{body}</tbody></table></div>"


@dataclass(frozen=True)
class Details:
    """Parts folded under a one-line summary, opened by a click (an HTML ``<details>`` element).

    Parameters
    ----------
    summary : str or sequence of fragments
        The line shown while folded (see :class:`Text`).
    parts : sequence of Part
        Rendered inside, in order (figures are drawn at full width when opened).
    """

    summary: Fragment
    parts: Sequence[Any] = ()

    def render(self, context: RenderContext) -> str:
        inner = "\n".join(p.render(context) for p in self.parts)
        return f"<details><summary>{render_fragment(self.summary)}</summary>{inner}</details>"


#: Plotly configuration of every figure: no logo, no cloud link, responsive width.
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "showSendToCloud": False,
                 "toImageButtonOptions": {"format": "png", "scale": 2}}


@dataclass(frozen=True)
class Figure:
    """A plotly figure, embedded as escaped JSON (see the module's escaping rule).

    Parameters
    ----------
    figure : plotly.graph_objects.Figure
        Its trace-derived strings must already be escaped with :func:`plot_text`.
    caption : str, optional
    height_px : int, optional
        Height of the plot; default the figure layout's height, else 420.
    """

    figure: Any
    caption: str | None = None
    height_px: int | None = None

    def trace_types(self) -> set[str]:
        """The plotly trace types of the figure (``"bar"``, ``"scatter"``...)."""
        return {getattr(t, "type", None) or "scatter" for t in self.figure.data}

    def spec_json(self, context: RenderContext | None = None) -> str:
        """The figure's ``{"figure": {"data", "layout"}, "config"}`` as JSON safe inside a script element.

        With a ``context``, the layout's template (plotly's styling, 7 KB each) is left out and
        referenced by its index in ``context.templates`` (``"template": k``): the page holds
        each distinct template once.
        """
        import json

        import plotly.io as pio

        spec = json.loads(pio.to_json(self.figure, validate=False, pretty=False, engine="json"))
        template = spec.get("layout", {}).pop("template", None) if context is not None else None
        out = {"figure": spec, "config": PLOTLY_CONFIG}
        if template is not None:
            out["template"] = context.template_index(_json(template))
        return script_json(_json(out))

    def render(self, context: RenderContext) -> str:
        context.n_figures += 1
        context.trace_types |= self.trace_types()
        fid = context.unique_id(f"figure-{context.n_figures}")
        height = self.height_px or self.figure.layout.height or 420
        caption = f"<figcaption>{escape(self.caption)}</figcaption>" if self.caption else ""
        return (f'<figure class="plot"><div class="plot-area" id="{fid}" style="height:{int(height)}px"></div>'
                f'<script type="application/json" class="ts-figure" data-target="{fid}">{self.spec_json(context)}'
                '</script>'
                f"{caption}</figure>")


def _json(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), allow_nan=False)


# ============================================================================================
# Sections and the report
# ============================================================================================


@runtime_checkable
class SectionLike(Protocol):
    """What a :class:`Report` needs of a section: a title, an anchor and its rendered body."""

    title: str

    @property
    def anchor(self) -> str:
        """Id of the section in the page (for the table of contents)."""

    def render(self, context: RenderContext) -> str:
        """The section's body (escaped HTML, without its heading)."""


@dataclass
class Section:
    """A titled section made of parts.

    Parameters
    ----------
    title : str
    parts : list of Part, optional
        Rendered in order; add more with :meth:`add`.
    key : str, optional
        Stable name of the section (its anchor); default from the title.

    Examples
    --------
    >>> s = Section("Latency").add(Text("Requests by latency.")).add(Table(["p50"], [[12.5]]))
    >>> "<table" in Report("Demo", sections=[s]).to_html()
    True
    """

    title: str
    parts: list = field(default_factory=list)
    key: str | None = None

    @property
    def anchor(self) -> str:
        """Id of the section in the page: ``key`` (or the title) in lower case, runs of other
        characters than letters and digits replaced by ``-``."""
        return re.sub(r"[^a-z0-9]+", "-", (self.key or self.title).lower()).strip("-") or "section"

    def add(self, *parts: Part) -> "Section":
        """Append parts; returns the section (chainable)."""
        for p in parts:
            if not isinstance(p, Part):
                raise TypeError(f"a section part must have render(context); got {type(p).__name__}")
            self.parts.append(p)
        return self

    def render(self, context: RenderContext) -> str:
        return "\n".join(p.render(context) for p in self.parts)


_CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg-alt:#f6f8fa;--accent:#0969da}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",Helvetica,Arial,sans-serif;
  color:var(--fg);background:#fff}
header{padding:24px 32px 8px;border-bottom:1px solid var(--line)}
header h1{margin:0 0 4px;font-size:26px}
header p{margin:0 0 8px;color:var(--muted)}
nav{padding:8px 32px;border-bottom:1px solid var(--line);background:var(--bg-alt);font-size:14px}
nav a{color:var(--accent);text-decoration:none;margin-right:18px}
main{max-width:1280px;padding:8px 32px 48px}
section{margin-top:28px}
h2{font-size:20px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:16px;margin:20px 0 6px}
code{font:13px/1.4 "DejaVu Sans Mono",Menlo,Consolas,monospace;background:var(--bg-alt);padding:1px 4px;
  border-radius:4px;word-break:break-all}
.muted{color:var(--muted);font-size:13px}
table{border-collapse:collapse;font-size:14px}
.table-wrap{overflow-x:auto;margin:8px 0 16px}
table.data th,table.data td{border:1px solid var(--line);padding:5px 9px;text-align:left;vertical-align:top}
table.data thead th{background:var(--bg-alt)}
table.data td.num,table.data th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.data caption{caption-side:top;text-align:left;color:var(--muted);padding-bottom:4px}
table.kv{margin:8px 0 16px}
table.kv th{text-align:left;font-weight:600;padding:3px 18px 3px 0;vertical-align:top}
table.kv td{padding:3px 0;font-variant-numeric:tabular-nums}
.swatch{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
figure.plot{margin:8px 0 20px}
details{margin:6px 0 14px}
details>summary{cursor:pointer;color:var(--accent)}
figure.plot figcaption{color:var(--muted);font-size:13px;margin-top:2px}
.plot-area{width:100%;border:1px solid var(--line);border-radius:6px}
footer{color:var(--muted);font-size:12px;padding:16px 32px;border-top:1px solid var(--line)}
"""

#: Draws every figure from its JSON data block (the one script of the page besides plotly.js).
_BOOTSTRAP = """(function () {
  var shared = document.querySelector('script.ts-templates[type="application/json"]');
  var templates = shared ? JSON.parse(shared.textContent) : [];
  var blocks = document.querySelectorAll('script.ts-figure[type="application/json"]');
  for (var i = 0; i < blocks.length; i++) {
    var spec = JSON.parse(blocks[i].textContent);
    var target = document.getElementById(blocks[i].getAttribute('data-target'));
    if (spec.template !== undefined) spec.figure.layout.template = templates[spec.template];
    Plotly.newPlot(target, spec.figure.data || [], spec.figure.layout || {}, spec.config).then(function (gd) {
      gd.style.height = 'auto';  // the plot's own height from now on (depth buttons change it)
    });
  }
  document.addEventListener('toggle', function (event) {  // a plot drawn folded gets its width when opened
    if (!event.target.open) return;
    var plots = event.target.querySelectorAll('.plot-area');
    for (var k = 0; k < plots.length; k++) Plotly.Plots.resize(plots[k]);
  }, true);
})();"""


def plotly_js(trace_types: Iterable[str] = ()) -> tuple[str, str]:
    """The plotly.js to embed for figures of ``trace_types``, and which it is.

    Returns
    -------
    code : str
    name : {"partial", "full"}
        The partial bundle (:data:`PARTIAL_BUNDLE`) when it draws every type and was built from
        the plotly.js release of the installed plotly package; else the package's full bundle.
    """
    if set(trace_types) <= PARTIAL_TRACE_TYPES:
        code = _partial_bundle()
        if code is not None:
            return code, "partial"
    from plotly.offline import get_plotlyjs

    return get_plotlyjs(), "full"


@lru_cache(maxsize=1)
def _partial_bundle() -> str | None:
    """The partial bundle's code, or None when missing or of another release than plotly's."""
    from plotly.offline import get_plotlyjs_version

    try:
        code = PARTIAL_BUNDLE.read_text(encoding="utf-8")
    except OSError:
        return None
    header = re.match(r"/\*! plotly\.js (\S+) ", code)
    return code if header and header.group(1) == get_plotlyjs_version() else None


def _sha256_source(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


class Report:
    """An HTML report: a title and sections, rendered to one self-contained file.

    Parameters
    ----------
    title : str
    subtitle : str, optional
        A line under the title (what was analysed).
    sections : iterable of SectionLike, optional
    footer : str, optional
        A line at the bottom (e.g. the tool and version).

    Examples
    --------
    >>> report = Report("Latency report").add(Section("Notes").add(Text("<b> is shown as text")))
    >>> "&lt;b&gt; is shown as text" in report.to_html()
    True
    """

    def __init__(self, title: str, *, subtitle: str | None = None, sections: Iterable[SectionLike] = (),
                 footer: str | None = None) -> None:
        self.title = title
        self.subtitle = subtitle
        self.footer = footer
        self._sections: list[SectionLike] = []
        for s in sections:
            self.add(s)

    @property
    def sections(self) -> tuple[SectionLike, ...]:
        """The sections, in order."""
        return tuple(self._sections)

    def add(self, section: SectionLike) -> "Report":
        """Append a section; returns the report (chainable).

        Raises
        ------
        TypeError
            When ``section`` lacks ``title``, ``anchor`` or ``render``.
        """
        return self.insert(len(self._sections), section)

    def insert(self, position: int, section: SectionLike) -> "Report":
        """Insert a section before the one at ``position`` (0: first); returns the report.

        Raises
        ------
        TypeError
            When ``section`` lacks ``title``, ``anchor`` or ``render``.
        """
        if not isinstance(section, SectionLike):
            raise TypeError(f"a report section needs title, anchor and render(context); "
                            f"got {type(section).__name__}")
        self._sections.insert(position, section)
        return self

    def to_html(self) -> str:
        """The whole page as one string (plotly.js inline when any section has a figure)."""
        context = RenderContext()
        bodies = []
        nav = []
        for s in self._sections:
            anchor = context.unique_id(s.anchor)
            nav.append(f'<a href="#{anchor}">{escape(s.title)}</a>')
            bodies.append(f'<section id="{anchor}"><h2>{escape(s.title)}</h2>\n{s.render(context)}\n</section>')
        scripts: list[str] = []
        if context.n_figures:
            code, _ = plotly_js(context.trace_types)
            if "</script" in code.lower():  # pragma: no cover - would break the page
                raise RuntimeError("the plotly.js bundle contains '</script' and cannot be inlined")
            scripts = [code, _BOOTSTRAP]
        csp = ("default-src 'none'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; "
               "script-src " + (" ".join(_sha256_source(s) for s in scripts) if scripts else "'none'"))
        subtitle = f"<p>{escape(self.subtitle)}</p>" if self.subtitle else ""
        footer = f"<footer>{escape(self.footer)}</footer>" if self.footer else ""
        head = ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
                f'<meta http-equiv="Content-Security-Policy" content="{escape(csp)}">\n'
                '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
                f"<title>{escape(self.title)}</title>\n<style>{_CSS}</style>\n")
        plotly_tag = f"<script>{scripts[0]}</script>\n" if scripts else ""
        if context.templates:
            plotly_tag += ('<script type="application/json" class="ts-templates">'
                           + script_json("[" + ",".join(context.templates) + "]") + "</script>\n")
        bootstrap = f"<script>{scripts[1]}</script>\n" if scripts else ""
        return (head + plotly_tag + "</head>\n<body>\n"
                f"<header><h1>{escape(self.title)}</h1>{subtitle}</header>\n"
                f"<nav>{''.join(nav)}</nav>\n<main>\n" + "\n".join(bodies) + "\n</main>\n"
                + footer + "\n" + bootstrap + "</body>\n</html>\n")

    def write(self, path) -> Path:
        """Write the page to ``path`` (UTF-8; parent directories created); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_html(), encoding="utf-8")
        tmp.replace(path)
        return path
