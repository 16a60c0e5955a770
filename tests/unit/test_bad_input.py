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

from pytest_llmperf import SLO, Engine, Workload
from pytest_llmperf.engines.leases import GpuLeases
from pytest_llmperf.engines.process import check_model_path
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.plugin.fixture import TestOptions
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.session.judge import known_metric as _known_metric
from pytest_llmperf.session.settings import resolve
from pytest_llmperf.verdict import references
from pytest_llmperf.workloads.datasets import CONVERSATION_FORMAT, SHAREGPT_FORMAT
from pytest_llmperf.workloads.vocab import vocab_from_config
from tests.conftest import REPO

DOC = REPO / "docs" / "bad-input.md"
ARCH = REPO / "suites" / "models" / "tiny-llama-arch"  # a config.json and nothing else
NODEID = "suites/test_x.py::test_x"
WHOLE = "expected a whole number >= 1"
DEFAULT = ", or None for vLLM's default"
# A synthetic acceptance pin's config without the pin (engines/speculative.py writes one).
PIN = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2,
       "prompt_lookup_max": 4, "rejection_sample_method": "synthetic"}


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


def conversation_file(records: list, format: str = "sharegpt",
                      **options) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / "convs.json").write_text(json.dumps(records))
        Workload.conversation_file(tmp / "convs.json", format=format, **options)

    return make


def sharegpt(*messages: tuple[str, object], rid: str = "a") -> dict:
    return {"id": rid, "conversations": [{"from": f, "value": v} for f, v in messages]}


def turn_slo(name: str) -> Callable[[Path], None]:
    """An SLO naming `name`, judged on a real 2-session, 2-turn conversation's metrics as the
    session judges a test (session.judge), which fails the test with the judgement's line."""
    def make(tmp: Path) -> None:
        records = []
        for session in range(2):
            for turn in (1, 2):
                due = session * 0.01 + turn
                chunks = [due + 0.02 + k * 0.01 for k in range(4)]
                records.append(RequestRecord(
                    index=len(records), expected_prompt_tokens=8, expected_output_tokens=4,
                    scheduled_s=due, sent_s=due, chunk_times_s=chunks, chunk_tokens=[1] * 4,
                    done_s=chunks[-1], usage_prompt_tokens=8, usage_output_tokens=4,
                    session=session, turn=turn))
        metrics = compute_metrics(records)
        judgement = references.judge(references.Current.of([metrics]), None, slo=SLO(max={name: 0.05}),
                                known=_known_metric(metrics))
        if judgement.failed:
            raise ValueError(judgement.failure_text())

    return make


