"""Conversations read from files: a record is a session, its user messages the turns' new
messages, and each recorded answer's token count that turn's forced output length. The answer a
later turn carries is the one the server generated (client/sessions.py); the recorded answer
gives only its length.

Two formats, as their publishers ship them:
- ShareGPT JSON (`"sharegpt"`), e.g. ShareGPT_V3_unfiltered_cleaned_split.json of
  https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered: a list of
  {"id": ID, "conversations": [{"from": SPEAKER, "value": TEXT}, ...]}. Speakers are read as
  vLLM's multi-turn converter reads them (https://github.com/vllm-project/vllm/blob/main/
  benchmarks/multi_turn/convert_sharegpt_to_openai.py): "human" and "user" ask; "gpt",
  "chatgpt", "bing" and "bard" answer; "system" is a system prompt.
- inference-benchmarker's conversation JSON (`"inference-benchmarker"`), what its
  ConversationTextRequestGenerator loads (https://github.com/huggingface/inference-benchmarker/
  blob/main/src/requests.rs, `ConversationEntry`): a list of
  {"id": ID, "conversations": [{"role": ROLE, "content": TEXT}, ...]}, ROLE "user",
  "assistant" or "system".

What a record's messages must be, and what is done with the shapes real files have:
- user message, answer, user message, answer, ...: each pair is a turn;
- a system message may come first: it goes before the first user message (a system message on
  the chat API, text or token ids in front of the first prompt on completions);
- an answer first is dropped: the "_split" ShareGPT file cuts long conversations into parts, and
  a part may start with the answer to the previous part's last message (vLLM's converter drops
  it too); each part is a session of its own;
- a last user message without an answer is dropped: there is no output length to force;
- a record of fewer than 2 turns is skipped: a conversation workload measures turns that carry
  earlier answers.
Anything else is a bad record: not an object, no "conversations" list, a message without its
two string fields, an unknown speaker, empty text, two user messages or two answers in a row, a
system message after the first. A bad record stops the workload where it is written with one
line that names the file, the record (index and id), the message and the field; nothing is sent.
`skip_bad_records=True` leaves bad records out instead; the workload's description counts them.

Records are read in file order until `sessions` conversations are found: the records after the
last one used are not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.numbers import is_whole
from pytest_llmperf.records import Request
from pytest_llmperf.workloads import prompts
from pytest_llmperf.workloads.datasets import (
    CONVERSATION_FORMAT,
    SHAREGPT_FORMAT,
    DatasetError,
    _kind,
    _read_json,
)
from pytest_llmperf.workloads.source import NameFile, Source

__all__ = ["FORMATS", "ConversationFileSource", "FileConversation", "read_conversations"]

ConversationFormat = Literal["sharegpt", "inference-benchmarker"]
FORMATS: tuple[str, ...] = ("sharegpt", "inference-benchmarker")
SYSTEM = "system"
MIN_TURNS = 2  # fewer carry no earlier answer
SKIP_HINT = "fix the record, or pass skip_bad_records=True to leave such records out"


@dataclass(frozen=True)
class _Format:
    speaker: str  # the field naming who wrote a message
    text: str  # the field holding what they wrote
    asks: frozenset[str]
    answers: frozenset[str]
    expected: str  # the format in one line, for error messages


_FORMATS = {
    "sharegpt": _Format("from", "value", frozenset({"human", "user"}),
                        frozenset({"gpt", "chatgpt", "bing", "bard"}), SHAREGPT_FORMAT),
    "inference-benchmarker": _Format("role", "content", frozenset({"user"}),
                                     frozenset({"assistant"}), CONVERSATION_FORMAT),
}


@dataclass(frozen=True, slots=True)
class FileConversation:
    """One record as a session: its system prompt, and its turns as (user message, recorded
    answer) pairs; `where` names the record in messages ("record 3 (id 'x')")."""

    where: str
    system: str | None
    turns: tuple[tuple[str, str], ...]


class _BadRecord(Exception):
    def __init__(self, problem: str, structural: bool = False) -> None:
        super().__init__(problem)
        self.structural = structural


def _where(index: int, record: object) -> str:
    rid = record.get("id") if isinstance(record, dict) else None
    return f"record {index}" + (f" (id {rid!r})" if isinstance(rid, (str, int)) else "")


def _message(at: str, message: object, fmt: _Format) -> tuple[str, str]:
    if not isinstance(message, dict):
        raise _BadRecord(f"{at} is {_kind(message)}, not an object", structural=True)
    for name in (fmt.speaker, fmt.text):
        if name not in message:
            raise _BadRecord(f'{at}: "{name}" is missing', structural=True)
        if not isinstance(message[name], str):
            raise _BadRecord(f'{at}: "{name}" is {_kind(message[name])}, not a string',
                             structural=True)
    who, text = message[fmt.speaker], message[fmt.text]
    known = (*sorted(fmt.asks), *sorted(fmt.answers), SYSTEM)
    if who != SYSTEM and who not in fmt.asks and who not in fmt.answers:
        raise _BadRecord(f'{at}: "{fmt.speaker}" is {who!r}, not one of {", ".join(known)}')
    if not text.strip():
        raise _BadRecord(f'{at}: "{fmt.text}" is empty')
    return who, text


def _parse(record: object, fmt: _Format) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """A record's system prompt and turns; _BadRecord says what is wrong where."""
    if not isinstance(record, dict):
        raise _BadRecord(f"is {_kind(record)}, not an object", structural=True)
    messages = record.get("conversations")
    if not isinstance(messages, list):
        raise _BadRecord('"conversations" is missing or not a list', structural=True)
    system: str | None = None
    turns: list[tuple[str, str]] = []
    asked: str | None = None  # a user message waiting for its answer
    started = False  # a user message came, or a leading answer was dropped
    for j, message in enumerate(messages):
        at = f"conversations[{j}]"
        who, text = _message(at, message, fmt)
        if who == SYSTEM:
            if j:
                raise _BadRecord(f'{at}: "{fmt.speaker}" is {who!r} after the first message '
                                 "(only a conversation's first message may be its system "
                                 "prompt)")
            system = text
        elif who in fmt.asks:
            if asked is not None:
                raise _BadRecord(f'{at}: "{fmt.speaker}" is {who!r} right after another user '
                                 "message (a user message follows an answer)")
            asked, started = text, True
        elif asked is not None:
            turns.append((asked, text))
            asked = None
        elif started:
            raise _BadRecord(f'{at}: "{fmt.speaker}" is {who!r} right after another answer '
                             "(an answer follows a user message)")
        else:
            started = True  # an answer first: a split part's start, dropped
    return system, tuple(turns)


