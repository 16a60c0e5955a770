"""One paired A/B measurement: engines A and B measured alternately in ABBA order on the same
requests, with confirm pairs when B looks worse (verdict/paired_ratios.py says why), measured at
once or after the test's rerun (plugin/confirm_later.py). It runs on the session's runner
(session/runner.py), whose ledger gets both sides' records.

On GPUs with room for both, each side has its own cards: halfway through a round they trade them,
so a difference between the cards themselves cancels too (each round for itself: other tests of
the engines may have moved them in between).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pytest_llmperf.client.measure import Measurement
from pytest_llmperf.engines.errors import EngineDied, EngineError
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import Disturbed
from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.machine.hardware import is_gpu_class
from pytest_llmperf.metrics import goodput
from pytest_llmperf.metrics.compute import RunMetrics
from pytest_llmperf.metrics.work import ExecutedWork
from pytest_llmperf.session.runner import Runner
from pytest_llmperf.verdict import references
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.paired_ratios import DEFAULT_AB_TOLERANCE, abba_order, paired_ratios
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.workloads.workload import Workload

__all__ = ["AbPlan", "AbRunner", "ConfirmLater", "PausedAb", "side_id"]

Run = tuple[RunMetrics, Measurement]


class ConfirmLater(BaseException):
    """Raised out of a test whose first A/B pairs regressed, to be rerun later. A BaseException,
    as pytest's own outcomes are, so a test's `except Exception` cannot swallow it."""


# vLLM's worker busy-polls its shared-memory queue for `busy_loop_s` = 1 s after each read before
# it sleeps (vllm/distributed/device_communicators/shm_broadcast.py, SpinCondition:
# https://github.com/vllm-project/vllm/blob/main/vllm/distributed/device_communicators/shm_broadcast.py).
# On the CPU both A/B engines compute on one core, so a side measured within that second of the
# other's last step shared its core with that spin and ran at about half speed: on the 2-core
# VM each side's throughput was ~3,600 or ~1,600 tok/s at random, B = A pairs spread 0.3-2.3
# (docs/ab.md, "Where the two engines run"). Waiting it out costs about this per side switch.
OTHER_SIDE_SETTLE_S = 1.5
# An A/B unknown after its confirm pairs grows to at most this many times its planned pairs
# (AbPlan.ceiling): 24 with the defaults (4 + 4), three sessions' worth of pairs.
MORE_PAIRS_FACTOR = 3


@dataclass
class PausedAb:
    """An A/B measurement whose confirm pairs wait for the test's rerun: what it measured so
    far, and what it needs to go on in ABBA order."""

    sides: dict[str, Engine]
    workload: Workload
    runs: dict[str, list[Run]]
    starts: dict[str, float | None]
    # Why the confirm pairs follow: the first pairs regressed, or were too noisy to decide.
    unsettled: Status = Status.REGRESSION


@dataclass(frozen=True)
class AbPlan:
    """How a paired A/B measurement goes: `pairs` ABBA pairs, then `confirm_pairs` more when B
    regressed on a `gated` metric over them (beyond `tolerance`, --llmperf-ab-tolerance); with
    `defer`, those are measured in the test's rerun after the other tests of its engine
    (ConfirmLater). Still unknown (INCONCLUSIVE) after them: as many more as the noise measured
    so far needs to resolve the tolerance, where that is at most `ceiling` (AbRun.more_pairs)."""

    pairs: int
    confirm_pairs: int = 0
    gated: tuple[str, ...] = ()
    defer: bool = False
    tolerance: float = DEFAULT_AB_TOLERANCE
    # The most pairs an A/B still unknown after its confirm pairs may grow to (AbRun.more_pairs);
    # None: MORE_PAIRS_FACTOR x (pairs + confirm_pairs).
    most_pairs: int | None = None

    @property
    def ceiling(self) -> int:
        return self.most_pairs if self.most_pairs is not None \
            else MORE_PAIRS_FACTOR * (self.pairs + self.confirm_pairs)


@dataclass
class AbRunner:
    """Paired A/B measurements on the session's runner, and those whose confirm pairs wait for
    their test's rerun."""

    runner: Runner
    paused: dict[MeasurementId, PausedAb] = field(default_factory=dict)

    def run_ab(self, id: MeasurementId, a: Engine, b: Engine, workload: Workload, plan: AbPlan,
               limits: goodput.Limits | None = None) -> tuple[MeasurementRecord, ...]:
        """Engines `a` and `b` measured alternately in ABBA order, one run each per pair, on
        the same requests, as `plan` says; a deferred measurement goes on when the test calls
        again for the same `id` (its rerun). `limits`: the test's per-request SLO limits, for
        goodput. Returns both sides' records (every run kept, paired by position)."""
        run = AbRun(self, id, {"A": a, "B": b}, workload, limits)
        with self.runner.pool.room_for(2 if run.fit else 1):
            died = run.measure(plan)
        return run.results(died)


