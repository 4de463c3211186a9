"""The package's layers hold: no import from a lower layer to a higher one, no import circle.

The contracts are in pyproject.toml (``[tool.importlinter]``: the layer order, with the reason
for each layer, and which packages stay independent of one another); import-linter checks them
on grimp's import graph, which holds every import, at module level or inside a function.
``lint-imports`` in the repository's root runs the same check by hand.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
CONTRACTS = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]


def test_the_import_contracts_are_kept(capsys):
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()  # as the lint-imports command does first
    if lint_imports(str(PYPROJECT), cache_dir=None, no_logo=True):
        return
    report = capsys.readouterr().out
    broken = [c["name"] for c in CONTRACTS
              if not lint_imports(str(PYPROJECT), limit_to_contracts=(c["id"],), cache_dir=None, no_logo=True)]
    capsys.readouterr()
    pytest.fail(f"broken import contract(s): {'; '.join(broken)}\n\n{report}", pytrace=False)


def _import_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & graph.modules) for m in graph.modules}
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return circles


def test_no_two_modules_import_each_other():
    """Not even through a package's ``__init__`` (which the sibling contract leaves out)."""
    graph = grimp.build_graph("tracesleuth", cache_dir=None)
    circles = _import_circles(graph)
    assert not circles, "import circles between modules:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_finder_finds_circles():
    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"), ("p.e", "p.e")]:
        graph.add_import(importer=importer, imported=imported)
    assert _import_circles(graph) == [["p.a", "p.b", "p.c"]]
