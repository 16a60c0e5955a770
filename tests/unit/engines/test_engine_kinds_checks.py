"""--llmperf-check-args for the kinds that are not vLLM (engines/arg_check.py and its worker):
llama.cpp's server's own parser for real (llama-cpp-python is installed with the llamacpp
extra), a kind whose package does not import said in the summary, and what a mixed check
says. Stand-in interpreters speak the worker's protocol where a parser is not installed."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines import arg_check
from pytest_llmperf.engines.arg_check import check_engines

TINY = "suites/models/tiny-llama"
GGUF = "/models/tiny.gguf"

needs_llama_cpp = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                     reason="llama-cpp-python is not installed (llamacpp extra)")


@pytest.fixture(autouse=True)
def no_children_left():
    yield
    arg_check.close_all()


def stand_in(tmp_path: Path, hello: str) -> str:
    """An interpreter whose `-m <worker> --kind K` answers `hello`, then takes every list;
    it records its arguments."""
    script = tmp_path / "worker.py"
    script.write_text("import json, sys\n"
                      f"open({str(tmp_path / 'argv')!r}, 'w').write(' '.join(sys.argv[1:]))\n"
                      f"print({hello!r}, flush=True)\n"
                      "for line in sys.stdin:\n"
                      "    print(json.dumps({'refusal': None}), flush=True)\n")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    python.chmod(0o755)
    return str(python)


@needs_llama_cpp
def test_llamacpp_flags_go_through_its_own_parser():
    good = Engine(kind="llamacpp", model=GGUF, tokenizer=TINY, max_model_len=2048,
                  extra_args={"n_threads": 1, "interrupt_requests": False})
    outcome = check_engines([("engine", good)])
    version = importlib.metadata.version("llama_cpp_python")
    assert outcome.failure is None
    assert outcome.summary == (
        "engine arguments checked: engine (tiny.gguf llamacpp len=2048 extra_args="
        "interrupt_requests:False,n_threads:1) (llama.cpp's server "
        f"{version}'s llama_cpp.server parser)")
    typo = good.replace(extra_args={"n_threadz": 1})
    assert check_engines([("engine", typo)]).failure == (
        "engine (tiny.gguf llamacpp len=2048 extra_args=n_threadz:1): llama.cpp's server "
        f"{version} refuses its arguments: unrecognized arguments: --n_threadz 1")
    not_a_number = good.replace(extra_args={"n_threads": "one"})
    assert check_engines([("engine", not_a_number)]).failure == (
        "engine (tiny.gguf llamacpp len=2048 extra_args=n_threads:one): llama.cpp's server "
        f"{version} refuses its arguments: argument --n_threads: invalid int value: 'one'")


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None,
                    reason="sglang is installed here: its parser checks")
def test_a_kind_whose_package_does_not_import_is_said_not_checked():
    engine = Engine(kind="sglang", model="meta-llama/Llama-3.1-8B-Instruct",
                    tensor_parallel_size=8)
    outcome = check_engines([("engine", engine)])
    assert outcome.failure is None
    assert outcome.summary == (
        "engine arguments not checked: engine (Llama-3.1-8B-Instruct sglang tp=8): SGLang's "
        "parser does not import here (ModuleNotFoundError: No module named 'sglang'); checked "
        "only where sglang is installed")


def test_each_kind_gets_its_own_child_and_the_summary_names_each_parser(tmp_path):
    vllm_side = tmp_path / "vllm"
    trt_side = tmp_path / "trt"
    for path in (vllm_side, trt_side):
        path.mkdir()
    a = Engine(model="/models/m", python=stand_in(vllm_side, '{"vllm": "9.9.9"}'))
    b = Engine(kind="trtllm", model="/models/m", tensor_parallel_size=2,
               python=stand_in(trt_side, '{"version": "1.2.1"}'))
    outcome = check_engines([("A/B side A", a), ("A/B side B", b)])
    assert outcome.summary == (
        "engine arguments checked: A/B side A (m); A/B side B (m trtllm tp=2) (vLLM 9.9.9's "
        "vllm serve parser; TensorRT-LLM 1.2.1's trtllm-serve parser)")
    assert (vllm_side / "argv").read_text() == "-m pytest_llmperf.engines.arg_check_worker"
    assert (trt_side / "argv").read_text() == ("-m pytest_llmperf.engines.arg_check_worker "
                                               "--kind trtllm")


def test_checked_and_unchecked_sides_are_both_said(tmp_path):
    a = Engine(model="/models/m", python=stand_in(tmp_path, '{"vllm": "9.9.9"}'))
    missing = tmp_path / "missing"
    missing.mkdir()
    b = Engine(kind="trtllm", model="/models/m", python=stand_in(
        missing, '{"unavailable": "ModuleNotFoundError: No module named \'tensorrt_llm\'"}'))
    outcome = check_engines([("A/B side A", a), ("A/B side B", b)])
    assert outcome.summary == (
        "engine arguments checked: A/B side A (m) (vLLM 9.9.9's vllm serve parser); not "
        "checked: A/B side B (m trtllm): TensorRT-LLM's parser does not import here "
        "(ModuleNotFoundError: No module named 'tensorrt_llm'); checked only where trtllm is "
        "installed")
