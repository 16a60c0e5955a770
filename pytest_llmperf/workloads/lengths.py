"""Length distributions: how many tokens each request's prompt or output gets, drawn from the
seeded `numpy` Generator passed in (the same seed, the same lengths). Frozen and keyword-only, so
a typo in a field name is a TypeError. prompts.py makes prompts of the lengths drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.numbers import is_whole

__all__ = ["Distribution", "Fixed", "Normal", "Uniform", "check_count"]


def check_count(owner: str, name: str, value: object, minimum: int = 0) -> None:
    """A token count: a whole number >= `minimum`, else the one line that says so."""
    if not is_whole(value, minimum):
        raise InputError(f"{owner}.{name} must be an integer >= {minimum}, got {value!r}")


def _scale_count(value: int, factor: float) -> int:
    # A non-zero length never scales to 0: a 0-token output or prompt is not a request.
    return max(1, round(value * factor)) if value > 0 else 0


def _check_factor(factor: float) -> None:
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
        raise InputError(f"scale must be a finite number > 0, got {factor!r}")


def _check_n(n: int) -> None:
    check_count("sample", "n", n)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fixed:
    """Every request gets exactly `tokens` tokens."""

    tokens: int

    def __post_init__(self) -> None:
        check_count("Fixed", "tokens", self.tokens)

    @property
    def bounds(self) -> tuple[int, int]:
        return self.tokens, self.tokens

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        _check_n(n)
        return np.full(n, self.tokens, dtype=np.int64)

    def scaled(self, factor: float) -> Fixed:
        _check_factor(factor)
        return Fixed(tokens=_scale_count(self.tokens, factor))


@dataclass(frozen=True, kw_only=True, slots=True)
class Uniform:
    """Uniform integers in [floor(mean*(1-r)), ceil(mean*(1+r))], as vLLM's random dataset."""

    mean: int
    range_ratio: float = 0.0

    def __post_init__(self) -> None:
        check_count("Uniform", "mean", self.mean)
        r = self.range_ratio
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r < 1.0:
            raise InputError(f"Uniform.range_ratio must be in [0, 1), got {r!r}")

    @property
    def bounds(self) -> tuple[int, int]:
        r = self.range_ratio
        return math.floor(self.mean * (1 - r)), math.ceil(self.mean * (1 + r))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        _check_n(n)
        low, high = self.bounds
        return rng.integers(low, high + 1, size=n, dtype=np.int64)

    def scaled(self, factor: float) -> Uniform:
        _check_factor(factor)
        return Uniform(mean=_scale_count(self.mean, factor), range_ratio=self.range_ratio)


@dataclass(frozen=True, kw_only=True, slots=True)
class Normal:
    """Normal lengths clipped to [min, max], as huggingface/inference-benchmarker samples them.

    `variance` keeps inference-benchmarker's name but, as there, it is the STANDARD DEVIATION: its
    `sample_num_tokens` passes it as the second argument of `rand_distr::Normal::new(mean,
    std_dev)`. Draws are floored (its `as u64` cast) and then clipped, so with a wide spread
    much of the mass sits exactly on `min` and `max`.
    """

    mean: int
    min: int
    max: int
    variance: float

    def __post_init__(self) -> None:
        for name in ("mean", "min", "max"):
            check_count("Normal", name, getattr(self, name))
        v = self.variance
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not (math.isfinite(v) and v >= 0)
        ):
            raise InputError(f"Normal.variance must be a finite number >= 0, got {v!r}")
        if not self.min <= self.mean <= self.max:
            raise InputError(
                f"Normal.mean must lie in [min, max] = [{self.min}, {self.max}], got {self.mean}"
            )

    @property
    def bounds(self) -> tuple[int, int]:
        return self.min, self.max

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        _check_n(n)
        draws = np.floor(rng.normal(self.mean, self.variance, size=n))
        return np.clip(draws, self.min, self.max).astype(np.int64)

    def scaled(self, factor: float) -> Normal:
        _check_factor(factor)
        return Normal(
            mean=_scale_count(self.mean, factor),
            min=_scale_count(self.min, factor),
            max=_scale_count(self.max, factor),
            variance=self.variance * factor,
        )


Distribution = Fixed | Uniform | Normal
