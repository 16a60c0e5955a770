"""Writing the session's files (run file, Markdown, HTML): a path checked before any measuring,
and a failed write that becomes one line in the summary instead of an error that loses it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["check_writable", "merge_documents", "write_text"]


def merge_documents(documents: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One run file from the workers' ones: the first one's header, everyone's results."""
    documents = [d for d in documents if d]
    if not documents:
        return None
    merged = {**documents[0], "benchmarks": [], "llmperf": {**documents[0]["llmperf"],
                                                            "results": []}}
    for document in documents:
        merged["benchmarks"] += document["benchmarks"]
        merged["llmperf"]["results"] += document["llmperf"]["results"]
    return merged


def check_writable(option: str, given: Path, path: Path) -> None:
    """Refuse, before any measuring, a report path that cannot be written: one line naming the
    option as the user gave it and the fix (ValueError), rather than losing the report after
    hours of benchmarks. `path` is `given` resolved against the rootdir."""
    if path.is_dir():
        raise ValueError(f"{option} {given}: is a directory; give a file path")
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {given}: cannot create a file under {parent}; choose a "
                         "writable path")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{option} {given}: the file is not writable; choose a writable path")


def write_text(what: str, option: str, path: Path, text: str, *, append: bool = False) -> str:
    """Write one report; returns the line the summary shows: where it went, or why not."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if append else "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        return f"{option} {path}: {what} not written ({exc.strerror or exc}); choose a " \
               "writable path"
    return f"{what} {'appended to' if append else 'written to'} {path}"
