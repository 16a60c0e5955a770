"""One test's baseline as the gate reads it: each gated metric's entry (value, spread, n,
direction, tolerance and where the spread came from) and the test's provenance. The file that
stores them: verdict/baseline_toml.py; reading and rewriting one: verdict/baselines.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.numbers import is_real

__all__ = ["DIRECTIONS", "MAX_TOLERANCE", "SPREAD_SOURCE", "SPREAD_SOURCES", "TOLERANCE_RULE",
           "Baseline", "BaselineEntry", "BaselineError", "is_tolerance"]

DIRECTIONS = ("lower", "higher")

# Optional: absent in files written before it existed, which keep the old band (gate.py).
SPREAD_SOURCE = "spread_source"
SPREAD_SOURCES = ("repeats", "history", "prior")
# A tolerance is a factor minus one (gate.py): 4 lets a metric get 5x worse. Anything above is
# almost surely a percentage written as a number ("10" for 10%).
MAX_TOLERANCE = 4.0
TOLERANCE_RULE = f"a fraction (0.1 means 10%) from 0 to {MAX_TOLERANCE:g}"


def is_tolerance(value: object) -> bool:
    """Does `value` follow TOLERANCE_RULE? (A bool is not a number here.)"""
    return is_real(value, 0, MAX_TOLERANCE)


class BaselineError(InputError):
    """A baseline or saved-run file that cannot be used; the message is one line with the fix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BaselineEntry:
    """The stored form of one gated metric; verdict/baseline_toml.py has the file layout.
    Keyword-only: its numbers are in another order than Estimate's, and a positional call could
    swap `n` and `direction` or the spread and the tolerance without an error."""

    value: float
    spread: float
    direction: str
    tolerance: float
    n: int
    # Where `spread` came from (SPREAD_SOURCES); None: an entry from before the field existed,
    # whose spread is its repeats' only and which the gate judges by the old rule.
    spread_source: str | None = None
    # Never stored: the band (a factor, like the tolerance) while this machine's run-to-run
    # spread is unmeasured (noise.unmeasured_here); 0 where it was measured.
    unmeasured: float = 0.0

    @classmethod
    def of(cls, estimate: Estimate, tolerance: float) -> BaselineEntry:
        """The entry of a stored estimate (its direction set) at `tolerance`; a NaN spread (one
        repeat of a metric that had none) as 0."""
        spread = estimate.spread if math.isfinite(estimate.spread) else 0.0
        return cls(value=estimate.value, spread=spread, direction=str(estimate.direction),
                   tolerance=tolerance, n=estimate.n)

    @property
    def estimate(self) -> Estimate:
        """The entry's numbers as the one estimate type (metrics/stats.py)."""
        return Estimate(self.value, self.spread, self.n, self.direction, self.spread_source)


@dataclass(frozen=True)
class Baseline:
    """One test's table. `path` and `test_id` say where it came from, for messages."""

    metrics: dict[str, BaselineEntry]
    provenance: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    test_id: str = ""

    @property
    def where(self) -> str:
        return f'{self.path} :: "{self.test_id}"'
