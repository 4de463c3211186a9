"""Measuring Python code for performance annotations: per call, wall time, memory and argument features.

Rogora et al., *Performance annotations for cloud computing*, HotCloud 2017, Section 3 ("Target
metrics", "Feature discovery") and Section 4 ("Instrumentation"): every method is replaced by a
wrapper that records time-stamps and heap-allocated memory before and after it runs, and the
features of its input parameters. Here:

* :func:`measured` decorates one function; :func:`instrument_module` wraps every function and
  method a module defines (the paper's runkit wrapper; :func:`uninstrument_module` undoes it);
* the features of the arguments follow the paper's heuristics (:func:`argument_features`):
  a number gives its value, a collection its size, a string naming an existing file its file
  size and path depth, any other string its length;
* each call becomes a span, written either as an OpenTelemetry span through the tracer of the
  application (:class:`OtelRecorder`: the traces tracesleuth collects then carry the features as
  span attributes) or, without OpenTelemetry, to a local file of OTLP JSON lines
  (:class:`FileRecorder`) that every tracesleuth command reads as traces.

Why a package of its own (and not inside :mod:`tracesleuth.analyses.annotate`): this is the part
an *application under observation* imports, in production. It uses the standard library only
(OpenTelemetry when :class:`OtelRecorder` is used), so it never loads the analysis stack (numpy,
polars, scikit-learn); the analysis reads what it writes through the trace readers, like any
other traces. The attribute keys below are the contract between the two.

Overhead per call (``python3 benchmarks/bench_instrument.py``, median of 5 runs): about 5 µs with the
file recorder (7 µs when a string argument names a file), about 19 µs with the OpenTelemetry SDK,
about 50 µs with memory tracking on. Memory tracking (:mod:`tracemalloc`) is therefore off by
default: it slows every allocation of the whole program, the wrapper's own included.
"""

from __future__ import annotations

from ._features import (ARGUMENT_PREFIX, FEATURE_MEASURES, MEMORY_ATTRIBUTE, argument_features, feature_name,
                        feature_of_attribute)
from ._recorders import FileRecorder, OtelRecorder, Recorder, get_recorder, set_recorder
from ._wrap import instrument_module, measured, uninstrument_module

__all__ = ["ARGUMENT_PREFIX", "FEATURE_MEASURES", "FileRecorder", "MEMORY_ATTRIBUTE", "OtelRecorder", "Recorder",
           "argument_features", "feature_name", "feature_of_attribute", "get_recorder", "instrument_module",
           "measured", "set_recorder", "uninstrument_module"]
