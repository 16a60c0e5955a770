"""The decode roofline's arithmetic on Llama 3.1 8B- and Llama 3 70B-shaped configs (counted by
hand below), and that a CPU run has none."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.metrics import roofline
from pytest_llmperf.metrics.roofline import (
    DecodeLoad,
    ModelBytes,
    NoRoofline,
    Roofline,
    bandwidth,
    decode_load,
    model_bytes,
)

LLAMA_8B = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
            "torch_dtype": "bfloat16", "tie_word_embeddings": False}
LLAMA_70B = {**LLAMA_8B, "hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64,
             "intermediate_size": 28672}

# Per layer of the 8B: q and o 4096 x 4096 each, k and v 4096 x 1024 each (8 KV heads of 128),
# gate, up and down 4096 x 14336 each, two norms of 4096.
ATTENTION_8B = 4096 * 128 * (2 * 32 + 2 * 8)  # 41,943,040
MLP_8B = 3 * 4096 * 14336  # 176,160,768
LM_HEAD_8B = 128256 * 4096  # 525,336,576; the embedding table's rows are looked up, not read
NORMS_8B = 2 * 4096 * 32 + 4096
WEIGHTS_8B = 32 * (ATTENTION_8B + MLP_8B) + NORMS_8B + LM_HEAD_8B  # 7,504,924,672 parameters


def test_llama_8b_bf16():
    assert WEIGHTS_8B == 7_504_924_672
    # KV per token: K and V x 32 layers x 8 heads x 128 x 2 bytes = 128 KiB.
    assert model_bytes(LLAMA_8B) == ModelBytes(2 * WEIGHTS_8B, 131_072, 1)
    assert model_bytes(LLAMA_8B, dtype="float16") == model_bytes(LLAMA_8B)


def test_llama_8b_fp8_keeps_norms_and_lm_head_in_bf16():
    linear = 32 * (ATTENTION_8B + MLP_8B)
    assert model_bytes(LLAMA_8B, quantization="fp8", kv_cache_dtype="fp8") == ModelBytes(
        linear + 2 * (NORMS_8B + LM_HEAD_8B), 65_536, 1)
    assert model_bytes(LLAMA_8B, quantization="fp8").weight_bytes == 8_030_527_488


def test_llama_70b_tp8_splits_weights_and_kv_heads():
    per_layer = 8192 * 128 * (2 * 64 + 2 * 8) + 3 * 8192 * 28672 + 2 * 8192
    weights = 80 * per_layer + 8192 + 128256 * 8192
    assert weights == 69_503_033_344
    # 8 KV heads over 8 GPUs: one per GPU, 2 x 80 x 128 x 2 bytes per token.
    assert model_bytes(LLAMA_70B, tensor_parallel=8) == ModelBytes(2 * weights, 40_960, 8)
    # More GPUs than KV heads: each GPU keeps a whole head (vLLM replicates it).
    assert model_bytes(LLAMA_70B, tensor_parallel=16).kv_bytes_per_token == 40_960


def test_decode_load_from_the_run():
    # 64 requests in 32 s, each decoding for 8.25 - 0.25 = 8 s: 16 decode at once on average;
    # prompts of 936 and outputs of 128 tokens: a decoding request holds 936 + 64 on average.
    values = {"completed": 64, "duration_s": 32.0, "e2el_s.mean": 8.25, "ttft_s.mean": 0.25,
              "prompt_tokens": 64 * 936, "output_tokens": 64 * 128}
    assert decode_load(values) == DecodeLoad(16.0, 1000.0)


def test_the_bound_and_the_fraction():
    load = DecodeLoad(16.0, 1000.0)
    found = Roofline(model_bytes(LLAMA_8B), load, 3.35e12, tpot_s=0.010)
    assert found.kv_bytes_per_step == 16 * 1000 * 131_072
    assert found.bound_s == (2 * WEIGHTS_8B + 16 * 1000 * 131_072) / 3.35e12  # 5.107 ms
    assert found.fraction == pytest.approx(0.5106567565, rel=1e-9)
    tp8 = Roofline(model_bytes(LLAMA_70B, tensor_parallel=8), load, 4.8e12, tpot_s=0.010)
    assert tp8.bound_s == (2 * 69_503_033_344 / 8 + 16 * 1000 * 40_960) / 4.8e12  # 3.756 ms


def test_pipeline_parallel_keeps_the_weights_on_the_path_and_splits_the_kv():
    # Llama 3 70B, TP=4 x PP=2 on H200s: a token still crosses all the weights (over the 4 GPUs
    # of a stage, stage after stage), while each GPU holds the KV of its 40 layers: half.
    load = DecodeLoad(16.0, 1000.0)
    model = model_bytes(LLAMA_70B, tensor_parallel=4)  # 2 KV heads per GPU: 81,920 B a token
    pp2 = Roofline(model, load, 4.8e12, tpot_s=0.010, pipeline_parallel=2)
    assert pp2.kv_bytes_per_step == 16 * 1000 * 81_920 / 2
    assert pp2.bound_s == (2 * 69_503_033_344 / 4 + 16 * 1000 * 81_920 / 2) / 4.8e12  # 7.377 ms
    # Not weights / (TP x PP): that would be the bound of 8 GPUs splitting every layer (TP=8),
    # which reads the same KV per GPU, and a pipeline is never faster per token than that.
    tp8 = Roofline(model_bytes(LLAMA_70B, tensor_parallel=8), load, 4.8e12, tpot_s=0.010)
    assert tp8.kv_bytes_per_step == pp2.kv_bytes_per_step
    assert pp2.bound_s > tp8.bound_s


def test_data_parallel_keeps_the_weights_and_splits_the_batch():
    # 8B on 8 H100s as DP=8 of TP=1: each copy reads all its weights for its 2 of the 16
    # requests decoding at once.
    load = DecodeLoad(16.0, 1000.0)
    dp8 = Roofline(model_bytes(LLAMA_8B), load, 3.35e12, tpot_s=0.010, data_parallel=8)
    assert dp8.kv_bytes_per_step == 2 * 1000 * 131_072
    assert dp8.bound_s == (2 * WEIGHTS_8B + 2 * 1000 * 131_072) / 3.35e12  # 4.559 ms
    one_copy = Roofline(model_bytes(LLAMA_8B), DecodeLoad(2.0, 1000.0), 3.35e12, tpot_s=0.010)
    assert dp8.bound_s == one_copy.bound_s  # the same as one copy with its share of the load
    assert dp8.to_dict()["data_parallel"] == 8 and dp8.to_dict()["pipeline_parallel"] == 1


def test_the_engine_spec_gives_the_layout(tmp_path):
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps(LLAMA_8B))
    values = {"tpot_s.p50": 0.010, "completed": 64, "duration_s": 32.0, "e2el_s.mean": 8.25,
              "ttft_s.mean": 0.25, "prompt_tokens": 64 * 936, "output_tokens": 64 * 128}
    found = roofline.roofline({"model": "llama", "tensor_parallel_size": 2,
                               "pipeline_parallel_size": 2, "data_parallel_size": 2},
                              {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3"},
                              values, root=tmp_path)
    assert (found.model.tensor_parallel, found.pipeline_parallel, found.data_parallel) == (2, 2, 2)
    # 16 decoding over 2 copies, 1000 tokens of context, 4 KV heads of 8 per GPU, half the layers.
    assert found.kv_bytes_per_step == 8 * 1000 * 65_536 / 2
    assert found.bound_s == (2 * WEIGHTS_8B / 2 + 8 * 1000 * 65_536 / 2) / 3.35e12


def test_bandwidths_from_the_datasheets():
    assert bandwidth("h100", "NVIDIA H100 80GB HBM3") == 3.35e12
    assert bandwidth("h100", "NVIDIA H100 NVL") == 3.9e12
    assert bandwidth("h200", "NVIDIA H200") == 4.8e12
    assert bandwidth("a100-80gb", "NVIDIA A100-SXM4-80GB") == 2.039e12
    assert bandwidth("a100-80gb", "NVIDIA A100 80GB PCIe") == 1.935e12
    assert bandwidth("a100-40gb", "NVIDIA A100-SXM4-40GB") == 1.555e12


@pytest.mark.parametrize("hardware, name, reason", [
    ("cpu", "AMD EPYC", roofline.NO_CPU),
    ("h100", "NVIDIA H100 PCIe", "no roofline: the memory bandwidth of NVIDIA H100 PCIe is not "
                                 "in docs/roofline.md's table"),
    ("gpu", "NVIDIA L4", "no roofline: the memory bandwidth of NVIDIA L4 is not in "
                         "docs/roofline.md's table"),
])
def test_no_bandwidth_no_roofline(hardware, name, reason):
    with pytest.raises(NoRoofline) as caught:
        bandwidth(hardware, name)
    assert str(caught.value) == reason


def test_a_cpu_run_has_none():
    values = {"tpot_s.p50": 0.002, "completed": 4, "duration_s": 1.0, "e2el_s.mean": 0.5,
              "ttft_s.mean": 0.1, "prompt_tokens": 64, "output_tokens": 16}
    with pytest.raises(NoRoofline, match="no roofline on CPU"):
        roofline.roofline({"model": "suites/models/tiny-llama"}, {"hardware_class": "cpu"}, values)


def test_from_a_model_directory(tmp_path):
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(
        '{"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, '
        '"num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}')
    values = {"tpot_s.p50": 0.010, "completed": 64, "duration_s": 32.0, "e2el_s.mean": 8.25,
              "ttft_s.mean": 0.25, "prompt_tokens": 64 * 936, "output_tokens": 64 * 128}
    found = roofline.roofline({"model": "llama"}, {"hardware_class": "h100",
                                                   "device_name": "NVIDIA H100 80GB HBM3"},
                              values, root=tmp_path)
    assert found.fraction == pytest.approx(0.5106567565, rel=1e-9)
    with pytest.raises(NoRoofline, match="no config.json for elsewhere"):
        roofline.roofline({"model": "elsewhere"}, {"hardware_class": "h100"}, values,
                          root=tmp_path)


def test_what_the_model_does_not_cover():
    with pytest.raises(NoRoofline, match="mixture-of-experts"):
        model_bytes({**LLAMA_8B, "num_local_experts": 8})
    with pytest.raises(NoRoofline, match="quantization bitsandbytes"):
        model_bytes(LLAMA_8B, quantization="bitsandbytes")
    with pytest.raises(NoRoofline, match="no usable 'vocab_size'"):
        model_bytes({k: v for k, v in LLAMA_8B.items() if k != "vocab_size"})
