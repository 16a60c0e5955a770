"""LlmperfSession.run's bookkeeping around a measurement: here, the client's self-check.

The measurement is replaced by records with a chosen client lag (the real path is in
tests/integration); the workload is built with the tiny model's real tokenizer.
"""

from __future__ import annotations

import contextlib
import math
import random
from types import SimpleNamespace

import pytest

from pytest_llmperf import Engine, Workload
from pytest_llmperf.client.measure import Measurement
from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.plugin import configs
from pytest_llmperf.plugin.confirm_later import ConfirmLater
from pytest_llmperf.plugin.fixture import TestOptions
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.session import ab_run
from pytest_llmperf.session import runner as runner_mod
from pytest_llmperf.session.ab_run import AbPlan
from pytest_llmperf.session.deployment import Deployment
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.session import LlmperfSession
from pytest_llmperf.session.settings import resolve
from pytest_llmperf.verdict.status import Status
from tests.conftest import TINY_LLAMA
from tests.unit.fake_server import FakeServer
from tests.unit.fingerprints import CPU, fingerprint_of

ENGINE = Engine(model=str(TINY_LLAMA), load_format="dummy")
TEST_X = MeasurementId("suite.py::test_x")


class RunningServer:
    base_url, start_time_s = "http://127.0.0.1:1", 20.0


class OnePool:
    def get(self, engine):
        return RunningServer()

    def server_pid(self, engine):  # no engine process: none watched
        return None


@pytest.fixture(autouse=True)
def no_settle(monkeypatch):
    """These sessions' A/B sides are stand-ins: no engine spins between them, so no wait (the
    wait itself: test_on_the_cpu_a_side_waits_for_the_other_side_s_engine_to_go_idle)."""
    monkeypatch.setattr(ab_run, "OTHER_SIDE_SETTLE_S", 0.0)


def lines(session) -> list[str]:
    """The session's notes as the summary shows them."""
    return [note.render() for note in session.ledger.notes]


def statuses(session) -> dict[str, Status | None]:
    """Each measurement's verdict, by its id."""
    return {record.test_id: record.status for record in session.ledger.records}


def session_sending_late(monkeypatch, lag_s: float) -> LlmperfSession:
    """A session whose every request goes out `lag_s` after it was scheduled."""
    def measure(endpoint, requests, pattern, **_):
        return Measurement([RequestRecord(
            index=i, expected_prompt_tokens=r.prompt_tokens, expected_output_tokens=2,
            scheduled_s=float(i), sent_s=i + lag_s, chunk_times_s=[i + 0.1, i + 0.2],
            chunk_tokens=[1, 1], usage_prompt_tokens=r.prompt_tokens, usage_output_tokens=2)
            for i, r in enumerate(requests)])

    monkeypatch.setattr(runner_mod, "measure", measure)
    return started(OnePool())


def started(pool, environ=None, hardware_class: str = "cpu") -> LlmperfSession:
    settings = resolve(lambda name: None, lambda ini: None, environ=environ or {})
    machine = {"hardware_class": hardware_class, "device_count": 0 if hardware_class == "cpu" else 4}
    deployment = Deployment.of(configs.endpoint_config(settings), environ or {})
    return LlmperfSession.start(configs.session_config(settings), pool,
                                fingerprint=fingerprint_of(machine), deployment=deployment)


def fixed(**load) -> Workload:
    return Workload.fixed(input_tokens=8, output_tokens=2, num_requests=4, **load)


def test_an_open_loop_sent_behind_schedule_is_client_limited(monkeypatch):
    session = session_sending_late(monkeypatch, 0.050)
    result = session.runner.run(TEST_X, ENGINE, fixed(rate=50.0), repeat=1).result
    assert result.client.limited
    assert result.client.reasons == [
        "requests sent 50.0 ms behind schedule at p90 (limit 10 ms)"]
    assert statuses(session) == {"suite.py::test_x": Status.CLIENT_LIMITED}


def test_a_punctual_client_is_not_limited(monkeypatch):
    session = session_sending_late(monkeypatch, 0.001)
    result = session.runner.run(TEST_X, ENGINE, fixed(rate=50.0), repeat=1).result
    assert not result.client.limited
    assert statuses(session) == {"suite.py::test_x": None}


