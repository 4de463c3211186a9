"""Public names of a package imported on first use (PEP 562), so that importing the package, or
one light submodule of it (a CLI command module), does not import the heavy ones."""

from __future__ import annotations

import importlib
import sys
from typing import Callable


def lazy_exports(package: str, names: dict[str, str]) -> tuple[Callable, Callable]:
    """``__getattr__`` and ``__dir__`` for ``package`` whose ``names`` live in submodules.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    names : dict of str to str
        Public name -> ``".submodule:attribute"`` (relative to ``package``), or ``".submodule"``
        for the submodule itself.

    Returns
    -------
    (__getattr__, __dir__)
        To assign in the package's ``__init__``; a name once looked up is cached in the package.

    Examples
    --------
    >>> import tracesleuth.evaluation as ev
    >>> "match_clusters" in dir(ev)
    True
    """
    def __getattr__(name: str):
        target = names.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = target.partition(":")
        value = importlib.import_module(module, package)
        if attribute:
            value = getattr(value, attribute)
        setattr(sys.modules[package], name, value)  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
