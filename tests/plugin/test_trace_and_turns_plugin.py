"""A trace replay's capacity (gated as slo_capacity_speedup) and a conversation's metrics by turn
(gated as "turn<N>:..."), as users meet them: pytester runs suites whose measurements are
injected (the session's `run` is patched: a trace's requests are served one at a time at a
known speed, a conversation's turns take the TTFTs the environment says); everything after the
measurement is the real plugin. The real engine path is the lead's (suites/)."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

CONFTEST = '''
import os
import pytest
from pytest_llmperf.client.patterns import Trace
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.plugin import hooks as plugin
from pytest_llmperf.records import RequestRecord

SERVICE_S = 0.1  # one request at a time, 0.1 s each: the fake engine serves 10 req/s

def request(i, due, start, ttft, done, turn=None, session=None):
    return RequestRecord(index=i, expected_prompt_tokens=8, expected_output_tokens=2,
                         scheduled_s=due, sent_s=due, chunk_times_s=[start + ttft, done],
                         chunk_tokens=[1, 1], done_s=done, usage_prompt_tokens=8,
                         usage_output_tokens=2, session=session, turn=turn)

def served(offsets):
    records, free = [], 0.0
    for i, due in enumerate(offsets):
        start = max(due, free)
        free = start + SERVICE_S
        records.append(request(i, due, due, start - due + 0.02, free))
    return records

def chats(workload):
    ttfts = [float(x) for x in os.environ["FAKE_TURN_TTFTS"].split(",")]
    turns = workload.pattern.turns
    records = []
    for i in range(workload.num_requests):
        session, turn = divmod(i, turns)
        due = session * 0.01 + turn * 1.0
        records.append(request(i, due, due, ttfts[turn] * (1 + 0.1 * session), due + 0.5,
                               turn + 1, session))
    return records

@pytest.fixture(autouse=True)
def _inject(request, monkeypatch):
    session = request.config.stash[plugin.SESSION_KEY]
    runner, ledger = session.runner, session.ledger
    def run(id, engine, workload, repeat, limits=None):
        if isinstance(workload.pattern, Trace):
            records = served(workload.pattern.offsets_s)
        else:
            records = chats(workload)
        runs = tuple(compute_metrics(records, limits) for _ in range(repeat))
        result = Result(test_id=id.format(), key=id.key, engine=runner.engine_identity(engine),
                        engine_label=engine.label(), workload=workload.to_dict(),
                        workload_label=workload.label(), metrics=runs[0], runs=runs,
                        records=tuple(records))
        return ledger.add(id, result)
    monkeypatch.setattr(runner, "run", run)
'''

# 21 requests 0.5 s apart: 2 req/s at the trace's own pace.
TRACE = "".join(json.dumps({"timestamp": i * 500, "input_length": 8, "output_length": 2})
                + "\n" for i in range(21))

SUITE = '''
import pytest
from pytest_llmperf import Engine, Workload
from pytest_llmperf.verdict.gate import SLO

pytestmark = pytest.mark.engine(Engine(model="m", max_num_seqs=32))

def test_trace_capacity(llmperf):
    found = llmperf.capacity(Workload.trace("trace.jsonl", format="mooncake"),
                             SLO(max={"ttft_s.p90": 0.5}), low=1.0, high=2.0, max_runs=6)
    print(f"capacity {found.speedup:.4f} knob {found.knob}")

def chat():
    return Workload.conversations(sessions=3, turns=2, input_tokens=8, output_tokens=2)

@pytest.mark.llmperf(slo=SLO(max={"turn1:ttft_s.p50": 0.05}))
def test_turn_slo(llmperf):
    llmperf.run(chat())

@pytest.mark.llmperf(slo=SLO(max={"turn7:ttft_s.p50": 0.05}))
def test_turn_slo_of_a_turn_not_run(llmperf):
    llmperf.run(chat())

@pytest.mark.llmperf(gate=("turn1:ttft_s.p50", "turn2:ttft_s.p50"))
def test_turn_gate(llmperf):
    llmperf.run(chat())
'''


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "trace.jsonl").write_text(TRACE)
    monkeypatch.setenv("FAKE_TURN_TTFTS", "0.04,0.02")
    return pytester


def output(result) -> str:
    return "\n".join(result.outlines)


def test_a_trace_capacity_is_searched_in_speedups_and_gated_as_slo_capacity_speedup(suite):
    first = suite.runpytest("-s", "-k", "trace", "--llmperf-update-baselines",
                            "--llmperf-json", "run.json")
    first.assert_outcomes(passed=1)
    # The fake serves 10 req/s, so it keeps up (KEEP_UP, 0.9) with up to 11.1 req/s offered:
    # 5.56x the trace's 2 req/s. 1, 2 and 4x pass, 8x fails; bisection: 5.66x fails (11.3 req/s
    # offered), 4.76x passes, and the 6 runs are spent.
    found = re.search(r"capacity (\S+) knob speedup", output(first))
    speedup = float(found.group(1))
    assert speedup == pytest.approx(4.7568, abs=1e-4)
    table = tomllib.loads((suite.path / "baselines/cpu/test_suite.toml").read_text())
    entry = table["test_trace_capacity"]["metrics"]["slo_capacity_speedup"]
    assert (entry["value"], entry["direction"]) == (pytest.approx(speedup, rel=1e-5), "higher")
    assert re.search(r"test_suite\.py::test_trace_capacity: slo_capacity_speedup = 4\.76 "
                     r"\(6 engine runs; not converged", output(first))
    results = json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]
    probes = [r for r in results if "capacity" in r]
    assert [r["workload"]["source"]["speedup"] for r in probes] == pytest.approx(
        [1, 2, 4, 8, 5.656854, 4.756828], rel=1e-5)
    assert [r["capacity"]["passed"] for r in probes] == [True, True, True, False, False, True]
    assert probes[3]["capacity"]["reason"].startswith("saturated: completed 10.00 req/s < 0.9 x "
                                                      "offered 16.00 req/s")
    assert probes[0]["test_id"].endswith("test_trace_capacity@trace-speedup1")
    # Each probe keeps its offered and finished requests per bin, for `llmperf plot`.
    assert sum(probes[0]["rate_over_time"]["scheduled"]) == 21
    second = suite.runpytest("-k", "trace")  # the same engine again: within the baseline's band
    second.assert_outcomes(passed=1)


def test_a_turn_slo_fails_past_its_target_and_a_turn_not_run_is_one_line(suite, monkeypatch):
    # 3 sessions at 1.0, 1.1, 1.2 x turn 1's TTFT: 44 ms at 40 ms meets the 50 ms target.
    suite.runpytest("-k", "turn_slo and not run").assert_outcomes(passed=1)
    monkeypatch.setenv("FAKE_TURN_TTFTS", "0.06,0.02")  # turn 1's median: 66 ms
    result = suite.runpytest("-k", "turn_slo")
    result.assert_outcomes(failed=2)
    text = output(result)
    assert "turn1:ttft_s.p50 missed its target: 66.0 ms, target <= 50.0 ms" in text
    assert ("SLO: SLO names unknown metric 'turn7:ttft_s.p50' (this run has no turn 7)"
            in text)


def test_turn_metrics_are_stored_in_the_baseline_and_a_slower_turn_regresses(suite, monkeypatch):
    suite.runpytest("-k", "turn_gate", "--llmperf-update-baselines").assert_outcomes(passed=1)
    table = tomllib.loads((suite.path / "baselines/cpu/test_suite.toml").read_text())
    gated = table["test_turn_gate"]["metrics"]
    assert sorted(gated) == ["turn1:ttft_s.p50", "turn2:ttft_s.p50"]
    assert gated["turn2:ttft_s.p50"]["value"] == pytest.approx(0.022)
    suite.runpytest("-k", "turn_gate").assert_outcomes(passed=1)
    monkeypatch.setenv("FAKE_TURN_TTFTS", "0.04,0.04")  # turn 2 twice as slow
    slower = suite.runpytest("-k", "turn_gate")
    slower.assert_outcomes(failed=1)
    assert re.search(r'turn2:ttft_s\.p50 regressed: 44\.0 ms vs baseline 22\.0 ms \(\+100\.0%, '
                     r'allowed \+24\.0% by 3 x run-to-run spread 8\.0% \(prior\), lower is '
                     r'better\) \[baselines/cpu/test_suite\.toml :: '
                     r'"test_turn_gate"\]', output(slower))
    assert "turn1:ttft_s.p50 regressed" not in output(slower)
