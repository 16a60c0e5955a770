"""Generate suites/data/mooncake-conversation-16k.jsonl: two minutes of a Mooncake-style
conversation trace at one GPU's scale, for suites/test_gpu_llama8b.py::test_mooncake_trace_replay.

    python scripts/make_mooncake_trace.py [--out suites/data/mooncake-conversation-16k.jsonl]

Mooncake's conversation trace (FAST25-release/traces/conversation_trace.jsonl in
https://github.com/kvcache-ai/Mooncake) has prompts up to 126k tokens, more than the GPU suites'
Llama 3.1 8B engine holds (max_model_len 16384, suites/gpu.py). This script writes a trace in the
same format (timestamp in ms, input_length, output_length, hash_ids of 512-token blocks) whose
shape is that trace's, restricted to the requests that fit 16,384 tokens, as measured from the
public file (docs/published-numbers.md, "Mooncake"):

- arrivals come in ticks 3 s apart, a Poisson number per tick with mean 10.2 (3.4 requests/s);
- every prompt starts with block 0, the block all of the trace's requests share;
- 35.7% of the requests continue an earlier one: its whole blocks, then its answer and a new
  message (one block id per 512 new tokens), sent after a gap drawn from the trace's gaps; a
  gap longer than the time elapsed so far makes the request a first turn instead, as a window
  cut from the start of a trace has no earlier turns;
- first-turn prompt lengths, output lengths, new-message lengths and gaps are drawn from the
  trace's deciles (linear between them).

Only `random.Random(seed).random()` is used, whose sequence Python keeps the same across
versions, so running it twice writes the same bytes
(tests/unit/workloads/test_mooncake_trace_script.py checks the committed file against a fresh run).
"""

from __future__ import annotations

import argparse
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "suites" / "data" / "mooncake-conversation-16k.jsonl"
SEED = 20250221  # the day Mooncake released its FAST'25 traces
DURATION_S = 120  # ours: two minutes of trace, a few hundred requests
MAX_TOKENS = 16384  # prompt + output: LLAMA_8B's max_model_len
BLOCK_TOKENS = 512
TICK_MS = 3000
PER_TICK = 10.2
CONTINUATION_SHARE = 0.357

# Deciles (minimum, 10%, ..., maximum) of the conversation trace's requests that fit MAX_TOKENS.
FIRST_TURN_INPUT = (891, 901, 965, 1292, 2058, 3944, 5034, 6456, 8603, 11725, 16214)
OUTPUT = (1, 25, 97, 205, 283, 342, 394, 441, 498, 587, 2000)
NEW_MESSAGE = (1, 288, 444, 553, 662, 769, 899, 1140, 3407, 6518, 15241)
GAP_S = (0, 45, 66, 84, 105, 141, 186, 252, 363, 528, 3030)


@dataclass(frozen=True)
class Row:
    timestamp: int
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]

    def line(self) -> str:
        return json.dumps({"timestamp": self.timestamp, "input_length": self.input_length,
                           "output_length": self.output_length, "hash_ids": list(self.hash_ids)})


def draw(deciles: tuple[int, ...], rng: random.Random) -> int:
    """A value of the distribution the deciles describe (linear between them), >= 1."""
    position = rng.random() * (len(deciles) - 1)
    i = int(position)
    value = deciles[i] + (position - i) * (deciles[i + 1] - deciles[i])
    return max(1, round(value))


def poisson(mean: float, rng: random.Random) -> int:
    """Knuth's method: fine for a mean of ten."""
    limit, count, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count


class Blocks:
    """Fresh block ids, after block 0 (the one every prompt shares)."""

    def __init__(self) -> None:
        self.next_id = 1

    def fresh(self, count: int) -> tuple[int, ...]:
        ids = tuple(range(self.next_id, self.next_id + count))
        self.next_id += count
        return ids


def continuation(now_ms: int, rows: list[Row], blocks: Blocks,
                 rng: random.Random) -> Row | None:
    """A next turn of an earlier request sent about a drawn gap ago, or None when no earlier
    request is that old, or its conversation would outgrow MAX_TOKENS."""
    gap_ms = max(TICK_MS, draw(GAP_S, rng) * 1000)
    if gap_ms > now_ms:
        return None
    sent = max(r.timestamp for r in rows if r.timestamp <= now_ms - gap_ms)
    tick = [r for r in rows if r.timestamp == sent]
    parent = tick[int(rng.random() * len(tick))]
    new, output = draw(NEW_MESSAGE, rng), draw(OUTPUT, rng)
    length = parent.input_length + parent.output_length + new
    if length + output > MAX_TOKENS:
        return None
    kept = parent.hash_ids[: parent.input_length // BLOCK_TOKENS]  # its whole blocks
    ids = kept + blocks.fresh(math.ceil(length / BLOCK_TOKENS) - len(kept))
    return Row(now_ms, length, output, ids)


def first_turn(now_ms: int, blocks: Blocks, rng: random.Random) -> Row:
    length = draw(FIRST_TURN_INPUT, rng)
    output = min(draw(OUTPUT, rng), MAX_TOKENS - length)
    return Row(now_ms, length, output, (0, *blocks.fresh(math.ceil(length / BLOCK_TOKENS) - 1)))


def generate(seed: int = SEED) -> list[Row]:
    rng, blocks, rows = random.Random(seed), Blocks(), []
    for tick in range(DURATION_S * 1000 // TICK_MS):
        now_ms = tick * TICK_MS
        for _ in range(poisson(PER_TICK, rng)):
            row = None
            if rng.random() < CONTINUATION_SHARE and rows:
                row = continuation(now_ms, rows, blocks, rng)
            rows.append(row or first_turn(now_ms, blocks, rng))
    return rows


def reused_share(rows: list[Row]) -> float:
    """Prompt tokens in blocks an earlier request sent whole: what a prefix cache large enough
    for the whole trace could serve."""
    seen: set[int] = set()
    reused = total = 0
    for row in rows:
        leading = 0
        for block in row.hash_ids:
            if block not in seen:
                break
            leading += 1
        reused += min(leading * BLOCK_TOKENS, row.input_length)
        total += row.input_length
        seen.update(row.hash_ids[: row.input_length // BLOCK_TOKENS])
    return reused / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows = generate()
    args.out.write_text("".join(row.line() + "\n" for row in rows))
    continuations = sum(1 for row in rows if len(row.hash_ids) > 1 and row.hash_ids[1] in
                        {b for earlier in rows if earlier.timestamp < row.timestamp
                         for b in earlier.hash_ids})
    print(f"{args.out}: {len(rows)} requests over {rows[-1].timestamp / 1000:.0f} s, "
          f"mean input {sum(r.input_length for r in rows) / len(rows):.0f}, "
          f"mean output {sum(r.output_length for r in rows) / len(rows):.0f} tokens, "
          f"{continuations} continuations, prompt tokens in earlier whole blocks "
          f"{reused_share(rows):.1%}")


if __name__ == "__main__":
    main()