TWO_TURNS = (("human", "q1"), ("gpt", "r1"), ("human", "q2"), ("gpt", "r2"))
SKIP_HINT = "fix the record, or pass skip_bad_records=True to leave such records out"
TURN_HAS = "ttft_s.p50, ttft_s.p90, ttft_s.mean, e2el_s.p50, e2el_s.p90, e2el_s.mean, failed"
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
    ('Engine(model=M, speculative_config={"num_speculative_tokens": 3, "rejection_sample_method": '
     '"synthetic", "synthetic_acceptance_rates": [1.2, 0.5, 0.1], ...})',
     engine(speculative_config={**PIN, "synthetic_acceptance_rates": [1.2, 0.5, 0.1]}),
     "Engine(speculative_config=...): synthetic_acceptance_rates=[1.2, 0.5, 0.1] has a rate "
     "outside [0, 1]: each is the chance that the draft's tokens up to that position are all "
     "accepted"),
    ('Engine(model=M, speculative_config={"num_speculative_tokens": 3, "rejection_sample_method": '
     '"synthetic", "synthetic_acceptance_length": 4.5, ...})',
     engine(speculative_config={**PIN, "synthetic_acceptance_length": 4.5}),
     "Engine(speculative_config=...): synthetic_acceptance_length=4.5 is outside [1, 4]: a draft "
     "of num_speculative_tokens=3 accepts 1 to 4 tokens, the bonus token included"),
    ('Engine(model=M, extra_args={"swap-space": None})', engine(extra_args={"swap-space": None}),
     "Engine(extra_args={'swap-space': None}): expected a dict of vLLM flag names to values "
     "(True for a bare flag, False for --no-<flag>, a list for a flag of several values), e.g. "
     "{'async-scheduling': True}"),
    ('Engine(model=M, env={"OMP_NUM_THREADS": None})', engine(env={"OMP_NUM_THREADS": None}),
     "Engine(env={'OMP_NUM_THREADS': None}): expected a dict of environment variable names to "
     "strings or numbers, e.g. {'VLLM_CPU_OMP_THREADS_BIND': '0'}"),
    ("Engine(model=M, data_parallel_size=0)", engine(data_parallel_size=0),
     f"Engine(data_parallel_size=0): {WHOLE}{DEFAULT}"),
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
    ('LLMPERF_COST_PER_HOUR="h100=2.49/gpu, cpu=0.1/gpu"',
     option(env={"LLMPERF_COST_PER_HOUR": "h100=2.49/gpu, cpu=0.1/gpu"}),
     "$LLMPERF_COST_PER_HOUR='h100=2.49/gpu, cpu=0.1/gpu': cpu=0.1/gpu: hardware class cpu has "
     "no GPUs; price the machine (cpu=0.1) or one engine (cpu=0.1/engine)"),
    ("llmperf_cost_per_hour = 2.49/node in pytest.ini",
     option(ini={"llmperf_cost_per_hour": "2.49/node"}),
     "ini llmperf_cost_per_hour='2.49/node': expected US dollars per hour, a number above 0: the "
     "machine's (2.49), one GPU's (2.49/gpu) or one engine's (2.49/engine), or one such price "
     "per hardware class (h100=2.49/gpu, cpu=0.10; classes: h100, h200, a100-80gb, a100-40gb, "
     "gpu, cpu)"),
    ("@pytest.mark.llmperf(repeat=0)", marker(repeat=0),
     f"{NODEID}: @pytest.mark.llmperf: repeat is a whole number >= 1, got 0"),
    ("@pytest.mark.llmperf(max_error_rate=5)", marker(max_error_rate=5),
     f"{NODEID}: @pytest.mark.llmperf: max_error_rate is a fraction from 0 to 1 (0.01 lets 1% "
     "of the requests fail), got 5"),
    ("@pytest.mark.llmperf(tolerance=10)", marker(tolerance=10),
     f"{NODEID}: @pytest.mark.llmperf: tolerance is a fraction (0.1 means 10%) from 0 to 4, "
     "got 10"),
    ('@pytest.mark.llmperf(client_check="off")', marker(client_check="off"),
     f"{NODEID}: @pytest.mark.llmperf: client_check is one of fail, warn (as "
     "--llmperf-client-check), got 'off'"),
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
    ('Workload.conversation_file(PATH, format="sharegpt"), a record that is a string',
     conversation_file(["text"]),
     f"PATH/convs.json: record 0: is a string, not an object; expected {SHAREGPT_FORMAT}"),
    ('Workload.conversation_file(PATH, format="sharegpt"), a record without "conversations"',
     conversation_file([{"id": "a"}]),
     'PATH/convs.json: record 0 (id \'a\'): "conversations" is missing or not a list; expected '
     f"{SHAREGPT_FORMAT}"),
    ('Workload.conversation_file(PATH, format="sharegpt"), a message without "from"',
     conversation_file([{"id": "a", "conversations": [{"value": "hi"}]}]),
     'PATH/convs.json: record 0 (id \'a\'): conversations[0]: "from" is missing; expected '
     f"{SHAREGPT_FORMAT}"),
    ('Workload.conversation_file(PATH, format="sharegpt"), a message whose "value" is 3',
     conversation_file([sharegpt(("human", 3))]),
     'PATH/convs.json: record 0 (id \'a\'): conversations[0]: "value" is a number, not a string; '
     f"expected {SHAREGPT_FORMAT}"),
    ('Workload.conversation_file(PATH, format="sharegpt"), a message "from": "robot"',
     conversation_file([sharegpt(("human", "q"), ("robot", "r"))]),
     'PATH/convs.json: record 0 (id \'a\'): conversations[1]: "from" is \'robot\', not one of '
     f"human, user, bard, bing, chatgpt, gpt, system; {SKIP_HINT}"),
    ('Workload.conversation_file(PATH, format="sharegpt"), a message of blank "value"',
     conversation_file([sharegpt(("human", "q"), ("gpt", " "))]),
     'PATH/convs.json: record 0 (id \'a\'): conversations[1]: "value" is empty; '
     f"{SKIP_HINT}"),
    ('Workload.conversation_file(PATH, format="sharegpt"), two user messages in a row',
     conversation_file([sharegpt(("human", "q"), ("human", "q again"), ("gpt", "r"))]),
     'PATH/convs.json: record 0 (id \'a\'): conversations[1]: "from" is \'human\' right after '
     f"another user message (a user message follows an answer); {SKIP_HINT}"),
    ('Workload.conversation_file(PATH, format="sharegpt"), two answers in a row',
     conversation_file([sharegpt(("human", "q"), ("gpt", "r"), ("gpt", "r again"))]),
     'PATH/convs.json: record 0 (id \'a\'): conversations[2]: "from" is \'gpt\' right after '
     f"another answer (an answer follows a user message); {SKIP_HINT}"),
    ('Workload.conversation_file(PATH, format="inference-benchmarker"), a system message after '
     "the first",
     conversation_file([{"id": "b", "conversations": [
         {"role": r, "content": c} for r, c in (("user", "q"), ("assistant", "r"),
                                                ("system", "late"))]}],
         format="inference-benchmarker"),
     'PATH/convs.json: record 0 (id \'b\'): conversations[2]: "role" is \'system\' after the '
     "first message (only a conversation's first message may be its system prompt); "
     f"{SKIP_HINT}"),
    ('Workload.conversation_file(PATH, format="inference-benchmarker"), a message without '
     '"role"',
     conversation_file([sharegpt(("human", "q"), rid="c")], format="inference-benchmarker"),
     'PATH/convs.json: record 0 (id \'c\'): conversations[0]: "role" is missing; expected '
     f"{CONVERSATION_FORMAT}"),
    ('Workload.conversation_file(PATH, format="sharegpt"), no conversation of 2 turns',
     conversation_file([sharegpt(("human", "q"), ("gpt", "r"))]),
     f"PATH/convs.json: no conversation of 2 or more turns; expected {SHAREGPT_FORMAT}"),
    ('Workload.conversation_file(PATH, format="sharegpt", sessions=3), one conversation in PATH',
     conversation_file([sharegpt(*TWO_TURNS)], sessions=3),
     "PATH/convs.json: 1 conversations of 2 or more turns, and sessions=3 asks for more: lower "
     "sessions"),
    ('Workload.conversation_file(PATH, format="vicuna")',
     conversation_file([sharegpt(*TWO_TURNS)], format="vicuna"),
     "conversation file format must be one of sharegpt, inference-benchmarker, got 'vicuna'"),
    ('Workload.conversation_file(PATH, format="sharegpt", sessions=0)',
     conversation_file([sharegpt(*TWO_TURNS)], sessions=0),
     "sessions must be an int >= 1, or None for every conversation in the file, got 0"),
    ('Workload.conversation_file(PATH, format="sharegpt", max_turns=1)',
     conversation_file([sharegpt(*TWO_TURNS)], max_turns=1),
     "max_turns must be an int >= 2 (one turn carries no earlier answer), or None for every "
     "turn, got 1"),
    ('SLO(max={"turn1:tpot_s.p50": ...}) on a conversation (a metric no turn has)',
     turn_slo("turn1:tpot_s.p50"),
     f"SLO: SLO names unknown metric 'turn1:tpot_s.p50' (a turn has {TURN_HAS})"),
    ('SLO(max={"turn0:ttft_s.p50": ...}) (turns count from 1)', turn_slo("turn0:ttft_s.p50"),
     "SLO: SLO names unknown metric 'turn0:ttft_s.p50' (a turn's metric is turn<N>:<metric>, N "
     "from 1: turn1:ttft_s.p50)"),
    ('SLO(max={"turn9:ttft_s.p50": ...}) on a conversation of 2 turns',
     turn_slo("turn9:ttft_s.p50"),
     "SLO: SLO names unknown metric 'turn9:ttft_s.p50' (this run has no turn 9)"),
    ('SLO(min={"server:spec_decode_acceptance_rate": ...}) on an engine without speculative '
     'decoding',
     turn_slo("server:spec_decode_acceptance_rate"),
     "SLO: SLO names unknown metric 'server:spec_decode_acceptance_rate' (this run's server did "
     "not report it: server metrics are read from vLLM's /metrics; spec_decode_* needs "
     "speculative decoding)"),
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
