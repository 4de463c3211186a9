"""The wrapper around a measured call, the decorator and the module-wide instrumentation.

Rogora et al. 2017, Section 4 ("Instrumentation"): "Every method was dynamically replaced with a
wrapper that records time-stamps and heap-allocated memory before and after the method
execution." Per call the wrapper

1. computes the features of the arguments (:func:`~._features.argument_features`), before the
   call (they describe its input, and an argument the call changes, or a file it deletes, would
   describe something else afterwards) and outside the measured time;
2. starts the recorder's span, and with ``memory`` the memory bookkeeping;
3. calls the function; whatever it returns or raises is passed through unchanged;
4. finishes the span with the features and, with ``memory``, the memory the call allocated.

Memory (``memory=True``) is the peak of the memory :mod:`tracemalloc` traces during the call,
above its level when the call began, in bytes (:data:`~._features.MEMORY_ATTRIBUTE`). Nested
measured calls are accounted for: a call's peak includes its children's (each call resets the
tracemalloc peak; the peak seen before a child began is kept for its parent). tracemalloc traces
the whole process: calls running at the same time in other threads add to each other's figures,
and tracing slows every allocation of the program. It is started on the first measured call
that asks for it, if the application has not started it. Coroutine functions are measured (from
the first to the last step of the coroutine) without memory: other tasks run in between.
"""

from __future__ import annotations

import functools
import inspect
import threading
import tracemalloc
from types import ModuleType
from typing import Callable

from . import _recorders
from ._features import MEMORY_ATTRIBUTE, argument_features

__all__ = ["instrument_module", "measured", "uninstrument_module"]

#: Attribute marking a wrapper (its value: the operation name).
MARK = "__tracesleuth_measured__"
#: Dunder methods a module-wide instrumentation wraps (the others are protocol plumbing).
DUNDERS_MEASURED = ("__init__", "__call__")

_memory = threading.local()


def _memory_enter() -> None:
    if not tracemalloc.is_tracing():
        tracemalloc.start()
    current, peak = tracemalloc.get_traced_memory()
    stack = _memory.__dict__.setdefault("stack", [])
    if stack:  # the parent's peak so far, before the reset below forgets it
        stack[-1][1] = max(stack[-1][1], peak)
    tracemalloc.reset_peak()
    stack.append([current, 0])


def _memory_exit() -> int:
    stack = _memory.stack
    start, earlier = stack.pop()
    peak = max(tracemalloc.get_traced_memory()[1], earlier)
    if stack:
        stack[-1][1] = max(stack[-1][1], peak)
    return max(peak - start, 0)


def _parameter_names(func: Callable) -> tuple[str, ...]:
    code = getattr(func, "__code__", None)
    if code is None:
        try:
            return tuple(p.name for p in inspect.signature(func).parameters.values()
                         if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        except (TypeError, ValueError):
            return ()
    return code.co_varnames[:code.co_argcount]


def _wrap(func: Callable, name: str, recorder, memory: bool) -> Callable:
    names = _parameter_names(func)

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def wrapper(*args, **kwargs):
            rec = recorder or _recorders._default
            if rec is None:
                return await func(*args, **kwargs)
            attributes = argument_features(names, args, kwargs)
            handle = rec.start(name)
            error = None
            try:
                return await func(*args, **kwargs)
            except BaseException as exc:
                error = exc
                raise
            finally:
                rec.finish(handle, attributes, error)
    else:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            rec = recorder or _recorders._default
            if rec is None:
                return func(*args, **kwargs)
            attributes = argument_features(names, args, kwargs)
            handle = rec.start(name)
            if memory:
                _memory_enter()
            error = None
            try:
                return func(*args, **kwargs)
            except BaseException as exc:
                error = exc
                raise
            finally:
                if memory:
                    attributes[MEMORY_ATTRIBUTE] = _memory_exit()
                rec.finish(handle, attributes, error)

    setattr(wrapper, MARK, name)
    return wrapper


def measured(func: Callable | None = None, *, name: str | None = None, recorder=None, memory: bool = False):
    """Measure every call of a function: wall time, features of its arguments, optionally memory.

    Usable bare (``@measured``) or with settings (``@measured(memory=True)``).

    Parameters
    ----------
    func : callable
        A function or method (coroutine functions too; not generator functions).
    name : str, optional
        The operation name of its spans; default the function's ``__qualname__``
        (``Store.delete``).
    recorder : Recorder, optional
        Where the calls go (:class:`~tracesleuth.instrument.FileRecorder`,
        :class:`~tracesleuth.instrument.OtelRecorder`); default the one set by
        :func:`~tracesleuth.instrument.set_recorder` at the time of each call, and when none
        is set, nothing is measured.
    memory : bool, default=False
        Also record the memory each call allocates (:mod:`tracemalloc`; rules and cost in the
        module docstring).

    Returns
    -------
    callable
        The wrapper (``functools.wraps``: same name, docstring and ``__wrapped__``).

    Raises
    ------
    TypeError
        ``func`` is a generator function (its calls only create the generator).

    Examples
    --------
    >>> from tracesleuth.instrument import measured
    >>> @measured(memory=True)
    ... def build(n):
    ...     return list(range(n))
    >>> len(build(10))   # no recorder set: runs unmeasured
    10
    """
    def decorate(f: Callable) -> Callable:
        if inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f):
            raise TypeError(f"measured cannot measure the generator function {f.__qualname__}: its calls only "
                            "create the generator")
        return _wrap(f, name or f.__qualname__, recorder, bool(memory) and not inspect.iscoroutinefunction(f))

    return decorate if func is None else decorate(func)


