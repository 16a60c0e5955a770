"""Engines for the GPU suites: published architectures, random weights, no tokenizer files.

Every setting below is the publication's (docs/published-numbers.md, the section named at each
engine) unless its comment says it is ours. Random weights (`load_format="dummy"`) and
`skip-tokenizer-init`: nothing is downloaded; for dense models with the output length forced,
throughput and latency match real weights (suites/models/README.md).
"""

from pathlib import Path

from pytest_llmperf import Engine

MODELS = Path(__file__).resolve().parent / "models"

# Azure study, engine settings (H100 and H200): Llama 3.1 8B on one GPU, gpu_memory_utilization
# 0.9, max_num_seqs 1024, max_num_batched_tokens 8192, prefix caching on (chunked prefill is on
# by default). max_model_len 16384 is ours: the longest prompt of any GPU test plus its output.
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

# Azure study, FP8: FP8 *weights* (the study served FP8 checkpoints, neuralmagic's and NVIDIA's
# Meta-Llama-3.1-8B-Instruct-FP8, with no KV-cache setting: its KV cache stayed BF16). With
# random weights, vLLM's online FP8 quantization of the BF16 checkpoint gives the same FP8 GEMMs.
LLAMA_8B_FP8_WEIGHTS = LLAMA_8B.replace(quantization="fp8")

# H200 guide, KV-cache quantization: an FP8 KV cache, weights left in BF16.
LLAMA_8B_FP8_KV = LLAMA_8B.replace(kv_cache_dtype="fp8")

# Azure study, eight H100s: the model split over 8 GPUs (TP=8) against a whole copy on each
# (TP=1 x DP=8). The study ran eight separate servers; DP=8 is vLLM's way to put eight copies
# behind one endpoint (an API server process per copy by default), the same 8 GPUs.
LLAMA_8B_TP8 = LLAMA_8B.replace(tensor_parallel_size=8)
LLAMA_8B_DP8 = LLAMA_8B.replace(data_parallel_size=8)

# Azure study, A100 (80 GB and 40 GB): the same settings but max_num_batched_tokens 2048.
LLAMA_8B_A100 = LLAMA_8B.replace(max_num_batched_tokens=2048)

# H200 guide, vLLM deployment: Llama 3 70B in BF16 at TP=8 on 8xH200, gpu_memory_utilization
# 0.90, max_num_seqs 512 (its server command). Its max_model_len of 131072 is beyond this Llama 3
# config's 8192 positions (suites/models/llama-3-70b/config.json): 8192 here.
LLAMA_70B_TP8 = Engine(
    model=str(MODELS / "llama-3-70b"),
    load_format="dummy",
    dtype="bfloat16",
    tensor_parallel_size=8,
    max_model_len=8192,
    max_num_seqs=512,
    gpu_memory_utilization=0.9,
    extra_args={"skip-tokenizer-init": True},
)

# H200 guide, FP8: the same engine with FP8 weights, for the guide's throughput target (its FP8
# figure is TensorRT-LLM's; this is vLLM's FP8).
LLAMA_70B_TP8_FP8 = LLAMA_70B_TP8.replace(quantization="fp8")

# Ours: structured outputs compile each grammar against the tokenizer's vocabulary, so this 8B
# engine reads Llama 3.1's own tokenizer files from the Hub (a few MB; the repository is gated:
# accept Meta's license and set HF_TOKEN on the runner) instead of skipping the tokenizer, and
# its grammar backend is xgrammar with no whitespace between JSON tokens (random weights would
# fill a JSON object with whitespace until max_tokens otherwise: docs/workloads.md).
LLAMA_8B_TOKENIZER = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_8B_STRUCTURED = LLAMA_8B.replace(
    tokenizer=LLAMA_8B_TOKENIZER, extra_args={},
    structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True})

# Ours: images on LLaVA 1.5 7B (llava-hf's conversion, not gated), random weights. vLLM reads its
# config, tokenizer, chat template and image processor from the Hub at start (a few MB; no
# weights with load_format="dummy"); a GPU build has torchvision, so vLLM's own Llava serves it.
LLAVA_7B = Engine(
    model="llava-hf/llava-1.5-7b-hf",
    load_format="dummy",
    max_model_len=4096,
    gpu_memory_utilization=0.9,
)
