"""The CPU suite, capacity: rate and concurrency sweeps, the SLO capacity search, and an
MLPerf-style Server run.

The SLOs are scaled to the tiny model on two CPU cores; the search's result is gated like any
other metric (slo_capacity_req_s, higher is better).
"""

from pathlib import Path

import pytest

from pytest_llmperf import (
    SLO,
    ServerScenario,
    Workload,
    find_peak_qps,
    judge_server,
    server_workload,
)
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_CPU),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED)]

BASE = Workload.fixed(input_tokens=128, output_tokens=32, num_requests=40, rate=1.0, seed=5)
# Each capacity probe runs ~5 s whatever its rate, so a high rate is judged in steady state rather
# than on a sub-second burst. Four warm-up requests go first in every probe: without them the
# search's first probe met a cold engine (on an AVX2 VM, TTFT p90 117 ms at 1 req/s first, 60 ms
# at the same rate once warm), and a first probe that fails ends the search at zero.
PROBE = Workload.fixed(input_tokens=128, output_tokens=32, num_requests=2000, rate=1.0,
                       duration_s=5.0, seed=5, warmup_requests=4, name="capacity-probe")
# The SLOs are this machine's: a multiple of what its engine does idle (one request at a time),
# measured first, so that the search finds the knee of the engine's curve on any CPU rather than
# limits chosen on one (a fixed TPOT p90 of 20 ms found no capacity at 4 req/s on an AMD family
# 23, whose idle TPOT p50 is 6.7 ms, while an AMD family 25 idles at 2.5 ms). KNEE: TPOT p90 went
# 19 ms at 8 req/s -> 126 ms at 16 on the family 25, so any multiple from 3 to 8 finds the same
# knee; 4 keeps an idle engine's p90 (up to twice its p50 on two shared cores) well inside.
# p90, not p99: a 5 s probe at 4 req/s holds ~20 requests, whose p99 is their slowest one.
KNEE = 4.0
IDLE = Workload.fixed(input_tokens=128, output_tokens=32, num_requests=8, concurrency=1, seed=5,
                      warmup_requests=2, name="idle")
# The trace's prompts run up to ~1,000 tokens: their prefill alone is ~0.6 s on an AMD family 23
# (a 128-token one takes 84 ms there, idle), and a tenth of the decodes share their steps with a
# long prefill (TPOT p90 134 ms at the recorded pace there, p50 13.7 ms): its SLO holds TTFT p90
# to KNEE times an idle 1,024-token prompt's TTFT, and the median TPOT, which the replay's speed
# moves, to KNEE times the idle TPOT.
IDLE_LONG = Workload.fixed(input_tokens=1024, output_tokens=8, num_requests=3, concurrency=1,
                           seed=5, warmup_requests=1, name="idle-long")


def idle_slo(llmperf, ttft_of: Workload, tpot: str = "tpot_s.p90") -> SLO:
    """KNEE times the idle engine's TTFT p50 (for `ttft_of`'s prompts) and TPOT p50."""
    idle = llmperf.run(IDLE)
    ttft = idle if ttft_of is IDLE else llmperf.run(ttft_of)
    slo = SLO(max={"ttft_s.p90": KNEE * ttft.ttft_s.p50, tpot: KNEE * idle.tpot_s.p50})
    print(f"\nidle on {idle.machine}: TTFT p50 {ttft.ttft_s.p50 * 1e3:.1f} ms, TPOT p50 "
          f"{idle.tpot_s.p50 * 1e3:.2f} ms; SLO {dict(slo.max)}")
    return slo


TRACE = Path(__file__).resolve().parent / "data" / "mooncake-tiny.jsonl"
# The most the Server test offers: 11.5 s of MLPerf's 459 queries, where faster machines stop.
MLPERF_MOST_QPS = 40


def test_rate_sweep(llmperf):
    """Throughput against latency at 8, 16, 32 and 64 requests/s (the Lambda-style curve)."""
    sweep = llmperf.sweep(BASE, rates=[8.0, 16.0, 32.0, 64.0])
    throughputs = [point.metrics.output_throughput_tok_s for point in sweep.points]
    assert throughputs[-1] > throughputs[0], "more offered load, more output"
    print("\n".join(sweep.table()))


def test_concurrency_sweep(llmperf):
    """Closed loop at 1, 4 and 16 requests in flight (the source studies' batch-size curves):
    more sequences per decode step, more output per second, each step a little slower."""
    base = Workload.fixed(input_tokens=128, output_tokens=32, num_requests=32, concurrency=1,
                          warmup_requests=2)
    sweep = llmperf.sweep(base, concurrencies=[1, 4, 16])
    first, *_, last = sweep.points
    assert last.metrics.output_throughput_tok_s > 2 * first.metrics.output_throughput_tok_s
    assert last.metrics.tpot_s.p50 > first.metrics.tpot_s.p50
    print("\n".join(sweep.table()))


