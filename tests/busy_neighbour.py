"""A busy neighbour as a shell's job is one: a busy loop whose parent is init, not this test
session, so that the disturbance rules count it (machine/neighbours.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def busy_neighbour(seconds: float = 15.0) -> Iterator[int]:
    """A busy loop outside the session while the block runs (its pid); it stops by itself after
    `seconds` in any case, and is killed when the block ends."""
    spin = f"import time; end = time.time() + {seconds}\nwhile time.time() < end: pass"
    # sh starts the loop in the background and exits: init becomes its parent, as with setsid -f.
    line = f"{sys.executable} -c '{spin}' >/dev/null 2>&1 & echo $!"
    started = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True)
    pid = int(started.stdout.split()[-1])
    try:
        time.sleep(0.2)  # its interpreter up and spinning
        yield pid
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
