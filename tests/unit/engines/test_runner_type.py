"""Whether a vLLM engine generates or pools, told before it starts (engines/runner_type.py), and
the one line for a workload the engine's model will not serve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines.runner_type import check_api, runner_type
from pytest_llmperf.errors import InputError

MODELS = Path(__file__).resolve().parents[3] / "suites" / "models"
GENERATING = str(MODELS / "tiny-llama")
POOLING = str(MODELS / "tiny-llama-embed")


def model(tmp_path: Path, architecture: str) -> str:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    return str(tmp_path)


@pytest.mark.parametrize("architecture, expected", [
    ("LlamaForCausalLM", ("generate", "architecture LlamaForCausalLM")),
    ("Qwen2VLForConditionalGeneration", ("generate",
                                         "architecture Qwen2VLForConditionalGeneration")),
    ("Qwen2ForSequenceClassification", ("pooling",
                                        "architecture Qwen2ForSequenceClassification")),
    ("BertModel", None),  # vLLM's registry pools it, and generates with LlamaModel: unknown
])
def test_an_architecture_is_judged_only_where_its_suffix_decides(tmp_path, architecture,
                                                                   expected):
    assert runner_type(model(tmp_path, architecture), {}) == expected


def test_sentence_transformers_modules_and_flags_decide_first(tmp_path):
    assert runner_type(POOLING, {}) == ("pooling", "its sentence-transformers modules.json")
    assert runner_type(GENERATING, {"runner": "pooling"}) == ("pooling", "runner 'pooling'")
    assert runner_type(GENERATING, {"convert": "embed"}) == ("pooling", "convert 'embed'")
    assert runner_type(POOLING, {"runner": "generate"}) == ("generate", "runner 'generate'")
    assert runner_type(str(tmp_path), {}) is None  # no config.json
    assert runner_type("Qwen/Qwen3-Embedding-0.6B", {}) is None  # a Hub id's modules.json


def test_an_embeddings_workload_on_a_generating_model_is_one_line():
    with pytest.raises(InputError) as caught:
        check_api(Engine(model=GENERATING), "embed-8x64in", "embeddings")
    assert str(caught.value) == (
        f"Workload 'embed-8x64in' sends /v1/embeddings, but engine model {GENERATING} is served "
        "as a generating model (architecture LlamaForCausalLM): measure an embedding model "
        "(one with sentence-transformers' modules.json, as suites/models/tiny-llama-embed has), "
        "or start this one as one with Engine(extra_args={'runner': 'pooling'})")


@pytest.mark.parametrize("api, path", [("completions", "/v1/completions"),
                                       ("chat", "/v1/chat/completions")])
def test_a_generating_workload_on_a_pooling_model_is_one_line(api, path):
    with pytest.raises(InputError) as caught:
        check_api(Engine(model=POOLING), "fixed-32in-8out", api)
    assert str(caught.value) == (
        f"Workload 'fixed-32in-8out' sends {path}, but engine model {POOLING} is served as a "
        "pooling model (its sentence-transformers modules.json), which generates no text: "
        "measure it with Workload.embeddings(input_tokens=, batch_size=, ...) or "
        "Workload.rerank(...), or give the test a generating model")


def test_a_rerank_workload_on_a_generating_model_is_one_line(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    with pytest.raises(InputError) as caught:
        check_api(Engine(model=str(tmp_path)), "rerank-4x32in", "rerank")
    assert str(caught.value).startswith(
        f"Workload 'rerank-4x32in' sends /v1/rerank, but engine model {tmp_path} is served as a "
        "generating model (architecture LlamaForCausalLM): measure an embedding model")


def test_what_the_model_serves_and_other_kinds_pass():
    check_api(Engine(model=POOLING), "embed", "embeddings")
    check_api(Engine(model=POOLING), "rerank", "rerank")
    check_api(Engine(model=GENERATING), "fixed", "completions")
    check_api(Engine(model=GENERATING, extra_args={"runner": "pooling"}), "embed", "embeddings")
    check_api(Engine(model=GENERATING, kind="sglang"), "embed", "embeddings")  # vLLM's rule only
