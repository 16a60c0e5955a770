"""Client workers on Ray, the parts that need no cluster: the option, the clocks, the actor's
start and stop, naming the worker that limited a run, and reaching the cluster
(tests/integration/test_ray_client.py runs them on two real raylets)."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time

import pytest

from pytest_llmperf.client.measurement import LoadPlan
from pytest_llmperf.client.patterns import Rate
from pytest_llmperf.client.ray_workers import ClientActor, OnRay, measure_on_ray, wall_minus_perf
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.engines.ray import RayCluster
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.records import INSTANTS, ClientStats, RequestRecord, moved_in_time
from pytest_llmperf.session.client_cluster import resolve_on_ray
from pytest_llmperf.session.settings import parse_client_workers


@pytest.mark.parametrize(("text", "chosen"), [("ray", OnRay()), ("ray:3", OnRay(3)),
                                              (" RAY:12 ", OnRay(12)), ("auto", "auto")])
def test_the_option_takes_ray_with_or_without_a_count(text, chosen):
    assert parse_client_workers(text) == chosen


@pytest.mark.parametrize("text", ["ray:0", "ray:", "ray:two", "rays"])
def test_a_bad_ray_count_names_every_choice(text):
    with pytest.raises(ValueError, match=r"^expected auto, a whole number from 1 to \d+ \(the "
                                         r"cores this process may use\), or ray\[:N\] \(N "
                                         r"workers on the Ray cluster\)$"):
        parse_client_workers(text)


def test_every_instant_of_a_record_moves_and_nothing_else():
    # A new timestamp field on RequestRecord must join INSTANTS, or a record from another host
    # would keep it on that host's clock.
    stamped = {f.name for f in dataclasses.fields(RequestRecord) if f.name.endswith("_s")}
    assert stamped == {*INSTANTS, "chunk_times_s"}
    record = RequestRecord(index=3, expected_prompt_tokens=4, expected_output_tokens=2,
                           scheduled_s=10.0, sent_s=10.5, chunk_times_s=[11.0, 11.25],
                           chunk_tokens=[1, 1], done_s=11.5, first_output_s=None)
    assert moved_in_time(record, -10.0) is record
    assert (record.scheduled_s, record.sent_s, record.chunk_times_s, record.done_s) == (
        0.0, 0.5, [1.0, 1.25], 1.5)
    assert record.first_output_s is None and record.tool_calls_done_s is None
    assert record.ttft_s == 0.5 and record.chunk_tokens == [1, 1]


def test_the_actor_starts_at_the_wall_clock_instant_on_its_own_clock():
    actor = ClientActor()
    assert not actor.ready(0.0)
    at_wall = time.time() + 0.2
    threading.Timer(0.05, actor.start, args=(at_wall,)).start()
    start_s = actor._wait_for_start()  # what run_worker calls once warmed up
    assert actor.ready(0.0)
    # the same instant on this host's perf_counter, to the offsets' precision
    assert start_s == pytest.approx(at_wall - wall_minus_perf(), abs=0.002)
    assert not actor.stop_requested()


def test_a_stop_before_the_start_ends_the_wait_and_says_why():
    actor = ClientActor()
    actor.stop(interrupted=True)
    actor._wait_for_start()  # returns at once: the measured run then sends nothing
    assert actor.stop_requested() and actor.interrupted()


def _record(index: int, sent_s: float) -> RequestRecord:
    return RequestRecord(index=index, expected_prompt_tokens=4, expected_output_tokens=2,
                         scheduled_s=sent_s, sent_s=sent_s, chunk_times_s=[sent_s + 0.05,
                                                                          sent_s + 0.06],
                         chunk_tokens=[1, 1], usage_output_tokens=2)


def test_the_self_check_names_the_worker_that_lagged():
    calm = ClientStats(wall_s=2.0, cpu_s=0.2, busiest_cpu_share=0.1, chunks=400,
                       loop_lag_s=[0.0005] * 10, name="client worker 0 on node 10.0.0.1 (aaaa1111)")
    busy = ClientStats(wall_s=2.0, cpu_s=0.1, busiest_cpu_share=0.05, chunks=400,
                       loop_lag_s=[0.009] * 10, name="client worker 1 on node 10.0.0.2 (bbbb2222)")
    metrics = compute_metrics([_record(i, float(i)) for i in range(8)])
    check = check_client(metrics, ClientStats.merge([calm, busy]), Rate(requests_per_s=4.0))
    assert check.limited
    assert check.busiest_worker == ("client worker 1 on node 10.0.0.2 (bbbb2222): lag p90 "
                                    "9.0 ms, cpu 5%")
    assert check.reasons[-1] == f"most limited: {check.busiest_worker}"
    assert check.processes == (calm.name, busy.name)
    # A run the client did not limit names no worker among its reasons.
    fine = check_client(metrics, ClientStats.merge([calm, calm]), Rate(requests_per_s=4.0))
    assert not fine.limited and fine.reasons == []
    # One process: nobody to single out, its name kept as where the load came from.
    alone = check_client(metrics, ClientStats.merge([busy]), Rate(requests_per_s=4.0))
    assert alone.busiest_worker is None and alone.processes == (busy.name,)


def test_an_unresolved_choice_is_refused_before_any_worker_starts():
    with pytest.raises(ValueError, match=r"^ray:2: the cluster and its worker count are named "):
        measure_on_ray(None, LoadPlan([], Rate(requests_per_s=1.0)), on_ray=OnRay(2))


@pytest.fixture
def listening():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"127.0.0.1:{server.getsockname()[1]}"


def test_a_named_cluster_gives_its_address_and_one_worker_per_node(tmp_path, listening):
    cluster = RayCluster(tmp_path, environ={"RAY_ADDRESS": listening})
    assert resolve_on_ray(OnRay(), cluster, ask=lambda address: ["a", "b", "c"]) == OnRay(
        3, listening)
    assert resolve_on_ray(OnRay(5), cluster, ask=lambda address: ["a"]) == OnRay(5, listening)


def test_a_cluster_that_names_no_node_is_one_line(tmp_path, listening):
    cluster = RayCluster(tmp_path, environ={"RAY_ADDRESS": listening})
    with pytest.raises(ValueError) as refused:
        resolve_on_ray(OnRay(2), cluster, ask=lambda address: [])
    assert str(refused.value) == (
        f"--llmperf-client-workers ray:2: the Ray cluster at {listening} did not name its "
        "nodes: start it (ray start --head) or correct RAY_ADDRESS, or unset RAY_ADDRESS for a "
        "local head")