def read_conversations(path: str | Path, fmt: str, *, sessions: int | None = None,
                       max_turns: int | None = None,
                       skip_bad_records: bool = False) -> tuple[list[FileConversation], int]:
    """The first `sessions` conversations of 2 or more turns in the file (all of them with
    None), each cut to `max_turns`; and how many bad records were left out."""
    if fmt not in FORMATS:
        raise DatasetError(f"conversation file format must be one of {', '.join(FORMATS)}, "
                           f"got {fmt!r}")
    if sessions is not None and not is_whole(sessions, 1):
        raise InputError(f"sessions must be an int >= 1, or None for every conversation in the "
                         f"file, got {sessions!r}")
    if max_turns is not None and not is_whole(max_turns, MIN_TURNS):
        raise InputError(f"max_turns must be an int >= {MIN_TURNS} (one turn carries no earlier "
                         f"answer), or None for every turn, got {max_turns!r}")
    path = Path(path)
    form = _FORMATS[fmt]
    found: list[FileConversation] = []
    skipped = 0
    for index, record in enumerate(_read_json(path, form.expected)):
        if sessions is not None and len(found) == sessions:
            break
        try:
            system, turns = _parse(record, form)
        except _BadRecord as bad:
            if skip_bad_records:
                skipped += 1
                continue
            fix = f"expected {form.expected}" if bad.structural else SKIP_HINT
            raise DatasetError(f"{path}: {_where(index, record)}: {bad}; {fix}") from None
        if len(turns) >= MIN_TURNS:
            found.append(FileConversation(_where(index, record), system, turns[:max_turns]))
    left_out = f" ({skipped} bad records left out)" if skipped else ""
    if not found:
        raise DatasetError(f"{path}: no conversation of {MIN_TURNS} or more turns{left_out}; "
                           f"expected {form.expected}")
    if sessions is not None and len(found) < sessions:
        raise DatasetError(f"{path}: {len(found)} conversations of {MIN_TURNS} or more turns"
                           f"{left_out}, and sessions={sessions} asks for more: lower sessions")
    return found, skipped


