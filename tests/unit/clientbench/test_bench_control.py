"""`llmperf bench-client`'s talk with its mock server processes (clientbench/bench.py's
MockProcess, mockserver._answer): a truth of any size reaches the benchmark, and a server
process that dies or goes silent ends the run in one line, within a bound, with the rows measured
before it kept.

The server processes are real (spawned); the ones that misbehave run mockserver.serve with its
control answer swapped for a broken one, by the entry functions below.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import os
import pickle
import struct
import time

import pytest

from pytest_llmperf.client.patterns import Concurrency
from pytest_llmperf.clientbench import bench, mockserver, mockstreams

BIG = 200_000  # values in each of a truth's three lists: megabytes pickled
INTERVAL_S = 0.01


# ---------------------------------------------------------------- server processes' entries
# Each runs in a spawned process: what it swaps in mockserver is swapped there only.


_TRUTH = mockstreams._Truth  # the class itself, whatever an entry puts in its place


def _big_truth() -> mockstreams._Truth:
    values = [i * 1e-6 for i in range(BIG)]
    return _TRUTH(ttft_s=values, tpot_s=list(values), tick_late_s=list(values), chunks=BIG)


def _serve_with_a_big_truth(*args, **kwargs) -> None:
    mockstreams._Truth = _big_truth  # the server's truth, and the one after each reset
    mockserver.serve(*args, **kwargs)


def _read_and_say_nothing(server, control) -> None:
    control.recv()


def _serve_silently(*args, **kwargs) -> None:
    mockserver._answer = _read_and_say_nothing
    mockserver.serve(*args, **kwargs)


def _exit_3(server, control) -> None:
    os._exit(3)


def _serve_then_die_when_asked(*args, **kwargs) -> None:
    mockserver._answer = _exit_3
    mockserver.serve(*args, **kwargs)


def _say_part_of_an_answer(server, control) -> None:
    """What a server that sends more than the pipe takes, non-blocking, leaves in it: the
    length of a message, the first bytes of it, then nothing."""
    control.recv()
    os.write(control.fileno(), struct.pack("!i", 1 << 20) + b"x" * 100)


def _serve_and_answer_in_part(*args, **kwargs) -> None:
    mockserver._answer = _say_part_of_an_answer
    mockserver.serve(*args, **kwargs)


def _serve_one_load_then_go_silent(*args, **kwargs) -> None:
    """Answers the first load's "reset" and "truth", then nothing."""
    answered, answer = itertools.count(), mockserver._answer

    def first_two(server, control) -> None:
        if next(answered) < 2:
            answer(server, control)
        else:
            control.recv()

    mockserver._answer = first_two
    mockserver.serve(*args, **kwargs)


# ---------------------------------------------------------------- the tests


def test_a_truth_of_megabytes_reaches_the_benchmark_whole():
    """Far more than a pipe holds (~64 KiB): it used to fail part-way in the server and leave
    the benchmark waiting for ever on the rest."""
    assert len(pickle.dumps(dataclasses.asdict(_big_truth()))) > 4 << 20
    server = bench.MockProcess(INTERVAL_S, entry=_serve_with_a_big_truth, control_timeout_s=60)  # a bound, not a speed target
    try:
        server.reset()
        truth = server.truth()
        truth_dir = server._truth_dir
        assert os.listdir(truth_dir) == []  # read, then removed
    finally:
        server.stop()
    assert truth["streams"] == BIG
    assert truth["chunks"] == BIG
    assert truth["ttft_s_p50"] == pytest.approx((BIG - 1) / 2 * 1e-6)
    # The running server adds its own ticks' lateness to the planted ones: a few samples among
    # a million move the p99 by parts per million, more when the machine is loaded.
    assert truth["tick_late_s_p99"] == pytest.approx(0.99 * (BIG - 1) * 1e-6, rel=1e-3)
    assert not os.path.exists(truth_dir)


