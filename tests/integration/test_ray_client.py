"""Client workers on a real local Ray cluster of two nodes (two raylets on this machine, each on a
core of its own), against the mock server of known timing (pytest_llmperf/clientbench/
mockserver.py) on the first core: the load split over both nodes measures what one process
measures, within the bounds docs/client.md gives ("Client workers on Ray"), its records merged
onto one time line; and a worker on a node another process keeps busy is named by the client's
self-check.

Loads are light (a few streams), as in test_client_mock.py: the bounds are wide and the point is
the split, the clocks and the naming, not the client's speed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_llmperf.client.measure import Endpoint, measure
from pytest_llmperf.client.patterns import Concurrency, Rate
from pytest_llmperf.client.ray_workers import OnRay
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.clientbench.bench import MockProcess
from pytest_llmperf.engines.server import free_port
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.records import Request

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None and not os.environ.get("CI"),
    reason="ray is not installed (the ray extra; scripts/install-cpu installs it)")

INTERVAL_S = 0.01
PROMPT = tuple(range(100, 116))
NODE_TIMEOUT_S = 120.0
# The one-process client and the split one, side by side against the same mock: docs/client.md,
# "Client workers on Ray", has these bounds and what was measured against them.
TPOT_OF_TRUTH = 0.10  # each run's TPOT p50 within 10% of the mock's
TTFT_APART_S = 0.002  # the two TTFT p50s within 2 ms (the self-check's loop-lag floor)
SCHEDULE_APART_S = 0.001  # an arrival's place in the merged schedule, against the seeded one

# A child process's answer: the cluster's alive nodes, (id, address, is the head).
_NODES = """
import json, sys
import ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
print(json.dumps([(n["NodeID"], n["NodeManagerAddress"], "node:__internal_head__" in n["Resources"])
                  for n in ray.nodes() if n.get("Alive")]))
"""


def _ray_start(args: list[str], core: int, log: Path, nice: int = 0) -> subprocess.Popen:
    """`ray start ... --block` in a session of its own, on `core`, at `nice`: every process it
    starts (GCS, raylet, agents, the workers) inherits both."""
    def place() -> None:
        os.sched_setaffinity(0, {core})
        os.nice(nice)

    return subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", *args, "--num-cpus=1",
         "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"],
        stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=place)


def _nodes(address: str) -> list[tuple[str, str, bool]]:
    done = subprocess.run([sys.executable, "-c", _NODES, address], capture_output=True,
                          text=True, timeout=60)
    lines = done.stdout.strip().splitlines()
    return [tuple(node) for node in json.loads(lines[-1])] if done.returncode == 0 else []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[tuple[str, tuple[str, str]]]:
    """A head on core 0 and a second node on core 1, at nice 19 (a host whose other tenants come
    first); yields the address and the second node's (id, address)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two cores are needed: one per node")
    where = tmp_path_factory.mktemp("ray")
    port = free_port()
    temp = f"--temp-dir={where / 'tmp'}"
    head = _ray_start(["--head", f"--port={port}", "--include-dashboard=false",
                       f"--ray-client-server-port={free_port()}",
                       f"--dashboard-agent-listen-port={free_port()}", temp], 0,
                      where / "head.log")
    address = f"127.0.0.1:{port}"
    started = [head]
    try:
        deadline = time.monotonic() + NODE_TIMEOUT_S
        while "Ray runtime started" not in (where / "head.log").read_text():
            assert head.poll() is None and time.monotonic() < deadline, \
                (where / "head.log").read_text()[-2000:]
            time.sleep(0.25)
        started.append(_ray_start([f"--address={address}",
                                   f"--dashboard-agent-listen-port={free_port()}", temp], 1,
                                  where / "node.log", nice=19))
        while len(nodes := _nodes(address)) < 2:
            assert time.monotonic() < deadline, (where / "node.log").read_text()[-2000:]
            time.sleep(0.5)
        [second] = [(node_id, node_address) for node_id, node_address, is_head in nodes
                    if not is_head]
        yield address, second
    finally:
        for process in reversed(started):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(30)


@pytest.fixture(scope="module")
def mock():
    server = MockProcess(INTERVAL_S, cpus=[0])
    yield server
    server.stop()


def requests(n: int, output_tokens: int = 20) -> list[Request]:
    return [Request(PROMPT, len(PROMPT), output_tokens)] * n


@pytest.mark.parametrize("pattern", [Rate(requests_per_s=25.0), Concurrency(max_concurrency=4)],
                         ids=["open-loop", "closed-loop"])
def test_two_nodes_measure_what_one_process_does(cluster, mock, pattern):
    address, _ = cluster
    endpoint = Endpoint(mock.url, "mock")
    one = measure(endpoint, requests(40), pattern, seed=7)
    split = measure(endpoint, requests(40), pattern, seed=7, workers=OnRay(2, address))
    assert split.client_error is None and split.stall is None
    truth = mock.truth()["tpot_s_p50"]
    ones, splits = compute_metrics(one.records), compute_metrics(split.records)
    # Every request once, numbered as one process numbers them.
    assert sorted(r.index for r in split.records) == list(range(40))
    assert splits.completed == ones.completed == 40 and splits.output_tokens == 40 * 20
    assert ones.tpot_s.p50 == pytest.approx(truth, rel=TPOT_OF_TRUTH)
    assert splits.tpot_s.p50 == pytest.approx(truth, rel=TPOT_OF_TRUTH)
    assert abs(splits.ttft_s.p50 - ones.ttft_s.p50) <= TTFT_APART_S
    # Both workers reported, each named by its node; both nodes took part.
    names = check_client(splits, split.client, pattern).processes
    assert [name.split(" on ")[0] for name in names] == ["client worker 0", "client worker 1"]
    assert len({name.split("(")[1] for name in names}) == 2, names
    if pattern.open_loop:
        # One time line: each arrival where the seeded schedule puts it, whichever node sent it.
        offsets = pattern.arrival_offsets(40, seed=7)
        by_index = {r.index: r.scheduled_s for r in split.records}
        start = by_index[0] - offsets[0]
        assert max(abs(by_index[i] - start - offsets[i]) for i in by_index) <= SCHEDULE_APART_S
        assert min(r.sent_s for r in split.records) >= start - SCHEDULE_APART_S


def test_a_worker_on_a_busy_node_is_named_by_the_self_check(cluster, mock):
    address, (busy_id, busy_address) = cluster
    # Eight processes that never sleep on the second node's core, each in a session of its own:
    # where the kernel groups the scheduling by session (autogroup, on here) the node's session
    # gets a ninth of the core, and where it does not its nice 19 gives it less. A load that
    # needs about a tenth of a core per worker (1,200 chunks/s each) then waits for the core:
    # measured, the busy node's worker lagged 8.6 ms at p90 and the other 0.8 ms.
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True,
                             preexec_fn=lambda: os.sched_setaffinity(0, {1}))
            for _ in range(8)]
    try:
        pattern = Rate(requests_per_s=60.0)
        measured = measure(Endpoint(mock.url, "mock"), requests(200, 40), pattern, seed=3,
                           workers=OnRay(2, address))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    metrics = compute_metrics(measured.records)
    check = check_client(metrics, measured.client, pattern)
    assert check.limited, check
    # Worker k goes to the k-th node by id (client/ray_workers.py).
    worker = sorted(name.split("(")[1][:8] for name in check.processes).index(busy_id[:8])
    assert check.busiest_worker.startswith(
        f"client worker {worker} on node {busy_address} ({busy_id[:8]}): lag p90 "), check
    assert check.reasons[-1] == f"most limited: {check.busiest_worker}"
    print(check.failure(2))
