"""A Hugging Face Hub cache on disk, built from the repo's tiny model, for tests without network.

huggingface_hub has no call that imports local files into its cache, so the layout is written
here as it writes it (https://huggingface.co/docs/huggingface_hub/guides/manage-cache): blobs
named by their content's hash, snapshots/<commit>/<file> symlinks to them, refs/<name> holding a
commit. `add_snapshot` then has huggingface_hub's own `scan_cache_dir` read it back, so a layout
it would not read fails here, not as a puzzling lookup later.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import pytest

from tests.conftest import TINY_LLAMA

REPO_ID = "acme/tiny-llama"
MAIN_COMMIT = hashlib.sha1(b"acme/tiny-llama main").hexdigest()


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def add_snapshot(cache: Path, repo_id: str, files: dict[str, bytes], commit: str,
                 refs: tuple[str, ...] = ("main",), repo_type: str = "model") -> Path:
    """One commit of repository `repo_id` (a "model" or a "dataset") in the cache at `cache`
    (HF_HUB_CACHE), named by `refs` (branches or tags); its snapshot directory."""
    repo = cache / (f"{repo_type}s--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    _check_readable(cache, repo_id, repo_type, commit, set(files))
    return snapshot


def _check_readable(cache: Path, repo_id: str, repo_type: str, commit: str,
                    names: set[str]) -> None:
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(cache)
    assert not info.warnings, info.warnings
    [repo] = [r for r in info.repos if (r.repo_id, r.repo_type) == (repo_id, repo_type)]
    [revision] = [r for r in repo.revisions if r.commit_hash == commit]
    assert {f.file_name for f in revision.files} == names


def use_offline_cache(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HF_HOME=`home` and HF_HUB_OFFLINE=1 for this test and the processes it starts; its hub
    cache directory. huggingface_hub reads its environment once, at import, so its constants
    (already imported by an earlier test, or by vLLM) are set to match."""
    from huggingface_hub import constants

    cache = home / "hub"
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


def tiny_llama_hub(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny model as Hub model `acme/tiny-llama` (main), in an offline cache under `home`;
    the cache directory."""
    cache = use_offline_cache(home, monkeypatch)
    add_snapshot(cache, REPO_ID, files_of(TINY_LLAMA), MAIN_COMMIT)
    return cache


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: a Hub endpoint that refuses connections."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