def side_id(id: MeasurementId, side: str) -> MeasurementId:
    """The id of one side of the A/B measurement `id` ("test_x#2" -> "test_x#2 (A)")."""
    return MeasurementId(id.format(), side=side)


class AbRun:
    def __init__(self, ab_runner: AbRunner, id: MeasurementId, sides: dict[str, Engine],
                 workload: Workload, limits: goodput.Limits | None) -> None:
        runner = ab_runner.runner
        self.ab_runner, self.runner, self.id, self.limits = ab_runner, runner, id, limits
        self.sides, self.workload = sides, workload
        self.test_id = id.format()
        built = {side: spec.tokenizer or spec.model for side, spec in sides.items()}
        self.requests = {side: workload.build(runner.tokenizer_for(spec))
                         for side, spec in sides.items()
                         if built[side] != built["A"] or side == "A"}
        paused = ab_runner.paused.pop(id, None)
        if paused is not None and (paused.sides, paused.workload) != (sides, workload):
            paused = None  # the rerun measures something else: start afresh
        self.resumed = paused is not None
        self.runs: dict[str, list[Run]] = paused.runs if paused else {"A": [], "B": []}
        self.starts: dict[str, float | None] = paused.starts if paused else {}
        self.unsettled: Status | None = paused.unsettled if paused else None
        self.fit = _sides_fit(runner, sides)
        # On the CPU both sides compute on the same core: see OTHER_SIDE_SETTLE_S.
        self.settle = not is_gpu_class(runner.hardware_class)
        self.ended: dict[str, float] = {}  # each side's last measurement's end (monotonic)
        self.trade = self.fit and runner.gpu_count > 0

    def measure(self, plan: AbPlan) -> EngineDied | Disturbed | None:
        """The first pairs, then the confirm pairs if B regressed over them (a deferred test's
        rerun measures the confirm pairs only)."""
        pairs, confirm_pairs = plan.pairs, plan.confirm_pairs
        if self.fit:  # both sides start at once: an A/B test waits for one start, not two
            self.runner.start_together([self.sides["A"], self.sides["B"]])
        died, confirm = None, self.resumed
        unsettled = self.unsettled
        if not confirm:
            died = self.measure_round(0, pairs)
            complete = len(self.runs["A"]) == len(self.runs["B"]) == pairs
            unsettled = self.side_b_unsettled(plan) if complete and not died else None
            confirm = bool(confirm_pairs and unsettled)
            if confirm and plan.defer:
                self.ab_runner.paused[self.id] = PausedAb(self.sides, self.workload, self.runs,
                                                   self.starts, unsettled)
                raise ConfirmLater(self.test_id)
        if confirm:
            later = " after the other tests of its engine," if self.resumed else ""
            what = "was inconclusive" if unsettled == Status.INCONCLUSIVE else "regressed"
            self.runner.ledger.note(self.test_id, f"B {what} over {pairs} ABBA pairs; "
                                    f"{confirm_pairs} more measured{later} to confirm")
            died = self.measure_round(pairs, confirm_pairs)
            if not died:
                died = self.more_pairs(plan)
        return died

    def more_pairs(self, plan: AbPlan) -> EngineDied | Disturbed | None:
        """Pinpoint's "unknown: more attempts": while B is INCONCLUSIVE after its confirm
        pairs, measure as many more pairs as the noise measured so far needs to resolve the
        tolerance (PairedRatios.pairs_to_resolve), if that is at most the plan's ceiling; past
        it the verdict stays INCONCLUSIVE and says how many pairs a decision would need."""
        while self.side_b_unsettled(plan) == Status.INCONCLUSIVE:
            have = len(self.runs["A"])
            wanted = self.pairs_wanted(plan)
            if wanted is None or wanted > plan.ceiling or wanted <= have:
                return None
            self.runner.ledger.note(
                self.test_id, f"B still inconclusive over {have} ABBA pairs; {wanted - have} "
                f"more measured, as many as its spread so far needs to resolve the tolerance "
                f"{plan.tolerance:g} (at most {plan.ceiling})")
            died = self.measure_round(have, wanted - have)
            if died or len(self.runs["B"]) != wanted:
                return died
        return None

    def pairs_wanted(self, plan: AbPlan) -> int | None:
        """The pairs that would resolve the tolerance, at the spread so far, for the gated
        metrics still INCONCLUSIVE; None for none."""
        ratios = paired_ratios([run.flat() for run, _ in self.runs["A"]],
                               [run.flat() for run, _ in self.runs["B"]],
                               plan.gated, plan.pairs)
        wanted = [paired.pairs_to_resolve(plan.tolerance) for paired in ratios.values()
                  if paired.judge(plan.tolerance).status == Status.INCONCLUSIVE]
        return max(wanted, default=None)

    def measure_round(self, first_pair: int, count: int) -> EngineDied | Disturbed | None:
        order = abba_order(first_pair + count)[2 * first_pair:]
        swap_at = count // 2 * 2 if self.trade and count >= 2 else None
        for index, side in enumerate(order):
            if index == swap_at:
                self.swap_gpus()
            spec = self.sides[side]
            try:
                endpoint, start_s = self.runner.endpoint_for(spec, self.workload)
            except EngineError as exc:
                raise type(exc)(f"A/B side {side} ({spec.label()}): {exc}") from None
            self.starts.setdefault(side, start_s)
            requests, warmup = self.requests.get(side, self.requests["A"])
            self.wait_for_other_side(side)
            run, died = self.runner.measure_once(spec, endpoint, requests, self.workload,
                                                 () if self.runs[side] else warmup, self.limits,
                                                 self.starts[side])
            self.ended[side] = time.monotonic()
            self.runs[side].append(run)
            if run[1].client_error or died:
                return died
        return None

    def wait_for_other_side(self, side: str) -> None:
        """On the CPU, let the other side's engine go idle before this side measures: its
        worker spins on the shared compute core for a second after its last step."""
        other = self.ended.get("B" if side == "A" else "A")
        if self.settle and other is not None:
            time.sleep(max(0.0, other + OTHER_SIDE_SETTLE_S - time.monotonic()))

    def side_b_unsettled(self, plan: AbPlan) -> Status | None:
        """REGRESSION or INCONCLUSIVE where B's pairs so far, judged as judge_ab will judge
        them all (references.SideA), regressed or were too noisy to decide; else None. Either is
        the question that decides whether confirm pairs follow: more pairs confirm a regression
        or settle what the first could not. Sides that did different work are not comparable
        however many pairs follow: None."""
        side_a = references.SideA(tuple(run.flat() for run, _ in self.runs["A"]),
                             plan.tolerance,
                             work=ExecutedWork.of(self.runs["A"][-1][1].records))
        current = references.Current.of([run for run, _ in self.runs["B"]],
                                   work=ExecutedWork.of(self.runs["B"][-1][1].records))
        judgement = side_a.compare(current, plan.gated)
        if judgement.incomparable:
            return None
        report = judgement.report
        if report.failed:
            return Status.REGRESSION
        return Status.INCONCLUSIVE if report.inconclusive else None

    def swap_gpus(self) -> None:
        """Stop both sides and start first the one on the back cards: leases hand out the
        first free GPUs, which the other side held. The note says which cards each side
        measured on."""
        pool, sides = self.runner.pool, self.sides
        before = {side: pool.gpus_of(spec) for side, spec in sides.items()}
        behind = pool.behind_on_gpus([sides["A"], sides["B"]])
        first = "A" if behind == sides["A"] else "B"
        for spec in sides.values():
            pool.stop(spec)
        order = (first, "A" if first == "B" else "B")
        pool.start_together([sides[side] for side in order])  # leases taken in this order
        for side in order:
            try:
                pool.get(sides[side])
            except EngineError as exc:
                raise type(exc)(f"A/B side {side} ({sides[side].label()}): {exc}") from None
        after = {side: pool.gpus_of(spec) for side, spec in sides.items()}
        shown = "; ".join(f"{side} on GPUs {','.join(before[side])} then "
                          f"{','.join(after[side])}" for side in ("A", "B"))
        self.runner.ledger.note(self.test_id, f"A/B sides traded GPUs halfway: {shown}")

    def results(self, died: EngineDied | Disturbed | None) -> tuple[MeasurementRecord, ...]:
        """Both sides' records, paired by position; the engine's death raised after them."""
        pairs = min(len(self.runs["A"]), len(self.runs["B"]))
        records = tuple(
            self.runner.record(side_id(self.id, side), self.sides[side], self.workload,
                               self.runs[side][:max(pairs, 1)])
            for side in ("A", "B") if self.runs[side])
        for record in records:  # judge_ab may give side B its verdict; llmperf.ab does not
            if record.status is None:
                record.status = Status.SIDE_A if record.id.side == "A" else Status.SIDE_B
        if died:
            self.runner.mark_ended(records, died)
            raise died
        return records


def _sides_fit(runner: Runner, sides: dict[str, Engine]) -> bool:
    """Both A/B engines can run at once: always on the CPU (both pinned to the engine's
    cores), on GPUs when there are enough for both."""
    if not is_gpu_class(runner.hardware_class):
        return True
    return runner.gpu_count >= sum(spec.gpus_needed for spec in sides.values())
