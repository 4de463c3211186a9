"""Log templates: the constant text of each log statement, its variables masked, mined with Drain.

A log record's body is the output of one log statement, ``log.info("Route is: {}", route)``;
its template is the statement's constant text with the variables masked, ``Route is: <*>``.
Counting records by template tells which statements ran, per span, operation or period: the
evidence a code fault leaves when its spans look unchanged (an ``ERROR`` statement that starts to
run, a statement on the faulty path that stops).

Method
------
Drain (He, Zhu, Zheng and Lyu, "Drain: An Online Log Parsing Approach with Fixed Depth Tree",
ICWS 2017, doi:10.1109/ICWS.2017.13), through Drain3, its maintained implementation
(https://github.com/logpai/Drain3, MIT; ``drain3.drain.Drain``): a message is split into tokens,
routed down a tree by its token count and its first tokens (``depth``), and joined to the most
similar template of the leaf when at least ``similarity_threshold`` of its tokens equal the
template's; otherwise it starts a new template. Joining turns the tokens that differ into ``<*>``.

Before Drain sees a message it is prepared (:meth:`LogTemplateMiner.mask`):

1. its **header** is removed: the clock time and level that Logback's, Log4j's and Python's
   default layouts write first (:data:`HEADER`); the reader has them already (``time_ns``,
   ``severity_text``), and left in they lead every message: Drain routes on its first token
   (at depth 4) and counts them as constant text in its similarity, and joins the short messages
   of different statements (Nezha: 142 templates of purity 0.84 instead of 228 of purity 1.0);
2. it is **cut to its first** :data:`MAX_TOKENS` **words**, the rest one :data:`REST` token: Drain
   compares only messages of equal token count, so a statement that logs a collection gets one
   template per collection size (Nezha: 560 templates for 212 statements uncut, 228 cut);
3. known variable shapes are **masked** (the paper's "preprocessing by domain knowledge"; Drain3's
   "masking", https://github.com/logpai/Drain3#masking): UUIDs, dates, clock times, IP
   addresses, hexadecimal ids, durations and numbers, each replaced by a named mask (``<UUID>``,
   ``<NUM>``, ...; :data:`DEFAULT_MASKING`), in that order, at word boundaries, except the line
   number of a code location ``Class#line`` (:data:`_KEEP`: it names the statement; masked, the
   Nezha templates had a purity of 0.87).

Tokens that still hold digits after masking are constants (``Impl#457``, ``v2``, ``utf8``), so
Drain's ``parametrize_numeric_tokens`` is off by default (``numeric_tokens_are_variables``).
Everything runs as vectorized RE2 passes over a batch (``pyarrow.compute``), which release the
GIL and run on two threads, rather than message by message in Python (on the Nezha bodies, 543
characters on average: 3,000 messages/s with one Python regex and a callback).

What we add to Drain3's ``TemplateMiner``
-----------------------------------------
* **One miner per service** (:class:`LogTemplateMiner`): statements of different services never
  share a template, and a service's vocabulary does not crowd another's tree.
* **Global template ids, stable once assigned**: a ``(service, Drain cluster id)`` pair gets the
  next integer the first time a record shows it (in record order, whatever the services' order)
  and keeps it forever (Drain's cluster ids only grow; a cluster keeps its id as its template
  generalizes).
* **A cache from masked text to template**: a message whose masked text was seen before goes to
  the template that text got the first time, without Drain's tree search. For Drain this changes
  no template: the template a message joined agrees with it at every position that is not
  ``<*>`` (joining only turns disagreeing positions into ``<*>``, and later joins only add more),
  so joining the same masked text again leaves every template as it is, and only the counts
  grow, which the cache keeps (the cluster's ``size`` too). What the cache could change is
  Drain's *routing* of a repeated text where Drain's own answer would drift (a later sibling node
  for an exact token shadowing the ``<*>`` path to the old template; a template generalized until
  the text falls below the threshold): there the text keeps its first template, which is the
  stability the ids promise. Measured on the Nezha day: every one of the 106,689 records gets the
  cluster that Drain's own search gives it (``test_nezha_cache_assigns_as_drain_itself``). The
  cache is a plain dictionary per service, bounded by :data:`MAX_CACHED_TEXTS`.
* **A plain JSON state** (:meth:`LogTemplateMiner.to_json`): settings, every service's Drain tree
  and templates, the global ids, the counts and the cache, so that a later session continues
  exactly where this one stopped (assigning half, saving, loading and assigning the rest gives
  what assigning all at once gives). No pickle: Drain3's own persistence is jsonpickle, which
  builds any Python object a document names.
* **Read-only matching** (``assign(..., learn=False)``): a record gets the template its masked
  text matches exactly (Drain3's ``match``), or null, and nothing is learned.

Drain's settings default to Drain3's (similarity 0.4, depth 4, 100 children). On the Nezha
TrainTicket log day (106,689 records, 212 code locations ``Class#line`` in 27 services) they give
228 templates, each holding the records of one code location (purity 1.0; a similarity of 0.3 to
0.7 gives 226 to 234 templates, purity 1.0); ``tests/io/test_log_templates.py`` keeps floors on
both. Speed: ``benchmarks/bench_logs.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema as S
from ..errors import ParameterError

__all__ = ["DEFAULT_MASKING", "LogTemplateMiner", "MASK_DATE", "MASK_DURATION", "MASK_HEX", "MASK_IP",
           "MASK_NUMBER", "MASK_TIME", "MASK_UUID", "MaskingRule"]


@dataclass(frozen=True)
class MaskingRule:
    """One masking rule: text matching ``pattern`` (RE2 syntax, matched at word boundaries) is
    replaced by ``<name>``."""

    name: str
    pattern: str

    @property
    def mask(self) -> str:
        """The token that replaces a match."""
        return f"<{self.name}>"


#: A UUID (RFC 9562 text form: 8-4-4-4-12 hexadecimal digits).
MASK_UUID = MaskingRule("UUID", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
#: A date, with its time of day and offset when they follow (ISO 8601 / RFC 3339).
MASK_DATE = MaskingRule("DATE", r"\d{4}-\d{2}-\d{2}"
                                r"(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?")
#: A clock time (``16:43:25.207``).
MASK_TIME = MaskingRule("TIME", r"\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?")
#: An IPv4 address, with its port when one follows.
MASK_IP = MaskingRule("IP", r"\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?")
#: A hexadecimal id: ``0x``-prefixed, or at least 16 hexadecimal digits (span and trace ids,
#: hashes); shorter runs of letters a-f are words.
MASK_HEX = MaskingRule("HEX", r"0[xX][0-9a-fA-F]+|[0-9a-fA-F]{16,}")
#: A duration: a number with a time unit (``350ms``, ``1.5 s``).
MASK_DURATION = MaskingRule("DURATION", r"\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|min|h)")
#: A number (integer or decimal).
MASK_NUMBER = MaskingRule("NUM", r"\d+(?:\.\d+)?")
#: The rules applied by default, in this order (the more specific shapes first: a UUID or a date
#: would otherwise be masked as numbers piece by piece).
DEFAULT_MASKING = (MASK_UUID, MASK_DATE, MASK_TIME, MASK_IP, MASK_HEX, MASK_DURATION, MASK_NUMBER)
#: Masked texts remembered per service (:class:`LogTemplateMiner` notes): beyond it, the cache of
#: that service starts again (its assignments stay, only repeated texts are searched anew).
MAX_CACHED_TEXTS = 1 << 18
#: Rows masked per slice, and threads masking slices at once (:meth:`LogTemplateMiner.mask`).
MASK_ROWS = 16_384
MASK_WORKERS = 2


def _header() -> str:
    from ._logs import CLOCK_AT_START, SEVERITY_BY_NAME

    levels = "|".join(sorted(SEVERITY_BY_NAME, key=len, reverse=True))
    return CLOCK_AT_START + rf"\[?(?i:{levels})\]?(?:\s+|$)"


#: The log header written before the message by Logback's, Log4j's and Python's default layouts:
#: a clock time (after a date) and a level (any name of
#: :data:`~tracesleuth.io._logs.SEVERITY_BY_NAME`). The reader has the time and the severity
#: already (``time_ns``, ``severity_text``); left in, the header's tokens count as constant text
#: in Drain's similarity, which then joins short messages of different statements.
HEADER = _header()
#: Values are masked at word boundaries (RE2's ``\b``), so a value inside a word is not masked
#: (``v2``, ``utf8``), and neither is the line number of a code location written ``Class#line``
#: (``TravelServiceImpl#457``, Logback's and Log4j's ``%class#%line``): it names the statement,
#: and masking it would join the templates of different statements (on the Nezha logs, 463
#: templates of purity 0.87 instead of 228 of purity 1.0). The ``#`` of such a location is
#: followed by this word character while the masks run (``\b`` then finds no boundary before
#: the digits), and it is removed after; ``order #42`` is masked.
_KEEP = "_"
#: Words (split at spaces) of a message that Drain sees (:class:`LogTemplateMiner`'s
#: ``max_tokens``); the rest becomes one :data:`REST` token. Drain compares only messages of equal token count, so a
#: statement that writes a collection (``soldTickets=[Ticket(...), ...]``) gets one template per
#: collection size: on the Nezha TrainTicket logs, 560 templates for 212 code locations without
#: a bound, 77 for one statement alone. The constant text of a statement comes first, so its
#: first tokens name it.
MAX_TOKENS = 32
#: The token that stands for what follows the first ``max_tokens`` tokens.
REST = "<...>"
#: The wildcard Drain writes into a template where messages differ (Drain3's default).
WILDCARD = "<*>"
#: Version of the JSON state written by :meth:`LogTemplateMiner.to_json`.
STATE_VERSION = 1


class LogTemplateMiner:
    """Assign each log record the template of its body, per service, with Drain (module docstring).

    Parameters
    ----------
    similarity_threshold : float, default=0.4
        Drain's ``st``: the share of a message's tokens that must equal a template's for the
        message to join it (Drain3's default).
    depth : int, default=4
        Drain's tree depth (at least 3): the token count and ``depth - 2`` first tokens route a
        message (Drain3's default).
    max_children : int, default=100
        Children per tree node before further tokens share a ``<*>`` child (Drain3's default).
    masking : tuple of MaskingRule, default=DEFAULT_MASKING
        Applied in order before Drain.
    extra_delimiters : tuple of str, default=()
        Characters split on besides white space (Drain3's ``extra_delimiters``).

    Attributes
    ----------
    n_templates_ : int
        Templates known (over every service).

    Raises
    ------
    ParameterError
        When a setting is outside its range.

    Examples
    --------
    >>> import pyarrow as pa
    >>> logs = pa.table({"service": ["cart"] * 3, "body": ["took 35 ms", "took 2 ms", "cache cold"]})
    >>> miner = LogTemplateMiner()
    >>> miner.assign(logs).to_pylist()
    [0, 0, 1]
    >>> miner.templates().column("template").to_pylist()
    ['took <DURATION>', 'cache cold']
    """

    def __init__(self, *, similarity_threshold: float = 0.4, depth: int = 4, max_children: int = 100,
                 masking: tuple = DEFAULT_MASKING, extra_delimiters: tuple = (), header: str | None = HEADER,
                 numeric_tokens_are_variables: bool = False, max_tokens: int | None = MAX_TOKENS):
        self.max_tokens = max_tokens
        self.header = header
        self.numeric_tokens_are_variables = numeric_tokens_are_variables
        self.similarity_threshold = similarity_threshold
        self.depth = depth
        self.max_children = max_children
        self.masking = tuple(masking)
        self.extra_delimiters = tuple(extra_delimiters)
        self._check()
        self._drains: dict[str, Any] = {}  # service -> drain3.drain.Drain
        self._ids: dict[tuple[str, int], int] = {}  # (service, cluster id) -> template id
        self._keys: list[tuple[str, int]] = []  # template id -> (service, cluster id)
        self._records: list[int] = []  # template id -> records assigned
        self._cache: dict[str, dict[str, int]] = {}  # service -> masked text -> template id

    def _check(self) -> None:
        if not (isinstance(self.similarity_threshold, (int, float)) and 0 <= self.similarity_threshold <= 1):
            raise ParameterError(f"The 'similarity_threshold' parameter of LogTemplateMiner must be a float in the "
                                 f"range [0, 1]. Got {self.similarity_threshold!r} instead.")
        for name, low in (("depth", 3), ("max_children", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ParameterError(f"The {name!r} parameter of LogTemplateMiner must be an int in the range "
                                     f"[{low}, inf). Got {value!r} instead.")
        if self.max_tokens is not None and (isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int)
                                            or self.max_tokens < 1):
            raise ParameterError(f"The 'max_tokens' parameter of LogTemplateMiner must be an int in the range "
                                 f"[1, inf) or None. Got {self.max_tokens!r} instead.")
        if self.header is not None and not isinstance(self.header, str):
            raise ParameterError(f"The 'header' parameter of LogTemplateMiner must be a str (an RE2 pattern) or "
                                 f"None. Got {self.header!r} instead.")
        if not all(isinstance(r, MaskingRule) for r in self.masking):
            raise ParameterError("The 'masking' parameter of LogTemplateMiner must be a tuple of MaskingRule. "
                                 f"Got {self.masking!r} instead.")

    @property
    def n_templates_(self) -> int:
        return len(self._keys)

    # -- assigning ------------------------------------------------------------------------------
    def mask(self, bodies: pa.Array) -> pa.Array:
        """What Drain is given of each body: the header removed (``header``), cut to its first
        ``max_tokens`` words (split at spaces, then :data:`REST`), the masking rules applied;
        null bodies read as empty text.

        Parameters
        ----------
        bodies : pyarrow.Array of str, shape (n_records,)
            The records' bodies (a null body is masked as empty text).

        Returns
        -------
        pyarrow.Array of str, shape (n_records,)
            The masked text, as Drain reads it.

        Notes
        -----
        Vectorized RE2 passes (``pyarrow.compute``), which release the GIL: a large batch is
        masked in :data:`MASK_ROWS` slices on :data:`MASK_WORKERS` threads. The cut comes before
        the masks, which then scan half the text on the Nezha logs (the masks' cost is the text
        they scan: about 100 ms per pass and 27 MB).
        """
        if isinstance(bodies, pa.ChunkedArray):
            bodies = bodies.combine_chunks()
        bodies = pc.fill_null(bodies.cast(pa.string()), "")
        if len(bodies) <= MASK_ROWS:
            return self._mask(bodies)
        from concurrent.futures import ThreadPoolExecutor

        pieces = [bodies.slice(at, MASK_ROWS) for at in range(0, len(bodies), MASK_ROWS)]
        with ThreadPoolExecutor(MASK_WORKERS, thread_name_prefix="tracesleuth-mask") as pool:
            return pa.concat_arrays(list(pool.map(self._mask, pieces)))

    def _mask(self, out: pa.Array) -> pa.Array:
        if self.header:
            out = pc.replace_substring_regex(out, pattern=self.header, replacement="", max_replacements=1)
        if self.max_tokens is not None:
            k = self.max_tokens
            words = pc.split_pattern(out, " ", max_splits=k)
            cut = pc.greater(pc.list_value_length(words), k)
            if pc.any(cut).as_py():
                head = pc.binary_join(pc.list_slice(words, 0, k), " ")
                out = pc.if_else(cut, pc.binary_join_element_wise(head, pa.scalar(REST), " "), out)
        out = pc.replace_substring_regex(out, pattern=r"\b#(\d)", replacement=rf"#{_KEEP}\1")
        for rule in self.masking:
            out = pc.replace_substring_regex(out, pattern=rf"\b(?:{rule.pattern})\b", replacement=rule.mask)
        return pc.replace_substring(out, f"#{_KEEP}", "#")

    def assign(self, logs: pa.Table | pa.RecordBatch, *, learn: bool = True) -> pa.Array:
        """The template id of each record, learning as it goes (in record order).

        Parameters
        ----------
        logs : pyarrow.Table or RecordBatch, shape (n_records, ...)
            Columns ``service`` and ``body`` (:data:`~tracesleuth.schema.LOG_SCHEMA`).
        learn : bool, default=True
            False: read-only; a record gets the template its masked text matches exactly
            (every token equal or under ``<*>``; Drain3's ``match``), or null when none does,
            and the miner does not change.

        Returns
        -------
        pyarrow.Array of int64, shape (n_records,)
            Template ids (:meth:`templates`); null only with ``learn=False``.
        """
        n = logs.num_rows
        if n == 0:
            return pa.array([], pa.int64())
        services = logs.column(S.SERVICE)
        if isinstance(services, pa.ChunkedArray):
            services = services.combine_chunks()
        masked = self.mask(logs.column(S.BODY)).to_pylist()
        encoded = services if pa.types.is_dictionary(services.type) else services.dictionary_encode()
        names = ["" if v is None else v for v in encoded.dictionary.to_pylist()] + [""]
        codes = pc.fill_null(encoded.indices, len(names) - 1).to_numpy(zero_copy_only=False)
        out = np.full(n, -1, np.int64)
        new: list[tuple[int, str, int]] = []  # (first row, service, cluster id) of clusters without an id
        per_service = []
        for code in np.unique(codes).tolist():
            rows = np.flatnonzero(codes == code)
            service = names[code]
            clusters = np.array(self._clusters(service, [masked[i] for i in rows.tolist()], learn), np.int64)
            per_service.append((service, rows, clusters))
            seen, first = np.unique(clusters, return_index=True)
            new.extend((int(rows[f]), service, int(c)) for c, f in zip(seen.tolist(), first.tolist())
                       if c >= 0 and (service, c) not in self._ids)
        if learn:  # ids in the order the records first show the templates, whatever the services' order
            for _, service, cluster_id in sorted(new):
                self._ids[(service, cluster_id)] = len(self._keys)
                self._keys.append((service, cluster_id))
                self._records.append(0)
        for service, rows, clusters in per_service:
            ids = self._ids
            lookup = {c: ids.get((service, c), -1) for c in np.unique(clusters).tolist()}
            out[rows] = [lookup[c] for c in clusters.tolist()]
        if learn:
            counts = np.bincount(out, minlength=len(self._records))
            self._records = (np.asarray(self._records, np.int64) + counts).tolist()
            return pa.array(out, pa.int64())
        return pa.array(out, pa.int64(), mask=out < 0)

    def _clusters(self, service: str, texts: list[str], learn: bool) -> list[int]:
        """Drain's cluster of each masked text of ``service`` (-1: none matched, ``learn=False``)."""
        drain = self._drains.get(service)
        if drain is None:
            if not learn:
                return [-1] * len(texts)
            drain = self._drains[service] = self._new_drain()
        cache = self._cache.setdefault(service, {})
        clusters = drain.id_to_cluster
        out = []
        append = out.append
        get = cache.get
        for text in texts:
            cluster_id = get(text)
            if cluster_id is not None:
                if learn:
                    clusters[cluster_id].size += 1
                append(cluster_id)
                continue
            if learn:
                cluster, _ = drain.add_log_message(text)
                if len(cache) >= MAX_CACHED_TEXTS:
                    cache.clear()
                cache[text] = cluster.cluster_id
            else:
                cluster = drain.match(text, "fallback")
            append(-1 if cluster is None else cluster.cluster_id)
        return out

    def _new_drain(self):
        from drain3.drain import Drain

        return Drain(depth=self.depth, sim_th=self.similarity_threshold, max_children=self.max_children,
                     extra_delimiters=self.extra_delimiters, param_str=WILDCARD,
                     parametrize_numeric_tokens=self.numeric_tokens_are_variables)

    # -- results --------------------------------------------------------------------------------
    def templates(self) -> pa.Table:
        """Every template known: ``template_id`` (int64), ``service``, ``template`` (its current
        text: tokens joined by one space, ``<*>`` where messages differed) and ``records`` (int64,
        records assigned to it by this miner, over every session it was continued in)."""
        texts = [self._drains[s].id_to_cluster[c].get_template() for s, c in self._keys]
        return pa.table({"template_id": pa.array(range(len(self._keys)), pa.int64()),
                         S.SERVICE: pa.array([s for s, _ in self._keys], pa.string()),
                         "template": pa.array(texts, pa.string()),
                         "records": pa.array(self._records, pa.int64())})

    # -- persistence ----------------------------------------------------------------------------
    def to_json(self) -> str:
        """The miner's whole state as a plain JSON document (settings, every service's Drain tree
        and templates, the template ids, counts and the masked-text cache), for :meth:`from_json`."""
        services = {}
        for service, drain in self._drains.items():
            services[service] = {
                "clusters_counter": drain.clusters_counter,
                "clusters": [[c.cluster_id, list(c.log_template_tokens), c.size] for c in drain.id_to_cluster.values()],
                "tree": _node_to_json(drain.root_node),
                "cache": self._cache.get(service, {}),
            }
        state = {
            "version": STATE_VERSION,
            "settings": {"similarity_threshold": self.similarity_threshold, "depth": self.depth,
                         "max_children": self.max_children, "extra_delimiters": list(self.extra_delimiters),
                         "masking": [[r.name, r.pattern] for r in self.masking], "header": self.header,
                         "numeric_tokens_are_variables": self.numeric_tokens_are_variables,
                         "max_tokens": self.max_tokens},
            "templates": [[s, c, n] for (s, c), n in zip(self._keys, self._records)],
            "services": services,
        }
        return json.dumps(state, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "LogTemplateMiner":
        """A miner continuing from :meth:`to_json`'s document.

        Raises
        ------
        ParameterError
            When the document is not such a state (named: what is missing or of which version).
        """
        from drain3.drain import LogCluster

        try:
            state = json.loads(text)
            if state.get("version") != STATE_VERSION:
                raise ParameterError(f"a log template state of version {state.get('version')!r}; this version "
                                     f"reads version {STATE_VERSION}")
            settings = dict(state["settings"])
            settings["masking"] = tuple(MaskingRule(n, p) for n, p in settings["masking"])
            settings["extra_delimiters"] = tuple(settings["extra_delimiters"])
            miner = cls(**settings)
            for service, saved in state["services"].items():
                drain = miner._drains[service] = miner._new_drain()
                drain.clusters_counter = saved["clusters_counter"]
                for cluster_id, tokens, size in saved["clusters"]:
                    cluster = LogCluster(tokens, cluster_id)
                    cluster.size = size
                    drain.id_to_cluster[cluster_id] = cluster
                drain.root_node = _node_from_json(saved["tree"])
                miner._cache[service] = dict(saved["cache"])
            for service, cluster_id, records in state["templates"]:
                miner._ids[(service, cluster_id)] = len(miner._keys)
                miner._keys.append((service, cluster_id))
                miner._records.append(records)
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, ParameterError):
                raise
            raise ParameterError(f"not a log template state (LogTemplateMiner.to_json): {e!r}") from None
        return miner


def _node_to_json(node) -> dict:
    """A Drain tree node as ``{"ids": [cluster ids], "children": {token: node}}``."""
    return {"ids": list(node.cluster_ids),
            "children": {token: _node_to_json(child) for token, child in node.key_to_child_node.items()}}


def _node_from_json(data: dict):
    from drain3.drain import Node

    node = Node()
    node.cluster_ids = list(data["ids"])
    node.key_to_child_node = {token: _node_from_json(child) for token, child in data["children"].items()}
    return node
