"""What the plots show, read out of run files (`--llmperf-json`) as plain data: no matplotlib
here, so every number a picture draws is tested without drawing it (plots.py draws).

From one run file: each sweep's throughput-versus-latency points (sweep and search points are
the results whose key has "@<workload>"), each capacity search's probes against its SLO (results
that carry "capacity"), the latency distributions (the pytest-benchmark entries' quartiles), the
A/B ratios with their band (side B's "ab"), a conversation's TTFT by turn ("by_turn") and a trace
replay's offered and achieved request rate over time ("rate_over_time"). From several: each
gated metric over time, with the band its baseline file allows (gate.py's own band).

Every run file is read through its model (verdict/stored_run.py), given as the document
json.load gives or as a StoredRun.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.ids import point_of, side_of
from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.facts import WorkloadFacts
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.metrics.turns import ByTurn
from pytest_llmperf.numbers import number_or_nan
from pytest_llmperf.verdict import gate
from pytest_llmperf.verdict.baselines import BaselineError, load_baseline
from pytest_llmperf.verdict.stored_run import StoredResult, StoredRun

Document = Mapping[str, Any] | StoredRun  # a run file as json.load gives it, or its model

LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2el_s")
LATENCY_NAMES = {"ttft_s": "TTFT", "tpot_s": "TPOT", "itl_s": "ITL", "e2el_s": "E2EL"}


def run_of(document: Document) -> StoredRun:
    return document if isinstance(document, StoredRun) else StoredRun.from_plain(document)


def _results(document: Document) -> tuple[StoredResult, ...]:
    return run_of(document).results


def metric(result: StoredResult, name: str) -> float:
    """A result's median of `name`; NaN when it was not measured (or is null)."""
    found = result.metrics.get(name)
    return math.nan if found is None else found.value


def load_of(workload: Mapping[str, Any]) -> tuple[float, str] | None:
    """A point's load and its kind: requests/s of an open loop, in-flight requests of a closed
    one, a trace replay's speedup; None for other patterns (a ramp is no single load)."""
    facts = workload if isinstance(workload, WorkloadFacts) else WorkloadFacts.from_dict(workload)
    pattern, speedup = facts.pattern, facts.source.get("speedup")
    if pattern.type == "Rate":
        return float(pattern["requests_per_s"]), "rate"
    if pattern.type == "Concurrency":
        return float(pattern["max_concurrency"]), "concurrency"
    if pattern.type == "Trace" and speedup is not None:
        return float(speedup), "speedup"
    return None


def load_label(load: float, kind: str) -> str:
    # Three digits: a capacity search's bisected rates (90.5097) only crowd a picture.
    if kind == "speedup":
        return f"{load:.3g}x"
    return f"{load:.3g} req/s" if kind == "rate" else f"c={load:g}"


# ---------------------------------------------------------------- sweeps


@dataclass(frozen=True)
class SweepPoint:
    load: float
    kind: str  # "rate", "concurrency" or "speedup"
    throughput: float  # output tok/s
    latencies: dict[str, float]  # "ttft_s.p50" ... in seconds

    @property
    def label(self) -> str:
        return load_label(self.load, self.kind)


@dataclass(frozen=True)
class Sweep:
    """One test's sweep: a line of points per engine, each sorted by load."""

    test: str  # the test's id, without the points' "@..."
    lines: dict[str, list[SweepPoint]]  # engine label -> points


SWEEP_LATENCIES = ("ttft_s.p50", "ttft_s.p99", "tpot_s.p50", "tpot_s.p99")


def sweeps(document: Document) -> list[Sweep]:
    """Every test with load points that are not a capacity search's probes, in file order."""
    found: dict[str, dict[str, list[SweepPoint]]] = {}
    for result in _results(document):
        point = point_of(result.test_id)
        load = load_of(result.workload)
        if point is None or load is None or result.record.capacity is not None:
            continue
        line = found.setdefault(point[0], {}).setdefault(result.engine_label, [])
        line.append(SweepPoint(load[0], load[1], metric(result, "output_throughput_tok_s"),
                               {name: metric(result, name) for name in SWEEP_LATENCIES}))
    return [Sweep(test, {engine: sorted(points, key=lambda p: p.load)
                         for engine, points in lines.items()})
            for test, lines in found.items()]


