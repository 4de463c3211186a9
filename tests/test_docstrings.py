"""The Examples sections of every tracesleuth module run and print what they say."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import tracesleuth

MODULES = sorted(m.name for m in pkgutil.walk_packages(tracesleuth.__path__, "tracesleuth.")
                 if not m.name.endswith("__main__"))

#: Modules whose public API documents runnable examples (they must keep some).
WITH_EXAMPLES = {
    "tracesleuth.analyses.patterns._model", "tracesleuth.analyses.patterns.split_points",
    "tracesleuth.analyses.patterns.dp", "tracesleuth.analyses.patterns.synthetic",
    "tracesleuth.analyses.patterns.analysis", "tracesleuth.report.sections.patterns",
    "tracesleuth.report.document", "tracesleuth.analyses.metrics", "tracesleuth.units",
    "tracesleuth.analyses._notes",
}


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name in WITH_EXAMPLES:
        assert result.attempted > 0


def test_modules_with_examples_exist():
    assert WITH_EXAMPLES <= set(MODULES)
