"""Makes vLLM slower on purpose: a stand-in for "the new vLLM release regressed".

Put this directory on PYTHONPATH and set LLMPERF_INDUCED_STEP_DELAY_S (seconds): every model
step of every vLLM process started from that environment sleeps that long before running, as a
slower kernel or scheduler would. The engine spec is untouched, so the gate sees the same test
and engine as in its baseline and must catch the slowdown on its own.

LLMPERF_INDUCED_STEP_FACTOR (a number above 1) instead makes each step take that many times as
long as it did: after a step of t seconds it sleeps (factor - 1) * t, as a slower CPU would be
(scripts/rehearse --slower FACTOR: a machine the project has not met, docs/testing.md). The two
add up when both are set.
"""

import os
import runpy
import time
from pathlib import Path

DELAY_S = float(os.environ.get("LLMPERF_INDUCED_STEP_DELAY_S", "0") or 0)
FACTOR = float(os.environ.get("LLMPERF_INDUCED_STEP_FACTOR", "1") or 1)
TARGET = "vllm.v1.worker.gpu_model_runner"  # the CPU model runner inherits execute_model
# tests/integration/import_hook.py, run by its location: only this folder is on the path.
HOOK = Path(__file__).resolve().parents[1] / "import_hook.py"


def _slow_down(module):
    runner = module.GPUModelRunner
    execute = runner.execute_model

    def slow_execute_model(self, *args, **kwargs):
        time.sleep(DELAY_S)
        started = time.perf_counter()
        output = execute(self, *args, **kwargs)
        if FACTOR > 1:
            time.sleep((FACTOR - 1) * (time.perf_counter() - started))
        return output

    runner.execute_model = slow_execute_model


if DELAY_S > 0 or FACTOR > 1:
    runpy.run_path(str(HOOK))["after_import"](TARGET, _slow_down)
