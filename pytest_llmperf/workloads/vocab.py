"""A tokenizer stand-in for models that ship only an architecture config (no tokenizer files).

The GPU suites measure Llama-sized architectures with `load_format="dummy"` and
`skip_tokenizer_init`: random weights, token-id prompts, token ids back. Prompt generation then
needs only the vocabulary's size and its special ids, which config.json has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pytest_llmperf.errors import InputError
from pytest_llmperf.numbers import is_whole


@dataclass(frozen=True, slots=True)
class VocabOnly:
    """Implements prompts.Tokenizer for token-id prompts; text needs a real tokenizer."""

    vocab_size: int
    special_ids: frozenset[int]
    source: str

    def encode(self, text: str) -> list[int]:
        raise self._no_text()

    def decode(self, ids: Sequence[int]) -> str:
        raise self._no_text()

    def _no_text(self) -> TypeError:
        return TypeError(f"{self.source} has no tokenizer: use token-id prompts "
                         "(prompt_format='token_ids', the default), not text or datasets")


def vocab_from_config(model_dir: str | Path) -> VocabOnly | None:
    """From a local model directory's config.json; None when there is none to read."""
    config_path = Path(model_dir) / "config.json"
    if not config_path.is_file():
        return None
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{config_path}: line {exc.lineno}, column {exc.colno}: invalid JSON "
                         f"({exc.msg})") from None
    if not isinstance(config, dict) or not _whole(config.get("vocab_size"), 1):
        raise InputError(
            f"{config_path}: no \"vocab_size\" (a whole number >= 1, e.g. 32000 for Llama 2); "
            "token-id prompts need the vocabulary's size: add it, or ship the tokenizer files "
            "(tokenizer.json) beside config.json")
    specials = set()
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = config.get(key)
        specials.update(value if isinstance(value, list) else [value] if value is not None else [])
    return VocabOnly(config["vocab_size"], frozenset(specials), str(config_path))


def _whole(value: object, minimum: int) -> bool:
    return is_whole(value, minimum)
