"""What kind of failure a failed request was, so a run can say "390 overloaded, 6 cut off" instead
of quoting three of 396 error strings.

Every failed RequestRecord carries one kind (its `error_kind`); the kinds are counted per run in
the JSON run file and in the error-rate check's failure line. The kinds separate what a user
would act on differently: an overloaded server (lower the load or raise capacity), a request the
server refused (fix the workload), a server that broke (read its log), a stream that ended early
or malformed (a proxy, a crashed engine), the network, a stall, and the client's own failures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from pytest_llmperf.records import RequestRecord

OVERLOADED = "overloaded"  # HTTP 429 or 503: the server sheds load
BAD_REQUEST = "bad_request"  # any other HTTP 4xx: the server refused what was sent
SERVER_ERROR = "server_error"  # HTTP 5xx (but 503) before the stream began
STREAM_ERROR = "stream_error"  # an error event inside a 200 stream (vLLM's 500 mid-stream)
MALFORMED = "malformed"  # an event that is not JSON, or a response that is not HTTP
CUT_OFF = "cut_off"  # the connection closed before the response ended
NO_DONE = "no_done"  # the response ended without `data: [DONE]`
NO_USAGE = "no_usage"  # `[DONE]` came, but no usage chunk with the server's token counts
NO_TOKENS = "no_tokens"  # a complete stream without a single generated token
CONNECTION = "connection"  # no connection (refused, unreachable, connect timeout)
TIMEOUT = "timeout"  # the request ran past the client's per-request limit
STALLED = "stalled"  # stopped by the stall watchdog (see watchdog.py)
# Ended by the plugin: a neighbour had already made the measurement DISTURBED
# (machine/neighbour_watch.py); the engine did nothing wrong.
ENDED_EARLY = "ended_early"
CLIENT = "client"  # the client could not build or send the request
INVALID_OUTPUT = "invalid_output"  # a complete output its request's check refused (a schema)

# In the order a summary lists them: what the server said first, then what broke on the way.
KINDS = (OVERLOADED, BAD_REQUEST, SERVER_ERROR, STREAM_ERROR, MALFORMED, CUT_OFF, NO_DONE,
         NO_USAGE, NO_TOKENS, CONNECTION, TIMEOUT, STALLED, ENDED_EARLY, CLIENT, INVALID_OUTPUT)

# HTTP 503 is what a server or gateway with a full queue answers, 429 a rate limiter's answer
# (RFC 9110 15.6.4, RFC 6585 4): both say "too much load", not "bad request".
OVERLOAD_STATUSES = (429, 503)


def kind_of_status(status: int) -> str:
    """The kind of a non-200 HTTP answer."""
    if status in OVERLOAD_STATUSES:
        return OVERLOADED
    if 400 <= status < 500:
        return BAD_REQUEST
    return SERVER_ERROR


def count_kinds(records: Iterable[RequestRecord]) -> dict[str, int]:
    """Failed requests per kind, in KINDS order; kinds with none are left out."""
    counts = Counter(record.error_kind or CLIENT for record in records if not record.ok)
    return {kind: counts[kind] for kind in KINDS if counts[kind]}


def describe_counts(counts: Mapping[str, int]) -> str:
    """"390 overloaded, 6 cut_off": the kinds as the JSON names them, so a line can be grepped
    for the same word the run file holds."""
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())