# ---------------------------------------------------------------- capacity search


@dataclass(frozen=True)
class Probe:
    load: float  # the nominal rate the probe offered, requests/s; a trace replay's speedup
    passed: bool
    values: dict[str, float]  # each SLO metric's value at this probe
    reason: str = ""


@dataclass(frozen=True)
class CapacitySearch:
    """One search's probes, in the order they ran, and the SLO they were judged against."""

    test: str
    engine: str
    slo_max: dict[str, float]
    slo_min: dict[str, float]
    probes: list[Probe]
    capacity: float | None = None  # the highest load that passed
    kind: str = "rate"  # what the search turned: "rate", or a trace's "speedup"

    @property
    def metrics(self) -> list[str]:
        return sorted(set(self.slo_max) | set(self.slo_min))


def capacity_searches(document: Document) -> list[CapacitySearch]:
    """The probes of each search, from the results that carry "capacity": {"slo": {"max": {...},
    "min": {...}}, "passed": bool, "reason": str}."""
    found: dict[tuple[str, str], CapacitySearch] = {}
    for result in _results(document):
        point = point_of(result.test_id)
        load = load_of(result.workload)
        capacity = result.record.capacity
        if point is None or load is None or capacity is None:
            continue
        key = (point[0], result.engine_label)
        search = found.setdefault(key, CapacitySearch(
            key[0], key[1], dict(capacity.slo_max), dict(capacity.slo_min), [], kind=load[1]))
        names = search.metrics
        search.probes.append(Probe(load[0], capacity.passed,
                                   {name: metric(result, name) for name in names},
                                   capacity.reason))
    out = []
    for search in found.values():
        passed = [probe.load for probe in search.probes if probe.passed]
        out.append(CapacitySearch(search.test, search.engine, search.slo_max, search.slo_min,
                                  search.probes, max(passed) if passed else None, search.kind))
    return out


# ---------------------------------------------------------------- latency distributions


@dataclass(frozen=True)
class Distribution:
    """One test's distribution of one latency over the requests of its representative run, in
    seconds, as pytest-benchmark's stats keep it. (The table's percentiles are medians over
    repeats, another source: a picture mixing them could show a p99 beyond the slowest
    request.)"""

    test: str
    minimum: float
    q1: float
    median: float
    q3: float
    maximum: float
    n: int


def distributions(document: Document) -> dict[str, list[Distribution]]:
    """Latency name -> one Distribution per test that measured it, in file order."""
    out: dict[str, list[Distribution]] = {name: [] for name in LATENCIES}
    for bench in run_of(document).benchmarks:
        name = (bench.get("extra_info") or {}).get("metric")
        stats = bench.get("stats") or {}
        if name not in out or not stats.get("rounds"):
            continue
        out[name].append(Distribution(
            str(bench.get("group", "")), stats["min"], stats["q1"], stats["median"], stats["q3"],
            stats["max"], int(stats["rounds"])))
    return {name: found for name, found in out.items() if found}


# ---------------------------------------------------------------- A/B


@dataclass(frozen=True)
class AbMetric:
    """One gated metric of one A/B test: the paired B/A ratios and the band they must stay in."""

    test: str
    metric: str
    ratios: list[float]
    median: float
    interval: tuple[float, float]
    # 1 + tolerance for a latency, 1 / (1 + tolerance) for a throughput; NaN without one
    worst_allowed: float
    status: str


