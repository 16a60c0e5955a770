"""How the gate's noise band (pytest_llmperf/verdict/noise.py) does on real reruns.

Given two or more runs of the same suite on the same machine, nothing changed between them:

1. each metric's run-to-run spread per test (MAD x 1.4826 over the runs, relative to the
   median: metrics/stats.py), the largest over the tests, and the prior the code holds;
2. the band a baseline written from one run gets (noise.FLOOR, noise.K, the prior), applied to
   every other run of the same test: (a) as measured, where any failure is a false alarm, and
   (b) made 3% and 10% worse, where a failure is a catch;
3. the same totals for other values of K.

Runs are run files (`--llmperf-json PATH`, reports/runfile.py) or one file holding several
runs, {"runs": [{"name": ..., "engine_start_s": ..., "results": {test: {metric: value}}}]}, as
tests/unit/data/h200_reruns.json does. Without runs, `--kind cpu` or `--kind gpu` prints the
band of each prior and which losses it catches. docs/noise.md holds the output:

    .venv/bin/python scripts/calibrate_noise.py tests/unit/data/h200_reruns.json --kind gpu
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from pytest_llmperf.metrics.registry import direction
from pytest_llmperf.metrics.stats import Estimate, combine_repeats, relative_spread
from pytest_llmperf.reports.saved_runs import read_run
from pytest_llmperf.verdict import noise
from pytest_llmperf.verdict.gate import DEFAULT_GATED, check_metric, make_entries

ENGINE_START = "engine_start_s"
LOSSES = (0.03, 0.10)
K_SWEEP = (2.0, 3.0, 4.0, 6.0)
Run = dict[str, dict[str, float]]  # test -> metric -> value


def read_runs(paths: Sequence[Path]) -> list[Run]:
    """Each run as test -> metric -> value, its engine's start time as the metric
    engine_start_s of every test."""
    runs = []
    for path in paths:
        document = json.loads(path.read_text())
        if "runs" in document:
            runs += [_bundled(run) for run in document["runs"]]
            continue
        saved = read_run(path)
        # The engine's start is among the metrics (a file written before has it read so).
        runs.append({key: {n: e.value for n, e in result.estimates.items()}
                     for key, result in saved.results.items()})
    return runs


def _bundled(run: dict) -> Run:
    start = run.get(ENGINE_START)
    return {key: {**values, **({ENGINE_START: start} if start is not None else {})}
            for key, values in run["results"].items()}


def samples(runs: Sequence[Run], name: str) -> dict[str, list[float]]:
    """Per test, the metric's value in every run that has it (tests that all runs measured).
    The engine's start is one sample per run, whatever the number of tests: kept once."""
    tests = set.intersection(*(set(run) for run in runs))
    found = {test: [run[test][name] for run in runs if name in run[test]] for test in sorted(tests)}
    found = {test: values for test, values in found.items()
             if len(values) == len(runs) and all(v is not None for v in values)}
    return dict(itertools.islice(found.items(), 1)) if name == ENGINE_START else found


def spread_rows(runs: Sequence[Run], kind: str) -> list[str]:
    names = sorted({name for run in runs for values in run.values() for name in values
                    if noise.prior_for(name, kind) or name == ENGINE_START})
    rows = ["| metric | tests | largest spread | at | prior |", "|---|---|---|---|---|"]
    for name in names:
        found = samples(runs, name)
        if not found:
            continue
        spreads = {t: relative_spread(combine_repeats(v)) for t, v in found.items()}
        test = max(spreads, key=spreads.get)
        prior = noise.prior_for(name, kind)
        test_shown = "(one start per run)" if name == ENGINE_START else test
        rows.append(f"| {name} | {len(found)} | {spreads[test]:.2%} | {test_shown} | "
                    f"{f'{prior.spread:.2%}' if prior else '-'} |")
    return rows


def judged(name: str, base: float, now: float, kind: str, loss: float = 0.0,
           spread: float | None = None) -> bool:
    """Does a baseline written from `base` (one run: the prior's spread, or `spread` relative
    to the value) fail `now` made `loss` worse?"""
    entry = make_entries({name: Estimate(base, 0.0, 1)}, names=(name,))[name]
    entry = noise.with_spreads({name: entry}, {name: Estimate(base, 0.0, 1)}, kind)[name]
    if spread is not None:
        entry = replace(entry, spread=spread * abs(base), spread_source="prior",
                        tolerance=noise.FLOOR)
    worse = 1 + loss if direction(name) == "lower" else 1 - loss
    return check_metric(name, now * worse, entry).failed