@pytest.mark.parametrize("limits, share", [({"ttft_s": 0.5}, 1.0), ({"ttft_s": 0.05}, 0.0)])
def test_the_tests_slo_limits_reach_each_runs_goodput(monkeypatch, limits, share):
    # Every TTFT is 99 ms (sent 1 ms late, first token 100 ms after schedule).
    session = session_sending_late(monkeypatch, 0.001)
    record = session.runner.run(TEST_X, ENGINE, fixed(concurrency=1), 2, limits)
    assert [run.goodput_share for run in record.result.runs] == [share, share]
    unlimited = session.runner.run(TEST_X, ENGINE, fixed(concurrency=1), repeat=1)
    assert math.isnan(unlimited.result.metrics.goodput_share)


@pytest.mark.parametrize("load", [{"concurrency": 4}, {"rate": 50.0, "concurrency": 2}],
                         ids=["closed", "capped"])
def test_waiting_for_a_slot_is_not_schedule_lag(monkeypatch, load):
    session = session_sending_late(monkeypatch, 0.050)
    result = session.runner.run(TEST_X, ENGINE, fixed(**load), repeat=1).result
    assert result.client.schedule_lag_p90_s is None
    assert not result.client.limited


@pytest.mark.parametrize("hardware, endpoint, cores, expected", [
    ("cpu", None, 2, 1),  # the engine's core is not the client's
    ("cpu", None, 1, 1),
    ("h100", None, 16, 8),  # capped: more only costs start-up
    ("h100", None, 6, 4),  # vLLM's API server and engine core keep two busy
    ("h100", "http://elsewhere:8000", 4, 4),  # a remote server leaves every core to the client
])
def test_auto_client_workers(monkeypatch, hardware, endpoint, cores, expected):
    monkeypatch.setattr(runner_mod, "usable_cores", lambda: cores)
    environ = {"LLMPERF_ENDPOINT": endpoint} if endpoint else {}
    session = started(OnePool(), environ, hardware)
    assert session.runner.client_workers() == expected


def test_client_workers_given_as_a_number(monkeypatch):
    session = started(OnePool(), {"LLMPERF_CLIENT_WORKERS": "1"})
    assert session.runner.client_workers() == 1


def test_ab_sides_on_gpus_of_their_own_trade_them_halfway(monkeypatch, tmp_path):
    """Four GPUs, two TP=2 sides: A starts first on 0,1 and B on 2,3; after two of four pairs
    both stop and B starts first, so each side measures half its pairs on each pair of cards."""
    from pytest_llmperf.engines.leases import GpuLeases
    from pytest_llmperf.engines.pool import EnginePool

    log = []
    pool = EnginePool(lambda e, env: FakeServer(e, env, log), capacity=1,
                      leases=GpuLeases(["0", "1", "2", "3"], lease_dir=tmp_path, timeout_s=1.0))
    session = session_sending_late(monkeypatch, 0.0)
    on_gpus(session, pool)
    a = ENGINE.replace(tensor_parallel_size=2)
    b = a.replace(max_num_seqs=8)
    session.ab_runner.run_ab(TEST_X, a, b, fixed(concurrency=2), AbPlan(pairs=4))
    assert [entry for entry in log if entry[0] == "start"] == [
        ("start", a.model, "0,1"), ("start", b.model, "2,3"),  # pair 1
        ("start", b.model, "0,1"), ("start", a.model, "2,3"),  # before pair 3
    ]
    assert lines(session) == ["suite.py::test_x: A/B sides traded GPUs halfway: A on GPUs 0,1 "
                             "then 2,3; B on GPUs 2,3 then 0,1"]


class SidedPool:
    """Both A/B sides up at once, told apart by their URL: side B is the engine with
    max_num_seqs set."""

    def get(self, engine):
        server = RunningServer()
        server.base_url = "http://b" if engine.max_num_seqs else "http://a"
        return server

    def room_for(self, engines):
        return contextlib.nullcontext()

    def start_together(self, engines):
        self.together = list(engines)  # what the A/B run asked to start at once

    def server_pid(self, engine):  # no engine process: none watched
        return None


