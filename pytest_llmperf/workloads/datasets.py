"""Prompt datasets read from local files; nothing is ever downloaded.

Three formats:
- ShareGPT JSON (`load_sharegpt`): prompt = the first human turn, output length = the token count
  of the reply that follows it, as `vllm bench serve --dataset-name sharegpt` does.
- inference-benchmarker conversation JSON (`load_conversations`): whole conversations, used by the
  profiles in `profiles.py`.
- JSONL (`load_jsonl`): one {"prompt": ..., "output_tokens": N} per line, "prompt_tokens" optional.

A malformed file raises `DatasetError` with one line that names the file, the record (0-based
index into the JSON list) or line (1-based, JSONL), what is wrong and the expected format.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import InputError
from pytest_llmperf.numbers import is_whole
from pytest_llmperf.records import Request
from pytest_llmperf.workloads.prompts import Tokenizer

__all__ = [
    "CONVERSATION_FORMAT",
    "JSONL_FORMAT",
    "SHAREGPT_FORMAT",
    "Conversation",
    "DatasetError",
    "Sample",
    "load_conversations",
    "load_jsonl",
    "load_samples",
    "load_sharegpt",
    "requests_from_samples",
]

SHAREGPT_FORMAT = (
    'ShareGPT format: a list of {"conversations": [{"from": "human", "value": TEXT}, '
    '{"from": "gpt", "value": TEXT}, ...]}'
)
CONVERSATION_FORMAT = (
    'inference-benchmarker format: a list of {"conversations": '
    '[{"role": ROLE, "content": TEXT}, ...]}'
)
JSONL_FORMAT = (
    'JSONL: one {"prompt": TEXT, "output_tokens": N} object per line ("prompt_tokens": N optional)'
)

# ShareGPT speakers whose turn is a prompt; any other speaker after one of them is the reply.
_ASKERS = frozenset({"human", "user"})

# One conversation as (role, content) pairs, in order.
Conversation = tuple[tuple[str, str], ...]


class DatasetError(InputError):
    """A dataset file that cannot be used; the message is one line and says how to fix it."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One prompt from a file. `None` lengths are left to the workload (or the tokenizer)."""

    prompt: str
    output_tokens: int | None
    prompt_tokens: int | None = None


def _read_json(path: Path, expected: str) -> list[Any]:
    text = _read_text(path, expected)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg}); "
            f"expected {expected}"
        ) from None
    if not isinstance(data, list):
        raise DatasetError(
            f"{path}: the top level is {_kind(data)}, not a list; expected {expected}"
        )
    return data


