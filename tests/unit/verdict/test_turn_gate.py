"""A conversation's metrics by turn as gate names ("turn2:ttft_s.p50"): the registry resolves
them, every run's metrics carry them, and SLOs, baselines, saved runs and A/B pairs judge them
like any other metric. The pytest side is in tests/plugin/test_trace_and_turns_plugin.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports.runfile import run_document
from pytest_llmperf.reports.saved_runs import read_run
from pytest_llmperf.session.judge import known_metric as _known_metric
from pytest_llmperf.verdict import references
from pytest_llmperf.verdict.baselines import load_baseline, update_baseline
from pytest_llmperf.verdict.gate import SLO, UnknownMetricError, check_names, make_entries
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.status import Status
from tests.unit.fingerprints import CPU

GATED = ("turn1:ttft_s.p50", "turn2:ttft_s.p50", "turn2:failed")


def turn(index: int, session: int, number: int, ttft: float, *, ok: bool = True
         ) -> RequestRecord:
    due = session * 0.01 + number
    chunks = [due + ttft + k * 0.01 for k in range(4)] if ok else []
    return RequestRecord(index=index, expected_prompt_tokens=8, expected_output_tokens=4,
                         scheduled_s=due, sent_s=due, chunk_times_s=chunks,
                         chunk_tokens=[1] * len(chunks), done_s=chunks[-1] if ok else None,
                         usage_prompt_tokens=8, usage_output_tokens=4 if ok else None,
                         error=None if ok else "boom", session=session, turn=number)


def conversations(first: float = 0.03, second: float = 0.015, failed_second: int = 0):
    """3 sessions of 2 turns: turn 1's TTFT `first`, turn 2's `second` (x 1, 1.1, 1.2 by
    session); the last `failed_second` sessions' second turns fail."""
    return [turn(s * 2 + t - 1, s, t, (first if t == 1 else second) * (1 + 0.1 * s),
                 ok=not (t == 2 and s >= 3 - failed_second))
            for s in range(3) for t in (1, 2)]


def test_the_registry_resolves_a_turns_metric_to_its_own():
    assert registry.lookup("turn2:ttft_s.p50") is registry.lookup("ttft_s.p50")
    assert registry.lookup("turn12:failed") is registry.lookup("failed")
    assert registry.direction("turn3:e2el_s.p90") == "lower"
    assert registry.formatter("turn1:ttft_s.p50", 0.0123)(0.0123) == "12.3 ms"
    assert registry.turn_of("turn12:ttft_s.mean") == (12, "ttft_s.mean")
    for name in ("turn1:ttft_s.p99", "turn0:ttft_s.p50", "turn:ttft_s.p50", "turnx:failed",
                 "turn1:tpot_s.p50", "turn1ttft_s.p50"):
        assert registry.lookup(name) is None, name


@pytest.mark.parametrize(("name", "message"), [
    ("turn1:tpot_s.p50", "unknown metric 'turn1:tpot_s.p50': a turn has ttft_s.p50, ttft_s.p90, "
                         "ttft_s.mean, e2el_s.p50, e2el_s.p90, e2el_s.mean, failed"),
    ("turn0:ttft_s.p50", "unknown metric 'turn0:ttft_s.p50': a turn's metric is "
                         "turn<N>:<metric>, N from 1: turn1:ttft_s.p50"),
    ("turnx:ttft_s.p50", "unknown metric 'turnx:ttft_s.p50': a turn's metric is "
                         "turn<N>:<metric>, N from 1: turn1:ttft_s.p50"),
])
def test_a_bad_turn_name_is_one_line_saying_what_a_turn_has(name, message):
    with pytest.raises(UnknownMetricError) as excinfo:
        registry.known(name)
    assert str(excinfo.value) == message


def test_every_run_of_a_conversation_carries_its_turns_metrics():
    metrics = compute_metrics(conversations(failed_second=1))
    flat = metrics.flat()
    assert [name for name in flat if name.startswith("turn")] == [
        f"turn{t}:{name}" for t in (1, 2) for name in registry.TURN_METRICS]
    assert flat["turn1:ttft_s.p50"] == pytest.approx(0.033)  # 0.03 x 1.1
    assert flat["turn2:ttft_s.p50"] == pytest.approx(0.01575)  # two left: 0.015 x 1.05
    assert (flat["turn1:failed"], flat["turn2:failed"]) == (0.0, 1.0)
    assert metrics.get("turn2:failed") == 1.0
    single = RequestRecord(index=0, expected_prompt_tokens=8, expected_output_tokens=1,
                           scheduled_s=0.0, sent_s=0.0, chunk_times_s=[0.02], chunk_tokens=[1])
    assert not [name for name in compute_metrics([single]).flat() if name.startswith("turn")]


