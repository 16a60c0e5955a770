"""A bisection from start to verdict: environments built as the search needs them, each step
looked up in the results store before it is measured (so an interrupted bisect resumes where it
stopped), a progress line per step, and a time budget checked before each step."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_llmperf.bisect.candidates import Candidate
from pytest_llmperf.bisect.environments import Environment, EnvironmentCache, EnvironmentFailed
from pytest_llmperf.bisect.report import Step, progress_line, verdict_lines
from pytest_llmperf.bisect.search import Finding, Outcome, Search
from pytest_llmperf.bisect.step import StepPlan, StepResult, merge, pairs_wanted, run_step
from pytest_llmperf.errors import InputError
from pytest_llmperf.history.store import HistoryStore

__all__ = ["Bisect", "BisectOutcome", "step_key"]

# A step that failed because the machine, not the candidate, set its numbers (the plugin's lines:
# machine/disturbance.py, metrics/client_check.py): measured once more before B is skipped.
MACHINE_FAILED = re.compile(r"\b(disturbed|client-limited) measurement:")
# What a failed step's line says when side A, the last good candidate, is what failed: then
# nothing after it can be judged, so the search stops instead of skipping every candidate.
SIDE_A_FAILED = "A/B side A"


def step_key(plan: StepPlan, a: Environment, b: Environment, repeat: bool = False) -> str:
    """The results store's key of one step: everything that decides its outcome (and whether
    it is the verdict's repeat, a measurement of its own)."""
    fields = {**plan.key_fields(), "a": a.identity, "b": b.identity,
              **({"repeat": 1} if repeat else {})}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


@dataclass
class BisectOutcome:
    search: Search
    steps: list[Step]
    lines: list[str]

    @property
    def finding(self) -> Finding:
        return self.search.finding()


@dataclass
class Bisect:
    """One search over `candidates` (oldest, known good, first) for `plan`'s test."""

    candidates: list[Candidate]
    plan: StepPlan
    cache: EnvironmentCache
    work_dir: Path
    store: HistoryStore | None = None
    max_minutes: float | None = None
    repeat_verdict: bool = True
    say: Callable[[str], None] = print
    environments: dict[int, Environment] = field(default_factory=dict)

    def run(self) -> BisectOutcome:
        if len(self.candidates) < 2:
            raise InputError("bisect needs at least two candidates: the known good one first, "
                             "then the ones to search, oldest first")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        search = Search(len(self.candidates), repeat_verdict=self.repeat_verdict)
        steps: list[Step] = []
        budget_s = self.max_minutes * 60 if self.max_minutes else None
        started, note = time.monotonic(), ""
        self.say(f"bisect: {self.plan.test_id} over {len(self.candidates)} candidates, "
                 f"{self.plan.pairs} pairs a step (+{self.plan.confirm_pairs} to confirm), "
                 f"tolerance {self.plan.tolerance:g}")
        while (pair := search.next_pair()) is not None:
            measured = [s.result.seconds for s in steps if not s.from_history and s.result.seconds]
            guess = sum(measured) / len(measured) if measured else 0.0
            elapsed = time.monotonic() - started
            if budget_s is not None and elapsed + guess > budget_s:
                note = (f"the time budget of {self.max_minutes:g} min would be spent before "
                        f"the next step ({elapsed / 60:.1f} min spent, a step takes about "
                        f"{guess / 60:.1f})")
                break
            deadline = started + budget_s if budget_s is not None else None
            step = self._step(*pair, repeat=search.is_repeat(*pair), deadline=deadline)
            search.record(step.a, step.b, step.result.outcome)
            steps.append(step)
            self.say(progress_line(len(steps), step, self.candidates,
                                   time.monotonic() - started, budget_s))
        lines = verdict_lines(self.plan.test_id, self.candidates, search, steps,
                              self.environments, note)
        return BisectOutcome(search, steps, lines)

    def _environment(self, index: int) -> Environment:
        if index not in self.environments:
            candidate = self.candidates[index]
            if candidate.spec is not None:
                self.say(f"bisect: environment for {candidate.text} ...")
            self.environments[index] = self.cache.environment(candidate)
        return self.environments[index]

    def _step(self, a: int, b: int, repeat: bool = False,
              deadline: float | None = None) -> Step:
        try:
            env_a = self._environment(a)
        except EnvironmentFailed as exc:
            raise InputError(f"bisect: the known good candidate {self.candidates[a].text} "
                             f"{exc}; start from one that installs") from None
        try:
            env_b = self._environment(b)
        except EnvironmentFailed as exc:
            return Step(a, b, StepResult(Outcome.FAILED, message=str(exc)), repeat=repeat)
        key = step_key(self.plan, env_a, env_b, repeat)
        remembered = self.store.bisect_step(key) if self.store else None
        if remembered is not None:
            return Step(a, b, StepResult.from_plain(remembered[1]), from_history=True,
                        repeat=repeat)
        name = key[:12]
        result = run_step(self.plan, env_a, env_b, self.work_dir / f"step-{name}.json",
                          self.work_dir / f"step-{name}.log")
        if result.outcome == Outcome.FAILED and MACHINE_FAILED.search(result.message):
            # The machine's other load, not B: skipping B would search around a good candidate.
            self.say("bisect: the step's measurement was the machine's (disturbed or client "
                     "limited); measuring it once more")
            result = run_step(self.plan, env_a, env_b, self.work_dir / f"step-{name}-again.json",
                              self.work_dir / f"step-{name}-again.log")
        result = self._settle(result, env_a, env_b, name, deadline)
        if result.outcome == Outcome.FAILED and SIDE_A_FAILED in result.message:
            raise InputError(f"bisect: side A, the good candidate {self.candidates[a].text}, "
                             f"failed: {result.message}")
        if self.store is not None and result.outcome != Outcome.FAILED:
            # A failure may be the machine's, not the candidate's: measured again on resume.
            self.store.record_bisect_step(key, self.plan.test_id, env_a.name, env_b.name,
                                          result.outcome.value, result.to_plain())
        return Step(a, b, result, repeat=repeat)

    def _settle(self, result: StepResult, env_a: Environment, env_b: Environment, name: str,
                deadline: float | None) -> StepResult:
        """An unsettled step measures more pairs before the search gives up on it: a session
        of as many pairs as its spread says would resolve the tolerance (step.pairs_wanted),
        judged together with all before it (step.merge), until the step settles, reaches the
        plan's most pairs, or the next session would overrun the time budget. A B = A step
        whose first pairs were too noisy then ends good, as it is."""
        plan = replace(self.plan, confirm_pairs=0)
        while (result.outcome == Outcome.UNSETTLED and result.paired
               and result.pairs < self.plan.max_pairs):
            per_session = result.seconds / result.sessions
            if deadline is not None and time.monotonic() + per_session > deadline:
                break
            more_pairs = pairs_wanted(self.plan, result) - result.pairs
            self.say(f"bisect: unsettled after {result.pairs} pairs; measuring {more_pairs} "
                     "more")
            stem = self.work_dir / f"step-{name}-{result.sessions + 1}"
            more = run_step(replace(plan, pairs=more_pairs), env_a, env_b,
                            stem.with_suffix(".json"), stem.with_suffix(".log"))
            if more.outcome == Outcome.FAILED:
                break  # the machine's or the engine's: judged on the pairs it has
            result = merge(self.plan, result, more)
        return result
