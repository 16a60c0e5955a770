"""Every bad input in docs/bad-input.md gets exactly the line that table shows.

Each case writes the bad input where a user would (an Engine, an option's environment variable
or ini key, a marker, a file) and asserts the whole line. The table in the docs is rendered from
these cases, and the last test fails if the docs and the cases part ways.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from pytest_llmperf import Engine, Workload
from pytest_llmperf.engines.leases import GpuLeases
from pytest_llmperf.engines.process import check_model_path
from pytest_llmperf.plugin.fixture import TestOptions
from pytest_llmperf.session.settings import resolve
from pytest_llmperf.workloads.vocab import vocab_from_config
from tests.conftest import REPO

DOC = REPO / "docs" / "bad-input.md"
ARCH = REPO / "suites" / "models" / "tiny-llama-arch"  # a config.json and nothing else
NODEID = "suites/test_x.py::test_x"
WHOLE = "expected a whole number >= 1"
DEFAULT = ", or None for vLLM's default"


def engine(**fields) -> Callable[[Path], None]:
    return lambda tmp: Engine(**{"model": "m", **fields})


def option(env=None, ini=None) -> Callable[[Path], None]:
    # The plugin shows this line as "ERROR: pytest-llmperf: <line>", a usage error.
    return lambda tmp: resolve(lambda name: None, lambda key: (ini or {}).get(key),
                               environ=env or {})


def marker(**kwargs) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        try:
            TestOptions(**kwargs)
        except ValueError as exc:  # as fixture.options_of reports it
            raise ValueError(f"{NODEID}: @pytest.mark.llmperf: {exc}") from None

    return make


def config_json(text: str) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / "model").mkdir()
        (tmp / "model" / "config.json").write_text(text)
        vocab_from_config(tmp / "model")

    return make


def dataset(records: list, **options) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / "data.json").write_text(json.dumps(records))
        Workload.dataset(tmp / "data.json", num_requests=2, concurrency=1, **options).build(
            vocab_from_config(ARCH))

    return make


def jsonl(text: str) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / "data.jsonl").write_text(text)
        Workload.dataset(tmp / "data.jsonl", num_requests=2, concurrency=1).build(
            vocab_from_config(ARCH))

    return make


NO_USER = [{"conversations": [{"role": "system", "content": "be brief"}]}]
USER_ONLY = [{"conversations": [{"role": "user", "content": "hello"}]}]

# (what the user wrote, as the docs show it; how to write it; the line it gets, PATH standing for
# the file's path)
CASES: list[tuple[str, Callable[[Path], None], str]] = [
    ("Engine(model=M, max_num_seqs=-5)", engine(max_num_seqs=-5),
     f"Engine(max_num_seqs=-5): {WHOLE}{DEFAULT}"),
    ('Engine(model=M, tensor_parallel_size="2")', engine(tensor_parallel_size="2"),
     f"Engine(tensor_parallel_size='2'): {WHOLE}{DEFAULT}"),
    ("Engine(model=M, max_model_len=2048.0)", engine(max_model_len=2048.0),
     f"Engine(max_model_len=2048.0): {WHOLE}{DEFAULT}"),
    ("Engine(model=M, seed=-1)", engine(seed=-1),
     f"Engine(seed=-1): expected a whole number >= 0{DEFAULT}"),
    ("Engine(model=M, gpu_memory_utilization=90)", engine(gpu_memory_utilization=90),
     "Engine(gpu_memory_utilization=90): expected a fraction of GPU memory above 0 and at most 1 "
     f"(e.g. 0.9){DEFAULT}"),
    ('Engine(model=M, enforce_eager="yes")', engine(enforce_eager="yes"),
     f"Engine(enforce_eager='yes'): expected True or False{DEFAULT}"),
    ('Engine(model=M, dtype="")', engine(dtype=""),
     f"Engine(dtype=''): expected a non-empty string{DEFAULT}"),
    ('Engine(model=M, speculative_config="ngram")', engine(speculative_config="ngram"),
     "Engine(speculative_config='ngram'): expected a dict (or its JSON string), e.g. "
     f"{{'method': 'ngram', 'num_speculative_tokens': 3}}{DEFAULT}"),
    ('Engine(model=M, extra_args={"swap-space": None})', engine(extra_args={"swap-space": None}),
     "Engine(extra_args={'swap-space': None}): expected a dict of vLLM flag names to values "
     "(True for a bare flag, False for --no-<flag>, a list for a flag of several values), e.g. "
     "{'async-scheduling': True}"),
    ('Engine(model=M, env={"OMP_NUM_THREADS": None})', engine(env={"OMP_NUM_THREADS": None}),
     "Engine(env={'OMP_NUM_THREADS': None}): expected a dict of environment variable names to "
     "strings or numbers, e.g. {'VLLM_CPU_OMP_THREADS_BIND': '0'}"),
    ('Engine(model="")', lambda tmp: Engine(model=""),
     "Engine(model=''): expected a local model directory or a Hugging Face model id (a "
     "non-empty string)"),
    ('Engine(model="./no-such-model") (checked before vLLM starts)',
     lambda tmp: check_model_path(Engine(model="./no-such-model")),
     "vLLM engine 'no-such-model': model path ./no-such-model does not exist; point "
     "Engine(model=...) at a local model directory or a Hugging Face model id"),
    ("Engine(model=M, tensor_parallel_size=8) on a machine with 1 GPU",
     lambda tmp: GpuLeases(["0"], lease_dir=tmp).acquire(8),
     "an engine needs 8 GPUs; this process sees 1 (0)"),
    ("LLMPERF_REPEAT=0 in the environment", option(env={"LLMPERF_REPEAT": "0"}),
     f"$LLMPERF_REPEAT='0': {WHOLE}"),
    ("llmperf_keep_engines = two in pytest.ini", option(ini={"llmperf_keep_engines": "two"}),
     f"ini llmperf_keep_engines='two': {WHOLE}"),
    ("LLMPERF_ENGINE_NICE=20", option(env={"LLMPERF_ENGINE_NICE": "20"}),
     "$LLMPERF_ENGINE_NICE='20': expected auto, or a niceness from 0 to 19"),
    ("LLMPERF_STARTUP_TIMEOUT=0", option(env={"LLMPERF_STARTUP_TIMEOUT": "0"}),
     "$LLMPERF_STARTUP_TIMEOUT='0': expected a number of seconds above 0"),
    ("LLMPERF_STALL_TIMEOUT=-1", option(env={"LLMPERF_STALL_TIMEOUT": "-1"}),
     "$LLMPERF_STALL_TIMEOUT='-1': expected a number of seconds above 0"),
    ("llmperf_stall_timeout = 2min in pytest.ini", option(ini={"llmperf_stall_timeout": "2min"}),
     "ini llmperf_stall_timeout='2min': expected a number of seconds above 0"),
    ("@pytest.mark.llmperf(repeat=0)", marker(repeat=0),
     f"{NODEID}: @pytest.mark.llmperf: repeat is a whole number >= 1, got 0"),
    ("@pytest.mark.llmperf(max_error_rate=5)", marker(max_error_rate=5),
     f"{NODEID}: @pytest.mark.llmperf: max_error_rate is a fraction from 0 to 1 (0.01 lets 1% "
     "of the requests fail), got 5"),
    ("@pytest.mark.llmperf(tolerance=10)", marker(tolerance=10),
     f"{NODEID}: @pytest.mark.llmperf: tolerance is a fraction (0.1 means 10%) from 0 to 4, "
     "got 10"),
    ('a model\'s config.json without "vocab_size" (no tokenizer files)',
     config_json('{"architectures": ["LlamaForCausalLM"]}'),
     'PATH/model/config.json: no "vocab_size" (a whole number >= 1, e.g. 32000 for Llama 2); '
     "token-id prompts need the vocabulary's size: add it, or ship the tokenizer files "
     "(tokenizer.json) beside config.json"),
    ("a model's config.json that is not JSON", config_json('{"vocab_size": 32000,}'),
     "PATH/model/config.json: line 1, column 22: invalid JSON (Expecting property name enclosed "
     "in double quotes)"),
    ("Workload.dataset(PATH) with conversations that have no user turn", dataset(NO_USER),
     'PATH/data.json: no conversation has a non-empty "user" turn (the prompt); expected '
     'inference-benchmarker format: a list of {"conversations": [{"role": ROLE, "content": '
     'TEXT}, ...]}'),
    ("Workload.dataset(PATH) of conversations, without output_tokens=", dataset(USER_ONLY),
     "PATH/data.json: its records give no output length (inference-benchmarker conversations "
     "do not); pass one: Workload.dataset('PATH/data.json', output_tokens=N, ...)"),
    ('Workload.dataset(PATH) of JSONL, a line without "prompt"',
     jsonl('{"prompt": "hi", "output_tokens": 4}\n{"text": "hi", "output_tokens": 4}\n'),
     'PATH/data.jsonl: line 2: no string "prompt"; expected JSONL: one {"prompt": TEXT, '
     '"output_tokens": N} object per line ("prompt_tokens": N optional)'),
]


@pytest.mark.parametrize(("written", "write", "line"), CASES, ids=[c[0] for c in CASES])
def test_each_bad_input_gets_its_line(written, write, line, tmp_path):
    with pytest.raises((ValueError, RuntimeError)) as excinfo:
        write(tmp_path)
    assert str(excinfo.value) == line.replace("PATH", str(tmp_path))


def render_table() -> str:
    def cell(text: str) -> str:
        return "`" + text.replace("|", "\\|") + "`"

    rows = ["| what was written | the line it gets |", "|---|---|"]
    rows += [f"| {cell(written)} | {cell(line)} |" for written, _, line in CASES]
    return "\n".join(rows) + "\n"


def test_the_docs_table_is_these_cases():
    assert render_table() in DOC.read_text(), (
        f"docs/bad-input.md is out of date; its table should read:\n{render_table()}")
