"""Where the time went: a client latency's mean split into the engine's own phases and the rest,
from the engine's request-timing histograms over the measured window (metrics/histograms.py,
docs/phases.md).

vLLM times each request in its engine (vllm/v1/metrics/stats.py,
https://github.com/vllm-project/vllm/blob/main/vllm/v1/metrics/stats.py): the queue from the
scheduler's QUEUED event to its first SCHEDULED one, prefill from then to the first token, decode
from the first token to the last; its TTFT and E2EL start at the request's arrival in the engine
client, after the API server has parsed and tokenized it. So a client's mean TTFT is

    client TTFT = queue + prefill + hand-off + frontend and wire

hand-off being the engine's own TTFT less its queue and prefill (the request's way from the API
process to the scheduler, and the first token's way back), and "frontend and wire" the client's
TTFT less the engine's (`frontend_s.mean`: the API server before and after the engine, the
network, the client). E2EL likewise, with decode as a further phase. Means add up; percentiles do
not, so the split is of means whatever statistic regressed.

A server that times fewer phases (SGLang's docs name its TTFT and E2EL histograms only) gets the
split it has: "server" for its whole TTFT, and frontend and wire.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["FRONTEND", "REPORT_VALUES", "SGLANG_PHASES", "SPLIT_NAMES", "VLLM_PHASES", "Split",
           "count_note",
           "frontend", "growth", "itl_check", "medians", "split"]

SERVER = "server:"  # as registry.SERVER_PREFIX (the registry imports this module's names)
# The client's TTFT mean less the engine's: its own metric, present where the server times TTFT.
FRONTEND = "frontend_s.mean"

# Each server kind's request-timing histograms behind the keys the summary reports
# ("queue_s" -> "server:queue_s.mean", ...). vLLM's: vllm/v1/metrics/loggers.py
# (https://github.com/vllm-project/vllm/blob/main/vllm/v1/metrics/loggers.py), and
# https://docs.vllm.ai/en/latest/design/metrics.html.
VLLM_PHASES = {
    "ttft_s": "vllm:time_to_first_token_seconds",
    "itl_s": "vllm:inter_token_latency_seconds",
    "e2el_s": "vllm:e2e_request_latency_seconds",
    "queue_s": "vllm:request_queue_time_seconds",
    "prefill_s": "vllm:request_prefill_time_seconds",
    "decode_s": "vllm:request_decode_time_seconds",
    "inference_s": "vllm:request_inference_time_seconds",
}
# SGLang's, as https://docs.sglang.io/docs/references/production_metrics names them: TTFT and
# E2EL. Its queue, prefill and decode times are not among the histograms its docs name.
SGLANG_PHASES = {
    "ttft_s": "sglang:time_to_first_token_seconds",
    "e2el_s": "sglang:e2e_request_latency_seconds",
}

# The engine's phases inside each client latency, in the order a request goes through them.
_INSIDE = {"ttft_s": ("queue_s", "prefill_s"), "e2el_s": ("queue_s", "prefill_s", "decode_s")}
FRONTEND_PART = "frontend and wire"
# Every metric a split reads: what a reference must hold for a regression to name its phase.
SPLIT_NAMES = tuple(dict.fromkeys(
    [f"{latency}.mean" for latency in _INSIDE]
    + [f"{SERVER}{name}.mean" for latency, inside in _INSIDE.items()
       for name in (latency, *inside)]))

# What a report's row keeps for the split and the ITL check (reports/model.py, terminal.py).
REPORT_VALUES = (*SPLIT_NAMES, "itl_s.mean", f"{SERVER}itl_s.mean", f"{SERVER}spec_decode_drafts")

# Calibrated on the CPU engine (docs/phases.md, "Self-checks"): over 15 runs on a shared 2-core
# machine the client's ITL mean and the engine's differed by 0.1-6.6%, so a disagreement beyond
# ITL_SHARE of the engine's (or ITL_FLOOR_S, for ITLs of a millisecond or two) is the client's
# or the transport's. Frontend and wire moved between 1 and 4 ms from run to run at 1-4
# concurrent requests: it "jumps" when it is the part that grew most, by more than
# FRONTEND_JUMP_FLOOR_S and at least doubling (FRONTEND_JUMP_FACTOR x its reference value).
ITL_FLOOR_S = 0.0002
ITL_SHARE = 0.10
FRONTEND_JUMP_FLOOR_S = 0.005
FRONTEND_JUMP_FACTOR = 1.0
SUSPECT = "the client or the transport is suspect, not the engine"


def _finite(values: Mapping[str, float], name: str) -> float | None:
    value = values.get(name)
    return float(value) if value is not None and math.isfinite(value) else None


def _ms(seconds: float, sign: str = "") -> str:
    # + 0.0 turns a rounded -0.0 (a change of -0.00004 ms) into 0.0.
    return f"{round(seconds * 1e3, 1) + 0.0:{sign}.1f}"


@dataclass(frozen=True)
class Split:
    """A client latency's mean (`total`, seconds) in parts that add up to it, in order."""

    latency: str  # "ttft_s" or "e2el_s"
    total: float
    parts: tuple[tuple[str, float], ...]

    def part(self, label: str) -> float | None:
        return dict(self.parts).get(label)

    def line(self) -> str:
        """"ttft 262.0 ms = queue 6.3 + prefill 225.1 + hand-off 19.4 + frontend and wire 11.2"."""
        parts = " + ".join(f"{label} {_ms(seconds)}" for label, seconds in self.parts)
        return f"{self.latency.removesuffix('_s')} {_ms(self.total)} ms = {parts}"