def _measurable(value) -> bool:
    return (inspect.isfunction(value) and not getattr(value, MARK, None)
            and not inspect.isgeneratorfunction(value) and not inspect.isasyncgenfunction(value))


def _wanted(attribute: str) -> bool:
    return not (attribute.startswith("__") and attribute.endswith("__")) or attribute in DUNDERS_MEASURED


def instrument_module(module: ModuleType, *, recorder=None, memory: bool = False,
                      include: Callable[[str], bool] | None = None) -> list[str]:
    """Replace every function and method ``module`` defines by a measured wrapper (the paper's runkit wrapper).

    Functions whose ``__module__`` is the module's, and the methods of the classes it defines
    (plain, static and class methods; ``__init__`` and ``__call__`` among the dunders), are
    replaced in place; properties, generator functions, functions imported from elsewhere and
    callables already measured are left alone. Callers that hold a reference taken before
    (``from module import f`` in another module) keep calling the original.

    Parameters
    ----------
    module : module
    recorder : Recorder, optional
        As :func:`measured`.
    memory : bool, default=False
        As :func:`measured`.
    include : callable, optional
        ``include(qualified_name) -> bool`` chooses what to wrap; default everything.

    Returns
    -------
    list of str
        The qualified names wrapped, in the module's order.

    See Also
    --------
    uninstrument_module : Puts the originals back.
    """
    wrapped = []

    def take(qualname: str) -> bool:
        return include is None or bool(include(qualname))

    for attribute, value in list(vars(module).items()):
        if _measurable(value) and value.__module__ == module.__name__ and _wanted(attribute) and take(value.__qualname__):
            setattr(module, attribute, measured(value, recorder=recorder, memory=memory))
            wrapped.append(value.__qualname__)
        elif inspect.isclass(value) and value.__module__ == module.__name__:
            for name, member in list(vars(value).items()):
                if not _wanted(name):
                    continue
                kind = type(member) if isinstance(member, (staticmethod, classmethod)) else None
                func = member.__func__ if kind else member
                if _measurable(func) and take(func.__qualname__):
                    wrapper = measured(func, recorder=recorder, memory=memory)
                    setattr(value, name, kind(wrapper) if kind else wrapper)
                    wrapped.append(func.__qualname__)
    return wrapped


def uninstrument_module(module: ModuleType) -> list[str]:
    """Put back the originals of what :func:`instrument_module` wrapped in ``module``.

    Returns
    -------
    list of str
        The qualified names restored.
    """
    restored = []

    def original(value):
        func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if getattr(func, MARK, None) and hasattr(func, "__wrapped__"):
            inner = func.__wrapped__
            return type(value)(inner) if isinstance(value, (staticmethod, classmethod)) else inner
        return None

    for attribute, value in list(vars(module).items()):
        inner = original(value)
        if inner is not None:
            setattr(module, attribute, inner)
            restored.append(attribute)
        elif inspect.isclass(value) and value.__module__ == module.__name__:
            for name, member in list(vars(value).items()):
                inner = original(member)
                if inner is not None:
                    setattr(value, name, inner)
                    restored.append(f"{value.__qualname__}.{name}")
    return restored
