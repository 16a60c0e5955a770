"""The workload profiles of huggingface/inference-benchmarker, as seeded request lists.

Lengths follow inference-benchmarker's profile table (docs/published-numbers.md, Workload
profiles; its `src/profiles.rs`); every length is drawn from `Normal` (mean, clipped to [min,
max], "variance" being a standard deviation as there). Where we differ, on purpose:
- inference-benchmarker truncates every dataset prompt to the profile's *mean* prompt length
  (its `tokenize_prompt` takes `num_tokens` and never samples min/max/variance); we sample the
  prompt length from the table's distribution, as the table describes.
- fixed-length: its code draws outputs from Normal(800, [50, 800], 100); the table, and we, use
  exactly 800, so the profile is what its name says.
- chat replays multi-turn history. inference-benchmarker puts the model's own reply into the
  next turn; a request list is built before anything runs, so we put the dataset's assistant
  turn there (or, synthesized, random tokens as long as the conversation's output length).

Datasets are used when the file is on this machine: an explicit path, or the `main` branch of the
`hlarcher/inference-benchmarker` dataset repo in huggingface_hub's cache (HF_HUB_CACHE, else
HF_HOME/hub), found by huggingface_hub's own offline lookup as model_files.py finds a model's
files (https://huggingface.co/docs/huggingface_hub/guides/manage-cache). Nothing is downloaded;
without the file the prompts are synthesized with the same length distributions (random token
ids), so a profile runs anywhere. Pass `search_cache=False` to get the synthetic workload on
every machine.

`scale` multiplies every token length (distribution means, bounds and spreads, question lengths,
dataset prompts). scale=0.1 makes classification 800-1200-token prompts with 3-8 output tokens,
which fits the tiny CPU model (max_model_len 2048) while keeping the workload's shape: long
shared documents, short answers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.model_files import cached_file
from pytest_llmperf.numbers import is_whole
from pytest_llmperf.records import Request
from pytest_llmperf.workloads.datasets import Conversation, DatasetError, load_conversations
from pytest_llmperf.workloads.lengths import Distribution, Fixed, Normal
from pytest_llmperf.workloads.prompts import (
    Tokenizer,
    make_requests,
    shared_prefix_prompts,
    token_id_prompts,
)

__all__ = [
    "DATASET_REPO",
    "PROFILES",
    "Profile",
    "find_cached_dataset",
    "get_profile",
    "profile_requests",
    "resolve_dataset",
]

DATASET_REPO = "hlarcher/inference-benchmarker"

# Roles whose turn becomes a request. inference-benchmarker sends user and system turns.
_PROMPT_ROLES = frozenset({"user", "system"})

Prefix = Literal["none", "documents", "history"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """A workload shape.

    `prefix` says how prompts share tokens, so that prefix caching is exercised as in the
    published runs (docs/published-numbers.md, Azure study: ~75% KV hit rate for chat, ~98% for
    classification):
    - "none": independent prompts of `prompt` tokens.
    - "documents": `num_prefixes` shared documents; a prompt is the head of one of them followed by
      `question_tokens` unique tokens, `prompt` tokens in all.
    - "history": conversations of `turns` user turns of `prompt` tokens each; turn k's prompt is
      the whole history before it plus that turn.
    """

    name: str
    prompt: Distribution
    output: Distribution
    dataset_file: str | None
    prefix: Prefix = "none"
    num_prefixes: int = 1
    turns: int = 1
    question_tokens: int = 0

    def __post_init__(self) -> None:
        if self.prefix not in ("none", "documents", "history"):
            raise InputError(
                f"Profile.prefix must be 'none', 'documents' or 'history', got {self.prefix!r}"
            )
        for field, minimum in (("num_prefixes", 1), ("turns", 1), ("question_tokens", 0)):
            value = getattr(self, field)
            if not is_whole(value, minimum):
                raise InputError(f"Profile.{field} must be an integer >= {minimum}, got {value!r}")

    @property
    def shares_prefix(self) -> bool:
        return self.prefix != "none"

    def scaled(self, factor: float) -> Profile:
        """The same profile with every token length multiplied by `factor`."""
        question = max(1, round(self.question_tokens * factor)) if self.question_tokens else 0
        return replace(
            self,
            prompt=self.prompt.scaled(factor),
            output=self.output.scaled(factor),
            question_tokens=question,
        )


_SHORT_ANSWER = Normal(mean=50, min=30, max=80, variance=10)

PROFILES: dict[str, Profile] = {
    # Prompt lengths come from share_gpt_turns.json there. Synthesized, a user turn is ~160 tokens
    # (ShareGPT's mean input length is ~161 tokens per the vLLM PagedAttention paper): our
    # assumption, not inference-benchmarker's. Four turns give histories up to ~5k tokens.
    "chat": Profile(
        name="chat",
        prompt=Normal(mean=160, min=16, max=640, variance=100),
        output=Normal(mean=800, min=50, max=800, variance=100),
        dataset_file="share_gpt_turns.json",
        prefix="history",
        turns=4,
    ),
    "code-generation": Profile(
        name="code-generation",
        prompt=Normal(mean=4096, min=3000, max=6000, variance=1000),
        output=_SHORT_ANSWER,
        dataset_file="github_code.json",
    ),
    # Eight 12k-token documents, each prompt a head of one plus a 32-token question: ~99% of
    # prompt tokens are cacheable, near the published ~98% hit rate.
    "classification": Profile(
        name="classification",
        prompt=Normal(mean=10000, min=8000, max=12000, variance=5000),
        output=_SHORT_ANSWER,
        dataset_file="classification.json",
        prefix="documents",
        num_prefixes=8,
        question_tokens=32,
    ),
    "fixed-length": Profile(
        name="fixed-length", prompt=Fixed(tokens=200), output=Fixed(tokens=800), dataset_file=None
    ),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise InputError(
            f"unknown profile {name!r}; valid profiles: {', '.join(PROFILES)}"
        ) from None


def find_cached_dataset(filename: str, repo: str = DATASET_REPO) -> Path | None:
    """`filename` of dataset `repo`'s `main` branch in the local Hugging Face cache, or None."""
    return cached_file(repo, filename, repo_type="dataset")


