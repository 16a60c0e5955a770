"""Workload.reasoning (workloads/reasoning.py): chat requests of exact lengths marked as
reasoning requests, the engine's reasoning parser as a vLLM flag, and a reasoning workload on an
engine without a parser refused in one line before anything starts."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from pytest_llmperf import Engine, Workload
from pytest_llmperf.errors import InputError
from pytest_llmperf.workloads.prompts import load_tokenizer
from pytest_llmperf.workloads.reasoning import check_reasoning, parser_of
from tests.conftest import REPO, TINY_LLAMA
from tests.unit.canned_server import send
from tests.unit.reasoning_chunks import STREAM


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(TINY_LLAMA)


def test_its_requests_are_exact_chat_requests_marked_as_reasoning(tokenizer):
    workload = Workload.reasoning(input_tokens=16, output_tokens=24, num_requests=3,
                                  concurrency=1)
    requests, _ = workload.build(tokenizer)
    assert (workload.api, workload.name) == ("chat", "reasoning-16in-24out")
    assert [(r.reasoning, r.prompt_tokens, r.output_tokens, r.forced_length)
            for r in requests] == [(True, 16, 24, True)] * 3
    assert isinstance(requests[0].prompt, str)
    assert workload.to_dict()["source"]["type"] == "ReasoningOf"


def test_through_the_client_its_record_splits_thinking_from_answer(server, tokenizer):
    request = Workload.reasoning(input_tokens=8, output_tokens=4, num_requests=1,
                                 concurrency=1).build(tokenizer)[0][0]
    server.sse(*STREAM)
    record = send(server.url, request, api="chat")
    assert record.ok and (record.reasoning_tokens, record.answer_tokens) == (3, 2)
    assert record.first_output_s is not None
    body = server.requests[-1][1]
    assert (body["max_tokens"], body["min_tokens"], body["messages"][-1]["role"]) == (
        4, 4, "user")
    plain = send(server.url, replace(request, reasoning=False), api="chat")
    assert (plain.reasoning_tokens, plain.first_output_s) == (None, None)


def test_another_api_is_one_line():
    with pytest.raises(InputError, match=r"^Workload.reasoning: reasoning requests need "
                       r"/v1/chat/completions, got api='completions'; leave api at 'chat'"):
        Workload.reasoning(input_tokens=16, output_tokens=24, num_requests=3, concurrency=1,
                           api="completions")


def test_the_parser_is_vllms_reasoning_parser_flag():
    engine = Engine(model="m", reasoning_parser="deepseek_r1")
    args = engine.server_args()
    assert args[args.index("--reasoning-parser") + 1] == "deepseek_r1"
    assert parser_of(engine) == "deepseek_r1"
    assert parser_of(Engine(model="m", extra_args={"reasoning_parser": "qwen3"})) == "qwen3"
    assert parser_of(Engine(model="m")) is None
    assert "--reasoning-parser" not in Engine(model="m").server_args()


def test_an_engine_without_a_parser_is_one_line():
    workload = Workload.reasoning(input_tokens=16, output_tokens=24, num_requests=3,
                                  concurrency=1)
    with pytest.raises(InputError) as caught:
        check_reasoning(Engine(model="/models/tiny"), workload.name, workload.source)
    assert str(caught.value) == (
        "Workload 'reasoning-16in-24out' is a reasoning workload, but the engine of model "
        "/models/tiny runs no reasoning parser, so its thinking would stream as the answer: "
        "give the Engine reasoning_parser='deepseek_r1' (or the parser of its model family; "
        "vLLM's --reasoning-parser)")
    check_reasoning(Engine(model="m", reasoning_parser="deepseek_r1"), "w", workload.source)
    fixed = Workload.fixed(input_tokens=4, output_tokens=4, num_requests=1, concurrency=1)
    check_reasoning(Engine(model="m"), fixed.name, fixed.source)  # not a reasoning workload


def test_the_committed_thinking_model_is_the_scripts_output(tmp_path):
    """suites/models/tiny-llama-think is what scripts/make_tiny_thinking_model.py writes, file
    for file, its markers single tokens of its tokenizer at the ids its config names."""
    script = REPO / "scripts" / "make_tiny_thinking_model.py"
    done = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)],
                          capture_output=True, text=True, check=True)
    committed = REPO / "suites" / "models" / "tiny-llama-think"

    def files(folder):
        return {path.name: path.read_bytes() for path in folder.iterdir()}
    assert files(tmp_path) == files(committed)
    assert done.stdout == (f"wrote {tmp_path}: <think> = 4096, </think> = 4097, 8 tokens of "
                           "thinking a request\n")
    config = json.loads((committed / "config.json").read_text())
    assert (config["vocab_size"], config["llmperf_think_start_token_id"],
            config["llmperf_think_end_token_id"]) == (4098, 4096, 4097)
    tokenizer = load_tokenizer(committed)
    assert tokenizer.encode("a<think>b</think>c")[1::2] == [4096, 4097]
