"""Engine pool and GPU leases with a fake server (no vLLM): who starts, who stops, who holds GPUs,
and what happens when an engine dies."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines import pool as pool_module
from pytest_llmperf.engines.errors import EngineDied, EngineError, EngineStalled
from pytest_llmperf.engines.leases import GpuLeases, LeaseTimeout, visible_gpus
from pytest_llmperf.engines.pool import MAX_DEATHS, EnginePool
from pytest_llmperf.engines.server import EngineStartError
from tests.unit.fake_server import BROKEN, FakeServer

DATA = Path(__file__).resolve().parents[1] / "data"
A = Engine(model="/m/a", tensor_parallel_size=2)
B = Engine(model="/m/b", tensor_parallel_size=2)


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


# ------------------------------------------------------------------ deaths

def test_a_live_engine_is_no_death(log, tmp_path):
    p = pool(log, tmp_path)
    p.get(A)
    assert p.check(A) is None
    assert p.check(B) is None  # not running: nothing to tell
    p.stop_all()


def test_a_dead_engine_is_one_line_and_the_next_test_gets_a_fresh_one(log, tmp_path):
    p = pool(log, tmp_path)
    heard = []
    p.on_death = lambda engine, line, restarted: heard.append((engine, line, restarted))
    first = p.get(A)
    first.story = "the server was killed by SIGKILL"
    died = p.check(A)
    assert isinstance(died, EngineDied) and isinstance(died, EngineError)
    assert str(died) == ("engine a died during the test (the server was killed by SIGKILL); "
                         "last log lines: (no error in the log); log: (no log)")
    assert log[-1] == ("stop", "/m/a", "0,1"), "stopped, its GPUs handed back"
    assert heard == [(A, str(died), True)]
    second = p.get(A)
    assert second is not first and log[-1] == ("start", "/m/a", "0,1")
    p.stop_all()


def test_get_never_hands_out_a_dead_cached_engine(log, tmp_path):
    p = pool(log, tmp_path)
    heard = []
    p.on_death = lambda engine, line, restarted: heard.append(line)
    first = p.get(A)
    first.story = "VLLM::EngineCore, pid 7, ended first; then the server exited with code 0"
    second = p.get(A)
    assert second is not first
    assert heard == ["engine a died between tests (VLLM::EngineCore, pid 7, ended first; then "
                     "the server exited with code 0); last log lines: (no error in the log); "
                     "log: (no log)"]
    assert p.deaths[A] == 1
    p.stop_all()


def test_a_spec_that_died_three_times_is_not_started_again(log, tmp_path):
    p = pool(log, tmp_path)
    restarts = []
    p.on_death = lambda engine, line, restarted: restarts.append(restarted)
    for _ in range(MAX_DEATHS):
        p.get(A).story = "the server was killed by SIGKILL"
        p.check(A)
    assert restarts == [True, True, False]
    starts = sum(1 for entry in log if entry[0] == "start")
    for _ in range(2):  # every later test fails at once, with the same line
        with pytest.raises(EngineDied) as info:
            p.get(A)
        assert str(info.value) == (
            "engine a died 3 times in this session and is not started again; the last time "
            "during the test (the server was killed by SIGKILL); last log lines: (no error in "
            "the log); log: (no log)")
    assert sum(1 for entry in log if entry[0] == "start") == starts == MAX_DEATHS
    p.get(B)  # another spec is not affected
    p.stop_all()


STALL = ("no chunk for 3.2 s on any of the 4 requests in flight (stall timeout 3 s, "
         "--llmperf-stall-timeout)")


def test_a_stalled_engine_is_killed_at_once_and_told_in_one_line(log, tmp_path):
    p = pool(log, tmp_path)
    heard = []
    p.on_death = lambda engine, line, restarted: heard.append((line, restarted))
    first = p.get(A)
    stalled = p.check(A, stall=STALL)
    assert isinstance(stalled, EngineStalled) and isinstance(stalled, EngineDied)
    assert str(stalled) == (
        f"engine a stalled during the test ({STALL}; server sleeping, VLLM::EngineCore pid 7 "
        "stopped (T); /health answered 200); last log lines: (no error in the log); "
        "log: (no log)")
    assert log[-1] == ("kill", "/m/a", "0,1"), "no grace period for a hung engine"
    assert heard == [(str(stalled), True)] and p.deaths[A] == 1
    assert p.get(A) is not first
    p.stop_all()


def test_a_spec_that_stalls_three_times_is_not_started_again(log, tmp_path):
    p = pool(log, tmp_path)
    for _ in range(MAX_DEATHS):
        p.get(A)
        p.check(A, stall=STALL)
    with pytest.raises(EngineDied) as info:
        p.get(A)
    assert str(info.value).startswith(
        "engine a died or stalled 3 times in this session and is not started again; the last "
        f"time it stalled during the test ({STALL}; server sleeping")


def test_the_death_line_quotes_the_logs_error_lines(log, tmp_path):
    vllm_log = tmp_path / "vllm-8000.log"
    vllm_log.write_text((DATA / "engine-core-killed.log").read_text())
    p = pool(log, tmp_path)
    server = p.get(A)
    server.log_path, server.story = vllm_log, "the server exited with code 0"
    assert str(p.check(A)) == (
        "engine a died during the test (the server exited with code 0); last log lines: "
        "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup | AsyncLLM "
        "output_handler failed. | vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
        "encountered an issue. See stack trace (above) for the root cause.; "
        f"log: {vllm_log}")


def test_a_lease_timeout_is_an_engine_error(tmp_path):
    """The fixture turns EngineErrors into one-line failures; a LeaseTimeout must be one."""
    with pytest.raises(EngineError):
        GpuLeases(["0"], lease_dir=tmp_path).acquire(2)


class SlowServer(FakeServer):
    """Serves `START_S` after its launch, and says how many starts were under way at once."""

    START_S = 0.3
    under_way = 0
    most_at_once = 0

    def launch(self):
        if self.engine is BROKEN:
            raise EngineStartError("vLLM engine 'broken' exited with code 1: boom")
        self.launched = time.monotonic()
        SlowServer.under_way += 1
        SlowServer.most_at_once = max(SlowServer.most_at_once, SlowServer.under_way)

    def ready(self):
        if time.monotonic() - self.launched < self.START_S:
            return False
        SlowServer.under_way -= 1
        self.log.append(("start", self.engine.model, self.env.get("CUDA_VISIBLE_DEVICES")))
        return True

    def start(self):
        self.launch()
        while not self.ready():
            time.sleep(0.01)
        return self


@pytest.fixture
def slow_pool(log, tmp_path, monkeypatch):
    monkeypatch.setattr(SlowServer, "most_at_once", 0)
    leases = GpuLeases(["0", "1", "2", "3"], lease_dir=tmp_path, timeout_s=1.0)
    return EnginePool(lambda e, env: SlowServer(e, env, log), capacity=1, leases=leases)


def test_start_together_starts_both_at_once_on_their_own_gpus(log, slow_pool):
    with slow_pool.room_for(2):
        slow_pool.start_together([A, B])
        assert SlowServer.most_at_once == 2
        assert slow_pool.get(A).env["CUDA_VISIBLE_DEVICES"] == "0,1"  # leases in the order given
        assert slow_pool.get(B).env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert sorted(log) == [("start", "/m/a", "0,1"), ("start", "/m/b", "2,3")]
    assert [engine for engine, _ in slow_pool.starts] == [A, B]


def test_start_together_leaves_a_running_engine_alone_and_the_other_starts_at_its_get(
        log, slow_pool):
    with slow_pool.room_for(2):
        slow_pool.get(A)
        slow_pool.start_together([A, B])
        assert log == [("start", "/m/a", "0,1")]
        slow_pool.get(B)
        assert SlowServer.most_at_once == 1
    assert log == [("start", "/m/a", "0,1"), ("start", "/m/b", "2,3")]


def test_start_together_makes_room_by_stopping_others_first(log, slow_pool):
    c = Engine(model="/m/c")
    slow_pool.get(c)
    with slow_pool.room_for(2):
        slow_pool.start_together([A, B])
    assert log[:2] == [("start", "/m/c", "0"), ("stop", "/m/c", "0")]


def test_trim_stops_what_an_ab_block_kept_beyond_the_limit_but_the_next_tests_engine(
        log, tmp_path):
    p = pool(log, tmp_path)
    with p.room_for(2):
        p.get(A), p.get(B)
        p.get(A)  # A last used; B is the one the next test needs
    p.trim(keep=B)
    assert log[-1] == ("stop", "/m/a", "0,1")
    p.trim(keep=None)  # within the limit: nothing more stops
    assert log[-1] == ("stop", "/m/a", "0,1") and p.get(B).engine is B


def test_a_side_that_fails_to_start_together_fails_its_get_with_its_own_line(log, slow_pool):
    with slow_pool.room_for(2):
        slow_pool.start_together([BROKEN, A])
        assert slow_pool.get(A).engine is A
        with pytest.raises(EngineStartError, match="^vLLM engine 'broken' exited with code 1"):
            slow_pool.get(BROKEN)
    assert log == [("start", "/m/a", "1,2")]  # broken gave its GPU 0 back


def test_an_interrupt_while_starting_together_stops_both(log, slow_pool, monkeypatch):
    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(pool_module.time, "sleep", interrupted)
    with slow_pool.room_for(2), pytest.raises(KeyboardInterrupt):
        slow_pool.start_together([A, B])
    assert sorted(log) == [("kill", "/m/a", "0,1"), ("kill", "/m/b", "2,3")]


def test_stop_all_stops_every_engine_at_once(log, slow_pool, monkeypatch):
    stopping, most = [], []

    def slow_stop(self, kill=False):
        stopping.append(self)
        time.sleep(0.2)
        most.append(len(stopping))
        self.log.append(("stop", self.engine.model, self.env.get("CUDA_VISIBLE_DEVICES")))

    with slow_pool.room_for(2):
        slow_pool.start_together([A, B])
    monkeypatch.setattr(SlowServer, "stop", slow_stop)
    slow_pool.stop_all()
    assert max(most) == 2
    assert sorted(entry for entry in log if entry[0] == "stop") == [
        ("stop", "/m/a", "0,1"), ("stop", "/m/b", "2,3")]
    assert slow_pool.gpus_of(A) == slow_pool.gpus_of(B) == []
