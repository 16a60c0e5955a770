"""What every source of a workload's prompts answers (`Source`), and the text wrapper any source
can be seen through (`TextOf`).

A source gives three things: its requests (`requests(n, tokenizer, rng)`, seeded), its identity
(`to_dict`, what run files and baselines record), and the files it reads (`file_fields`: the
fields that name one). The workload, its identity (identity.py), the text conversion and the
capacity search ask a source rather than test its class, so a new source is one module that
subclasses Source (a frozen dataclass) and its tests; `Workload.of(source, ...)` measures it.
Subclassing registers the type tag run files record (`source_type`). GuideLLM keeps its
dataset sources behind one interface the same way (src/guidellm/data/ in
https://github.com/vllm-project/guidellm).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np

from pytest_llmperf.records import Request
from pytest_llmperf.registry import Registry
from pytest_llmperf.workloads.prompts import Tokenizer

__all__ = ["SOURCES", "NameFile", "PromptFormat", "Source", "TextOf", "source_type"]

PromptFormat = Literal["token_ids", "text"]
# How an identity names a file a source reads (identity.file_identity); as written by default.
NameFile = Callable[[str], str]

# Every dataset source class by name, as a run file's "type" names it; a subclass joins on
# definition.
SOURCES: Registry[type[Source]] = Registry("dataset source", lambda cls: cls.__name__)


def source_type(name: str) -> type[Source] | None:
    """The source class a run file's `"type"` names ("DatasetSource"), None for one this process
    does not know."""
    return SOURCES.get(name)


def _as_written(path: str) -> str:
    return path


class Source(ABC):
    """Where a workload's prompts come from.

    `prompt_format`: "text" when its prompts are text (a chat API needs text), "token_ids"
    otherwise; a source with a `prompt_format` field makes either. `file_fields`: the fields
    that name a file it reads; its identity names each (a path inside the project, else the
    content's digest: identity.py), and old baselines' absolute paths match them
    (verdict/baselines.py).
    """

    prompt_format: ClassVar[PromptFormat] = "token_ids"
    file_fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        SOURCES.register(cls)

    @abstractmethod
    def requests(self, n: int, tokenizer: Tokenizer, rng: np.random.Generator) -> list[Request]:
        """n requests, reproducible from `rng`."""

    def files(self) -> dict[str, str]:
        """Each file it reads, by the field that names it."""
        return {name: getattr(self, name) for name in self.file_fields
                if isinstance(getattr(self, name), str)}

    def to_dict(self, name_file: NameFile = _as_written) -> dict[str, Any]:
        """Its identity: the type and every field set (None left out), a nested length
        distribution or source as its own dict, an infinity as "inf", each file it reads
        named by `name_file`."""
        files = self.files()
        out = {name: name_file(files[name]) if name in files else _plain(value, name_file)
               for name, value in ((f.name, getattr(self, f.name)) for f in fields(self))}
        return {"type": type(self).__name__, **{k: v for k, v in out.items() if v is not None}}

    def as_text(self) -> Source:
        """This source with text prompts: itself when they are text, the same source asked for
        text when it can make either, else its token ids decoded (TextOf)."""
        if self.prompt_format == "text":
            return self
        if "prompt_format" in {f.name for f in fields(self)}:
            return replace(self, prompt_format="text")
        return TextOf(source=self)

    def at_speedup(self, speedup: float) -> Source | None:
        """A replayed trace's source `speedup` times faster than recorded (its arrivals are its
        own); None for a source that has no arrivals of its own."""
        return None


def _plain(value: Any, name_file: NameFile) -> Any:
    if isinstance(value, Source):
        return value.to_dict(name_file)
    if is_dataclass(value):
        described = {f.name: _plain(getattr(value, f.name), name_file) for f in fields(value)}
        return {"type": type(value).__name__,
                **{k: v for k, v in described.items() if v is not None}}
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return value


@dataclass(frozen=True, kw_only=True)
class TextOf(Source):
    """`source`'s requests with every token-id prompt decoded to text (workloads/text_only.py
    says why their lengths are counted again)."""

    prompt_format: ClassVar[PromptFormat] = "text"
    source: Source

    def requests(self, n: int, tokenizer: Tokenizer, rng: np.random.Generator) -> list[Request]:
        return [_decoded(request, tokenizer)
                for request in self.source.requests(n, tokenizer, rng)]


def _decoded(request: Request, tokenizer: Tokenizer) -> Request:
    if isinstance(request.prompt, str):
        return request
    text = tokenizer.decode(request.prompt)
    return replace(request, prompt=text, prompt_tokens=len(tokenizer.encode(text)))
