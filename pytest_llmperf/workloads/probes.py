"""Interference probes: a low-rate stream of small requests beside a workload's main load, their
latencies reported and gated apart from the load's (`Workload.with_probes`).

The idea is `vllm bench serve --probe-request-rate` (vLLM 0.32.0, vllm/benchmarks/serve.py,
`probe_loop`): while the benchmark's load runs, single-token prompts go out at a fixed rate, one
output token each, and their end-to-end latency is printed apart. It answers what an
interactive user sees while batch traffic fills the engine: a scheduler change that favours
throughput can leave the load's numbers flat and the probes' TTFT doubled. Ours differ:

- each probe has a few output tokens (8 by default), so the probes have a TPOT of their own as
  well as a TTFT;
- probes are requests of the measured run, tagged by their place in it (`positions`), so they go
  through the same client, clocks and checks as the load's; the result splits them out
  (metrics/probes.py) and the load's own metrics leave them out;
- they arrive at fixed intervals from half an interval in, over the main load's span, merged
  with its arrivals into one open-loop schedule. A closed loop (concurrency=N) or a capped open
  loop would hold the probes in its queue, which measures the queue, not interference: probes
  need an open-loop load (rate=, ramp= or a trace) without a cap.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pytest_llmperf.client.patterns import LoadPattern, Trace
from pytest_llmperf.errors import InputError
from pytest_llmperf.workloads import prompts
from pytest_llmperf.workloads.source import Source, TextOf

__all__ = ["ProbedArrivals", "ProbedSource", "probe_places", "probe_schedule", "with_probes"]

WHERE = "Workload.with_probes"


def probe_schedule(pattern: LoadPattern, num_main: int, seed: int,
                   rate: float) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """The merged arrival offsets of `num_main` requests on `pattern` and probes at `rate` over
    their span, and the probes' places in that order. Ties go to the main load first."""
    if not rate > 0:
        raise InputError(f"{WHERE}: rate must be > 0 probes/s, got {rate!r}")
    if not getattr(pattern, "open_loop", False) or pattern.max_concurrency is not None:
        raise InputError(f"{WHERE}: probes need an open-loop load without a concurrency cap "
                         f"(rate=, ramp= or a trace), got {pattern.label()}: a closed loop's "
                         "queue would hold the probes too")
    main = pattern.arrival_offsets(num_main, seed)
    span = float(main[-1]) if num_main > 1 else 0.0
    probes = np.arange(0.5 / rate, span, 1.0 / rate)
    if len(probes) == 0:
        raise InputError(f"{WHERE}: the load's {num_main} requests arrive within {span:.2f} s, "
                         f"too short for one probe at {rate:g}/s; raise num_requests or the "
                         "probe rate")
    kinds = np.concatenate([np.zeros(len(main)), np.ones(len(probes))])
    offsets = np.concatenate([main, probes])
    order = np.lexsort((kinds, offsets))  # by offset, the main load's first at a tie
    merged = offsets[order] - offsets[order][0]
    positions = tuple(int(i) for i in np.flatnonzero(kinds[order]))
    return tuple(float(x) for x in merged), positions


@dataclass(frozen=True, kw_only=True)
class ProbedArrivals(Trace):
    """The merged schedule: `load`'s arrivals and probes at `probe_rate` between them. Tables
    and identities name it by both, not by its span."""

    load: LoadPattern
    probe_rate: float

    def label(self) -> str:
        return f"{self.load.label()} + probes {self.probe_rate:g}/s"

    def to_dict(self) -> dict[str, object]:
        return {"type": "ProbedArrivals", "load": self.load.to_dict(),
                "probe_rate": self.probe_rate, "requests": len(self.offsets_s)}

    @classmethod
    def from_dict(cls, recorded: Any) -> LoadPattern:
        raise InputError("a run file records a probed load's shape, not its arrivals: "
                         "build it again (Workload.with_probes)")


@dataclass(frozen=True, kw_only=True)
class ProbedSource(Source):
    """`main`'s `num_main` requests with probes of `input_tokens` in and `output_tokens` out
    (exact; random prompts in main's format) at `positions` of the measured order. Warm-up
    requests, which go first, are main's."""

    main: Source
    num_main: int
    positions: tuple[int, ...]
    input_tokens: int = 8
    output_tokens: int = 8

    def __post_init__(self) -> None:
        if self.input_tokens < 1 or self.output_tokens < 1:
            raise InputError(f"{WHERE}: probe input_tokens and output_tokens must be >= 1, got "
                             f"{self.input_tokens} and {self.output_tokens}")

    @property
    def prompt_format(self) -> Any:  # the main load's: a chat needs text prompts
        return self.main.prompt_format

    def requests(self, n, tokenizer, rng):
        warm = n - self.num_main - len(self.positions)
        main = self.main.requests(warm + self.num_main, tokenizer, rng)
        lengths = np.full(len(self.positions), self.input_tokens)
        make = prompts.text_prompts if self.prompt_format == "text" else prompts.token_id_prompts
        texts = make(lengths, tokenizer, rng)
        probes = iter(prompts.make_requests(texts, np.full(len(texts), self.output_tokens)))
        rest = iter(main[warm:])
        places = set(self.positions)
        measured = [next(probes) if i in places else next(rest)
                    for i in range(self.num_main + len(self.positions))]
        return [*main[:warm], *measured]


def with_probes(workload: Any, rate: float, input_tokens: int = 8,
                output_tokens: int = 8) -> Any:
    """`workload` (a Workload) with probes at `rate` per second beside its load, named
    "<its name>+probes"; its requests keep their arrival times."""
    offsets, positions = probe_schedule(workload.pattern, workload.num_requests, workload.seed,
                                        rate)
    source = ProbedSource(main=workload.source, num_main=workload.num_requests,
                          positions=positions, input_tokens=input_tokens,
                          output_tokens=output_tokens)
    pattern = ProbedArrivals(offsets_s=offsets, load=workload.pattern, probe_rate=rate)
    return replace(workload, source=source, pattern=pattern,
                   num_requests=len(offsets), name=f"{workload.name}+probes")


def probe_places(source: Source) -> frozenset[int]:
    """The probes' places in a workload's measured order; empty for a workload without. Seen
    through TextOf, which decodes a probed load's prompts for a server that takes only text."""
    while isinstance(source, TextOf):
        source = source.source
    return frozenset(source.positions) if isinstance(source, ProbedSource) else frozenset()
