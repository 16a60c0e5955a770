"""Offline mode without vLLM: the Engine -> LLM kwargs mapping, the job and result files, and
the child-process handling against a fake worker module."""

from __future__ import annotations

import json
import os
import re
import textwrap
import time
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines import offline, process
from pytest_llmperf.engines.offline import (
    OfflineResult,
    llm_kwargs,
    read_job,
    run_offline,
    write_job,
)
from pytest_llmperf.engines.offline_worker import summarize, to_prompt, write_result
from pytest_llmperf.engines.server import EngineStartError
from pytest_llmperf.records import Request
from suites.tiny import KV_CACHE_BYTES, TINY_CPU


def test_tiny_engine_maps_to_llm_kwargs_without_env():
    assert llm_kwargs(TINY_CPU) == {
        "model": TINY_CPU.model,
        "load_format": "dummy",
        "max_model_len": 2048,
        "kv_cache_memory_bytes": KV_CACHE_BYTES,
        "enforce_eager": True,
    }


def test_every_field_keeps_vllm_name_and_value():
    engine = Engine(
        model="m", tokenizer="t", dtype="bfloat16", tensor_parallel_size=2, max_num_seqs=8,
        max_num_batched_tokens=4096, gpu_memory_utilization=0.5, kv_cache_dtype="fp8",
        enable_prefix_caching=False, enable_chunked_prefill=True, enforce_eager=False,
        speculative_config={"method": "ngram", "num_speculative_tokens": 3},
        served_model_name="alias", seed=7, env={"X": "1"},
    )
    assert llm_kwargs(engine) == {
        "model": "m", "tokenizer": "t", "dtype": "bfloat16", "tensor_parallel_size": 2,
        "max_num_seqs": 8, "max_num_batched_tokens": 4096, "gpu_memory_utilization": 0.5,
        "kv_cache_dtype": "fp8", "enable_prefix_caching": False, "enable_chunked_prefill": True,
        "enforce_eager": False,  # False is a choice, not "vLLM's default": it is passed
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 3},
        "served_model_name": "alias", "seed": 7,
    }


def test_extra_args_lose_dashes_and_keep_values():
    engine = Engine(model="m", extra_args={
        "max-num-partial-prefills": 2,
        "--async-scheduling": True,
        "disable_log_stats": False,
        "compilation-config": '{"mode": 0}',  # what a user would type for `vllm serve`
        "hf-overrides": {"rope_scaling": {"type": "linear"}},
        "tokenizer-mode": "auto",
    })
    assert llm_kwargs(engine) == {
        "model": "m",
        "max_num_partial_prefills": 2,
        "async_scheduling": True,
        "disable_log_stats": False,
        "compilation_config": {"mode": 0},
        "hf_overrides": {"rope_scaling": {"type": "linear"}},
        "tokenizer_mode": "auto",
    }


def test_job_file_round_trip(tmp_path):
    requests = [
        Request(prompt=tuple(np.array([5, 6, 7], dtype=np.int64)), prompt_tokens=3,
                output_tokens=4),  # numpy ids, as the prompt builders may produce
        Request(prompt="Hello there", prompt_tokens=2, output_tokens=1),
    ]
    path = tmp_path / "job.json"
    write_job(path, TINY_CPU, requests)
    kwargs, back = read_job(path)
    assert kwargs == llm_kwargs(TINY_CPU)
    assert back == requests
    assert all(type(t) is int for t in back[0].prompt)


def test_job_file_of_another_version_is_refused(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"version": 99, "llm_kwargs": {}, "requests": []}))
    with pytest.raises(ValueError, match="version 99"):
        read_job(path)


def test_prompts_become_vllm_prompts():
    assert to_prompt("some text") == "some text"
    assert to_prompt((1, 2, np.int64(3))) == {"prompt_token_ids": [1, 2, 3]}


def _output(prompt_len: int, output_len: int) -> SimpleNamespace:
    """The two RequestOutput attributes the worker reads."""
    return SimpleNamespace(prompt_token_ids=list(range(prompt_len)),
                           outputs=[SimpleNamespace(token_ids=list(range(output_len)))])


def test_summarize_counts_vllm_tokens_and_mismatches():
    requests = [Request(prompt=(1,) * 10, prompt_tokens=10, output_tokens=5)] * 3
    outputs = [_output(10, 5), _output(11, 5), _output(10, 3)]  # text prompts may gain a BOS
    assert summarize(outputs, requests) == {
        "requests": 3, "prompt_tokens": 31, "output_tokens": 13, "length_mismatches": 1,
    }
    with pytest.raises(RuntimeError, match="2 outputs for 3 requests"):
        summarize(outputs[:2], requests)


