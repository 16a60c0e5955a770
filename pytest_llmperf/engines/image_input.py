"""Whether a vLLM engine's model takes images, told from its files before it starts, so that an
images workload for a text-only model fails in one line instead of in a run of HTTP 400s.

vLLM decides by its model registry (`supports_multimodal` of the architecture's class,
vllm/model_executor/models/interfaces.py, vLLM 0.32.0), which is vLLM's to import; here the
files tell: a Hugging Face vision-language checkpoint nests its vision tower's config in
config.json (`vision_config`: LlavaConfig, Qwen2VLConfig, Gemma3Config, ...) and ships its image
processor's `preprocessor_config.json` (what vLLM's processors load through transformers'
AutoImageProcessor). A local folder with neither is a text-only model; a Hub id, whose files
are not read before the start, is left unknown and nothing is refused for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_llmperf.engines.kinds import DEFAULT
from pytest_llmperf.errors import InputError
from pytest_llmperf.model_files import is_hub_id

__all__ = ["check_images", "takes_images"]

IMAGE_PROCESSOR_FILE = "preprocessor_config.json"


def takes_images(model: str) -> bool | None:
    """True when the local model folder `model` is a vision-language model, False when its
    files say it is text-only, None where that cannot be told without vLLM."""
    if is_hub_id(model):
        return None
    folder = Path(model).expanduser()
    if (folder / IMAGE_PROCESSOR_FILE).is_file():
        return True
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return isinstance(config, dict) and "vision_config" in config


def check_images(engine: Any, workload_name: str, images_per_request: int) -> None:
    """InputError, one line naming the workload, the model and the fix, when a workload sends
    images to an engine whose model takes none; nothing where that cannot be told."""
    if images_per_request < 1 or engine.kind != DEFAULT or takes_images(engine.model) is not False:
        return
    raise InputError(
        f"Workload {workload_name!r} sends {images_per_request} image(s) a request, but engine "
        f"model {engine.model} is not a vision-language model (its config.json has no "
        f"vision_config and it ships no {IMAGE_PROCESSOR_FILE}): give the test a model that "
        "takes images (suites/models/tiny-llava, made by scripts/make_tiny_llava_model.py), or "
        "send text only with Workload.fixed(..., api='chat')")
