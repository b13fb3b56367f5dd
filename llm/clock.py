"""Durations on the monotonic clock (nanoseconds, as every event is stamped) in the units the records and
reports use (milliseconds), converted in one place."""

from __future__ import annotations


def ms(start_ns: int | None, end_ns: int | None, digits: int | None = 3) -> float | None:
    """Milliseconds from `start_ns` to `end_ns`, None if either is missing; rounded to `digits` (microseconds
    by default: finer than any clock here is worth), or not at all with None."""
    if start_ns is None or end_ns is None:
        return None
    span = (end_ns - start_ns) / 1e6
    return span if digits is None else round(span, digits)


def ns(ms: float) -> int:
    """Milliseconds (a setting, a reported figure) as nanoseconds on the clock."""
    return int(ms * 1e6)
