"""What the plugin needs to know of pytest-xdist: is this process a worker, and how a worker's
report reaches the controller (the `workeroutput` dict it sends when it finishes)."""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["hand_over", "handed_over", "is_controller", "is_worker", "use_loadgroup"]

KEY = "llmperf"


def is_worker(config: pytest.Config) -> bool:
    """A pytest-xdist worker has `workerinput`; the controller and a plain run do not."""
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """The pytest-xdist controller of `-n N` workers: it measures nothing itself."""
    return bool(getattr(config.option, "numprocesses", None)) and not is_worker(config)


def hand_over(config: pytest.Config, payload: dict[str, Any]) -> None:
    """A worker's report, sent to the controller with the worker's end."""
    config.workeroutput[KEY] = payload


def handed_over(node: Any) -> dict[str, Any] | None:
    """The report a finished worker (`node`, on the controller) handed over, if any."""
    return getattr(node, "workeroutput", {}).get(KEY)


def use_loadgroup(config: pytest.Config) -> None:
    """With `-n N` and no --dist, distribute by group: tests that share an engine go to one
    worker, so each engine starts once per session (pytest-xdist's own default would be
    `load`, which scatters them and starts every engine on every worker)."""
    numprocesses = getattr(config.option, "numprocesses", None)
    if numprocesses and getattr(config.option, "dist", "no") == "no":
        config.option.dist = "loadgroup"
