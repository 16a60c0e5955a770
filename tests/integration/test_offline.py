"""Offline mode on the real vLLM CPU engine: counts, throughput, clean failure, nothing left."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.engines.offline import llm_kwargs, run_offline
from pytest_llmperf.engines.server import EngineStartError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads.prompts import load_tokenizer
from suites.tiny import TINY_CPU
from tests.conftest import ipc_dir_of, requires_vllm

# What runs, not how fast: beside other tests in CI (tests/integration/conftest.py).
pytestmark = [requires_vllm, pytest.mark.shares_machine]

NUM_REQUESTS, INPUT_TOKENS, OUTPUT_TOKENS = 64, 128, 64
START_FAILURE_BUDGET_S = 120
ONE_REQUEST = [Request(prompt=(5, 6, 7), prompt_tokens=3, output_tokens=4)]


def tag_engine(engine):
    """The engine with a unique marker in its env, which every process of the run inherits."""
    tag = f"llmperf-test-{uuid.uuid4().hex}"
    return engine.replace(env={**engine.environment(), "LLMPERF_TEST_TAG": tag}), tag


def processes_tagged(tag: str) -> list[str]:
    """Live processes carrying `tag`: the worker, vLLM's engine core and its workers. Unlike
    conftest's vllm_processes(), this sees only this test's processes, so it holds even while
    another session runs vLLM on the same machine."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if tag.encode() in environ and state != "Z":  # a zombie is dead, waiting to be reaped
            found.append(f"{pid} {cmdline[:120].decode(errors='replace')}")
    return found


@pytest.fixture(scope="module")
def tagged_run(tmp_path_factory):
    engine, tag = tag_engine(TINY_CPU)
    requests, _ = Workload.fixed(
        input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS, num_requests=NUM_REQUESTS,
        concurrency=1,
    ).build(load_tokenizer(TINY_CPU.model))
    began = time.perf_counter()
    result = run_offline(engine, requests, tmp_path_factory.mktemp("offline"))
    return result, tag, time.perf_counter() - began


def test_counts_are_vllms_and_exact(tagged_run):
    result, _, _ = tagged_run
    assert result.requests == NUM_REQUESTS
    assert result.output_tokens == NUM_REQUESTS * OUTPUT_TOKENS
    assert result.prompt_tokens == NUM_REQUESTS * INPUT_TOKENS  # token ids: no BOS added
    assert result.length_mismatches == 0


def test_throughput_is_tokens_over_generate_time(tagged_run):
    result, _, wall_s = tagged_run
    assert result.output_throughput_tok_s == pytest.approx(result.output_tokens / result.elapsed_s)
    assert result.total_throughput_tok_s == pytest.approx(
        (result.prompt_tokens + result.output_tokens) / result.elapsed_s)
    assert result.request_throughput_req_s == pytest.approx(NUM_REQUESTS / result.elapsed_s)
    # Engine start is measured but kept out of the throughput, as in `vllm bench throughput`.
    assert 0 < result.elapsed_s < result.engine_start_s < wall_s


def test_engine_env_reaches_the_engine(tagged_run):
    log = tagged_run[0].log_path.read_text()
    assert "VLLM_CPU_OMP_THREADS_BIND='0'" in log


def test_nothing_is_left_running(tagged_run):
    assert processes_tagged(tagged_run[1]) == []
    rpc_dir = ipc_dir_of(tagged_run[0].log_path)
    assert rpc_dir.name.startswith("llmperf-vllm-ipc-") and not rpc_dir.exists(), rpc_dir


def test_kwargs_are_names_llm_accepts():
    """Every Engine field maps to an `LLM(...)` parameter or an EngineArgs field (its **kwargs).
    Asked in a subprocess: importing vLLM here would set up its logging and warnings in the
    test process, which the package itself never does."""
    probe = (
        "import dataclasses, inspect, json\n"
        "from vllm import LLM\n"
        "from vllm.engine.arg_utils import EngineArgs\n"
        "names = set(inspect.signature(LLM.__init__).parameters)\n"
        "names |= {f.name for f in dataclasses.fields(EngineArgs)}\n"
        "print(json.dumps(sorted(names)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    accepted = set(json.loads(out.strip().splitlines()[-1]))
    # extra_args, env, python and the server's kind are the plugin's, not vLLM's arguments;
    # lora_modules is the API server's --lora-modules, which an offline LLM(...) has no name for
    # (engines/offline.py leaves it out)
    names = {f.name for f in dataclasses.fields(TINY_CPU)} - {"extra_args", "env", "python",
                                                              "kind", "lora_modules"}
    assert names - accepted == set()
    assert set(llm_kwargs(TINY_CPU)) <= accepted


def test_model_vllm_rejects_fails_with_one_line_and_leaves_nothing(tmp_path):
    """A directory without config.json: the worker starts, vLLM fails, the worker exits."""
    (tmp_path / "empty-model").mkdir()
    engine, tag = tag_engine(TINY_CPU.replace(model=str(tmp_path / "empty-model")))
    began = time.monotonic()
    with pytest.raises(EngineStartError) as info:
        run_offline(engine, ONE_REQUEST, tmp_path / "logs")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("vLLM engine 'empty-model load=dummy len=2048 kv=512MiB "
                              "eager=True' (offline) exited with code 1: ")
    assert "ValidationError" in message, "the reason is vLLM's own error line"
    log = re.search(r"\(full log: (\S+\.log)\)$", message)
    assert log and Path(log.group(1)).is_file(), message
    assert time.monotonic() - began < START_FAILURE_BUDGET_S
    assert processes_tagged(tag) == []


def test_timeout_during_engine_start_leaves_nothing(tmp_path):
    engine, tag = tag_engine(TINY_CPU)
    with pytest.raises(EngineStartError, match=r"\(offline\) did not finish in 8 s: "):
        run_offline(engine, ONE_REQUEST, tmp_path, timeout_s=8)
    assert processes_tagged(tag) == []
