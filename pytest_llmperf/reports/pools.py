"""Several runs of one runner pool read as one run, for `llmperf compare-pools`.

A driver rolled out to a new pool of nodes while the old pool keeps the old one cannot be judged
by a paired A/B (the two sides never share a node) nor by a before/after on one node (no node
has both). What remains is the same suite run on several nodes of each pool: each metric of
each test becomes the median over the pool's runs, and its spread the runs' robust spread
(metrics/stats.combine_repeats: MAD x 1.4826), which holds the pool's node-to-node and
night-to-night noise. `llmperf compare` then judges the new pool against the old with the gate's
band for two measured spreads (verdict/gate.py: the tolerance, or NOISE_K x both spreads in
quadrature where that is wider). A pool of one run has no measured spread: only the tolerance
judges it, which the command says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pytest_llmperf.metrics.stats import Estimate, combine_repeats
from pytest_llmperf.reports.saved_runs import ReadRun, StoredResult
from pytest_llmperf.verdict.shapes import machine_id

__all__ = ["PoolError", "hosts", "pool_of"]


class PoolError(ValueError):
    """Runs that are no pool; the message is one line naming the files and the fix."""


def hosts(runs: Sequence[ReadRun]) -> list[str]:
    """The pool's nodes, each once, in the runs' order ("?" for a run that names none)."""
    return list(dict.fromkeys(str(run.fingerprint.get("host") or "?") for run in runs))


def pool_of(runs: Sequence[ReadRun], label: str) -> ReadRun:
    """`runs` as one run named `label`: every test any run has, each metric the median and
    spread over the runs that measured it. PoolError when the runs are of two hardware
    families (a pool is one kind of node)."""
    if not runs:
        raise PoolError(f"the {label} names no run file; give it one or more --llmperf-json "
                        "files of that pool")
    families = {machine_id(run.fingerprint): run.path for run in runs}
    if len(families) > 1:
        shown = ", ".join(f"{path} ({family})" for family, path in families.items())
        raise PoolError(f"the {label}'s runs are of {len(families)} hardware families ({shown}); "
                        "a pool is one kind of node: compare each family's pools separately")
    results: dict[str, StoredResult] = {}
    for key in dict.fromkeys(key for run in runs for key in run.results):
        having = [run.results[key] for run in runs if key in run.results]
        metrics = {name: _pooled([saved.metrics[name] for saved in having
                                  if name in saved.metrics])
                   for name in dict.fromkeys(n for saved in having for n in saved.metrics)}
        results[key] = dataclasses.replace(having[0], metrics=metrics)
    return ReadRun(label, runs[0].fingerprint, results)


def _pooled(estimates: list[Estimate]) -> Estimate:
    pooled = combine_repeats([estimate.value for estimate in estimates])
    return dataclasses.replace(pooled, direction=estimates[0].direction)
