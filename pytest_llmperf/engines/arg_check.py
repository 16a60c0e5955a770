"""Engine arguments checked by the server's own parser, no engine started (`--llmperf-check-args`):
vLLM's `vllm serve` parser for a vLLM spec, and each other kind's own (engines/kinds/).

A GPU suite runs where there are GPUs: nightly, on a runner CI does not have. A misspelt flag in
one (`extra_args={"max-num-seqz": 8}`, `kv_cache_dtype="fp9"`, `dtype="bf16"`, broken JSON in
`speculative_config`) would otherwise be found there, after the machine was booked. Here each
`Engine.server_args()` goes through the parser the server builds for itself
(engines/arg_check_worker.py says how), so a refusal is vLLM's own words.

The parser lives in a child process of the interpreter the engine would run with (this one, or
`Engine(python=...)`'s other vLLM install), as the server and the offline worker do: the test
process never imports vLLM (seconds of torch import, and a vLLM that configures logging and
warnings for the whole process). One child per interpreter and kind per session: the import is
paid once, and each check after it takes milliseconds. Where another kind's package does not
import in the engine's interpreter (SGLang, TensorRT-LLM on a CPU machine), its specs are not
checked, and the summary says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from pytest_llmperf.engines.errors import EngineError
from pytest_llmperf.engines.kinds import DEFAULT, EngineKind
from pytest_llmperf.engines.spec import Engine

__all__ = ["ArgCheckError", "CheckOutcome", "check_engines", "close_all", "require_vllm"]

WORKER_MODULE = "pytest_llmperf.engines.arg_check_worker"
# The child imports vLLM (torch) before its first answer: ~6 s on a 2-core CI machine.
START_TIMEOUT_S = 180.0
ANSWER_TIMEOUT_S = 60.0


class ArgCheckError(EngineError):
    """The checking child could not be started or stopped answering. One line."""


def require_vllm() -> None:
    """ValueError (one line) where this interpreter has no vLLM; checked before any test runs."""
    if importlib.util.find_spec("vllm") is None:
        raise ValueError("--llmperf-check-args parses engine arguments with vLLM's own parser, "
                         "and vLLM is not installed here: install it (pip install -e '.[cpu]' "
                         "or '.[gpu]') or drop the flag")


class _Checker:
    """One child process holding a kind's parser: a JSON argument list in, {"refusal": ...}
    out. `unavailable`: why the kind's parser could not be built there (its import error)."""

    def __init__(self, python: str, env: Mapping[str, str], kind: EngineKind) -> None:
        argv = [python, "-m", WORKER_MODULE] + ([] if kind.name == DEFAULT
                                                 else ["--kind", kind.name])
        self.command = " ".join(argv)
        self.what = f"the {kind.label} argument check ({self.command})"
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        try:
            self._process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, text=True, env=dict(env))
        except OSError as exc:
            self._stderr.close()
            raise ArgCheckError(f"{self.what} could not start: {exc.strerror or exc}") from None
        hello = self._answer(START_TIMEOUT_S)
        self.unavailable: str | None = hello.get("unavailable")
        self.version = str(hello.get(DEFAULT) or hello.get("version") or "unknown")
        if self.unavailable:
            self.close()

    def refusal(self, args: list[str]) -> str | None:
        stdin: TextIO = self._process.stdin  # type: ignore[assignment]
        try:
            stdin.write(json.dumps(args) + "\n")
            stdin.flush()
        except (OSError, ValueError):  # its end of the pipe is gone (or closed)
            raise self._ended() from None
        return self._answer(ANSWER_TIMEOUT_S).get("refusal")

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        stdout: TextIO = self._process.stdout  # type: ignore[assignment]
        ready, _, _ = select.select([stdout], [], [], timeout_s)
        line = stdout.readline() if ready else ""
        if not ready:
            self.close()
            raise ArgCheckError(f"{self.what} gave no answer in {timeout_s:.0f} s")
        try:
            return json.loads(line)
        except json.JSONDecodeError:  # "" at its end; anything else is not our worker
            raise self._ended() from None

    def _ended(self) -> ArgCheckError:
        """The child's end, told by its last line on stderr (vLLM's ImportError, say)."""
        self._stop()
        self._stderr.seek(0)
        lines = [line.strip() for line in self._stderr.read().splitlines() if line.strip()]
        self.close()
        return ArgCheckError(f"{self.what} ended before answering: "
                             f"{lines[-1] if lines else 'no output'}")

    def _stop(self) -> None:
        if self._process.poll() is None:
            try:
                self._process.stdin.close()  # type: ignore[union-attr]  - ends at end of input
            except OSError:
                pass
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def close(self) -> None:
        self._stop()
        for stream in (self._process.stdin, self._process.stdout, self._stderr):
            if stream is not None and not stream.closed:
                try:
                    stream.close()
                except OSError:  # a pipe whose reader is gone
                    pass


