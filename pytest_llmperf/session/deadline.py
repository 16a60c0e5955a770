"""`--llmperf-deadline EPOCH_SECONDS`: the rule that leaves a test out rather than start it past
the session's time budget (`llmperf nightly --max-minutes N` sets it; docs/nightly.md).

Before each test: it is left out when the deadline has passed, or when the longest test this
session has run so far would not fit in the time left. The longest so far, and not the mean,
because a GPU night's tests differ by minutes (an engine start of a 70B model, an A/B of eight
copies) and a budget is better kept than filled. Before the first test nothing is known, so the
first test starts whenever the deadline has not passed. The rule cannot see a test longer than
every one before it: such a test may overrun by up to its own length (docs/nightly.md says how
to size a job's timeout for it).

Pure: the plugin (plugin/deadline.py) hands in the clock and the durations.
"""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["LEFT_OUT", "left_out_reason"]

# Every reason starts so: `llmperf nightly` finds the tests left out by it in pytest's JUnit XML.
LEFT_OUT = "left out: "


def _clock(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, timezone.utc).strftime("%H:%M:%S UTC")


def left_out_reason(now: float, deadline: float, longest_s: float | None) -> str | None:
    """Why a test that would start at `now` is left out (None: it starts). `longest_s`: the
    longest test this session has run so far, None before the first."""
    left = deadline - now
    if left <= 0:
        return (f"{LEFT_OUT}the deadline {_clock(deadline)} (--llmperf-deadline) passed "
                f"{-left:.0f} s ago")
    if longest_s is not None and longest_s > left:
        return (f"{LEFT_OUT}the deadline {_clock(deadline)} (--llmperf-deadline) would be "
                f"overrun: {left:.0f} s left, and the longest test so far took "
                f"{longest_s:.0f} s")
    return None
