"""The child process of offline mode: `python -m pytest_llmperf.engines.offline_worker JOB RESULT`.

It builds `vllm.LLM` from the job file's kwargs, generates every request in one `generate` call
and writes the counts to RESULT. The timing follows `vllm bench throughput`: prompts and sampling
parameters are built first, and the clock runs around `generate` only. `LLM(...)` must run under
`if __name__ == "__main__"`, because vLLM spawns its engine-core process, which re-imports the
main module.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from pytest_llmperf.engines.offline import read_job
from pytest_llmperf.records import Request


def to_prompt(prompt: str | Sequence[int]) -> Any:
    """A vLLM prompt: text as str, token ids as a TokensPrompt (a plain dict is one)."""
    if isinstance(prompt, str):
        return prompt
    return {"prompt_token_ids": [int(t) for t in prompt]}


def summarize(outputs: Sequence[Any], requests: Sequence[Request]) -> dict[str, int]:
    """Token counts from vLLM's RequestOutputs (in request order, as `generate` returns them)."""
    if len(outputs) != len(requests):
        raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(requests)} requests")
    output_lengths = [len(out.outputs[0].token_ids) for out in outputs]
    return {
        "requests": len(requests),
        "prompt_tokens": sum(len(out.prompt_token_ids or ()) for out in outputs),
        "output_tokens": sum(output_lengths),
        "length_mismatches": sum(
            n != r.output_tokens for n, r in zip(output_lengths, requests, strict=True)
        ),
    }


def write_result(path: Path, result: dict[str, Any]) -> None:
    """Write, then rename: the parent never reads a half-written result."""
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)


def _die_with_group(signum: int, frame: Any) -> None:
    """SIGTERM (from the parent's stop, or PR_SET_PDEATHSIG when the parent died) takes the
    engine-core process along: this process leads the session, so the group is everything."""
    os.killpg(os.getpgrp(), signal.SIGKILL)


def run(job_path: Path, result_path: Path) -> None:
    began = time.perf_counter()
    signal.signal(signal.SIGTERM, _die_with_group)
    llm_kwargs, requests = read_job(job_path)
    from vllm import LLM, SamplingParams  # here only: the test process never imports vLLM

    llm = LLM(**llm_kwargs)
    signal.signal(signal.SIGTERM, _die_with_group)  # in case vLLM installed its own handler
    engine_start_s = time.perf_counter() - began
    prompts = [to_prompt(r.prompt) for r in requests]
    params = [
        SamplingParams(max_tokens=r.output_tokens, min_tokens=r.output_tokens, ignore_eos=True,
                       temperature=0.0)
        for r in requests
    ]
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    elapsed_s = time.perf_counter() - start
    result = {**summarize(outputs, requests), "elapsed_s": elapsed_s,
              "engine_start_s": engine_start_s}
    write_result(result_path, result)
    print(f"offline: {json.dumps(result)}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m pytest_llmperf.engines.offline_worker JOB RESULT",
              file=sys.stderr)
        return 2
    run(Path(args[0]), Path(args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