def resolve_dataset(
    profile: Profile | str,
    dataset_path: str | os.PathLike[str] | None = None,
    *,
    search_cache: bool = True,
) -> Path | None:
    """The dataset file `profile_requests` will read, or None when it will synthesize."""
    profile = get_profile(profile) if isinstance(profile, str) else profile
    if dataset_path is not None:
        path = Path(dataset_path)
        if not path.is_file():
            raise DatasetError(
                f"{path}: no such file; pass a local copy of {profile.dataset_file or 'a dataset'}"
            )
        return path
    if search_cache and profile.dataset_file:
        return find_cached_dataset(profile.dataset_file)
    return None


def profile_requests(
    profile: Profile | str,
    n: int,
    tokenizer: Tokenizer,
    rng: np.random.Generator,
    dataset_path: str | os.PathLike[str] | None = None,
    *,
    scale: float = 1.0,
    search_cache: bool = True,
) -> list[Request]:
    """`n` requests shaped like `profile`; prompts are token-id tuples (exact lengths)."""
    base = get_profile(profile) if isinstance(profile, str) else profile
    if not is_whole(n, 0):
        raise InputError(f"n must be an integer >= 0, got {n!r}")
    scaled = base.scaled(scale)
    path = resolve_dataset(base, dataset_path, search_cache=search_cache)
    if path is None:
        return _synthesize(scaled, n, tokenizer, rng)
    if scaled.prefix == "history":
        return _dataset_history(scaled, n, tokenizer, rng, path, scale)
    texts = [text for c in load_conversations(path) for role, text in c if role in _PROMPT_ROLES]
    lengths = scaled.prompt.sample(rng, n)
    prompts = _cut_prompts(texts, lengths, tokenizer, rng, path)
    return make_requests(prompts, scaled.output.sample(rng, n))


# ---------------------------------------------------------------------------------------------
# Synthesized prompts.


def _synthesize(
    profile: Profile, n: int, tokenizer: Tokenizer, rng: np.random.Generator
) -> list[Request]:
    if profile.prefix == "history":
        return _synthetic_history(profile, n, tokenizer, rng)
    lengths = profile.prompt.sample(rng, n)
    if profile.prefix == "documents":
        prompts = _document_prompts(profile, lengths, tokenizer, rng)
    else:
        prompts = token_id_prompts(lengths, tokenizer, rng)
    return make_requests(prompts, profile.output.sample(rng, n))


def _document_prompts(
    profile: Profile, lengths: np.ndarray, tokenizer: Tokenizer, rng: np.random.Generator
) -> list[tuple[int, ...]]:
    # Documents as long as the longest prompt, cut to each prompt's length less its question:
    # requests on one document share its head, so nearly all their prompt tokens hit the cache.
    k = profile.num_prefixes
    longest = max(1, profile.prompt.bounds[1])
    documents = shared_prefix_prompts(k, longest, [0] * k, tokenizer, rng)
    questions = token_id_prompts(
        [min(profile.question_tokens, int(n)) for n in lengths], tokenizer, rng
    )
    pairs = enumerate(zip(lengths.tolist(), questions, strict=True))
    return [documents[i % k][: n - len(q)] + q for i, (n, q) in pairs]


