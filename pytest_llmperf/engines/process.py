"""Engine processes we own from start to stop: each kind's server, the offline worker and a local
Ray head alike.

Each runs in its own session (process group), so one `killpg` reaches every engine-core and
worker process it spawned. PR_SET_PDEATHSIG asks it to stop when the test process dies, and a
reaper per group (reaper.py) makes sure it does; `stop_group` stops it everywhere else (session
end, Ctrl-C, a failed start, a timeout).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Callable, Iterator

from pytest_llmperf.engines import reaper
from pytest_llmperf.engines.errors import EngineStartError
from pytest_llmperf.engines.kinds.vllm import VLLM
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.secrets import MARKER, redact_args, redact_env, redact_text, secret_values

__all__ = ["EngineStartError", "check_model_path", "engine_error", "group_alive", "log_header",
           "log_tail", "own_rpc_dir", "spawn", "stop_group"]

STOP_TIMEOUT_S = 15.0  # SIGTERM -> SIGKILL; vLLM on CPU stops in ~2 s
STOP_POLL_S = 0.05
LOG_TAIL_LINES = 15
ROOT_CAUSE_ABOVE = "See root cause above"
ROOT_CAUSE_SCAN_LINES = 400
# An exception's own line ("ValueError: ..."), with or without vLLM's log prefix before it.
_EXCEPTION_LINE = re.compile(r"(?<![\w.])[A-Za-z_][\w.]*(?:Error|Exception): .*$")
# Niceness for engines that share CPU cores with the load generator (see lower_autogroup).
CPU_ENGINE_NICE = 19

_PR_SET_PDEATHSIG = 1
# vLLM's ipc socket directory (kinds/vllm.py says why it gets one of its own).
RPC_DIR_ENV = VLLM.private_dir_env


def check_model_path(engine: Engine, mode: str = "") -> None:
    """Catch a missing local model before paying for an engine start (vLLM would report it as
    an invalid Hugging Face repo id after ~15 s)."""
    model = engine.model
    if model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().exists():
        kind = engine.engine_kind
        raise EngineStartError(
            f"{kind.noun} {engine.label()!r}{mode}: model path {model} does not exist; point "
            f"Engine(model=...) at {kind.model_hint}"
        )


@contextlib.contextmanager
def own_rpc_dir(added_env: dict[str, str], variable: str | None = RPC_DIR_ENV
                ) -> Iterator[dict[str, str]]:
    """`added_env` with a directory of this engine's own named by `variable` (vLLM's ipc
    sockets: the kind's private_dir_env), removed on exit (after the engine has stopped); as is
    where it names one already, or the kind has none."""
    if variable is None or variable in added_env:
        yield added_env
        return
    path = tempfile.mkdtemp(prefix="llmperf-vllm-ipc-")
    try:
        yield {**added_env, variable: path}
    finally:
        shutil.rmtree(path, ignore_errors=True)


def spawn(command: list[str], added_env: dict[str, str], log_path: Path,
          nice: int = 0, cores: set[int] | None = None,
          hidden: set[str] | frozenset[str] = frozenset()) -> subprocess.Popen:
    """Start `command` in its own session, output to `log_path` (headed by the command, the
    environment we added and the cores its control processes get once it serves, so a log says
    exactly how its engine was started, secrets hidden: see log_header). `cores`: only said
    here; engines/cpu_cores.pin_control moves the processes there. `hidden`: more secret values
    to keep out of the header (the engine's, where one sits inside a JSON flag)."""
    with open(log_path, "w") as log:
        log.write(log_header(command, added_env, hidden))
        if cores is not None:
            log.write(f"# cores: {','.join(map(str, sorted(cores)))} (the API server and engine "
                      "core, once it serves; the worker binds its compute threads to "
                      "VLLM_CPU_OMP_THREADS_BIND)\n")
        log.flush()
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **added_env}, start_new_session=True,
            preexec_fn=_child_setup(nice),
        )
    if nice:
        lower_autogroup(proc.pid, nice)
    reaper.watch(proc.pid)  # the group ends with this process, however it ends (reaper.py)
    return proc


