"""Makes vLLM end generations early on purpose: a stand-in for "the new vLLM release stops
early" (an EOS handling change, a broken min_tokens), which serves fewer tokens and so looks
faster without serving any faster.

Put this directory on PYTHONPATH and set LLMPERF_INDUCED_STOP_AFTER=N: every
request's sampling parameters, as the OpenAI server builds them (SamplingParams.from_optional),
then keep N tokens of the length the client forced and make the first half of the vocabulary (of
LLMPERF_INDUCED_STOP_VOCAB tokens, the tiny model's 4096 by default) stop tokens, so most
generations end a few tokens after N with finish_reason "stop".
"""

import os
import runpy
from pathlib import Path

STOP_AFTER = int(os.environ.get("LLMPERF_INDUCED_STOP_AFTER", "0") or 0)
VOCAB = int(os.environ.get("LLMPERF_INDUCED_STOP_VOCAB", "4096"))
TARGET = "vllm.sampling_params"
# tests/integration/import_hook.py, run by its location: only this folder is on the path.
HOOK = Path(__file__).resolve().parents[1] / "import_hook.py"


def _stopping_early(params):
    params.ignore_eos = False
    params.min_tokens = min(params.min_tokens, STOP_AFTER)
    params.stop_token_ids = list(range(VOCAB // 2))
    # What min_tokens masks until it is reached, and the engine's stop check (__post_init__
    # has run already; the engine core receives these fields as they are).
    params._all_stop_token_ids.update(params.stop_token_ids)
    return params


def _patch(module):
    params = module.SamplingParams
    build = params.from_optional  # a staticmethod

    def from_optional(*args, **kwargs):
        return _stopping_early(build(*args, **kwargs))

    params.from_optional = staticmethod(from_optional)


if STOP_AFTER > 0:
    runpy.run_path(str(HOOK))["after_import"](TARGET, _patch)