def _synthetic_history(
    profile: Profile, n: int, tokenizer: Tokenizer, rng: np.random.Generator
) -> list[Request]:
    turns = profile.turns
    count = math.ceil(n / turns)
    user = token_id_prompts(profile.prompt.sample(rng, count * turns), tokenizer, rng)
    outputs = profile.output.sample(rng, count).tolist()
    # Stand-ins for the replies the model will give; as long as the turn's output, as there.
    replies = token_id_prompts(np.repeat(outputs, turns - 1), tokenizer, rng)
    conversations = []
    for c in range(count):
        history: tuple[int, ...] = ()
        prompts = []
        for k in range(turns):
            history += user[c * turns + k]
            prompts.append(history)
            if k < turns - 1:
                history += replies[c * (turns - 1) + k]
        conversations.append(prompts)
    return _interleave(conversations, outputs, n)


def _interleave(
    conversations: Sequence[Sequence[tuple[int, ...]]], outputs: Sequence[int], n: int
) -> list[Request]:
    # Turn k of every conversation before turn k+1 of any: under load, a conversation's previous
    # turn has usually finished (and is cached) by the time its next turn is sent.
    prompts, lengths = [], []
    for k in range(max((len(c) for c in conversations), default=0)):
        for c, conversation in enumerate(conversations):
            if k < len(conversation):
                prompts.append(conversation[k])
                lengths.append(outputs[c])
    return make_requests(prompts[:n], lengths[:n])


# ---------------------------------------------------------------------------------------------
# Prompts from a dataset file.


def _cut_prompts(
    texts: Sequence[str],
    lengths: np.ndarray,
    tokenizer: Tokenizer,
    rng: np.random.Generator,
    path: Path,
) -> list[tuple[int, ...]]:
    """For each length, the next long-enough text (shuffled, cycling), cut to that length."""
    order = rng.permutation(len(texts)).tolist()
    encoded: dict[int, list[int]] = {}
    prompts, position = [], 0
    for length in lengths.tolist():
        for step in range(len(order)):
            index = order[(position + step) % len(order)]
            ids = encoded.setdefault(index, tokenizer.encode(texts[index]))
            if len(ids) >= length:
                prompts.append(tuple(ids[:length]))
                position += step + 1
                break
        else:
            longest = max((len(ids) for ids in encoded.values()), default=0)
            raise DatasetError(
                f"{path}: no prompt has {length} tokens (the longest has {longest}); "
                "use a smaller scale or a file with longer prompts"
            )
    return prompts


def _history_texts(conversation: Conversation) -> list[str]:
    # One prompt per user turn: every turn before it (assistant replies included) and the turn.
    seen: list[str] = []
    prompts = []
    for role, text in conversation:
        seen.append(text)
        if role == "user":
            prompts.append("\n".join(seen))
    return prompts


def _dataset_history(
    profile: Profile,
    n: int,
    tokenizer: Tokenizer,
    rng: np.random.Generator,
    path: Path,
    scale: float,
) -> list[Request]:
    histories = [h for c in load_conversations(path) if (h := _history_texts(c))]
    if not histories:
        raise DatasetError(
            f'{path}: no conversation has a "user" turn; chat needs user turns to replay'
        )
    order = rng.permutation(len(histories)).tolist()
    encoded: dict[int, list[tuple[int, ...]]] = {}
    chosen, total = [], 0
    while total < n:  # cycles through the file again when it has fewer turns than n
        index = order[len(chosen) % len(order)]
        if index not in encoded:
            prompts = (_encode_scaled(text, tokenizer, scale) for text in histories[index])
            encoded[index] = [p for p in prompts if p]
        chosen.append(encoded[index])
        total += len(chosen[-1])
        if len(chosen) >= len(order) and not any(encoded.values()):
            raise DatasetError(f"{path}: every user turn encodes to no tokens")
    outputs = profile.output.sample(rng, len(chosen)).tolist()
    return _interleave(chosen, outputs, n)


def _encode_scaled(text: str, tokenizer: Tokenizer, scale: float) -> tuple[int, ...]:
    ids = tokenizer.encode(text)
    keep = len(ids) if scale == 1.0 else max(1, round(len(ids) * scale))
    return tuple(ids[:keep])
