"""Interference probes' schedule and requests (workloads/probes.py) and their split
(metrics/probes.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_llmperf import Workload
from pytest_llmperf.client.patterns import Rate, Trace
from pytest_llmperf.errors import InputError
from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.metrics import probes as probe_metrics
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.workloads.probes import (
    ProbedSource,
    probe_places,
    probe_schedule,
    with_probes,
)
from pytest_llmperf.workloads.vocab import VocabOnly

VOCAB = VocabOnly(4096, frozenset({0, 1, 2}), "config.json")
LOAD = Workload.fixed(input_tokens=64, output_tokens=32, num_requests=40, rate=4.0, seed=3,
                      warmup_requests=2)


def test_probes_arrive_at_fixed_intervals_between_the_loads_arrivals():
    offsets, positions = probe_schedule(LOAD.pattern, 40, 3, rate=1.0)
    main = Rate(requests_per_s=4.0).arrival_offsets(40, 3)
    assert len(offsets) == 40 + len(positions)
    assert [offsets[i] for i in positions] == pytest.approx(
        list(np.arange(0.5, main[-1], 1.0)))
    load = [x for i, x in enumerate(offsets) if i not in set(positions)]
    assert load == pytest.approx(list(main))  # the load keeps its own arrival times
    assert list(offsets) == sorted(offsets) and offsets[0] == 0.0


def test_a_probed_workload_sends_the_load_and_the_probes_in_arrival_order():
    probed = with_probes(LOAD, rate=1.0, input_tokens=4, output_tokens=6)
    assert probed.name == "fixed-64in-32out+probes"
    assert isinstance(probed.pattern, Trace)  # an open loop at its own arrival times
    assert probed.label() == "fixed-64in-32out+probes x49 @ 4 req/s + probes 1/s"
    assert probed.pattern.to_dict() == {"type": "ProbedArrivals", "load": {
        "type": "Rate", "requests_per_s": 4.0, "burstiness": 1.0}, "probe_rate": 1.0,
        "requests": 49}
    places = probe_places(probed.source)
    measured, warmup = probed.build(VOCAB)
    assert len(warmup) == 2 and all(r.prompt_tokens == 64 for r in warmup)
    assert len(measured) == probed.num_requests == 40 + len(places)
    assert [(r.prompt_tokens, r.output_tokens) for i, r in enumerate(measured) if i in places] \
        == [(4, 6)] * len(places)
    assert all((r.prompt_tokens, r.output_tokens) == (64, 32)
               for i, r in enumerate(measured) if i not in places)
    # The load's requests are the ones the unprobed workload sends, in its order.
    plain, _ = LOAD.build(VOCAB)
    assert [r.prompt for i, r in enumerate(measured) if i not in places] == \
        [r.prompt for r in plain]
    assert probe_places(LOAD.source) == frozenset()


def test_probes_are_split_from_the_load_by_their_places():
    records = [RequestRecord(index=i, expected_prompt_tokens=8, expected_output_tokens=8,
                             scheduled_s=0.0) for i in range(5)]
    load, probes = probe_metrics.split(records, frozenset({1, 3}))
    assert [r.index for r in load] == [0, 2, 4] and [r.index for r in probes] == [1, 3]
    nodeid = "suites/test_cpu_requests.py::test_x"
    assert probe_metrics.measurement_id(MeasurementId(nodeid)).key == "test_x@probes"
    assert probe_metrics.measurement_id(MeasurementId(nodeid, run=2)).key == "test_x@probes#2"
    assert probe_metrics.measurement_id(MeasurementId(nodeid, point="rate8")).key == \
        "test_x@rate8+probes"


@pytest.mark.parametrize("workload, rate, line", [
    (Workload.fixed(input_tokens=8, output_tokens=8, num_requests=10, concurrency=2), 1.0,
     "Workload.with_probes: probes need an open-loop load without a concurrency cap (rate=, "
     "ramp= or a trace), got concurrency 2: a closed loop's queue would hold the probes too"),
    (Workload.fixed(input_tokens=8, output_tokens=8, num_requests=10, rate=4.0,
                    concurrency=2), 1.0,
     "Workload.with_probes: probes need an open-loop load without a concurrency cap (rate=, "
     "ramp= or a trace), got "),
    (LOAD, 0.0, "Workload.with_probes: rate must be > 0 probes/s, got 0.0"),
    (Workload.fixed(input_tokens=8, output_tokens=8, num_requests=2, rate=100.0), 1.0,
     "Workload.with_probes: the load's 2 requests arrive within "),
])
def test_bad_probes_are_one_line(workload, rate, line):
    with pytest.raises(InputError) as caught:
        with_probes(workload, rate=rate)
    assert str(caught.value).startswith(line), str(caught.value)


def test_probe_lengths_must_be_positive():
    with pytest.raises(InputError, match=r"^Workload.with_probes: probe input_tokens and "
                                         r"output_tokens must be >= 1, got 0 and 8$"):
        ProbedSource(main=LOAD.source, num_main=40, positions=(3,), input_tokens=0)
