"""The Examples sections of the patterns modules run and print what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "tracesleuth.analyses.patterns._model",
    "tracesleuth.analyses.patterns.split_points",
    "tracesleuth.analyses.patterns.dp",
    "tracesleuth.analyses.patterns.synthetic",
    "tracesleuth.analyses.patterns.analysis",
]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0
