"""Engine kinds: one module per inference server the plugin starts, behind one protocol
(base.EngineKind). `Engine(kind=...)` names one; vLLM is the default.

A kind is knowledge, not a process: its launch command from a spec, the GET that says it is
ready (and what that GET answers when its engine died), its version's packages, its /metrics
prefixes, its log's line prefix, its own argument parser for --llmperf-check-args, the Engine
fields it takes, and whether it has an offline mode. engines/server.py, process.py, health.py,
arg_check.py and interpreter.py ask it; nothing here starts anything or imports a server's
package outside `arg_parser` (which runs in the checking child).

Adding a kind: one module here with a class like llamacpp.LlamaCppKind, added to KINDS below,
and its tests (docs/engines.md, "Adding a kind").
"""

from __future__ import annotations

from pytest_llmperf.engines.kinds.base import EngineKind
from pytest_llmperf.engines.kinds.llamacpp import LLAMACPP
from pytest_llmperf.engines.kinds.sglang import SGLANG
from pytest_llmperf.engines.kinds.trtllm import TRTLLM
from pytest_llmperf.engines.kinds.vllm import VLLM

__all__ = ["DEFAULT", "KINDS", "EngineKind", "kind_named"]

KINDS: dict[str, EngineKind] = {kind.name: kind for kind in (VLLM, LLAMACPP, SGLANG, TRTLLM)}
DEFAULT = VLLM.name


def kind_named(name: str) -> EngineKind:
    """The kind `Engine(kind=name)` names (KeyError for another name: the spec checks first)."""
    return KINDS[name]