_CHECKERS: dict[tuple[str, str, tuple[tuple[str, str], ...]], _Checker] = {}


def _checker(engine: Engine) -> _Checker:
    """The child for the interpreter `engine` runs with and its kind, in the environment it
    gets (its `env` can point PYTHONPATH at another vLLM), started on first use."""
    python = engine.python or sys.executable
    env = {**os.environ, **engine.environment()}
    key = (python, engine.kind,
           tuple(sorted((k, v) for k, v in env.items() if k.startswith("PYTHON"))))
    if key not in _CHECKERS:
        _CHECKERS[key] = _Checker(python, env, engine.engine_kind)
    return _CHECKERS[key]


def close_all() -> None:
    """End every checking child (the session's end)."""
    while _CHECKERS:
        _CHECKERS.popitem()[1].close()


@dataclass(frozen=True)
class CheckOutcome:
    """One measurement call's engines checked: `failure` is its line when a server's parser
    refused one, else None and `summary` says what was checked (and what could not be)."""

    failure: str | None
    summary: str


def check_engines(engines: Sequence[tuple[str, Engine]]) -> CheckOutcome:
    """Check each (role, engine) - role "engine", "A/B side A", ... - in order; the first
    refusal is the failure: "A/B side B (llama-3.1-8b ...): vLLM 0.32.0 refuses its arguments:
    unrecognized arguments: --max-num-seqz". ArgCheckError where no child answers."""
    checked: list[str] = []
    unchecked: list[str] = []
    versions: dict[EngineKind, list[str]] = {}  # the parsers used, by kind
    for role, engine in engines:
        checker = _checker(engine)
        kind = engine.engine_kind
        if checker.unavailable:
            unchecked.append(f"{role} ({engine.label()}): {kind.label}'s parser does not import "
                             f"here ({checker.unavailable}); checked only where {kind.name} is "
                             "installed")
            continue
        try:
            problem = checker.refusal(engine.server_args())
        except ArgCheckError:  # that child is gone: the next check starts another
            for key in [key for key, known in _CHECKERS.items() if known is checker]:
                del _CHECKERS[key]
            raise
        if problem is not None:
            return CheckOutcome(f"{role} ({engine.label()}): {kind.label} {checker.version} "
                                "refuses its arguments: " + problem, "")
        checked.append(f"{role} ({engine.label()})")
        versions.setdefault(kind, []).append(checker.version)
    parsers = [f"{kind.label} {' and '.join(dict.fromkeys(found))}'s {kind.arg_checked_by} parser"
               for kind, found in versions.items()]
    return CheckOutcome(None, _summary(checked, parsers, unchecked))


def _summary(checked: list[str], parsers: list[str], unchecked: list[str]) -> str:
    done = (f"engine arguments checked: {'; '.join(checked)} ({'; '.join(parsers)})"
            if checked else "")
    if not unchecked:
        return done
    missed = "; ".join(unchecked)
    return f"{done}; not checked: {missed}" if done else f"engine arguments not checked: {missed}"
