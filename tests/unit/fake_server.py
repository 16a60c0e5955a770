"""An engine server that starts nothing (no vLLM), logging its starts and stops with the GPUs it
was given; the engine BROKEN fails to start."""

from __future__ import annotations

from pytest_llmperf import Engine
from pytest_llmperf.engines.server import EngineStartError

BROKEN = Engine(model="/m/broken")


class FakeServer:
    def __init__(self, engine, env, log):
        self.engine, self.env, self.log = engine, env, log
        self.base_url, self.start_time_s = f"http://fake/{engine.model}", 1.0
        self.log_path, self.story = None, None  # story: how it died (None: alive)

    def death(self):
        return self.story

    def start(self):
        if self.engine is BROKEN:
            raise EngineStartError("vLLM engine 'broken' exited with code 1: boom")
        self.log.append(("start", self.engine.model, self.env.get("CUDA_VISIBLE_DEVICES")))
        return self

    def launch(self):
        self.start()

    def ready(self):
        return True

    def stop(self, kill=False):
        self.log.append(("kill" if kill else "stop", self.engine.model,
                         self.env.get("CUDA_VISIBLE_DEVICES")))

    def state(self):
        return "server sleeping, VLLM::EngineCore pid 7 stopped (T); /health answered 200"
