"""The reaper (engines/reaper.py): an engine's process group ends when the test process does,
even when the engine ignores the SIGTERM that PR_SET_PDEATHSIG sends it (as vLLM's API server
does while its engine starts). Real processes throughout: a stand-in test process spawns, through
process.spawn, a stand-in engine that ignores SIGTERM and has a child of its own; the test
process is then killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from pytest_llmperf.engines import process, reaper
from tests.conftest import REPO

# An engine mid-start: SIGTERM caught and ignored, a child process in its group.
ENGINE = textwrap.dedent("""
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, lambda *_: None)
    subprocess.Popen([sys.executable, "-c",
                      "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                      "time.sleep(600)"])
    time.sleep(600)
""")
# The test process: spawns the engine as the plugin does, says its pid, waits to be killed.
TEST_PROCESS = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pytest_llmperf.engines import process, reaper
    reaper.GRACE_S = 1.0
    proc = process.spawn([sys.executable, "-c", sys.argv[1]], {}, Path(sys.argv[2]))
    Path(sys.argv[3]).write_text(str(proc.pid))
    time.sleep(600)
""")


def _wait_gone(group: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while process.group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not process.group_alive(group)


def test_a_killed_test_process_takes_an_engine_that_ignores_sigterm_along(tmp_path):
    said = tmp_path / "engine.pid"
    test_process = subprocess.Popen(
        [sys.executable, "-c", TEST_PROCESS, ENGINE, str(tmp_path / "engine.log"), str(said)],
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 30
        while not said.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        group = int(said.read_text())
        time.sleep(1.0)  # the engine's child started, its SIGTERM handler set
        assert process.group_alive(group)
        test_process.kill()  # SIGKILL: no teardown of ours runs
        test_process.wait(timeout=10)
        # PR_SET_PDEATHSIG's SIGTERM is ignored; the reaper's SIGKILL after its 1 s grace is not.
        assert _wait_gone(group, within_s=10), "the engine's group outlived the test process"
    finally:
        if test_process.poll() is None:
            test_process.kill()
        if said.exists() and process.group_alive(int(said.read_text())):
            os.killpg(int(said.read_text()), signal.SIGKILL)


def test_a_group_stopped_here_lets_its_reaper_go(tmp_path):
    proc = process.spawn([sys.executable, "-c", "import time; time.sleep(600)"], {},
                         tmp_path / "engine.log")
    _, watcher = reaper._held[proc.pid]
    assert watcher.poll() is None  # watching
    process.stop_group(proc, grace_s=5)
    assert not process.group_alive(proc.pid) and proc.pid not in reaper._held
    assert watcher.poll() is not None  # it found the group gone and exited
