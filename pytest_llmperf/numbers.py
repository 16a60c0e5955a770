"""The two questions every argument check and file reader asks of a number a user wrote: is it a
whole number in range, is it a real number in range. A bool is neither (it is an int in Python,
but `n = true` or `gpus(True)` is a mistake), and numpy's numbers count as numbers. And the one
way a report writes a number that may be missing or not finite (`finite_or_none`), and the one
way a reader takes a number back from a file that may hold null (`number_or_nan`)."""

from __future__ import annotations

import math
from numbers import Integral, Real

__all__ = ["finite_or_none", "is_real", "is_whole", "number_or_nan"]


def is_whole(value: object, minimum: int | None = None, maximum: int | None = None) -> bool:
    """An integer (not a bool) in [minimum, maximum]; a bound left as None is open."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        return False
    return bool((minimum is None or value >= minimum) and (maximum is None or value <= maximum))


def is_real(value: object, minimum: float | None = None, maximum: float | None = None, *,
            finite: bool = False, above: float | None = None, nan_ok: bool = False) -> bool:
    """A number (not a bool; NaN only if `nan_ok`, bounds then not asked) in [minimum,
    maximum], greater than `above` if given, and finite if asked."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return False
    if math.isnan(value):
        return nan_ok
    return bool((not finite or math.isfinite(value))
                and (minimum is None or value >= minimum)
                and (maximum is None or value <= maximum)
                and (above is None or value > above))


def finite_or_none(value: float | None) -> float | None:
    """A finite number as a float; None for None, NaN or an infinity. Reports write None (JSON
    null, a table's "-") where a number is missing: JSON has no NaN or Infinity."""
    return float(value) if value is not None and math.isfinite(value) else None


def number_or_nan(value: object) -> float:
    """A number read from a file as a float; NaN for null (how a report writes a missing or
    non-finite number: `finite_or_none`), a bool or anything else that is no number."""
    return float(value) if is_real(value, nan_ok=True) else math.nan
