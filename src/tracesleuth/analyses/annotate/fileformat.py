"""The annotation file: YAML (or JSON, by the file name), written to be read by people and loaded back.

Layout (``format: tracesleuth-annotations/1``)::

    # Performance annotations (Rogora et al., HotCloud 2017), derived by tracesleuth.
    format: tracesleuth-annotations/1
    source: traces/clean-run.jsonl
    settings: {min_correlation: 0.5, ...}
    annotations:
    # filehost:FileHost.delete: time ~ Normal(31.2 µs + 9.8 µs × depth(path), sd 4.1 µs)
    - operation: filehost:FileHost.delete
      metric: time
      kind: correlated
      samples: 412
      feature: depth(path)
      coefficients: [31200.0, 9800.0]      # ascending powers, the metric's unit (ns, bytes)
      sd: 4100.0
      ...

Each annotation is preceded by its human-readable form as a comment. Fields per kind
(:mod:`.model`): every kind has ``operation``, ``metric`` (``time``, ``self_time``, ``memory``),
``kind`` and ``samples``; ``correlated`` adds ``feature``, ``coefficients`` (2 to 4 numbers),
``sd``, and optionally ``correlation``, ``relative_error``, ``feature_range``, ``outliers``; ``constant``
adds ``value`` and optionally ``sd``; ``clustered`` adds ``clusters``, a list of
``{centroid, sd, weight}`` with positive weights. Hand-written files need only the required
fields. A JSON file (``.json``) holds the same document.

Loading checks everything and stops at the first mistake with an :class:`AnnotationFileError`
naming the file, the line and the field: a YAML syntax error, an unknown or missing field, a
value of the wrong kind, a negative standard deviation, the same operation and metric twice.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import TraceSleuthError
from .model import KINDS, METRICS, Annotation, annotation_from_dict

__all__ = ["FORMAT", "AnnotationFileError", "AnnotationSet", "load_annotations", "save_annotations"]

#: The ``format`` field of the files this version writes and reads.
FORMAT = "tracesleuth-annotations/1"

_COMMON = {"operation", "metric", "kind", "samples", "calibration"}
_FIELDS = {
    "correlated": (_COMMON | {"feature", "coefficients", "sd"},
                   {"correlation", "relative_error", "feature_range", "outliers"}),
    "constant": (_COMMON | {"value"}, {"sd"}),
    "clustered": (_COMMON | {"clusters"}, set()),
}
_OPTIONAL_COMMON = {"samples", "calibration"}
#: The fields of an annotation's ``calibration`` (:class:`~.model.Calibration`): required, optional.
_CALIBRATION = ({"windows", "score_mean", "score_sd", "between_sd"}, {"mean_se", "pooled"})
assert set(_FIELDS) == set(KINDS), "every kind of annotation has its fields"


class AnnotationFileError(TraceSleuthError):
    """An annotation file cannot be loaded; the message names the file, the line and the field.

    Attributes
    ----------
    source : str
    line : int or None
        1-based.
    field : str or None
    """

    def __init__(self, source: str, message: str, *, line: int | None = None, field: str | None = None):
        self.source, self.line, self.field = source, line, field
        where = source + (f", line {line}" if line is not None else "") + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class AnnotationSet:
    """The annotations of a system, as derived or loaded: at most one per operation and metric.

    Attributes
    ----------
    annotations : tuple of Annotation
        Sorted by operation, then metric.
    source : str
        What they were derived from (paths), or the file they were loaded from.
    settings : dict
        The derivation settings.
    """

    annotations: tuple = ()
    source: str = ""
    settings: dict = field(default_factory=dict)
    _by_key: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_key.update((a.key, a) for a in self.annotations)

    def __len__(self) -> int:
        return len(self.annotations)

    def __iter__(self):
        return iter(self.annotations)

    def get(self, operation: str, metric: str = "time") -> Annotation | None:
        """The annotation of ``operation`` and ``metric``, or None."""
        return self._by_key.get((operation, metric))

    def to_dict(self) -> dict[str, Any]:
        """The file's document (JSON-safe)."""
        return {"format": FORMAT, "source": self.source, "settings": dict(self.settings),
                "annotations": [a.to_dict() for a in self.annotations]}

    def texts(self) -> list[str]:
        """The human-readable form of each annotation."""
        return [a.text() for a in self.annotations]


