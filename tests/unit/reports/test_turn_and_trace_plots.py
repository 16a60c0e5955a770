"""The TTFT-by-turn and offered-versus-achieved pictures, and a trace capacity search's probes:
run files built by runfile.run_document from records, read back by plotdata, drawn by plots.
(What the rate bins hold is tested in test_timeline.py.)"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import pytest

from pytest_llmperf.cli import main
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports import plots
from pytest_llmperf.reports.plotdata import (
    CapacitySearch,
    Probe,
    RateTimeline,
    TurnLatencies,
    capacity_searches,
    gather,
    load_of,
    rate_timelines,
    turn_latencies,
)
from pytest_llmperf.reports.runfile import run_document
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from tests.unit.fingerprints import CPU

PNG = b"\x89PNG\r\n\x1a\n"
STARTED = datetime(2026, 11, 22, 10, 4, 31, tzinfo=timezone.utc)
SUITE = "suites/test_cpu_workloads.py::"


def request(index: int, due: float, ttft: float, *, turn: int | None = None,
            prompt: int = 64, tokens: int = 8, tpot: float = 0.01) -> RequestRecord:
    chunks = [due + ttft + k * tpot for k in range(tokens)]
    return RequestRecord(index=index, expected_prompt_tokens=prompt,
                         expected_output_tokens=tokens, scheduled_s=due, sent_s=due,
                         chunk_times_s=chunks, chunk_tokens=[1] * tokens, done_s=chunks[-1],
                         usage_prompt_tokens=prompt, usage_output_tokens=tokens,
                         session=None if turn is None else index // 5, turn=turn)


def result(test: str, records: list[RequestRecord], workload: dict) -> Result:
    metrics = compute_metrics(records)
    return Result(test_id=SUITE + test, key=test, engine={"model": "tiny"}, engine_label="tiny",
                  workload=workload, workload_label="w", metrics=metrics, runs=(metrics,),
                  records=tuple(records), fingerprint=CPU)


def conversation() -> Result:
    """4 sessions x 5 turns: turn 1 prefills from nothing (26 ms), later turns hit the prefix
    cache (15 to 17 ms) while their prompts grow by 144 tokens a turn."""
    ttft = {1: 0.026, 2: 0.0148, 3: 0.0152, 4: 0.0170, 5: 0.0164}
    records = [request(s * 5 + t - 1, s * 0.01 + t * 0.5, ttft[t] * (1 + 0.1 * s), turn=t,
                       prompt=48 + (t - 1) * 144)
               for s in range(4) for t in range(1, 6)]
    return result("test_multi_turn_conversations", records,
                  {"pattern": {"type": "Sessions", "turns": 5}})


def trace_replay() -> Result:
    """48 requests over 12 s, a burst of 20 in the sixth second that the engine drains slowly:
    each request after the burst's start waits behind it."""
    dues = [i * 0.25 for i in range(20)] + [5.0 + i * 0.05 for i in range(20)] \
        + [7.0 + i * 0.6 for i in range(8)]
    records = []
    for i, due in enumerate(dues):
        backlog = max(0.0, 0.3 * (i - 20)) if 20 <= i < 40 else 0.0
        records.append(request(i, due, 0.05 + backlog))
    return result("test_mooncake_trace_replay", records,
                  {"pattern": {"type": "Trace", "requests": 48, "span_s": 11.2},
                   "source": {"type": "TraceSource", "speedup": 1.0}})


def run_file(*results: Result) -> dict:
    # Through JSON, as `llmperf plot` reads a file: NaN and int keys as a file has them.
    records = [MeasurementRecord.of(r, breakdowns=r.breakdowns) for r in results]
    document = run_document(records, fingerprint=CPU, commit=None,
                            started=STARTED)
    return json.loads(json.dumps(document))


def test_a_conversations_ttft_by_turn_from_its_run_file():
    [found] = turn_latencies(run_file(conversation()))
    assert found.test == SUITE + "test_multi_turn_conversations" and found.engine == "tiny"
    assert found.turns == [1, 2, 3, 4, 5]
    assert found.requests == [4] * 5
    assert found.prompt_tokens == [48.0, 192.0, 336.0, 480.0, 624.0]
    # 4 sessions at 1.0, 1.1, 1.2, 1.3 x the turn's TTFT: p50 is 1.15 x, p90 1.27 x.
    assert found.ttft_p50 == pytest.approx([t * 1.15 for t in (0.026, 0.0148, 0.0152, 0.017,
                                                               0.0164)])
    assert found.ttft_p90 == pytest.approx([t * 1.27 for t in (0.026, 0.0148, 0.0152, 0.017,
                                                               0.0164)])