def test_a_silent_server_process_is_named_in_one_line_once_the_bound_has_passed():
    server = bench.MockProcess(INTERVAL_S, entry=_serve_silently, control_timeout_s=0.5)
    try:
        began = time.monotonic()
        with pytest.raises(bench.BenchError) as raised:
            server.truth()
        waited = time.monotonic() - began
        pid = server.pids[0]
    finally:
        server.stop()
    assert raised.value.line("1024 streams") == (
        f"mock server process 1 (pid {pid}) did not answer 'truth' within 0.5 s at 1024 streams: "
        "it is still running but silent")
    assert 0.5 <= waited < 1.5
    assert not server.processes[0].is_alive()


def test_a_server_process_that_sends_part_of_an_answer_is_named_at_once():
    """The way a truth sent down the pipe used to fail: the benchmark waited for the rest."""
    server = bench.MockProcess(INTERVAL_S, entry=_serve_and_answer_in_part, control_timeout_s=10)
    try:
        began = time.monotonic()
        with pytest.raises(bench.BenchError) as raised:
            server.truth()
        waited = time.monotonic() - began
        pid = server.pids[0]
    finally:
        server.stop()
    assert raised.value.line("1024 streams") == (
        f"mock server process 1 (pid {pid}) did not answer 'truth' within 10 s at 1024 streams: "
        "only part of its answer came; it is still running but silent")
    assert waited < 2


def test_a_server_process_that_dies_when_asked_is_named_with_its_exit_code_at_once():
    server = bench.MockProcess(INTERVAL_S, entry=_serve_then_die_when_asked, control_timeout_s=10)
    try:
        began = time.monotonic()
        with pytest.raises(bench.BenchError) as raised:
            server.reset()
        waited = time.monotonic() - began
        pid = server.pids[0]
    finally:
        server.stop()
    assert raised.value.line("64 streams") == (
        f"mock server process 1 (pid {pid}) did not answer 'reset' within 10 s at 64 streams: "
        "it exited with code 3")
    assert waited < 2  # its pipe closed: no waiting out the bound


def test_a_request_the_server_process_cannot_serve_comes_back_as_its_error():
    server = bench.MockProcess(INTERVAL_S, control_timeout_s=10)
    try:
        with pytest.raises(bench.BenchError) as raised:
            server._ask("rewind")
        pid = server.pids[0]
        server.reset()  # it goes on answering
    finally:
        server.stop()
    assert raised.value.line("100 req/s") == (
        f"mock server process 1 (pid {pid}) did not answer 'rewind' within 10 s at 100 req/s: "
        "it failed: ValueError: unknown control request 'rewind'; known: truth, reset")


def test_a_server_process_gone_silent_mid_run_ends_it_in_one_line_keeping_the_earlier_rows(
        monkeypatch, capsys, tmp_path):
    started: list[bench.MockProcess] = []

    class GoesSilent(bench.MockProcess):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, entry=_serve_one_load_then_go_silent, control_timeout_s=1,
                             **kwargs)
            started.append(self)

    monkeypatch.setattr(bench, "MockProcess", GoesSilent)
    loads = [bench.Load(label, Concurrency(max_concurrency=2), 4) for label in ("first", "second")]
    config = bench.BenchConfig(interval_ms=1, output_tokens=4, loads=loads, with_vllm=False,
                               json_path=tmp_path / "rows.json")
    out = io.StringIO()
    cores = os.sched_getaffinity(0)
    try:
        code = bench.main_bench(config, out)
    finally:
        os.sched_setaffinity(0, cores)  # main_bench moves itself off the server's core
    (server,) = started
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [
        "measured first",
        f"llmperf bench-client: mock server process 1 (pid {server.pids[0]}) did not answer "
        "'reset' within 1 s at second: it is still running but silent"]
    table = out.getvalue().splitlines()[1:]  # under the header line
    assert [line.split()[0] for line in table] == ["load", "-----", "first"]
    assert [row["load"] for row in json.loads(config.json_path.read_text())] == ["first"]
    assert not server.processes[0].is_alive()
    assert not os.path.exists(server._truth_dir)