def save_annotations(annotations: AnnotationSet, path) -> Path:
    """Write an annotation file: JSON when the name ends in ``.json``, otherwise YAML.

    Parameters
    ----------
    annotations : AnnotationSet
    path : str or os.PathLike

    Returns
    -------
    pathlib.Path
    """
    import yaml

    path = Path(path)
    doc = annotations.to_dict()
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        return path
    head = {k: v for k, v in doc.items() if k != "annotations"}
    lines = ["# Performance annotations (Rogora et al., HotCloud 2017), derived by tracesleuth.",
             "# Each annotation follows its human-readable form; coefficients are in ascending powers of the",
             "# feature, in the metric's unit (time: ns, memory: bytes).",
             yaml.safe_dump(head, sort_keys=False, default_flow_style=None, allow_unicode=True, width=110).rstrip(),
             "annotations:" + (" []" if not annotations.annotations else "")]
    for a in annotations.annotations:
        lines.append("# " + a.text().replace("\n", " "))
        lines.append(yaml.safe_dump([a.to_dict()], sort_keys=False, default_flow_style=None, allow_unicode=True,
                                    width=110).rstrip())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _loader():
    import yaml

    class LineLoader(yaml.SafeLoader):
        """Keeps, for each mapping, the line of the mapping and of each of its keys (1-based)."""

        def construct_mapping(self, node, deep=False):
            mapping = super().construct_mapping(node, deep=True)
            mapping["__line__"] = node.start_mark.line + 1
            mapping["__lines__"] = {k.value: k.start_mark.line + 1 for k, _ in node.value
                                    if isinstance(k, yaml.ScalarNode)}
            return mapping

    return yaml, LineLoader


def load_annotations(path) -> AnnotationSet:
    """Read an annotation file (YAML or JSON), every field checked.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    AnnotationSet

    Raises
    ------
    AnnotationFileError
        The file is missing or unreadable, or a syntax error, an unknown, missing or wrong
        field, a duplicate annotation: the message names the file, the line and the field.
    """
    yaml, loader = _loader()
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AnnotationFileError(source, f"cannot be read ({exc})") from None
    try:
        doc = yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise AnnotationFileError(source, f"syntax error: {problem}",
                                  line=None if mark is None else mark.line + 1) from None
    if not isinstance(doc, dict):
        raise AnnotationFileError(source, "expected a mapping with 'format' and 'annotations' (an annotation file "
                                          "written by 'tracesleuth annotate derive')", line=1)
    lines = doc.get("__lines__", {})
    if doc.get("format", FORMAT) != FORMAT:
        raise AnnotationFileError(source, f"unknown format {doc.get('format')!r}; this version reads {FORMAT!r}",
                                  line=lines.get("format"), field="format")
    unknown = sorted(set(doc) - {"format", "source", "settings", "annotations", "__line__", "__lines__"})
    if unknown:
        raise AnnotationFileError(source, "unknown field (the fields are format, source, settings, annotations)",
                                  line=lines.get(unknown[0]), field=unknown[0])
    entries = doc.get("annotations")
    if not isinstance(entries, list):
        raise AnnotationFileError(source, "'annotations' must be a list of annotations",
                                  line=lines.get("annotations", 1), field="annotations")
    annotations, seen = [], {}
    for i, entry in enumerate(entries):
        a = _annotation(source, i, entry, doc.get("__line__", 1))
        if a.key in seen:
            raise AnnotationFileError(source, f"{a.operation} {a.metric} is annotated twice (also at line "
                                              f"{seen[a.key]})", line=entry["__line__"], field="operation")
        seen[a.key] = entry["__line__"]
        annotations.append(a)
    settings = doc.get("settings") or {}
    settings = {k: v for k, v in settings.items() if not k.startswith("__")} if isinstance(settings, dict) else {}
    return AnnotationSet(annotations=tuple(sorted(annotations, key=lambda a: a.key)),
                         source=str(doc.get("source") or source), settings=settings)


