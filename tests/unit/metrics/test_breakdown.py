"""The per-run breakdowns' registry (metrics/breakdown.py): every built-in kind registered in
its order, each computed from a run and round-tripped through the measurement record's run-file
form, and a second class under a taken name refused with a line naming both."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.metrics import breakdown
from pytest_llmperf.metrics.breakdown import Breakdown
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.turns import ByTurn
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.verdict.measurement_record import MeasurementRecord


def turn(index: int, turn_index: int, ttft: float) -> RequestRecord:
    return RequestRecord(index=index, expected_prompt_tokens=8, expected_output_tokens=2,
                         scheduled_s=0.0, sent_s=0.0, chunk_times_s=[ttft, ttft + 0.01],
                         chunk_tokens=[1, 1], done_s=ttft + 0.01, usage_prompt_tokens=8,
                         usage_output_tokens=2, turn=turn_index)


def run_of(records: list[RequestRecord]) -> SimpleNamespace:
    return SimpleNamespace(records=tuple(records), metrics=compute_metrics(records),
                           workload=SimpleNamespace(fields={}))


def test_the_built_in_kinds_in_their_order():
    assert list(breakdown.kinds())[:7] == [
        "by_turn", "by_adapter", "structured_outputs", "tool_calls", "agent_sessions",
        "reasoning", "embeddings"]


def test_a_conversation_has_its_turns_and_nothing_else():
    found = breakdown.of_result(run_of([turn(0, 1, 0.2), turn(1, 2, 0.1)]))
    assert list(found) == ["by_turn"]
    assert found["by_turn"]["2"]["ttft_s.p50"] == pytest.approx(0.1)


def test_a_record_writes_its_breakdowns_and_reads_them_back_typed():
    found = breakdown.of_result(run_of([turn(0, 1, 0.2), turn(1, 2, 0.1)]))
    record = MeasurementRecord(MeasurementId.parse("suite.py::test_chat"), breakdowns=found)
    plain = record.to_plain()
    assert plain["by_turn"] == found["by_turn"].to_plain()
    again = MeasurementRecord.from_plain(plain)
    assert isinstance(again.breakdown(ByTurn), ByTurn)
    assert again.breakdowns == found and again.to_plain() == plain


def test_a_second_class_under_a_taken_name_is_refused():
    with pytest.raises(TypeError, match=r"^breakdown 'by_turn' is ByTurn already; give Mine a "
                                        r"name of its own$"):
        class Mine(Breakdown):
            name = "by_turn"

            @classmethod
            def of(cls, result):
                return None
