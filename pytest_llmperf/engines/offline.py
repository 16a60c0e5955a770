"""Offline mode: vLLM's in-process engine (`LLM.generate`) for maximum throughput.

This measures what `vllm bench throughput` measures: every request handed to the engine at once,
the clock running around `generate` only. vLLM is never imported here: `LLM` runs in a child
process (`python -m pytest_llmperf.engines.offline_worker`) that is started and stopped like the
server (own session, PR_SET_PDEATHSIG, nice, log file), so a crash, a hang or Ctrl-C can never
leave an engine behind in the test process. Requests go to the child in a JSON job file; the child
writes its counts to a JSON result file next to it in the log directory.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pytest_llmperf.engines.errors import EngineStartError
from pytest_llmperf.engines.process import (
    check_model_path,
    engine_error,
    own_rpc_dir,
    spawn,
    stop_group,
)
from pytest_llmperf.engines.server import STARTUP_TIMEOUT_S
from pytest_llmperf.engines.spec import Engine, is_pairs, thaw_pairs
from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request

WORKER_MODULE = "pytest_llmperf.engines.offline_worker"
OFFLINE = " (offline)"  # in error messages, after the engine's label
# Engine start (up to STARTUP_TIMEOUT_S for a large model) plus the run itself.
OFFLINE_TIMEOUT_S = STARTUP_TIMEOUT_S + 900.0
JOB_VERSION = 1

# Engine fields that are not LLM(...) keyword arguments. `lora_modules` is the API server's
# (an offline request names its adapter itself: LoRARequest), so offline runs send none.
_NOT_KWARGS = ("extra_args", "env", "python", "kind", "lora_modules")
_RUN_IDS = itertools.count()


@dataclass(frozen=True)
class OfflineResult:
    """One offline run. Token counts are vLLM's own (prompt and output token ids it returned);
    `elapsed_s` is the time inside `LLM.generate`, excluding the engine start."""

    requests: int
    prompt_tokens: int
    output_tokens: int
    elapsed_s: float
    # From the worker's start to LLM(...) ready, vLLM's import included; not in any throughput.
    engine_start_s: float
    output_throughput_tok_s: float
    total_throughput_tok_s: float
    request_throughput_req_s: float
    # Requests whose output length differs from the one forced (min_tokens = max_tokens).
    length_mismatches: int
    log_path: Path | None = None

    @classmethod
    def from_counts(cls, counts: dict[str, Any], log_path: Path | None = None) -> "OfflineResult":
        """Derive the throughputs from the child's counts, the way `vllm bench throughput` does."""
        elapsed = float(counts["elapsed_s"])
        prompt, output = int(counts["prompt_tokens"]), int(counts["output_tokens"])
        n = int(counts["requests"])
        return cls(
            requests=n, prompt_tokens=prompt, output_tokens=output, elapsed_s=elapsed,
            engine_start_s=float(counts["engine_start_s"]),
            output_throughput_tok_s=output / elapsed,
            total_throughput_tok_s=(prompt + output) / elapsed,
            request_throughput_req_s=n / elapsed,
            length_mismatches=int(counts["length_mismatches"]), log_path=log_path,
        )


def llm_kwargs(engine: Engine) -> dict[str, Any]:
    """`LLM(**kwargs)` for this spec. Engine fields already use vLLM's EngineArgs names; `None`
    is left out so vLLM's default applies. `extra_args` names lose their dashes; a JSON-object
    string is parsed, as `vllm serve` would parse it for a config flag."""
    kwargs: dict[str, Any] = {}
    for f in fields(engine):
        value = getattr(engine, f.name)
        if f.name in _NOT_KWARGS or value is None:
            continue
        kwargs[f.name] = _plain(value)
    for name, value in engine.extra_args:
        kwargs[name.lstrip("-").replace("-", "_")] = _plain(value)
    return kwargs


def _plain(value: Any) -> Any:
    if is_pairs(value):
        return thaw_pairs(value)
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def write_job(path: Path, engine: Engine, requests: list[Request]) -> None:
    """The child's input: LLM kwargs and the requests (token-id prompts as lists)."""
    job = {
        "version": JOB_VERSION,
        "llm_kwargs": llm_kwargs(engine),
        "requests": [
            {
                "prompt": r.prompt if isinstance(r.prompt, str) else [int(t) for t in r.prompt],
                "prompt_tokens": int(r.prompt_tokens),
                "output_tokens": int(r.output_tokens),
            }
            for r in requests
        ],
    }
    Path(path).write_text(json.dumps(job))


def read_job(path: Path) -> tuple[dict[str, Any], list[Request]]:
    """What `write_job` wrote, as (LLM kwargs, requests)."""
    job = json.loads(Path(path).read_text())
    if job.get("version") != JOB_VERSION:
        raise InputError(f"{path}: job file version {job.get('version')!r}, "
                         f"expected {JOB_VERSION}")
    requests = [
        Request(
            prompt=r["prompt"] if isinstance(r["prompt"], str) else tuple(r["prompt"]),
            prompt_tokens=r["prompt_tokens"],
            output_tokens=r["output_tokens"],
        )
        for r in job["requests"]
    ]
    return job["llm_kwargs"], requests


def run_offline(engine: Engine, requests: list[Request], log_dir: Path, *, nice: int = 0,
                timeout_s: float = OFFLINE_TIMEOUT_S) -> OfflineResult:
    """Start `LLM(...)` in a child process, generate every request at once, and return the
    counts. Raises EngineStartError (one line, ending with the log path) if the child fails or
    runs past `timeout_s`; nothing it started is left running, whatever happens."""
    if not requests:
        raise InputError("run_offline: no requests")
    if not engine.engine_kind.offline:
        raise EngineStartError(f"offline run of {engine.label()}: {engine.engine_kind.label} has "
                               "no offline mode here (vLLM's LLM.generate is the one there is); "
                               "measure it with llmperf.run")
    check_model_path(engine, OFFLINE)
    if engine.python:  # the worker is this package's code, run by this install's vLLM
        raise EngineStartError(f"offline run of {engine.label()}: Engine(python=...) applies to "
                               "served engines only; offline runs use this process's vLLM "
                               "(drop python= here, or measure with llmperf.run)")
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    stem = log_dir / f"vllm-offline-{os.getpid()}-{next(_RUN_IDS)}"
    job, result, log = (stem.with_suffix(s) for s in (".job.json", ".result.json", ".log"))
    result.unlink(missing_ok=True)  # a stale result must never pass for this run's
    write_job(job, engine, requests)
    command = [sys.executable, "-m", WORKER_MODULE, str(job), str(result)]
    # Unbuffered, so the log's last lines are the child's last words even when it is killed.
    with own_rpc_dir({**engine.environment(), "PYTHONUNBUFFERED": "1"}) as added:
        proc = spawn(command, added, log, nice)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise engine_error(engine, f"did not finish in {timeout_s:.0f} s", log,
                               OFFLINE) from None
        finally:
            stop_group(proc)
    if code != 0 or not result.is_file():
        what = f"exited with code {code}" if code != 0 else "exited without a result"
        raise engine_error(engine, what, log, OFFLINE)
    return OfflineResult.from_counts(json.loads(result.read_text()), log)