def _annotation(source: str, index: int, entry: Any, line: int) -> Annotation:
    if not isinstance(entry, dict):
        raise AnnotationFileError(source, f"annotation {index + 1} must be a mapping of fields", line=line)
    line = entry["__line__"]
    lines = entry["__lines__"]

    def fail(name: str, message: str):
        raise AnnotationFileError(source, message, line=lines.get(name, line), field=name)

    kind = entry.get("kind")
    if kind not in _FIELDS:
        fail("kind", f"must be one of {', '.join(sorted(_FIELDS))}; got {kind!r}")
    required, optional = _FIELDS[kind]
    given = {k for k in entry if not k.startswith("__")}
    for name in sorted(given - required - optional):
        fail(name, f"unknown field of a {kind} annotation (its fields: {', '.join(sorted(required | optional))})")
    for name in sorted(required - given - _OPTIONAL_COMMON):
        fail(name, f"missing: a {kind} annotation needs {', '.join(sorted(required - _OPTIONAL_COMMON))}")
    if not isinstance(entry["operation"], str) or not entry["operation"]:
        fail("operation", f"must be an operation key 'service:operation'; got {entry['operation']!r}")
    if entry["metric"] not in METRICS:
        fail("metric", f"must be one of {', '.join(METRICS)}; got {entry['metric']!r}")
    for name in ("samples", "outliers"):
        if name in entry and not (_is_number(entry[name]) and entry[name] >= 0):
            fail(name, f"must be a number >= 0; got {entry[name]!r}")
    for name in ("sd", "value", "correlation", "relative_error"):
        if name in entry and not _is_number(entry[name]):
            fail(name, f"must be a finite number; got {entry[name]!r}")
    if "sd" in entry and entry["sd"] < 0:
        fail("sd", f"a standard deviation cannot be negative; got {entry['sd']!r}")
    if entry.get("calibration") is not None:
        _check_calibration(source, entry["calibration"], lines.get("calibration", line))
    if kind == "correlated":
        if not isinstance(entry["feature"], str) or not entry["feature"]:
            fail("feature", f"must name a feature; got {entry['feature']!r}")
        coefficients = entry["coefficients"]
        if not (isinstance(coefficients, list) and 2 <= len(coefficients) <= 4 and all(map(_is_number, coefficients))):
            fail("coefficients", f"must be a list of 2 to 4 finite numbers (ascending powers); got {coefficients!r}")
        rng = entry.get("feature_range", [0.0, 0.0])
        if not (isinstance(rng, list) and len(rng) == 2 and all(map(_is_number, rng))):
            fail("feature_range", f"must be a list of two numbers [least, greatest]; got {rng!r}")
    if kind == "clustered":
        clusters = entry["clusters"]
        if not isinstance(clusters, list) or not clusters:
            fail("clusters", f"must be a non-empty list of {{centroid, sd, weight}}; got {clusters!r}")
        for k, c in enumerate(clusters):
            if not isinstance(c, dict) or {x for x in c if not x.startswith("__")} != {"centroid", "sd", "weight"}:
                raise AnnotationFileError(source, f"cluster {k + 1} must have exactly centroid, sd and weight",
                                          line=c.get("__line__", line) if isinstance(c, dict) else line,
                                          field="clusters")
            bad = [x for x in ("centroid", "sd", "weight") if not _is_number(c[x])]
            bad += [x for x in ("sd",) if not bad and c[x] < 0] + [x for x in ("weight",) if not bad and c[x] <= 0]
            if bad:
                raise AnnotationFileError(source, f"cluster {k + 1}: {bad[0]} must be a finite number"
                                                  f"{' > 0' if bad[0] == 'weight' else ' >= 0' if bad[0] == 'sd' else ''}"
                                                  f"; got {c[bad[0]]!r}",
                                          line=c["__lines__"].get(bad[0], c["__line__"]), field=bad[0])
        clean = {**entry, "clusters": [{x: c[x] for x in ("centroid", "sd", "weight")} for c in clusters]}
        return annotation_from_dict(clean)
    return annotation_from_dict(entry)


def _check_calibration(source: str, c: Any, line: int) -> None:
    required, optional = _CALIBRATION
    if not isinstance(c, dict):
        raise AnnotationFileError(source, f"must be a mapping of {', '.join(sorted(required))}; got {c!r}", line=line,
                                  field="calibration")
    given = {k for k in c if not k.startswith("__")}
    lines = c.get("__lines__", {})
    for name in sorted(given - required - optional) + sorted(required - given):
        raise AnnotationFileError(source, f"{'unknown' if name in given else 'missing'} field {name!r} of a "
                                          f"calibration (its fields: {', '.join(sorted(required | optional))})",
                                  line=lines.get(name, line), field=f"calibration.{name}")
    for name in ("windows", "score_sd", "between_sd", "mean_se", "score_mean"):
        if name in c and not (_is_number(c[name]) and (name == "score_mean" or c[name] >= 0)
                              and (name != "score_sd" or c[name] > 0) and (name != "windows" or c[name] >= 1)):
            raise AnnotationFileError(source, f"must be a finite number{' >= 1' if name == 'windows' else ' > 0' if name == 'score_sd' else '' if name == 'score_mean' else ' >= 0'}; "
                                              f"got {c[name]!r}", line=lines.get(name, line),
                                      field=f"calibration.{name}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
