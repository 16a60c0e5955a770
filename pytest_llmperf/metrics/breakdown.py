"""A per-run breakdown: numbers a run gives beyond its metrics, kept with its result (a
conversation's latencies by turn, a LoRA split's by adapter, structured outputs' cold and warm
grammars, tool calls, agent sessions, reasoning, embeddings).

One class per breakdown, subclassing `Breakdown`, does all of it: it computes itself from a
measured Result (`of`), says its `-v` lines (`notes`), and round-trips the run file under its
`name` (`to_plain`, `from_plain`). Subclassing registers it in KINDS (pytest_llmperf/registry.py,
as an output registers on subclassing Output); the runner, the measurement record and the run
file reader take every registered breakdown and name none. A new built-in breakdown is its
module and its line in BUILT_IN (the registry imports them); a plugin of the plugin registers
one by importing its module (a conftest, or its own plugin module).

A breakdown holds the JSON form the run file keeps (`Plain`) as recorded facts do
(metrics/facts.py: a read-only copy, equal to the plain dict), so that a test's
`result.tool_calls["invalid"]` reads what the file holds.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeAlias, Union

from pytest_llmperf.metrics.facts import Facts
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.registry import Registry

__all__ = ["BUILT_IN", "KINDS", "Breakdown", "MeasuredRun", "Plain", "PlainValue", "kinds",
           "of_result", "read"]

# What a run file holds: JSON's values.
PlainValue: TypeAlias = Union[None, bool, int, float, str, Sequence["PlainValue"],
                              Mapping[str, "PlainValue"]]
Plain: TypeAlias = Mapping[str, PlainValue]

# The package's own breakdowns, in the order their lines are shown and their keys written.
BUILT_IN = ("pytest_llmperf.metrics.turns", "pytest_llmperf.metrics.lora",
            "pytest_llmperf.metrics.structured", "pytest_llmperf.metrics.tool_calls",
            "pytest_llmperf.metrics.agents", "pytest_llmperf.metrics.reasoning",
            "pytest_llmperf.metrics.embeddings")

# Every breakdown by name, the built-in ones first in BUILT_IN's order.
KINDS: Registry[type[Breakdown]] = Registry("breakdown", lambda cls: cls.name, modules=BUILT_IN)


class MeasuredRun(Protocol):
    """What a breakdown reads of a measured run: metrics/result.Result has it (named here, not
    imported: the Result imports this module)."""

    records: tuple[RequestRecord, ...]  # the representative run's requests
    workload: Any  # its WorkloadFacts (`.fields`: the workload as recorded)
    metrics: Any  # its RunMetrics (`.flat()`: every metric by name)


class Breakdown(Facts):
    """One run's breakdown of one kind, built from its plain form (`Breakdown(plain)`). A
    subclass sets `name` (its run-file key) and `of`."""

    name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:  # not an abstract middle class
            KINDS.register(cls)

    @classmethod
    @abstractmethod
    def of(cls, result: MeasuredRun) -> Breakdown | None:
        """This kind's breakdown of a measured run; None for a run it does not apply to."""

    def notes(self) -> list[str]:
        """The -v lines under the summary: none unless the kind says some."""
        return []

    def to_plain(self) -> dict[str, PlainValue]:
        """The run file's entry under `name`."""
        return self.to_dict()

    @classmethod
    def from_plain(cls, plain: Plain) -> Breakdown:
        """The breakdown a run file holds (`to_plain`'s form)."""
        return cls(plain)


def kinds() -> dict[str, type[Breakdown]]:
    """Every registered breakdown by name, the built-in ones first in BUILT_IN's order, then
    the others in the order they registered."""
    return KINDS.all()


def of_result(result: MeasuredRun) -> dict[str, Breakdown]:
    """Every breakdown that applies to `result`, by name."""
    found = {name: kind.of(result) for name, kind in kinds().items()}
    return {name: breakdown for name, breakdown in found.items() if breakdown is not None}


def read(entry: Mapping[str, object]) -> dict[str, Breakdown]:
    """The breakdowns a run file's result entry holds, by name; a key whose value is not an
    object is not read (a breakdown is descriptive: it never fails a file)."""
    out = {}
    for name, kind in kinds().items():
        plain = entry.get(name)
        if isinstance(plain, Mapping):
            out[name] = kind.from_plain(plain)
    return out
