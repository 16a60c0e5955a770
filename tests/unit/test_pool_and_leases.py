"""Engine pool and GPU leases with a fake server (no vLLM): who starts, who stops, who holds GPUs."""

from __future__ import annotations

import threading
import time

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines.leases import GpuLeases, LeaseTimeout, visible_gpus
from pytest_llmperf.engines.pool import EnginePool
from pytest_llmperf.engines.server import EngineStartError

A = Engine(model="/m/a", tensor_parallel_size=2)
B = Engine(model="/m/b", tensor_parallel_size=2)
BROKEN = Engine(model="/m/broken")


class FakeServer:
    def __init__(self, engine, env, log):
        self.engine, self.env, self.log = engine, env, log
        self.base_url, self.start_time_s = f"http://fake/{engine.model}", 1.0

    def start(self):
        if self.engine is BROKEN:
            raise EngineStartError("vLLM engine 'broken' exited with code 1: boom")
        self.log.append(("start", self.engine.model, self.env.get("CUDA_VISIBLE_DEVICES")))
        return self

    def stop(self):
        self.log.append(("stop", self.engine.model, self.env.get("CUDA_VISIBLE_DEVICES")))


@pytest.fixture
def log():
    return []


def pool(log, tmp_path, capacity=1, gpus=("0", "1", "2", "3")):
    leases = GpuLeases(list(gpus), lease_dir=tmp_path, timeout_s=1.0)
    return EnginePool(lambda e, env: FakeServer(e, env, log), capacity=capacity, leases=leases)


def test_each_spec_starts_once_and_the_next_one_replaces_it(log, tmp_path):
    p = pool(log, tmp_path)
    assert p.get(A) is p.get(A)
    p.get(B)
    p.stop_all()
    assert log == [("start", "/m/a", "0,1"), ("stop", "/m/a", "0,1"),
                   ("start", "/m/b", "0,1"), ("stop", "/m/b", "0,1")]


def test_two_engines_at_once_hold_different_gpus(log, tmp_path):
    p = pool(log, tmp_path, capacity=2)
    p.get(A), p.get(B)
    assert [entry[2] for entry in log] == ["0,1", "2,3"]
    p.stop_all()


def test_a_failed_start_is_not_retried_and_gives_its_gpus_back(log, tmp_path):
    p = pool(log, tmp_path)
    with pytest.raises(EngineStartError):
        p.get(BROKEN)
    with pytest.raises(EngineStartError, match="boom"):
        p.get(BROKEN)  # the same error, at once
    p.get(A)
    assert log == [("start", "/m/a", "0,1")]
    p.stop_all()


def test_another_process_holding_gpus_makes_an_engine_wait(log, tmp_path):
    """Two pools over one lease directory behave like two pytest-xdist workers."""
    first, second = pool(log, tmp_path), pool(log, tmp_path, gpus=("0", "1"))
    first.get(Engine(model="/m/all", tensor_parallel_size=4))
    with pytest.raises(LeaseTimeout, match=r"waited 1 s for 2 free GPUs of 0,1; other engines "
                                           r"hold them .*run fewer pytest-xdist workers"):
        second.get(A)
    first.stop_all()
    second.get(A)
    second.stop_all()


def test_a_tp8_engine_waits_for_all_gpus_then_gets_them(tmp_path):
    leases = GpuLeases([str(i) for i in range(8)], lease_dir=tmp_path, timeout_s=10.0)
    held = leases.acquire(2)
    got = []
    waiter = threading.Thread(target=lambda: got.append(leases.acquire(8)))
    waiter.start()
    time.sleep(1.0)
    assert not got, "must wait while 2 of the 8 GPUs are taken"
    held.release()
    waiter.join(timeout=5)
    assert got and got[0].devices == [str(i) for i in range(8)]
    got[0].release()


def test_leases_are_all_or_nothing(tmp_path):
    leases = GpuLeases(["0", "1", "2"], lease_dir=tmp_path, timeout_s=0.0)
    one = leases.acquire(1)
    with pytest.raises(LeaseTimeout):
        leases.acquire(3)
    two = leases.acquire(2)  # the failed attempt kept nothing
    assert two.devices == ["1", "2"]
    one.release(), two.release()


def test_more_gpus_than_visible_is_one_line(tmp_path):
    with pytest.raises(LeaseTimeout) as info:
        GpuLeases(["0"], lease_dir=tmp_path).acquire(8)
    assert str(info.value) == "an engine needs 8 GPUs; this process sees 1 (0)"


def test_visible_gpus_follow_cuda_visible_devices():
    assert visible_gpus(4, {}) == ["0", "1", "2", "3"]
    assert visible_gpus(2, {"CUDA_VISIBLE_DEVICES": "4,5"}) == ["4", "5"]


def test_engine_digest_is_stable_and_distinguishes_specs():
    assert A.digest() == Engine(model="/m/a", tensor_parallel_size=2).digest()
    assert A.digest() != B.digest()
    assert len(A.digest()) == 10
