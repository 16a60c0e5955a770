"""The memory-bandwidth lower bound of a decode step on a GPU, and how close a run came to it
(docs/roofline.md).

A decode step reads every weight the step uses once and the KV cache of every sequence in the
batch; no step can take less than those bytes over the GPU's memory bandwidth:

    bound per step = (weight bytes / TP + KV bytes per step per GPU) / bandwidth per GPU
    KV bytes per step per GPU = batch / DP x mean context x 2 (K and V) x layers / PP
                                x KV heads per GPU x head dim x KV bytes per element
    fraction = bound / measured TPOT p50   (1.0 would be a step at the roofline)

Weight bytes come from the model's config.json (a dense Llama-style decoder: attention, gated
MLP, norms, the LM head; the embedding table only has its looked-up rows read), the dtype, the
quantization and the tensor-parallel size (pipeline and data parallel: see Roofline). The batch
and context are the run's own: the mean number of requests decoding at once (Little's law over
the decode phase) and the mean context a decoding request holds. CPU runs have no roofline (no
bandwidth table for CPUs; see the docs).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import InputError, LlmperfError
from pytest_llmperf.machine.hardware import is_gpu_class
from pytest_llmperf.metrics import gpus
from pytest_llmperf.model_files import model_dir

# Memory bandwidth per GPU, bytes/s, from NVIDIA's datasheets (docs/roofline.md has the links).
# (hardware class, a word the device name must hold, or "" for the class's default, bandwidth)
BANDWIDTHS: tuple[tuple[str, str, float], ...] = (
    ("h100", "NVL", 3.9e12),
    ("h100", "PCIE", math.nan),  # not in the table: no roofline rather than a wrong one
    ("h100", "", 3.35e12),  # H100 SXM
    ("h200", "", 4.8e12),
    ("a100-80gb", "PCIE", 1.935e12),
    ("a100-80gb", "", 2.039e12),  # A100 80GB SXM
    ("a100-40gb", "", 1.555e12),
)
BYTES_PER_DTYPE = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}
FOUR_BIT = ("awq", "gptq", "awq_marlin", "gptq_marlin", "marlin")
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")
FRACTION = "roofline_fraction"  # the reports' name for Roofline.fraction
# The metrics a roofline needs from a run.
INPUTS = ("tpot_s.p50", "completed", "duration_s", "e2el_s.mean", "ttft_s.mean", "prompt_tokens",
          "output_tokens")
NO_CPU = "no roofline on CPU: it is a GPU memory-bandwidth bound (docs/roofline.md)"


class NoRoofline(LlmperfError):
    """Why a run has no roofline; one line."""


def bandwidth(hardware_class: str | None, device_name: str) -> float:
    """The GPU's memory bandwidth in bytes/s; NoRoofline for a CPU or a GPU not in the table."""
    if not is_gpu_class(hardware_class):
        raise NoRoofline(NO_CPU)
    name = device_name.upper()
    for cls, word, value in BANDWIDTHS:
        if cls == hardware_class and word in name:
            if math.isnan(value):
                break
            return value
    raise NoRoofline(f"no roofline: the memory bandwidth of {device_name or hardware_class} is "
                     "not in docs/roofline.md's table")


def _dtype_bytes(dtype: str | None, config: Mapping[str, Any]) -> float:
    name = dtype if dtype not in (None, "auto") else config.get("torch_dtype", "bfloat16")
    if str(name) not in BYTES_PER_DTYPE:
        raise NoRoofline(f"no roofline: dtype {name} has no known size")
    return BYTES_PER_DTYPE[str(name)]


def _linear_bytes(quantization: str | None, config: Mapping[str, Any], dtype_bytes: float) -> float:
    """Bytes per weight of the quantized linear layers (group scales left out)."""
    method = quantization or (config.get("quantization_config") or {}).get("quant_method")
    if method is None:
        return dtype_bytes
    if method.startswith("fp8"):
        return 1
    if method in FOUR_BIT:
        bits = (config.get("quantization_config") or {}).get("bits", 4)
        return bits / 8
    raise NoRoofline(f"no roofline: quantization {method} has no known weight size")


@dataclass(frozen=True)
class ModelBytes:
    """What one decode step of the whole model reads, summed over the tensor-parallel GPUs."""

    weight_bytes: float
    kv_bytes_per_token: float  # per GPU: KV heads are split across them (or replicated)
    tensor_parallel: int


