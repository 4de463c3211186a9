"""HTML reports: one self-contained file of sections, tables and plotly figures, opened offline.

* :class:`Report` collects sections and renders (:meth:`Report.to_html`, :meth:`Report.write`);
* :class:`Section` is built from parts (:class:`Text`, :class:`Table`, :class:`KeyValues`,
  :class:`Bullets`, :class:`Figure`), any of which escape every string they hold; any object
  with ``title``, ``anchor`` and ``render(context)`` (:class:`SectionLike`) is a section too;
* :func:`build_patterns_report` - the report of the latency-degradation-pattern analysis, whose
  sections (:mod:`tracesleuth.report.patterns`, :func:`input_section`) other reports can reuse;
* :mod:`tracesleuth.report.figures` - the plotly figures, built from results.

See :mod:`tracesleuth.report.document` for how escaping is guaranteed.
"""

from .document import (
    Bullets,
    Code,
    Figure,
    KeyValues,
    Part,
    RenderContext,
    Report,
    Section,
    SectionLike,
    Strong,
    Swatch,
    Table,
    Text,
    escape,
    plot_text,
    script_json,
)
from .input import input_section
from .patterns import (
    build_patterns_report,
    example_requests_section,
    ground_truth_section,
    latency_distribution_section,
    patterns_section,
    resolve_patterns,
    summary_section,
)

__all__ = [
    "Bullets", "Code", "Figure", "KeyValues", "Part", "RenderContext", "Report", "Section", "SectionLike", "Strong",
    "Swatch", "Table", "Text", "build_patterns_report", "escape", "example_requests_section", "ground_truth_section",
    "input_section", "latency_distribution_section", "patterns_section", "plot_text", "resolve_patterns",
    "script_json", "summary_section",
]
