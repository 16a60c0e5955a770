"""Who else used the machine while a measurement ran: the CPU time of every process outside this
test session's process trees, the hypervisor's steal time, and the machine's total load, read
from Linux's /proc before and after (proc(5): /proc/stat, /proc/[pid]/stat,
https://man7.org/linux/man-pages/man5/proc.5.html).

"This session's" processes are the descendants of the pytest process that owns the run: the
pytest-xdist controller when this is one of its workers, else this process. Engines the plugin
starts, the client's worker processes and other workers' engines are all its descendants; a
neighbour started anywhere else is not. Kernel threads (children of kthreadd, pid 2) are left
out: they do the network and disk work of our own processes.

Two snapshots per measurement, one /proc read per process each: a few milliseconds, taken outside
the measured window's hot path. Where /proc is not Linux's, there is nothing to read and no
verdict (None).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.machine.disturbance import CpuDisturbance

__all__ = ["Snapshot", "allowed_cores", "cpu_disturbance", "engine_cores", "read_cpu_line",
           "read_proc", "session_pids", "session_root", "take_snapshot"]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_KTHREADD = 2
# A process's CPU time comes from /proc/[pid]/stat, every thread's, and the machine's from
# /proc/stat, both in clock ticks (10 ms at the usual 100 Hz). Over a window of 0.5 s on 2 cores
# those ticks put the busy share within about 2%: no verdict is drawn from a shorter one.
MIN_WINDOW_S = 0.5


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    name: str
    cpu_s: float  # CPU time so far, every thread's (read_proc)
    # When it started, in clock ticks after boot: a pid reused between two snapshots is another
    # process. (Its name is no such sign: pytest-xdist's workers and vLLM's retitle themselves.)
    start_ticks: int = 0


@dataclass(frozen=True)
class Snapshot:
    wall_s: float
    procs: dict[int, Proc]
    busy_ticks: int  # every CPU's non-idle time, steal included
    total_ticks: int
    steal_ticks: int
    cores: int


def read_proc(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # it ended while we looked
        return None
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    # After the name: state, ppid, ..., utime (14th field of the line), stime (15th) and the
    # start time (22nd). utime and stime are every thread's, ended ones included; schedstat's
    # nanoseconds count the main thread alone (0.06 of 2 s for a process whose two threads did
    # the work: tests/unit/machine/test_disturbance.py).
    cpu_s = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return Proc(pid, int(fields[1]), name, cpu_s, int(fields[19]))


def read_cpu_line() -> tuple[int, int, int]:
    """(busy, total, steal) ticks over all CPUs from /proc/stat's first line."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    # guest and guest_nice are already counted in user and nice.
    total = sum(values[:8])
    return total - idle, total, values[7] if len(values) > 7 else 0


def take_snapshot() -> Snapshot | None:
    """Every process's CPU time and the machine's, now; None where /proc cannot tell."""
    try:
        busy, total, steal = read_cpu_line()
        pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except (OSError, ValueError, IndexError):
        return None
    procs = {proc.pid: proc for proc in map(read_proc, pids) if proc is not None}
    return Snapshot(time.monotonic(), procs, busy, total, steal, os.cpu_count() or 1)


def session_root(is_xdist_worker: bool) -> int:
    """The pid whose descendants are this test session's processes."""
    return os.getppid() if is_xdist_worker else os.getpid()


def session_pids(snapshot: Snapshot | None, root: int) -> set[int]:
    """The pids of this session's processes in `snapshot` (`root` and below)."""
    return _ours(snapshot.procs, root) if snapshot is not None else {root}


def _ours(procs: dict[int, Proc], root: int) -> set[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, ()))
    return found


def _same(earlier: Proc | None, later: Proc) -> bool:
    """Is `later` the process `earlier` was (not another one under a reused pid)? By start time
    where both snapshots read it, else by name."""
    if earlier is None:
        return False
    if earlier.start_ticks and later.start_ticks:
        return earlier.start_ticks == later.start_ticks
    return earlier.name == later.name


def engine_cores(snapshot: Snapshot | None, engine_root: int | None) -> set[int]:
    """Every core a thread of the engine's processes (`engine_root` and below) may run on: its
    compute threads' and its control processes'; empty where it cannot be read."""
    if snapshot is None or engine_root is None:
        return set()
    cores: set[int] = set()
    for pid in _ours(snapshot.procs, engine_root) & snapshot.procs.keys():
        try:
            threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:  # it ended while we looked
            continue
        for tid in threads:
            try:
                cores |= os.sched_getaffinity(tid)
            except OSError:
                continue
    return cores


def allowed_cores(pid: int) -> set[int] | None:
    """The cores a process may run on (/proc/[pid]/status, Cpus_allowed_list); None: unknown."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            spec = line.split(":", 1)[1].strip()
            return {core for part in spec.split(",") if part
                    for core in _span(part)}
    return None


def _span(part: str) -> range:
    low, _, high = part.partition("-")
    return range(int(low), int(high or low) + 1)


def cpu_disturbance(before: Snapshot | None, after: Snapshot | None,
                    root: int, engine_root: int | None = None) -> CpuDisturbance | None:
    """What processes outside the session used between the two snapshots, the share of it that
    was allowed on the cores of the CPU engine under `engine_root` (None: the engine computes
    elsewhere), and the machine's load and steal then; None without both snapshots or over less
    than MIN_WINDOW_S."""
    if before is None or after is None or after.wall_s - before.wall_s < MIN_WINDOW_S:
        return None
    wall_s = after.wall_s - before.wall_s
    ours = _ours(after.procs, root) | _ours(before.procs, root)
    used: dict[int, float] = {}
    for pid, proc in after.procs.items():
        if pid in ours or pid == _KTHREADD or proc.ppid == _KTHREADD:
            continue
        earlier = before.procs.get(pid)
        cpu_s = proc.cpu_s - (earlier.cpu_s if _same(earlier, proc) else 0.0)
        if cpu_s > 0:
            used[pid] = cpu_s / wall_s
    top = max(used, key=used.get, default=None)
    total = max(after.total_ticks - before.total_ticks, 1)
    cores = engine_cores(after, engine_root)
    # A process whose allowed cores cannot be read any more ended during the window: counted as
    # allowed everywhere, as nearly every process is.
    on_engine = sum(share for pid, share in used.items()
                    if cores & (allowed_cores(pid) or cores))
    return CpuDisturbance(
        other_cores=sum(used.values()),
        machine_busy_share=(after.busy_ticks - before.busy_ticks) / total,
        steal_share=(after.steal_ticks - before.steal_ticks) / total,
        cores=after.cores,
        top_name=after.procs[top].name if top is not None else None,
        top_pid=top,
        top_cores=used[top] if top is not None else 0.0,
        engine_cores=tuple(sorted(cores)),
        on_engine_cores=on_engine if cores else 0.0,
    )