def ab_metrics(document: Document) -> list[AbMetric]:
    """From side B's "ab" entry (ab.ab_entry): the ratios of every gated metric."""
    out = []
    for result in _results(document):
        entry = result.record.ab
        if entry is None:
            continue
        tolerance = entry.tolerance  # None: pairs a test judges itself (llmperf.ab)
        for name, judged in sorted(entry.metrics.items()):
            stored = result.metrics.get(name)
            direction = stored.direction if stored else registry.direction(name)
            worst = math.nan if tolerance is None else \
                1 + tolerance if direction == "lower" else 1 / (1 + tolerance)
            low, high = (number_or_nan(v) for v in judged.interval)
            out.append(AbMetric(
                result.test_id, name, [r for r in judged.ratios if r is not None],
                number_or_nan(judged.median), (low, high), worst, judged.status or ""))
    return out


# ---------------------------------------------------------------- conversations and traces


@dataclass(frozen=True)
class TurnLatencies:
    """One conversation run's TTFT per turn index (its "by_turn", metrics/turns.py), seconds."""

    test: str
    engine: str
    turns: list[int]
    ttft_p50: list[float]
    ttft_p90: list[float]
    prompt_tokens: list[float]  # each turn's mean prompt length: what turn t carries
    requests: list[int]


def turn_latencies(document: Document) -> list[TurnLatencies]:
    """Every result with a "by_turn" ({"1": {"ttft_s.p50": ...}, ...}), turns in order."""
    out = []
    for result in _results(document):
        by_turn = result.record.breakdown(ByTurn)
        if not by_turn:
            continue
        rows = sorted((int(turn), row) for turn, row in by_turn.items()
                      if str(turn).isdigit() and isinstance(row, Mapping))
        out.append(TurnLatencies(
            result.test_id, result.engine_label,
            [turn for turn, _ in rows], [number_or_nan(row.get("ttft_s.p50")) for _, row in rows],
            [number_or_nan(row.get("ttft_s.p90")) for _, row in rows],
            [number_or_nan(row.get("prompt_tokens.mean")) for _, row in rows],
            [int(row.get("requests") or 0) for _, row in rows]))
    return out


@dataclass(frozen=True)
class RateTimeline:
    """A trace replay's requests per second in each bin from its first due send: offered (due
    by the schedule) and achieved (finished), from its "rate_over_time" counts."""

    test: str
    engine: str
    bin_s: float
    offered_req_s: list[float]
    achieved_req_s: list[float]

    @property
    def edges(self) -> list[float]:
        """The bins' edges in seconds: one more than bins."""
        return [i * self.bin_s for i in range(len(self.offered_req_s) + 1)]

    @property
    def behind(self) -> list[float]:
        """At each bin's end, the requests due so far that had not finished (in flight, queued,
        or failed): how far the engine is behind the trace."""
        due = finished = 0.0
        out = []
        for offered, achieved in zip(self.offered_req_s, self.achieved_req_s):
            due, finished = due + offered * self.bin_s, finished + achieved * self.bin_s
            out.append(round(due - finished, 9))
        return out


def rate_timelines(document: Document) -> list[RateTimeline]:
    """Every trace replay's timeline but a capacity search's probes' (one picture per probe
    would bury the rest; the run file keeps their counts)."""
    out = []
    for result in _results(document):
        found = result.rate_over_time
        if not found or result.record.capacity is not None or not found.get("bin_s"):
            continue
        width = float(found["bin_s"])
        out.append(RateTimeline(result.test_id, result.engine_label, width,
                                [n / width for n in found.get("scheduled") or []],
                                [n / width for n in found.get("completed") or []]))
    return out


# ---------------------------------------------------------------- history


@dataclass(frozen=True)
class HistoryPoint:
    started: str  # the run's start time, ISO 8601
    value: float
    spread: float
    commit: str = ""


@dataclass(frozen=True)
class Band:
    """The values the gate lets pass for a baseline (gate.check_metric's band, both ways)."""

    baseline: float
    low: float
    high: float


@dataclass(frozen=True)
class History:
    test: str  # the result's test id
    metric: str
    points: list[HistoryPoint]
    band: Band | None = None
    baseline_file: str = ""


