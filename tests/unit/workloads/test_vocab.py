"""Prompt generation for models shipped as a bare architecture config."""

import numpy as np
import pytest

from pytest_llmperf import Workload
from pytest_llmperf.workloads.vocab import vocab_from_config
from tests.conftest import REPO

MODELS = REPO / "suites" / "models"


def test_vocabulary_and_special_ids_come_from_config_json():
    vocab = vocab_from_config(MODELS / "llama-3.1-8b")
    assert vocab.vocab_size == 128256
    assert vocab.special_ids == frozenset({128000, 128001, 128008, 128009})


def test_token_id_workloads_build_without_a_tokenizer():
    vocab = vocab_from_config(MODELS / "llama-3-70b")
    requests, warmup = Workload.fixed(input_tokens=512, output_tokens=64, num_requests=8,
                                      concurrency=4, warmup_requests=2).build(vocab)
    assert [len(r.prompt) for r in requests + warmup] == [512] * 10
    ids = np.array([t for r in requests for t in r.prompt])
    assert ids.max() < 128256 and not set(ids.tolist()) & vocab.special_ids


def test_text_prompts_need_a_real_tokenizer():
    vocab = vocab_from_config(MODELS / "llama-3-70b")
    workload = Workload.fixed(input_tokens=8, output_tokens=8, num_requests=1, concurrency=1,
                              prompt_format="text")
    with pytest.raises(TypeError, match=r"llama-3-70b/config.json has no tokenizer: use "
                                        r"token-id prompts \(prompt_format='token_ids'"):
        workload.build(vocab)


def test_a_directory_without_config_gives_none(tmp_path):
    assert vocab_from_config(tmp_path) is None
