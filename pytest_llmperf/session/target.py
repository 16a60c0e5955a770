"""What a session measures, chosen once (`choose_target`): the engines it starts
(`OurEngines`), or a deployment it only reaches (`YourEndpoint`, --llmperf-endpoint,
session/deployment.py). The runner (session/runner.py) asks its target and never which one it
is, as pytest-xdist's session asks the one scheduler `pytest_xdist_make_scheduler` picked
(https://github.com/pytest-dev/pytest-xdist/blob/master/src/xdist/dsession.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from pytest_llmperf.client import server_info
from pytest_llmperf.client.measure import Endpoint, Measurement
from pytest_llmperf.client.openai import ClientOptions
from pytest_llmperf.client.server_kind import KINDS, ServerKind
from pytest_llmperf.engines.errors import EngineDied, EngineStalled
from pytest_llmperf.engines.interpreter import engine_versions, kind_identity
from pytest_llmperf.engines.pool import EnginePool
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.machine.hardware import is_gpu_class
from pytest_llmperf.machine.watch import watched
from pytest_llmperf.metrics import energy
from pytest_llmperf.session.deployment import Deployment

__all__ = ["OurEngines", "ServingTarget", "YourEndpoint", "choose_target", "client_kind_of"]


class ServingTarget(Protocol):
    """Where a measurement's requests go, and what is ours to do about that server."""

    # The engines this session starts (under an endpoint none: it stays empty).
    pool: EnginePool
    gpu_count: int  # GPUs this process may use for them (0 on CPU hardware or an endpoint)

    def notes(self) -> list[str]:
        """Lines for the summary about how every number of the session came."""

    def endpoint(self, engine: Engine, options: ClientOptions
                 ) -> tuple[Endpoint, float | None]:
        """Where `engine`'s requests go, and its start time where this session started it."""

    def start_together(self, engines: list[Engine]) -> None:
        """Start the engines a test will use together at the same time."""

    def server_kind(self, engine: Engine) -> tuple[ServerKind, str | None]:
        """The kind of server `engine`'s requests reach, and a line for the summary, if any."""

    def identity(self, engine: Engine, base_url: str) -> dict[str, str]:
        """Which server `engine` runs (server_info.identity), asked once it was healthy."""

    def watch(self, call: Callable[[], Measurement], engine: Engine,
              on_disturbed: Callable[[str], None] | None = None) -> Measurement:
        """`call()`, watched for what else used the machine where that is ours to watch;
        `on_disturbed(reason)` ends `call` early where a neighbour already decided it."""

    def death(self, engine: Engine, records: Sequence, stall: str | None
              ) -> EngineDied | None:
        """After requests failed or stalled, whether the engine died."""

    def one_at_a_time(self) -> AbstractContextManager:
        """Held for each measurement: what keeps two loads off one server."""

    def reserved_cores(self, hardware_class: str) -> int:
        """Cores of this machine the server keeps busy: not the client's."""

    def check_served(self, engine: Engine, whose: str) -> None:
        """InputError unless the server can serve `engine`'s model (`whose` it is)."""

    def preflight(self) -> None:
        """Before the first test: can the server be used at all? InputError if not."""


def client_kind_of(engine: Engine) -> ServerKind:
    """The request fields `engine`'s kind (engines/kinds/) takes: its client kind
    (client/server_kind.py KINDS). A kind naming one that is not there is an input error,
    never vLLM's fields sent in silence."""
    kind = engine.engine_kind
    try:
        return KINDS[kind.client_kind]
    except KeyError:
        raise InputError(f"engine kind {kind.name!r} names client kind {kind.client_kind!r}, "
                         f"which is not one of {', '.join(KINDS)}") from None


