"""A workload's prompts as text for servers that take no token ids (workloads/text_only.py):
synthetic prompts are made as text of their exact lengths, any other source's token ids are
decoded and counted again, and the workload says it changed (a token-id baseline is no
reference for it)."""

from __future__ import annotations

from pytest_llmperf.workloads.prompts import load_tokenizer
from pytest_llmperf.workloads.text_only import TextOf, as_text
from pytest_llmperf.workloads.workload import Workload
from suites.tiny import TINY_CPU

TOKENIZER = load_tokenizer(TINY_CPU.model)


def test_synthetic_prompts_become_text_of_exactly_their_lengths():
    workload = Workload.fixed(input_tokens=32, output_tokens=8, num_requests=4, concurrency=1)
    text = as_text(workload)
    requests, _ = text.build(TOKENIZER)
    assert [type(r.prompt) for r in requests] == [str] * 4
    assert [len(TOKENIZER.encode(r.prompt)) for r in requests] == [32] * 4
    assert [r.prompt_tokens for r in requests] == [32] * 4
    assert text.to_dict()["source"]["prompt_format"] == "text"
    assert workload.to_dict()["source"]["prompt_format"] == "token_ids"


def test_other_token_id_prompts_are_decoded_and_counted_again():
    workload = Workload.shared_prefix(num_prefixes=2, prefix_tokens=24, suffix_tokens=8,
                                      output_tokens=4, num_requests=6, concurrency=1)
    text = as_text(workload)
    assert isinstance(text.source, TextOf)
    ids, _ = workload.build(TOKENIZER)
    texts, _ = text.build(TOKENIZER)
    assert [t.prompt for t in texts] == [TOKENIZER.decode(i.prompt) for i in ids]
    assert [t.prompt_tokens for t in texts] == [len(TOKENIZER.encode(t.prompt)) for t in texts]
    assert text.to_dict()["source"]["type"] == "TextOf"


def test_text_workloads_are_left_as_they_are():
    text = Workload.fixed(input_tokens=8, output_tokens=2, num_requests=1, concurrency=1,
                          prompt_format="text")
    assert as_text(text) is text
    once = as_text(Workload.shared_prefix(num_prefixes=1, prefix_tokens=4, suffix_tokens=4,
                                          output_tokens=2, num_requests=2, concurrency=1))
    assert as_text(once) is once
