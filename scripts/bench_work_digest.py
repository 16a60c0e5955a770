"""What the output digest (metrics/work.py) costs the client's hot path: the SSE decoder's bulk
path over a vLLM-shaped stream of 256 one-token chunks, in parts of 16 reads, with the digest
and with it switched off, interleaved round by round on one machine; prints the ratio.

    .venv/bin/python scripts/bench_work_digest.py

docs/client.md, "What the work record costs", has a run's numbers.
"""

from __future__ import annotations

import statistics
import time
from itertools import accumulate

from pytest_llmperf.client import sse
from pytest_llmperf.records import RequestRecord

CHUNKS, PER_READ_PART, REPS, ROUNDS = 256, 16, 200, 15
# A completions chunk as vLLM 0.32 streams it with return_token_ids.
CHUNK = ('data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":'
         '[{"index":0,"text":" tok","logprobs":null,"finish_reason":null,"stop_reason":null,'
         '"token_ids":[%d],"prompt_logprobs":null,"prompt_token_ids":null}],"usage":null}')


def parts() -> list[list[bytes]]:
    reads = [f"{CHUNK % (i % 4000)}\n\n".encode() for i in range(CHUNKS)]
    return [reads[i:i + PER_READ_PART] for i in range(0, CHUNKS, PER_READ_PART)]


def decode(stream: list[list[bytes]]) -> None:
    record = RequestRecord(index=0, expected_prompt_tokens=1, expected_output_tokens=CHUNKS,
                           scheduled_s=0.0)
    decoder = sse.StreamDecoder(record)
    for part in stream:
        decoder.feed_reads(b"".join(part), list(accumulate(map(len, part))), [1.0] * len(part))


def main() -> None:
    stream, real = parts(), sse._digest
    sides = {"with": real, "without": lambda record, ids: None}
    ratios, per_chunk = [], []
    for round_ in range(ROUNDS):
        seconds = {}
        for name in sorted(sides, reverse=round_ % 2 == 0):  # alternate which goes first
            sse._digest = sides[name]
            started = time.perf_counter()
            for _ in range(REPS):
                decode(stream)
            seconds[name] = time.perf_counter() - started
        ratios.append(seconds["with"] / seconds["without"])
        per_chunk.append(seconds["with"] / REPS / CHUNKS * 1e6)
    sse._digest = real
    print(f"{ROUNDS} rounds of {REPS} streams of {CHUNKS} chunks: with/without digest median "
          f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
          f"{statistics.median(per_chunk):.2f} us per chunk with it")


if __name__ == "__main__":
    main()
