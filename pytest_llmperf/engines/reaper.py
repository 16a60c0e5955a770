"""A reaper per engine process group: the group ends when the test process does, however it ends.

PR_SET_PDEATHSIG (process.py) sends the engine's first process SIGTERM when pytest dies. That is
a request, not an end: vLLM's API server installs a SIGTERM handler of its own, and while its
engine is still starting it does not stop on it. Measured: a pytest killed with SIGKILL 180 s
into a start slowed 2x (scripts/rehearse --slower 2) left the API server, its engine core and
worker running, reparented to init, for the 40 minutes until someone noticed; the same SIGTERM
once the server was up stopped all three within 8 s. On a GPU runner that is a card held until
the machine is rebooted.

So each spawned group gets a reaper: a small Python process in a session of its own that holds
the read end of a pipe whose write end only the test process holds. The pipe reads EOF when the
test process closes it (the group was stopped: `release`) or dies (any way, SIGKILL included).
Then the reaper sends the group SIGTERM and SIGCONT, and SIGKILL after GRACE_S if anything of it
is left, the same sequence stop_group uses, and exits. A group already gone ends it at once.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["GRACE_S", "release", "watch"]

GRACE_S = 15.0  # as process.STOP_TIMEOUT_S: vLLM on CPU stops in ~2 s once it serves

# The reaper itself: argv = [group, fd, grace]. No import of this package: it must start in
# milliseconds and outlive everything else.
_REAPER = """
import os, signal, sys, time
group, fd, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
signal.signal(signal.SIGINT, signal.SIG_IGN)   # a Ctrl-C to the terminal is pytest's to handle
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while os.read(fd, 4096):
    pass

def send(sig):
    try:
        os.killpg(group, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False

if send(signal.SIGTERM):
    send(signal.SIGCONT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and send(0):
        time.sleep(0.2)
    send(signal.SIGKILL)
"""

# pid of a group's first process -> the write end this process holds for its reaper, and the
# reaper (kept so it is waited for, not left a zombie).
_held: dict[int, tuple[int, subprocess.Popen]] = {}


def watch(group: int, grace_s: float | None = None) -> None:
    """Start the reaper of process group `group` (the pid of its session leader); `grace_s`
    between its SIGTERM and SIGKILL (None: GRACE_S)."""
    grace_s = GRACE_S if grace_s is None else grace_s
    read_end, write_end = os.pipe()  # both close-on-exec: no engine inherits the write end
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _REAPER, str(group), str(read_end), str(grace_s)],
            pass_fds=(read_end,), start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:  # no reaper: PR_SET_PDEATHSIG and the session teardown still stop it
        os.close(write_end)
        return
    finally:
        os.close(read_end)
    _held[group] = (write_end, process)


def release(group: int) -> None:
    """The group was stopped here: its reaper finds it gone and exits."""
    held = _held.pop(group, None)
    if held is None:
        return
    write_end, process = held
    os.close(write_end)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - it is waiting out a straggler
        pass
