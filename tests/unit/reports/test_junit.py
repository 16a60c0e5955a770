"""JUnit properties: each test's measurements as (name, value) pairs, exactly."""

from __future__ import annotations

from pathlib import Path

from pytest_llmperf.ids import MeasurementId, belongs_to
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.reports.junit import properties
from pytest_llmperf.verdict.measurement_record import Extras, MeasurementRecord
from pytest_llmperf.verdict.status import Status
from tests.unit.reports.builders import ENGINE, WORKLOAD, result, streamed

NODE = "suites/t.py::test_x[1]"


def props_of(*results, extras=(), verdicts=None, usd_per_hour=None):
    verdicts = verdicts or {}
    records = [MeasurementRecord.of(result, verdicts.get(result.test_id)) for result in results]
    return properties(NODE, [*records, *extras], usd_per_hour, root=Path("."))


def test_one_measurement_gives_its_verdict_labels_and_every_value():
    one = result(NODE, [streamed()])
    assert props_of(one, verdicts={NODE: Status.REGRESSION}) == [
        ("verdict", "REGRESSION"), ("engine", ENGINE), ("workload", WORKLOAD),
        ("completed", "1"), ("failed", "0"), ("output_throughput_tok_s", "4"),
        ("request_throughput_req_s", "1"), ("ttft_s.p50", "0.25"), ("ttft_s.p99", "0.25"),
        ("tpot_s.p50", "0.25"), ("itl_s.p50", "0.25"), ("e2el_s.p50", "1"),
        ("queue_s.p99", "0.0625"), ("total_throughput_tok_s", "20"),
        # the means the -v line of where the time went splits (metrics/phases.py)
        ("ttft_s.mean", "0.25"), ("e2el_s.mean", "1"), ("itl_s.mean", "0.25"),
    ]


def test_later_measurements_and_extras_carry_their_suffix_and_the_cost_when_priced():
    second = result(NODE + "#2", [streamed()])
    point = result(NODE + "@rate4", [streamed()])
    other = result("suites/t.py::test_x[10]", [streamed()])  # another test: not included
    extras = [MeasurementRecord(MeasurementId.parse(NODE + "#3"), status=Status.PASS, extras=Extras(
        {"slo_capacity_req_s": Estimate(4.5, 0.0, 1),
         "offline_x": Estimate(float("nan"), 0.0, 1)}, "detail"))]
    props = dict(props_of(second, point, other, extras=extras, usd_per_hour=0.36))
    assert props["verdict#2"] == "" and props["verdict@rate4"] == ""
    assert props["usd_per_1m_output_tok#2"] == "25" and props["usd_per_1m_total_tok@rate4"] == "5"
    assert props["slo_capacity_req_s#3"] == "4.5" and props["verdict#3"] == "pass"
    assert "offline_x#3" not in props  # NaN: nothing to show
    assert not any(name.endswith("[10]") or name == "verdict" for name in props)


def test_a_test_id_belongs_to_its_test_only():
    assert belongs_to("t.py::a", "t.py::a")
    assert belongs_to("t.py::a#2", "t.py::a") and belongs_to("t.py::a@r4", "t.py::a")
    assert not belongs_to("t.py::ab", "t.py::a")
    assert not belongs_to("t.py::a[10]", "t.py::a[1]")