@dataclass(frozen=True, kw_only=True)
class ConversationFileSource(Source):
    """A file's conversations as session-major turns (the layout client/sessions.py reads):
    each user message as token ids or as text (`prompt_format`), each output length its
    recorded answer's token count. Warm-up requests (asked for beyond the turns) come first:
    random prompts of the first turns' lengths, so they share no prefix with a measured one."""

    file_fields: ClassVar[tuple[str, ...]] = ("path",)
    path: str
    format: str
    conversations: tuple[FileConversation, ...] = field(repr=False)
    prompt_format: Literal["token_ids", "text"] = "token_ids"
    max_turns: int | None = None
    skipped_records: int = 0

    def to_dict(self, name_file: NameFile = str) -> dict[str, Any]:
        """What a run file records: the file and the selection, not every message."""
        out = {"type": "ConversationFileSource", "path": name_file(self.path),
               "format": self.format,
               "sessions": len(self.conversations),
               "turns": sum(len(c.turns) for c in self.conversations),
               "prompt_format": self.prompt_format}
        if self.max_turns is not None:
            out["max_turns"] = self.max_turns
        if self.skipped_records:
            out["skipped_records"] = self.skipped_records
        return out

    @property
    def session_turns(self) -> tuple[int, ...]:
        return tuple(len(c.turns) for c in self.conversations)

    def requests(self, n: int, tokenizer: prompts.Tokenizer,
                 rng: np.random.Generator) -> list[Request]:
        turns = [request for c in self.conversations for request in self._turns(c, tokenizer)]
        extra = n - len(turns)
        if extra < 0:
            raise InputError(f"{self.path}: {n} requests asked of {len(turns)} conversation "
                             "turns: a conversation file's workload sends every turn it read")
        firsts = [turns[k] for k in np.cumsum((0, *self.session_turns[:-1])).tolist()]
        lengths = [firsts[k % len(firsts)].prompt_tokens for k in range(extra)]
        outputs = [firsts[k % len(firsts)].output_tokens for k in range(extra)]
        if self.prompt_format == "text":
            warm = prompts.text_prompts(lengths, tokenizer, rng)
        else:
            warm = prompts.token_id_prompts(lengths, tokenizer, rng)
        return [*prompts.make_requests(warm, outputs), *turns]

    def _turns(self, conversation: FileConversation,
               tokenizer: prompts.Tokenizer) -> list[Request]:
        system = conversation.system
        system_ids = tuple(tokenizer.encode(system)) if system else ()
        out = []
        for t, (message, answer) in enumerate(conversation.turns):
            ids = tuple(tokenizer.encode(message))
            output = len(tokenizer.encode(answer))
            if output < 1:
                raise DatasetError(f"{self.path}: {conversation.where}: turn {t + 1}'s answer "
                                   "is no token long; fix the record")
            before = system_ids if t == 0 else ()
            if self.prompt_format == "text":
                history = ((SYSTEM, system),) if before else ()
                out.append(Request(prompt=message, prompt_tokens=len(before) + len(ids),
                                   output_tokens=output, history=history))
            else:
                out.append(Request(prompt=before + ids, prompt_tokens=len(before) + len(ids),
                                   output_tokens=output))
        return out

