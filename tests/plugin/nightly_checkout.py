"""A checkout folder for `llmperf nightly` plugin tests: the current directory, no CI job in the
environment (the headline links none, the reports go to no step summary), and the path of a
SQLite store outside it."""

from __future__ import annotations

from pathlib import Path

CI_VARIABLES = ("GITHUB_RUN_ID", "GITHUB_STEP_SUMMARY", "CI_JOB_URL", "BUILD_URL")


def checkout(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """(the checkout folder, now the current directory; the store's path)."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    monkeypatch.chdir(folder)
    for name in CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    store = tmp_path / "store" / "history.sqlite"
    store.parent.mkdir()
    return folder, store