def _gated(result: StoredResult) -> list[str]:
    names = result.gated or gate.DEFAULT_GATED
    return [name for name in names if name in result.metrics]


def _baseline_path(baseline_dir: Path, run: StoredRun, result: StoredResult) -> Path | None:
    hardware = run.fingerprint.get("hardware_class")
    suite = result.test_id.split("::", 1)[0]
    if not hardware or not suite:
        return None
    return baseline_dir / str(hardware) / f"{Path(suite).stem}.toml"


def band_of(name: str, entry, spread: float) -> Band:
    """The gate's band around a baseline entry for a run of this `spread`: the values just
    above and just below the baseline that it still passes (the two sides differ: a tolerance
    is a factor, see gate.py)."""
    def allowed(sign: float) -> float:
        # A step of 1%: the gate reads a change that rounds to +-0.0% as one upwards.
        nudge = sign * (abs(entry.value) or 1.0) * 0.01
        return gate.check_metric(name, Estimate(entry.value + nudge, spread, 1), entry).band

    return Band(entry.value, entry.value - allowed(-1), entry.value + allowed(+1))


def history(documents: Sequence[Document], baseline_dir: Path | None = None) -> list[History]:
    """Each gated metric of each test over the runs (oldest first), with the band of the
    baseline file it has under `baseline_dir` now, when there is one."""
    ordered = sorted(map(run_of, documents), key=lambda run: run.started or "")
    series: dict[tuple[str, str], list[HistoryPoint]] = {}
    bands: dict[tuple[str, str], tuple[Band, str]] = {}
    for run in ordered:
        for result in run.results:
            test, key = result.test_id, result.key
            if point_of(test) or side_of(key) is not None:
                continue  # sweep and search points and A/B sides have no baseline
            for name in _gated(result):
                spread = result.metrics[name].spread
                spread = spread if math.isfinite(spread) else 0.0  # null: one repeat, no spread
                series.setdefault((test, name), []).append(HistoryPoint(
                    run.started or "", metric(result, name), spread, run.commit or ""))
                path = _baseline_path(baseline_dir, run, result) if baseline_dir else None
                if path is not None and path.is_file():
                    band = _band_from_file(path, key, name, spread)
                    if band is not None:
                        bands[(test, name)] = (band, str(path))
    return [History(test, name, points, *bands.get((test, name), (None, "")))
            for (test, name), points in series.items()]


def _band_from_file(path: Path, key: str, name: str, spread: float) -> Band | None:
    try:
        baseline = load_baseline(path, key)
    except BaselineError:
        return None  # a broken table is the gate's to report, not the plot's
    entry = baseline.metrics.get(name) if baseline else None
    return band_of(name, entry, spread) if entry else None


@dataclass
class PlotData:
    """Everything plots.py draws, from one or more run files."""

    sweeps: list[Sweep] = field(default_factory=list)
    searches: list[CapacitySearch] = field(default_factory=list)
    distributions: dict[str, list[Distribution]] = field(default_factory=dict)
    ab: list[AbMetric] = field(default_factory=list)
    history: list[History] = field(default_factory=list)
    turns: list[TurnLatencies] = field(default_factory=list)
    timelines: list[RateTimeline] = field(default_factory=list)


def gather(documents: Sequence[Document], baseline_dir: Path | None = None) -> PlotData:
    """One run file: its sweeps, searches, distributions, A/B ratios, turns and trace rates.
    Several (nightly runs): the same for the newest, and each gated metric over all of them."""
    if not documents:
        return PlotData()
    runs = [run_of(document) for document in documents]
    newest = max(runs, key=lambda run: run.started or "")
    return PlotData(sweeps(newest), capacity_searches(newest), distributions(newest),
                    ab_metrics(newest),
                    history(runs, baseline_dir) if len(runs) > 1 else [],
                    turn_latencies(newest), rate_timelines(newest))
