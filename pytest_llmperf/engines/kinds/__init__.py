"""Engine kinds: one module per inference server the plugin starts, behind one protocol
(base.EngineKind). `Engine(kind=...)` names one; vLLM is the default.

A kind is knowledge, not a process: its launch command from a spec, the GET that says it is
ready (and what that GET answers when its engine died), its version's packages, its client
kind (the request fields it takes and the /metrics samples it has: client/server_kind.py), its
log's line prefix, its own argument parser for --llmperf-check-args, the Engine fields it takes,
and whether it has an offline mode. engines/server.py, process.py, health.py,
arg_check.py and interpreter.py ask it; nothing here starts anything or imports a server's
package outside `arg_parser` (which runs in the checking child, engines/arg_check_worker.py).

Adding a kind: one module here with a class like llamacpp.LlamaCppKind and a module-level `KIND`
(found by `_discovered` below), and its tests; or, from another package, an entry point in the
group `pytest_llmperf.engine_kinds` naming such an object (docs/engines.md, "Adding a kind").
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil

from pytest_llmperf.engines.kinds.base import EngineKind
from pytest_llmperf.engines.kinds.vllm import VLLM

__all__ = ["DEFAULT", "ENTRY_POINTS", "KINDS", "EngineKind", "kind_named"]

ENTRY_POINTS = "pytest_llmperf.engine_kinds"


def _discovered() -> dict[str, EngineKind]:
    """vLLM first (the default), then every module of this package that has a `KIND`, then the
    kinds other packages name in ENTRY_POINTS (a name taken already is not replaced)."""
    found: dict[str, EngineKind] = {VLLM.name: VLLM}
    for module in sorted(info.name for info in pkgutil.iter_modules(__path__)):
        kind = getattr(importlib.import_module(f"{__name__}.{module}"), "KIND", None)
        if kind is not None:
            found.setdefault(kind.name, kind)
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        kind = entry.load()
        found.setdefault(kind.name, kind)
    return found


KINDS: dict[str, EngineKind] = _discovered()
DEFAULT = VLLM.name


def kind_named(name: str) -> EngineKind:
    """The kind `Engine(kind=name)` names (KeyError for another name: the spec checks first)."""
    return KINDS[name]
