"""Ray placement (engines/ray.py) without a cluster: what markers count for a Ray engine, from a
stand-in for `ray.cluster_resources()`; the environment a Ray engine gets; the pool handing it
the cluster and stopping the head with the engines. The head itself is started for real in
tests/integration/test_ray_engine.py."""

from __future__ import annotations

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines.leases import GpuLeases
from pytest_llmperf.engines.pool import EnginePool
from pytest_llmperf.engines.ray import RAY_ADDRESS, RayCluster, cluster_hardware, gpus_in
from pytest_llmperf.machine.hardware import Hardware
from pytest_llmperf.plugin.markers import parse_requirements, skip_reason

RAY_ENGINE = Engine(model="meta-llama/Llama-3.1-405B-Instruct", tensor_parallel_size=8,
                    pipeline_parallel_size=2, distributed_executor_backend="ray")
PLAIN = Engine(model="meta-llama/Llama-3.1-8B-Instruct")
H100_NODE = Hardware("h100", "NVIDIA H100 80GB HBM3", 8, source="nvml")
CPU_HEAD = Hardware("cpu", "cpu", 0, source="cpu", cpu_cores=2)
# What ray.cluster_resources() answers for two nodes of 8 H100s each (Ray names the type).
TWO_H100_NODES = {"CPU": 384.0, "GPU": 16.0, "memory": 3.2e12, "node:10.0.0.1": 1.0,
                  "node:10.0.0.2": 1.0, "accelerator_type:H100": 2.0}


def requirement(*marks):
    return parse_requirements(marks)


def test_whole_gpus_are_counted():
    assert gpus_in(TWO_H100_NODES) == 16
    assert gpus_in({"GPU": 7.5}) == 7
    assert gpus_in({"CPU": 4.0}) == 0


def test_a_two_node_cluster_satisfies_gpus_16_and_h100():
    cluster = cluster_hardware(H100_NODE, TWO_H100_NODES, "10.0.0.1:6379")
    assert (cluster.hardware_class, cluster.device_count) == ("h100", 16)
    assert skip_reason(requirement(("gpus", (16,), {}), ("h100", (), {})), cluster) is None
    assert skip_reason(requirement(("gpus", (32,), {})), cluster) == (
        "needs 32 GPUs; found 16x NVIDIA H100 in the Ray cluster at 10.0.0.1:6379")


def test_a_cpu_head_in_front_of_gpu_nodes_takes_their_class():
    cluster = cluster_hardware(CPU_HEAD, {"GPU": 8.0, "accelerator_type:A100-80G": 1.0},
                               "head:6379")
    assert (cluster.hardware_class, cluster.device_count) == ("a100-80gb", 8)


def test_mixed_accelerator_types_keep_this_machines_class():
    cluster = cluster_hardware(H100_NODE, {"GPU": 16.0, "accelerator_type:H100": 1.0,
                                           "accelerator_type:A100": 1.0}, "head:6379")
    assert (cluster.hardware_class, cluster.device_count) == ("h100", 16)


def test_markers_of_a_ray_engine_are_judged_by_the_named_cluster():
    asked = []

    def ask(address, python):
        asked.append((address, python))
        return TWO_H100_NODES

    ray = RayCluster("logs", environ={RAY_ADDRESS: "10.0.0.1:6379"}, ask=ask)
    assert ray.hardware_for(RAY_ENGINE, H100_NODE).device_count == 16
    assert ray.hardware_for(RAY_ENGINE.replace(max_num_seqs=8), H100_NODE).device_count == 16
    assert len(asked) == 1  # once per interpreter
    assert ray.hardware_for(PLAIN, H100_NODE) is H100_NODE  # not a Ray engine: this machine
    assert ray.hardware_for(None, H100_NODE) is H100_NODE


def test_a_local_head_has_this_machines_gpus_and_is_not_asked():
    ray = RayCluster("logs", environ={}, ask=lambda address, python: pytest.fail("asked"))
    assert ray.hardware_for(RAY_ENGINE, H100_NODE) is H100_NODE
    assert not ray.spans_nodes


def test_a_cluster_that_does_not_answer_leaves_this_machine():
    ray = RayCluster("logs", environ={RAY_ADDRESS: "10.0.0.9:6379"}, ask=lambda a, p: {})
    assert ray.hardware_for(RAY_ENGINE, H100_NODE) is H100_NODE


def test_a_ray_engine_joins_the_named_cluster_and_another_engine_is_left_alone():
    ray = RayCluster("logs", environ={RAY_ADDRESS: "10.0.0.1:6379"})
    assert ray.env_for(RAY_ENGINE) == {RAY_ADDRESS: "10.0.0.1:6379"}
    assert ray.env_for(PLAIN) == {}
    ray.close()  # a named cluster is never stopped: nothing was started
    assert ray.head is None


class Placement:
    """Stands in for RayCluster in the pool."""

    def __init__(self, spans_nodes=False):
        self.spans_nodes, self.closed = spans_nodes, 0

    def env_for(self, engine):
        return {RAY_ADDRESS: "127.0.0.1:1"} if engine.engine_kind.uses_ray(engine) else {}

    def close(self):
        self.closed += 1


class Server:
    def __init__(self, engine, env, seen):
        self.engine, self.env = engine, env
        self.base_url, self.start_time_s, self.log_path = "http://x", 1.0, None
        seen.append(env)

    def start(self):
        return self

    def stop(self, kill=False):
        pass

    def death(self):
        return None


def test_the_pool_hands_a_ray_engine_the_cluster_and_stops_the_head_with_the_engines(tmp_path):
    seen, placement = [], Placement()
    pool = EnginePool(lambda engine, env: Server(engine, env, seen),
                      leases=GpuLeases(["0", "1"], lease_dir=tmp_path, timeout_s=1.0),
                      placement=placement)
    pool.get(RAY_ENGINE.replace(pipeline_parallel_size=None, tensor_parallel_size=2))
    pool.get(PLAIN)
    assert seen == [{"CUDA_VISIBLE_DEVICES": "0,1", RAY_ADDRESS: "127.0.0.1:1"},
                    {"CUDA_VISIBLE_DEVICES": "0"}]
    pool.stop_all()
    assert placement.closed == 1


def test_across_nodes_a_ray_engine_holds_this_machines_share_of_its_gpus(tmp_path):
    seen = []
    pool = EnginePool(lambda engine, env: Server(engine, env, seen),
                      leases=GpuLeases(["0", "1", "2", "3"], lease_dir=tmp_path, timeout_s=1.0),
                      placement=Placement(spans_nodes=True))
    pool.get(RAY_ENGINE)  # TP=8 x PP=2: 16 GPUs, 4 of them here
    assert pool.gpus_of(RAY_ENGINE) == ["0", "1", "2", "3"]
    pool.stop_all()
