"""Energy per token: the engine's cards' energy over the measured requests (NVML's energy
counter, machine/gpu_telemetry.py), over the tokens they carried. Metrics like any other: per run
in RunMetrics, so the gate, the A/B judge and the history take a median, a spread and a ratio of
them (docs/gpu-telemetry.md).

The window is the one the throughputs count (metrics/compute.py): the first request sent to the
last token received, warm-up left out, so J/token x tok/s is the cards' mean power. Where a card
has no energy counter (a CPU, a card older than Volta, a driver without the call) there is no
value: the metrics are absent, never zero.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_llmperf.machine.disturbance import Disturbance
from pytest_llmperf.metrics.metric import HIGHER, LOWER, Column, Metric, RunInputs
from pytest_llmperf.records import RequestRecord

__all__ = ["METRICS", "NAMES", "PER_OUTPUT_TOKEN", "PER_TOKEN", "TOKENS_PER_JOULE",
           "energy_metrics", "measured_window"]

PER_OUTPUT_TOKEN = "energy_per_output_token_j"
PER_TOKEN = "energy_per_token_j"  # per prompt + output token
TOKENS_PER_JOULE = "output_tokens_per_joule"
NAMES = (PER_OUTPUT_TOKEN, PER_TOKEN, TOKENS_PER_JOULE)


def measured_window(records: Sequence[RequestRecord]) -> tuple[float, float] | None:
    """perf_counter times of the first request sent and the last token of a completed one: the
    span compute's throughputs divide by. None where nothing completed."""
    done = [record for record in records if record.ok]
    sent = [record.sent_s for record in records if record.sent_s is not None]
    if not done or not sent:
        return None
    return min(sent), max(record.chunk_times_s[-1] for record in done)


def energy_metrics(disturbance: Disturbance | None, prompt_tokens: int,
                   output_tokens: int) -> tuple[tuple[str, float], ...]:
    """The three metrics from the energy of every card the engine used (summed), as the watch
    over the run read them (machine/watch.py); () where any card's energy is unknown or none was
    counted."""
    cards = [gpu.telemetry for gpu in disturbance.gpus] if disturbance else []
    energies = [card.energy_j if card else None for card in cards]
    if not energies or any(energy is None for energy in energies):
        return ()
    joules = sum(energy for energy in energies if energy is not None)
    if joules <= 0 or output_tokens <= 0:
        return ()
    return ((PER_OUTPUT_TOKEN, joules / output_tokens),
            (PER_TOKEN, joules / (prompt_tokens + output_tokens)),
            (TOKENS_PER_JOULE, output_tokens / joules))


def _of_run(name: str):
    def compute(run: RunInputs) -> float | None:
        found = energy_metrics(run.disturbance, run.value("prompt_tokens"),
                               run.value("output_tokens"))
        return dict(found).get(name)
    return compute


_NEEDS = ("prompt_tokens", "output_tokens")
_ABSENT = ("energy metric {name}: this run has no GPU energy reading (NVML's energy counter, on "
           "the engine's GPUs; a CPU run has none)")
METRICS = (
    Metric(PER_OUTPUT_TOKEN, "J/tok", LOWER, "J/tok", meaning=(
        "J/tok = joules per output token, over all the engine's GPUs (NVML's energy counter)"),
        columns=(Column("{:.3g}", 210, 11, optional=True),), needs=_NEEDS,
        compute=_of_run(PER_OUTPUT_TOKEN), absent=_ABSENT),
    Metric(PER_TOKEN, "J/tok", LOWER, needs=_NEEDS, compute=_of_run(PER_TOKEN), absent=_ABSENT),
    Metric(TOKENS_PER_JOULE, "tok/J", HIGHER, needs=_NEEDS, compute=_of_run(TOKENS_PER_JOULE),
           absent=_ABSENT),
)