def test_a_turn_without_completions_reads_as_nan_not_a_crash():
    document = {"llmperf": {"format": 2, "results": [{
        "key": "t", "test_id": "t", "engine_label": "e", "metrics": {}, "by_turn": {
            "2": {"requests": 3, "failed": 3}, "1": {"requests": 3, "failed": 0,
                                                      "ttft_s.p50": 0.02, "ttft_s.p90": 0.03}}}]}}
    [found] = turn_latencies(document)
    assert found.turns == [1, 2] and found.ttft_p50[0] == 0.02 and math.isnan(found.ttft_p50[1])


def test_a_trace_replays_offered_and_achieved_rate_from_its_run_file():
    document = run_file(trace_replay(), conversation())
    entry = document["llmperf"]["results"][0]["rate_over_time"]
    assert entry["bin_s"] == 1.0
    assert sum(entry["scheduled"]) == sum(entry["completed"]) == 48
    assert "rate_over_time" not in document["llmperf"]["results"][1]  # not a trace
    [found] = rate_timelines(document)
    assert found.bin_s == 1.0 and found.offered_req_s == entry["scheduled"]
    assert found.offered_req_s[5] == 20.0  # the burst: 20 due in its sixth second
    assert found.achieved_req_s[5] < found.offered_req_s[5]  # finished later, in a queue
    assert found.edges[:3] == [0.0, 1.0, 2.0] and len(found.edges) == len(entry["scheduled"]) + 1
    # Behind the trace at each second's end: 17 of the burst's 20 still queued after it.
    assert found.behind == [0, 0, 0, 0, 0, 17, 14, 11, 8, 6, 3, 0]


def test_a_capacity_probes_timeline_is_not_drawn():
    document = run_file(trace_replay())
    document["llmperf"]["results"][0]["capacity"] = {"slo": {}, "passed": True, "reason": ""}
    assert rate_timelines(document) == []


def test_a_trace_capacity_search_is_drawn_against_speedups():
    workload = {"pattern": {"type": "Trace"}, "source": {"type": "TraceSource", "speedup": 2.0}}
    assert load_of(workload) == (2.0, "speedup")
    assert load_of({"pattern": {"type": "Trace"}}) is None  # a run file from before speedups
    slo = {"max": {"ttft_s.p90": 0.1}, "min": {}}
    probes = [(1.0, True, 0.02), (2.0, True, 0.05), (4.0, False, 0.3), (2.828, True, 0.08)]
    document = {"llmperf": {"format": 2, "results": [
        {"key": f"test_cap@trace-speedup{s:g}",
         "test_id": f"{SUITE}test_cap@trace-speedup{s:g}", "engine_label": "tiny",
         "workload": {**workload, "source": {"speedup": s}},
         "metrics": {"ttft_s.p90": {"value": ttft, "spread": 0.0, "n": 1,
                                    "direction": "lower"}},
         "capacity": {"slo": slo, "passed": passed, "reason": ""}}
        for s, passed, ttft in probes]}}
    assert capacity_searches(document) == [CapacitySearch(
        SUITE + "test_cap", "tiny", {"ttft_s.p90": 0.1}, {},
        [Probe(s, passed, {"ttft_s.p90": ttft}) for s, passed, ttft in probes],
        capacity=2.828, kind="speedup")]


def test_the_pictures_are_pngs_named_after_their_tests(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    document = run_file(conversation(), trace_replay())
    data = gather([document])
    assert data.turns and isinstance(data.turns[0], TurnLatencies)
    assert data.timelines and isinstance(data.timelines[0], RateTimeline)
    names = [p.name for p in plots.pictures(data) if p.name.startswith(("turns-", "rate-"))]
    assert names == ["turns-test_cpu_workloads-test_multi_turn_conversations.png",
                     "rate-test_cpu_workloads-test_mooncake_trace_replay.png"]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(document))
    assert main(["plot", str(path), "-o", str(tmp_path / "out")]) == 0
    for name in names:
        assert (tmp_path / "out" / name).read_bytes().startswith(PNG)
