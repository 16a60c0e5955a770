"""Every outcome the plugin reports, for one metric or one test, and the words that say it.

One type for all of them, so the summary, the Markdown and JUnit reports, the run file and
`llmperf compare` cannot disagree on what a status is called or whether it fails. A member's
value is its stable name (the run file's "status" of a metric); `summary` is what the verdict
column shows. Pure: no pytest.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["NOISE", "PRECEDENCE", "WORK_FACTS", "Status", "decide", "named_beside"]


class Status(StrEnum):
    # Of one metric (gate.Verdict) and of a test.
    PASS = "pass"
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"  # beyond the band, in the better direction
    MISSED = "missed"  # a hard target (SLO)
    # A paired A/B whose pairs spread too widely for its tolerance (verdict/paired_ratios.py):
    # neither a regression nor a pass; the line says what would settle it.
    INCONCLUSIVE = "inconclusive"
    # The two sides of a comparison executed different work (metrics/work.py): no verdict on
    # their numbers; the line names the difference.
    NOT_COMPARABLE = "not comparable"
    # Of a test only.
    STALE = "stale"  # improved against a baseline: the baseline is out of date
    ERROR = "error"  # bad input: the test could not be judged
    NO_BASELINE = "no baseline"
    OTHER_HARDWARE = "other hardware"
    NOT_COMPARED = "not compared"
    CLIENT_LIMITED = "client limited"
    DISTURBED = "disturbed"  # another process or the card's clocks set the numbers
    ENGINE_DIED = "engine died"
    ENGINE_STALLED = "engine stalled"  # no chunk for --llmperf-stall-timeout; killed
    UPDATED = "updated"
    SIDE_A = "side a"  # the reference side of a paired A/B run
    SIDE_B = "side b"  # side B measured by llmperf.ab(), which the test itself judges

    @property
    def summary(self) -> str:
        """The verdict column's words."""
        return _SUMMARY.get(self, self.value)

    @property
    def failing(self) -> bool:
        return self in _FAILING

    @property
    def severity(self) -> int | None:
        """The order the reports list problems in (0 first); None: not a problem."""
        return _SEVERITY.get(self)

    @classmethod
    def from_summary(cls, text: str) -> Status | None:
        """The status whose verdict column reads `text` (a run file's "verdict"), if any."""
        return _BY_SUMMARY.get(text)


_SUMMARY = {
    Status.REGRESSION: "REGRESSION",
    Status.IMPROVEMENT: "pass (improved)",
    Status.MISSED: "MISSED TARGET",
    Status.INCONCLUSIVE: "INCONCLUSIVE",
    Status.NOT_COMPARABLE: "NOT COMPARABLE",
    Status.STALE: "pass (stale baseline)",
    Status.ERROR: "ERROR",
    Status.CLIENT_LIMITED: "CLIENT LIMITED",
    Status.DISTURBED: "DISTURBED",
    Status.ENGINE_DIED: "ENGINE DIED",
    Status.ENGINE_STALLED: "ENGINE STALLED",
    Status.SIDE_A: "A/B side A",
    Status.SIDE_B: "A/B side B",
}
# What fails a test as a verdict of the gate. (A client-limited run fails under
# --llmperf-client-check fail and a dead engine fails its test, each by its own path.)
_FAILING = frozenset({Status.REGRESSION, Status.MISSED, Status.ERROR, Status.NOT_COMPARABLE})
# Worst first: a test that could not be judged, then a regression or a comparison of different
# work, a missed target, a measurement the client or a neighbour limited or an A/B too noisy to
# decide, an engine that died or stalled.
_SEVERITY = {Status.ERROR: 0, Status.REGRESSION: 1, Status.NOT_COMPARABLE: 1, Status.MISSED: 2,
             Status.CLIENT_LIMITED: 3, Status.DISTURBED: 3, Status.INCONCLUSIVE: 3,
             Status.ENGINE_DIED: 4, Status.ENGINE_STALLED: 4}
_BY_SUMMARY = {status.summary: status for status in Status}


# Which status is a test's (or a measurement's) when several hold at once, first wins. Facts about
# the work come first: bad input, an engine that died or stalled, two sides that executed different
# work (outputs that differ under --llmperf-outputs must-match are such a difference). No neighbour
# and no slow client can cause them, so they are the verdict on any machine. Facts about the noise
# come next: a neighbour (DISTURBED) or the load generator (CLIENT LIMITED) set the numbers, so no
# judgement of the numbers holds. Only then the judgement of the numbers themselves, worst first.
WORK_FACTS = (Status.ERROR, Status.ENGINE_DIED, Status.ENGINE_STALLED, Status.NOT_COMPARABLE)
NOISE = (Status.DISTURBED, Status.CLIENT_LIMITED)
# The numbers' own order is Judgement.status's (verdict/references.py): a missed target, a
# regression, an A/B too noisy to decide, why a run was not gated, an improvement, a pass.
PRECEDENCE = (*WORK_FACTS, *NOISE, Status.MISSED, Status.REGRESSION, Status.INCONCLUSIVE,
              Status.NO_BASELINE, Status.OTHER_HARDWARE, Status.NOT_COMPARED, Status.STALE,
              Status.IMPROVEMENT, Status.UPDATED, Status.PASS, Status.SIDE_A, Status.SIDE_B)
_RANK = {status: rank for rank, status in enumerate(PRECEDENCE)}


def decide(*statuses: Status | None) -> Status | None:
    """The status that holds of them all (PRECEDENCE); None when none is given."""
    given = [status for status in statuses if status is not None]
    return min(given, key=_RANK.__getitem__, default=None)


def named_beside(decided: Status | None, *statuses: Status | None) -> list[Status]:
    """The facts about the noise among `statuses` that a fact about the work, `decided`,
    outranked: a report names them beside the verdict, never instead of it."""
    if decided not in WORK_FACTS:
        return []
    return [status for status in NOISE if status in statuses]
