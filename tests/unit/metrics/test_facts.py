"""A Result's typed facts (metrics/facts.py): the engine, the workload with its pattern and
source tagged by type, the machine's Fingerprint."""

from __future__ import annotations

import copy
import pickle

import pytest

from pytest_llmperf.machine.hardware import Fingerprint
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.facts import EngineFacts, Tagged, WorkloadFacts
from pytest_llmperf.metrics.result import Result
from tests.unit.fingerprints import fingerprint_of

WORKLOAD = {"name": "chat", "num_requests": 8,
            "pattern": {"type": "Rate", "requests_per_s": 4.0, "burstiness": 1.0},
            "source": {"type": "TraceSource", "path": "suites/data/t.jsonl", "speedup": 2.0}}


def result(**facts) -> Result:
    metrics = compute_metrics([])
    return Result(test_id="s/t.py::test_a", key="test_a", engine_label="tiny",
                  workload_label="chat", metrics=metrics, runs=(metrics,), records=(), **facts)


def test_plain_dicts_given_to_a_result_are_read_into_its_facts():
    found = result(engine={"model": "tiny", "env": {"A": "1"}}, workload=WORKLOAD,
                   fingerprint=fingerprint_of({"hardware_class": "h100"}).to_dict())
    assert type(found.engine) is EngineFacts and type(found.workload) is WorkloadFacts
    assert found.engine.model == "tiny" and found.engine["env"] == {"A": "1"}
    assert found.engine == {"model": "tiny", "env": {"A": "1"}}  # as the dict it replaces
    assert found.workload.pattern == Tagged({"type": "Rate", "requests_per_s": 4.0,
                                             "burstiness": 1.0})
    assert (found.workload.pattern.type, found.workload.source.type) == ("Rate", "TraceSource")
    assert found.workload.source["speedup"] == 2.0 and found.workload.prefix_cache == "warm"
    assert found.fingerprint.to_dict() == fingerprint_of({"hardware_class": "h100"}).to_dict()
    assert isinstance(found.fingerprint, Fingerprint)


def test_facts_are_read_only_copies():
    engine = {"model": "tiny", "env": {"A": "1"}}
    facts = EngineFacts.from_dict(engine)
    engine["env"]["A"] = "2"
    with pytest.raises(TypeError):
        facts.fields["model"] = "other"  # type: ignore[index]
    written = facts.to_dict()
    written["env"]["A"] = "3"
    assert facts == {"model": "tiny", "env": {"A": "1"}}


def test_what_was_not_recorded_reads_as_no_facts():
    found = result(engine={}, workload={})
    assert found.fingerprint is None and dict(found.engine) == {} and found.engine.model == ""
    assert found.workload.pattern.type == "" and found.workload.source == {}
    assert WorkloadFacts.from_dict(None) == {} and WorkloadFacts({"prefix_cache": "cold"}
                                                                 ).prefix_cache == "cold"


def test_facts_pickle_and_copy_as_their_fields():
    facts = WorkloadFacts(WORKLOAD)
    for again in (pickle.loads(pickle.dumps(facts)), copy.deepcopy(facts)):
        assert type(again) is WorkloadFacts and again == WORKLOAD
        assert again.pattern.type == "Rate"


def test_a_result_names_its_machine_for_a_line_about_its_numbers():
    cpu = {"cpu_model": "AMD EPYC", "cpu_cores": 2, "cpu_flags": ["avx2"],
           "cpu_signature": "AuthenticAMD family 23 model 1"}
    plain = {"engine": {"model": "tiny"}, "workload": WORKLOAD}
    assert result(**plain, fingerprint=fingerprint_of(cpu).to_dict()).machine == (
        "cpu (AMD EPYC, 2 cores, avx2), AuthenticAMD family 23 model 1")
    gpu = {"hardware_class": "h200", "device_name": "NVIDIA H200", "device_count": 8,
           "cpu_signature": "GenuineIntel family 6 model 143"}
    assert result(**plain, fingerprint=fingerprint_of(gpu).to_dict()).machine == "8x NVIDIA H200"
    assert result(**plain).machine == "an unrecorded machine"
