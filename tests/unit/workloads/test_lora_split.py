"""A LoRA traffic split: exact counts by weight, a seeded order, each request's `model` naming
its adapter, and one line for each bad split."""

from __future__ import annotations

from collections import Counter

import pytest

from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.workloads.lora import AdapterSplit, check_served
from pytest_llmperf.workloads.workload import Workload

VOCAB = 4096  # a bare vocabulary size: token-id prompts without a tokenizer


def models(workload: Workload) -> list[str | None]:
    requests, _ = workload.build(VOCAB)
    return [dict(request.body).get("model") for request in requests]


def test_counts_are_exact_by_weight_and_the_base_share_keeps_the_engines_model():
    split = Workload.lora({"a": 2, "b": 1, "c": 1}, base=2, input_tokens=8, output_tokens=4,
                          num_requests=24, concurrency=4)
    assert Counter(models(split)) == {None: 8, "a": 8, "b": 4, "c": 4}


def test_whole_requests_go_by_largest_remainder():
    # 10 x 1/3 = 3.33 each: one request left over, to the first of the equal remainders.
    source = AdapterSplit.of(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=1,
                                            concurrency=1).source, {"a": 1, "b": 1, "c": 1}, 0)
    assert source.counts(10) == {"a": 4, "b": 3, "c": 3}
    # 7 x (0.5, 0.3, 0.2) = 3.5, 2.1, 1.4: 6 whole, the one left over to a's .5.
    assert AdapterSplit.of(source.source, {"a": 5, "b": 3}, 2).counts(7) == {
        "a": 4, "b": 2, None: 1}


def test_the_order_is_seeded_and_interleaves_the_adapters():
    one = dict(input_tokens=8, output_tokens=4, num_requests=12, concurrency=2)
    first = models(Workload.lora({"a": 1, "b": 1, "c": 1}, **one))
    assert first == models(Workload.lora({"a": 1, "b": 1, "c": 1}, **one))
    assert first != models(Workload.lora({"a": 1, "b": 1, "c": 1}, seed=1, **one))
    assert first != sorted(first)  # not in runs of one adapter: the engine has to swap


def test_the_split_keeps_the_inner_requests_and_adds_only_the_model():
    plain = Workload.fixed(input_tokens=8, output_tokens=4, num_requests=6, concurrency=1)
    split = Workload.lora({"a": 1}, base=1, input_tokens=8, output_tokens=4, num_requests=6,
                          concurrency=1)
    for before, after in zip(plain.build(VOCAB)[0], split.build(VOCAB)[0], strict=True):
        assert (after.prompt, after.output_tokens) == (before.prompt, before.output_tokens)
        assert after.body in ((), (("model", "a"),))


def test_identity_names_the_adapters_and_their_weights():
    split = Workload.lora({"a": 3, "b": 1}, base=1, input_tokens=8, output_tokens=4,
                          num_requests=8, concurrency=2)
    assert split.name == "lora-2adapters-8in-4out"
    source = split.to_dict()["source"]
    assert (source["type"], source["adapters"], source["base"]) == (
        "AdapterSplit", {"a": 3.0, "b": 1.0}, 1.0)
    assert source["source"]["type"] == "Synthetic"


@pytest.mark.parametrize("adapters, base, line", [
    ({}, 0, "Workload.lora: adapters must be a non-empty dict of adapter names to weights, "
            "e.g. {'sql-lora': 3, 'chat-lora': 1}, got {}"),
    ({"a": -1}, 0, "Workload.lora: a's weight -1 must be a number >= 0"),
    ({"a": 1}, "half", "Workload.lora: base's weight 'half' must be a number >= 0"),
    ({"a": 0}, 1, "Workload.lora: every adapter's weight is 0; give one a weight above 0"),
    ({"base": 1}, 0, "Workload.lora: 'base' names the base model's share; give it as base=, "
                     "and name the adapter otherwise"),
    ({"": 1}, 0, "Workload.lora: adapter name '' must be a non-empty string"),
])
def test_a_bad_split_is_one_line_where_the_workload_is_written(adapters, base, line):
    with pytest.raises(InputError) as raised:
        Workload.lora(adapters, base=base, input_tokens=8, output_tokens=4, num_requests=4,
                      concurrency=1)
    assert str(raised.value) == line


def test_an_adapter_the_engine_does_not_serve_is_one_line():
    split = Workload.lora({"a": 1, "d": 1, "e": 1}, input_tokens=8, output_tokens=4,
                          num_requests=4, concurrency=1)
    serving = Engine(model="m", lora_modules={"a": "/x/a", "b": "/x/b"})
    with pytest.raises(InputError) as raised:
        check_served(split.source, serving)
    assert str(raised.value) == (
        "Workload.lora: adapters 'd', 'e' are not served by engine 'm lora=a,b': it serves a, "
        "b; add them to the Engine's lora_modules or drop them from the split")
    with pytest.raises(InputError) as raised:
        check_served(split.source, Engine(model="m"))
    assert str(raised.value) == (
        "Workload.lora: adapters 'a', 'd', 'e' are not served by engine 'm': it serves no LoRA "
        "adapters (Engine(lora_modules=...) names them); add them to the Engine's lora_modules "
        "or drop them from the split")


def test_a_served_split_and_other_sources_pass():
    serving = Engine(model="m", lora_modules={"a": "/x/a"})
    check_served(Workload.lora({"a": 1, "b": 0}, input_tokens=8, output_tokens=4,
                               num_requests=4, concurrency=1).source, serving)
    check_served(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=1,
                                concurrency=1).source, Engine(model="m"))
