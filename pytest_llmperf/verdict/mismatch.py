"""Was a reference measured with this test's engine, workload and hardware? Each field that
differs, and the one line that names them with the fix, compared as a baseline file stores them
(verdict/baseline_toml.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_llmperf.secrets import redact_env
from pytest_llmperf.verdict import shapes
from pytest_llmperf.verdict.baseline_entry import Baseline
from pytest_llmperf.verdict.baseline_toml import key_path, toml_safe

__all__ = ["WORKLOAD_LABELS", "engine_changes", "engine_mismatch",
           "hardware_mismatch", "machine_id", "workload_changes", "workload_mismatch"]


def _show(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value, default=str)


def _changed(recorded: Mapping[str, Any], current: Mapping[str, Any],
             ignore: tuple[str, ...] = ()) -> list[str]:
    """"name old -> new" for each field that differs, both compared as TOML stores them (None
    dropped, tuples as lists), so a field set to None matches a field that is absent."""
    stored, now = toml_safe(dict(recorded)), toml_safe(dict(current))
    return [f"{name} {_show(stored.get(name))} -> {_show(now.get(name))}"
            for name in sorted(set(stored) | set(now))
            if name not in ignore and stored.get(name) != now.get(name)]


def engine_changes(recorded: Any, engine: Mapping[str, Any]) -> list[str]:
    """Each engine field that differs between a recorded engine and this test's
    ("max_num_seqs 256 -> 128"); none where nothing was recorded."""
    # A Mapping: a saved run's engine is its typed facts (metrics/facts.py), a baseline's a dict.
    return _changed(_hidden(recorded), engine) if isinstance(recorded, Mapping) else []


def engine_mismatch(baseline: Baseline, engine: Mapping[str, Any]) -> str | None:
    """One line naming the file, the test and each engine field that differs; None if equal.
    A baseline without a recorded engine cannot be checked and gives None."""
    changed = engine_changes(baseline.provenance.get("engine"), engine)
    if not changed:
        return None
    return (
        f"{baseline.path}: {key_path(baseline.test_id)}: baseline was measured with another engine "
        f"configuration ({', '.join(changed)}); if the change is intended, regenerate it with "
        "--llmperf-update-baselines"
    )


def _hidden(engine: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded engine with its secrets hidden, as the current one is (session/provenance.py):
    a baseline written before secrets were hidden still matches, and a mismatch line never
    prints the secret it holds."""
    return {name: redact_env(value) if name in ("env", "extra_args") and isinstance(value, dict)
            else value for name, value in engine.items()}


# A workload's name is a label: renaming it changes no number. Every other field (the requests,
# their lengths, the load pattern, the seed, the API, the warm-up) does.
WORKLOAD_LABELS = ("name",)


def workload_changes(recorded: Any, workload: Mapping[str, Any] | None) -> list[str]:
    """Each workload field that differs between a reference's recorded workload and this
    test's ("num_requests 64 -> 32"); none where either is unknown."""
    if not isinstance(recorded, Mapping) or not workload:
        return []
    recorded = {**recorded, "source": _same_files_as(recorded.get("source"),
                                                     workload.get("source"))}
    return _changed(recorded, workload, ignore=WORKLOAD_LABELS)


def _same_files_as(recorded: Any, current: Any) -> Any:
    """`recorded` with each absolute file path that ends in `current`'s rootdir-relative path
    written as that path. References recorded before workload identities named files relative
    to the rootdir hold the recording checkout's absolute path ("/home/ci/repo/suites/data/
    p.jsonl"); the same file in this checkout is "suites/data/p.jsonl". A digest (a file outside
    the project) never matches an old path: the old reference cannot say what the file held.
    Any field may name a file (a source says which of its own do: workloads/source.py); only a
    file's field holds an absolute path in one and its tail in the other."""
    if not isinstance(recorded, Mapping) or not isinstance(current, Mapping):
        return recorded
    out = {}
    for name, value in recorded.items():
        now = current.get(name)
        if isinstance(value, str) and isinstance(now, str) and value.startswith("/") \
                and not now.startswith("/") and value.endswith("/" + now):
            value = now
        out[name] = _same_files_as(value, now)
    return out


def workload_mismatch(baseline: Baseline, workload: Mapping[str, Any] | None) -> str | None:
    """One line naming the file, the test and each workload field that differs; None if the
    baseline measured this workload (or did not record one)."""
    changed = workload_changes(baseline.provenance.get("workload"), workload)
    if not changed:
        return None
    return (f"{baseline.path}: {key_path(baseline.test_id)}: baseline was measured with another "
            f"workload ({', '.join(changed)}); not compared; if the change is intended, "
            "regenerate it with --llmperf-update-baselines")


# A baseline's hardware is its runner shape (verdict/shapes.py): the GPU model and the GPUs the
# engine occupies, or the CPU model, cores and generation.
machine_id = shapes.machine_id


def hardware_mismatch(baseline: Baseline, fingerprint: Mapping[str, Any],
                      engine: Mapping[str, Any] | None = None) -> str | None:
    """One line naming what differs between the baseline's runner shape and this one (this
    machine, and `engine`, the test's engine); None when they match or the baseline recorded no
    fingerprint."""
    changed = shapes.hardware_mismatch(baseline.provenance.get("fingerprint"), fingerprint,
                                       baseline.provenance.get("engine"), engine)
    if not changed:
        return None
    return (f"{baseline.path}: {key_path(baseline.test_id)}: baseline is from other hardware "
            f"({', '.join(changed)}); not gated")