def split(values: Mapping[str, float], latency: str = "ttft_s") -> Split | None:
    """`latency`'s mean split (module docstring) from metrics by name ("ttft_s.mean",
    "server:queue_s.mean", ...); None where the client's mean or the server's is missing."""
    client = _finite(values, f"{latency}.mean")
    server = _finite(values, f"{SERVER}{latency}.mean")
    if client is None or server is None:
        return None
    parts = [(name.removesuffix("_s"), value) for name in _INSIDE[latency]
             if (value := _finite(values, f"{SERVER}{name}.mean")) is not None]
    rest = server - sum(value for _, value in parts)
    parts.append(("hand-off" if parts else "server", rest))
    parts.append((FRONTEND_PART, client - server))
    return Split(latency, client, tuple(parts))


def frontend(values: Mapping[str, float]) -> float | None:
    """`frontend_s.mean`: the client's TTFT mean less the server's; None without the server's."""
    found = split(values, "ttft_s")
    return found.part(FRONTEND_PART) if found else None


def medians(runs: Iterable[Mapping[str, float]], names: Iterable[str] = SPLIT_NAMES
            ) -> dict[str, float]:
    """Each of `names` as the median of its finite values over `runs` (repeats, A/B pairs, a
    history segment): what a split of several runs is made from."""
    runs = list(runs)
    out = {}
    for name in names:
        found = [value for run in runs if (value := _finite(run, name)) is not None]
        if found:
            out[name] = statistics.median(found)
    return out


def growth(name: str, now: Mapping[str, float], reference: Mapping[str, float]) -> str | None:
    """For a regressed latency (`ttft_s.*`, `e2el_s.*`): which part of its mean grew most, each
    part's change, and a line when frontend and wire jumped. None for another metric or where
    either side lacks the split (a reference without the server's timings)."""
    latency = name.partition(".")[0]
    if latency not in _INSIDE:
        return None
    before, after = split(reference, latency), split(now, latency)
    if before is None or after is None:
        return None
    if [label for label, _ in before.parts] != [label for label, _ in after.parts]:
        return None  # two kinds of server: their parts do not pair up
    changes = [(label, value - old) for (label, old), (_, value) in zip(before.parts, after.parts)]
    most = max(changes, key=lambda change: change[1])[0]
    shown = ", ".join(f"{label} {_ms(change, '+')} ms" for label, change in changes)
    text = f"{most} grew most (means: {shown})"
    jump = frontend_jump(before, after) if most == FRONTEND_PART else None
    return f"{text}; {jump}" if jump else text


def frontend_jump(before: Split, after: Split) -> str | None:
    """The line saying that frontend and wire, not the engine, moved: it grew by more than
    FRONTEND_JUMP_FLOOR_S and FRONTEND_JUMP_FACTOR x its reference value (`growth` asks only
    where it grew most)."""
    old, new = before.part(FRONTEND_PART), after.part(FRONTEND_PART)
    if old is None or new is None:
        return None
    if new - old <= max(FRONTEND_JUMP_FLOOR_S, FRONTEND_JUMP_FACTOR * abs(old)):
        return None
    return f"frontend and wire went from {_ms(old)} to {_ms(new)} ms: {SUSPECT}"


def itl_check(values: Mapping[str, float]) -> str | None:
    """One line when the client's ITL mean and the engine's disagree by more than the bound
    (ITL_FLOOR_S or ITL_SHARE): tokens then reach the client at another pace than the engine
    makes them. None when they agree, or cannot be compared: no server ITL, or speculative
    decoding, whose engine times a step of several tokens as one gap."""
    client, server = _finite(values, "itl_s.mean"), _finite(values, f"{SERVER}itl_s.mean")
    if client is None or server is None or f"{SERVER}spec_decode_drafts" in values:
        return None
    bound = max(ITL_FLOOR_S, ITL_SHARE * server)
    if abs(client - server) <= bound:
        return None
    return (f"client ITL mean {_ms(client)} ms vs the engine's {_ms(server)} ms "
            f"({(client - server) / server:+.1%}, bound {_ms(bound)} ms): {SUSPECT}")


def count_note(server_finished: float | None, completed: int, failed: int) -> str | None:
    """One line when the engine finished another number of requests in the measured window than
    the client completed: its timings then cover other requests too (another client of the same
    server, or requests the client gave up on). None when they agree or the server has none."""
    if server_finished is None or not math.isfinite(server_finished):
        return None
    if round(server_finished) == completed:
        return None
    lost = f" ({failed} failed)" if failed else ""
    return (f"the engine finished {server_finished:.0f} requests in the measured window, the "
            f"client completed {completed}{lost}: the server's timings (server:*_s) cover "
            "other requests too; another client of the same server?")
