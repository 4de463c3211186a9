"""Features of a call's arguments by the heuristics of Rogora et al. 2017 (Section 3, "Feature discovery").

"For scalar numeric parameters, we record their value; for collections, we record the size; for
strings, we check if the string points to a file. If it does, we record the file size and the
depth of the path. Otherwise, we record the length of the string."

Each feature is a span attribute ``tracesleuth.arg.<argument>.<measure>`` (:data:`ARGUMENT_PREFIX`,
:data:`FEATURE_MEASURES`) and is shown as the paper writes it: ``n`` (a number's value),
``size(items)``, ``length(name)``, ``file_size(path)``, ``depth(path)`` (:func:`feature_name`).
Details the paper leaves open, decided here:

* a bool is a number (0 or 1); NaN and infinite numbers give no feature; complex numbers none;
* a collection is anything with a length other than a string (``bytes`` and ``bytearray``
  included: their size); a length that raises gives no feature;
* a string (or ``os.PathLike``) "points to a file" when :func:`os.stat` finds it (relative to the
  working directory, as the function would); a directory is a file too (its depth, no size);
  strings longer than 4096 characters or holding a NUL are never looked up;
* the depth of a path is its number of components, ``.`` and empty ones not counted
  (``/srv/a/b.txt`` and ``srv/a/b.txt``: 3);
* other objects (``self``, ``cls``, instances) give no feature.

Standard library only.
"""

from __future__ import annotations

import math
import numbers
import os
import stat

__all__ = ["ARGUMENT_PREFIX", "FEATURE_MEASURES", "MEMORY_ATTRIBUTE", "argument_features", "feature_name",
           "feature_of_attribute"]

#: Prefix of the attribute keys of argument features: ``tracesleuth.arg.<argument>.<measure>``.
ARGUMENT_PREFIX = "tracesleuth.arg."
#: What a feature measures: a number's value, a collection's size, a string's length, the size
#: and depth of the file a string names.
FEATURE_MEASURES = ("value", "size", "length", "file_size", "depth")
#: Span attribute of the memory a call allocated: the peak of the memory traced by
#: :mod:`tracemalloc` during the call above its level when the call began, bytes (Int).
MEMORY_ATTRIBUTE = "tracesleuth.memory.peak_bytes"

#: Longest string looked up as a path (Linux PATH_MAX).
MAX_PATH_CHARS = 4096


def _depth(path: str) -> int:
    if os.altsep:
        path = path.replace(os.altsep, os.sep)
    return sum(1 for part in path.split(os.sep) if part and part != ".")


#: ``{argument: {measure: attribute key}}``, so that a call builds no key string (and, with
#: memory tracking on, allocates less).
_KEYS: dict[str, dict[str, str]] = {}


def _keys(argument: str) -> dict[str, str]:
    keys = _KEYS.get(argument)
    if keys is None:
        keys = _KEYS[argument] = {m: f"{ARGUMENT_PREFIX}{argument}.{m}" for m in FEATURE_MEASURES}
    return keys


def _string_features(text: str, keys: dict, out: dict) -> None:
    if len(text) <= MAX_PATH_CHARS and "\x00" not in text:
        try:
            info = os.stat(text)
        except (OSError, ValueError):
            info = None
        if info is not None:
            if stat.S_ISREG(info.st_mode):
                out[keys["file_size"]] = info.st_size
            out[keys["depth"]] = _depth(text)
            return
    out[keys["length"]] = len(text)


def argument_features(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict[str, int | float]:
    """The features of one call's arguments, as span attributes.

    Parameters
    ----------
    names : tuple of str
        The names of the positional parameters, in order; a positional argument past them is
        called ``arg<i>`` (0-based position).
    args : tuple
        The positional arguments.
    kwargs : dict
        The keyword arguments.

    Returns
    -------
    dict of str to int or float
        ``{"tracesleuth.arg.<argument>.<measure>": value}``, rules in the module docstring.

    Examples
    --------
    >>> argument_features(("n", "items", "name"), (3, [1, 2], "no/such/file"), {"ratio": 0.5})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'tracesleuth.arg.n.value': 3, 'tracesleuth.arg.items.size': 2, 'tracesleuth.arg.name.length': 12,
     'tracesleuth.arg.ratio.value': 0.5}
    """
    out: dict[str, int | float] = {}
    n_names = len(names)
    for i, value in enumerate(args):
        _add(names[i] if i < n_names else f"arg{i}", value, out)
    for name, value in kwargs.items():
        _add(name, value, out)
    return out


def _add(name: str, value, out: dict) -> None:
    keys = _KEYS.get(name) or _keys(name)
    kind = type(value)
    if kind is int or kind is bool:
        out[keys["value"]] = int(value)
    elif kind is float:
        if math.isfinite(value):
            out[keys["value"]] = value
    elif kind is str:
        _string_features(value, keys, out)
    elif kind is list or kind is tuple or kind is dict or kind is set or kind is bytes:
        out[keys["size"]] = len(value)
    elif isinstance(value, os.PathLike):
        path = os.fspath(value)
        _string_features(path if isinstance(path, str) else os.fsdecode(path), keys, out)
    elif isinstance(value, numbers.Real):
        number = float(value)
        if math.isfinite(number):
            out[keys["value"]] = int(value) if isinstance(value, numbers.Integral) else number
    elif isinstance(value, str):
        _string_features(str(value), keys, out)
    elif hasattr(kind, "__len__"):
        try:
            out[keys["size"]] = len(value)
        except Exception:  # noqa: BLE001 - a broken __len__ of the application's own: no feature
            pass


def feature_name(argument: str, measure: str) -> str:
    """How a feature is written: ``n`` (a value), ``size(items)``, ``depth(path)``...

    Examples
    --------
    >>> feature_name("path", "depth"), feature_name("n", "value")
    ('depth(path)', 'n')
    """
    return argument if measure == "value" else f"{measure}({argument})"


def feature_of_attribute(key: str) -> str | None:
    """The feature an argument attribute key stands for, or None when ``key`` is no argument feature.

    Examples
    --------
    >>> feature_of_attribute("tracesleuth.arg.path.depth"), feature_of_attribute("http.response.body.size")
    ('depth(path)', None)
    """
    if not key.startswith(ARGUMENT_PREFIX):
        return None
    argument, _, measure = key[len(ARGUMENT_PREFIX):].rpartition(".")
    if not argument or measure not in FEATURE_MEASURES:
        return None
    return feature_name(argument, measure)
