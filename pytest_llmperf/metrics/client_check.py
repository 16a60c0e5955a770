"""The client's self-check: was this a measurement of the engine, or of the load generator?
What it found (`ClientCheck`) and the limits it holds it to; client/selfcheck.py measures it.

Every timestamp the client takes waits for its event loop to get to the socket. A loop that is
late stamps late, and a late stamp inflates TTFT and the chunk gaps by exactly that much. So the
check looks at how late the loop was, sustained over the run, not at one spike:

- CPU: the busiest client process used >= 85% of a core over the measured window. With no
  headroom left, every read waits for the one before it.
- Loop lag: a probe that sleeps 5 ms woke more than max(2 ms, 10% of the measured TTFT p50) late
  at p90. 2 ms is twice the 1 ms resolution of uvloop's timers; 10% of TTFT keeps the client's
  own delay a small share of what it measures.
- Schedule lag: an open loop without a concurrency cap sent its requests more than
  max(10 ms, 10% of the measured TTFT p50) after their arrival time at p90 (the engine then saw
  less load than the workload describes). A request the engine then kept waiting for ten times
  the client's lateness met a queue that was there either way: so MLPerf's Offline scenario,
  459 requests sent at once (p90 33-42 ms late on 2 cores) to an engine that takes 554-822 ms
  to answer the median one, is not the client's limit. Closed loops and capped open loops
  wait for a slot on purpose, so their queue time is not the client's.

How the thresholds were chosen (the rows are in docs/client.md): with `llmperf bench-client`
(a mock server with known timing), runs with the client alone on its core up to 512 streams had
loop-lag p90 0.4-1.0 ms and CPU <= 0.60; with another process sharing that core, lag p90 was
2.5-27 ms and TTFT p50 8-48 ms off the truth, while CPU could not pass 0.5 (hence the lag rule);
the 19 CPU-suite tests on real vLLM stayed at lag p90 <= 1.1 ms and CPU <= 0.09. p90s and a
whole-run CPU share do not move on one stall, so a single spike in a capacity probe cannot fail
it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CPU_LIMIT", "ClientCheck"]

CPU_LIMIT = 0.85
LOOP_LAG_FLOOR_S = 0.002
LOOP_LAG_SHARE_OF_TTFT = 0.10
SCHEDULE_LAG_FLOOR_S = 0.010
SCHEDULE_LAG_SHARE_OF_TTFT = 0.10


@dataclass(frozen=True)
class ClientCheck:
    cpu_share: float
    loop_lag_p90_s: float
    loop_lag_limit_s: float
    schedule_lag_p90_s: float | None  # None where queue time is not the client's
    schedule_lag_limit_s: float
    workers: int
    coalesced_share: float
    # With several client processes, the one that came nearest the limits, with its own numbers
    # ("client worker 1 on node 10.0.0.2 (3f2a9c1e): lag p90 12.0 ms, cpu 41%"); named where the
    # run was limited. None for one process.
    busiest_worker: str | None = None
    # Where the load came from, one name per client process that reported ("client worker 0 on
    # node 10.0.0.2 (3f2a9c1e)"); () for this process alone.
    processes: tuple[str, ...] = ()

    @property
    def reasons(self) -> list[str]:
        found = []
        if self.cpu_share >= CPU_LIMIT:
            found.append(f"busiest client process at {self.cpu_share:.0%} of a core "
                         f"(limit {CPU_LIMIT:.0%})")
        if self.loop_lag_p90_s > self.loop_lag_limit_s:
            found.append(f"event-loop lag p90 {self.loop_lag_p90_s * 1e3:.1f} ms "
                         f"(limit {self.loop_lag_limit_s * 1e3:.1f} ms)")
        lag = self.schedule_lag_p90_s
        if lag is not None and lag > self.schedule_lag_limit_s:
            found.append(f"requests sent {lag * 1e3:.1f} ms behind schedule at p90 "
                         f"(limit {self.schedule_lag_limit_s * 1e3:.3g} ms)")
        if found and self.busiest_worker:
            found.append(f"most limited: {self.busiest_worker}")
        return found

    @property
    def limited(self) -> bool:
        return bool(self.reasons)

    @property
    def kept_schedule(self) -> bool:
        """Did an open loop send on its schedule, by the self-check's own rule? (True where the
        schedule is not the client's to keep: a closed or capped loop.)"""
        lag = self.schedule_lag_p90_s
        return lag is None or lag <= self.schedule_lag_limit_s

    def schedule_line(self) -> str:
        """The schedule lag against its limit, in one line."""
        lag = self.schedule_lag_p90_s
        if lag is None:
            return "no schedule of the client's own (a closed or capped loop)"
        return (f"requests sent {lag * 1e3:.1f} ms behind schedule at p90 (the self-check's "
                f"limit: {self.schedule_lag_limit_s * 1e3:.3g} ms, max(10 ms, 10% of TTFT p50))")

    def summary(self) -> str:
        """The benchmark's column: the verdict and the numbers it rests on."""
        verdict = "LIMITED" if self.limited else "ok"
        return (f"{verdict} (cpu {self.cpu_share:.0%}, lag p90 {self.loop_lag_p90_s * 1e3:.1f}"
                f"/{self.loop_lag_limit_s * 1e3:.1f} ms)")

    def failure(self, cores: int) -> str:
        """One line for a failed test: the numbers and the fix."""
        return (f"client-limited measurement: the load generator, not the engine, set these "
                f"numbers ({'; '.join(self.reasons)}; {self.workers} client process(es)); "
                f"offer less load, or give the client more processes "
                f"(--llmperf-client-workers N, up to {cores} here) or cores the engine does not "
                "use; nothing from this run was written as a baseline")
