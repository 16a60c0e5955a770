"""Workloads: each constructor builds the right requests with exact lengths (real tokenizer of the
tiny CPU model), warm-ups come first, seeds reproduce, and the description survives TOML."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest
import tomli_w

from pytest_llmperf.client.patterns import Concurrency, Ramp, Rate, Trace
from pytest_llmperf.client.sessions import Sessions
from pytest_llmperf.records import Request
from pytest_llmperf.workloads.datasets import JSONL_FORMAT, DatasetError
from pytest_llmperf.workloads.lengths import Fixed, Normal
from pytest_llmperf.workloads.prompts import load_tokenizer
from pytest_llmperf.workloads.workload import Workload, load_pattern
from tests.conftest import TINY_LLAMA
from tests.hub_cache import use_offline_cache


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(TINY_LLAMA)


@pytest.fixture(autouse=True)
def empty_hf_cache(tmp_path, monkeypatch):
    """Profiles read a dataset from the HF cache when there is one: keep a developer's out."""
    use_offline_cache(tmp_path / "hf-home", monkeypatch)


def lengths(requests: list[Request]) -> list[tuple[int, int, int]]:
    """(intended prompt tokens, actual prompt length, output tokens) per request."""
    return [(r.prompt_tokens, len(r.prompt), r.output_tokens) for r in requests]


def toml_round_trip(workload: Workload) -> dict:
    return tomllib.loads(tomli_w.dumps(workload.to_dict()))


# ------------------------------------------------------------------ constructors


def test_fixed(tok):
    workload = Workload.fixed(input_tokens=16, output_tokens=8, num_requests=3, concurrency=2)
    measured, warmup = workload.build(tok)
    assert lengths(measured) == [(16, 16, 8)] * 3
    assert warmup == []
    assert all(isinstance(r.prompt, tuple) for r in measured)  # token ids: exact on any server
    assert not set().union(*(r.prompt for r in measured)) & tok.special_ids
    assert workload.name == "fixed-16in-8out"
    assert workload.pattern == Concurrency(max_concurrency=2)
    assert workload.label() == "fixed-16in-8out x3 @ concurrency 2"


def test_fixed_with_a_name_and_options():
    workload = Workload.fixed(input_tokens=4, output_tokens=2, num_requests=1, rate=1.0,
                              name="tiny", seed=5, duration_s=30.0)
    assert (workload.name, workload.seed, workload.duration_s) == ("tiny", 5, 30.0)


def test_random_lengths_stay_in_the_range(tok):
    workload = Workload.random(input_tokens=100, output_tokens=10, range_ratio=0.5,
                               num_requests=20, rate=2.5, burstiness=0.5)
    measured, _ = workload.build(tok)
    assert len(measured) == 20
    assert all(r.prompt_tokens == len(r.prompt) for r in measured)
    assert all(50 <= r.prompt_tokens <= 150 and 5 <= r.output_tokens <= 15 for r in measured)
    assert len({r.prompt_tokens for r in measured}) > 1  # actually random, not all the mean
    assert workload.label() == "random-100in-10out-r0.5 x20 @ 2.5 req/s burst 0.5"


def test_synthetic_text_prompts_have_exact_token_counts(tok):
    workload = Workload.synthetic(input_tokens=Fixed(tokens=12), output_tokens=Fixed(tokens=3),
                                  num_requests=4, prompt_format="text", concurrency=1)
    measured, _ = workload.build(tok)
    assert [(r.prompt_tokens, r.output_tokens) for r in measured] == [(12, 3)] * 4
    # Text: the count is what the tokenizer gives when the server re-encodes it.
    assert [len(tok.encode(r.prompt)) for r in measured] == [12] * 4
    assert all(type(r.prompt) is str for r in measured)


def test_synthetic_normal_lengths(tok):
    workload = Workload.synthetic(input_tokens=Normal(mean=20, min=10, max=30, variance=5),
                                  output_tokens=Fixed(tokens=2), num_requests=10, concurrency=1)
    measured, _ = workload.build(tok)
    assert all(10 <= r.prompt_tokens <= 30 and r.prompt_tokens == len(r.prompt)
               for r in measured)
    assert workload.name == "synthetic"


def test_profile_fixed_length_scaled(tok):
    # fixed-length is 200 in, 800 out; scale 0.05 makes it 10 in, 40 out.
    workload = Workload.profile("fixed-length", num_requests=3, scale=0.05, concurrency=1)
    measured, _ = workload.build(tok)
    assert lengths(measured) == [(10, 10, 40)] * 3
    assert workload.name == "fixed-length-x0.05"
    assert workload.label() == "fixed-length-x0.05 x3 @ concurrency 1"


