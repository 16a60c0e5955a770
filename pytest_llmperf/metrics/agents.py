"""Agent sessions' numbers (client/agents.py runs them), from the records' session and step
(`session`, `turn`): per session and per step.

- session_s: a session that completed every step: its first step's send to its last step's last
  chunk, tool times included (what the agent's user waits). A registered distribution, absent
  from runs without sessions (a multi-turn conversation's sessions count too).
- summary: sessions, those completed, the failed ones by number with the first failure's line
  (the step is in it: client/agents.py), steps/s (completed steps over the run's span), and per
  step index the prompt tokens the engine served from its prefix cache over the prompt tokens
  (vLLM's usage.prompt_tokens_details.cached_tokens, sent with --enable-prompt-tokens-details;
  None where the server said nothing). Per-step latencies are the turn family's
  ("turn2:ttft_s.p50", metrics/turns.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pytest_llmperf.metrics.breakdown import Breakdown, MeasuredRun
from pytest_llmperf.metrics.metric import RunInputs, Summary, latency
from pytest_llmperf.records import RequestRecord

__all__ = ["AgentSessions", "METRICS", "note", "summary"]

ABSENT = "{name}: the run had no sessions (Workload.agent_sessions, Workload.conversations)"


def _sessions(records: Sequence[RequestRecord]) -> dict[int, list[RequestRecord]]:
    found: dict[int, list[RequestRecord]] = defaultdict(list)
    for record in records:
        if record.session is not None:
            found[record.session].append(record)
    return dict(sorted(found.items()))


def _complete(steps: list[RequestRecord], expected: int) -> bool:
    return len(steps) == expected and all(r.ok for r in steps)


def _session_times(records: Sequence[RequestRecord]) -> list[float]:
    sessions = _sessions(records)
    expected = max((len(steps) for steps in sessions.values()), default=0)
    return [max(r.chunk_times_s[-1] for r in steps) - min(r.sent_s for r in steps)
            for steps in sessions.values() if _complete(steps, expected)]


def _session_s(run: RunInputs) -> Summary | None:
    if not any(r.session is not None for r in run.records):
        return None
    return Summary.of(_session_times(run.records))


METRICS = (latency("session_s", compute=_session_s,
                   samples=lambda run: _session_times(run.records), absent=ABSENT),)


def _hit_rates(records: Sequence[RequestRecord]) -> dict[str, float | None]:
    by_step: dict[int, list[RequestRecord]] = defaultdict(list)
    for record in records:
        if record.turn is not None and record.ok:
            by_step[record.turn].append(record)
    rates: dict[str, float | None] = {}
    for step, done in sorted(by_step.items()):
        prompt = sum(r.usage_prompt_tokens or 0 for r in done)
        told = all(r.cached_prompt_tokens is not None for r in done)
        cached = sum(r.cached_prompt_tokens or 0 for r in done)
        rates[str(step)] = cached / prompt if told and prompt else None
    return rates


def summary(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """{"sessions", "completed", "failed": {session: first failure}, "steps_per_s",
    "cache_hit_by_step": {"1": rate, ...}}; None without sessions."""
    sessions = _sessions(records)
    if not sessions:
        return None
    expected = max(len(steps) for steps in sessions.values())
    failed = {s: next(r.error for r in steps if not r.ok)
              for s, steps in sessions.items() if any(not r.ok for r in steps)}
    done = [r for r in records if r.ok and r.sent_s is not None]
    span = (max(r.chunk_times_s[-1] for r in done) - min(r.sent_s for r in done)) if done else 0
    return {"sessions": len(sessions),
            "completed": sum(_complete(steps, expected) for steps in sessions.values()),
            "failed": failed, "steps_per_s": len(done) / span if span > 0 else 0.0,
            "cache_hit_by_step": _hit_rates(records)}


def note(found: dict[str, Any]) -> list[str]:
    """The -v lines: the sessions, steps/s and the cache hits by step; a line per failed
    session (its first failure names the step)."""
    hits = ", ".join(f"{step}: {'-' if rate is None else f'{rate:.0%}'}"
                     for step, rate in found["cache_hit_by_step"].items())
    lines = [f"sessions: {found['completed']} of {found['sessions']} completed, "
             f"{found['steps_per_s']:.2f} steps/s; prefix-cache hits by step {hits}"]
    return lines + [f"session {s} failed: {why}" for s, why in found["failed"].items()]


class AgentSessions(Breakdown):
    """The run file's "agent_sessions": `summary`'s numbers, and `note`'s lines."""

    name = "agent_sessions"

    @classmethod
    def of(cls, result: MeasuredRun) -> AgentSessions | None:
        found = summary(result.records)
        return None if found is None else cls(found)

    def notes(self) -> list[str]:
        return note(self.to_plain())
