"""The warnings a test passes with: each says why its numbers were not, or could not be, judged
as usual. Importable from `pytest_llmperf`, so a gate can turn one into a failure with pytest's
own filter (`-W error::pytest_llmperf.InconclusiveWarning`); the plugin's options do the same
per kind (`--llmperf-inconclusive fail`, `--llmperf-disturbance fail`, ...). Pure: no pytest.
"""

from __future__ import annotations

__all__ = ["ClientLimitedWarning", "DisturbedWarning", "InconclusiveWarning", "LlmperfWarning",
           "NotComparableWarning", "StaleBaselineWarning"]


class LlmperfWarning(UserWarning):
    """The root of pytest-llmperf's warnings."""


class DisturbedWarning(LlmperfWarning):
    """--llmperf-disturbance=warn: another process or the card's clocks disturbed this run."""


class ClientLimitedWarning(LlmperfWarning):
    """--llmperf-client-check=warn: the load generator limited this run."""


class InconclusiveWarning(LlmperfWarning):
    """A paired A/B metric too noisy to decide on this machine (verdict/paired_ratios.py): neither a
    regression nor a pass; the message says what would settle it. --llmperf-inconclusive
    fail makes it a failure, pass silences it."""


class NotComparableWarning(LlmperfWarning):
    """The two sides of a comparison did not execute the same work (verdict/same_work.py):
    no verdict on their numbers; the message names the difference."""


class StaleBaselineWarning(LlmperfWarning):
    """A metric improved beyond its band: the baseline no longer describes this engine."""
