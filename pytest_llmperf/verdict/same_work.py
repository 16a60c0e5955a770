"""The same work, or no verdict: the check every comparison makes before it judges numbers (a
saved run, side A of an A/B; metrics/work.py says what "work" is). `Rule.check` gives the line
that makes a verdict NOT COMPARABLE, or None, and the notes that go beside the verdict: whether
the greedy outputs were identical, or that the work could not be checked (a run file written
before it was recorded). Pure: no pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.metrics.work import ENGINE_SHARES, ExecutedWork, differences, outputs_line

__all__ = ["Rule", "WorkCheck"]


@dataclass(frozen=True)
class WorkCheck:
    incomparable: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Rule:
    """How strict the check is: with `outputs_must_match` (--llmperf-outputs must-match) greedy
    outputs that differ make the sides incomparable too; otherwise they are a note, since FP8
    or a new kernel may legitimately change the text."""

    outputs_must_match: bool = False

    def check(self, reference: ExecutedWork | None,
              reference_metrics: Mapping[str, Estimate],
              current: ExecutedWork | None, current_metrics: Mapping[str, Estimate],
              *, reference_name: str) -> WorkCheck:
        """`reference` is side A (`reference_name` says what it is: "A", "the saved run"), the
        current measurement side B."""
        if current is None:
            return WorkCheck()
        if reference is None:
            return WorkCheck(notes=[f"the work could not be checked: {reference_name} has no "
                                    "record of the work it executed (written by an older "
                                    "pytest-llmperf); save it again to check it"])
        found = differences(reference, current, _shares(reference_metrics),
                            _shares(current_metrics))
        notes = []
        outputs = outputs_line(reference, current)
        if outputs and "differ" in outputs and self.outputs_must_match:
            found.append(f"{outputs} (--llmperf-outputs must-match)")
        elif outputs:
            notes.append(outputs)
        if not found:
            return WorkCheck(notes=notes)
        sides = "" if reference_name == "A" else f" (A: {reference_name}, B: this run)"
        return WorkCheck(f"NOT COMPARABLE{sides}: the two sides did not execute the same work: "
                         + "; ".join(found), notes)


def _shares(metrics: Mapping[str, Estimate]) -> dict[str, float]:
    return {name: metrics[name].value for name in ENGINE_SHARES if name in metrics}
