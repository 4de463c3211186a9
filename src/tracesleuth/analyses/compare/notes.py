"""The request-flow comparison's decisions, as records (the analyses' one
:class:`~tracesleuth.analyses._notes.Note` base: ``kind``, the numbers, ``describe()``).

======================== ==================================================================
kind                     decision
======================== ==================================================================
``no_spans``             :class:`NoSpans` - a period's table holds no spans: no edge evidence
``no_common_category``   :class:`NoCommonCategory` - no response-time test is possible
``categories_untested``  :class:`CategoriesUntested` - categories too small for the KS test
``precursors_relaxed``   :class:`PrecursorsRelaxed` - heuristic 2 dropped for a mutation
``pooled_only``          :class:`PooledOnly` - services ranked by pooled changes alone
``workload_mix``         :class:`WorkloadMix` - structural mutations that count for no service
``below_top_k``          :class:`BelowTopK` - mutations not explained (rank above ``top_k``)
``nothing_slower``       :class:`NothingSlower` - every mutation a speed-up or a mix change
``no_significant_change`` :class:`NoSignificantChange` - no test found a change (``result.reason``)
======================== ==================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..._text import shorten
from .._notes import Note

__all__ = ["BelowTopK", "CategoriesUntested", "NoCommonCategory", "NoSignificantChange", "NoSpans", "NothingSlower",
           "PooledOnly", "PrecursorsRelaxed", "WorkloadMix"]


@dataclass(frozen=True)
class NoSpans(Note):
    """A period's trace table holds no spans (requests only): no edge, operation or error
    evidence can be gathered, only the categories' response times and shares.

    Attributes
    ----------
    period : {"baseline", "problem"}
    """

    kind: ClassVar[str] = "no_spans"
    period: str

    def describe(self) -> str:
        return f"The {self.period} table holds no spans: no edge, operation or error evidence."


@dataclass(frozen=True)
class NoCommonCategory(Note):
    """The periods share no category (request structure): no response-time test (Section 3.2)
    can run; only structural mutations are found."""

    kind: ClassVar[str] = "no_common_category"

    def describe(self) -> str:
        return "The periods have no category in common: no response-time test; structural mutations only."


@dataclass(frozen=True)
class CategoriesUntested(Note):
    """Categories in both periods left out of the response-time test: fewer than
    ``min_requests`` requests in one of the periods.

    Attributes
    ----------
    n_categories : int
    min_requests : int
    """

    kind: ClassVar[str] = "categories_untested"
    n_categories: int
    min_requests: int

    def describe(self) -> str:
        return (f"{self.n_categories} categories in both periods have fewer than {self.min_requests} requests in one "
                "of them: not tested for a response-time change.")


@dataclass(frozen=True)
class PrecursorsRelaxed(Note):
    """Heuristic 2 (a precursor lost at least as many requests as the mutation gained) left no
    precursor of a structural mutation, so its same-root precursors (heuristic 1) are kept.

    Attributes
    ----------
    category : str
        The mutation's category (its structure signature).
    gained : float
        Requests the mutation gained, the baseline's count scaled to the problem period's size.
    n_precursors : int
        The same-root precursors kept.
    """

    kind: ClassVar[str] = "precursors_relaxed"
    category: str
    gained: float
    n_precursors: int

    def describe(self) -> str:
        return (f"No precursor lost as many requests as the mutation {shorten(self.category)} gained (heuristic 2): "
                "the same-root precursors are kept.")


@dataclass(frozen=True)
class PooledOnly(Note):
    """No category-level mutation was found; the services are ranked by the edges and operations
    whose time rose (or calls that dropped), pooled over categories (:mod:`.pooled`).

    Attributes
    ----------
    n_pooled : int
        Pooled changes (self times and gaps that rose).
    n_call_drops : int
    """

    kind: ClassVar[str] = "pooled_only"
    n_pooled: int
    n_call_drops: int

    def describe(self) -> str:
        return ("No category-level mutation: the services are ranked by the edges and operations whose time rose, "
                "pooled over categories.")


@dataclass(frozen=True)
class WorkloadMix(Note):
    """Structural mutations that are categories already common in the baseline, grown without
    getting slower: a workload-mix change, counted for no service.

    Attributes
    ----------
    n_mutations : int
    """

    kind: ClassVar[str] = "workload_mix"
    n_mutations: int

    def describe(self) -> str:
        return (f"workload mix changed: {self.n_mutations} structural mutation(s) are categories already common in "
                "the baseline that grew without getting slower; they count for no service.")


@dataclass(frozen=True)
class BelowTopK(Note):
    """Mutations ranked below ``top_k``: not explained (no edges, operations or low-level
    differences) and not counted for the services.

    Attributes
    ----------
    n_mutations : int
        Mutations below the rank.
    top_k : int
    """

    kind: ClassVar[str] = "below_top_k"
    n_mutations: int
    top_k: int

    def describe(self) -> str:
        return (f"{self.n_mutations} mutations below rank {self.top_k} are not explained and do not count for the "
                "services.")


@dataclass(frozen=True)
class NothingSlower(Note):
    """Every mutation made requests faster or is a workload-mix change, and nothing rose when
    pooled: nothing got slower, so no service is suspected.

    Attributes
    ----------
    n_mutations : int
    """

    kind: ClassVar[str] = "nothing_slower"
    n_mutations: int

    def describe(self) -> str:
        return "Every mutation made requests faster or is a workload-mix change: nothing got slower."


@dataclass(frozen=True)
class NoSignificantChange(Note):
    """No test found a change (the result's ``reason``, ``significant`` False): no category's
    response time (KS test) or share of requests (Spectroscope Section 3.3), and no pooled
    operation self time, edge gap or call count (:mod:`.pooled`).

    Attributes
    ----------
    alpha : float
        Significance level of every test.
    correction : str
        Multiple-test correction.
    n_categories_tested : int
        Categories with enough requests in both periods for the KS test.
    sm_threshold : float
        Smallest change of a category's share of requests that counts.
    n_pooled_tests : int
        Pooled tests run (operations' self times, edges' gaps, call counts).
    """

    kind: ClassVar[str] = "no_significant_change"
    alpha: float
    correction: str
    n_categories_tested: int
    sm_threshold: float
    n_pooled_tests: int

    def describe(self) -> str:
        return (f"no significant change: no category's response time changed (KS test, alpha {self.alpha:g}, "
                f"{self.correction} correction, {self.n_categories_tested} categories tested), no category's share of "
                f"requests changed by {self.sm_threshold:g} or more significantly, and no operation's self time or "
                f"edge's gap rose and no operation makes fewer calls (pooled over categories, {self.n_pooled_tests} "
                "tested)")
