"""Shared helpers for the project's own tests."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.history_db import postgres_db, postgres_server  # noqa: F401  (fixtures)

# Imported once, before any in-process pytester run: pytester takes those runs' newly imported
# modules out of sys.modules again, and a psycopg imported afresh afterwards has new exception
# classes, while its C part still raises the first import's; SQLAlchemy then no longer
# recognises psycopg's errors as the driver's and lets them through unwrapped.
try:
    import psycopg  # noqa: F401
except ImportError:  # the postgres extra is not installed: the PostgreSQL tests skip
    pass
# matplotlib likewise (reports/plots.py imports it when a run draws its plots): re-imported
# after pytester dropped it, its new Figure meets classes the old import cached, and
# Figure.subplots fails ("Single argument to subplot must be a three-digit integer, not
# GridSpec(1, 1)[0:1, 0:1]"), seen in an --llmperf-html run after another in-process run.
try:
    import matplotlib.figure  # noqa: F401
    from matplotlib.backends import backend_agg  # noqa: F401
except ImportError:  # the plots extra is not installed: the plot tests skip
    pass

REPO = Path(__file__).resolve().parent.parent
TINY_LLAMA = REPO / "suites" / "models" / "tiny-llama"  # the repo's tiny model, config and tokenizer
VLLM_PROCESS_MARKERS = ("vllm.entrypoints", "VLLM::", "EngineCore", "VllmWorker")
# Process groups of the engine the integration tests share (tests/integration/conftest.py): it
# is meant to outlive the tests that look for leftovers, so they do not count it.
SHARED_ENGINE_GROUPS: set[int] = set()


@contextmanager
def shared_engine(log_dir: Path) -> Iterator:
    """TINY_CPU as the plugin starts it on CPU hardware (control processes off the compute core),
    in the environment of the moment, kept out of the leftover checks (SHARED_ENGINE_GROUPS)
    until it is stopped on leaving."""
    from pytest_llmperf.engines.server import CPU_ENGINE_NICE, VllmServer
    from suites.tiny import TINY_CPU

    server = VllmServer(TINY_CPU, log_dir, nice=CPU_ENGINE_NICE, separate_control=True).start()
    group = server.process.pid  # its own session: the group id is the API server's pid
    SHARED_ENGINE_GROUPS.add(group)
    try:
        yield server
    finally:
        server.stop()
        SHARED_ENGINE_GROUPS.discard(group)


# A real-engine test beside others (marked shares_machine) has its pytest-xdist worker's name in
# this variable, and so has every process it starts: its leftover checks count only those.
LANE_ENV = "LLMPERF_TEST_LANE"


def vllm_processes() -> list[str]:
    """Command lines of every vLLM process on the machine but the shared engine's (ours or not:
    there should be none); in a test beside others, of every one this worker started."""
    lane = os.environ.get(LANE_ENV)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        cmdline = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        if not any(m in cmdline or m in name for m in VLLM_PROCESS_MARKERS):
            continue
        if lane is not None and not _in_lane(pid, lane):
            continue
        try:
            if os.getpgid(int(pid)) in SHARED_ENGINE_GROUPS:
                continue
        except OSError:  # it ended while we looked
            continue
        found.append(f"{pid} {name} {cmdline[:120]}")
    return found


def _in_lane(pid: str, lane: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # it ended while we looked
        return False
    return f"{LANE_ENV}={lane}".encode() in environ


SETTLE_S = 10.0  # a stopped engine's last child may show as a zombie for a moment


def leftover_vllm_processes(settle_s: float = SETTLE_S) -> list[str]:
    """vllm_processes(), after waiting up to `settle_s` for the list to become empty."""
    deadline = time.monotonic() + settle_s
    while (found := vllm_processes()) and time.monotonic() < deadline:
        time.sleep(0.25)
    return found


def ipc_dir_of(log_path: Path) -> Path:
    """The directory an engine was given for vLLM's ipc sockets, read from its log's header
    (`# env: ... VLLM_RPC_BASE_PATH=...`, written by engines/process.spawn)."""
    header = next(line for line in log_path.read_text().splitlines() if line.startswith("# env: "))
    return Path(header.partition("VLLM_RPC_BASE_PATH=")[2].split(" ")[0])


def vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


# Skipped only on a developer machine without vLLM; in CI (CI=true) a missing vLLM must fail loudly,
# never quietly turn the real-engine tests into skips.
requires_vllm = pytest.mark.skipif(
    not vllm_installed() and not os.environ.get("CI"),
    reason="vLLM is not installed (run scripts/install-cpu)",
)
