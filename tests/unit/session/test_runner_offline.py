"""session/runner.py's offline run: what it does with the server engines first."""

from __future__ import annotations

import pytest

from pytest_llmperf.engines import offline
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.runner import Runner, RunnerConfig
from pytest_llmperf.session.target import OurEngines
from pytest_llmperf.workloads.workload import Workload
from tests.unit.fingerprints import fingerprint_of


class _Pool:
    """Stands in for the engine pool: counts stop_all."""

    def __init__(self) -> None:
        self.stopped = 0

    def stop_all(self) -> None:
        self.stopped += 1


@pytest.mark.parametrize(("flat", "stops"), [({}, 0),
                                             ({"hardware_class": "h200", "device_count": 1}, 1)])
def test_offline_stops_the_server_engines_on_gpus_only(monkeypatch, flat, stops):
    """On the CPU an idle server engine computes nothing and fits beside the offline engine:
    stopping it only made its next test start it again (the CPU suite's second engine start)."""
    monkeypatch.setattr(offline, "run_offline", lambda engine, requests, log_dir: "measured")
    pool = _Pool()
    found = Runner(RunnerConfig(), OurEngines(pool), Ledger(fingerprint_of(flat))).run_offline(
        Engine(model="suites/models/tiny-llama", load_format="dummy"),
        Workload.fixed(input_tokens=8, output_tokens=4, num_requests=2, concurrency=1))
    assert (found, pool.stopped) == ("measured", stops)
