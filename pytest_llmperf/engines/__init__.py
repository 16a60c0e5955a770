"""Engines: the spec (pure data), the vLLM server subprocess, and the session's pool."""

from pytest_llmperf.engines.spec import Engine

__all__ = ["Engine"]
