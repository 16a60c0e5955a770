"""A measurement's record (verdict/measurement_record.py) and the session's ledger of them
(session/ledger.py): what a run file keeps of it, read back from files new and old."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.verdict.ab_judgement import AbJudgement, PairedMetric
from pytest_llmperf.verdict.measurement_record import (
    CapacityProbe,
    Extras,
    GateSettings,
    MeasurementRecord,
    status_from_plain,
)
from pytest_llmperf.verdict.status import Status
from tests.unit.fingerprints import CPU

SIDE_B = MeasurementId("suites/t.py::test_x", side="B")
AB = AbJudgement(0.1, 4, {"tpot_s.p50": PairedMetric((1.2, None), (1.0,), 1.2, (1.1, None), 0.875,
                                                    "pass", "")})


def test_a_record_goes_to_plain_data_and_back():
    record = MeasurementRecord(SIDE_B, status=Status.REGRESSION,
                               gate=GateSettings(0.75, ("tpot_s.p50",)), ab=AB)
    plain = record.to_plain()
    assert plain == {"key": "test_x (B)", "test_id": "suites/t.py::test_x (B)",
                     "status": "regression", "verdict": "REGRESSION",
                     "gate": {"tolerance": 0.75, "metrics": ["tpot_s.p50"]},
                     "ab": {"tolerance": 0.1, "pairs": 4, "metrics": {"tpot_s.p50": {
                         "ratios": [1.2, None], "nulls": [1.0], "median": 1.2,
                         "interval": [1.1, None], "confidence": 0.875, "status": "pass",
                         "message": ""}}}}
    assert MeasurementRecord.from_plain(plain) == record


def test_metrics_that_are_no_run_go_to_plain_data_and_back():
    record = MeasurementRecord(MeasurementId("suites/t.py::test_cap", run=2),
                               extras=Extras({"slo_capacity_req_s": Estimate(4.5, 0.0, 1)}, "d"))
    plain = record.to_plain()
    assert plain["extras"] == {"detail": "d", "metrics": {
        "slo_capacity_req_s": {"value": 4.5, "spread": 0.0, "n": 1}}}
    assert (plain["status"], plain["verdict"], plain["gate"]) == ("", "", {})
    assert MeasurementRecord.from_plain(plain) == record


@pytest.mark.parametrize("plain, status", [
    ({"status": "disturbed", "verdict": "DISTURBED"}, Status.DISTURBED),
    ({"verdict": "ENGINE DIED"}, Status.ENGINE_DIED),  # a file written before "status"
    ({"status": "", "verdict": ""}, None),
    ({"status": "a status of a later version", "verdict": "pass"}, Status.PASS),
    ({"verdict": "words no verdict reads"}, None),
    ({}, None),
])
def test_the_status_is_read_from_its_value_else_from_the_verdict_words(plain, status):
    assert status_from_plain(plain) == status


@pytest.mark.parametrize("plain", [None, "x", {"tolerance": True, "metrics": "tpot_s.p50"},
                                   {"tolerance": "0.5", "metrics": [1]}])
def test_gate_settings_not_of_their_form_read_as_not_declared(plain):
    assert GateSettings.from_plain(plain) == GateSettings()


def test_a_nan_capacity_is_written_as_null_and_read_back_as_nan():
    extras = Extras({"slo_capacity_req_s": Estimate(math.nan, math.nan, 1)}, "d")
    plain = extras.to_plain()
    assert plain["metrics"]["slo_capacity_req_s"] == {"value": None, "spread": None, "n": 1}
    assert math.isnan(Extras.from_plain(plain).estimates["slo_capacity_req_s"].value)


def test_the_ledger_keeps_one_record_per_measurement_in_measuring_order():
    ledger = Ledger(CPU)
    first, second = MeasurementId("t.py::test_a"), MeasurementId("t.py::test_a", run=2)
    ledger.judged(second, Status.PASS)
    ledger.annotate(first, capacity={"passed": True})
    assert [record.id for record in ledger.records] == [second, first]
    assert ledger.status(second) == Status.PASS and ledger.status(first) is None
    assert ledger.status(MeasurementId("t.py::test_b")) is None  # asking begins no record
    assert len(ledger.records) == 2


def test_an_unknown_annotation_is_a_type_error():
    with pytest.raises(TypeError) as info:
        Ledger(CPU).annotate(SIDE_B, abb=AB)
    assert str(info.value) == "annotate() got an unknown annotation 'abb'"


def test_a_capacity_probe_and_what_a_test_can_detect_go_to_plain_data_and_back():
    record = MeasurementRecord(MeasurementId("suites/t.py::test_cap", run=2),
                               capacity=CapacityProbe({"ttft_s.p90": 0.5}, {}, False,
                                                      "ttft_s.p90 0.61 > 0.5"),
                               detectable={"tpot_s.p50": {"detectable": 0.27, "tolerance": 0.1}})
    plain = record.to_plain()
    assert plain["capacity"] == {"slo": {"max": {"ttft_s.p90": 0.5}, "min": {}},
                                 "passed": False, "reason": "ttft_s.p90 0.61 > 0.5"}
    assert MeasurementRecord.from_plain(plain) == record


def test_an_ab_entry_an_older_or_edited_file_left_short_reads_as_unknown():
    found = MeasurementRecord.from_plain({"test_id": "suites/t.py::test_x (B)", "ab": {
        "pairs": "4", "metrics": {"tpot_s.p50": {"ratios": [1.2, "x"], "median": None}}}}).ab
    assert found == AbJudgement(None, 0, {"tpot_s.p50": PairedMetric((1.2, None))})