def outcome(runs: Sequence[Run], name: str, kind: str, held_out: bool = False
            ) -> tuple[int, list[int]]:
    """(comparisons, failures as measured and at each loss) over every ordered pair of runs
    of every test; a single synthetic run of value 1 where there are no runs. `held_out`: each
    test's prior is the largest spread of the other tests, not the code's."""
    found = samples(runs, name) if runs else {"": [1.0]}
    pairs = itertools.permutations if runs else _itself
    spreads = {test: relative_spread(combine_repeats(v)) for test, v in found.items()}
    failures, count = [0] * (len(LOSSES) + 1), 0
    for test, values in found.items():
        others = [s for t, s in spreads.items() if t != test]
        spread = max(others, default=math.nan) if held_out else None
        if spread is not None and math.isnan(spread):
            continue
        for a, b in pairs(values, 2):
            count += 1
            for i, loss in enumerate((0.0, *LOSSES)):
                failures[i] += judged(name, a, b, kind, loss, spread)
    return count, failures


def _itself(values: Sequence[float], _: int) -> list[tuple[float, float]]:
    """No runs: one synthetic rerun that measured exactly the baseline's value."""
    return [(value, value) for value in values]


def band_text(name: str, kind: str) -> tuple[str, str]:
    """The band a one-run baseline gets, and whether it is gated unless a test names it."""
    prior = noise.prior_for(name, kind)
    default = "yes" if name in DEFAULT_GATED else "named only"
    if prior is None:
        return "no prior: the tolerance, 10%", default
    band = max(noise.FLOOR, noise.K * prior.spread)
    too_noisy = noise.K * prior.spread > noise.NOISY_BAND
    return f"{band:.1%}", "named only" if too_noisy else default


def band_rows(runs: Sequence[Run], kind: str, names: Iterable[str]) -> list[str]:
    rows = ["| metric | band | gated by default | false alarms | 3% worse caught | "
            "10% worse caught |", "|---|---|---|---|---|---|"]
    for name in names:
        count, (false, *caught) = outcome(runs, name, kind)
        if runs and not samples(runs, name):
            continue
        band, gated = band_text(name, kind)
        alarms = f"{false}/{count}" if runs else "-"
        rows.append(f"| {name} | {band} | {gated} | {alarms} | "
                    + " | ".join(f"{c}/{count}" for c in caught) + " |")
    return rows


def sweep_rows(runs: Sequence[Run], kind: str) -> list[str]:
    """Totals over the metrics gated by default, with the code's priors and with each test's
    prior taken from the other tests only (held out: how a prior does on a test it has not
    seen)."""
    rows = ["| K | gated by default | false alarms | 3% worse caught | 10% worse caught | "
            "held out: false alarms | 3% | 10% |", "|---|---|---|---|---|---|---|---|"]
    chosen = noise.K
    try:
        for k in K_SWEEP:
            noise.K = k
            gated = [n for n in DEFAULT_GATED if band_text(n, kind)[1] == "yes"]
            cells = []
            for held_out in (False, True):
                totals = [outcome(runs, name, kind, held_out) for name in gated]
                count = sum(c for c, _ in totals)
                cells += [f"{sum(f[i] for _, f in totals)}/{count}"
                          for i in range(len(LOSSES) + 1)]
            rows.append(f"| {k:g} | {', '.join(gated)} | {' | '.join(cells)} |")
    finally:
        noise.K = chosen
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="run files or a runs bundle")
    parser.add_argument("--kind", choices=(noise.GPU, noise.CPU), required=True,
                        help="whose priors: the hardware the runs were measured on")
    args = parser.parse_args(argv)
    runs = read_runs(args.runs)
    if len(runs) == 1:
        parser.error("one run has no run-to-run spread: give two or more")
    print(f"K = {noise.K:g}, floor = {noise.FLOOR:.0%}, too noisy above a band of "
          f"{noise.NOISY_BAND:.0%}; {len(runs)} runs, {args.kind.upper()} priors")
    if runs:
        print("\nRun-to-run spread (MAD x 1.4826 over the runs, relative to the median):\n")
        print("\n".join(spread_rows(runs, args.kind)))
    print("\nA baseline from one run against each other run:\n" if runs else
          "\nEach prior's band, against a rerun that measured the baseline's value exactly:\n")
    print("\n".join(band_rows(runs, args.kind, [*DEFAULT_GATED, ENGINE_START])))
    if runs:
        print("\nThe metrics gated by default, for other K:\n")
        print("\n".join(sweep_rows(runs, args.kind)))


if __name__ == "__main__":
    main()
