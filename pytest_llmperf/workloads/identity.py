"""A workload as baselines, run files and the results store record it: `Workload.to_dict()` with
each file its source reads (`Source.file_fields`: a dataset, a trace, a conversation file, a
profile's dataset) named so that every checkout of the project gives the same identity.

A file inside the project (under the pytest rootdir) is named by its path relative to the
rootdir ("suites/data/prompts.jsonl"): a clone elsewhere (a CI runner, another user's home) then
names it the same, the name stays readable in a mismatch line, and the file's content is
versioned with the suite, so the provenance's commit already pins it.

A file outside the project is named by its content's digest ("sha256:" and the first 16 hex
digits of its SHA-256): its absolute path differs from machine to machine (home directories,
download caches) and says nothing of what it holds, while its content is what the requests are
made of; an edited file then gives another identity. A path that names no readable file is kept
as written (a profile without its dataset file falls back to synthetic prompts: profiles.py).

Recorded identities that hold an absolute path inside the recording checkout still compare
equal: verdict/baselines.py matches them by their tail (docs/baselines.md).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any

from pytest_llmperf.workloads.workload import Workload

__all__ = ["DIGEST_HEX_DIGITS", "DIGEST_PREFIX", "file_identity", "workload_identity"]

DIGEST_PREFIX = "sha256:"
DIGEST_HEX_DIGITS = 16  # 64 bits: no two files a suite reads will collide
_CHUNK_BYTES = 1 << 20


def workload_identity(workload: Workload, rootdir: Path) -> dict[str, Any]:
    """`workload.to_dict()` with every file its source reads named as the module says."""
    return workload.to_dict(name_file=functools.partial(file_identity, rootdir=Path(rootdir)))


def file_identity(path: str, rootdir: Path) -> str:
    """`path` relative to `rootdir` when inside it, else its content's digest, else as given.
    A relative `path` is taken from the working directory, as the workload reads it."""
    absolute = Path(os.path.abspath(path))
    for inside, root in ((absolute, Path(os.path.abspath(rootdir))),
                         (absolute.resolve(), Path(rootdir).resolve())):
        if inside.is_relative_to(root):
            return inside.relative_to(root).as_posix()
    try:
        found = absolute.stat()
        return DIGEST_PREFIX + _digest(str(absolute), found.st_size, found.st_mtime_ns)
    except OSError:  # no such file (or unreadable): nothing to digest
        return path


@functools.lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    """Cached by size and modification time: a dataset of gigabytes is read once a session,
    not once a measurement; an edited file has another mtime and is read again."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            sha.update(chunk)
    return sha.hexdigest()[:DIGEST_HEX_DIGITS]
