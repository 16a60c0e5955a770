"""Engine kinds: one module per inference server the plugin starts, behind one protocol
(base.EngineKind). `Engine(kind=...)` names one; vLLM is the default.

A kind is knowledge, not a process: its launch command from a spec, the GET that says it is
ready (and what that GET answers when its engine died), its version's packages, its client
kind (the request fields it takes and the /metrics samples it has: client/server_kind.py), its
log's line prefix, its own argument parser for --llmperf-check-args, the Engine fields it takes,
and whether it has an offline mode. engines/server.py, process.py, health.py,
arg_check.py and interpreter.py ask it; nothing here starts anything or imports a server's
package outside `arg_parser` (which runs in the checking child, engines/arg_check_worker.py).

Adding a kind: one module here with a class like llamacpp.LlamaCppKind whose instance joins
`KINDS` (base.py: `LLAMACPP = KINDS.register(LlamaCppKind())`), and its tests; or, from another
package, an entry point in the group `pytest_llmperf.engine_kinds` naming such an object
(docs/engines.md, "Adding a kind"). The registry is pytest_llmperf/registry.py's, the one every
kind of thing joins.
"""

from __future__ import annotations

from pytest_llmperf.engines.kinds.base import ENTRY_POINTS, KINDS, EngineKind
from pytest_llmperf.engines.kinds.vllm import VLLM

__all__ = ["DEFAULT", "ENTRY_POINTS", "KINDS", "EngineKind", "kind_named"]

DEFAULT = VLLM.name
KINDS.all()  # every kind found now, at import, as field_rules' error names them all


def kind_named(name: str) -> EngineKind:
    """The kind `Engine(kind=name)` names (KeyError for another name: the spec checks first)."""
    return KINDS[name]
