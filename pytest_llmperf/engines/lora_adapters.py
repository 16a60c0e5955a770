"""LoRA adapters: random ones made for a model's architecture, and the checks an Engine's
`lora_modules` get before its engine starts.

An adapter is PEFT's file layout, what vLLM's `--lora-modules name=path` loads
(vllm/lora/peft_helper.py reads adapter_config.json, vllm/lora/lora_model.py the tensors):
`adapter_config.json` (`r`, `lora_alpha`, `target_modules`, `base_model_name_or_path`) and
`adapter_model.safetensors`, one `lora_A` (rank x in) and one `lora_B` (out x rank) per target
module and layer, named `base_model.model.model.layers.<i>.<self_attn|mlp>.<module>.lora_*.weight`
(https://huggingface.co/docs/peft/developer_guides/checkpoint). `write_random_adapter` makes one
from a model's config.json alone, as scripts/make_tiny_model.py makes the model: small random
weights, so serving cost (the punica kernels, the adapter's load and swap) is real and nothing is
downloaded. The safetensors file is written and read here by its published layout (an 8-byte
little-endian header length, a JSON header, the raw tensors:
https://github.com/huggingface/safetensors#format), so no tensor library is imported.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_llmperf.engines.errors import EngineStartError
from pytest_llmperf.engines.field_rules import LORA_RANKS
from pytest_llmperf.errors import InputError
from pytest_llmperf.model_files import is_hub_id, model_dir

__all__ = ["AdapterShape", "adapter_problem", "check_adapters", "module_features",
           "read_adapter", "write_random_adapter"]

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
DEFAULT_TARGETS = ("q_proj", "v_proj")
# vLLM's own default when --max-lora-rank is not given (LoRAConfig.max_lora_rank in
# vllm/config/lora.py, 0.32.0).
VLLM_DEFAULT_MAX_RANK = 16
_GROUP = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn",
          "o_proj": "self_attn", "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


@dataclass(frozen=True)
class AdapterShape:
    """What an adapter on disk says of itself: its rank, the model it names as its base, and
    the (in, out) features of each target module it adapts."""

    rank: int
    base_model: str | None
    features: dict[str, tuple[int, int]]  # module ("q_proj") -> (in, out)


def module_features(config: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """(in, out) features of each Llama-style projection of the model whose config.json is
    `config` (transformers' LlamaConfig names)."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    kv = int(config.get("num_key_value_heads") or heads) * head_dim
    inter = int(config["intermediate_size"])
    return {"q_proj": (hidden, heads * head_dim), "k_proj": (hidden, kv), "v_proj": (hidden, kv),
            "o_proj": (heads * head_dim, hidden), "gate_proj": (hidden, inter),
            "up_proj": (hidden, inter), "down_proj": (inter, hidden)}


def write_random_adapter(model_dir: str | Path, out_dir: str | Path, *, rank: int = 8,
                         target_modules: Iterable[str] = DEFAULT_TARGETS, seed: int = 0,
                         base_model: str | None = None) -> Path:
    """A LoRA adapter of rank `rank` for the model in `model_dir` (its config.json), with
    float16 weights drawn from `seed`, written to `out_dir` (created). The same arguments give
    the same bytes. `base_model`: what adapter_config.json names as its base (default: the
    model directory's name)."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    features = module_features(config)
    targets = tuple(target_modules)
    unknown = [m for m in targets if m not in features]
    if unknown or rank < 1:
        raise InputError(f"write_random_adapter: rank must be >= 1 and target_modules among "
                         f"{', '.join(features)}; got rank {rank}, {', '.join(unknown) or '-'}")
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {}
    for layer in range(int(config["num_hidden_layers"])):
        for module in targets:
            fan_in, fan_out = features[module]
            name = f"base_model.model.model.layers.{layer}.{_GROUP[module]}.{module}"
            tensors[f"{name}.lora_A.weight"] = _small(rng, (rank, fan_in))
            tensors[f"{name}.lora_B.weight"] = _small(rng, (fan_out, rank))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    adapter_config = {
        "base_model_name_or_path": base_model or Path(model_dir).name, "bias": "none",
        "fan_in_fan_out": False, "inference_mode": True, "lora_alpha": 2 * rank,
        "lora_dropout": 0.0, "peft_type": "LORA", "r": rank, "target_modules": list(targets),
        "task_type": "CAUSAL_LM"}
    (out / CONFIG).write_text(json.dumps(adapter_config, indent=2, sort_keys=True) + "\n")
    (out / WEIGHTS).write_bytes(_safetensors(tensors))
    return out


def _small(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    # Small: the adapted layer's output moves a little, as a trained adapter's does.
    return (rng.standard_normal(shape) * 0.01).astype(np.float16)


def _safetensors(tensors: Mapping[str, np.ndarray]) -> bytes:
    """The safetensors file of float16 `tensors`, in name order."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset, blobs = 0, []
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name]).astype("<f2").tobytes()
        header[name] = {"dtype": "F16", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header to 8 bytes with spaces
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def read_adapter(path: str | Path) -> AdapterShape:
    """The rank, base and module features of the adapter in directory `path`: its
    adapter_config.json and its safetensors header (the tensors are not read)."""
    folder = Path(path)
    config = json.loads((folder / CONFIG).read_text())
    with open(folder / WEIGHTS, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    features: dict[str, tuple[int, int]] = {}
    for name, entry in header.items():
        parts = name.split(".")
        if name == "__metadata__" or len(parts) < 3 or parts[-2] not in ("lora_A", "lora_B"):
            continue
        module, shape = parts[-3], entry["shape"]
        fan_in, fan_out = features.get(module, (0, 0))
        features[module] = ((shape[1], fan_out) if parts[-2] == "lora_A"
                            else (fan_in, shape[0]))
    return AdapterShape(int(config["r"]), config.get("base_model_name_or_path"), features)


def adapter_problem(name: str, path: str, model_config: Mapping[str, Any] | None,
                    max_lora_rank: int | None) -> str | None:
    """Why vLLM could not serve the adapter `name` at `path`, in a few words with the fix;
    None when it could, or when `path` is a Hub id (vLLM fetches it; nothing local to read).
    `model_config`: the served model's config.json (None: not readable here, so the shapes
    are not compared)."""
    folder = Path(path).expanduser()
    if not folder.exists():
        if is_hub_id(path):
            return None
        return (f"LoRA adapter {name!r} at {path} does not exist; point lora_modules[{name!r}] "
                f"at a PEFT adapter directory ({CONFIG} and {WEIGHTS})")
    if not ((folder / CONFIG).is_file() and (folder / WEIGHTS).is_file()):
        return (f"LoRA adapter {name!r} at {path} has no {CONFIG} and {WEIGHTS}; point "
                f"lora_modules[{name!r}] at a PEFT adapter directory")
    shape = read_adapter(folder)
    limit = max_lora_rank or VLLM_DEFAULT_MAX_RANK
    if shape.rank > limit:
        said = "max_lora_rank" if max_lora_rank else "vLLM's default max_lora_rank"
        return (f"LoRA adapter {name!r} has rank {shape.rank}, above {said} {limit}; set "
                f"Engine(max_lora_rank=...) to {_rank_at_least(shape.rank)} or more")
    if model_config is None:
        return None
    ours = module_features(model_config)
    for module, features in shape.features.items():
        if module in ours and features != ours[module]:
            return (f"LoRA adapter {name!r} was made for another model (its base: "
                    f"{shape.base_model!r}): its {module} maps {features[0]} -> {features[1]} "
                    f"features, the served model's {ours[module][0]} -> {ours[module][1]}; "
                    "serve it on its base model, or use an adapter made for this one")
    return None


def _rank_at_least(rank: int) -> int:
    return next((r for r in LORA_RANKS if r >= rank), LORA_RANKS[-1])


def check_adapters(engine: Any) -> None:
    """EngineStartError, one line, for the first of `engine`'s lora_modules vLLM could not
    serve (adapter_problem), before the engine starts: vLLM finds it only after loading the
    model, and reports it as its API server's failure."""
    if not engine.lora_modules:
        return
    config = _model_config(engine)
    for name, path in engine.lora_modules:
        problem = adapter_problem(name, path, config, engine.max_lora_rank)
        if problem:
            raise EngineStartError(f"{engine.engine_kind.noun} {engine.label()!r}: {problem}")


def _model_config(engine: Any) -> dict[str, Any] | None:
    """The served model's config.json as a dict; None where it cannot be read here (a Hub
    model not in the cache, a config that is not a Llama-style model's)."""
    try:
        config = json.loads((model_dir(engine.model, engine.revision, download=False)
                             / "config.json").read_text())
        module_features(config)
    except (InputError, OSError, ValueError, KeyError, TypeError):
        return None
    return config
