"""An engine's OpenAI-compatible server as a subprocess we own from start to stop, whatever its
kind (engines/kinds/: the command, the GET that says it serves, what that GET answers once its
engine died, the log's name and line prefix).

Started and stopped through engines/process.py (own session, PR_SET_PDEATHSIG, nice): stopped at
session end, on Ctrl-C, at interpreter exit, and when the test process itself dies.
"""

from __future__ import annotations

import atexit
import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from pytest_llmperf.engines.cpu_cores import control_cores, pin_control
from pytest_llmperf.engines.health import ProcessWatch, group_members, how_it_died, tree_states
from pytest_llmperf.engines.lora_adapters import check_adapters
from pytest_llmperf.engines.process import (
    CPU_ENGINE_NICE,
    STOP_TIMEOUT_S,
    EngineStartError,
    check_model_path,
    engine_error,
    log_tail,
    own_rpc_dir,
    spawn,
    stop_group,
)
from pytest_llmperf.engines.spec import Engine

__all__ = ["CPU_ENGINE_NICE", "EngineServer", "EngineStartError", "VllmServer", "free_port"]

STARTUP_TIMEOUT_S = 900.0  # an 8B model with torch.compile and CUDA graphs can take minutes
HEALTH_POLL_S = 0.5
PORT_ATTEMPTS = 3
# vLLM's API server exits about 1 s after its engine core died (measured on the CPU engine);
# waiting for that lets the death line say how the whole tree ended.
DYING_WAIT_S = 5.0
HEALTH_CHECK_TIMEOUT_S = 2.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now. Another process may take it before the server binds it;
    the start is then retried (EngineServer.start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class EngineServer:
    """One running server for one Engine spec, of the spec's kind."""

    def __init__(self, engine: Engine, log_dir: Path, *, host: str = "127.0.0.1",
                 extra_env: dict[str, str] | None = None,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S, nice: int = 0,
                 separate_control: bool = False) -> None:
        self.engine = engine
        self.host = host
        self.port = 0
        self.log_dir = Path(log_dir)
        self.extra_env = dict(extra_env or {})
        self.startup_timeout_s = startup_timeout_s
        self.nice = nice
        # On CPU hardware: the API server and engine core off the compute cores (cpu_cores.py).
        self.separate_control = separate_control
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self._rpc_dir = contextlib.ExitStack()  # its ipc socket directory, removed at stop
        self.start_time_s: float | None = None
        self._watch: ProcessWatch | None = None
        self.kind = engine.engine_kind
        self._began = 0.0  # perf_counter at launch
        self._attempt = 0  # launches so far (another port each)
        self._deadline = 0.0  # monotonic time the current launch must be healthy by
        self._control_cores: set[int] | None = None  # where its control processes go (serving)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        return self.kind.command(self.engine, self.engine.python or sys.executable, self.host,
                                 self.port)

    def start(self) -> "EngineServer":
        """Start the server and block until it serves: the kind's ready_path answers 200 (vLLM's
        /health), or raise EngineStartError."""
        self.launch()
        while not self.ready():
            time.sleep(HEALTH_POLL_S)
        return self

    def launch(self) -> None:
        """Spawn the server without waiting for it; `ready` says when it serves. Call it from
        the thread that will outlive the engine: PR_SET_PDEATHSIG (engines/process.py) fires
        when the *thread* that spawned a process ends, not only its process (prctl(2),
        https://man7.org/linux/man-pages/man2/prctl.2.html)."""
        check_model_path(self.engine)
        check_adapters(self.engine)  # a missing or unfit LoRA adapter, before the start
        self._began = time.perf_counter()
        self._attempt = 1
        self._spawn()

    def ready(self) -> bool:
        """Does the launched server serve yet? Raises EngineStartError (and stops what is left
        of it) when it exited or timed out. free_port() can race with another process (a
        pytest-xdist worker starting its own engine) taking the same port first; such a start
        is launched again on a new port, up to PORT_ATTEMPTS times."""
        try:
            if not self._healthy():
                return False
        except EngineStartError:
            taken = self._port_was_taken()
            self.stop()
            if self._attempt == PORT_ATTEMPTS or not taken:
                raise
            self._attempt += 1
            self._spawn()
            return False
        except BaseException:
            self.stop()
            raise
        self.start_time_s = time.perf_counter() - self._began
        # Its children exist once it is healthy; from now on, who ends first is recorded.
        members = group_members(self.process.pid)
        if self._control_cores is not None:
            pin_control([member.pid for member in members], self._control_cores)
        self._watch = ProcessWatch(members)
        return True

    def _spawn(self) -> None:
        self.port = free_port(self.host)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"{self.kind.log_name}-{self.port}.log"
        added = self._rpc_dir.enter_context(
            own_rpc_dir({**self.kind.server_env, **self.engine.environment(), **self.extra_env},
                        self.kind.private_dir_env))
        self._control_cores = control_cores(added) if self.separate_control else None
        try:
            self.process = spawn(self.command(), added, self.log_path, self.nice,
                                 self._control_cores, hidden=self.engine.secret_values())
        except BaseException:
            self.stop()
            raise
        _LIVE.add(self)
        self._deadline = time.monotonic() + self.startup_timeout_s

    def _port_was_taken(self) -> bool:
        return any("address already in use" in line.lower() for line in log_tail(self.log_path))

    def _healthy(self) -> bool:
        """One look: True once the ready GET answers 200; EngineStartError once the server
        exited, or its start outlasted the timeout."""
        if self.process.poll() is not None:
            raise engine_error(self.engine, f"exited with code {self.process.returncode}",
                               self.log_path)
        if self._health_status() == 200:  # None: not listening yet
            return True
        if time.monotonic() > self._deadline:
            raise engine_error(self.engine, f"not healthy after {self.startup_timeout_s:.0f} s "
                               "(raise --llmperf-startup-timeout if the model is large)",
                               self.log_path)
        return False

    def stop(self, kill: bool = False) -> None:
        """Stop the whole process group (`kill`: SIGKILL at once, for a hung engine); returns
        when nothing of it is left running."""
        _LIVE.discard(self)
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.close()  # our own stop is no death
        proc, self.process = self.process, None
        if proc is not None:
            stop_group(proc, grace_s=0 if kill else STOP_TIMEOUT_S)
        self._rpc_dir.close()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def death(self) -> str | None:
        """None while the engine can serve; else how it died (health.how_it_died). A process of
        its tree that ended, or its ready GET answering the kind's dead_status (vLLM's /health:
        503, its word for a dead engine core), is a death; a slow answer is not (a busy engine
        may answer late)."""
        if self.process is None or self._watch is None:
            return None
        health = None
        if self.process.poll() is None and not self._watch.ended:
            if self.kind.dead_status is None:
                return None
            health = self._health_status()
            if health != self.kind.dead_status:
                return None
        try:
            self.process.wait(timeout=DYING_WAIT_S)
        except subprocess.TimeoutExpired:
            pass  # still up (VLLM_KEEP_ALIVE_ON_ENGINE_DEATH, or a child ended): told as is
        return how_it_died(list(self._watch.ended), self.process.poll(), health)

    def state(self) -> str:
        """How the engine looks now, for a stall line: each process's scheduling state and what
        its ready GET answered (a stalled engine may still answer it: vLLM's /health does not
        wait for the engine core)."""
        if self.process is None:
            return "not running"
        health = self._health_status()
        path = self.kind.ready_path
        answered = (f"{path} answered {health}" if health is not None else
                    f"{path} did not answer within {HEALTH_CHECK_TIMEOUT_S:g} s")
        return f"{tree_states(self.process.pid)}; {answered}"

    def _health_status(self) -> int | None:
        try:
            return httpx.get(self.base_url + self.kind.ready_path,
                             timeout=HEALTH_CHECK_TIMEOUT_S).status_code
        except httpx.TransportError:
            return None


# The name the tests and older code know it by: every server was vLLM's before kinds.
VllmServer = EngineServer

# Servers started and not yet stopped, for the interpreter-exit safety net only: the session's
# EnginePool owns them and stops them at session end.
_LIVE: set[EngineServer] = set()


@atexit.register
def _stop_all_at_exit() -> None:
    for server in list(_LIVE):
        server.stop()
