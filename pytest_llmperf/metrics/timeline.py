"""Requests per time bin over a run: how many were due (offered) and how many finished
(achieved), so a trace replay's picture can show where the engine fell behind the trace's
bursts. Counts per bin, not every record: a run file keeps this, and a long trace has many
thousands of requests.

Times are seconds from the first due send (the records' `scheduled_s`, which the load generator
sets from the schedule, whatever the client's lag); a request is achieved when its last token
chunk arrives. Pure: no HTTP, no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_llmperf.records import RequestRecord

__all__ = ["MAX_BINS", "MIN_PER_BIN", "bin_width", "rate_timeline"]

# Fewer requests than this per bin on average and a bin's count is mostly chance: a picture of
# a 48-request, 12 s trace in 0.1 s bins is a comb of zeros and ones.
MIN_PER_BIN = 4
# More bins than this cannot be told apart in a picture a few hundred pixels wide.
MAX_BINS = 200


def bin_width(span_s: float, requests: int) -> float:
    """The smallest 1, 2 or 5 x 10^k seconds that holds MIN_PER_BIN requests on average and
    cuts `span_s` into at most MAX_BINS bins (1 s for the CPU suite's 48 requests over 12 s)."""
    want = max(MIN_PER_BIN * span_s / max(requests, 1), span_s / MAX_BINS, 1e-3)
    decade = 10.0 ** math.floor(math.log10(want))
    # The first nice step at or above `want`; the next decade's 1 when even 5 is short of it.
    # (A relative slack keeps 1.0 from rounding up to 2 through log10's last bit.)
    width = next(step * decade for step in (1, 2, 5, 10) if step * decade >= want * (1 - 1e-9))
    return float(f"{width:.6g}")  # 0.5, not 0.5000000000000001


def rate_timeline(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """{"bin_s": 1.0, "scheduled": [4, 7, ...], "completed": [2, 6, ...]}: per bin from the first
    due send, the requests due in it and the requests that finished in it; {} without
    records."""
    if not records:
        return {}
    start = min(r.scheduled_s for r in records)
    due = [r.scheduled_s - start for r in records]
    done = [r.chunk_times_s[-1] - start for r in records if r.ok]
    span = max([*due, *done])
    width = bin_width(span, len(records))
    bins = max(1, math.floor(span / width) + 1)  # the last instant falls in a bin of its own

    def counts(times: list[float]) -> list[int]:
        out = [0] * bins
        for t in times:
            out[min(max(int(t // width), 0), bins - 1)] += 1
        return out

    return {"bin_s": width, "scheduled": counts(due), "completed": counts(done)}
