"""GPU leases: an engine that needs n GPUs holds n of them, exclusively, for as long as it runs.

One lock file per GPU in a directory every pytest process on the machine shares, so pytest-xdist
workers (and two pytest sessions side by side) never put two engines on one GPU. A lease is taken
all at once or not at all: holding some GPUs while waiting for the rest is how two TP=4 engines
deadlock on 8 GPUs.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from pytest_llmperf.engines.errors import EngineError

LEASE_TIMEOUT_S = 3600.0  # a TP=8 test may wait for every other engine on the node to finish
LEASE_POLL_S = 0.5


def default_lease_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"pytest-llmperf-gpu-leases-{os.getuid()}"


def visible_gpus(count: int, environ: dict[str, str] | None = None) -> list[str]:
    """The GPU ids this process may use, as CUDA_VISIBLE_DEVICES spells them."""
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [part.strip() for part in visible.split(",") if part.strip()][:count]
    return [str(index) for index in range(count)]


class LeaseTimeout(EngineError):
    """Waited too long for GPUs; the message says how many and what to try. An EngineError, so
    the test that waited fails with this line instead of a traceback."""


@dataclass
class Lease:
    devices: list[str]
    _locks: list[FileLock] = field(default_factory=list, repr=False)

    @property
    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.devices)}

    def release(self) -> None:
        while self._locks:
            self._locks.pop().release()


class GpuLeases:
    def __init__(self, devices: list[str], lease_dir: Path | None = None,
                 timeout_s: float = LEASE_TIMEOUT_S) -> None:
        self.devices = devices
        self.lease_dir = lease_dir or default_lease_dir()
        self.timeout_s = timeout_s

    def acquire(self, n: int) -> Lease:
        """n GPUs, waiting until that many are free at once (or LeaseTimeout)."""
        if n > len(self.devices):
            raise LeaseTimeout(f"an engine needs {n} GPUs; this process sees "
                               f"{len(self.devices)} ({','.join(self.devices) or 'none'})")
        self.lease_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.timeout_s
        while True:
            lease = self._try(n)
            if lease is not None:
                return lease
            if time.monotonic() > deadline:
                raise LeaseTimeout(
                    f"waited {self.timeout_s:.0f} s for {n} free GPUs of "
                    f"{','.join(self.devices)}; other engines hold them (lock files in "
                    f"{self.lease_dir}); run fewer pytest-xdist workers (-n) or none (-n0)")
            time.sleep(LEASE_POLL_S)

    def _try(self, n: int) -> Lease | None:
        lease = Lease(devices=[])
        for device in self.devices:
            lock = FileLock(self.lease_dir / f"gpu-{device}.lock")
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            lease.devices.append(device)
            lease._locks.append(lock)
            if len(lease.devices) == n:
                return lease
        lease.release()  # all or nothing: never hold some while waiting for the rest
        return None
