"""How the client writes a request of each API (records.RequestApi) and reads its answer: one
entry per API name, registered by the module that knows that API (client/openai.py the streamed
generations, client/embeddings.py the pooling ones, a plugin's module its own)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.records import Request, RequestApi, RequestRecord, request_api

__all__ = ["ApiClient", "client_of", "serves"]

# (the client, the request) -> the JSON body; (the client, the record, the request) -> what reads
# the answer into the record as it arrives (sse.StreamDecoder's feed_reads and `coalesced`);
# (the client, the record, that reader) once an answer arrived whole: fails the record where
# the answer is incomplete or malformed.
BodyWriter = Callable[[Any, Request], dict[str, Any]]
AnswerReader = Callable[[Any, RequestRecord, Request], Any]
AnswerEnd = Callable[[Any, RequestRecord, Any], None]


@dataclass(frozen=True)
class ApiClient:
    api: RequestApi
    body: BodyWriter
    reader: AnswerReader
    ended: AnswerEnd


_CLIENTS: dict[str, ApiClient] = {}


def serves(api: RequestApi, body: BodyWriter, reader: AnswerReader, ended: AnswerEnd) -> None:
    """Register how the client writes `api`'s requests and reads their answers."""
    _CLIENTS[api.name] = ApiClient(api, body, reader, ended)


def client_of(name: str) -> ApiClient:
    """The client's entry for the API `name`; ValueError (one line) for one it cannot send."""
    found = _CLIENTS.get(name)
    if found is None:
        api = request_api(name)  # an unknown name: the list of those there are
        raise ValueError(f"api={name!r} ({api.path}): the client can neither write its body nor "
                         "read its answer; register them with client/request_apis.serves")
    return found
