"""Engine specs: the exact `vllm serve` flags, hashing with dict fields, labels and digests."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.engines.spec import Engine

TINY = "suites/models/tiny-llama"


def test_only_the_model_when_everything_is_default():
    # None means "vLLM's default": no flag at all, so vLLM's own default applies.
    assert Engine(model=TINY).server_args() == ["--model", TINY]


def test_value_flags_use_vllm_names_in_a_fixed_order():
    # Given in a different order than _VALUE_FLAGS: the output order must not depend on it.
    engine = Engine(
        model=TINY, seed=7, max_num_seqs=8, tokenizer="tok", dtype="bfloat16",
        load_format="dummy", tensor_parallel_size=2, pipeline_parallel_size=1,
        data_parallel_size=4, max_model_len=2048,
        max_num_batched_tokens=4096, gpu_memory_utilization=0.5,
        kv_cache_memory_bytes=512 << 20, kv_cache_dtype="fp8", quantization="fp8", block_size=16,
        distributed_executor_backend="mp", chat_template="t.jinja", served_model_name="tiny",
    )
    assert engine.server_args() == [
        "--model", TINY,
        "--tokenizer", "tok",
        "--load-format", "dummy",
        "--dtype", "bfloat16",
        "--tensor-parallel-size", "2",
        "--pipeline-parallel-size", "1",
        "--data-parallel-size", "4",
        "--max-model-len", "2048",
        "--max-num-seqs", "8",
        "--max-num-batched-tokens", "4096",
        "--gpu-memory-utilization", "0.5",
        "--kv-cache-memory-bytes", "536870912",
        "--kv-cache-dtype", "fp8",
        "--quantization", "fp8",
        "--block-size", "16",
        "--distributed-executor-backend", "mp",
        "--chat-template", "t.jinja",
        "--served-model-name", "tiny",
        "--seed", "7",
    ]


def test_zero_is_a_value_not_a_default():
    # `if value is not None`, not `if value`: seed=0 must still be passed.
    assert Engine(model=TINY, seed=0).server_args() == ["--model", TINY, "--seed", "0"]


@pytest.mark.parametrize(
    ("value", "flag"),
    [(True, "--enable-prefix-caching"), (False, "--no-enable-prefix-caching")],
)
def test_prefix_caching_both_ways(value, flag):
    # vLLM's default differs by version, so False must be said explicitly, never left out.
    assert Engine(model=TINY, enable_prefix_caching=value).server_args() == ["--model", TINY, flag]


@pytest.mark.parametrize(
    ("value", "flag"),
    [(True, "--enable-chunked-prefill"), (False, "--no-enable-chunked-prefill")],
)
def test_chunked_prefill_both_ways(value, flag):
    assert Engine(model=TINY, enable_chunked_prefill=value).server_args() == ["--model", TINY, flag]


def test_enforce_eager_is_a_bare_flag_only_when_true():
    assert Engine(model=TINY, enforce_eager=True).server_args() == [
        "--model", TINY, "--enforce-eager"
    ]
    # False is vLLM's default and it has no --no-enforce-eager.
    assert Engine(model=TINY, enforce_eager=False).server_args() == ["--model", TINY]


def test_speculative_config_is_passed_as_json():
    engine = Engine(model=TINY, speculative_config={"num_speculative_tokens": 3, "method": "ngram",
                                                    "prompt_lookup_max": 4})
    args = engine.server_args()
    assert args[:2] == ["--model", TINY]
    assert args[2] == "--speculative-config"
    assert json.loads(args[3]) == {"method": "ngram", "num_speculative_tokens": 3,
                                   "prompt_lookup_max": 4}
    # Keys sorted (the frozen form), so the flag reads the same for equal specs.
    assert args[3] == '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'
    assert len(args) == 4


def test_empty_speculative_config_gives_no_flag():
    assert Engine(model=TINY, speculative_config={}).server_args() == ["--model", TINY]


def test_extra_args_bare_negated_value_and_json():
    engine = Engine(model=TINY, extra_args={
        "async_scheduling": True,  # underscores become dashes
        "disable-log-stats": False,  # dashes kept
        "--swap-space": 4,  # a leading -- is tolerated
        "compilation_config": {"level": 3, "cudagraph_capture_sizes": [1, 2]},
    })
    # extra_args are frozen sorted by name, so their order is the sorted order of the keys.
    assert engine.server_args() == [
        "--model", TINY,
        "--swap-space", "4",
        "--async-scheduling",
        "--compilation-config", '{"cudagraph_capture_sizes": [1, 2], "level": 3}',
        "--no-disable-log-stats",
    ]


def test_extra_args_come_after_the_known_flags():
    engine = Engine(model=TINY, extra_args={"a": 1}, enforce_eager=True, max_num_seqs=2,
                    speculative_config={"method": "ngram"})
    assert engine.server_args() == [
        "--model", TINY, "--max-num-seqs", "2", "--enforce-eager",
        "--speculative-config", '{"method": "ngram"}', "--a", "1",
    ]


def test_extra_args_list_value_is_not_a_python_repr():
    args = Engine(model=TINY, extra_args={"cuda_graph_sizes": [1, 2]}).server_args()
    # vLLM takes list options as separate values (nargs='+') or as JSON; either would do.
    assert args in (
        ["--model", TINY, "--cuda-graph-sizes", "1", "2"],
        ["--model", TINY, "--cuda-graph-sizes", "[1, 2]"],
    )


def test_speculative_config_as_a_json_string():
    # vLLM's own flag takes a JSON string, so users will write one; accept it or refuse it early.
    try:
        engine = Engine(model=TINY, speculative_config='{"method": "ngram"}')
    except (TypeError, ValueError):
        return  # refused where the spec is written: also fine
    assert engine.server_args() == ["--model", TINY, "--speculative-config", '{"method": "ngram"}']


def test_hashable_and_equal_with_dict_fields_in_any_order():
    a = Engine(model=TINY, speculative_config={"method": "ngram", "k": 3},
               extra_args={"x": 1, "y": {"b": 2, "a": 1}}, env={"A": "1", "B": "2"})
    b = Engine(model=TINY, speculative_config={"k": 3, "method": "ngram"},
               extra_args={"y": {"a": 1, "b": 2}, "x": 1}, env={"B": "2", "A": "1"})
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1  # usable as an engine-cache key
    assert a != b.replace(env={"A": "1"})


def test_frozen():
    engine = Engine(model=TINY)
    with pytest.raises(AttributeError):
        engine.model = "other"  # type: ignore[misc]


def test_fields_are_keyword_only():
    # A positional typo must not silently land in another field.
    with pytest.raises(TypeError):
        Engine(TINY)  # type: ignore[misc]


def test_replace_changes_one_field_and_keeps_the_dict_fields():
    base = Engine(model=TINY, max_num_seqs=4, speculative_config={"method": "ngram", "k": 3},
                  extra_args={"async_scheduling": True}, env={"OMP": "1"})
    changed = base.replace(max_num_seqs=8)
    assert changed.max_num_seqs == 8
    assert base.max_num_seqs == 4  # the original is untouched
    # The dict fields went through thaw and re-freeze and came back identical.
    assert changed == Engine(model=TINY, max_num_seqs=8,
                             speculative_config={"method": "ngram", "k": 3},
                             extra_args={"async_scheduling": True}, env={"OMP": "1"})
    assert changed.server_args() == [
        "--model", TINY, "--max-num-seqs", "8",
        "--speculative-config", '{"k": 3, "method": "ngram"}', "--async-scheduling",
    ]
    assert changed.environment() == {"OMP": "1"}


def test_replace_accepts_a_new_dict_field():
    engine = Engine(model=TINY).replace(extra_args={"swap_space": 2})
    assert engine.server_args() == ["--model", TINY, "--swap-space", "2"]
    assert hash(engine) == hash(Engine(model=TINY, extra_args={"swap_space": 2}))


def test_the_grammar_backend_is_vllms_json_flag_and_keeps_the_spec_hashable():
    config = {"backend": "xgrammar", "disable_any_whitespace": True}
    engine = Engine(model=TINY, structured_outputs_config=config)
    assert engine.server_args() == ["--model", TINY, "--structured-outputs-config",
                                    '{"backend": "xgrammar", "disable_any_whitespace": true}']
    assert hash(engine) == hash(Engine(model=TINY, structured_outputs_config=dict(config)))
    assert engine.to_dict()["structured_outputs_config"] == config
    assert engine.replace(seed=1).structured_outputs_config == engine.structured_outputs_config
    as_json = Engine(model=TINY, structured_outputs_config='{"backend": "guidance"}')
    assert as_json.server_args()[-1] == '{"backend": "guidance"}'
    with pytest.raises(ValueError) as info:
        Engine(model=TINY, structured_outputs_config="xgrammar")
    assert str(info.value) == (
        "Engine(structured_outputs_config='xgrammar'): expected a dict (or its JSON string), e.g. "
        "{'backend': 'xgrammar'}, or None for vLLM's default")
    with pytest.raises(ValueError, match=r"^Engine\(kind='llamacpp', "):
        Engine(model=TINY, kind="llamacpp", tokenizer=TINY, structured_outputs_config=config)


def test_replace_validates_again():
    with pytest.raises(ValueError, match=r"^Engine\(tensor_parallel_size=0\): expected a whole "):
        Engine(model=TINY).replace(tensor_parallel_size=0)


def test_to_dict_holds_only_non_defaults_with_dicts_thawed():
    engine = Engine(model=TINY, load_format="dummy", enforce_eager=False, seed=0,
                    speculative_config={"method": "ngram"}, env={"A": 1})
    assert engine.to_dict() == {
        "model": TINY,
        "load_format": "dummy",
        "enforce_eager": False,  # False is a choice, kept; only None means "default"
        "seed": 0,
        "speculative_config": {"method": "ngram"},
        "env": {"A": 1},
    }
    assert Engine(model=TINY).to_dict() == {"model": TINY}


def test_label_of_the_cpu_engine():
    engine = Engine(model=TINY, load_format="dummy", max_model_len=2048,
                    kv_cache_memory_bytes=512 << 20, enforce_eager=True)
    assert engine.label() == "tiny-llama load=dummy len=2048 kv=512MiB eager=True"


def test_label_short_names_and_what_it_leaves_out():
    engine = Engine(model="/models/Llama-3-8B/", tokenizer="tok", chat_template="t",
                    served_model_name="llama", env={"A": "1"}, tensor_parallel_size=2,
                    pipeline_parallel_size=2, max_num_seqs=64, max_num_batched_tokens=8192,
                    kv_cache_dtype="fp8", enable_prefix_caching=False,
                    enable_chunked_prefill=True, gpu_memory_utilization=0.9,
                    speculative_config={"method": "ngram", "num_speculative_tokens": 3},
                    block_size=32)
    # Model: last path part. tokenizer, template, served name and env: not what is measured.
    # Numbers below 1 MiB are shown as they are (8192 batched tokens is not "0MiB").
    assert engine.label() == (
        "Llama-3-8B tp=2 pp=2 seqs=64 batched=8192 mem=0.9 kv_dtype=fp8 block_size=32 "
        "prefix_cache=False chunked=True spec=method:ngram,num_speculative_tokens:3"
    )


def test_digest_is_stable_and_tracks_the_spec():
    engine = Engine(model=TINY, load_format="dummy", max_model_len=2048,
                    kv_cache_memory_bytes=512 << 20, enforce_eager=True)
    # A literal: hash() would differ between processes (PYTHONHASHSEED); this must not, since
    # xdist workers group tests by it.
    assert engine.digest() == "052e5f43dd"
    assert Engine(model=TINY, extra_args={"b": 1, "a": 2}).digest() == Engine(
        model=TINY, extra_args={"a": 2, "b": 1}).digest()
    assert engine.replace(max_model_len=1024).digest() != engine.digest()


@pytest.mark.parametrize("tp", [0, -1])
def test_tensor_parallel_size_below_one_is_refused(tp):
    with pytest.raises(ValueError) as excinfo:
        Engine(model=TINY, tensor_parallel_size=tp)
    assert str(excinfo.value) == (f"Engine(tensor_parallel_size={tp}): expected a whole number "
                                  ">= 1, or None for vLLM's default")


@pytest.mark.parametrize(
    ("tp", "pp", "dp", "gpus"),
    [(None, None, None, 1), (2, None, None, 2), (None, 4, None, 4), (2, 4, None, 8),
     (1, 1, 1, 1), (None, None, 8, 8), (2, 1, 4, 8), (2, 2, 2, 8)],
)
def test_gpus_needed_is_tp_times_pp_times_dp(tp, pp, dp, gpus):
    engine = Engine(model=TINY, tensor_parallel_size=tp, pipeline_parallel_size=pp,
                    data_parallel_size=dp)
    assert engine.gpus_needed == gpus


def test_data_parallel_label_and_refusal():
    assert Engine(model=TINY, data_parallel_size=8).label() == "tiny-llama dp=8"
    with pytest.raises(ValueError) as excinfo:
        Engine(model=TINY, data_parallel_size=0)
    assert str(excinfo.value) == ("Engine(data_parallel_size=0): expected a whole number >= 1, "
                                  "or None for vLLM's default")


def test_model_name_is_the_served_name_when_renamed():
    assert Engine(model=TINY).model_name == TINY
    assert Engine(model=TINY, served_model_name="tiny").model_name == "tiny"


def test_environment_values_become_strings():
    assert Engine(model=TINY, env={"THREADS": 4, "BIND": "0-3"}).environment() == {
        "BIND": "0-3", "THREADS": "4"
    }
    assert Engine(model=TINY).environment() == {}
