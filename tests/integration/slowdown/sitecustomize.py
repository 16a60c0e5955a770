"""Makes vLLM slower on purpose: a stand-in for "the new vLLM release regressed".

Put this directory on PYTHONPATH and set LLMPERF_INDUCED_STEP_DELAY_S (seconds): every model
step of every vLLM process started from that environment sleeps that long before running, as a
slower kernel or scheduler would. The engine spec is untouched, so the gate sees the same test
and engine as in its baseline and must catch the slowdown on its own.
"""

import importlib.abc
import os
import sys
import time

DELAY_S = float(os.environ.get("LLMPERF_INDUCED_STEP_DELAY_S", "0") or 0)
TARGET = "vllm.v1.worker.gpu_model_runner"  # the CPU model runner inherits execute_model


class _SlowDown(importlib.abc.MetaPathFinder):
    """Wraps GPUModelRunner.execute_model right after its module is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            runner = module.GPUModelRunner
            execute = runner.execute_model

            def slow_execute_model(self, *args, **kwargs):
                time.sleep(DELAY_S)
                return execute(self, *args, **kwargs)

            runner.execute_model = slow_execute_model

        spec.loader.exec_module = exec_module
        return spec


if DELAY_S > 0:
    import importlib.util

    sys.meta_path.insert(0, _SlowDown())
