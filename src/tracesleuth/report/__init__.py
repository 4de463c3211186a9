"""HTML reports: one self-contained file of sections, tables and plotly figures, opened offline.

* :class:`Report` collects sections and renders (:meth:`Report.to_html`, :meth:`Report.write`);
* :class:`Section` is built from parts (:class:`Text`, :class:`Table`, :class:`KeyValues`,
  :class:`Bullets`, :class:`Figure`), any of which escape every string they hold; any object
  with ``title``, ``anchor`` and ``render(context)`` (:class:`SectionLike`) is a section too;
* :func:`input_section` - what was read, rejected and repaired, common to every analysis; each
  analysis builds its own sections from its result (:mod:`tracesleuth.report.sections`);
* :mod:`tracesleuth.report.figures` - the plotly figures, built from results.

See :mod:`tracesleuth.report.document` for how escaping is guaranteed.
"""

from .document import (
    Bullets,
    Code,
    Details,
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
__all__ = [
    "Bullets", "Code", "Details", "Figure", "KeyValues", "Part", "RenderContext", "Report", "Section", "SectionLike", "Strong",
    "Swatch", "Table", "Text", "escape", "input_section", "plot_text", "script_json",
]
