"""Is a started engine still alive, and if it died, how: told in one line a user can act on.

What follows is told of vLLM; a kind whose server is one process (llama.cpp's) is the same
story with one member. vLLM's server is a process tree: the API server (our child, the group
leader), its EngineCore process and, on GPUs, one worker per rank. What kills an engine (the
kernel's OOM killer, an NCCL error, a driver fault) usually kills one of the children; the API
server then answers 500s for about a second and exits with code 0 (measured on the CPU engine:
SIGKILL of EngineCore, /health 503 after 0.6 s, the server gone after 1.2 s). So the server's own
exit status says little: the process that ended *first* is the news. `ProcessWatch` records the
order in which the tree's processes end, with a pidfd per process (Linux 5.3+): exact, and no
polling.

The exit status of a grandchild is not ours to read (only its parent, the API server, may wait
for it, and vLLM does not log it), so for a child we can say that it ended, not how.
"""

from __future__ import annotations

import os
import re
import select
import signal
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.engines.kinds.vllm import LOG_PREFIX as VLLM_PREFIX
from pytest_llmperf.engines.spec import Engine

LOG_SCAN_LINES = 400  # the errors sit above vLLM's shutdown chatter (~50 lines of leak reports)
TELLING_LINES = 3
LINE_CHARS = 240
_ERROR_WORDS = re.compile(
    r"Error|Exception|Killed|killed|died|unexpected|Fatal|FATAL|out of memory|OOM")
_QUIET_LEVELS = ("DEBUG", "INFO")


@dataclass(frozen=True)
class Member:
    """One process of an engine's tree, named as `ps` shows it (vLLM titles its children
    `VLLM::EngineCore`, `VLLM::Worker_TP0`, ...; SGLang `sglang::scheduler`)."""

    pid: int
    name: str


def group_members(pgid: int) -> list[Member]:
    """Every process in the process group `pgid` (an engine runs in its own session)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv0 = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0", 1)[0].decode(
                errors="replace")
        except OSError:  # it ended while we looked
            continue
        after_name = stat[stat.rindex(")") + 2:].split()
        if int(after_name[2]) != pgid:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        name = "server" if int(entry) == pgid else argv0 if "::" in argv0 else comm
        members.append(Member(int(entry), name))
    return sorted(members, key=lambda m: m.pid)


class ProcessWatch:
    """Records, in order, which processes of an engine's tree have ended."""

    def __init__(self, members: list[Member]) -> None:
        self.ended: list[Member] = []
        self._fds: dict[int, Member] = {}
        for member in members:
            try:
                self._fds[os.pidfd_open(member.pid)] = member
            except (AttributeError, OSError):  # gone already, or no pidfd on this system
                continue
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(target=self._run, name="llmperf-engine-watch",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._fds:
            ready, _, _ = select.select([*self._fds, self._wake_read], [], [])
            if self._wake_read in ready:
                return
            # Ends seen in one wake-up came within microseconds: the server last, since a server
            # ends because its child did far more often than the other way round.
            for fd in sorted(ready, key=lambda fd: self._fds[fd].name == "server"):
                self.ended.append(self._fds.pop(fd))
                os.close(fd)

    def close(self) -> None:
        """Stop watching (before we stop the engine ourselves: that is no death)."""
        os.write(self._wake_write, b"x")
        self._thread.join()
        for fd in [*self._fds, self._wake_read, self._wake_write]:
            os.close(fd)
        self._fds.clear()


# /proc/PID/stat's state letter (proc(5)) in words; a stall line says what each process is doing.
_STATES = {"R": "running", "S": "sleeping", "D": "in uninterruptible wait (D)",
           "T": "stopped (T)", "t": "stopped by a tracer (t)", "Z": "a zombie (Z)",
           "I": "idle", "X": "dead"}


def process_state(pid: int) -> str:
    """A process's scheduling state in words ("stopped (T)" for one held by SIGSTOP)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    letter = stat[stat.rindex(")") + 2:].split()[0]
    return _STATES.get(letter, f"in state {letter}")


def tree_states(pgid: int) -> str:
    """`server sleeping, VLLM::EngineCore pid 123 stopped (T)`: every process of the group."""
    members = group_members(pgid)
    if not members:
        return "no process left"
    return ", ".join(("server" if m.name == "server" else f"{m.name} pid {m.pid}")
                     + f" {process_state(m.pid)}" for m in members)


def exit_status(returncode: int) -> str:
    """Popen's returncode in words: a negative one is the signal that killed the process."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def how_it_died(ended: list[Member], server_returncode: int | None,
                health_status: int | None = None) -> str:
    """The parenthesis of the death line: which process ended first, then what the server did.
    `health_status` is what /health answered when the server was still up."""
    first = ended[0] if ended else None
    server = None if server_returncode is None else f"the server {exit_status(server_returncode)}"
    if first is None or first.name == "server":
        story = server or "the server is up"
    else:
        story = f"{first.name}, pid {first.pid}, ended first" + (f"; then {server}" if server
                                                                 else "")
    if server is None and health_status is not None:
        story += f"; /health answers {health_status}"
    return story


