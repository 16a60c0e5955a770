"""The session's engines: one running server per Engine spec, started on first use.

Tests are ordered by spec (see plugin/hooks.py), so with `capacity=1` (the default, right for a GPU,
where two engines rarely fit) each spec starts once. A spec that failed to start is not retried:
every later test that asks for it fails at once with the same one-line error.

An engine that dies (found by `check` after requests failed, or by `get` before a measurement)
is stopped, its GPUs handed back, and the next test gets a fresh one. A stalled engine (the
watchdog's word, passed to `check`) is treated the same, killed at once: a hung engine would
not heed a polite stop. A spec that died (or stalled) MAX_DEATHS times is not started again:
something about it (memory, a driver) kills it, and each restart of a large model costs minutes.

A Ray engine (engines/ray.py) gets the session's Ray cluster in its environment (RAY_ADDRESS) as
it gets its GPU lease; the cluster's local head, if one was started, stops with `stop_all`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Protocol

from pytest_llmperf.engines.errors import EngineDied, EngineError, EngineStalled, EngineStartError
from pytest_llmperf.engines.health import death_line, given_up_line, stall_line
from pytest_llmperf.engines.leases import GpuLeases, Lease
from pytest_llmperf.engines.server import HEALTH_POLL_S, EngineServer
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.engines.speculative import cpu_build_problem
from pytest_llmperf.engines.weights import fetch_before_start
from pytest_llmperf.errors import InputError

MAX_DEATHS = 3
DURING_TEST = "during the test"
BETWEEN_TESTS = "between tests"


class Server(Protocol):
    """What the pool needs of a server; EngineServer is one, tests may pass a fake."""

    base_url: str
    start_time_s: float | None
    log_path: Path | None

    def start(self) -> "Server": ...

    def launch(self) -> None: ...  # start without waiting; `ready` then says when it serves

    def ready(self) -> bool: ...

    def stop(self, kill: bool = False) -> None: ...

    def death(self) -> str | None: ...

    def state(self) -> str: ...


# factory(engine, extra_env) -> a server not yet started; extra_env carries the GPU lease and,
# for a Ray engine, the cluster to join (RAY_ADDRESS).
ServerFactory = Callable[[Engine, dict[str, str]], Server]
# on_death(engine, the death line, restarted?) -> None: the session turns it into a note.
DeathListener = Callable[[Engine, str, bool], None]


class Placement(Protocol):
    """Where a spec's workers run beyond its own process tree; ray.RayCluster is one."""

    spans_nodes: bool  # its engines may place ranks on other machines

    def env_for(self, engine: Engine) -> dict[str, str]: ...

    def close(self) -> None: ...


