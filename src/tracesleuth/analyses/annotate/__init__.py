"""Performance annotations (Rogora et al., HotCloud 2017): learned per-operation performance models.

For every operation and metric (time, self time, memory), a human-readable probabilistic model of
the metric against one input feature: **correlated** (a polynomial of a feature, normal noise),
**clustered** (a mixture of normal clusters) or **constant**. Derived from traces
(:class:`PerformanceAnnotations`), written to and read from YAML or JSON files
(:func:`save_annotations`, :func:`load_annotations`), checked against new runs as assertions
(``PerformanceAnnotations(annotations=...)``), and composed along the call graph to answer what-if
questions (:meth:`PerformanceAnnotations.what_if`). Python code is measured for them by
:mod:`tracesleuth.instrument`.

Beyond the paper (issue 30): each annotation carries how much its windows of calls vary between
periods (:mod:`.calibration`, a random-effects model), clusters are a normal mixture chosen by
BIC, assertions are one-sided and adjusted together (Benjamini-Hochberg), and a check ranks the
services its failing annotations point to (:mod:`.services`) and shows per period since when each
fails.

Modules: :mod:`.model` (the annotations), :mod:`.fileformat`, :mod:`.measurements` (calls and
their features from trace tables), :mod:`.derive`, :mod:`.calibration`, :mod:`.check`,
:mod:`.services`, :mod:`.predict`,
:mod:`.analysis` (estimator and result), :mod:`.workload` (a SQLite file-hosting service, for
the paper's Section 5), :mod:`.synthetic`. Its report section, command and evaluation live in
their layers: :mod:`tracesleuth.report.sections.annotate`, :mod:`tracesleuth.cli.commands.annotate`,
:mod:`tracesleuth.evaluation.protocols.annotate` (the paper's Section 5 on :mod:`.workload`).
"""

from ..._lazy import lazy_exports

__all__ = ["AnnotationFileError", "AnnotationSet", "AnnotationsResult", "PerformanceAnnotations", "Prediction",
           "load_annotations", "save_annotations"]

# Imported on first use: the CLI registers this analysis's command without importing scipy.
__getattr__, __dir__ = lazy_exports(__name__, {
    "AnnotationsResult": ".analysis:AnnotationsResult",
    "PerformanceAnnotations": ".analysis:PerformanceAnnotations",
    "AnnotationFileError": ".fileformat:AnnotationFileError",
    "AnnotationSet": ".fileformat:AnnotationSet",
    "load_annotations": ".fileformat:load_annotations",
    "save_annotations": ".fileformat:save_annotations",
    "Prediction": ".predict:Prediction",
})
