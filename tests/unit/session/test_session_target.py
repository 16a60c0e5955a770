"""session/target.py: the engines we start or the deployment we reach, chosen once; the runner
asks the target and never which one it is."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.client.access import Access
from pytest_llmperf.client.server_kind import LLAMACPP, VLLM
from pytest_llmperf.engines.errors import EngineStalled
from pytest_llmperf.errors import InputError
from pytest_llmperf.session.deployment import Deployment
from pytest_llmperf.session.target import (
    OurEngines,
    YourEndpoint,
    choose_target,
    client_kind_of,
)

POOL = SimpleNamespace()


def endpoint(tmp_path: Path) -> YourEndpoint:
    return YourEndpoint(Deployment("http://elsewhere:8000", Access(()), server_kind="llamacpp"),
                        tmp_path, POOL)


def test_the_target_is_chosen_once_from_the_deployment(tmp_path):
    ours = choose_target(None, POOL, rootdir=tmp_path, gpu_count=2, process_root=7,
                         judge_disturbance=False)
    assert ours == OurEngines(POOL, gpu_count=2, process_root=7, judge_disturbance=False)
    deployment = Deployment("http://elsewhere:8000", Access(()))
    assert choose_target(deployment, POOL, rootdir=tmp_path, gpu_count=2) == YourEndpoint(
        deployment, tmp_path, POOL)


def test_an_engine_kind_s_client_kind_is_looked_up():
    assert client_kind_of(Engine(model="m")) is VLLM
    assert client_kind_of(Engine(kind="llamacpp", model="m.gguf", tokenizer="t")) is LLAMACPP


def test_an_unknown_client_kind_is_one_line_naming_it_and_the_known_ones():
    engine = SimpleNamespace(engine_kind=SimpleNamespace(name="tgi", client_kind="tgi"))
    with pytest.raises(InputError) as excinfo:
        client_kind_of(engine)
    assert str(excinfo.value) == ("engine kind 'tgi' names client kind 'tgi', which is not one "
                                  "of vllm, sglang, llamacpp, openai")


def test_our_engines_keep_cores_for_the_engine_and_an_endpoint_keeps_none(tmp_path):
    assert [OurEngines(POOL).reserved_cores(hardware) for hardware in ("cpu", "h100")] == [1, 2]
    assert endpoint(tmp_path).reserved_cores("h100") == 0


def test_an_endpoint_s_stall_fails_the_test_and_is_not_ours_to_restart(tmp_path):
    target = endpoint(tmp_path)
    assert target.death(Engine(model="m"), [], None) is None
    died = target.death(Engine(model="m"), [], "no chunk for 30 s")
    assert isinstance(died, EngineStalled)
    assert str(died) == ("the server at http://elsewhere:8000 stalled during the test (no chunk "
                         "for 30 s); it is not ours to restart")


def test_an_endpoint_s_kind_is_as_named_with_its_line(tmp_path):
    assert endpoint(tmp_path).server_kind(Engine(model="m")) == (
        LLAMACPP, "--llmperf-endpoint http://elsewhere:8000 is llama.cpp's server "
                  "(--llmperf-server-kind)")


def test_an_endpoint_is_measured_unwatched_and_our_engines_have_nothing_to_check(tmp_path):
    assert endpoint(tmp_path).watch(lambda: "measured", Engine(model="m")) == "measured"
    ours = OurEngines(POOL)
    assert (ours.check_served(Engine(model="m"), "x"), ours.preflight(), ours.notes()) == (
        None, None, [])
