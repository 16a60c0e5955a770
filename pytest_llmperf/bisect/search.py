"""Which candidate to measure next, and what the steps so far found. Pure: no I/O.

Candidates are ordered, oldest first; the first is the known good one. A step measures a
candidate (B) against the last good one (A) by paired A/B, and says good, bad, unsettled (its
pairs cannot tell; the search stops there and says so rather than guess) or failed (B would not
install or start: it is skipped, as `git bisect skip` does, and the search goes on around it).

The far end is measured first: if it is not worse than the first candidate there is nothing to
find. Then the middle of what is still in question, until the last good and the first bad are
neighbours (skipped candidates aside). If those two were never measured against each other (the
first bad was found against an older good one), one more step measures them directly: the
verdict is the A/B of the two candidates it names, and when that step finds no change the
regression built up over several candidates instead of arriving in one.

With `repeat_verdict`, the A/B of the last good and the first bad is measured once more before
the search names them, and must be bad again. A search takes several steps, each judged at a
~90% interval: a change near the tolerance can look bad once by chance (on the 2-core VM a TPOT
step of +5.2%, interval 1.034-1.099, measured 1.006 when repeated: docs/bisect.md). A repeat
that is not bad leaves the search unsettled there.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["Finding", "Outcome", "Search"]


class Outcome(str, enum.Enum):
    GOOD = "good"  # B is not worse than A beyond the band
    BAD = "bad"  # B regressed against A
    UNSETTLED = "unsettled"  # the pairs cannot tell (INCONCLUSIVE, or beyond the band unconfirmed)
    FAILED = "failed"  # B did not install, start or measure


class Finding(str, enum.Enum):
    FIRST_BAD = "first bad"  # the last good and the first bad are neighbours, measured directly
    NO_CHANGE = "no change"  # the far end is not worse than the first candidate
    GRADUAL = "gradual"  # the far end is worse, but no one step between neighbours is
    UNSETTLED = "unsettled"  # a step could not tell; the range still in question is reported
    NOTHING_MEASURABLE = "nothing measurable"  # every candidate after the first failed
    OPEN = "open"  # not finished (the time budget ran out)


@dataclass
class Search:
    """The state of a bisection over `count` candidates (indexes 0 .. count - 1)."""

    count: int
    good: int = 0
    bad: int | None = None  # None until the far end has been measured bad
    skipped: set[int] = field(default_factory=set)
    measured: dict[tuple[int, int], Outcome] = field(default_factory=dict)
    unsettled_at: tuple[int, int] | None = None
    repeat_verdict: bool = False
    repeated: Outcome | None = None  # the verdict's A/B measured again (repeat_verdict)

    def __post_init__(self) -> None:
        if self.count < 2:
            raise ValueError(f"bisect needs at least 2 candidates, got {self.count}")

    def next_pair(self) -> tuple[int, int] | None:
        """The (A, B) candidates to measure next; None when the search is over."""
        if self.unsettled_at is not None:
            return None
        if self.bad is None:
            far = self._far_end()
            if far is None or far == self.good:
                return None
            return self.good, far
        between = [i for i in range(self.good + 1, self.bad) if i not in self.skipped]
        if between:
            middle = (self.good + self.bad) / 2
            return self.good, min(between, key=lambda i: (abs(i - middle), i))
        if (self.good, self.bad) not in self.measured:
            return self.good, self.bad
        if self._repeat_owed():
            return self.good, self.bad
        return None

    def is_repeat(self, a: int, b: int) -> bool:
        """Whether measuring (a, b) now is the verdict's repeat, not its first measurement."""
        return (a, b) == (self.good, self.bad) and self._repeat_owed()

    def _repeat_owed(self) -> bool:
        return (self.repeat_verdict and self.repeated is None
                and self.measured.get((self.good, self.bad)) == Outcome.BAD)

    def record(self, a: int, b: int, outcome: Outcome) -> None:
        """What the step (a, b) found."""
        if self.is_repeat(a, b):
            self.repeated = outcome
            if outcome != Outcome.BAD:
                self.unsettled_at = (a, b)
            return
        self.measured[(a, b)] = outcome
        if outcome == Outcome.FAILED and b == self.bad:
            self.unsettled_at = (a, b)  # the first bad measured before, not now: cannot confirm
        elif outcome == Outcome.FAILED:
            self.skipped.add(b)
        elif outcome == Outcome.UNSETTLED:
            self.unsettled_at = (a, b)
        elif outcome == Outcome.BAD:
            self.bad = b
        elif self.bad is None or b < self.bad:
            self.good = b

    def finding(self) -> Finding:
        if self.unsettled_at is not None:
            return Finding.UNSETTLED
        if self.next_pair() is not None:
            return Finding.OPEN
        if self.bad is None:
            if self._far_end() is None:
                return Finding.NOTHING_MEASURABLE
            return Finding.NO_CHANGE
        if self.measured.get((self.good, self.bad)) == Outcome.BAD:
            return Finding.FIRST_BAD
        return Finding.GRADUAL

    def in_question(self) -> tuple[int, int | None]:
        """The last candidate known good and the first known bad (None: none known)."""
        return self.good, self.bad

    def _far_end(self) -> int | None:
        left = [i for i in range(1, self.count) if i not in self.skipped]
        return max(left) if left else None