def telling_log_lines(path: Path | None, limit: int = TELLING_LINES,
                      prefix: re.Pattern[str] | None = VLLM_PREFIX) -> list[str]:
    """The last error lines of a log, without the server's line `prefix` (the kind's; vLLM's by
    default), traceback frames or repeats."""
    if path is None:
        return []
    try:
        with open(path, errors="replace") as fh:
            tail = deque(fh, maxlen=LOG_SCAN_LINES)
    except OSError:
        return []
    found: list[str] = []
    for raw in tail:
        line = raw.rstrip()
        found_prefix = prefix.match(line) if prefix else None
        message = line[found_prefix.end():] if found_prefix else line
        level = found_prefix.group("level") if found_prefix else ""
        if not message.strip() or message[0].isspace() or message.startswith("Traceback"):
            continue  # a frame of a traceback: its last line says what went wrong
        if level in _QUIET_LEVELS or line.startswith("INFO:"):
            continue  # vLLM's and uvicorn's info lines ("POST ... 500 Internal Server Error")
        if level in ("ERROR", "CRITICAL") or _ERROR_WORDS.search(message):
            message = message[:LINE_CHARS]
            if message in found:
                found.remove(message)
            found.append(message)
    return found[-limit:]


def shown_path(path: Path | None) -> str:
    """A log path as the user would type it: relative to the working directory when inside it."""
    if path is None:
        return "(no log)"
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def short_name(engine: Engine) -> str:
    """The model's last path part, as the summary's engine column names it."""
    return Path(engine.model).name or engine.model


def death_line(engine: Engine, when: str, story: str, log_path: Path | None) -> str:
    """`engine tiny-llama died during the test (how); last log lines: ...; log: PATH`."""
    return f"engine {short_name(engine)} died {when} {_details(engine, story, log_path)}"


def stall_line(engine: Engine, when: str, story: str, log_path: Path | None) -> str:
    """`engine tiny-llama stalled during the test (no chunk for ...; its state); last log lines:
    ...; log: PATH`."""
    return f"engine {short_name(engine)} stalled {when} {_details(engine, story, log_path)}"


def given_up_line(engine: Engine, deaths: int, when: str, story: str,
                  log_path: Path | None, stalled: bool = False) -> str:
    """What every later test of a spec that died (or stalled) too often fails with."""
    what = "died or stalled" if stalled else "died"
    last = "the last time it stalled" if stalled else "the last time"
    return (f"engine {short_name(engine)} {what} {deaths} times in this session and is not "
            f"started again; {last} {when} {_details(engine, story, log_path)}")


def _details(engine: Engine, story: str, log_path: Path | None) -> str:
    lines = telling_log_lines(log_path, prefix=engine.engine_kind.log_prefix)
    shown = " | ".join(lines) if lines else "(no error in the log)"
    return f"({story}); last log lines: {shown}; log: {shown_path(log_path)}"
