"""Where the time went, on the real CPU engine: each induced cause shows in its own phase, and
the gate's or the A/B's failure line names it (metrics/phases.py, docs/phases.md).

- An induced queue: one sequence at a time (max_num_seqs=1) under 8 concurrent requests, against
  the same engine with room for all of them, each measured three times in turn and gated on
  their medians (one run of a busy shared machine can take 100x its usual TTFT: docs/phases.md).
  The gate's line and the A/B's name the queue.
- A slower frontend: side B's API server waits 100 ms on every request before handing it to the
  engine (tests/integration/frontend_delay). The A/B line and the gate's name frontend and wire
  and call the client or the transport suspect; queue and prefill stay where they were.
- Longer prompts: 1,536 tokens instead of 32 on the same engine, three runs each in turn, gated
  against the short runs' medians as a baseline, and paired run by run. The gate's line and the
  A/B's name prefill.

A baseline table gates the phases' means beside the latency, as a test that names them in its
gate= has them: that is where the gate finds the reference's split.

- A slower transport: a proxy that passes the engine's token events on one every 30 ms. The
  client's ITL no longer agrees with the engine's, and the agreement check says the client or
  the transport is suspect; straight to the engine it agrees.

Every measurement also checks that the engine counted the same requests in the window as the
client completed (no warning). Each side's split is printed (-s) for docs/phases.md.
"""

from __future__ import annotations

import asyncio
import re
import threading
import types
from dataclasses import replace

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.client.measure import Endpoint, measure
from pytest_llmperf.engines.server import CPU_ENGINE_NICE, VllmServer
from pytest_llmperf.engines.spec import thaw_pairs
from pytest_llmperf.metrics import phases
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.verdict import gate
from pytest_llmperf.verdict.baselines import Baseline
from pytest_llmperf.verdict.paired_ratios import abba_order, judge_pairs, paired_ratios
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.workloads.prompts import load_tokenizer
from suites.tiny import TINY_CPU
from tests.conftest import REPO, requires_vllm

# Nightly: its lines are all covered by the tests CI runs (docs/testing.md).
pytestmark = [requires_vllm, pytest.mark.nightly]

FRONTEND_DELAY = REPO / "tests" / "integration" / "frontend_delay"
DELAY_S = 0.100
PAIRS = 2  # A B B A: enough for an A/B verdict on a several-fold change
GATED = ("ttft_s.p50", *phases.SPLIT_NAMES)


def _serve(engine, log_dir):
    server = VllmServer(engine, log_dir, nice=CPU_ENGINE_NICE, separate_control=True).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def one_seq_server(tmp_path):
    yield from _serve(TINY_CPU.replace(max_num_seqs=1), tmp_path)


@pytest.fixture
def slow_frontend_server(tmp_path):
    env = {**thaw_pairs(TINY_CPU.env), "PYTHONPATH": str(FRONTEND_DELAY),
           "LLMPERF_INDUCED_FRONTEND_DELAY_S": str(DELAY_S)}
    yield from _serve(TINY_CPU.replace(env=env), tmp_path)


def measured(server, workload: Workload) -> dict[str, float]:
    """One measurement of `workload` (after its warm-up) as every metric by name."""
    requests, warmup = workload.build(load_tokenizer(TINY_CPU.model))
    found = measure(Endpoint(server.base_url, TINY_CPU.model_name), requests, workload.pattern,
                    seed=workload.seed, warmup=warmup)
    assert found.warning is None  # the engine timed exactly the requests the client completed
    metrics = compute_metrics(found.records, server_metrics=found.server_metrics)
    assert metrics.failed == 0
    return metrics.flat()


def abba(a, b, workload: Workload, pairs: int = PAIRS
         ) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """Both sides in ABBA order, each run with its own prompts (seed): a prompt repeated on the
    same engine would hit its prefix cache and shorten that side's prefill."""
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for seed, side in enumerate(abba_order(pairs)):
        runs[side].append(measured(a if side == "A" else b, replace(workload, seed=seed)))
    for side, found in runs.items():
        print(f"side {side}: {phases.split(phases.medians(found)).line()}")
    return runs["A"], runs["B"]


def ab_verdict(a_runs, b_runs, name: str = "ttft_s.p50") -> gate.Verdict:
    [verdict] = judge_pairs(paired_ratios(a_runs, b_runs, [name]), 0.1).verdicts
    print(verdict.message)
    return verdict


def gate_verdict(reference_runs, runs, name: str = "ttft_s.p50") -> gate.Verdict:
    """`name` of the median of `runs` against the median of `reference_runs` as its baseline
    (tolerance 10%), the phases' means in the table too, as a test gating them has them."""
    before, now = phases.medians(reference_runs, GATED), phases.medians(runs, GATED)
    entries = gate.make_entries({key: Estimate(value, 0.0, 1) for key, value in before.items()},
                                names=GATED, tolerance=0.1)
    baseline = Baseline(entries, path="baselines/cpu/test_phases.toml", test_id="test_x")
    report = gate.check_baseline({key: Estimate(value, 0.0, 1) for key, value in now.items()},
                                 baseline, "suites/test_phases.py::test_x")
    [verdict] = [found for found in report.verdicts if found.name == name]
    print(verdict.message)
    return verdict


def change(a_runs, b_runs, name: str) -> float:
    return phases.medians(b_runs, [name])[name] - phases.medians(a_runs, [name])[name]