def test_a_slo_gates_a_turn_and_names_a_turn_the_run_lacks():
    metrics = compute_metrics(conversations())
    current = references.Current.of([metrics])
    judgement = references.judge(current, None, slo=SLO(max={"turn1:ttft_s.p50": 0.03}),
                            known=_known_metric(metrics))
    assert judgement.status == Status.MISSED
    assert judgement.failure_text() == ("turn1:ttft_s.p50 missed its target: 33.0 ms, target "
                                        "<= 30.0 ms")
    missing = references.judge(current, None, slo=SLO(max={"turn9:ttft_s.p50": 0.03,
                                                      "turn1:tpot_s.p50": 0.01}),
                          known=_known_metric(metrics))
    assert missing.error == ("SLO: SLO names unknown metrics 'turn1:tpot_s.p50' (a turn has "
                             "ttft_s.p50, ttft_s.p90, ttft_s.mean, e2el_s.p50, e2el_s.p90, "
                             "e2el_s.mean, failed), 'turn9:ttft_s.p50' (this run has no turn 9)")


def test_a_turn_name_among_others_keeps_the_reports_hint():
    with pytest.raises(UnknownMetricError) as excinfo:
        check_names(["turn3:ttft_s.p50", "ttft_s.p9"], ["ttft_s.p90"])
    assert str(excinfo.value) == (
        "SLO names unknown metrics 'turn3:ttft_s.p50' (this run has no turn 3), 'ttft_s.p9' "
        "(did you mean 'ttft_s.p90'?); use the metric names of the report, e.g. 'ttft_s.p50' or "
        "'output_throughput_tok_s'")


def test_a_baseline_stores_turn_metrics_and_gates_them(tmp_path):
    path = tmp_path / "baselines/cpu/test_chat.toml"
    path.parent.mkdir(parents=True)
    before = references.Current.of([compute_metrics(conversations()) for _ in range(2)])
    update_baseline(path, "test_chat", make_entries(before.estimates, names=GATED), {})
    assert '[test_chat.metrics."turn2:ttft_s.p50"]' in path.read_text()
    baseline = load_baseline(path, "test_chat")
    assert sorted(baseline.metrics) == sorted(GATED)
    assert baseline.metrics["turn2:ttft_s.p50"].direction == "lower"
    ref = references.BaselineRef(path, "test_chat", "suites/test_chat.py::test_chat")
    table = references.BaselineTable(ref, {}, {}, exact=True)
    same = references.judge(before, table, gated=GATED)
    assert same.status == Status.PASS and len(same.report.verdicts) == 3
    slower = references.Current.of([compute_metrics(conversations(second=0.03))])
    regressed = references.judge(slower, table, gated=GATED)
    assert regressed.status == Status.REGRESSION
    assert [v.name for v in regressed.report.failures] == ["turn2:ttft_s.p50"]
    assert regressed.report.failures[0].message.startswith(
        "turn2:ttft_s.p50 regressed: 33.0 ms vs baseline 16.5 ms (+100.0%, allowed +10.0%, "
        "lower is better)")


def test_a_saved_run_and_an_ab_pair_compare_turn_metrics(tmp_path):
    metrics = compute_metrics(conversations())
    saved = Result(test_id="s/t.py::test_chat", key="test_chat", engine={}, engine_label="e",
                   workload={}, workload_label="w", metrics=metrics, runs=(metrics,),
                   records=tuple(conversations()))
    document = run_document([MeasurementRecord.of(saved)], fingerprint=CPU, commit=None,
                            started=datetime(2026, 11, 22, tzinfo=timezone.utc))
    path = tmp_path / "run.json"
    path.write_text(json.dumps(document))
    entry = read_run(path).results["test_chat"]
    assert entry.directions["turn2:ttft_s.p50"] == "lower"
    slower = references.Current.of([compute_metrics(conversations(second=0.03))])
    against_saved = references.judge(slower, references.SavedRun(path, "test_chat", entry), gated=GATED)
    assert [v.name for v in against_saved.report.failures] == ["turn2:ttft_s.p50"]
    side_a = references.SideA((metrics.flat(),) * 2, tolerance=0.1)
    paired = references.judge(references.Current.of([compute_metrics(conversations(second=0.03))] * 2),
                         side_a, gated=("turn2:ttft_s.p50",))
    assert paired.ab.metrics["turn2:ttft_s.p50"].ratios == pytest.approx([2.0, 2.0])
    assert paired.ab.metrics["turn2:ttft_s.p50"].status == "regression"