def ab_session(monkeypatch, b_tpot_by_pair) -> tuple[LlmperfSession, list[str]]:
    """A session whose side A streams at 10 ms per token and side B at 10 ms times
    `b_tpot_by_pair[n]` in pair n. Returns it and the sides in the order they were measured."""
    measured: list[str] = []

    def measure(endpoint, requests, pattern, **_):
        side = "B" if endpoint.base_url == "http://b" else "A"
        measured.append(side)
        pair = (len(measured) - 1) // 2
        gap = 0.010 * (b_tpot_by_pair[pair] if side == "B" else 1.0)
        return Measurement([RequestRecord(
            index=i, expected_prompt_tokens=r.prompt_tokens, expected_output_tokens=3,
            scheduled_s=float(i), sent_s=float(i), chunk_times_s=[i + 0.1 + gap * n
                                                                  for n in range(3)],
            chunk_tokens=[1, 1, 1], usage_prompt_tokens=r.prompt_tokens, usage_output_tokens=3)
            for i, r in enumerate(requests)])

    monkeypatch.setattr(runner_mod, "measure", measure)
    return started(SidedPool()), measured


def on_gpus(session, pool) -> None:
    """The session's runner on four H100s, its engines from `pool`."""
    session.runner.target.pool, session.runner.target.gpu_count = pool, 4
    session.ledger.fingerprint = fingerprint_of({"hardware_class": "h100", "device_count": 4})


def run_ab(session, confirm_pairs, defer=False, workload=None):
    """Both sides' results."""
    records = session.ab_runner.run_ab(TEST_X, ENGINE, ENGINE.replace(max_num_seqs=8),
                                workload or fixed(concurrency=2),
                                AbPlan(4, confirm_pairs, ("tpot_s.p50",), defer))
    return tuple(record.result for record in records)


def judge_ab(session):
    """Side B against side A, as --llmperf-ab judges it (gating tpot_s.p50)."""
    record_a, record_b = session.ledger.measured
    return session.judge.judge_ab(record_a, record_b, TestOptions(gate=("tpot_s.p50",)), None,
                                  AbPlan(4))


def test_a_regressed_b_measures_its_confirm_pairs_in_abba_order(monkeypatch):
    session, measured = ab_session(monkeypatch, [1.5] * 8)
    result_a, result_b = run_ab(session, confirm_pairs=4)
    assert measured == ["A", "B", "B", "A"] * 4  # the confirm round goes on in ABBA order
    assert (len(result_a.runs), len(result_b.runs)) == (8, 8)
    assert lines(session) == ["suite.py::test_x: B regressed over 4 ABBA pairs; 4 more measured "
                             "to confirm"]
    judgement = judge_ab(session)
    assert judgement.failed
    assert judgement.ab.pairs == 8
    assert [record.status for record in session.ledger.records] == [Status.SIDE_A,
                                                                    Status.REGRESSION]


def test_an_ab_run_starts_both_sides_at_once_before_it_measures(monkeypatch):
    session, measured = ab_session(monkeypatch, [1.0] * 4)
    run_ab(session, confirm_pairs=0)
    assert session.runner.pool.together == [ENGINE, ENGINE.replace(max_num_seqs=8)]


@pytest.mark.parametrize("b_tpot, confirm_pairs", [(1.0, 4), (1.5, 0)],
                         ids=["B as fast", "no confirm pairs asked"])
def test_no_confirm_pairs_unless_asked_and_regressed(monkeypatch, b_tpot, confirm_pairs):
    session, measured = ab_session(monkeypatch, [b_tpot] * 4)
    result_a, result_b = run_ab(session, confirm_pairs)
    assert len(measured) == 8
    assert (len(result_a.runs), len(result_b.runs)) == (4, 4)
    assert not any("confirm" in note for note in lines(session))


def test_a_deferred_confirm_keeps_the_first_pairs_and_the_rerun_goes_on_from_them(monkeypatch):
    """defer=True: the first 4 pairs regressed, so run_ab keeps them, records nothing and raises
    ConfirmLater; the test's rerun measures only the confirm pairs, in ABBA order, and is judged
    on all 8."""
    session, measured = ab_session(monkeypatch, [1.3] * 4 + [0.8] * 4)
    with pytest.raises(ConfirmLater):
        run_ab(session, confirm_pairs=4, defer=True)
    assert measured == ["A", "B", "B", "A"] * 2
    assert session.ledger.records == [] and session.ledger.notes == []

    result_a, result_b = run_ab(session, confirm_pairs=4)  # the rerun, minutes later
    assert measured == ["A", "B", "B", "A"] * 4
    assert (len(result_a.runs), len(result_b.runs)) == (8, 8)
    assert lines(session) == ["suite.py::test_x: B regressed over 4 ABBA pairs; 4 more measured "
                             "after the other tests of its engine, to confirm"]
    judgement = judge_ab(session)
    assert not judgement.failed
    assert judgement.ab.metrics["tpot_s.p50"].ratios == pytest.approx([1.3] * 4 + [0.8] * 4)
    assert session.ab_runner.paused == {}


