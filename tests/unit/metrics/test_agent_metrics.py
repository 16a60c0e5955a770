"""Agent sessions' numbers (metrics/agents.py) from records built by hand: session latency over
the completed sessions, steps/s, the prefix cache's share of each step's prompt, failed sessions
by number; times are binary fractions so every value is exact."""

from __future__ import annotations

import pytest

from pytest_llmperf.metrics import agents, registry
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.metric import LOWER
from pytest_llmperf.records import RequestRecord


def step(session: int, turn: int, sent: float, prompt: int, cached: int | None,
         error: str | None = None) -> RequestRecord:
    return RequestRecord(index=session * 3 + turn, expected_prompt_tokens=prompt,
                         expected_output_tokens=4, scheduled_s=sent, sent_s=sent,
                         chunk_times_s=[sent + 0.25], chunk_tokens=[4], usage_prompt_tokens=prompt,
                         usage_output_tokens=4, cached_prompt_tokens=cached, session=session,
                         turn=turn, error=error)


RECORDS = [step(0, 1, 0.0, 32, 0), step(0, 2, 0.5, 48, 32), step(0, 3, 1.0, 64, 48),
           step(1, 1, 0.0, 32, 16), step(1, 2, 0.75, 48, 0, error="session 1 step 2 of 3: no")]


def test_sessions_their_latency_steps_per_second_and_cache_hits_by_step():
    found = agents.summary(RECORDS)
    # steps 1: 16 of 64 prompt tokens cached; 2: 32 of 48 (the failed step is no step's);
    # 3: 48 of 64. Four steps done over 0 .. 1.25 s.
    assert found == {"sessions": 2, "completed": 1,
                     "failed": {1: "session 1 step 2 of 3: no"}, "steps_per_s": 3.2,
                     "cache_hit_by_step": {"1": 0.25, "2": 32 / 48, "3": 0.75}}
    metrics = compute_metrics(RECORDS).flat()
    assert (metrics["session_s.n"], metrics["session_s.p50"]) == (1, 1.25)
    assert agents.note(found) == [
        "sessions: 1 of 2 completed, 3.20 steps/s; prefix-cache hits by step 1: 25%, 2: 67%, "
        "3: 75%", "session 1 failed: session 1 step 2 of 3: no"]


def test_a_server_that_does_not_say_what_it_cached_leaves_the_step_unknown():
    found = agents.summary([step(0, 1, 0.0, 32, None), step(0, 2, 0.5, 48, 32)])
    assert found["cache_hit_by_step"] == {"1": None, "2": 32 / 48}
    assert agents.note(found)[0].endswith("by step 1: -, 2: 67%")


def test_a_run_without_sessions_has_no_session_latency():
    plain = step(0, 1, 0.0, 32, 0)
    plain.session = plain.turn = None
    assert agents.summary([plain]) is None
    with pytest.raises(KeyError, match="the run had no sessions"):
        compute_metrics([plain]).get("session_s.p50")
    assert (registry.direction("session_s.p90"), registry.known("session_s.p90").unit) == (
        LOWER, "s")
