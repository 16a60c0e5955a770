"""The prefix cache in a stated state (Workload.prefix_cache, client/cache_reset.py): the
workload's field, where it is recorded, and the reset's answers, with a stand-in for httpx.post.
The real reset on vLLM is suites/test_cpu_requests.py's."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from pytest_llmperf import Workload
from pytest_llmperf.client.access import Access
from pytest_llmperf.client.cache_reset import RETRY_FOR_S, reset_prefix_cache
from pytest_llmperf.engines.kinds.vllm import VllmKind
from pytest_llmperf.errors import InputError

URL = "http://127.0.0.1:8000"
WARM = Workload.fixed(input_tokens=8, output_tokens=4, num_requests=2, concurrency=1)


def test_warm_is_the_default_and_only_cold_is_written_into_the_identity():
    # Absent means warm: baseline tables recorded before the field still match a warm workload.
    assert WARM.prefix_cache == "warm" and "prefix_cache" not in WARM.to_dict()
    cold = replace(WARM, prefix_cache="cold")
    assert cold.to_dict()["prefix_cache"] == "cold"
    assert cold.label() == "fixed-8in-4out x2 @ concurrency 1, cold prefix cache"


def test_another_state_is_refused():
    with pytest.raises(ValueError) as raised:
        replace(WARM, prefix_cache="hot")
    assert str(raised.value) == ("Workload 'fixed-8in-4out': prefix_cache must be 'warm' (the "
                                 "default) or 'cold', got 'hot'")


def test_engines_the_plugin_starts_serve_the_reset():
    assert VllmKind.server_env == {"VLLM_SERVER_DEV_MODE": "1"}


class Answers:
    """httpx.post's stand-in: each call takes the next (status, body); the calls are kept."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def __call__(self, url, **kwargs):
        self.calls.append((url, kwargs["headers"]))
        status, body = self.answers.pop(0)
        return httpx.Response(status, content=body.encode())


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def reset(post, clock=None):
    clock = clock or Clock()
    reset_prefix_cache(URL + "/", Access(headers=(("Authorization", "Bearer k"),)), post=post,
                       clock=clock, sleep=clock.sleep)


def test_a_refusal_while_blocks_are_held_is_retried():
    post = Answers((200, '{"success": false}'), (200, '{"success": true}'))
    reset(post)
    assert post.calls == [(URL + "/reset_prefix_cache", {"Authorization": "Bearer k"})] * 2


def test_a_server_without_the_route_is_one_line_naming_the_fix():
    with pytest.raises(InputError) as raised:
        reset(Answers((404, '{"detail": "Not Found"}')))
    assert str(raised.value) == (
        f"prefix_cache='cold' needs POST /reset_prefix_cache, and {URL}/ does not offer it "
        "(HTTP 404): vLLM serves it only in dev mode; start the server with "
        "VLLM_SERVER_DEV_MODE=1 (engines the plugin starts have it), or leave prefix_cache at "
        "'warm'")


def test_a_server_that_keeps_refusing_fails_after_the_retries():
    post = Answers(*[(200, '{"success": false}')] * 200)
    with pytest.raises(InputError) as raised:
        reset(post)
    assert str(raised.value) == (
        f"prefix_cache='cold': {URL}/ refused to reset its prefix cache for {RETRY_FOR_S:g} s "
        "(it answers success=false while blocks are held: is another load running on it?)")
    # every 0.1 s for 10 s, and the one at the deadline (a float's sum of steps may need one more)
    assert len(post.calls) in (101, 102)


def test_another_error_is_quoted():
    with pytest.raises(InputError) as raised:
        reset(Answers((500, "boom")))
    assert str(raised.value) == ("prefix_cache='cold': POST /reset_prefix_cache on "
                                 f"{URL}/ answered HTTP 500: boom")
