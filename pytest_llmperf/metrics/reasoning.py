"""A reasoning model's numbers (workloads/reasoning.py sends its requests), per request from the
stream as the client split it (client/sse.py): what the thinking cost a user who waits for the
answer.

- ttfo_s, time to first output token: from the send to the first chunk of the answer (the
  stream's `content`). TTFT (ttft_s) stays the first generated token of any kind, a thought
  included, so ttfo_s - ttft_s is the wait the thinking added. AIPerf names it so
  (https://github.com/ai-dynamo/aiperf/pull/359).
- reasoning_s: that difference per request, ttfo_s - ttft_s: the thinking's time after the
  first token (the tokens that open and close the thinking, which a parser streams as neither
  thinking nor answer, included).
- reasoning_tokens: the tokens of the chunks that streamed thinking (`reasoning`).
- answer_tokens: the tokens of the chunks that streamed the answer (`content`): the output
  after the thinking.

Each is over the completed reasoning requests; ttfo_s and reasoning_s over those whose answer
started (a request whose thinking ran to max_tokens has no answer, and no TTFO). A run without
reasoning requests has none of them. `ttfo_s` takes a goodput limit (metrics/goodput.py): an SLO
on when the answer starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_llmperf.metrics.breakdown import Breakdown, MeasuredRun
from pytest_llmperf.metrics.metric import HIGHER, LOWER, Metric, RunInputs, Summary, latency
from pytest_llmperf.numbers import finite_or_none
from pytest_llmperf.records import RequestRecord

__all__ = ["Reasoning", "METRICS", "note", "request_ttfo", "summary"]

ABSENT = ("{name}: the run sent no reasoning requests (Workload.reasoning, on an engine with a "
          "reasoning parser)")


def request_ttfo(record: RequestRecord) -> float | None:
    """The request's time to first output token; None when it is no reasoning request, or its
    answer never started."""
    if record.first_output_s is None or record.sent_s is None:
        return None
    return record.first_output_s - record.sent_s


def _reasoned(run: RunInputs) -> list[RequestRecord] | None:
    """The completed reasoning requests; None when the run sent none (then no metric here)."""
    if not any(r.reasoning_tokens is not None for r in run.records):
        return None
    return [r for r in run.done if r.reasoning_tokens is not None]


def _answered(run: RunInputs) -> list[RequestRecord]:
    return [r for r in _reasoned(run) or () if r.first_output_s is not None]


def _summary_of(samples):
    def compute(run: RunInputs) -> Summary | None:
        return None if _reasoned(run) is None else Summary.of(samples(run))
    return compute


def _ttfo(run: RunInputs) -> list[float]:
    return [r.first_output_s - r.sent_s for r in _answered(run)]


def _reasoning_s(run: RunInputs) -> list[float]:
    return [r.first_output_s - r.chunk_times_s[0] for r in _answered(run)]


def _counts(field: str):
    return lambda run: [getattr(r, field) for r in _reasoned(run) or ()]


METRICS: tuple[Metric, ...] = (
    latency("ttfo_s", samples=_ttfo, compute=_summary_of(_ttfo), absent=ABSENT),
    latency("reasoning_s", samples=_reasoning_s, compute=_summary_of(_reasoning_s),
            absent=ABSENT),
    # The server's count where it gives one (RequestRecord.thinking_tokens), as output tokens.
    Metric("reasoning_tokens", "tokens", LOWER, distribution=True,
           samples=_counts("thinking_tokens"),
           compute=_summary_of(_counts("thinking_tokens")), absent=ABSENT),
    Metric("answer_tokens", "tokens", HIGHER, distribution=True,
           samples=_counts("answer_tokens"), compute=_summary_of(_counts("answer_tokens")),
           absent=ABSENT),
)


def summary(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """{"requests", "answered", "reasoning_tokens", "answer_tokens", "server_reasoning_tokens"}
    over the completed reasoning requests (token totals; the server's from its usage, None
    where it sent none), None for a run without reasoning requests."""
    run = RunInputs(records)
    reasoned = _reasoned(run)
    if reasoned is None:
        return None
    server = [r.usage_reasoning_tokens for r in reasoned]
    return {"requests": len(reasoned), "answered": len(_answered(run)),
            "reasoning_tokens": sum(r.reasoning_tokens for r in reasoned),
            "answer_tokens": sum(r.answer_tokens or 0 for r in reasoned),
            "server_reasoning_tokens": None if None in server or not server else sum(server)}


def note(found: dict[str, Any]) -> str:
    """The -v line: the requests, their thinking and answer tokens (the server's count beside
    the stream's), and TTFT, TTFO and the thinking's time at p50 (Reasoning's "p50_s")."""
    def ms(name: str) -> str:
        value = found["p50_s"].get(name)
        return "-" if value is None else f"{value * 1e3:.1f} ms"

    server = found["server_reasoning_tokens"]
    said = "" if server is None else f" (the server's usage: {server})"
    return (f"reasoning: {found['requests']} requests, {found['answered']} answered; "
            f"{found['reasoning_tokens']} tokens of thinking{said}, {found['answer_tokens']} of "
            f"answer; p50 TTFT {ms('ttft_s')}, TTFO {ms('ttfo_s')}, thinking "
            f"{ms('reasoning_s')}")


class Reasoning(Breakdown):
    """The run file's "reasoning": `summary`'s counts with the run's TTFT, TTFO and thinking
    time at p50 ("p50_s"), and `note`'s line."""

    name = "reasoning"

    @classmethod
    def of(cls, result: MeasuredRun) -> Reasoning | None:
        found = summary(result.records)
        if found is None:
            return None
        flat = result.metrics.flat()
        p50 = {name: flat.get(f"{name}.p50") for name in ("ttft_s", "ttfo_s", "reasoning_s")}
        return cls({**found, "p50_s": {name: finite_or_none(value)  # NaN: null
                                       for name, value in p50.items()}})

    def notes(self) -> list[str]:
        return [note(self.to_plain())]