def log_header(command: list[str], added_env: dict[str, str],
               hidden: set[str] | frozenset[str] = frozenset()) -> str:
    """The "$ command" and "# env:" lines, secret values as secrets.MARKER: logs are uploaded
    as CI artifacts and pasted into bug reports (the process itself gets the real values).
    The command is shell-quoted, so it can be pasted to run the server by hand (once the
    redacted values are put back: those stay as the marker, unquoted)."""
    values = set(hidden) | secret_values(added_env)
    env = redact_env(added_env)
    shown = (arg if MARKER in arg else shlex.quote(arg) for arg in redact_args(command))
    lines = ("$ " + " ".join(shown) + "\n"
             + "# env: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())) + "\n")
    return redact_text(lines, values)


def _child_setup(nice: int) -> Callable[[], None]:
    """What runs in the child before exec."""

    def setup() -> None:
        # Ask Linux to SIGTERM the child when our process dies, so a killed pytest never leaves
        # an engine holding the GPU. (When the *thread* that spawned it ends, too: an engine is
        # spawned from a thread that outlives it, EngineServer.launch.)
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:  # not Linux: atexit and the session teardown still stop it
            pass
        if nice:
            os.nice(nice)  # before exec, so every thread and child process inherits it

    return setup


def lower_autogroup(session_leader: int, nice: int) -> None:
    """With the kernel's autogroup scheduling (on by default on desktop and VM kernels), nice only
    ranks threads inside one session: the engine, in its own session, must have its whole group
    niced. Measured on this project's 2-core CPU runner: vLLM's busy-polling engine core kept the
    client waiting ~1 s per 3 s run (queue p99 170 ms at 20 req/s); with the group at nice 19 the
    client waited 0.02 s (queue p99 15 ms)."""
    try:
        with open(f"/proc/{session_leader}/autogroup", "w") as fh:
            fh.write(str(nice))
    except OSError:  # no autogroup (or not Linux): the per-process nice set before exec applies
        pass


def stop_group(proc: subprocess.Popen, grace_s: float = STOP_TIMEOUT_S) -> None:
    """End the child's whole session: SIGTERM, wait until every process of the group is gone,
    SIGKILL what is left after `grace_s` (0: SIGKILL at once, for an engine that hangs). Returns
    only when nothing is left running."""
    try:
        _stop(proc, grace_s)
    finally:
        reaper.release(proc.pid)


def _stop(proc: subprocess.Popen, grace_s: float) -> None:
    if grace_s > 0:
        _signal_group(proc.pid, signal.SIGTERM)
        # A stopped process (SIGSTOP, a debugger's Ctrl-Z) holds SIGTERM until it continues.
        _signal_group(proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not group_alive(proc.pid):
            return
        time.sleep(STOP_POLL_S)
    _signal_group(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:  # pragma: no cover - a zombie we cannot reap
        pass
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(STOP_POLL_S)


def group_alive(pgid: int) -> bool:
    """Is any process of group `pgid` left (one we may not signal counts as gone)?"""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        with open(path, errors="replace") as fh:
            return [line.rstrip() for line in deque(fh, maxlen=lines)]
    except OSError:
        return []


def error_line(lines: list[str]) -> str:
    """The most telling line of a failed start: the last error-looking line, else the last."""
    for line in reversed(lines):
        if any(word in line for word in ("Error", "error:", "Exception", "Traceback")):
            return line.strip()
    return lines[-1].strip() if lines else "(empty log)"


def root_cause(log_path: Path, line: str) -> str:
    """`line`, or where it is vLLM's "Engine core initialization failed. See root cause above."
    (its API server's words for any engine core that failed to start), the last exception line
    above it: the engine core's own (seen: "ValueError: current platform cpu does not support
    ray." 58 lines up, past the API server's traceback)."""
    if ROOT_CAUSE_ABOVE not in line:
        return line
    for earlier in reversed(log_tail(log_path, ROOT_CAUSE_SCAN_LINES)):
        found = _EXCEPTION_LINE.search(earlier)
        if found and ROOT_CAUSE_ABOVE not in earlier:
            return found.group(0).strip()
    return line


def engine_error(engine: Engine, what: str, log_path: Path, mode: str = "") -> EngineStartError:
    """`vLLM engine '<label>'<mode> <what>: <the log's error line> (full log: <path>)` (the
    kind's noun first: "llama.cpp server '<label>' ..."), the engine's secret values hidden in
    the line (vLLM logs its non-default args, --api-key too)."""
    reason = redact_text(root_cause(log_path, error_line(log_tail(log_path))),
                         engine.secret_values())
    return EngineStartError(
        f"{engine.engine_kind.noun} {engine.label()!r}{mode} {what}: {reason} "
        f"(full log: {log_path})"
    )
