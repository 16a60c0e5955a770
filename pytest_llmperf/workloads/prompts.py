"""Synthetic prompts with exact token counts (their lengths drawn by lengths.py), and the tokenizer
that counts them.

Every length here counts tokens as `Tokenizer.encode` gives them: without special tokens. A server
may add a BOS token to a *text* prompt (vLLM's /v1/completions does); token-id prompts are taken
as they are, so they are the exact choice. All randomness comes from the `numpy` Generator passed
in: the same seed gives the same prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads.lengths import check_count

__all__ = [
    "MAX_TEXT_ROUNDS",
    "HFTokenizer",
    "TextPrompt",
    "Tokenizer",
    "load_tokenizer",
    "make_requests",
    "shared_prefix_prompts",
    "text_prompts",
    "token_id_prompts",
]

# text_prompts: decode/re-encode rounds allowed per prompt. Random ids settle in 1-3 rounds with
# the BPE tokenizers we tried; a tokenizer that never round-trips fails fast instead of spinning.
MAX_TEXT_ROUNDS = 64


class Tokenizer(Protocol):
    """What prompt generation needs from a tokenizer (owned here; `HFTokenizer` implements it)."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def special_ids(self) -> frozenset[int]: ...

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without special tokens (no BOS/EOS added)."""
        ...

    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass(frozen=True, slots=True)
class HFTokenizer:
    """A `tokenizers.Tokenizer` seen through the `Tokenizer` protocol."""

    backend: Any
    vocab_size: int
    special_ids: frozenset[int]

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=False)


def load_tokenizer(path: str | Path) -> HFTokenizer:
    """Load `tokenizer.json` from a local model directory (or the file itself); never downloads."""
    path = Path(path)
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(
            f"{path}: no tokenizer.json; point at a local model directory that has one "
            "(e.g. save it there with transformers' AutoTokenizer.save_pretrained)"
        )
    try:
        from tokenizers import Tokenizer as _Backend  # lazy: only prompt generation needs it
    except ImportError as exc:
        raise ImportError(
            f"{file}: loading it needs the tokenizers package; pip install tokenizers"
        ) from exc
    backend = _Backend.from_file(str(file))
    special = frozenset(i for i, tok in backend.get_added_tokens_decoder().items() if tok.special)
    return HFTokenizer(backend, backend.get_vocab_size(with_added_tokens=True), special)


# ---------------------------------------------------------------------------------------------
# Prompt generators.


def _lengths(lengths: Sequence[int] | np.ndarray) -> list[int]:
    out = [int(x) for x in np.asarray(lengths, dtype=np.int64).reshape(-1)]
    if any(x < 0 for x in out):
        raise InputError(f"prompt lengths must be >= 0, got {min(out)}")
    return out


def _allowed_ids(tokenizer_or_vocab: Tokenizer | int) -> np.ndarray:
    """Every id a random prompt may use: the vocabulary minus special tokens."""
    if isinstance(tokenizer_or_vocab, (int, np.integer)):
        vocab, special = int(tokenizer_or_vocab), frozenset()
    else:
        vocab, special = tokenizer_or_vocab.vocab_size, tokenizer_or_vocab.special_ids
    allowed = np.setdiff1d(
        np.arange(vocab, dtype=np.int64), np.fromiter(special, dtype=np.int64, count=len(special))
    )
    if allowed.size == 0:
        raise InputError(f"no usable token ids: vocab_size {vocab}, all of them special")
    return allowed


def _draw(allowed: np.ndarray, rng: np.random.Generator, n: int) -> list[int]:
    return allowed[rng.integers(0, allowed.size, size=n)].tolist()


def token_id_prompts(
    lengths: Sequence[int] | np.ndarray,
    tokenizer_or_vocab: Tokenizer | int,
    rng: np.random.Generator,
) -> list[tuple[int, ...]]:
    """Random token-id prompts of exactly the given lengths, never using a special id."""
    sizes = _lengths(lengths)
    flat = _draw(_allowed_ids(tokenizer_or_vocab), rng, sum(sizes))
    ends = np.cumsum(sizes).tolist()
    return [tuple(flat[end - size : end]) for size, end in zip(sizes, ends, strict=True)]


class TextPrompt(str):
    """A text prompt that carries its exact token count, so `make_requests` needs no tokenizer."""

    tokens: int

    def __new__(cls, text: str, tokens: int) -> TextPrompt:
        self = super().__new__(cls, text)
        self.tokens = tokens
        return self

    def __getnewargs__(self) -> tuple[str, int]:  # type: ignore[override]  # for pickle
        return str(self), self.tokens


def text_prompts(
    lengths: Sequence[int] | np.ndarray, tokenizer: Tokenizer, rng: np.random.Generator
) -> list[TextPrompt]:
    """Texts whose encoding has exactly the given number of tokens (and no special token)."""
    allowed = _allowed_ids(tokenizer)
    sizes = _lengths(lengths)
    return [TextPrompt(_exact_text(n, tokenizer, allowed, rng), n) for n in sizes]


def _exact_text(
    target: int, tokenizer: Tokenizer, allowed: np.ndarray, rng: np.random.Generator
) -> str:
    # Decoding random ids and re-encoding the text rarely gives the same ids back (neighbours
    # merge, partial UTF-8 bytes become U+FFFD), so we iterate as vLLM's random dataset does:
    # re-encode, trim or pad with fresh random ids, and check again until the count is exact.
    if target == 0:
        return ""
    special = tokenizer.special_ids
    ids = _draw(allowed, rng, target)
    seen: set[int] = set()
    closest = -1
    for _ in range(MAX_TEXT_ROUNDS):
        text = tokenizer.decode(ids)
        encoded = tokenizer.encode(text)
        clean = [i for i in encoded if i not in special]
        if len(encoded) == target and len(clean) == target:
            return text
        closest = min(closest, len(encoded), key=lambda x: abs(x - target))
        ids = clean[:target] + _draw(allowed, rng, max(0, target - len(clean)))
        key = hash(tuple(ids))
        if key in seen:
            # Trimming led back to ids we already tried: re-draw the tail to leave the cycle.
            tail = min(4, target)
            ids[-tail:] = _draw(allowed, rng, tail)
        seen.add(key)
    raise InputError(
        f"text_prompts: no text of exactly {target} tokens after {MAX_TEXT_ROUNDS} "
        f"decode/re-encode rounds (closest: {closest}); this tokenizer does not round-trip "
        "random ids, use token_id_prompts instead"
    )


def shared_prefix_prompts(
    num_prefixes: int,
    prefix_tokens: int,
    suffix_lengths: Sequence[int] | np.ndarray,
    tokenizer: Tokenizer | int,
    rng: np.random.Generator,
    *,
    assignment: Literal["round-robin", "random"] = "round-robin",
) -> list[tuple[int, ...]]:
    """Token-id prompts: one of `num_prefixes` shared prefixes, then a unique random suffix.

    Prompt i gets prefix i % num_prefixes ("round-robin") or a seeded random one ("random"); its
    length is prefix_tokens + suffix_lengths[i]. The prefixes start with different tokens, so
    they share no cache block with each other: exactly `num_prefixes` prefix chains to cache.
    """
    check_count("shared_prefix_prompts", "num_prefixes", num_prefixes, minimum=1)
    check_count("shared_prefix_prompts", "prefix_tokens", prefix_tokens, minimum=1)
    if assignment not in ("round-robin", "random"):
        raise InputError(f"assignment must be 'round-robin' or 'random', got {assignment!r}")
    allowed = _allowed_ids(tokenizer)
    if num_prefixes > allowed.size:
        raise InputError(
            f"num_prefixes ({num_prefixes}) exceeds the {allowed.size} usable token ids"
        )
    firsts = rng.choice(allowed, size=num_prefixes, replace=False).tolist()
    prefixes = [(first, *_draw(allowed, rng, prefix_tokens - 1)) for first in firsts]
    suffixes = token_id_prompts(suffix_lengths, tokenizer, rng)
    if assignment == "round-robin":
        which = [i % num_prefixes for i in range(len(suffixes))]
    else:
        which = rng.integers(0, num_prefixes, size=len(suffixes)).tolist()
    return [prefixes[w] + suffix for w, suffix in zip(which, suffixes, strict=True)]


def make_requests(
    prompts: Sequence[str | tuple[int, ...]],
    output_lengths: Sequence[int] | np.ndarray,
    prompt_lengths: Sequence[int] | np.ndarray | None = None,
) -> list[Request]:
    """Pair prompts with output lengths.

    A prompt's length is `prompt_lengths[i]` when given, else the length of a token-id tuple or
    the count a `TextPrompt` carries; a plain `str` needs `prompt_lengths`.
    """
    outputs = [int(x) for x in np.asarray(output_lengths, dtype=np.int64).reshape(-1)]
    if len(outputs) != len(prompts):
        raise InputError(f"{len(prompts)} prompts but {len(outputs)} output lengths")
    if any(x < 1 for x in outputs):
        raise InputError(
            "output lengths must be >= 1 (a request generates at least one token), "
            f"got {min(outputs)}"
        )
    if prompt_lengths is None:
        sizes = [_known_length(i, p) for i, p in enumerate(prompts)]
    else:
        sizes = _lengths(prompt_lengths)
        if len(sizes) != len(prompts):
            raise InputError(f"{len(prompts)} prompts but {len(sizes)} prompt lengths")
    return [
        Request(
            prompt=str(p) if isinstance(p, str) else tuple(int(t) for t in p),
            prompt_tokens=s,
            output_tokens=o,
        )
        for p, s, o in zip(prompts, sizes, outputs, strict=True)
    ]


def _known_length(index: int, prompt: str | Sequence[int]) -> int:
    if isinstance(prompt, TextPrompt):
        return prompt.tokens
    if isinstance(prompt, str):
        raise InputError(
            f"text prompt {index} has no token count; pass prompt_lengths "
            "(the prompts text_prompts returns carry theirs)"
        )
    return len(prompt)
