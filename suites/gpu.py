"""Engines for the GPU suites: published architectures, random weights, no tokenizer files."""

from pathlib import Path

from pytest_llmperf import Engine

MODELS = Path(__file__).resolve().parent / "models"

# As the Azure study ran Llama 3.1 8B on one H100/H200 (docs/published-numbers.md, Azure study):
# max_num_seqs 1024, max_num_batched_tokens 8192, prefix caching on, gpu_memory_utilization 0.9.
LLAMA_8B = Engine(
    model=str(MODELS / "llama-3.1-8b"),
    load_format="dummy",
    max_model_len=16384,
    max_num_seqs=1024,
    max_num_batched_tokens=8192,
    gpu_memory_utilization=0.9,
    enable_prefix_caching=True,
    extra_args={"skip-tokenizer-init": True},
)
LLAMA_8B_FP8 = LLAMA_8B.replace(quantization="fp8", kv_cache_dtype="fp8")

# The H200 guide's configuration (docs/published-numbers.md, H200 guide): Llama 3 70B, TP=8 on
# 8xH200.
LLAMA_70B_TP8 = Engine(
    model=str(MODELS / "llama-3-70b"),
    load_format="dummy",
    tensor_parallel_size=8,
    max_model_len=8192,
    gpu_memory_utilization=0.9,
    extra_args={"skip-tokenizer-init": True},
)
