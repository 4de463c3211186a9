"""The receiver's settings, checked once, where they come in."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ..errors import ParameterError

MiB = 1 << 20


@dataclass(frozen=True, kw_only=True)
class CollectorSettings:
    """Settings of the span receiver (see :func:`~tracesleuth.collector.serve` for each).

    Every value is checked when the object is built; a bad one raises
    :class:`~tracesleuth.errors.ParameterError` naming the parameter, the allowed range and the
    value given.
    """

    token: str | None = None
    flush_interval_seconds: float = 1.0
    max_body_bytes: int = 16 * MiB
    max_queue_bytes: int = 64 * MiB
    max_queue_requests: int = 64
    max_wal_bytes: int = 1024 * MiB
    max_segment_bytes: int = 32 * MiB
    retry_after_seconds: int = 1
    body_timeout_seconds: float = 30.0
    commit_timeout_seconds: float = 30.0
    decode_threads: int = 2
    #: :class:`tracesleuth.io.SpanLimits` applied to every span received (None: the defaults).
    span_limits: object = None
    #: :class:`tracesleuth.io.LogLimits` applied to every log record received (None: the defaults).
    log_limits: object = None

    def __post_init__(self) -> None:
        ints = {"max_body_bytes": 1, "max_queue_bytes": 1, "max_queue_requests": 1, "max_wal_bytes": 1,
                "max_segment_bytes": 1, "retry_after_seconds": 0, "decode_threads": 1}
        floats = {"flush_interval_seconds": 0.01, "body_timeout_seconds": 0.01, "commit_timeout_seconds": 0.01}
        for name, low in ints.items():
            check_int(name, getattr(self, name), low)
        for name, low in floats.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < low:
                raise ParameterError(f"The {name!r} parameter of the collector must be a number in the range "
                                     f"[{low}, inf). Got {value!r} instead.")
        from ..io import LogLimits, SpanLimits

        for name, kind in (("span_limits", SpanLimits), ("log_limits", LogLimits)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise ParameterError(f"The {name!r} parameter of the collector must be a {kind.__name__} or None. "
                                     f"Got {value!r} instead.")
        if self.token is not None and (not isinstance(self.token, str) or not self.token
                                       or any(c.isspace() for c in self.token)):
            raise ParameterError(f"The 'token' parameter of the collector must be None or a non-empty string "
                                 f"without white space. Got {self.token!r} instead.")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The setting names (the keyword arguments of :func:`create_app`)."""
        return tuple(f.name for f in fields(cls))


def check_int(name: str, value, low: int, high: int | None = None, *, owner: str = "the collector") -> int:
    """``value`` when it is an int in ``[low, high]``, else :class:`ParameterError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise ParameterError(f"The {name!r} parameter of {owner} must be an int in the range "
                             f"[{low}, {'inf)' if high is None else f'{high}]'}. Got {value!r} instead.")
    return value