def test_slo_capacity(llmperf):
    # From 1 and 4 req/s, doubling and then bisecting to 15%: the first probe that fails is at
    # most twice the capacity, so its queue drains in seconds (a first probe at 64 req/s on an AMD
    # family 23, whose knee is near 4 req/s, kept the test at 74 s). With the old fixed SLO,
    # AVX-512 machines (AMD family 26) found 32 to 215 req/s, an AVX2 one (family 25) between 8
    # and 16, a family 23 under 4: at most 8 probes reach 128 req/s, past which the search says
    # it stopped climbing and the test still passes.
    slo = idle_slo(llmperf, IDLE)
    capacity = llmperf.capacity(PROBE, slo, low=1.0, high=4.0, rel_tol=0.15, max_runs=8)
    assert capacity.rate_req_s > 0, capacity.note


def test_trace_capacity_by_speedup(llmperf):
    """How much faster than recorded can the engine replay suites/data/mooncake-tiny.jsonl (48
    requests over 12 s, prompts up to ~1,000 tokens) and still meet its SLO? The search's
    knob is the trace's speedup; gated as slo_capacity_speedup. The SLO is idle_slo's."""
    trace = Workload.trace(TRACE, format="mooncake", warmup_requests=2)
    # From 1x, the recorded pace, and 2x, doubling: on an AMD family 23 (2026-11-28) 4x saturated
    # the engine (13.2 of 15.6 req/s offered completed). On an engine twice as slow as an AMD
    # family 25's (scripts/rehearse --slower 2, 2026-11-29) the recorded pace itself did (TPOT
    # p50 73 ms against 4 x 14 ms idle): a slower machine replays the trace slower than
    # recorded, which is its answer, not a failure; only then does a second search look below
    # 1x (from a quarter of the pace, whose replay takes 48 s: not on every machine).
    slo = idle_slo(llmperf, IDLE_LONG, tpot="tpot_s.p50")
    capacity = llmperf.capacity(trace, slo, low=1.0, high=2.0, rel_tol=0.25, max_runs=6)
    if capacity.speedup == 0:
        capacity = llmperf.capacity(trace, slo, low=0.25, high=1.0, rel_tol=0.25, max_runs=4)
    assert capacity.speedup > 0, capacity.note


def test_mlperf_server_scenario(llmperf):
    """Poisson for at least 10 s and 459 queries (the fewest that can pass MLPerf's early
    stopping at p99), judged against MLPerf's llama2-70b Server limits (p99 TTFT 2 s, TPOT
    200 ms). The interactive limits (450 ms / 40 ms) fail now and then on two shared cores: a
    neighbour's burst stalls a few of 459 requests past 500 ms.

    The rate is this machine's, found as a submitter finds it: MLPerf's Server scenario asks for
    the highest QPS that stays VALID, and what a CPU sustains varies more than twofold between
    machines (an AMD family 23 completed 24.6 req/s of 40 offered; an Intel Xeon with AMX was
    INVALID at 40, 60% of its closed-loop burst; AVX-512 AMD machines passed 40 with room). A
    closed-loop burst at 16 in flight measures what the engine completes, an upper bound for an
    open loop; the search (pytest_llmperf.find_peak_qps, LoadGen's FindPeakPerformance way)
    starts at 60% of it, at most 40 QPS, steps down while a run is INVALID and bisects up to 30%
    of the peak, at most two Server runs. It fails only when no rate from 1 QPS up is VALID;
    the rate found is printed, and each run is gated like any other measurement."""
    base = Workload.fixed(input_tokens=64, output_tokens=16, num_requests=1, rate=1.0, seed=6,
                          warmup_requests=8)
    burst = llmperf.run(Workload.fixed(input_tokens=64, output_tokens=16, num_requests=96,
                                       concurrency=16, seed=6, name="server-burst"))
    completes = burst.metrics.request_throughput_req_s
    high = float(max(1, min(MLPERF_MOST_QPS, int(completes))))

    def run_at(qps: float):
        scenario = ServerScenario.for_model("llama2-70b", qps, min_duration_s=10.0,
                                            min_queries=459)
        result = llmperf.run(server_workload(scenario, base))
        return judge_server(scenario, result.metrics, records=result.records)

    peak = find_peak_qps(run_at, start=float(max(1, min(high, int(0.6 * completes)))),
                         high=high, rel_tol=0.3, max_runs=2)
    print(f"\nServer peak on {burst.machine}: {peak.note}", *peak.table(), sep="\n")
    assert peak.found, (f"no VALID Server rate on {burst.machine} (a closed-loop burst "
                        f"completed {completes:.1f} req/s): {peak.note}")
