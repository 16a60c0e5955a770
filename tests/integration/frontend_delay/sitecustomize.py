"""Makes vLLM's API server slower on purpose, before the engine sees a request: a stand-in for
"the new release's frontend got slower" (or a proxy in the way).

Put this directory on PYTHONPATH and set LLMPERF_INDUCED_FRONTEND_DELAY_S (seconds): every
/v1/completions request then waits that long in the API server before it is handed to the engine.
vLLM starts a request's TTFT and E2EL at its arrival in the engine client, after this point
(docs/phases.md), so the delay shows as frontend and wire, not as queue or prefill.
"""

import asyncio
import os
import runpy
from pathlib import Path

DELAY_S = float(os.environ.get("LLMPERF_INDUCED_FRONTEND_DELAY_S", "0") or 0)
TARGET = "vllm.entrypoints.openai.completion.serving"  # vLLM 0.32's completions handler
# tests/integration/import_hook.py, run by its location: only this folder is on the path.
HOOK = Path(__file__).resolve().parents[1] / "import_hook.py"


def _slow_frontend(module):
    """Wraps OpenAIServingCompletion.create_completion."""
    serving = module.OpenAIServingCompletion
    create = serving.create_completion

    async def slow_create_completion(self, *args, **kwargs):
        await asyncio.sleep(DELAY_S)  # the event loop serves other requests meanwhile
        return await create(self, *args, **kwargs)

    serving.create_completion = slow_create_completion


if DELAY_S > 0:
    runpy.run_path(str(HOOK))["after_import"](TARGET, _slow_frontend)