def model_bytes(config: Mapping[str, Any], *, dtype: str | None = None,
                quantization: str | None = None, kv_cache_dtype: str | None = None,
                tensor_parallel: int = 1) -> ModelBytes:
    """Weight bytes a decode step reads and KV bytes per token of context, from config.json."""
    if any(key in config for key in MOE_KEYS):
        raise NoRoofline("no roofline: a mixture-of-experts model reads only its routed experts; "
                         "the dense model of docs/roofline.md does not apply")
    try:
        hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
        heads, inter = int(config["num_attention_heads"]), int(config["intermediate_size"])
        vocab = int(config["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise NoRoofline(f"no roofline: config.json has no usable {exc}") from None
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    element = _dtype_bytes(dtype, config)
    linear = _linear_bytes(quantization, config, element)
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)  # q, k, v, o
    mlp = 3 * hidden * inter  # gate, up, down
    biases = ((heads + 2 * kv_heads) * head_dim + hidden if config.get("attention_bias") else 0) \
        + (2 * inter + hidden if config.get("mlp_bias") else 0)
    norms = 2 * hidden * layers + hidden
    weights = layers * (attention + mlp) * linear + (layers * biases + norms + vocab * hidden) \
        * element  # the LM head stays in the model's dtype, as vLLM's quantizations leave it
    kv_element = 1 if str(kv_cache_dtype or "").startswith("fp8") else element
    kv_heads_per_gpu = math.ceil(kv_heads / tensor_parallel)  # replicated when fewer than TP
    kv = 2 * layers * kv_heads_per_gpu * head_dim * kv_element
    return ModelBytes(weights, kv, tensor_parallel)


@dataclass(frozen=True)
class DecodeLoad:
    """The run's mean decode batch and the mean context of a decoding request."""

    batch: float
    context_tokens: float


def decode_load(values: Mapping[str, float]) -> DecodeLoad:
    """From a run's metrics: requests decoding at once = completions/s x mean decode time
    (Little's law); context = mean prompt + half the mean output (its mean over the decode)."""
    completed = values.get("completed") or 0
    duration = values.get("duration_s") or 0
    decode_s = values.get("e2el_s.mean", math.nan) - values.get("ttft_s.mean", math.nan)
    if completed < 1 or not duration > 0 or not decode_s > 0:
        raise NoRoofline("no roofline: the run has no decode time to measure")
    batch = completed * decode_s / duration
    context = (values.get("prompt_tokens", 0) + values.get("output_tokens", 0) / 2) / completed
    return DecodeLoad(batch, context)


@dataclass(frozen=True)
class Roofline:
    """The bound of one decode step: the time in which every running request gains a token.

    Tensor parallel (in ModelBytes) splits every layer: each GPU reads 1/TP of the weights.

    Pipeline parallel splits the layers into PP stages of 1/PP of them each, and still leaves
    the weights term at weights / TP, not weights / (TP x PP): a token has to pass through every
    stage in turn, so the stages' weight reads lie one after the other on its path. vLLM keeps
    PP micro-batches in flight to keep every stage busy; then each stage reads its 1/PP of the
    weights once per micro-batch, PP times per step: weights / TP again, and the KV of the
    whole batch over its 1/PP of the layers. Fewer micro-batches make a token's path longer
    (its micro-batch, a larger share of the batch, has its KV read on every stage in turn);
    more make each stage read its weights more often than PP times. PP micro-batches is the
    fastest a step can be, so the bound takes weights / TP and KV / PP.

    Data parallel runs DP copies of the model, each on its own TP x PP GPUs, each with its own
    share of the requests: the weights term is unchanged and each copy's GPUs read the KV of
    batch / DP sequences. The run's batch is that of all copies (Little's law over the run); a
    split uneven between copies only raises the mean bound of a request (the sum of squares of
    the shares is smallest when they are equal), so the even split keeps it a lower bound.
    """

    model: ModelBytes
    load: DecodeLoad
    bandwidth: float  # bytes/s per GPU
    tpot_s: float  # the measured TPOT p50
    pipeline_parallel: int = 1
    data_parallel: int = 1

    @property
    def kv_bytes_per_step(self) -> float:
        """Per GPU: its copy's share of the batch, over its stage's layers."""
        batch_per_copy = self.load.batch / self.data_parallel
        return (batch_per_copy * self.load.context_tokens * self.model.kv_bytes_per_token
                / self.pipeline_parallel)

    @property
    def bound_s(self) -> float:
        per_gpu = self.model.weight_bytes / self.model.tensor_parallel + self.kv_bytes_per_step
        return per_gpu / self.bandwidth

    @property
    def fraction(self) -> float:
        return self.bound_s / self.tpot_s if self.tpot_s > 0 else math.nan

    def to_dict(self) -> dict[str, float]:
        """The run file's "roofline" of a result."""
        return {"fraction": self.fraction, "tpot_bound_s": self.bound_s,
                "tpot_s.p50": self.tpot_s, "weight_bytes": self.model.weight_bytes,
                "kv_bytes_per_step_per_gpu": self.kv_bytes_per_step,
                "decode_batch": self.load.batch, "context_tokens": self.load.context_tokens,
                "tensor_parallel": self.model.tensor_parallel,
                "pipeline_parallel": self.pipeline_parallel,
                "data_parallel": self.data_parallel, "bandwidth_bytes_s": self.bandwidth}


@functools.lru_cache(maxsize=32)
def _read_config(path: str) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def model_config(model: str, root: Path | None = None,
                 revision: str | None = None) -> dict[str, Any]:
    """config.json of a local model directory (a relative path is under `root`, where the
    session records it from), or of a Hub id already in the local cache (never a download: a
    report must not wait on the network)."""
    directories = []
    if root is not None and not Path(model).is_absolute():
        directories.append(Path(root) / model)
    try:
        directories.append(model_dir(model, revision, download=False))
    except InputError:  # a Hub id not in the cache
        pass
    for directory in directories:
        config = _read_config(str(directory / "config.json"))
        if isinstance(config, dict):
            return config
    raise NoRoofline(f"no roofline: no config.json for {model} on this machine")


def roofline(engine: Mapping[str, Any], fingerprint: Mapping[str, Any],
             values: Mapping[str, float], root: Path | None = None) -> Roofline:
    """A run's roofline from its engine spec (Engine.to_dict), the machine's fingerprint and
    its metrics; NoRoofline (one line) when there is none."""
    bw = bandwidth(fingerprint.get("hardware_class"), str(fingerprint.get("device_name", "")))
    tpot = values.get("tpot_s.p50", math.nan)
    if not tpot > 0:
        raise NoRoofline("no roofline: the run has no TPOT")
    layout = gpus.parallelism(engine)
    model = model_bytes(model_config(str(engine.get("model", "")), root, engine.get("revision")),
                        dtype=engine.get("dtype"),
                        quantization=engine.get("quantization"),
                        kv_cache_dtype=engine.get("kv_cache_dtype"),
                        tensor_parallel=layout.tensor)
    return Roofline(model, decode_load(values), bw, tpot, pipeline_parallel=layout.pipeline,
                    data_parallel=layout.data)
