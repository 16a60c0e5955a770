"""suites/data/mooncake-conversation-16k.jsonl is what scripts/make_mooncake_trace.py writes,
and a trace the GPU suite's 8B engine can replay."""

from __future__ import annotations

import subprocess
import sys

from pytest_llmperf.workloads.traces import read_trace
from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "make_mooncake_trace.py"
TRACE = REPO / "suites" / "data" / "mooncake-conversation-16k.jsonl"
MAX_MODEL_LEN = 16384  # suites/gpu.py, LLAMA_8B


def test_the_committed_trace_is_the_scripts_output(tmp_path):
    out = tmp_path / "trace.jsonl"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True,
                          text=True, check=True)
    assert out.read_bytes() == TRACE.read_bytes()
    assert done.stdout.startswith(f"{out}: 395 requests over 117 s, ")


def test_the_trace_fits_the_engine_and_shares_its_first_block():
    rows = read_trace(TRACE, "mooncake")
    assert len(rows) == 395
    assert max(row.input_tokens + row.output_tokens for row in rows) <= MAX_MODEL_LEN
    assert all(row.hash_ids[0] == 0 for row in rows)
    # Arrivals in 3-second ticks over two minutes, as Mooncake's conversation trace sends them.
    assert {round(row.offset_s, 3) % 3 for row in rows} == {0}
    assert rows[-1].offset_s < 120