def test_profile_classification_shares_documents(tok):
    workload = Workload.profile("classification", num_requests=16, scale=0.01, concurrency=1)
    measured, _ = workload.build(tok)
    # 10000 +- 5000 in [8000, 12000], scaled by 0.01; answers of 50 tokens scale to 1.
    assert all(80 <= r.prompt_tokens <= 120 and r.prompt_tokens == len(r.prompt)
               for r in measured)
    assert {r.output_tokens for r in measured} == {1}
    # 8 documents, round-robin: prompt i and i+8 share at least the head of document i % 8
    # (80 tokens at least, less the 32-token question); documents start with distinct tokens.
    prompts = [r.prompt for r in measured]
    assert all(prompts[i][:48] == prompts[i + 8][:48] for i in range(8))
    assert len({p[0] for p in prompts[:8]}) == 8


def test_profile_unscaled_name():
    assert Workload.profile("chat", num_requests=1, concurrency=1).name == "chat"


def test_unknown_profile_fails_where_the_workload_is_written():
    with pytest.raises(ValueError) as excinfo:
        Workload.profile("chatty", num_requests=1, concurrency=1)
    assert str(excinfo.value) == (
        "unknown profile 'chatty'; valid profiles: chat, code-generation, classification, "
        "fixed-length"
    )


def test_shared_prefix(tok):
    workload = Workload.shared_prefix(num_prefixes=2, prefix_tokens=8, suffix_tokens=4,
                                      output_tokens=5, num_requests=4, concurrency=2)
    measured, _ = workload.build(tok)
    assert lengths(measured) == [(12, 12, 5)] * 4
    prompts = [r.prompt for r in measured]
    # Round-robin over two prefixes: 0 and 2 share one, 1 and 3 the other, and the suffixes
    # are all different.
    assert prompts[0][:8] == prompts[2][:8] != prompts[1][:8] == prompts[3][:8]
    assert len({p[8:] for p in prompts}) == 4
    assert workload.name == "prefix-2x8+4in-5out"
    assert workload.label() == "prefix-2x8+4in-5out x4 @ concurrency 2"


def test_shared_prefix_custom_name():
    workload = Workload.shared_prefix(num_prefixes=1, prefix_tokens=4, suffix_tokens=1,
                                      output_tokens=1, num_requests=1, concurrency=1, name="sys")
    assert workload.name == "sys"