class EnginePool:
    def __init__(self, factory: ServerFactory, capacity: int = 1,
                 leases: GpuLeases | None = None, placement: Placement | None = None) -> None:
        self._factory = factory
        self._capacity = capacity
        self._leases = leases  # None on CPU hardware: no GPUs to hand out
        self._placement = placement  # None: no Ray engines expected (a test's fake pool)
        self._running: OrderedDict[Engine, Server] = OrderedDict()
        self._held: dict[Engine, Lease] = {}
        self._failed: dict[Engine, EngineError] = {}
        self.deaths: Counter[Engine] = Counter()
        self._stalled: set[Engine] = set()  # specs that stalled at least once (for the wording)
        self.on_death: DeathListener | None = None
        self.starts: list[tuple[Engine, float]] = []  # (spec, seconds to healthy), for the report

    def get(self, engine: Engine) -> Server:
        """The spec's running server, started if need be; never one that has died."""
        if self._serving(engine):
            self._running.move_to_end(engine)
            return self._running[engine]
        if engine in self._failed:
            raise self._failed[engine]
        refuse_unservable(engine)
        self._make_room(1)
        server, lease, error = self._begin_start(engine)
        return self._finish_start(engine, server, lease, error or _start_quietly(server))

    def start_together(self, engines: list[Engine]) -> None:
        """Start those of `engines` that are not running (nor failed before) at the same time,
        for a test that will use them all (the two sides of an A/B test). A vLLM start is
        mostly three Python processes, one after the other, each importing torch and vLLM on one
        core (docs/cpu-engine.md, "Start-up and stopping"): two side by side take about as long
        as one.
        A start that fails is kept as `get` keeps it: the `get` for that spec raises it."""
        wanted = [engine for engine in dict.fromkeys(engines)
                  if engine not in self._failed and not self._serving(engine)]
        for engine in wanted:
            refuse_unservable(engine)
        if len(wanted) < 2:
            return  # nothing to overlap: `get` starts it as always
        self._make_room(len(wanted), keep=engines)
        begun = [(engine, *self._begin_start(engine)) for engine in wanted]  # leases in order
        ended = _launch_side_by_side([server for _, server, _, error in begun if error is None])
        for engine, server, lease, error in begun:
            try:
                self._finish_start(engine, server, lease, error or ended[id(server)])
            except EngineStartError:
                pass  # kept in _failed: raised by the `get` of the test that needs it

    def _serving(self, engine: Engine) -> bool:
        """The spec runs and has not died since (a death found here is stopped and told)."""
        return engine in self._running and self.check(engine, BETWEEN_TESTS) is None

    def _make_room(self, starting: int, keep: list[Engine] = ()) -> None:
        """Stop the least recently used engines (not those in `keep`) until `starting` more fit:
        free memory before a start."""
        for engine in [engine for engine in self._running if engine not in keep]:
            if len(self._running) + starting <= self._capacity:
                break
            self.stop(engine)

    def trim(self, keep: Engine | None = None) -> None:
        """Stop the least recently used engines beyond --llmperf-keep-engines, never `keep`
        (the next test's): what a paired A/B test kept running beside it (`room_for`) goes
        when the test ends, not at the next start."""
        self._make_room(0, keep=[keep] if keep is not None else [])

    def _begin_start(self, engine: Engine) -> tuple[Server, Lease | None,
                                                     EngineStartError | None]:
        """The spec's server, not started yet, with its GPU lease (and Ray cluster) in its
        environment; or why it cannot start (the Ray head would not)."""
        lease = self._leases.acquire(self._local_gpus(engine)) if self._leases else None
        try:
            env = {**(lease.env if lease else {}),
                   **(self._placement.env_for(engine) if self._placement else {})}
        except EngineStartError as exc:
            return None, lease, exc
        return self._factory(engine, env), lease, None

    def _finish_start(self, engine: Engine, server: Server | None, lease: Lease | None,
                      error: EngineStartError | None) -> Server:
        """Keep a server whose start ended: running, or (`error`) failed, its GPUs handed
        back, the error raised now and by every later `get` of the spec."""
        if error is not None:
            if lease:
                lease.release()
            self._failed[engine] = error
            raise error
        self._running[engine] = server
        if lease:
            self._held[engine] = lease
        self.starts.append((engine, server.start_time_s or 0.0))
        return server

    def _local_gpus(self, engine: Engine) -> int:
        """GPUs of this machine a spec holds: all it needs, or, where its ranks may go to other
        machines of a Ray cluster, what this machine has of them."""
        needed = engine.gpus_needed
        if self._placement is not None and self._placement.spans_nodes \
                and engine.engine_kind.uses_ray(engine):
            return min(needed, len(self._leases.devices))
        return needed

    def gpus_of(self, engine: Engine) -> list[str]:
        """The GPUs a running spec holds (none on CPU hardware, or when it is not running)."""
        lease = self._held.get(engine)
        return list(lease.devices) if lease else []

    def server_pid(self, engine: Engine) -> int | None:
        """The pid of a running spec's server process, whose tree is the engine; None when it
        is not running here (or its kind keeps no process of ours)."""
        process = getattr(self._running.get(engine), "process", None)
        return getattr(process, "pid", None)

    def behind_on_gpus(self, engines: list[Engine]) -> Engine:
        """Of running specs, the one whose GPUs come last in this process's visible order:
        started first after all of them stop, it takes the front cards (leases hand out the
        first free ones), so the specs trade places."""
        order = self._leases.devices if self._leases else []
        return max(engines, key=lambda engine: min(
            (order.index(gpu) for gpu in self.gpus_of(engine) if gpu in order), default=-1))

    @contextmanager
    def room_for(self, engines: int) -> Iterator[None]:
        """Keep at least `engines` running at once inside the block (the two sides of a paired
        A/B test), whatever --llmperf-keep-engines says; the next start after it evicts down."""
        saved = self._capacity
        self._capacity = max(saved, engines)
        try:
            yield
        finally:
            self._capacity = saved

    def check(self, engine: Engine, when: str = DURING_TEST,
              stall: str | None = None) -> EngineDied | None:
        """Has the spec's server died, or did it stall (`stall`: the watchdog's description)? If
        so it is stopped (the next `get` starts a fresh one, unless this happened MAX_DEATHS
        times) and the returned error tells how, in one line."""
        server = self._running.get(engine)
        if server is None:
            return None
        log_path = server.log_path
        if stall is not None:
            # Its state is read before the kill: alive or not, what /health says.
            story = f"{stall}; {server.state()}"
            died: EngineDied = EngineStalled(stall_line(engine, when, story, log_path))
            self._stalled.add(engine)
        else:
            story = server.death()
            if story is None:
                return None
            died = EngineDied(death_line(engine, when, story, log_path))
        self.stop(engine, kill=stall is not None)
        self.deaths[engine] += 1
        restart = self.deaths[engine] < MAX_DEATHS
        if not restart:
            self._failed[engine] = EngineDied(given_up_line(
                engine, self.deaths[engine], when, story, log_path,
                stalled=engine in self._stalled))
        if self.on_death is not None:
            self.on_death(engine, str(died), restart)
        return died

    def stop(self, engine: Engine, kill: bool = False) -> None:
        """Stop one engine (if running; `kill`: at once, without a grace period) and hand its
        GPUs back."""
        server = self._running.pop(engine, None)
        if server is not None:
            server.stop(kill=kill)
        lease = self._held.pop(engine, None)
        if lease is not None:
            lease.release()

    def stop_all(self) -> None:
        """Stop every engine, side by side (a vLLM engine takes about 2 s to wind down on the
        CPU: docs/cpu-engine.md), then the Ray head started for them (a later Ray engine starts
        another)."""
        failed: list[BaseException] = []

        def stop(engine: Engine) -> None:
            try:
                self.stop(engine)
            except BaseException as exc:  # raised below, in this thread, as a lone stop would
                failed.append(exc)

        stopping = [threading.Thread(target=stop, args=(engine,), daemon=True)
                    for engine in list(self._running)]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        if failed:
            raise failed[0]
        if self._placement is not None:
            self._placement.close()


