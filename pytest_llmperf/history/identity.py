"""Which series a result belongs to: the same test, on the same hardware family, with the same
engine spec and the same workload. Results of one series are comparable run after run; a change
of any of the four starts another series (a new GPU model, max_num_seqs 8 -> 16, a longer
prompt), while what a series is meant to watch (vLLM, torch, the driver, the commit) may change
inside it.

The hardware family is the key verdict/baselines.machine_id makes for machine-local baselines:
the hardware class, the device model and count and, on a CPU, its cores and generation (a VM's
model name may hide it). A workload's name is a label (baselines.WORKLOAD_LABELS): renaming it
keeps the series.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pytest_llmperf.verdict.baselines import WORKLOAD_LABELS, machine_id

__all__ = ["engine_hash", "family", "series_key", "workload_hash"]


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def family(fingerprint: Mapping[str, Any]) -> str:
    """The hardware family of a fingerprint ("cpu-1a2b3c4d5e", "h100-0f1e2d3c4b")."""
    return machine_id(fingerprint)


def engine_hash(engine: Mapping[str, Any]) -> str:
    """The engine spec as run files record it (secrets already hidden: provenance.py)."""
    return _digest(dict(engine))


def workload_hash(workload: Mapping[str, Any]) -> str:
    return _digest({k: v for k, v in workload.items() if k not in WORKLOAD_LABELS})


def series_key(test_id: str, family_key: str, engine: str, workload: str) -> str:
    return _digest([test_id, family_key, engine, workload])
