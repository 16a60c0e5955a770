"""Engine kinds (engines/kinds/): each kind's exact command from a spec, the one-line errors for
fields a kind has no use for, what a kind's spec records, and that a vLLM spec is what it was
before kinds (its flags, its recorded identity and its digest)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines.errors import EngineStartError
from pytest_llmperf.engines.health import death_line, telling_log_lines
from pytest_llmperf.engines.kinds import KINDS
from pytest_llmperf.engines.kinds.sglang import LOG_PREFIX as SGLANG_PREFIX
from pytest_llmperf.engines.offline import run_offline
from pytest_llmperf.engines.process import check_model_path, engine_error
from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.session.provenance import engine_identity

TINY = "suites/models/tiny-llama"
GGUF = "/models/tiny-llama-f32.gguf"


def llamacpp(**fields) -> Engine:
    return Engine(kind="llamacpp", model=GGUF, tokenizer=TINY, **fields)


def test_a_vllm_spec_is_what_it_was_before_kinds():
    engine = Engine(model=TINY, max_num_seqs=8, env={"A": "1"})
    assert engine == Engine(model=TINY, max_num_seqs=8, env={"A": "1"}, kind="vllm")
    assert engine.to_dict() == {"model": TINY, "max_num_seqs": 8, "env": {"A": "1"}}
    assert engine.label() == "tiny-llama seqs=8"
    assert repr(engine) == "Engine(model='suites/models/tiny-llama', max_num_seqs=8, env={'A': '1'})"
    # The digest names the engine process and keys xdist groups: as it was (sha1 of to_dict).
    text = json.dumps({"model": TINY, "max_num_seqs": 8, "env": {"A": "1"}}, sort_keys=True)
    assert engine.digest() == hashlib.sha1(text.encode()).hexdigest()[:10]


def test_the_kinds_are_the_four_servers():
    assert list(KINDS) == ["vllm", "llamacpp", "sglang", "trtllm"]


def test_an_unknown_kind_is_one_line():
    with pytest.raises(InputError) as caught:
        Engine(kind="sglangg", model=TINY)
    assert str(caught.value) == ("Engine(kind='sglangg'): expected the server to start: 'vllm', "
                                 "'llamacpp', 'sglang', 'trtllm' (engines/kinds/)")


def test_llamacpp_server_command_uses_its_own_flag_names():
    engine = llamacpp(max_model_len=2048, max_num_batched_tokens=256, seed=3,
                      served_model_name="tiny",
                      extra_args={"n_threads": 1, "interrupt-requests": False, "use_mmap": True})
    assert engine.server_args() == [
        "--model", GGUF, "--n_ctx", "2048", "--n_batch", "256", "--seed", "3",
        "--model_alias", "tiny",
        # booleans as values, underscores whatever the spelling given
        "--interrupt_requests", "False", "--n_threads", "1", "--use_mmap", "True"]
    command = engine.engine_kind.command(engine, "/venv/bin/python", "127.0.0.1", 8123)
    assert command == ["/venv/bin/python", "-m", "llama_cpp.server", *engine.server_args(),
                       "--host", "127.0.0.1", "--port", "8123"]


def test_a_llamacpp_spec_records_its_kind_and_is_labelled_by_it():
    engine = llamacpp(max_model_len=2048)
    assert engine.to_dict() == {"model": GGUF, "tokenizer": TINY, "max_model_len": 2048,
                                "kind": "llamacpp"}
    assert engine.label() == "tiny-llama-f32.gguf llamacpp len=2048"
    assert engine != Engine(model=GGUF, tokenizer=TINY, max_model_len=2048)
    assert engine.replace(seed=1).kind == "llamacpp"


@pytest.mark.parametrize(("fields", "message"), [
    ({"tensor_parallel_size": 2},
     "Engine(kind='llamacpp', tensor_parallel_size=2): llama.cpp's server has no "
     "tensor_parallel_size; its fields are model, tokenizer, max_model_len, "
     "max_num_batched_tokens, seed, served_model_name; pass its own flags in extra_args"),
    ({"distributed_executor_backend": "ray"},
     "Engine(kind='llamacpp', distributed_executor_backend='ray'): llama.cpp's server has no "
     "distributed_executor_backend; its fields are model, tokenizer, max_model_len, "
     "max_num_batched_tokens, seed, served_model_name; pass its own flags in extra_args"),
])
def test_a_field_llamacpp_has_no_use_for_is_one_line(fields, message):
    with pytest.raises(InputError) as caught:
        llamacpp(**fields)
    assert str(caught.value) == message


def test_a_llamacpp_spec_needs_the_tokenizer_the_prompts_are_counted_with():
    with pytest.raises(InputError) as caught:
        Engine(kind="llamacpp", model=GGUF)
    assert str(caught.value) == (
        "Engine(kind='llamacpp', model='/models/tiny-llama-f32.gguf'): tokenizer= is needed: the "
        "prompts are made and counted with a Hugging Face tokenizer, and a GGUF file is none; "
        "name the model's tokenizer directory or Hub id")


def test_sglang_command_spells_the_engine_fields_as_its_flags():
    engine = Engine(kind="sglang", model="meta-llama/Llama-3.1-8B-Instruct",
                    tensor_parallel_size=2, max_model_len=8192, max_num_seqs=64,
                    enable_prefix_caching=False, enforce_eager=True, seed=1,
                    extra_args={"mem-fraction-static": 0.8, "enable-torch-compile": True,
                                "disable-overlap-schedule": False})
    assert engine.server_args() == [
        "--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--tp-size", "2",
        "--context-length", "8192", "--max-running-requests", "64", "--random-seed", "1",
        "--disable-radix-cache", "--disable-cuda-graph",
        # a switch given False is left out: its default
        "--enable-torch-compile", "--mem-fraction-static", "0.8"]
    assert engine.engine_kind.command(engine, "py", "h", 1)[:3] == ["py", "-m",
                                                                    "sglang.launch_server"]
    assert engine.engine_kind.command(engine, "py", "h", 1)[-5:] == [
        "--enable-metrics", "--host", "h", "--port", "1"]


def test_sglang_has_no_kv_cache_bytes():
    with pytest.raises(InputError, match=r"^Engine\(kind='sglang', kv_cache_memory_bytes=1024\): "
                                         r"SGLang has no kv_cache_memory_bytes; its fields are "):
        Engine(kind="sglang", model="m", kv_cache_memory_bytes=1024)


def test_trtllm_serve_takes_the_model_first_and_underscored_options():
    engine = Engine(kind="trtllm", model="meta-llama/Llama-3.1-8B-Instruct",
                    tensor_parallel_size=8, pipeline_parallel_size=2, max_num_seqs=256,
                    max_num_batched_tokens=8192, enable_chunked_prefill=True,
                    extra_args={"kv_cache_free_gpu_memory_fraction": 0.9})
    assert engine.engine_kind.command(engine, "py", "127.0.0.1", 9) == [
        "py", "-m", "tensorrt_llm.commands.serve", "serve", "meta-llama/Llama-3.1-8B-Instruct",
        "--tp_size", "8", "--pp_size", "2", "--max_batch_size", "256", "--max_num_tokens",
        "8192", "--enable_chunked_prefill", "--kv_cache_free_gpu_memory_fraction", "0.9",
        "--host", "127.0.0.1", "--port", "9"]


def test_only_vllm_places_its_workers_with_ray():
    ray = Engine(model=TINY, tensor_parallel_size=2, distributed_executor_backend="ray")
    assert ray.engine_kind.uses_ray(ray)
    assert not Engine(model=TINY, distributed_executor_backend="mp").engine_kind.uses_ray(
        Engine(model=TINY, distributed_executor_backend="mp"))
    assert not llamacpp().engine_kind.uses_ray(llamacpp())


def test_a_missing_gguf_file_says_what_to_point_the_model_at():
    with pytest.raises(EngineStartError) as caught:
        check_model_path(llamacpp())
    assert str(caught.value) == (
        "llama.cpp server 'tiny-llama-f32.gguf llamacpp': model path /models/tiny-llama-f32.gguf "
        "does not exist; point Engine(model=...) at a GGUF file (scripts/tiny_gguf.py makes a "
        "tiny one)")


def test_offline_mode_is_vllms_only(tmp_path):
    with pytest.raises(EngineStartError) as caught:
        run_offline(llamacpp(), [Request(prompt="hi", prompt_tokens=1, output_tokens=1)],
                    tmp_path)
    assert str(caught.value) == (
        "offline run of tiny-llama-f32.gguf llamacpp: llama.cpp's server has no offline mode "
        "here (vLLM's LLM.generate is the one there is); measure it with llmperf.run")


def test_an_sglang_log_is_read_without_its_prefix(tmp_path: Path):
    log = tmp_path / "sglang-1.log"
    log.write_text("[2026-01-02 10:00:00] server_args=...\n"
                   "[2026-01-02 10:00:05 TP0] Exception in ModelTpServer: CUDA out of memory\n"
                   "[2026-01-02 10:00:05 TP0] Traceback (most recent call last):\n"
                   '  File "scheduler.py", line 1, in run\n'
                   "RuntimeError: CUDA error: out of memory\n")
    assert telling_log_lines(log, prefix=SGLANG_PREFIX) == [
        "Exception in ModelTpServer: CUDA out of memory", "RuntimeError: CUDA error: out of memory"]
    assert SGLANG_PREFIX.match("[2026-01-02 10:00:05 TP0 PP1] x")


def test_a_llamacpp_death_line_names_its_log(tmp_path: Path):
    log = tmp_path / "llamacpp-8000.log"
    log.write_text('INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK\n'
                   "RuntimeError: llama_decode returned -3\n")
    line = death_line(llamacpp(), "during the test", "the server was killed by SIGKILL", log)
    assert re.fullmatch(r"engine tiny-llama-f32\.gguf died during the test \(the server was "
                        r"killed by SIGKILL\); last log lines: RuntimeError: llama_decode "
                        r"returned -3; log: \S+/llamacpp-8000\.log", line), line


def test_a_failed_engine_core_start_is_told_by_its_root_cause(tmp_path: Path):
    """vLLM's API server ends a failed engine core start with "See root cause above", under
    its own traceback; the line worth reading is the engine core's, further up."""
    log = tmp_path / "vllm-1.log"
    frames = ['  File "vllm/v1/engine/utils.py", line 1431, in wait_for_engine_startup',
              "    raise RuntimeError("] * 30
    log.write_text("\n".join([
        "(EngineCore pid=7) ERROR 11-26 04:54:32 [core.py:1510] ValueError: current platform "
        "cpu does not support ray.", "Traceback (most recent call last):", *frames,
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {}"]) + "\n")
    error = engine_error(Engine(model=TINY), "exited with code 1", log)
    assert str(error) == ("vLLM engine 'tiny-llama' exited with code 1: ValueError: current "
                          f"platform cpu does not support ray. (full log: {log})")


def test_a_baseline_records_the_kind_of_a_spec_that_is_not_vllm(tmp_path: Path):
    gguf = tmp_path / "models" / "tiny.gguf"
    identity = engine_identity(Engine(kind="llamacpp", model=str(gguf), tokenizer=TINY),
                               tmp_path)
    assert identity == {"model": "models/tiny.gguf", "tokenizer": TINY, "kind": "llamacpp"}
    assert "kind" not in engine_identity(Engine(model=str(gguf)), tmp_path)


def test_a_kind_from_another_package_is_found_by_its_entry_point(monkeypatch):
    """An entry point in pytest_llmperf.engine_kinds adds a kind; a built-in name stays ours."""
    import importlib.metadata

    from pytest_llmperf.engines import kinds

    found = [importlib.metadata.EntryPoint("mine",
                                           "pytest_llmperf.engines.kinds.llamacpp:LLAMACPP",
                                           kinds.ENTRY_POINTS),
             importlib.metadata.EntryPoint("other", "tests.unit.engines.test_engine_kinds:OTHER_KIND",
                                           kinds.ENTRY_POINTS)]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [entry for entry in found if entry.group == group])
    # The registry as a new process finds it: the package's kinds, then the entry points'.
    monkeypatch.setattr(kinds.KINDS, "_things", dict(kinds.KINDS._things))
    monkeypatch.setattr(kinds.KINDS, "_loaded", False)
    discovered = kinds.KINDS.all()
    assert list(discovered) == ["vllm", "llamacpp", "sglang", "trtllm", "other"]
    assert discovered["other"] is OTHER_KIND
    assert discovered["llamacpp"] is kinds.kind_named("llamacpp")


class _OtherKind:
    name = "other"


OTHER_KIND = _OtherKind()