def _start_quietly(server: Server) -> EngineStartError | None:
    """Start `server`; how its start failed, or None."""
    try:
        server.start()
    except EngineStartError as exc:
        return exc
    return None


def _launch_side_by_side(servers: list[Server]) -> dict[int, EngineStartError | None]:
    """Launch every server, then wait for all of them at once; how each start ended, by the
    server's id(). Launched from this thread, which outlives them (EngineServer.launch says
    why that matters). Interrupted (Ctrl-C) while they start, all are stopped before it goes
    on."""
    ended: dict[int, EngineStartError | None] = {}
    try:
        for server in servers:
            try:
                server.launch()
            except EngineStartError as exc:
                ended[id(server)] = exc
        while waiting := [server for server in servers if id(server) not in ended]:
            for server in waiting:
                try:
                    if server.ready():
                        ended[id(server)] = None
                except EngineStartError as exc:
                    ended[id(server)] = exc
            if len(ended) < len(servers):
                time.sleep(HEALTH_POLL_S)
    except BaseException:
        for server in servers:
            server.stop(kill=True)
        raise
    return ended


def refuse_unservable(engine: Engine) -> None:
    """InputError (one line) for a spec its vLLM would start and then lose at its first
    request: a synthetic acceptance pin on a CPU build without it (speculative.py). Asked before
    any running engine is stopped to make room, or any GPU leased, for a start that cannot serve."""
    if problem := cpu_build_problem(engine):
        raise InputError(problem)


def engine_factory(log_dir: Path, startup_timeout_s: float,
                   extra_env: dict[str, str] | None = None, nice: int = 0,
                   separate_control: bool = False,
                   say: Callable[[str], None] | None = None) -> ServerFactory:
    """Servers of each spec's kind (engines/kinds/), logging into `log_dir`. A real-weight Hub
    model's weights are fetched first, before its start's clock (weights.py); `say` shows the
    lines that say so (default: standard error)."""
    fetched: set[tuple] = set()

    def make(engine: Engine, lease_env: dict[str, str]) -> EngineServer:
        fetch_before_start([engine], fetched, say or _to_stderr)
        return EngineServer(engine, log_dir, extra_env={**(extra_env or {}), **lease_env},
                            startup_timeout_s=startup_timeout_s, nice=nice,
                            separate_control=separate_control)

    return make


def _to_stderr(line: str) -> None:
    print(f"pytest-llmperf: {line}", file=sys.stderr, flush=True)