@dataclass
class OurEngines:
    """The engines the plugin starts, serves from its pool and watches."""

    pool: EnginePool
    gpu_count: int = 0
    # The pid whose descendants are this session's processes (machine/neighbours.session_root);
    # 0: this process.
    process_root: int = 0
    judge_disturbance: bool = True  # False under --llmperf-disturbance off: cards read, not judged
    # Under --llmperf-disturbance fail (the default), a measurement a neighbour already made
    # DISTURBED is ended early (machine/neighbour_watch.py); warn measures it whole.
    stop_disturbed: bool = False

    def notes(self) -> list[str]:
        return []

    def endpoint(self, engine: Engine, options: ClientOptions
                 ) -> tuple[Endpoint, float | None]:
        server = self.pool.get(engine)
        return Endpoint(server.base_url, engine.model_name, options), server.start_time_s

    def start_together(self, engines: list[Engine]) -> None:
        self.pool.start_together(engines)

    def server_kind(self, engine: Engine) -> tuple[ServerKind, str | None]:
        return client_kind_of(engine), None

    def identity(self, engine: Engine, base_url: str) -> dict[str, str]:
        """Its GET /version and what its interpreter has installed (another vLLM for
        Engine(python=))."""
        return kind_identity(engine) or server_info.identity(
            server_info.fetch_version(base_url), engine_versions(engine))

    def watch(self, call: Callable[[], Measurement], engine: Engine,
              on_disturbed: Callable[[str], None] | None = None) -> Measurement:
        """Under --llmperf-disturbance off the engine's cards are still read, for their
        telemetry and energy per token; nothing is judged."""
        measured, disturbance = watched(
            call, root=self.process_root or os.getpid(),
            gpus=self.pool.gpus_of(engine) if self.gpu_count else (),
            window=lambda found: energy.measured_window(found.records),
            judge=self.judge_disturbance,
            engine_root=None if self.gpu_count else self.pool.server_pid(engine),
            on_disturbed=on_disturbed if self.stop_disturbed else None)
        return replace(measured, disturbance=disturbance)

    def death(self, engine: Engine, records: Sequence, stall: str | None
              ) -> EngineDied | None:
        """After a stall, it is killed like a dead one."""
        if not (stall or any(record.error for record in records)):
            return None
        return self.pool.check(engine, stall=stall)

    def one_at_a_time(self) -> AbstractContextManager:
        return nullcontext()  # each engine serves one test's load at a time already

    def reserved_cores(self, hardware_class: str) -> int:
        """The engine's core on this machine's CPU; two beside a local GPU engine (vLLM's API
        server and its busy-polling engine core each keep one busy)."""
        return 2 if is_gpu_class(hardware_class) else 1

    def check_served(self, engine: Engine, whose: str) -> None:
        return None  # the engine serves its own model

    def preflight(self) -> None:
        return None


@dataclass
class YourEndpoint:
    """Another's server (--llmperf-endpoint): reached, never started, watched or restarted."""

    deployment: Deployment
    rootdir: Path  # where the lock every process of this checkout shares lives
    pool: EnginePool
    gpu_count: int = 0  # the server's cards are not this process's
    _identity: dict[str, str] | None = field(default=None, repr=False)

    def notes(self) -> list[str]:
        return self.deployment.notes()

    def endpoint(self, engine: Engine, options: ClientOptions
                 ) -> tuple[Endpoint, float | None]:
        self.check_served(engine, "the test's Engine")
        return self.deployment.endpoint(engine, options), None

    def start_together(self, engines: list[Engine]) -> None:
        return None  # not ours to start

    def server_kind(self, engine: Engine) -> tuple[ServerKind, str | None]:
        """As named or detected (deployment.Deployment.kind); the line says so when not vLLM."""
        kind = self.deployment.kind()
        return kind, self.deployment.kind_note()

    def identity(self, engine: Engine, base_url: str) -> dict[str, str]:
        """Its interpreter is not ours to ask, and all the specs share the one answer."""
        if self._identity is None:
            access = self.deployment.access
            self._identity = server_info.identity(server_info.fetch_version(
                base_url, headers=dict(access.headers), verify=access.ssl_context()))
        return self._identity

    def watch(self, call: Callable[[], Measurement], engine: Engine,
              on_disturbed: Callable[[str], None] | None = None) -> Measurement:
        """Its machine is not ours to watch; this one's neighbours only slow the client there,
        which its self-check sees."""
        return call()

    def death(self, engine: Engine, records: Sequence, stall: str | None
              ) -> EngineDied | None:
        """Not ours to judge or restart: a stall fails the test, nothing more."""
        if not stall:
            return None
        return EngineStalled(f"the server at {self.deployment.url} stalled during the test "
                             f"({stall}); it is not ours to restart")

    def one_at_a_time(self) -> AbstractContextManager:
        """The server is shared by every pytest-xdist worker (and any other session in this
        rootdir): two loads at once would measure each other (deployment.Deployment.lock)."""
        return self.deployment.lock(self.rootdir)

    def reserved_cores(self, hardware_class: str) -> int:
        return 0  # the server runs elsewhere: every core is the client's

    def check_served(self, engine: Engine, whose: str) -> None:
        self.deployment.check_model(self.deployment.model_name(engine), whose)

    def preflight(self) -> None:
        self.deployment.preflight()


def choose_target(deployment: Deployment | None, pool: EnginePool, *, rootdir: Path,
                  gpu_count: int = 0, process_root: int = 0,
                  judge_disturbance: bool = True, stop_disturbed: bool = False) -> ServingTarget:
    """The session's one target: `deployment`'s server where there is one, else the engines
    this session starts."""
    if deployment is not None:
        return YourEndpoint(deployment, rootdir, pool)
    return OurEngines(pool, gpu_count, process_root, judge_disturbance, stop_disturbed)