def test_an_induced_queue_shows_as_queue(tiny_server, one_seq_server):
    # 32 output tokens: each request holds the one sequence long enough that the queue stands
    # far above a noisy run of side A (one reached a 163 ms TTFT on a busy machine).
    workload = Workload.fixed(input_tokens=32, output_tokens=32, num_requests=16,
                              concurrency=8, warmup_requests=2)
    a_runs, b_runs = abba(tiny_server, one_seq_server, workload, pairs=3)
    # The same runs judged both ways: side B's medians against side A's as a baseline, and
    # side B's pairs against side A's. Each line names the queue.
    for verdict in (gate_verdict(a_runs, b_runs), ab_verdict(a_runs, b_runs)):
        assert verdict.status == Status.REGRESSION
        assert "; queue grew most (means: queue +" in verdict.message
        assert "suspect" not in verdict.message


def test_a_frontend_delay_shows_as_frontend_and_wire(tiny_server, slow_frontend_server):
    workload = Workload.fixed(input_tokens=32, output_tokens=16, num_requests=8,
                              concurrency=2, warmup_requests=2)
    a_runs, b_runs = abba(tiny_server, slow_frontend_server, workload)
    for verdict in (ab_verdict(a_runs, b_runs), gate_verdict(a_runs, b_runs)):
        assert verdict.status == Status.REGRESSION
        assert "; frontend and wire grew most (means: " in verdict.message
        # (the gate's line goes on with its baseline file and the update command)
        assert ": the client or the transport is suspect, not the engine" in verdict.message
    assert change(a_runs, b_runs, phases.FRONTEND) == pytest.approx(DELAY_S, abs=0.03)
    # The engine's own phases did not move by a fraction of the delay.
    for name in ("server:queue_s.mean", "server:prefill_s.mean"):
        assert abs(change(a_runs, b_runs, name)) < 0.2 * DELAY_S, name


def test_longer_prompts_show_as_prefill(tiny_server):
    def prompts(tokens: int, seed: int) -> Workload:
        return Workload.fixed(input_tokens=tokens, output_tokens=4, num_requests=8,
                              concurrency=1, warmup_requests=2, seed=seed)

    short, long = [], []
    for seed in range(3):  # in turn, each run with its own prompts
        short.append(measured(tiny_server, prompts(32, 2 * seed)))
        long.append(measured(tiny_server, prompts(1536, 2 * seed + 1)))
    for runs in (short, long):
        print(phases.split(phases.medians(runs)).line())
    # Measured in turn (short, long, short, ...): pairs for the A/B as well as medians for the
    # gate.
    for verdict in (gate_verdict(short, long), ab_verdict(short, long)):
        assert verdict.status == Status.REGRESSION
        assert "; prefill grew most (means: queue " in verdict.message


class ThrottlingProxy:
    """A TCP proxy that hands the server's bytes on one SSE event at a time, THROTTLE_S apart: a
    transport slower than the engine (an overloaded gateway, a congested link). Requests pass
    through at once."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").rstrip("/").split(":")
        self.upstream = (host, int(port))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _pipe(self, reader, writer, delay: float) -> None:
        try:
            while data := await reader.read(65536):
                # Each token event alone, `delay` after the one before: the proxy, not the
                # engine, sets the pace. Anything else (headers, /metrics) passes at once.
                for piece in re.split(rb"(?<=\n\n)", data):
                    if delay and (piece.startswith(b"data:") or b"\ndata:" in piece):
                        await asyncio.sleep(delay)
                    writer.write(piece)
                    await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _serve(self, client_reader, client_writer) -> None:
        server_reader, server_writer = await asyncio.open_connection(*self.upstream)
        await asyncio.gather(self._pipe(client_reader, server_writer, 0.0),
                             self._pipe(server_reader, client_writer, THROTTLE_S))

    def __enter__(self) -> str:
        self.thread.start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self.loop).result(10)
        self.server = server
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


THROTTLE_S = 0.030


def test_a_slow_transport_fails_the_itl_agreement_and_the_engine_is_not_blamed(tiny_server):
    """The same requests straight to the engine and through a proxy that passes one token event
    on every 30 ms: the engine's ITL is the same both times, the client's grows to the proxy's
    pace, and the agreement check (the line the summary prints) says the client or the
    transport is suspect, for the proxied run only."""
    workload = Workload.fixed(input_tokens=32, output_tokens=24, num_requests=6, concurrency=1,
                              warmup_requests=1)
    direct = measured(tiny_server, workload)
    with ThrottlingProxy(tiny_server.base_url) as url:
        proxied = measured(types.SimpleNamespace(base_url=url), replace(workload, seed=1))
    for name, values in (("direct", direct), ("proxied", proxied)):
        print(f"{name}: client ITL {values['itl_s.mean'] * 1e3:.1f} ms, engine ITL "
              f"{values['server:itl_s.mean'] * 1e3:.1f} ms")
    assert phases.itl_check(direct) is None
    line = phases.itl_check(proxied)
    assert line is not None and line.startswith("client ITL mean ")
    assert line.endswith(": the client or the transport is suspect, not the engine")
    assert proxied["itl_s.mean"] >= 0.9 * THROTTLE_S
    assert proxied["server:itl_s.mean"] < 0.5 * THROTTLE_S
