"""Engines: everything about the inference servers the plugin starts, stops and checks itself.

Owns: the spec (`Engine`, pure data: spec.py, field_rules.py), the kinds of server behind one
protocol (kinds/: vLLM, llama.cpp's server, SGLang, TensorRT-LLM; docs/engines.md), the process
we own (process.py) and its server (server.py), health and death lines (health.py), the
session's pool and GPU leases (pool.py, leases.py), Ray placement (ray.py), CPU core placement
(cpu_cores.py), the interpreter's versions (interpreter.py), offline mode (offline.py) and the
argument check (arg_check.py). The *_worker modules run in child processes only.

May import: the layers below it (metrics, failures, model_files, records, errors, ids, numbers,
machine, secrets: pyproject.toml's [tool.importlinter]), never client/, session/ or pytest.
A server's own package (vllm, llama_cpp, sglang, tensorrt_llm, ray) is imported only inside a
*_worker module, which the test process never imports: it runs them with `python -m`.
"""

from pytest_llmperf.engines.spec import Engine

__all__ = ["Engine"]
