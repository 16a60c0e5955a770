"""The mock server (mockserver.py) in processes of its own for `llmperf bench-client`, and the
bounded exchanges with them: every wait on a server process ends, and a process that fails or
goes silent is named in one line (`BenchError`)."""

from __future__ import annotations

import multiprocessing
import os
import queue
import shutil
import tempfile
import time

import httpx

from pytest_llmperf.clientbench import mockserver

__all__ = ["BenchError", "MockProcess"]

# How long a mock server process may take to answer "truth" or "reset" (all of them together),
# and to report its port once started. Each answers at once when healthy: a process that takes
# longer is stuck or gone, and the run ends with a line that names it, not a hang.
CONTROL_TIMEOUT_S = 30
READY_TIMEOUT_S = 60


class BenchError(RuntimeError):
    """A load that could not be measured: `line(at)` says what failed, at which load, and why,
    in one line."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")
        self.what, self.why = what, why

    def line(self, at: str) -> str:
        return f"{self.what} at {at}: {self.why}"



class MockProcess:
    """The mock server in `procs` processes of its own, sharing one port (SO_REUSEPORT: the
    kernel spreads the connections over them), each pinned to its core of `cpus` if given. Each
    process counts the chunks it wrote in a shared value; their truths are merged.

    Each process answers "truth" and "reset" on a pipe of its own (mockserver._answer), within
    `control_timeout_s` or a BenchError names it. `entry` is the processes' target
    (mockserver.serve; a test gives one that misbehaves)."""

    def __init__(self, interval_s: float, cpus: list[int] | None = None, procs: int = 1, *,
                 entry=None, control_timeout_s: float = CONTROL_TIMEOUT_S,
                 require_headers: dict[str, str] | None = None) -> None:
        if cpus is not None and len(cpus) != procs:
            raise ValueError(f"{procs} mock server processes need {procs} cores, got {cpus}")
        self.interval_s = interval_s
        self.control_timeout_s = control_timeout_s
        # mockserver.serve's require_headers: a deployment behind an API key
        self.require_headers = require_headers
        self.counters, self.controls, self.processes = [], [], []
        # The truths come through files here (why: mockserver._answer); gone with stop().
        self._truth_dir = tempfile.mkdtemp(prefix="llmperf-mock-truth-")
        try:
            self.url = self._start(entry or mockserver.serve, cpus, procs)
        except BaseException:
            self.stop()  # the processes already started go too
            raise

    def _start(self, entry, cpus: list[int] | None, procs: int) -> str:

        ctx = multiprocessing.get_context("spawn")
        port = 0  # the first process picks it, the others share it
        for i in range(procs):
            counter = ctx.Value("q", 0, lock=False)
            control, theirs = ctx.Pipe()
            # An answer is one short write (mockserver._answer), whole once poll sees any of it;
            # non-blocking, a read that finds only part of one (a broken server) fails at once
            # instead of waiting for the rest for ever.
            os.set_blocking(control.fileno(), False)
            ready = ctx.Queue()
            process = ctx.Process(
                target=entry, args=(self.interval_s,),
                kwargs={"port": port, "chunk_counter": counter, "ready": ready.put,
                        "cpu": cpus[i] if cpus else None, "control": theirs,
                        "reuse_port": procs > 1,
                        **({"require_headers": self.require_headers}
                           if self.require_headers else {})},
                daemon=True)
            process.start()
            theirs.close()  # the child has its own copy: when it dies, our end reads the close
            self.counters.append(counter)
            self.controls.append(control)
            self.processes.append(process)
            port = self._port_of(i, ready)
        return f"http://127.0.0.1:{port}"

    def _port_of(self, i: int, ready) -> int:
        """The port process `i` listens on, once it says so; a BenchError if it dies first or
        says nothing within READY_TIMEOUT_S."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                return ready.get(timeout=0.2)
            except queue.Empty:
                if not self.processes[i].is_alive():
                    break
        raise self._failure(i, "ready", READY_TIMEOUT_S, self._why_silent(i))

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def chunks(self) -> int:
        """The chunks written so far, by all the processes."""
        return sum(counter.value for counter in self.counters)

    def _truth_path(self, i: int) -> str:
        return os.path.join(self._truth_dir, f"truth-{i + 1}.pickle")

    def _ask(self, request: str) -> None:
        """Send `request` to every process, then wait for each answer: control_timeout_s for
        all of them together."""
        for i, control in enumerate(self.controls):
            try:
                control.send((request, self._truth_path(i)))
            except OSError as exc:  # its end is closed: it is gone
                why = self._why_silent(i, f"{type(exc).__name__}: {exc}", wait_s=1.0)
                raise self._failure(i, request, self.control_timeout_s, why) from exc
        deadline = time.monotonic() + self.control_timeout_s
        for i in range(len(self.controls)):
            self._await_answer(i, request, deadline)

    def _await_answer(self, i: int, request: str, deadline: float) -> None:
        control = self.controls[i]
        if not control.poll(max(0.0, deadline - time.monotonic())):
            raise self._failure(i, request, self.control_timeout_s, self._why_silent(i))
        try:
            status, detail = control.recv()
        except BlockingIOError as exc:
            raise self._failure(i, request, self.control_timeout_s,
                                self._why_silent(i, "only part of its answer came")) from exc
        except (EOFError, OSError) as exc:  # the pipe closed: the process is gone or going
            raise self._failure(i, request, self.control_timeout_s,
                                self._why_silent(i, wait_s=1.0)) from exc
        if status != "ok":
            raise self._failure(i, request, self.control_timeout_s, f"it failed: {detail}")

    def _failure(self, i: int, request: str, within_s: float, why: str) -> BenchError:
        return BenchError(f"mock server process {i + 1} (pid {self.processes[i].pid}) did not "
                          f"answer {request!r} within {within_s:g} s", why)

    def _why_silent(self, i: int, seen: str = "", wait_s: float = 0.0) -> str:
        """Why process `i` did not answer: how it ended, or that it runs but says nothing;
        after `seen`, what the pipe showed, if anything. `wait_s`: for one that is exiting."""
        process = self.processes[i]
        process.join(wait_s)
        code = process.exitcode
        if code is None:
            state = "it is still running but silent"
        elif code < 0:
            state = f"it was killed by signal {-code}"
        else:
            state = f"it exited with code {code}"
        return f"{seen}; {state}" if seen else state

    def reset(self) -> None:
        self._ask("reset")

    def set_faults(self, faults: list[str | None]) -> None:
        """What each of the next streamed requests gets (mockserver.FAULTS; None: a stream)."""
        if len(self.processes) > 1:
            raise ValueError("mock faults need one server process: with several, the kernel "
                             "decides which one takes the next request")
        httpx.post(self.url + "/mock/faults", json=faults).raise_for_status()

    def truth(self) -> dict:
        self._ask("truth")
        truths = [mockserver.read_truth(self._truth_path(i)) for i in range(len(self.processes))]
        return mockserver.merged_truth(truths, self.interval_s)

    def stop(self) -> None:
        """Kill every process and wait for it (5 s each at most); close the pipes; remove the
        truths' folder."""
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.join(5)
        for control in self.controls:
            control.close()
        shutil.rmtree(self._truth_dir, ignore_errors=True)
