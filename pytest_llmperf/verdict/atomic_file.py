"""Replacing a file so that a reader sees the old file or the new one, never half of one; and
holding a file's lock while several processes (pytest-xdist workers) read, change and replace
it. Used for baseline files (verdict/baselines.py) and run files (reports/runfile.py)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

__all__ = ["LOCK_TIMEOUT_S", "atomic_write", "locked"]

# A write holds the lock for milliseconds; a minute means a stuck process, not contention.
LOCK_TIMEOUT_S = 60.0


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the FileLock on `<path>.lock` (keep `*.lock` out of git; the lock file is left in
    place on purpose, since deleting a lock file races with the next holder)."""
    with FileLock(os.fspath(path) + ".lock", timeout=LOCK_TIMEOUT_S):
        yield


def atomic_write(path: Path, text: str) -> None:
    # The temp file must be in the same directory: os.replace is atomic only within a filesystem.
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp makes the file 0600; keep the mode of the file being replaced (or 0644).
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