def test_a_rerun_that_measures_another_workload_starts_afresh(monkeypatch):
    session, measured = ab_session(monkeypatch, [1.5] * 12)
    with pytest.raises(ConfirmLater):
        run_ab(session, confirm_pairs=4, defer=True)
    result_a, _ = run_ab(session, confirm_pairs=4, workload=fixed(concurrency=1))
    assert len(result_a.runs) == 8  # its own 4 pairs, then its own 4 confirm pairs
    assert len(measured) == 8 + 16


def test_a_slow_stretch_that_does_not_last_passes_on_all_the_pairs(monkeypatch):
    """B 30% slower over the first four pairs, then 20% faster: a state of the machine, not of
    B. Judged on all eight pairs, the median ratio is within the band."""
    session, _ = ab_session(monkeypatch, [1.3] * 4 + [0.8] * 4)
    run_ab(session, confirm_pairs=4)
    judgement = judge_ab(session)
    assert not judgement.failed
    assert judgement.ab.metrics["tpot_s.p50"].ratios == pytest.approx([1.3] * 4 + [0.8] * 4)


def test_ab_sides_on_gpus_trade_them_again_halfway_through_the_confirm_pairs(monkeypatch,
                                                                             tmp_path):
    """B regresses over 4 pairs, so 4 more confirm it; each round trades the cards halfway, so
    each side measures 4 of its 8 pairs on each pair of cards."""
    from pytest_llmperf.engines.leases import GpuLeases
    from pytest_llmperf.engines.pool import EnginePool

    log = []
    session, measured = ab_session(monkeypatch, [1.5] * 8)
    on_gpus(session, EnginePool(lambda e, env: FakeServer(e, env, log), capacity=1,
                                leases=GpuLeases(["0", "1", "2", "3"], lease_dir=tmp_path,
                                                 timeout_s=1.0)))
    a = ENGINE.replace(tensor_parallel_size=2)
    b = a.replace(max_num_seqs=8)
    on_cards = []
    session_measure = runner_mod.measure

    def measure(endpoint, requests, pattern, **kwargs):
        # Both FakeServers have one URL; the ABBA position tells the sides apart.
        side = "A" if len(measured) % 4 in (0, 3) else "B"
        on_cards.append((side, ",".join(session.runner.pool.gpus_of(a if side == "A" else b))))
        return session_measure(SimpleNamespace(base_url=f"http://{side.lower()}"), requests,
                               pattern, **kwargs)

    monkeypatch.setattr(runner_mod, "measure", measure)
    record_a, _ = session.ab_runner.run_ab(TEST_X, a, b, fixed(concurrency=2),
                                    AbPlan(4, 4, ("tpot_s.p50",)))
    assert len(record_a.result.runs) == 8
    # Both sides start at once, the leases taken in this order: the side on the back cards
    # first, so that it gets the front ones.
    assert [engine for engine, _ in session.runner.pool.starts] == [
        a, b,  # pair 1
        b, a,  # before pair 3
        a, b,  # before pair 7: back again
    ]
    for side in "AB":
        cards = [gpus for measured_side, gpus in on_cards if measured_side == side]
        assert sorted(cards) == ["0,1"] * 4 + ["2,3"] * 4, (side, cards)
    assert [note for note in lines(session) if "traded" in note] == [
        "suite.py::test_x: A/B sides traded GPUs halfway: A on GPUs 0,1 then 2,3; B on GPUs 2,3 "
        "then 0,1",
        "suite.py::test_x: A/B sides traded GPUs halfway: A on GPUs 2,3 then 0,1; B on GPUs 0,1 "
        "then 2,3"]


