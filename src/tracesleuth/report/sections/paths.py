"""The "Causal paths" report section of a black-box causal-path analysis, built from its result.

Aguilera et al., SOSP 2003: the path patterns the nesting algorithm recovered from messages alone,
most frequent first, and for the top ones each node's latency and the delay of each call after its
parent's (the slides' path graphs, as indented tables). Nothing here refits.
"""

from __future__ import annotations

from typing import Any

from ..document import Bullets, Code, KeyValues, Section, Strong, Table, Text
from ...units import format_duration_ns
from ...analyses._contract import sections_from_result

__all__ = ["build_sections", "paths_section"]

#: Patterns detailed node by node.
DETAILED = 3


def _rows(tree: dict, nodes: list, depth: int = 0, at: list | None = None) -> list:
    at = [0] if at is None else at
    n = nodes[at[0]]
    at[0] += 1
    rows = [[Code("\u2003" * depth + ("\u21b3 " if depth else "") + tree["node"]),
             format_duration_ns(n["latency_median_ns"]), format_duration_ns(n["latency_p95_ns"]),
             format_duration_ns(n["delay_median_ns"]) if depth else "—"]]
    for child in tree["calls"]:
        rows += _rows(child, nodes, depth + 1, at)
    return rows


def paths_section(result: Any) -> Section:
    """The "Causal paths" section of a :class:`PathsResult`.

    Parameters
    ----------
    result : PathsResult

    Returns
    -------
    Section
        Key figures (with the recovery rate when fitted on traces), what was left out, the top
        patterns, and the node latencies and call delays of the most frequent ones.
    """
    section = Section("Causal paths from messages (black box)", key="paths")
    if result.algorithm == "convolution":
        return _graph_section(section, result)
    facts = [("algorithm", result.algorithm), ("messages", result.n_messages), ("answered calls", result.n_call_pairs),
             ("causal paths", result.n_paths), ("path patterns", len(result.patterns))]
    if result.recovery is not None:
        facts.append(("requests whose true path was recovered", f"{result.recovery:.1%} of {result.n_true_paths:,}"))
    section.add(KeyValues(facts))
    for note in result.notes_of("no_causal_path"):
        section.add(Text([Strong(str(note))]))
    lost = {k: v for k, v in result.counts.items() if v}
    if lost:
        section.add(Bullets([f"Left out: {k.replace('_', ' ')}: {v:,}" for k, v in lost.items()]))
    total = max(result.n_paths, 1)
    section.add(Table(["rank", "path", "requests", "share", "latency (median)", "latency (p95)"],
                      [[i + 1, Code(p.key), p.count, f"{p.count / total:.1%}",
                        format_duration_ns(p.nodes[0]["latency_median_ns"]),
                        format_duration_ns(p.nodes[0]["latency_p95_ns"])]
                       for i, p in enumerate(result.patterns[: result.top_n])],
                      caption="Path patterns, most frequent first (node(calls in call order))"))
    for i, p in enumerate(result.patterns[:DETAILED]):
        section.add(Table(["node", "latency (median)", "latency (p95)", "call delay (median)"],
                          _rows(p.tree, list(p.nodes)),
                          caption=f"Pattern {i + 1} ({p.count:,} requests): each node's latency, and the time "
                                  "from its caller's call to its own call"))
    return section


def _graph_section(section: Section, result: Any) -> Section:
    """The convolution algorithm's causal graph: its edges, strongest first."""
    facts = [("algorithm", result.algorithm), ("messages", result.n_messages), ("causal edges", len(result.graph))]
    if result.graph_recall is not None:
        facts.append(("true call pairs found", f"{result.graph_recall:.1%}"))
    section.add(KeyValues(facts))
    if not result.graph:
        section.add(Text([Strong(str(n)) for n in result.notes_of("no_causal_edge")]))
        return section
    section.add(Table(["cause", "effect", "delay", "other delays", "height (sd)", "delay from the path's start"],
                      [[Code(" -> ".join(e.cause)), Code(" -> ".join(e.effect)), format_duration_ns(e.delay_ns),
                        ", ".join(format_duration_ns(d) for d in e.other_delays_ns) or "—", e.height,
                        format_duration_ns(e.path_delay_ns)]
                       for e in sorted(result.graph, key=lambda e: -e.height)[: 3 * result.top_n]],
                      caption="Causal edges: the effect follows the cause after the delay (cross-correlation spikes)"))
    return section


build_sections = sections_from_result(paths_section, "CausalPaths")
