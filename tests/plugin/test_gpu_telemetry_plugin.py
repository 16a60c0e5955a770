"""A GPU measurement as a user meets it, through the real session path on this CPU machine: the
engine's card is the NVML stand-in of tests/nvml_stand_in.py (injected where the GPU
watch loads pynvml), set to the H200's recorded readings, and the client's `measure` returns
hand-made records spread over 0.25 s of real time. The H200 under SW power cap passes and its run
file holds the card's telemetry and the energy per token; HW slowdown fails the test as DISTURBED
with one line. The stand-in's card draws a constant 600 W, so the energy per output token must be
600 W x the measured window / the output tokens."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TINY_LLAMA

CONFTEST = '''
import os
import time
from types import SimpleNamespace

import pytest

from pytest_llmperf.client.measurement import Measurement
from pytest_llmperf.machine import gpu_state, neighbours, watch
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.session import runner as runner_mod
from tests.nvml_stand_in import H200, NvmlStandIn, h200_card

CARD = h200_card(H200["measurements"][0])  # test_profiles[chat]: 90%% of the SM clock, 53 C
CARD.power_w = 600.0
CARD.reasons = %(reasons)d
CARD.pids = (os.getpid(),)  # the session's own process: the engine's, as far as the card knows


def measure(*args, **kwargs):
    """8 requests of 10 tokens over 0.25 s of the perf_counter clock the watch samples on."""
    start = time.perf_counter()
    out = []
    for i in range(8):
        sent = start + i * 0.02
        chunks = [sent + 0.01 * (k + 1) for k in range(10)]
        out.append(RequestRecord(index=i, expected_prompt_tokens=8, expected_output_tokens=10,
                                 scheduled_s=sent, sent_s=sent, chunk_times_s=chunks,
                                 chunk_tokens=[1] * 10, done_s=chunks[-1],
                                 usage_prompt_tokens=8, usage_output_tokens=10))
    time.sleep(max(0.0, start + 0.3 - time.perf_counter()))
    return Measurement(out)


def quiet(wall_s):
    """/proc of an idle 2-core machine: no neighbour."""
    total = int((wall_s - 10.0) * 2 * neighbours._CLOCK_TICKS)
    return neighbours.Snapshot(wall_s, {}, int(total * 0.1), total, 0, 2)


class Pool:
    """No engine is started: only its URL is read, and it holds GPU 0."""
    on_death = None
    starts = []
    deaths = {}
    def get(self, engine):
        return SimpleNamespace(base_url="http://127.0.0.1:9", start_time_s=1.0)
    def gpus_of(self, engine):
        return ["0"]
    def check(self, *args, **kwargs):
        return None
    def stop(self, engine):
        pass
    def stop_all(self):
        pass
    def server_pid(self, engine):  # no engine process: none watched
        return None
    def trim(self, keep=None):
        pass


@pytest.hookimpl(trylast=True)  # after the plugin made its session
def pytest_configure(config):
    from pytest_llmperf.plugin import hooks
    runner = config.stash[hooks.SESSION_KEY].runner
    runner.target.pool, runner.target.gpu_count = Pool(), 1


@pytest.fixture(autouse=True)
def _planted(monkeypatch):
    monkeypatch.setattr(runner_mod, "measure", measure)
    shots = iter([quiet(10.0), quiet(20.0)] * 10)
    monkeypatch.setattr(watch, "take_snapshot", lambda: next(shots))
    monkeypatch.setattr(gpu_state, "_load_nvml", lambda: NvmlStandIn({0: CARD}))
'''

SUITE = '''
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model=%r, load_format="dummy"))
def test_x(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=10, num_requests=8, concurrency=1))
''' % str(TINY_LLAMA)

SW_POWER_CAP, HW_SLOWDOWN = 0x4, 0x8


def run(pytester: pytest.Pytester, reasons: int, *args: str):
    pytester.makeconftest(CONFTEST % {"reasons": reasons})
    pytester.makepyfile(test_x=SUITE)
    return pytester.runpytest("-p", "no:cacheprovider", "--llmperf-hardware", "cpu",
                              "--llmperf-json", "r.json", *args)


def entry(pytester: pytest.Pytester) -> dict:
    [found] = json.loads((pytester.path / "r.json").read_text())["llmperf"]["results"]
    return found


def test_the_h200_under_sw_power_cap_passes_with_its_telemetry_and_joules_per_token(pytester):
    result = run(pytester, SW_POWER_CAP)
    result.assert_outcomes(passed=1)
    found = entry(pytester)
    assert found["disturbance"]["disturbed"] is False
    assert found["disturbance"]["gpus"][0]["power_limit_w"] == 700.0
    [card] = found["gpu_telemetry"]
    assert card["reason_shares"] == {"sw power cap": 1.0}
    assert card["sm_clock_mhz_mean"] == 1781.0  # 90% of the 1980 MHz the stand-in's H200 has
    metrics = {name: value["value"] for name, value in found["metrics"].items()}
    # 600 W over the measured window; the counter is read microseconds after its sample's time,
    # so the two agree to well within 0.1% (a warm-up or a whole-watch window would be far off).
    joules = 600.0 * metrics["duration_s"]
    assert card["energy_j"] == pytest.approx(joules, rel=1e-3)
    assert metrics["energy_per_output_token_j"] == pytest.approx(joules / 80, rel=1e-3)
    assert metrics["energy_per_token_j"] == pytest.approx(joules / 144, rel=1e-3)
    assert metrics["output_tokens_per_joule"] == pytest.approx(80 / joules, rel=1e-3)
    assert found["metrics"]["energy_per_output_token_j"]["direction"] == "lower"
    assert "J/tok" in result.stdout.str()


def test_the_h200_with_hw_slowdown_fails_as_disturbed_in_one_line(pytester):
    result = run(pytester, SW_POWER_CAP | HW_SLOWDOWN)
    result.assert_outcomes(failed=1)
    line = ("disturbed measurement: not the engine's numbers (GPU 0 throttled: hw slowdown in "
            "100% of samples (up to 53 C)); rerun on a quiet machine (stop the other load, or "
            "give the suite a machine of its own); nothing from this run was written as a "
            "baseline")
    output = result.stdout.str()
    assert line in output.splitlines()  # one line, as pytest prints the failure
    assert "DISTURBED" in output and "REGRESSION" not in output
    assert entry(pytester)["disturbance"]["reasons"] == [
        "GPU 0 throttled: hw slowdown in 100% of samples (up to 53 C)"]


def test_with_the_watch_off_the_card_is_still_read_for_its_energy(pytester):
    result = run(pytester, SW_POWER_CAP | HW_SLOWDOWN, "--llmperf-disturbance", "off")
    result.assert_outcomes(passed=1)
    found = entry(pytester)
    assert found["disturbance"] is None
    assert found["gpu_telemetry"][0]["reason_shares"] == {"hw slowdown": 1.0,
                                                         "sw power cap": 1.0}
    assert found["metrics"]["energy_per_output_token_j"]["value"] > 0
