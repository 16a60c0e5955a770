"""The `llmperf` fixture's object: what a test calls to measure.

It gets the test's side of the session (plugin/running.py) and the session's measurer
(plugin/measurers.py), never the pytest config (pytest-benchmark's rule), so it can be built and
tested on its own; what a call does in this session (measure, A/B, check args or baselines) is
the measurer's.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.numbers import is_whole
from pytest_llmperf.plugin.marks import TestOptions, engine_of, options_of, user_nodeid
from pytest_llmperf.plugin.measurers import Measurer
from pytest_llmperf.plugin.running import RunningTest
from pytest_llmperf.verdict.paired_ratios import DEFAULT_AB_PAIRS, PairedRun
from pytest_llmperf.workloads import sweeps
from pytest_llmperf.workloads.workload import Workload

# Where the marks' readers lived before plugin/marks.py; tests and plugins import them here.
__all__ = ["Llmperf", "TestOptions", "engine_of", "options_of", "user_nodeid"]


class Llmperf:
    """What a test measures with. `run` measures one workload; `sweep`, `capacity` and
    `offline` build on it. Each judges its metrics (SLOs, baseline) before it returns; a
    regression or a missed target fails the test there, after the numbers have been recorded."""

    def __init__(self, test: RunningTest, measurer: Measurer) -> None:
        self._test, self._measurer = test, measurer

    @property
    def options(self) -> TestOptions:
        return self._test.options

    @property
    def results(self) -> list[Result]:
        """What this test measured so far, in order."""
        return self._test.results

    def run(self, workload: Workload, *, engine: Engine | None = None,
            repeat: int | None = None, slo: Any = None) -> Result:
        """Measure `workload` on the engine (`repeat` times), then check `slo` (or the
        marker's) and the baseline."""
        self._test.options  # a malformed marker fails the test first, whatever the session does
        return self._measurer.run(self._test, workload, engine, repeat, slo)

    def ab(self, workload: Workload, *, a: Engine, b: Engine, pairs: int = DEFAULT_AB_PAIRS,
           ) -> PairedRun:
        """Measure `workload` on engines `a` and `b` alternately (ABBA, `pairs` pairs) and return
        the paired B/A ratios of every metric, for the test to assert on:
        `assert run.median("output_throughput_tok_s") > 1.2`. Both sides are rows of the summary;
        nothing is gated against a baseline."""
        if not is_whole(pairs, 1):
            raise InputError(f"llmperf.ab(pairs={pairs!r}): a whole number of ABBA pairs, "
                             "1 or more")
        return self._measurer.ab(self._test, workload, a, b, pairs)

    def sweep(self, workload: Workload, *, rates=None, concurrencies=None,
              engine: Engine | None = None) -> sweeps.Sweep:
        """One engine, several loads: a throughput-versus-latency curve. Every point is a row in
        the summary; assert on the returned Sweep (points are not gated one by one)."""
        return self._measurer.sweep(self._test, workload, rates, concurrencies, engine)

    def capacity(self, workload: Workload, slo: Any, *, low: float, high: float,
                 rel_tol: float = 0.1, max_runs: int = 8,
                 engine: Engine | None = None) -> sweeps.Capacity:
        """The highest Poisson rate meeting `slo`, found by search and gated as the metric
        `slo_capacity_req_s` (higher is better) against the baseline. For a trace replay
        (Workload.trace) `low` and `high` are speedups of the trace's own arrivals, and the
        highest speedup is gated as `slo_capacity_speedup` (sweeps.find_capacity)."""
        search = {"low": low, "high": high, "rel_tol": rel_tol, "max_runs": max_runs}
        return self._measurer.capacity(self._test, workload, slo, search, engine)

    def offline(self, workload: Workload, *, engine: Engine | None = None):
        """Maximum throughput with vLLM's in-process engine (`LLM.generate`, as `vllm bench
        throughput`), in a child process; gated as offline_*_throughput_* metrics."""
        return self._measurer.offline(self._test, workload, engine)