@pytest.fixture
def jsonl(tmp_path) -> Path:
    path = tmp_path / "questions.jsonl"
    lines = [
        {"prompt": "Hello world", "output_tokens": 4},
        {"prompt": "What is a KV cache?", "output_tokens": 6, "prompt_tokens": 99},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    return path


def test_dataset_jsonl_cycles_in_file_order(tok, jsonl):
    workload = Workload.dataset(jsonl, num_requests=3, warmup_requests=1, concurrency=1)
    measured, warmup = workload.build(tok)
    hello = Request(prompt="Hello world", prompt_tokens=5, output_tokens=4)  # 5 = tokenizer count
    kv = Request(prompt="What is a KV cache?", prompt_tokens=99, output_tokens=6)  # as given
    assert warmup == [hello]
    assert measured == [kv, hello, kv]
    assert workload.name == "questions"
    assert workload.label() == "questions x3 @ concurrency 1"


def test_dataset_allows_chat(tok, jsonl):
    workload = Workload.dataset(jsonl, num_requests=1, concurrency=1, api="chat", name="q")
    assert workload.api == "chat" and workload.name == "q"
    assert workload.build(tok)[0][0].prompt == "Hello world"


def test_dataset_file_is_read_only_when_built(tmp_path, tok):
    # Declared at import time in a suite file: a missing file must not break collection.
    path = tmp_path / "later.jsonl"
    workload = Workload.dataset(path, num_requests=1, concurrency=1)
    with pytest.raises(DatasetError) as excinfo:
        workload.build(tok)
    assert str(excinfo.value) == (
        f"{path}: no such file; pass the path of a local file in {JSONL_FORMAT}"
    )


# ------------------------------------------------------------------ build


def test_warmup_requests_come_first_and_are_not_measured(tok):
    with_warmup = Workload.fixed(input_tokens=8, output_tokens=2, num_requests=3,
                                 warmup_requests=2, concurrency=1)
    measured, warmup = with_warmup.build(tok)
    assert (len(measured), len(warmup)) == (3, 2)
    # The same seed drawing 5 requests in one go: warm-ups are its first two.
    everything, _ = Workload.fixed(input_tokens=8, output_tokens=2, num_requests=5,
                                   concurrency=1).build(tok)
    assert warmup == everything[:2]
    assert measured == everything[2:]


def test_same_seed_same_requests(tok):
    def build(seed: int) -> list[Request]:
        return Workload.random(input_tokens=32, output_tokens=8, range_ratio=0.5, num_requests=5,
                               concurrency=1, seed=seed).build(tok)[0]

    assert build(1) == build(1)
    assert build(1) != build(2)


def test_same_seed_same_text_prompts(tok):
    def build() -> list[Request]:
        return Workload.synthetic(input_tokens=Fixed(tokens=10), output_tokens=Fixed(tokens=2),
                                  num_requests=3, prompt_format="text",
                                  concurrency=1).build(tok)[0]

    assert build() == build()


# ------------------------------------------------------------------ validation


def test_num_requests_must_be_positive():
    with pytest.raises(ValueError) as excinfo:
        Workload.fixed(input_tokens=1, output_tokens=1, num_requests=0, concurrency=1)
    assert str(excinfo.value) == "Workload 'fixed-1in-1out': num_requests must be >= 1, got 0"


def test_chat_with_token_id_prompts_is_refused():
    with pytest.raises(ValueError) as excinfo:
        Workload.fixed(input_tokens=1, output_tokens=1, num_requests=1, concurrency=1, api="chat")
    assert str(excinfo.value) == (
        "Workload 'fixed-1in-1out': api='chat' needs text prompts "
        "(prompt_format='text' or a dataset)"
    )


def test_chat_with_a_profile_is_refused():
    # Profiles build token-id prompts.
    with pytest.raises(ValueError, match=r"^Workload 'chat': api='chat' needs text prompts"):
        Workload.profile("chat", num_requests=1, concurrency=1, api="chat")


def test_chat_with_text_prompts_is_fine():
    workload = Workload.synthetic(input_tokens=Fixed(tokens=4), output_tokens=Fixed(tokens=1),
                                  num_requests=1, prompt_format="text", concurrency=1, api="chat")
    assert workload.api == "chat"


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError):
        Workload.fixed(input_tokens=1, output_tokens=1, num_requests=1, concurrency=1, warmup=3)


# ------------------------------------------------------------------ load patterns


def test_load_pattern_kinds():
    assert load_pattern(concurrency=4) == Concurrency(max_concurrency=4)
    assert load_pattern(rate=2.0) == Rate(requests_per_s=2.0)
    assert load_pattern(rate=2.0, concurrency=4, burstiness=0.5) == Rate(
        requests_per_s=2.0, burstiness=0.5, max_concurrency=4)
    assert load_pattern(ramp=(1.0, 8.0, "exponential"), concurrency=3) == Ramp(
        start_rps=1.0, end_rps=8.0, strategy="exponential", max_concurrency=3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give concurrency=N (closed loop), rate=R requests/s (open loop) or "
             "ramp=(start, end, 'linear'|'exponential')"),
        ({"concurrency": 0}, "Concurrency.max_concurrency must be an int >= 1, got 0"),
        ({"rate": 0}, "Rate.requests_per_s must be a number > 0 (math.inf sends everything at "
                      "once), got 0"),
        ({"rate": 1.0, "burstiness": 0}, "Rate.burstiness must be a number > 0 (1.0 is Poisson, "
                                         "lower is burstier), got 0"),
        ({"ramp": (1, 2, "cubic")}, "Ramp.strategy must be 'linear' or 'exponential', "
                                    "got 'cubic'"),
        ({"ramp": (0, 2, "linear")}, "Ramp.start_rps must be a finite number > 0, got 0"),
    ],
)
def test_load_pattern_errors(kwargs, message):
    with pytest.raises(ValueError) as excinfo:
        load_pattern(**kwargs)
    assert str(excinfo.value) == message


def test_workload_without_a_pattern_fails_with_the_same_message():
    with pytest.raises(ValueError, match=r"^give concurrency=N"):
        Workload.fixed(input_tokens=1, output_tokens=1, num_requests=1)


def test_rate_and_ramp_together_are_refused():
    with pytest.raises(ValueError):
        load_pattern(rate=2.0, ramp=(1.0, 4.0, "linear"))