def _read_text(path: Path, expected: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(
            f"{path}: no such file; pass the path of a local file in {expected}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(
            f"{path}: cannot read it ({exc}); expected a UTF-8 file in {expected}"
        ) from None


def _kind(value: object) -> str:
    kinds = {
        dict: "an object",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _turns(
    path: Path, index: int, record: object, keys: tuple[str, str], expected: str
) -> Conversation:
    """The (speaker, text) pairs of one record's "conversations" list, checked."""
    where = f"{path}: record {index}"
    if not isinstance(record, dict) or not isinstance(record.get("conversations"), list):
        raise DatasetError(f'{where}: no "conversations" list; expected {expected}')
    who, what = keys
    turns = []
    for j, turn in enumerate(record["conversations"]):
        if not (
            isinstance(turn, dict)
            and isinstance(turn.get(who), str)
            and isinstance(turn.get(what), str)
        ):
            raise DatasetError(
                f'{where}: turn {j} needs string "{who}" and "{what}"; expected {expected}'
            )
        turns.append((turn[who], turn[what]))
    return tuple(turns)


def load_conversations(path: str | Path) -> list[Conversation]:
    """Conversations from an inference-benchmarker JSON file; empty conversations are dropped."""
    path = Path(path)
    return _conversations(path, _read_json(path, CONVERSATION_FORMAT))


def _conversations(path: Path, data: list[Any]) -> list[Conversation]:
    keys = ("role", "content")
    kept = [c for i, r in enumerate(data) if (c := _turns(path, i, r, keys, CONVERSATION_FORMAT))]
    if not kept:
        raise DatasetError(f"{path}: no conversation has a turn; expected {CONVERSATION_FORMAT}")
    return kept


def _first_exchange(turns: Conversation) -> tuple[str, str] | None:
    for k, (speaker, text) in enumerate(turns[:-1]):
        if speaker in _ASKERS:
            reply_speaker, reply = turns[k + 1]
            return (text, reply) if reply_speaker not in _ASKERS else None
    return None


def load_sharegpt(
    path: str | Path, tokenizer: Tokenizer, *, limit: int | None = None
) -> list[Sample]:
    """ShareGPT samples: first human turn and the token count of the reply after it.

    Records with no human turn followed by a reply, or with an empty prompt or reply, are skipped,
    as vLLM's loader skips conversations shorter than two turns. Every record's structure is
    checked; only the first `limit` usable ones are tokenized (tokenizing is the slow part).
    """
    path = Path(path)
    return _sharegpt(path, _read_json(path, SHAREGPT_FORMAT), tokenizer, limit)


def _sharegpt(path: Path, data: list[Any], tokenizer: Tokenizer, limit: int | None) -> list[Sample]:
    keys = ("from", "value")
    exchanges = [
        _first_exchange(_turns(path, i, r, keys, SHAREGPT_FORMAT)) for i, r in enumerate(data)
    ]
    samples: list[Sample] = []
    for exchange in exchanges:
        if limit is not None and len(samples) >= limit:
            break
        if exchange is None or not exchange[0].strip():
            continue
        output = len(tokenizer.encode(exchange[1]))
        if output > 0:
            samples.append(Sample(prompt=exchange[0], output_tokens=output))
    if not samples:
        raise DatasetError(
            f"{path}: no usable record (each needs a non-empty human turn followed by a reply); "
            f"expected {SHAREGPT_FORMAT}"
        )
    return samples


def _jsonl_sample(where: str, record: object) -> Sample:
    if not isinstance(record, dict) or not isinstance(record.get("prompt"), str):
        raise DatasetError(f'{where}: no string "prompt"; expected {JSONL_FORMAT}')
    counts = {}
    for key in ("output_tokens", "prompt_tokens"):
        value = record.get(key)
        required = key == "output_tokens"
        if value is None and not required:
            counts[key] = None
            continue
        if not is_whole(value, 1 if required else 0):
            minimum = 1 if required else 0
            raise DatasetError(
                f'{where}: "{key}" must be an integer >= {minimum}, got {value!r}; '
                f"expected {JSONL_FORMAT}"
            )
        counts[key] = value
    return Sample(
        prompt=record["prompt"],
        output_tokens=counts["output_tokens"],
        prompt_tokens=counts["prompt_tokens"],
    )


def load_jsonl(path: str | Path) -> list[Sample]:
    """Samples from a JSONL file; blank lines are ignored."""
    path = Path(path)
    samples = []
    for number, line in enumerate(_read_text(path, JSONL_FORMAT).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{path}: line {number}, column {exc.colno}: invalid JSON ({exc.msg}); "
                f"expected {JSONL_FORMAT}"
            ) from None
        samples.append(_jsonl_sample(f"{path}: line {number}", record))
    if not samples:
        raise DatasetError(f"{path}: no records; expected {JSONL_FORMAT}")
    return samples


def load_samples(
    path: str | Path, tokenizer: Tokenizer, *, limit: int | None = None
) -> list[Sample]:
    """Samples from any of the three formats, told apart by the suffix and the first turn's keys.

    From an inference-benchmarker file: each conversation's first user turn, no output length.
    """
    path = Path(path)
    if path.suffix == ".jsonl":
        return load_jsonl(path)[:limit]
    data = _read_json(path, f"{SHAREGPT_FORMAT}; or {CONVERSATION_FORMAT}")
    first = data[0].get("conversations") if data and isinstance(data[0], dict) else None
    if not (
        isinstance(first, list) and first and isinstance(first[0], dict) and "role" in first[0]
    ):
        return _sharegpt(path, data, tokenizer, limit)
    prompts = [
        next((t for role, t in c if role == "user"), None) for c in _conversations(path, data)
    ]
    samples = [Sample(prompt=p, output_tokens=None) for p in prompts if p]
    if not samples:
        raise DatasetError(f'{path}: no conversation has a non-empty "user" turn (the prompt); '
                           f"expected {CONVERSATION_FORMAT}")
    return samples[:limit]


def requests_from_samples(
    samples: Sequence[Sample], tokenizer: Tokenizer | None = None, default_output: int | None = None
) -> list[Request]:
    """Text requests. Prompt lengths come from the sample or, when it has none, the tokenizer."""
    requests = []
    for i, sample in enumerate(samples):
        output = sample.output_tokens if sample.output_tokens is not None else default_output
        if output is None or output < 1:
            raise InputError(f"sample {i} has no output length >= 1; pass default_output")
        length = sample.prompt_tokens
        if length is None:
            if tokenizer is None:
                raise InputError(f"sample {i} has no prompt_tokens; pass a tokenizer to count them")
            length = len(tokenizer.encode(sample.prompt))
        requests.append(Request(prompt=sample.prompt, prompt_tokens=length, output_tokens=output))
    return requests
