"""How a dead engine is told: which process of its tree ended first, the server's exit status,
and the log's error lines (a real vLLM log of an EngineCore killed with SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pytest_llmperf.engines.health import (
    Member,
    ProcessWatch,
    exit_status,
    group_members,
    how_it_died,
    shown_path,
    telling_log_lines,
    tree_states,
)

DATA = Path(__file__).resolve().parents[1] / "data"
CORE = Member(101, "VLLM::EngineCore")
SERVER = Member(100, "server")


@pytest.mark.parametrize("returncode, words", [
    (-9, "was killed by SIGKILL"), (-15, "was killed by SIGTERM"), (0, "exited with code 0"),
    (1, "exited with code 1"), (-200, "was killed by signal 200"),
])
def test_exit_status(returncode, words):
    assert exit_status(returncode) == words


@pytest.mark.parametrize("ended, returncode, health, story", [
    ([CORE, SERVER], 0, None,
     "VLLM::EngineCore, pid 101, ended first; then the server exited with code 0"),
    ([SERVER], -9, None, "the server was killed by SIGKILL"),
    ([SERVER, CORE], -9, None, "the server was killed by SIGKILL"),
    ([CORE], None, 503, "VLLM::EngineCore, pid 101, ended first; /health answers 503"),
    ([], None, 503, "the server is up; /health answers 503"),
    ([], 1, None, "the server exited with code 1"),
])
def test_how_it_died(ended, returncode, health, story):
    assert how_it_died(ended, returncode, health) == story


def test_telling_lines_of_a_killed_engine_core():
    """Not the ~40 lines of shutdown chatter after them, not traceback frames, not uvicorn's
    access lines ("POST /v1/completions HTTP/1.1" 500 Internal Server Error)."""
    assert telling_log_lines(DATA / "engine-core-killed.log") == [
        "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup",
        "AsyncLLM output_handler failed.",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
        "trace (above) for the root cause.",
    ]


def test_telling_lines_keep_the_last_of_repeats_and_plain_lines(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("\n".join([
        "(EngineCore_DP0 pid=7) ERROR 11-23 12:00:00 [core.py:1] RuntimeError: NCCL error",
        "(APIServer pid=6) INFO 11-23 12:00:01 [api.py:2] Error-free info line",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "(EngineCore_DP0 pid=7) ERROR 11-23 12:00:02 [core.py:1] RuntimeError: NCCL error",
        "Killed",
    ]) + "\n")
    assert telling_log_lines(log) == [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: NCCL error", "Killed"]


def test_no_log_no_lines(tmp_path):
    assert telling_log_lines(tmp_path / "missing.log") == []
    assert telling_log_lines(None) == []


def test_shown_path_is_relative_inside_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / ".llmperf" / "logs" / "vllm-8000.log") == \
        ".llmperf/logs/vllm-8000.log"
    assert shown_path(Path("/elsewhere/vllm.log")) == "/elsewhere/vllm.log"


def _wait_for(condition, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_the_watch_records_which_process_of_the_group_ended_first():
    """A real process group, as an engine's: a leader and its child."""
    leader = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        # The child is a forked sh until it execs sleep: wait for the name, not just the count
        # (a busy machine caught it in between).
        assert _wait_for(lambda: [member.name for member in group_members(leader.pid)][1:]
                         == ["sleep"])
        members = group_members(leader.pid)
        assert members[0] == Member(leader.pid, "server")
        child = members[1]
        watch = ProcessWatch(members)
        os.kill(child.pid, signal.SIGKILL)
        leader.wait(timeout=5)  # `wait` returns once its child is gone
        assert _wait_for(lambda: len(watch.ended) == 2)
        assert watch.ended == [child, members[0]]
        watch.close()
    finally:
        if leader.poll() is None:
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


def test_a_closed_watch_records_nothing_more():
    leader = subprocess.Popen(["sleep", "30"], start_new_session=True)
    watch = ProcessWatch(group_members(leader.pid))
    watch.close()
    leader.kill()
    leader.wait()
    time.sleep(0.1)
    assert watch.ended == []


def test_a_stall_line_names_each_process_and_its_state():
    """A real group, its child stopped by SIGSTOP as the fault test stops vLLM's EngineCore."""
    leader = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        assert _wait_for(lambda: len(group_members(leader.pid)) == 2)
        child = group_members(leader.pid)[1]
        os.kill(child.pid, signal.SIGSTOP)
        expected = f"server sleeping, sleep pid {child.pid} stopped (T)"
        assert _wait_for(lambda: tree_states(leader.pid) == expected), tree_states(leader.pid)
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
    assert _wait_for(lambda: tree_states(leader.pid) == "no process left")
