"""What an engine kind provides (`EngineKind`), and the flag spelling the kinds share.

A kind reads a spec through `SpecFields` (the attributes of engines/spec.Engine it needs), so a
kind module imports nothing of the spec: the spec imports the kinds to check and spell itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_llmperf.engines.kinds.parsing import Refusal
from pytest_llmperf.registry import Registry

__all__ = ["COMMON_FIELDS", "ENTRY_POINTS", "KINDS", "EngineKind", "FlagStyle", "SpecFields",
           "extra_flags", "field_problem_for", "is_pairs", "thaw_pairs", "value_flags"]

# Fields every kind takes: what to serve, the interpreter and environment to start it with, the
# server's own flags as given, and the kind itself.
COMMON_FIELDS = ("kind", "model", "extra_args", "env", "python")

# Where another package names a kind of its own (docs/engines.md, "Adding a kind").
ENTRY_POINTS = "pytest_llmperf.engine_kinds"


class SpecFields(Protocol):
    """What a kind reads of a spec (engines/spec.Engine has these and more)."""

    kind: str
    model: str
    extra_args: Any
    env: Any
    python: str | None

    def to_dict(self) -> dict[str, Any]: ...


class EngineKind(Protocol):
    """One kind of inference server the plugin starts and stops itself.

    Pure knowledge: the process, health and pool modules ask a kind; the kind starts nothing.
    """

    name: str  # Engine(kind=...)
    label: str  # how lines name it: "vLLM", "llama.cpp's server"
    noun: str  # how start errors begin: "vLLM engine"
    client_kind: str  # its client/server_kind.KINDS name: which request fields it takes
    distributions: tuple[str, ...]  # the packages whose version is the server's version
    log_name: str  # its log file: <log_name>-<port>.log
    ready_path: str  # GET answers 200 once it serves
    dead_status: int | None  # what that GET answers when the server is up but its engine died
    log_prefix: re.Pattern[str] | None  # its log line prefix, with a `level` group
    private_dir_env: str | None  # a variable naming a directory of its own, removed at stop
    # Environment it is started with unless the Engine's env says otherwise (vLLM's dev mode,
    # which serves the prefix-cache reset a cold-cache workload needs).
    server_env: Mapping[str, str]
    model_hint: str  # what Engine(model=...) should name, for a missing path
    offline: bool  # has an in-process mode (`llmperf.offline`)
    # The command whose own parser --llmperf-check-args runs (`arg_parser`, called in
    # engines/arg_check_worker.py's child process only).
    arg_checked_by: str

    def field_problem(self, spec: SpecFields) -> str | None:
        """One line naming a field this kind has no use for (or one it needs), else None."""

    def server_args(self, spec: SpecFields) -> list[str]:
        """The server's flags for `spec`, without host and port."""

    def command(self, spec: SpecFields, python: str, host: str, port: int) -> list[str]:
        """The whole launch command."""

    def uses_ray(self, spec: SpecFields) -> bool:
        """Whether the server places its workers with Ray (engines/ray.py)."""

    def arg_parser(self) -> tuple[dict[str, str], Refusal]:
        """The server's own parser: its hello ({"version": ...}) and a refusal of an argument
        list (kinds/parsing.py). Imports the server's package, inside this method: called in
        --llmperf-check-args' child process only (ImportError where it is not installed)."""


@dataclass(frozen=True)
class FlagStyle:
    """How a server spells its flags: the word separator (`--max-num-seqs` or `--n_ctx`), and
    True and False (a bare flag and `--no-<flag>`, a bare flag and nothing, or a value)."""

    separator: str
    booleans: str  # "negatable" (vLLM), "switch" (store_true: False leaves it out), "value"

    def flag(self, name: str) -> str:
        return "--" + re.sub(r"[-_]", self.separator, name.lstrip("-"))

    def pair(self, name: str, value: Any) -> list[str]:
        """One `extra_args` entry as arguments."""
        flag = self.flag(name)
        if isinstance(value, bool):
            if self.booleans == "value":
                return [flag, str(value)]
            if value:
                return [flag]
            return ["--no-" + flag[2:]] if self.booleans == "negatable" else []
        if is_pairs(value):
            return [flag, json.dumps(thaw_pairs(value))]
        if isinstance(value, tuple):  # a list: one value per word
            return [flag, *map(str, value)]
        return [flag, str(value)]


def value_flags(spec: SpecFields, flags: Mapping[str, str], style: FlagStyle) -> list[str]:
    """`--flag VALUE` for each field of `flags` (field -> the server's flag name) that is set,
    in the table's order."""
    args: list[str] = []
    for name, flag in flags.items():
        value = getattr(spec, name)
        if value is not None:
            args += [style.flag(flag), str(value)]
    return args


def extra_flags(spec: SpecFields, style: FlagStyle) -> list[str]:
    """The spec's `extra_args`, each as the server spells a flag and its value, in order."""
    args: list[str] = []
    for name, value in spec.extra_args:
        args += style.pair(name, value)
    return args


def field_problem_for(spec: SpecFields, label: str, taken: tuple[str, ...]) -> str | None:
    """`Engine(kind='llamacpp', tensor_parallel_size=2): llama.cpp's server has no
    tensor_parallel_size; ...` for the first set field outside COMMON_FIELDS + `taken`."""
    for name in spec.to_dict():
        if name not in COMMON_FIELDS and name not in taken:
            value = getattr(spec, name)
            return (f"Engine(kind={spec.kind!r}, {name}={value!r}): {label} has no {name}; "
                    f"its fields are {', '.join(('model', *taken))}; pass its own flags in "
                    "extra_args")
    return None


def is_pairs(value: Any) -> bool:
    """A dict as the spec stores it: a tuple of (name, value) pairs."""
    return (isinstance(value, tuple) and bool(value)
            and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
                    for p in value))


def thaw_pairs(pairs: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """A frozen dict (sorted pairs, as the spec stores it) as a dict again."""
    return {k: (thaw_pairs(v) if is_pairs(v) else v) for k, v in pairs}


# Every kind by name: this package's modules register theirs (`KINDS.register(TheKind())`),
# vLLM first (the default); another package's come through ENTRY_POINTS, and a name taken
# already stays ours.
KINDS: Registry[EngineKind] = Registry(
    "engine kind", lambda kind: kind.name, modules=(f"{__name__.rpartition('.')[0]}.vllm",),
    package=__name__.rpartition(".")[0], entry_points=ENTRY_POINTS)
