"""The summary's first line when the repository holds no committed table for this machine's
tests: what gated them instead, said before the table, not folded into the notes at its end.

A fresh clone on a CPU the committed tables were not measured on (another model, core count or
generation) gates nothing against what the repository holds; a reader who sees only "pass" in
every row would take the run for a regression test. So the section opens with one line that
counts the measurements without a committed table, says what judged them (this machine's
first-run baselines; the trend gate; an A/B) and names the command that makes this machine's
own tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.notes import Note
from pytest_llmperf.verdict import budget, shapes
from pytest_llmperf.verdict.status import Status

__all__ = ["FIRST_RUN", "budget_headline", "headline"]

# The start of references.BaselineTable's note for a measurement gated by this machine's own table.
FIRST_RUN = "gated against this machine's first-run baseline"
_UNGATED = frozenset({Status.NO_BASELINE.value, Status.OTHER_HARDWARE.value})


def headline(rows: Sequence[Mapping[str, Any]], notes: Iterable[Note],
             hardware_class: str | None) -> list[str]:
    """One line, or none where every measurement had its committed table."""
    ungated = sum(1 for row in rows if row.get("status") in _UNGATED)
    local = len({note.test_id for note in notes if note.text.startswith(FIRST_RUN)})
    if not ungated and not local:
        return []
    judged = []
    if local:
        judged.append(f"{local} gated against this machine's first-run baselines "
                      "(.llmperf/baselines/)")
    if ungated:
        judged.append(f"{ungated} not gated (their first-run baselines are recorded now, for "
                      "the next run here)")
    marker = shapes.marker_of(hardware_class or "cpu")
    return [f"no committed baseline in baselines/ for this machine's hardware for "
            f"{ungated + local} of {len(rows)} measurements: {', '.join(judged)}; the trend "
            "gate (--llmperf-trend) and an A/B (--llmperf-ab) gate without one; commit this "
            f"machine's own: llmperf bootstrap-baselines --marker {marker}"]


def budget_headline(rows: Sequence[Mapping[str, Any]], notes: Iterable[Note]) -> list[str]:
    """The run's false-alarm budget and what it cost (verdict/budget.py), or none where no
    gated metric had a measured noise."""
    held = sum(1 for note in notes if note.text.startswith(budget.UNCONFIRMED))
    line = budget.budget_line([row.get("detectable") or {} for row in rows], held)
    return [line] if line else []
