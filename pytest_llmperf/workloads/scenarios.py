"""MLPerf-style Server and Offline scenarios at our scale (docs/published-numbers.md, MLPerf).

Server: Poisson arrivals at a target QPS; the run is VALID when p99 TTFT and p99 TPOT are within
the model's limits, the run lasted and completed enough, nothing failed, the engine kept up with
the schedule, and the p99s pass early stopping (below). Offline: every query at once; VALID with
enough completed queries and no failures, and the throughput is what it reports.

Early stopping (what MLPerf LoadGen does for the Server scenario, and what we implement exactly).
A p99 under the limit from a small run says little: with 100 queries the p99 is fixed by the two
slowest. LoadGen asks instead whether the run *shows*, at 99% confidence, that at most 1% of
queries exceed the limit. With n queries of which k are over the limit, it treats the true share
over the limit as q and tests q >= 0.01 against the data: the run passes when

    P(X <= k | X ~ Binomial(n, 0.01)) < 0.01,

i.e. a server that really put 1% of its queries over the limit would show k or fewer in under 1%
of runs. (LoadGen writes this as I_0.99(n - k, k + 1) < 0.01 with the regularized incomplete
beta function, the same number, and searches for the least number of queries under the limit
that passes; for LLMs TTFT and TPOT are checked separately, a query is over when its value is
strictly above the limit.) So the bar rises with k: k = 0 needs n >= 459, k = 1 needs n >= 662,
which is why 459 is the default minimum query count, and why "n >= 100" is far too weak a floor.
We compute the binomial tail directly from log-factorials (math.lgamma), no scipy.

Where we differ from LoadGen, at our scale: the minimum duration defaults to 60 s, not 600 s
(pass 600 for the real rule); the duration is first send -> last completion, not the scheduled
time of the last query; and we also check that the engine completed queries at >= 90% of the
scheduled rate, which LoadGen reports but leaves to the latency limits.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from pytest_llmperf.client.patterns import Rate
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.compute import RunMetrics, Summary, request_tpot
from pytest_llmperf.numbers import is_real, is_whole
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.workloads.slo_check import KEEP_UP, achieved_rate
from pytest_llmperf.workloads.workload import Workload

__all__ = [
    "DEFAULT_MIN_DURATION_S",
    "DEFAULT_MIN_QUERIES",
    "EARLY_STOPPING_CONFIDENCE",
    "EARLY_STOPPING_PERCENTILE",
    "MLPERF_LIMITS",
    "Check",
    "OfflineScenario",
    "ScenarioVerdict",
    "ServerScenario",
    "binomial_cdf",
    "early_stopping_min_queries",
    "early_stopping_passes",
    "judge_offline",
    "judge_server",
    "offline_workload",
    "server_workload",
]

# model -> (TTFT p99 limit, TPOT p99 limit), seconds: MLPerf loadgen/mlperf.conf, Server scenario.
MLPERF_LIMITS: dict[str, tuple[float, float]] = {
    "llama2-70b": (2.0, 0.2),
    "llama2-70b-interactive": (0.45, 0.04),
    "llama3_1-8b": (2.0, 0.1),
    "llama3_1-8b-interactive": (0.5, 0.03),
    "llama3_1-405b": (6.0, 0.175),
    "llama3_1-405b-interactive": (4.5, 0.08),
}
EARLY_STOPPING_PERCENTILE = 0.99
EARLY_STOPPING_CONFIDENCE = 0.99
# The fewest queries that can pass early stopping at all (none over the limit): 0.99^459 < 0.01.
DEFAULT_MIN_QUERIES = 459
# MLPerf's 600 s, scaled down so a scenario fits a CI job.
DEFAULT_MIN_DURATION_S = 60.0


def _positive(owner: str, name: str, value: object, *, zero_ok: bool = False) -> None:
    if not is_real(value, 0 if zero_ok else None, finite=True, above=None if zero_ok else 0):
        bound = ">= 0" if zero_ok else "> 0"
        raise InputError(f"{owner}.{name} must be a finite number {bound}, got {value!r}")


def _min_queries(owner: str, value: object) -> None:
    if not is_whole(value, 1):
        raise InputError(f"{owner}.min_queries must be an int >= 1, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class ServerScenario:
    """Poisson arrivals at `target_qps`; p99 limits in seconds."""

    target_qps: float
    ttft_p99_s: float
    tpot_p99_s: float
    min_duration_s: float = DEFAULT_MIN_DURATION_S
    min_queries: int = DEFAULT_MIN_QUERIES

    def __post_init__(self) -> None:
        for name in ("target_qps", "ttft_p99_s", "tpot_p99_s"):
            _positive("ServerScenario", name, getattr(self, name))
        _positive("ServerScenario", "min_duration_s", self.min_duration_s, zero_ok=True)
        _min_queries("ServerScenario", self.min_queries)

    @classmethod
    def for_model(cls, name: str, target_qps: float, *,
                  min_duration_s: float = DEFAULT_MIN_DURATION_S,
                  min_queries: int = DEFAULT_MIN_QUERIES) -> ServerScenario:
        """The MLPerf latency limits of `name` (a key of MLPERF_LIMITS) at `target_qps`."""
        if name not in MLPERF_LIMITS:
            close = difflib.get_close_matches(name, MLPERF_LIMITS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise KeyError(f"no MLPerf latency limits for {name!r}{hint}; known: "
                           f"{', '.join(MLPERF_LIMITS)}")
        ttft, tpot = MLPERF_LIMITS[name]
        return cls(target_qps=target_qps, ttft_p99_s=ttft, tpot_p99_s=tpot,
                   min_duration_s=min_duration_s, min_queries=min_queries)


@dataclass(frozen=True, kw_only=True)
class OfflineScenario:
    """Every query sent at once; the engine batches as it likes."""

    min_queries: int

    def __post_init__(self) -> None:
        _min_queries("OfflineScenario", self.min_queries)


# --- early stopping -------------------------------------------------------------------------

def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space so large n cannot underflow."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    log_n = math.lgamma(n + 1)
    terms = (math.exp(log_n - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                      + j * log_p + (n - j) * log_q) for j in range(k + 1))
    return min(1.0, math.fsum(terms))


def early_stopping_passes(n: int, over: int, *,
                          percentile: float = EARLY_STOPPING_PERCENTILE,
                          confidence: float = EARLY_STOPPING_CONFIDENCE) -> bool:
    """True when `over` of `n` queries above the limit show, at `confidence`, that the true
    `percentile` is within it: P(X <= over | Binomial(n, 1 - percentile)) < 1 - confidence."""
    if n < 1:
        return False
    return binomial_cdf(over, n, 1.0 - percentile) < 1.0 - confidence


def early_stopping_min_queries(over: int, *,
                               percentile: float = EARLY_STOPPING_PERCENTILE,
                               confidence: float = EARLY_STOPPING_CONFIDENCE) -> int:
    """The fewest queries with which `over` queries above the limit still pass."""
    def passes(n: int) -> bool:
        return early_stopping_passes(n, over, percentile=percentile, confidence=confidence)

    # The tail P(X <= over) falls as n grows, so: double to bracket, then bisect.
    lo, hi = over, max(over + 1, 1)
    while not passes(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if passes(mid) else (mid, hi)
    return hi


# --- workloads ------------------------------------------------------------------------------

def _queries_to_cover(pattern: Rate, duration_s: float, seed: int) -> int:
    # The fewest queries whose seeded schedule reaches `duration_s` (LoadGen also sizes a Server
    # run by its schedule). ceil(duration x qps) is only right on average: with Poisson gaps the
    # schedule ends short about half the time, and the run would then miss its own minimum.
    guess = math.ceil(duration_s * pattern.requests_per_s * 1.25) + 16
    while True:
        offsets = pattern.arrival_offsets(guess, seed)
        index = int(np.searchsorted(offsets, duration_s))  # first offset >= duration_s
        if index < guess:
            return index + 1
        guess *= 2


def server_workload(scenario: ServerScenario, base: Workload) -> Workload:
    """`base` as a Server run: Poisson at the target QPS, long and large enough to be judged.

    num_requests = max(min_queries, ceil(min_duration_s x qps), the queries the seeded schedule
    needs to reach min_duration_s). Base's burstiness and concurrency cap are dropped, since the
    scenario is defined as Poisson with no cap; so is its duration_s: the scenario sizes the run.
    """
    pattern = Rate(requests_per_s=scenario.target_qps)
    n = max(scenario.min_queries,
            math.ceil(scenario.min_duration_s * scenario.target_qps),
            _queries_to_cover(pattern, scenario.min_duration_s, base.seed))
    return replace(base, name=f"{base.name}-server{scenario.target_qps:g}qps", num_requests=n,
                   pattern=pattern, duration_s=None)


def offline_workload(scenario: OfflineScenario, base: Workload) -> Workload:
    """`base` as an Offline run: at least `min_queries` queries, all sent at once."""
    return replace(base, name=f"{base.name}-offline",
                   num_requests=max(base.num_requests, scenario.min_queries),
                   pattern=Rate(requests_per_s=math.inf), duration_s=None)


# --- verdicts -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Check:
    """One rule of a scenario: whether it held and a one-line message either way."""

    name: str
    ok: bool
    message: str


@dataclass(frozen=True)
class ScenarioVerdict:
    """VALID when every check holds. (Not gate.Verdict, which judges one metric.)"""

    scenario: str
    checks: tuple[Check, ...]
    stats: dict[str, float]

    @property
    def valid(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def status(self) -> str:
        return "VALID" if self.valid else "INVALID"

    @property
    def reasons(self) -> list[str]:
        """Why it is INVALID: the message of every failed check, in check order."""
        return [check.message for check in self.checks if not check.ok]

    def lines(self) -> list[str]:
        out = [f"{self.scenario} scenario: {self.status}"]
        out += [f"  {'ok  ' if c.ok else 'FAIL'} {c.message}" for c in self.checks]
        out += [f"  {name} = {value:.6g}" for name, value in self.stats.items()]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _latency_check(label: str, p99: float, limit: float) -> Check:
    name = f"{label.lower()}_p99"
    if math.isnan(p99):
        return Check(name, False, f"{label} p99 not measured (no completed requests)")
    if p99 <= limit:
        return Check(name, True, f"{label} p99 {_ms(p99)} within the {_ms(limit)} limit")
    return Check(name, False,
                 f"{label} p99 {_ms(p99)} over the {_ms(limit)} limit: lower target_qps")


def _over_from_summary(summary: Summary, limit: float) -> int:
    # Without the per-query values, bound the count from the summary. numpy's p99 interpolates
    # between sorted values floor(h) and floor(h) + 1, h = 0.99 (n - 1): p99 <= limit puts
    # values 0..floor(h) at or under it, so at most n - 1 - floor(h) are over. Conservative.
    if summary.max <= limit:
        return 0
    return summary.n - 1 - math.floor(EARLY_STOPPING_PERCENTILE * (summary.n - 1))


def _early_stopping_check(label: str, values: Sequence[float] | None, summary: Summary,
                          limit: float) -> Check:
    name = f"{label.lower()}_early_stopping"
    if values is not None:
        n, over, how = len(values), sum(v > limit for v in values), ""
    else:
        n, over = summary.n, _over_from_summary(summary, limit)
        how = " (count bounded from the summary; pass records= for the exact count)"
    head = f"{label} early stopping: {over} of {n} queries over {_ms(limit)}"
    if early_stopping_passes(n, over):
        return Check(name, True, f"{head}, enough to show p99 within the limit at 99% "
                                 f"confidence{how}")
    need = early_stopping_min_queries(over)
    return Check(name, False, f"{head}, needs at least {need} queries with {over} over to show "
                              f"p99 within the limit at 99% confidence{how}")


def _count_checks(metrics: RunMetrics, min_queries: int) -> list[Check]:
    done, failed = metrics.completed, metrics.failed
    enough = done >= min_queries
    sign = ">=" if enough else "<"
    message = f"completed {done} queries {sign} minimum {min_queries}"
    checks = [Check("min_queries", enough, message)]
    if failed:
        checks.append(Check("no_failures", False, f"{failed} of {done + failed} requests failed"))
    else:
        checks.append(Check("no_failures", True, "no failed requests"))
    return checks


def _rates(scenario: ServerScenario, metrics: RunMetrics,
           records: Sequence[RequestRecord] | None) -> tuple[float, float]:
    """(scheduled, achieved) queries/s: exact from the records, else target and an estimate."""
    if records is None:
        return scenario.target_qps, achieved_rate(metrics)
    scheduled = sorted(r.scheduled_s for r in records)
    ends = sorted(r.chunk_times_s[-1] for r in records if r.ok)
    offered = ((len(scheduled) - 1) / (scheduled[-1] - scheduled[0])
               if len(scheduled) > 1 and scheduled[-1] > scheduled[0] else math.nan)
    achieved = ((len(ends) - 1) / (ends[-1] - ends[0])
                if len(ends) > 1 and ends[-1] > ends[0] else math.nan)
    return offered, achieved


def _load_check(offered: float, achieved: float) -> Check:
    if math.isnan(offered) or math.isnan(achieved):
        return Check("scheduled_load", False, "completed rate not measurable: fewer than two "
                                              "queries scheduled or completed")
    shown = f"completed {achieved:.2f} req/s of {offered:.2f} req/s scheduled"
    share = f"{achieved / offered:.0%}"
    if achieved >= KEEP_UP * offered:
        return Check("scheduled_load", True, f"{shown} ({share})")
    return Check("scheduled_load", False, f"{shown} ({share} < {KEEP_UP:.0%}): the engine did "
                                          "not keep up with the scheduled load")


def _latencies(records: Sequence[RequestRecord] | None) -> tuple[list[float] | None, ...]:
    # The same per-request definitions as metrics/compute.py: TTFT from send to the first token
    # chunk, TPOT only for requests with more than one output token.
    if records is None:
        return None, None
    done = [r for r in records if r.ok]
    return ([r.ttft_s for r in done],
            [request_tpot(r) for r in done if r.output_tokens > 1])


def judge_server(scenario: ServerScenario, metrics: RunMetrics, *,
                 records: Sequence[RequestRecord] | None = None) -> ScenarioVerdict:
    """VALID or INVALID under `scenario`, with a one-line message per check.

    Give the run's `records` (Result.records) for exact early-stopping counts and the exact
    scheduled and completed rates; without them the counts are bounded from the summaries
    (which can only make early stopping stricter) and the rates are the target and an estimate.
    """
    ttfts, tpots = _latencies(records)
    offered, achieved = _rates(scenario, metrics, records)
    long_enough = metrics.duration_s >= scenario.min_duration_s
    sign = ">=" if long_enough else "<"
    checks = [
        _latency_check("TTFT", metrics.ttft_s.p99, scenario.ttft_p99_s),
        _latency_check("TPOT", metrics.tpot_s.p99, scenario.tpot_p99_s),
        _early_stopping_check("TTFT", ttfts, metrics.ttft_s, scenario.ttft_p99_s),
        _early_stopping_check("TPOT", tpots, metrics.tpot_s, scenario.tpot_p99_s),
        Check("min_duration", long_enough, f"duration {metrics.duration_s:.1f} s {sign} "
                                           f"minimum {scenario.min_duration_s:.1f} s"),
        *_count_checks(metrics, scenario.min_queries),
        _load_check(offered, achieved),
    ]
    stats = {"target_qps": scenario.target_qps, "scheduled_qps": offered,
             "achieved_qps": achieved, "ttft_p99_s": metrics.ttft_s.p99,
             "tpot_p99_s": metrics.tpot_s.p99,
             "output_throughput_tok_s": metrics.output_throughput_tok_s}
    return ScenarioVerdict("Server", tuple(checks), stats)


def judge_offline(scenario: OfflineScenario, metrics: RunMetrics) -> ScenarioVerdict:
    """VALID with at least `min_queries` completed and none failed; throughput in `stats`."""
    stats = {"output_throughput_tok_s": metrics.output_throughput_tok_s,
             "total_throughput_tok_s": metrics.total_throughput_tok_s,
             "request_throughput_req_s": metrics.request_throughput_req_s}
    return ScenarioVerdict("Offline", tuple(_count_checks(metrics, scenario.min_queries)), stats)
