"""Side B of `--llmperf-ab`: the test's engine with the option's Engine fields applied, and the
option's JSON checked before any engine starts (its fields, their values, and a `python`
interpreter that must run and import vLLM: docs/ab.md, "Running it")."""

from __future__ import annotations

import difflib
import json
import subprocess
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from pytest_llmperf.engines.spec import Engine, is_pairs, thaw_pairs
from pytest_llmperf.errors import InputError

__all__ = ["MERGED_FIELDS", "check_python", "parse_overrides", "with_overrides"]

def parse_overrides(text: str) -> dict[str, Any]:
    """--llmperf-ab's JSON object of Engine fields that make side B, checked before any engine
    starts: JSON, field names, values (by building an Engine with them) and a `python`
    interpreter that exists and has vLLM."""
    example = """e.g. '{"max_num_seqs": 8}' or '{"python": "/opt/vllm-next/bin/python"}'"""
    try:
        overrides = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc}); give a JSON object of Engine fields, "
                         f"{example}") from None
    if not isinstance(overrides, dict) or not overrides:
        raise InputError(f"give a non-empty JSON object of Engine fields, {example}")
    known = [f.name for f in fields(Engine)]
    for name in overrides:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(f"unknown Engine field {name!r}{hint}; fields: {', '.join(known)}")
    try:
        with_overrides(Engine(model="side-b"), {k: v for k, v in overrides.items() if k != "model"})
    except (TypeError, ValueError) as exc:
        raise InputError(f"{exc}") from None
    if "python" in overrides:
        check_python(overrides["python"])
    return overrides


# Mapping fields an override adds to instead of replacing: '{"env": {"X": "1"}}' must not drop
# the test's own environment (on the CPU, the core its engine is pinned to). null removes a key.
MERGED_FIELDS = ("env", "extra_args")


def with_overrides(engine: Engine, overrides: Mapping[str, Any]) -> Engine:
    """The test's engine with --llmperf-ab's (or --llmperf-ab-a's) overrides: plain fields
    replaced, `env` and `extra_args` merged key by key into the engine's own (a null value
    removes that key)."""
    changes = dict(overrides)
    for name in MERGED_FIELDS:
        if isinstance(changes.get(name), Mapping):
            own = getattr(engine, name)
            merged = {**(thaw_pairs(own) if is_pairs(own) else dict(own or {})), **changes[name]}
            changes[name] = {key: value for key, value in merged.items() if value is not None}
    return engine.replace(**changes)


def check_python(python: object) -> None:
    """A `python` override must run and import vLLM; found out now, not after an engine's
    minutes-long start fails."""
    fix = "name the python of another vLLM install, e.g. /opt/vllm-next/bin/python"
    if not isinstance(python, str) or not Path(python).is_file():
        raise InputError(f"python {python!r} does not exist; {fix}")
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        found = subprocess.run([python, "-c", probe], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"python {python!r} does not run ({exc}); {fix}") from None
    if found.returncode != 0:
        raise InputError(f"python {python!r} has no vLLM (it cannot import vllm); {fix}")
