"""What a Result says it measured, as typed facts: the engine and the workload as baselines,
run files and the results store record them, and a load pattern's or a workload source's
description tagged by its type.

An engine's spec and a workload have many fields, and each engine kind and source adds its own,
so the facts keep every recorded field (read-only: `engine["max_num_seqs"]`, `engine.get(...)`)
and name the ones the package reads (`engine.model`, `workload.pattern.type`). Each writes itself
as the plain dict the run file holds (`to_dict`) and reads itself back (`from_dict`); the run
file's layout: reports/runfile.py. Pure: no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["EngineFacts", "Facts", "Tagged", "WorkloadFacts"]


@dataclass(frozen=True, eq=False)
class Facts(Mapping[str, Any]):
    """Recorded fields, read-only. Equal to any mapping of the same fields (a run file's dict),
    as the dict it replaces was."""

    fields: Mapping[str, Any]

    def __post_init__(self) -> None:
        # A copy, read-only at the top: a fact that one reader edits would change for all.
        object.__setattr__(self, "fields", MappingProxyType(copy.deepcopy(dict(self.fields))))

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # A read-only mapping cannot be pickled or deep-copied; its plain fields can.
        return type(self), (self.to_dict(),)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.fields))

    @classmethod
    def from_dict(cls, plain: Mapping[str, Any] | None):
        """The facts of `to_dict`'s form; None or a value that is not a mapping: none known."""
        return cls(plain if isinstance(plain, Mapping) else {})


@dataclass(frozen=True, eq=False, repr=False)
class Tagged(Facts):
    """A load pattern's or a source's description: {"type": "Rate", "requests_per_s": 4.0}
    (client/patterns.py `describe`, workloads/workload.py `_describe`)."""

    @property
    def type(self) -> str:
        return str(self.fields.get("type", ""))


@dataclass(frozen=True, eq=False, repr=False)
class EngineFacts(Facts):
    """The engine's spec as baselines record it (session/provenance.engine_identity): its
    fields, secrets hidden, model paths relative to the rootdir."""

    @property
    def model(self) -> str:
        return str(self.fields.get("model", ""))


@dataclass(frozen=True, eq=False, repr=False)
class WorkloadFacts(Facts):
    """The workload as baselines record it (workloads/identity.workload_identity): its requests,
    source, load pattern and seed, its files named alike in every checkout."""

    @property
    def pattern(self) -> Tagged:
        return Tagged.from_dict(self.fields.get("pattern"))

    @property
    def source(self) -> Tagged:
        return Tagged.from_dict(self.fields.get("source"))

    @property
    def prefix_cache(self) -> str:
        """The prefix cache's state as the measurement began; absent is warm
        (Workload.to_dict)."""
        return str(self.fields.get("prefix_cache", "warm"))
