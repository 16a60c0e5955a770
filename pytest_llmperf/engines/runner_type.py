"""Whether a vLLM engine will serve its model as a generating or a pooling model, told from its
spec and its model's files before it starts, so that a workload for the other kind fails in one
line instead of in a run of HTTP 404s (vLLM registers /v1/completions and /v1/chat/completions
only for a generating model and /v1/embeddings only for a pooling one:
vllm/entrypoints/launchers/api_server/routers.py in vLLM 0.32).

vLLM 0.32's own rule (`_get_runner_type` and `_get_default_runner_type` in
vllm/config/model.py): `--runner` when given; `--convert embed|classify` means pooling; else
pooling when the model ships sentence-transformers' modules.json (`get_pooling_config` in
vllm/transformers_utils/config.py), else what its model registry says of the architecture, else
the architecture name's suffix (`_SUFFIX_TO_DEFAULTS`). The registry is vLLM's to import, so
here only names whose suffix the registry agrees with are judged; a bare `*Model` (BertModel
pools, LlamaModel generates) and a Hub id (its modules.json is not among the files fetched
before the start: model_files.SMALL_FILES) are left unknown, and nothing is refused for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pytest_llmperf.engines.kinds import DEFAULT
from pytest_llmperf.engines.kinds.base import thaw_pairs
from pytest_llmperf.errors import InputError
from pytest_llmperf.model_files import is_hub_id
from pytest_llmperf.records import request_api

__all__ = ["RunnerType", "check_api", "runner_type"]

RunnerType = Literal["generate", "pooling"]
GENERATE_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "ChatModel", "LMHeadModel")
POOLING_SUFFIXES = ("ForTextEncoding", "EmbeddingModel", "ForSequenceClassification",
                    "ForTokenClassification", "ClassificationModel", "RewardModel",
                    "ForRewardModeling")


def runner_type(model: str, extra_args: dict[str, Any]) -> tuple[RunnerType, str] | None:
    """("generate" or "pooling", why) for a vLLM engine of `model` started with `extra_args`;
    None where it cannot be told without vLLM (see the module)."""
    args = {name.replace("-", "_"): value for name, value in extra_args.items()}
    if args.get("runner") in ("generate", "pooling"):
        return args["runner"], f"runner {args['runner']!r}"
    if args.get("convert") in ("embed", "classify"):
        return "pooling", f"convert {args['convert']!r}"
    if is_hub_id(model):
        return None
    folder = Path(model).expanduser()
    if (folder / "modules.json").is_file():
        return "pooling", "its sentence-transformers modules.json"
    try:
        names = json.loads((folder / "config.json").read_text(encoding="utf-8"))["architectures"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for name in names if isinstance(names, list) else ():
        if str(name).endswith(GENERATE_SUFFIXES):
            return "generate", f"architecture {name}"
        if str(name).endswith(POOLING_SUFFIXES):
            return "pooling", f"architecture {name}"
    return None


def check_api(engine: Any, workload_name: str, api: str) -> None:
    """InputError, one line naming both and the fix, when a workload's `api` is one that
    `engine` will not serve; nothing where that cannot be told."""
    if engine.kind != DEFAULT:
        return
    found = runner_type(engine.model, thaw_pairs(engine.extra_args))
    sent = request_api(api)
    if found is None or (found[0] == "pooling") == sent.pooling:
        return
    runner, why = found
    where = (f"Workload {workload_name!r} sends {sent.path}, but engine model "
             f"{engine.model} is served as a {'pooling' if runner == 'pooling' else 'generating'}"
             f" model ({why})")
    if runner == "generate":
        raise InputError(f"{where}: measure an embedding model (one with sentence-transformers' "
                         "modules.json, as suites/models/tiny-llama-embed has), or start this "
                         "one as one with Engine(extra_args={'runner': 'pooling'})")
    raise InputError(f"{where}, which generates no text: measure it with "
                     "Workload.embeddings(input_tokens=, batch_size=, ...) or "
                     "Workload.rerank(...), or give the test a "
                     "generating model")