def test_result_is_written_whole(tmp_path):
    path = tmp_path / "result.json"
    write_result(path, {"requests": 1})
    assert json.loads(path.read_text()) == {"requests": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_throughputs_come_from_counts_and_generate_time():
    result = OfflineResult.from_counts({
        "requests": 64, "prompt_tokens": 8192, "output_tokens": 4096, "length_mismatches": 0,
        "elapsed_s": 2.0, "engine_start_s": 20.0,
    })
    assert result.output_throughput_tok_s == 2048.0
    assert result.total_throughput_tok_s == (8192 + 4096) / 2.0
    assert result.request_throughput_req_s == 32.0
    assert result.engine_start_s == 20.0  # reported, never part of the throughput


def test_no_requests_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no requests"):
        run_offline(TINY_CPU, [], tmp_path)


def test_missing_model_path_fails_before_starting(tmp_path):
    engine = TINY_CPU.replace(model=str(tmp_path / "no-such-model"))
    with pytest.raises(EngineStartError, match="model path .* does not exist"):
        run_offline(engine, [Request(prompt=(1,), prompt_tokens=1, output_tokens=1)], tmp_path)
    assert list(tmp_path.iterdir()) == []


# A stand-in for offline_worker: its behaviour comes from FAKE_MODE in the Engine's env, which
# also shows that the env reaches the child.
FAKE_WORKER = textwrap.dedent("""
    import json, os, subprocess, sys, time
    job, result = sys.argv[1:]
    mode = os.environ["FAKE_MODE"]
    if mode == "ok":
        n = len(json.load(open(job))["requests"])
        json.dump({"requests": n, "prompt_tokens": 3 * n, "output_tokens": 2 * n,
                   "length_mismatches": 0, "elapsed_s": 0.5, "engine_start_s": 1.0},
                  open(result, "w"))
    elif mode == "crash":
        print("INFO loading", flush=True)
        print("ValueError: the model is broken", flush=True)
        print("INFO shutting down", flush=True)
        sys.exit(3)
    elif mode == "hang":
        # A grandchild like vLLM's engine core: it must die with the worker.
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open(os.environ["FAKE_PIDS"], "w").write(f"{os.getpid()} {sleeper.pid}")
        time.sleep(120)
""")


@pytest.fixture
def fake_worker(tmp_path, monkeypatch):
    (tmp_path / "fake_offline_worker.py").write_text(FAKE_WORKER)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(offline, "WORKER_MODULE", "fake_offline_worker")
    return tmp_path


REQUESTS = [Request(prompt=(1, 2, 3), prompt_tokens=3, output_tokens=2)] * 4


def test_child_result_is_returned(fake_worker):
    result = run_offline(Engine(model="fake", env={"FAKE_MODE": "ok"}), REQUESTS,
                         fake_worker / "logs")
    assert (result.requests, result.prompt_tokens, result.output_tokens) == (4, 12, 8)
    assert result.output_throughput_tok_s == 16.0
    assert result.log_path.parent == fake_worker / "logs" and result.log_path.is_file()


def test_failed_child_gives_one_line_with_its_error_and_log(fake_worker):
    with pytest.raises(EngineStartError) as info:
        run_offline(Engine(model="fake", env={"FAKE_MODE": "crash"}), REQUESTS,
                    fake_worker / "logs")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("vLLM engine 'fake' (offline) exited with code 3: "
                              "ValueError: the model is broken (full log: ")
    log = re.search(r"\(full log: (\S+\.log)\)$", message)
    assert log and "INFO shutting down" in open(log.group(1)).read()


def test_child_without_result_is_an_error(fake_worker):
    with pytest.raises(EngineStartError, match=r"\(offline\) exited without a result: "):
        run_offline(Engine(model="fake", env={"FAKE_MODE": "none"}), REQUESTS,
                    fake_worker / "logs")


def test_timeout_ends_the_child_and_its_children(fake_worker, monkeypatch):
    pids_file = fake_worker / "pids"
    engine = Engine(model="fake", env={"FAKE_MODE": "hang", "FAKE_PIDS": str(pids_file)})
    began = time.monotonic()
    with pytest.raises(EngineStartError, match=r"\(offline\) did not finish in 3 s: "):
        run_offline(engine, REQUESTS, fake_worker / "logs", timeout_s=3)
    assert time.monotonic() - began < 3 + process.STOP_TIMEOUT_S
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 2 and not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_another_vllm_install_is_refused_offline_in_one_line(tmp_path):
    # The offline worker is this package's code; only served engines run with Engine(python=).
    from pytest_llmperf.engines.errors import EngineStartError
    from pytest_llmperf.records import Request
    from tests.conftest import REPO

    engine = Engine(model=str(REPO / "suites/models/tiny-llama"), python="/usr/bin/python3")
    with pytest.raises(EngineStartError) as excinfo:
        offline.run_offline(engine, [Request(prompt="hi", prompt_tokens=1, output_tokens=1)],
                            tmp_path)
    assert str(excinfo.value) == (
        "offline run of tiny-llama: Engine(python=...) applies to served engines only; offline "
        "runs use this process's vLLM (drop python= here, or measure with llmperf.run)")
    assert not list(tmp_path.iterdir())  # refused before anything was started or written