def test_a_baseline_the_disk_refuses_fails_that_test_in_one_line_and_keeps_the_rest(tmp_path):
    from pytest_llmperf.session.updates import BaselineUpdates, PendingUpdate
    from pytest_llmperf.verdict import references

    (tmp_path / "afile").write_text("")  # where the baseline folder should be: a file
    ref = references.BaselineRef(tmp_path / "afile" / "cpu" / "t.toml", "test_x", "t.py::test_x")
    updates, ledger = BaselineUpdates(), Ledger(CPU)
    updates.add("t.py::test_x", PendingUpdate(ref, {}, {}, MeasurementId("t.py::test_x")))
    errors = updates.apply("t.py::test_x", True, ledger)
    assert errors == [f"baseline not updated: {ref.shown}: Not a directory; make it writable and run "
                      "again"]
    assert [(record.test_id, record.status) for record in ledger.records] == [
        ("t.py::test_x", Status.ERROR)]


@pytest.mark.parametrize(("gpus", "waits"), [(False, True), (True, False)])
def test_on_the_cpu_a_side_waits_for_the_other_side_s_engine_to_go_idle(monkeypatch, gpus,
                                                                         waits):
    """CPU hardware: each side measures OTHER_SIDE_SETTLE_S after the other side's last
    measurement ended (its worker spins on the shared core until then), and not again after its
    own; on GPUs the sides never wait."""
    monkeypatch.setattr(ab_run, "OTHER_SIDE_SETTLE_S", 1.5)
    clock = [100.0]
    slept: list[float] = []
    monkeypatch.setattr(ab_run.time, "monotonic", lambda: clock[0])

    def sleep(seconds):
        slept.append(round(seconds, 6))
        clock[0] += seconds

    monkeypatch.setattr(ab_run.time, "sleep", sleep)
    session, measured = ab_session(monkeypatch, [1.0] * 4)
    if gpus:  # one GPU side at a time: no card trading to stand in for
        session.ledger.fingerprint = fingerprint_of({"hardware_class": "h100",
                                                     "device_count": 1})
    run_ab(session, confirm_pairs=0)
    assert measured == ["A", "B", "B", "A"] * 2
    # ABBA: a wait at every change of side (A->B, B->A), none between B and B or A and A;
    # measuring takes no time on this clock, so each wait is the whole settle.
    changes = sum(1 for before, after in zip(measured, measured[1:]) if before != after)
    assert [seconds for seconds in slept if seconds] == ([1.5] * changes if waits else [])


def b_stream(effect: float, noise: float, pairs: int = 40, seed: int = 62) -> list[float]:
    """Side B's TPOT factors pair by pair: a known `effect` (B/A - 1) times lognormal noise of
    sd `noise` on the log scale, seeded."""
    rng = random.Random(seed)
    return [(1 + effect) * math.exp(rng.gauss(0, noise)) for _ in range(pairs)]


def run_until_decided(monkeypatch, factors):
    """An A/B of 4 pairs and 4 confirm pairs on B's `factors`, judged: the session, the pairs
    measured and the judgement."""
    session, measured = ab_session(monkeypatch, factors)
    run_ab(session, confirm_pairs=4)
    return session, len(measured) // 2, judge_ab(session)


def test_an_unknown_ab_measures_the_pairs_its_noise_needs_and_then_decides_same(monkeypatch):
    """B = A with noise too wide for 8 pairs to resolve 10%: more pairs, as many as the spread
    so far says, and the verdict is then same (a pass), not INCONCLUSIVE."""
    session, pairs, judgement = run_until_decided(monkeypatch, b_stream(0.0, 0.12))
    assert 8 < pairs <= AbPlan(4, 4).ceiling
    assert f"B still inconclusive over 8 ABBA pairs; {pairs - 8} more measured" in " ".join(
        lines(session))
    assert judgement.status == Status.PASS and judgement.ab.pairs == pairs


def test_a_large_effect_decides_in_its_first_pairs_with_no_more_measured(monkeypatch):
    session, pairs, judgement = run_until_decided(monkeypatch, b_stream(0.5, 0.02))
    assert (pairs, judgement.status) == (8, Status.REGRESSION)  # its 4 confirm pairs only
    assert not any("still inconclusive" in line for line in lines(session))


def test_pairs_a_decision_would_need_past_the_cap_are_said_not_measured(monkeypatch):
    """Noise so wide that resolving 10% needs more pairs than the cap: none measured, and the
    verdict is INCONCLUSIVE with the pairs a decision would need."""
    session, pairs, judgement = run_until_decided(monkeypatch, b_stream(0.0, 0.6))
    assert (pairs, judgement.status) == (8, Status.INCONCLUSIVE)
    assert not any("still inconclusive" in line for line in lines(session))
    assert "pairs, or a quieter machine, would settle it" in judgement.report.inconclusive[0]
