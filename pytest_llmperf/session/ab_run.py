"""One paired A/B measurement: engines A and B measured alternately in ABBA order on the same
requests, with confirm pairs when B looks worse (verdict/ab.py says why), measured at once or
after the test's rerun (plugin/confirm_later.py).

On GPUs with room for both, each side has its own cards: halfway through a round they trade them,
so a difference between the cards themselves cancels too (each round for itself: other tests of
the engines may have moved them in between).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_llmperf.client.measure import Endpoint, Measurement
from pytest_llmperf.engines.errors import EngineDied, EngineError
from pytest_llmperf.engines.pool import EnginePool
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.ids import MeasurementId, result_id, side_key, side_of
from pytest_llmperf.machine.hardware import is_gpu_class
from pytest_llmperf.metrics.compute import RunMetrics
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.settings import Settings
from pytest_llmperf.verdict import judge
from pytest_llmperf.verdict.ab import abba_order
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.workloads.workload import Workload

__all__ = ["ConfirmLater", "PausedAb", "run_ab"]

Run = tuple[RunMetrics, Measurement]


class ConfirmLater(BaseException):
    """Raised out of a test whose first A/B pairs regressed, to be rerun later. A BaseException,
    as pytest's own outcomes are, so a test's `except Exception` cannot swallow it."""


@dataclass
class PausedAb:
    """An A/B measurement whose confirm pairs wait for the test's rerun: what it measured so
    far, and what it needs to go on in ABBA order."""

    sides: dict[str, Engine]
    workload: Workload
    runs: dict[str, list[Run]]
    starts: dict[str, float | None]


class Measuring(Protocol):
    """What an A/B run needs of the session (session.LlmperfSession)."""

    pool: EnginePool
    hardware_class: str
    gpu_count: int
    settings: Settings
    paused_ab: dict[str, PausedAb]
    ledger: Ledger

    def tokenizer_for(self, engine: Engine) -> Any: ...
    def endpoint_for(self, engine: Engine, workload: Workload
                     ) -> tuple[Endpoint, float | None]: ...
    def measure_once(self, engine: Engine, endpoint: Endpoint, requests, workload: Workload,
                     warmup) -> tuple[Run, EngineDied | None]: ...
    def record(self, nodeid: str, key: str, engine: Engine, workload: Workload,
               runs: list[Run], start_s: float | None) -> Result: ...
    def mark_died(self, results: Sequence[Result], died: EngineDied) -> None: ...


def run_ab(session: Measuring, nodeid: str, key: str, a: Engine, b: Engine,
           workload: Workload, pairs: int, confirm_pairs: int = 0,
           gated: tuple[str, ...] = (), defer: bool = False) -> tuple[Result, ...]:
    """Engines `a` and `b` measured alternately in ABBA order, one run each per pair, on the
    same requests. When B regressed on a `gated` metric over those pairs, `confirm_pairs` more
    are measured. With `defer`, they are not measured now: the first pairs are kept and
    `ConfirmLater` is raised, and the test's next call for the same `key` (its rerun after the
    other tests of its engine) measures them. Returns both sides' results (every run kept,
    paired by position)."""
    run = AbRun(session, nodeid, key, {"A": a, "B": b}, workload)
    with session.pool.room_for(2 if run.fit else 1):
        died = run.measure(pairs, confirm_pairs, gated, defer)
    return run.results(died)


class AbRun:
    def __init__(self, session: Measuring, nodeid: str, key: str, sides: dict[str, Engine],
                 workload: Workload) -> None:
        self.session, self.nodeid, self.key = session, nodeid, key
        self.sides, self.workload = sides, workload
        self.test_id = result_id(nodeid, key)
        built = {side: spec.tokenizer or spec.model for side, spec in sides.items()}
        self.requests = {side: workload.build(session.tokenizer_for(spec))
                         for side, spec in sides.items()
                         if built[side] != built["A"] or side == "A"}
        paused = session.paused_ab.pop(self.test_id, None)
        if paused is not None and (paused.sides, paused.workload) != (sides, workload):
            paused = None  # the rerun measures something else: start afresh
        self.resumed = paused is not None
        self.runs: dict[str, list[Run]] = paused.runs if paused else {"A": [], "B": []}
        self.starts: dict[str, float | None] = paused.starts if paused else {}
        self.fit = _sides_fit(session, sides)
        self.trade = self.fit and session.gpu_count > 0

    def measure(self, pairs: int, confirm_pairs: int, gated: tuple[str, ...],
                defer: bool) -> EngineDied | None:
        """The first `pairs`, then the confirm pairs if B regressed over them (a deferred
        test's rerun measures the confirm pairs only)."""
        died, confirm = None, self.resumed
        if not confirm:
            died = self.measure_round(0, pairs)
            complete = len(self.runs["A"]) == len(self.runs["B"]) == pairs
            confirm = bool(confirm_pairs and complete and not died
                           and self.side_b_regressed(gated))
            if confirm and defer:
                self.session.paused_ab[self.test_id] = PausedAb(self.sides, self.workload,
                                                                self.runs, self.starts)
                raise ConfirmLater(self.test_id)
        if confirm:
            later = " after the other tests of its engine," if self.resumed else ""
            self.session.ledger.note(self.test_id, f"B regressed over {pairs} ABBA pairs; "
                                     f"{confirm_pairs} more measured{later} to confirm")
            died = self.measure_round(pairs, confirm_pairs)
        return died

    def measure_round(self, first_pair: int, count: int) -> EngineDied | None:
        order = abba_order(first_pair + count)[2 * first_pair:]
        swap_at = count // 2 * 2 if self.trade and count >= 2 else None
        for index, side in enumerate(order):
            if index == swap_at:
                self.swap_gpus()
            spec = self.sides[side]
            try:
                endpoint, start_s = self.session.endpoint_for(spec, self.workload)
            except EngineError as exc:
                raise type(exc)(f"A/B side {side} ({spec.label()}): {exc}") from None
            self.starts.setdefault(side, start_s)
            requests, warmup = self.requests.get(side, self.requests["A"])
            run, died = self.session.measure_once(spec, endpoint, requests, self.workload,
                                                  () if self.runs[side] else warmup)
            self.runs[side].append(run)
            if run[1].client_error or died:
                return died
        return None

    def side_b_regressed(self, gated: tuple[str, ...]) -> bool:
        """Whether B regressed over the pairs measured so far, judged as judge_ab will judge
        them all (judge.SideA): the question that decides whether confirm pairs follow."""
        side_a = judge.SideA(tuple(run.flat() for run, _ in self.runs["A"]),
                             self.session.settings.ab_tolerance)
        current = judge.Current.of([run for run, _ in self.runs["B"]])
        return side_a.compare(current, gated).report.failed

    def swap_gpus(self) -> None:
        """Stop both sides and start first the one on the back cards: leases hand out the
        first free GPUs, which the other side held. The note says which cards each side
        measured on."""
        pool, sides = self.session.pool, self.sides
        before = {side: pool.gpus_of(spec) for side, spec in sides.items()}
        behind = pool.behind_on_gpus([sides["A"], sides["B"]])
        first = "A" if behind == sides["A"] else "B"
        for spec in sides.values():
            pool.stop(spec)
        for side in (first, "A" if first == "B" else "B"):
            try:
                pool.get(sides[side])
            except EngineError as exc:
                raise type(exc)(f"A/B side {side} ({sides[side].label()}): {exc}") from None
        after = {side: pool.gpus_of(spec) for side, spec in sides.items()}
        shown = "; ".join(f"{side} on GPUs {','.join(before[side])} then "
                          f"{','.join(after[side])}" for side in ("A", "B"))
        self.session.ledger.note(self.test_id, f"A/B sides traded GPUs halfway: {shown}")

    def results(self, died: EngineDied | None) -> tuple[Result, ...]:
        """Both sides' results, paired by position; the engine's death raised after them."""
        pairs = min(len(self.runs["A"]), len(self.runs["B"]))
        results = tuple(
            self.session.record(self.nodeid, side_key(self.key, side), self.sides[side],
                                self.workload, self.runs[side][:max(pairs, 1)],
                                self.starts.get(side))
            for side in ("A", "B") if self.runs[side])
        ledger = self.session.ledger
        for result in results:  # judge_ab may give side B its verdict; llmperf.ab does not
            id = MeasurementId.parse(result.test_id)
            if ledger.status(id) is None:
                ledger.judged(id, Status.SIDE_A if side_of(result.key) == "A" else Status.SIDE_B)
        if died:
            self.session.mark_died(results, died)
            raise died
        return results


def _sides_fit(session: Measuring, sides: dict[str, Engine]) -> bool:
    """Both A/B engines can run at once: always on the CPU (both pinned to the engine's
    cores), on GPUs when there are enough for both."""
    if not is_gpu_class(session.hardware_class):
        return True
    return session.gpu_count >= sum(spec.gpus_needed for spec in sides.values())
