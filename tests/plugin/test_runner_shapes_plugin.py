"""A baseline's hardware is the runner shape the engine uses: the committed one-GPU H200 tables
gate a one-GPU engine on an 8x H200 node, and an engine on 8 GPUs has a table of its own.

No GPU here: the stand-in run replays the first of the two real H200 runs
(tests/unit/data/h200_reruns.json; the committed table is the second), scaled by FAKE_SLOWER;
everything after the measurement is the real plugin.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.plugin.lines import assert_lines

REPO = Path(__file__).resolve().parents[2]
TABLES = REPO / "baselines/h200/test_gpu_llama8b.toml"
RERUNS = REPO / "tests/unit/data/h200_reruns.json"

CONFTEST = '''
import dataclasses, json, os
import pytest
from pytest_llmperf.plugin import hooks as plugin
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.metrics.result import Result

RUN_1 = json.loads(open(os.environ["H200_RERUNS"]).read())["runs"][0]["results"]
LATENCIES = ("ttft_s", "tpot_s", "itl_s", "icl_s", "e2el_s")
RATES = ("output_throughput_tok_s", "total_throughput_tok_s", "request_throughput_req_s",
         "prompt_throughput_tok_s")

def one_record():
    chunks = [0.1 + k * 0.01 for k in range(10)]
    return [RequestRecord(index=0, expected_prompt_tokens=8, expected_output_tokens=10,
                          scheduled_s=0.0, sent_s=0.0, chunk_times_s=chunks,
                          chunk_tokens=[1] * 10, done_s=chunks[-1], usage_prompt_tokens=8,
                          usage_output_tokens=10)]

def replayed(key, slower):
    """The H200's first run of `key` (the interactive test's for a test it did not measure),
    every latency `slower` times and every throughput 1/`slower` times as much."""
    values = RUN_1.get(key, RUN_1["test_interactive_limits_at_concurrency_16"])
    metrics = compute_metrics(one_record())
    changes = {}
    for name in LATENCIES:
        summary = getattr(metrics, name)
        changes[name] = dataclasses.replace(summary, **{
            stat: values[f"{name}.{stat}"] * slower for stat in ("mean", "p50", "p90", "p95", "p99")
            if f"{name}.{stat}" in values})
    changes.update({name: values[name] / slower for name in RATES if name in values})
    return dataclasses.replace(metrics, **changes)

@pytest.fixture(autouse=True)
def _inject(request, monkeypatch):
    session = request.config.stash[plugin.SESSION_KEY]
    runner, ledger = session.runner, session.ledger
    def run(id, engine, workload, repeat, limits=None):
        metrics = replayed(id.key, float(os.environ.get("FAKE_SLOWER", "1")))
        result = Result(test_id=id.format(), key=id.key, engine=runner.engine_identity(engine),
                        engine_label=engine.label(), workload=workload.to_dict(),
                        workload_label=workload.label(), metrics=metrics, runs=(metrics,),
                        records=())
        return ledger.add(id, result)
    monkeypatch.setattr(runner, "run", run)
'''

# The committed tables' engine and workload (suites/gpu.py LLAMA_8B, suites/test_gpu_llama8b.py),
# and the same engine on 8 GPUs.
SUITE = '''
from pathlib import Path
import pytest
from pytest_llmperf import Engine, Workload

LLAMA_8B = Engine(model=str(Path(__file__).parent / "suites/models/llama-3.1-8b"),
                  load_format="dummy", max_model_len=16384, max_num_seqs=1024,
                  max_num_batched_tokens=8192, gpu_memory_utilization=0.9,
                  enable_prefix_caching=True, extra_args={"skip-tokenizer-init": True})

def interactive():
    return Workload.fixed(input_tokens=1024, output_tokens=128, num_requests=320,
                          concurrency=16, warmup_requests=16)

@pytest.mark.h200
@pytest.mark.engine(LLAMA_8B)
def test_interactive_limits_at_concurrency_16(llmperf):
    llmperf.run(interactive())

@pytest.mark.h200
@pytest.mark.engine(LLAMA_8B.replace(tensor_parallel_size=8))
def test_tp8(llmperf):
    llmperf.run(interactive())
'''


@pytest.fixture
def node(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    """An 8x H200 node's checkout: the committed H200 tables, the model folder the engine names,
    the suite."""
    monkeypatch.setenv("H200_RERUNS", str(RERUNS))
    (pytester.path / "baselines/h200").mkdir(parents=True)
    shutil.copy(TABLES, pytester.path / "baselines/h200")
    shutil.copytree(REPO / "suites/models/llama-3.1-8b",
                    pytester.path / "suites/models/llama-3.1-8b")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_gpu_llama8b=SUITE)
    return pytester


def run(node: pytest.Pytester, *args: str):
    return node.runpytest("-p", "no:cacheprovider", "--llmperf-hardware", "h200:8",
                          "--llmperf-history", "off", "--llmperf-disturbance", "off", *args)


def test_the_committed_one_gpu_tables_gate_a_one_gpu_engine_on_an_8_gpu_node(node):
    result = run(node, "-k", "interactive", "--llmperf-require-baseline")
    result.assert_outcomes(passed=1, deselected=1)
    assert "other hardware" not in result.stdout.str()


def test_a_loss_beyond_the_band_fails_naming_where_the_band_came_from(node, monkeypatch):
    monkeypatch.setenv("FAKE_SLOWER", "1.1")
    result = run(node, "-k", "interactive", "--llmperf-require-baseline")
    result.assert_outcomes(failed=1, deselected=1)
    # The committed table's spread: the prior measured on H200s (docs/noise.md).
    assert_lines(result, "tpot_s.p90 regressed: 8.1 ms vs baseline 7.6 ms (+7.7%, allowed +4.8% by "
                         "3 x run-to-run spread 1.6% (prior), lower is better) [baselines/h200/"
                         'test_gpu_llama8b.toml :: "test_interactive_limits_at_concurrency_16"]*')


def test_an_engine_on_8_gpus_without_its_table_gets_one_line_and_the_bootstrap_command(node):
    result = run(node, "-k", "tp8", "--llmperf-require-baseline")
    result.assert_outcomes(failed=1, deselected=1)
    line = ('no baseline for NVIDIA H200, engine on 8 GPUs: baselines/h200-8gpu/'
            'test_gpu_llama8b.toml has no ["test_tp8"] (--llmperf-require-baseline); make this '
            "runner shape's first baselines with: llmperf bootstrap-baselines --marker h200 "
            "test_gpu_llama8b.py")
    lines = result.stdout.lines
    start = next(i for i, text in enumerate(lines) if text.startswith("___") and "test_tp8" in text)
    assert lines[start + 1:lines.index(next(t for t in lines if "= llmperf =" in t))] == [line]


def test_an_engine_on_8_gpus_writes_its_own_table_beside_the_one_gpu_ones(node):
    run(node, "-k", "tp8", "--llmperf-update-baselines").assert_outcomes(passed=1, deselected=1)
    assert (node.path / "baselines/h200-8gpu/test_gpu_llama8b.toml").is_file()
    assert TABLES.read_text() == (node.path / "baselines/h200/test_gpu_llama8b.toml").read_text()
    run(node, "--llmperf-require-baseline").assert_outcomes(passed=2)
