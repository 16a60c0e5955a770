"""The run file's model (verdict/stored_run.py): a run file round-trips through it, for generated
results and for files of format 1 written before the model existed (tests/unit/data/runfiles);
what the hand-written serializers left out is written now."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_llmperf.machine.disturbance import CpuDisturbance, Disturbance, GpuState
from pytest_llmperf.machine.gpu_telemetry import GpuTelemetry
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.reports.runfile import run_document
from pytest_llmperf.verdict.measurement_record import (
    CapacityProbe,
    GateSettings,
    MeasurementRecord,
)
from pytest_llmperf.verdict.mismatch import engine_changes, workload_changes
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.verdict.stored_run import FORMAT, RunFileError, StoredRun
from tests.unit.fingerprints import fingerprint_of

OLD_FILES = sorted((Path(__file__).parents[1] / "data" / "runfiles").glob("format1_*.json"))
# A CPU machine: no roofline to look a model's config up for (that is test_derived's).
FINGERPRINT = fingerprint_of({"hardware_class": "cpu", "vllm": "0.32.0"})
STARTED = datetime(2026, 11, 22, 10, 4, 31, tzinfo=timezone.utc)


def plain(document: dict) -> dict:
    """As the file holds it: JSON, NaN as the writer leaves it."""
    return json.loads(json.dumps(document, default=str))


def through_model(document: dict) -> dict:
    return plain(StoredRun.from_plain(document, "run.json").to_plain())


# ---------------------------------------------------------------- generated results

ratios = st.floats(0.0, 1.0, allow_nan=False)
mhz = st.none() | st.floats(100.0, 3000.0, allow_nan=False)
cpu = st.builds(CpuDisturbance, ratios, ratios, ratios, st.integers(1, 256),
                st.none() | st.text("abcxyz", min_size=1, max_size=6),
                st.none() | st.integers(1, 99999), ratios)


def _held(state_and_held) -> GpuState:
    state, held = state_and_held
    return replace(state, **dict(zip(("held_share", "held_sm_mhz", "held_below_mhz"),
                                     held or (None, None, None))))


gpu = st.builds(
    lambda *args, held, **kwargs: (GpuState(*args, **kwargs), held), st.sampled_from(["0", "1"]),
    st.lists(st.text("abc ()", min_size=1, max_size=8), max_size=2).map(tuple),
    st.dictionaries(st.sampled_from(["hw slowdown", "sw thermal slowdown"]), ratios,
                    max_size=2).map(lambda d: tuple(d.items())),
    mhz, mhz, mhz,
    st.dictionaries(st.sampled_from(["sm", "memory"]), st.tuples(mhz.filter(bool),
                                                                   mhz.filter(bool)),
                    max_size=2).map(lambda d: tuple((k, *v) for k, v in d.items())),
    # the clock-setting facts come together (machine/gpu_state.py reads them at once)
    held=st.none() | st.tuples(ratios, mhz.filter(bool), mhz.filter(bool)),
    xids=st.none() | st.lists(st.integers(1, 120), max_size=2).map(tuple),
    new_uncorrected_ecc=st.none() | st.integers(0, 3)).map(_held)
telemetry = st.builds(
    GpuTelemetry, st.just("0"), st.floats(0.0, 100.0).map(lambda x: round(x, 3)),
    st.integers(0, 100), energy_j=st.none() | st.floats(0.0, 1e5).map(lambda x: round(x, 3)),
    reason_shares=st.dictionaries(st.sampled_from(["sw power cap", "idle"]),
                                  ratios.map(lambda x: round(x, 4)),
                                  max_size=2).map(lambda d: tuple(d.items())))
disturbance = st.none() | st.builds(Disturbance, st.none() | cpu,
                                    st.lists(gpu, max_size=2).map(tuple))
request = st.tuples(st.floats(0.001, 2.0), st.floats(0.0005, 0.1), st.integers(1, 6),
                    st.none() | st.sampled_from(["HTTP 500: boom", "timed out"]))
patterns = st.sampled_from([{"type": "Rate", "requests_per_s": 4.0, "burstiness": 1.0},
                            {"type": "Concurrency", "max_concurrency": 2},
                            {"type": "Trace", "requests": 2}])


def records_of(requests, scale: float) -> list[RequestRecord]:
    out = []
    for index, (ttft, tpot, tokens, error) in enumerate(requests):
        sent = float(index)
        times = [] if error else [sent + ttft * scale + k * tpot for k in range(tokens)]
        out.append(RequestRecord(
            index=index, expected_prompt_tokens=8, expected_output_tokens=tokens,
            scheduled_s=sent, sent_s=sent, chunk_times_s=times, chunk_tokens=[1] * len(times),
            usage_prompt_tokens=8, usage_output_tokens=None if error else tokens, error=error,
            error_kind="server_error" if error else None, finish_reason="length"))
    return out


@st.composite
def results(draw) -> MeasurementRecord:
    requests = draw(st.lists(request, min_size=1, max_size=4))
    scales = draw(st.lists(st.floats(0.5, 2.0), min_size=1, max_size=3))
    start = draw(st.none() | st.floats(0.0, 600.0))  # None: an endpoint's, started elsewhere
    runs = [(compute_metrics(records_of(requests, scale), engine_start_s=start),
             records_of(requests, scale)) for scale in scales]
    metrics, records = runs[len(runs) // 2]
    cards = draw(st.lists(telemetry, max_size=1).map(tuple))
    result = Result(
        test_id="suites/test_gpu.py::test_chat[x]", key="test_chat[x]",
        engine={"model": "llama", "max_num_seqs": draw(st.integers(1, 512)),
                "env": {"HF_TOKEN": "<hidden>"}},
        engine_label="llama",
        workload={"name": "chat", "num_requests": len(requests), "pattern": draw(patterns),
                  "source": {"type": "Dataset", "path": "suites/data/p.jsonl"},
                  **draw(st.sampled_from([{}, {"prefix_cache": "cold"}]))},
        workload_label="chat", metrics=metrics, runs=tuple(run[0] for run in runs),
        records=tuple(records), fingerprint=FINGERPRINT,
        server_metrics=draw(st.dictionaries(st.sampled_from(["vllm:num_preemptions"]),
                                            st.floats(0.0, 10.0))),
        disturbance=draw(disturbance), gpu_telemetry=cards)
    gate = GateSettings(draw(st.none() | st.floats(0.0, 4.0)),
                        draw(st.none() | st.just(("tpot_s.p50",))))
    return MeasurementRecord.of(result, draw(st.none() | st.sampled_from(list(Status))),
                                gate=gate)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(results(), min_size=1, max_size=2))
def test_a_written_run_file_reads_back_to_the_same_file(measured):
    for index, record in enumerate(measured):  # keys are unique within a file
        record.result = Result(**{**record.result.__dict__, "key": f"test_{index}",
                                  "test_id": f"suites/test_gpu.py::test_{index}"})
    document = plain(run_document(measured, fingerprint=FINGERPRINT, commit="3f2c1e0",
                                  started=STARTED))
    assert through_model(document) == document
    assert through_model(through_model(document)) == document


# ---------------------------------------------------------------- files of format 1


@pytest.mark.parametrize("path", OLD_FILES, ids=lambda path: path.name)
def test_a_format_1_file_reads_and_keeps_everything_it_held(path):
    old = json.loads(path.read_text())
    assert old["llmperf"]["format"] == 1
    new = through_model(old)
    assert new["llmperf"]["format"] == FORMAT == 2
    assert {k: v for k, v in new.items() if k != "llmperf"} == \
        {k: v for k, v in old.items() if k != "llmperf"}
    assert new["llmperf"]["fingerprint"] == old["llmperf"]["fingerprint"]
    for before, after in zip(old["llmperf"]["results"], new["llmperf"]["results"], strict=True):
        # The engine's start, kept beside the metrics then, is a metric of one sample now.
        start = after["metrics"].pop("engine_start_s")
        assert start == {"value": before.pop("engine_start_s"), "spread": 0.0, "n": 1,
                         "direction": "lower"}
        assert {k: v for k, v in after.items() if k != "disturbance"} == \
            {k: v for k, v in before.items() if k != "disturbance"}
        # Its reasons are worked out again from the facts (the next test has their words).
        if before["disturbance"] is None:
            assert after["disturbance"] is None
        else:
            assert contains(after["disturbance"], {**before["disturbance"], "reasons": None})
    assert through_model(new) == new  # and from then on it stays as it is


def contains(new, old) -> bool:
    """`new` holds every field of `old` with its value (format 2 only adds fields); None in
    `old`: anything."""
    if old is None:
        return True
    if isinstance(old, dict):
        return isinstance(new, dict) and all(contains(new.get(k), v) for k, v in old.items())
    if isinstance(old, list):
        return len(new) == len(old) and all(map(contains, new, old))
    return new == old


def test_a_format_1_disturbance_reads_without_what_it_did_not_keep():
    old = json.loads(OLD_FILES[1].read_text())
    stored = StoredRun.from_plain(old, "old.json").results[0]
    (card,) = stored.disturbance.gpus
    assert (card.held_share, card.held_sm_mhz, card.held_below_mhz) == (0.75, 1410.0, None)
    assert stored.disturbance.cpu == CpuDisturbance(1.5, 0.9, 0.01, 0, "stress", None, 1.2)
    assert card.telemetry == stored.gpu_telemetry[0]  # joined by the card's index
    assert stored.disturbance.reasons == [
        "other processes used 1.50 cores while the machine was 90% busy; the busiest, stress, "
        "120% of a core",
        "GPU 0 was shared with python (pid 77)",
        "GPU 0 throttled: hw thermal slowdown in 25% of samples (up to 91 C)",
        "GPU 0 ran under a power limit of 650 W, below its default 700 W (nvidia-smi -pl 700 "
        "restores it)",
        "GPU 0's application clocks were set below their defaults (sm 1500 MHz, default 1755 "
        "MHz; nvidia-smi -rac restores them)",
        "GPU 0's clocks were held at 1410 MHz by a clock setting in 75% of busy samples, below "
        "its default (nvidia-smi -rgc resets locked clocks)",
        "GPU 0 reported XID 79 during the measurement"]


# ---------------------------------------------------------------- what format 2 adds


def test_the_facts_the_disturbance_rule_judges_are_all_written():
    old = json.loads(OLD_FILES[1].read_text())
    stored = StoredRun.from_plain(old, "old.json").results[0]
    (card,) = stored.disturbance.gpus
    held = GpuState(card.index, held_share=0.75, held_sm_mhz=1410.0, held_below_mhz=1980.0)
    cpu = CpuDisturbance(1.5, 0.9, 0.01, 16, "stress", 900, 1.2)
    written = Disturbance(cpu, (held,)).to_dict()
    assert written["cpu"] == {"other_cores": 1.5, "machine_busy_share": 0.9,
                              "steal_share": 0.01, "cores": 16, "top": "stress", "top_pid": 900,
                              "top_cores": 1.2, "engine_cores": [], "on_engine_cores": 0.0}
    assert written["gpus"][0]["held_below_mhz"] == 1980.0
    back = Disturbance.from_dict(json.loads(json.dumps(written)))
    assert back == Disturbance(cpu, (held,))
    assert back.reasons[-1] == ("GPU 0's clocks were held at 1410 MHz by a clock setting in 75% "
                                "of busy samples, below its default 1980 MHz (nvidia-smi -rgc "
                                "resets locked clocks)")


def test_an_entry_key_this_version_does_not_know_is_kept():
    old = json.loads(OLD_FILES[0].read_text())
    old["llmperf"]["results"][0]["from_a_newer_writer"] = {"kept": [1, 2]}
    stored = StoredRun.from_plain(old, "old.json").results[0]
    assert stored.other == {"from_a_newer_writer": {"kept": [1, 2]}}
    assert through_model(old)["llmperf"]["results"][0]["from_a_newer_writer"] == {"kept": [1, 2]}


def test_the_stored_facts_are_typed():
    stored = StoredRun.from_plain(json.loads(OLD_FILES[1].read_text()), "old.json").results
    chat, probe = stored
    assert chat.workload.pattern.type == "Rate" and chat.workload.pattern["requests_per_s"] == 4.0
    assert probe.workload.source.type == "Trace" and probe.workload.source["speedup"] == 1.5
    assert chat.engine.model == "llama" and chat.workload.prefix_cache == "warm"
    assert chat.metrics["ttft_s.p50"].direction == "lower"
    assert chat.metrics["output_throughput_tok_s"].direction == "higher"
    assert chat.status is Status.REGRESSION and chat.gated == ("tpot_s.p50",)
    assert probe.record.capacity == CapacityProbe({"ttft_s.p50": 0.5}, {}, True, "")
    paired = chat.ab.metrics["tpot_s.p50"]  # written before one side's own ratios were kept
    assert (chat.ab.pairs, paired.median, paired.status, paired.nulls) == (
        3, 1.2, "regression", None)
    assert probe.ab is None


def test_a_newer_format_is_refused_with_the_formats_read():
    newer = copy.deepcopy(json.loads(OLD_FILES[0].read_text()))
    newer["llmperf"]["format"] = 3
    with pytest.raises(RunFileError) as info:
        StoredRun.from_plain(newer, "new.json")
    assert str(info.value) == (
        "new.json: run file format 3 is not supported (this pytest-llmperf reads formats 1, 2); "
        "write one with --llmperf-json PATH or --llmperf-save NAME")


def test_a_saved_runs_facts_are_compared_as_the_dicts_they_were():
    stored = StoredRun.from_plain(json.loads(OLD_FILES[0].read_text()), "old.json").results[0]
    assert workload_changes(stored.workload, {**stored.workload, "num_requests": 4}) == [
        "num_requests 2 -> 4"]
    assert engine_changes(stored.engine, {**stored.engine, "max_num_seqs": 4}) == [
        "max_num_seqs 8 -> 4"]
    assert workload_changes(stored.workload, stored.workload) == []