@pytest.mark.parametrize(
    ("pattern", "label"),
    [
        (Concurrency(max_concurrency=8), "concurrency 8"),
        (Rate(requests_per_s=2.5), "2.5 req/s"),
        (Rate(requests_per_s=math.inf), "inf req/s"),
        (Rate(requests_per_s=4, burstiness=0.5, max_concurrency=2), "4 req/s burst 0.5 cap 2"),
        (Ramp(start_rps=1, end_rps=4, strategy="linear"), "ramp 1->4 req/s linear"),
        (Ramp(start_rps=0.5, end_rps=8, strategy="exponential", max_concurrency=3),
         "ramp 0.5->8 req/s exponential cap 3"),
        (Trace(offsets_s=(0.0, 0.5, 2.25), max_concurrency=4), "trace 3 req over 2.25 s cap 4"),
        (Sessions(turns=3, think_time_s=1.5, start=Rate(requests_per_s=2)),
         "3 turns, think 1.5 s, sessions at 2 req/s"),
        (Sessions(turns=3, start=Concurrency(max_concurrency=2), session_turns=(3, 2)),
         "up to 3 turns, sessions at concurrency 2"),
    ],
)
def test_pattern_labels(pattern, label):
    assert pattern.label() == label


def test_with_pattern_keeps_the_rest():
    workload = Workload.fixed(input_tokens=4, output_tokens=2, num_requests=3, concurrency=1,
                              seed=9)
    swept = workload.with_pattern(Rate(requests_per_s=2.0), name="fixed@2rps")
    assert swept.label() == "fixed@2rps x3 @ 2 req/s"
    assert (swept.seed, swept.source) == (9, workload.source)
    assert workload.with_pattern(Rate(requests_per_s=2.0)).name == "fixed-4in-2out"


# ------------------------------------------------------------------ to_dict


def test_to_dict_of_a_fixed_workload():
    workload = Workload.fixed(input_tokens=16, output_tokens=8, num_requests=3, concurrency=2,
                              warmup_requests=1)
    expected = {
        "name": "fixed-16in-8out", "num_requests": 3,
        "source": {"type": "Synthetic", "input_tokens": {"type": "Fixed", "tokens": 16},
                   "output_tokens": {"type": "Fixed", "tokens": 8},
                   "prompt_format": "token_ids"},
        "pattern": {"type": "Concurrency", "max_concurrency": 2},
        "seed": 0, "warmup_requests": 1, "api": "completions",
    }
    assert workload.to_dict() == expected
    assert toml_round_trip(workload) == expected


def test_to_dict_drops_none_and_writes_inf_as_text():
    # TOML has no null; inf is a TOML float but JSON has none, so it is written as "inf".
    workload = Workload.fixed(input_tokens=4, output_tokens=1, num_requests=1, rate=math.inf,
                              duration_s=60.0)
    data = toml_round_trip(workload)
    assert data["pattern"] == {"type": "Rate", "requests_per_s": "inf", "burstiness": 1.0}
    assert data["duration_s"] == 60.0


@pytest.mark.parametrize(
    "make",
    [
        lambda: Workload.random(input_tokens=32, output_tokens=8, range_ratio=0.25,
                                num_requests=2, ramp=(1.0, 4.0, "linear"), concurrency=3),
        lambda: Workload.profile("classification", num_requests=2, scale=0.1, rate=1.0),
        lambda: Workload.shared_prefix(num_prefixes=2, prefix_tokens=8, suffix_tokens=4,
                                       output_tokens=5, num_requests=4, concurrency=2),
        lambda: Workload.dataset("data/q.jsonl", num_requests=2, output_tokens=16, concurrency=1),
        lambda: Workload.synthetic(input_tokens=Normal(mean=20, min=10, max=30, variance=5.0),
                                   output_tokens=Fixed(tokens=2), num_requests=1,
                                   prompt_format="text", concurrency=1),
    ],
)
def test_to_dict_is_toml_serializable(make):
    # Written into baseline provenance: a value TOML cannot hold would break the update.
    workload = make()
    assert toml_round_trip(workload) == workload.to_dict()


def test_to_dict_names_each_source():
    profile = Workload.profile("classification", num_requests=2, scale=0.1, rate=1.0)
    assert profile.to_dict()["source"] == {"type": "ProfileSource", "profile": "classification",
                                           "scale": 0.1}
    dataset = Workload.dataset("data/q.jsonl", num_requests=2, concurrency=1)
    assert dataset.to_dict()["source"] == {"type": "DatasetSource", "path": "data/q.jsonl"}
