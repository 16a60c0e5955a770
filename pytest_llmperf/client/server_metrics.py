"""Server-side metrics: the server's Prometheus `/metrics`, sampled while a run is in flight.

The client measures latency; only the server knows why it was what it was: how full the KV cache
got, how many requests queued, how often the prefix cache hit, how many sequences were preempted.
`ServerMetricsSampler` polls `/metrics` in the background and reduces the samples to a few numbers:
gauges to their maximum over the samples, counters to their change between the first and the last
sample. A server without `/metrics` (not vLLM, or down) yields an empty summary and a one-line
`warning`: the sampler never raises into the run it observes.

Names are matched exactly (docs/cpu-engine.md, /metrics): `vllm:num_requests_waiting` is not
`vllm:num_requests_waiting_by_reason`. Under data parallelism every engine reports its own label
set (`engine="0"`, `engine="1"`, ...); the values are summed, except the KV-cache usage fraction.
A labelled counter can keep one label's series apart: speculative decoding's accepted tokens per
draft position are summed over engines, never over positions.
Each server kind names its own samples (metric_names.py: vLLM's, SGLang's, llama.cpp's
server's; client/server_kind.py picks one); the summary's keys are the same for all of them.

The engine's request-timing histograms (queue, prefill, decode, TTFT, ITL, E2EL: `phases`) are
read twice, at the first sample and at the last: the window between them is the measured one
(the sampler starts after the warm-up), so both sides count the same requests. Their difference
gives the window's count, mean and percentiles ("ttft_s.mean", "queue_s.p50", "e2el_s.n":
metrics/histograms.py), which metrics/phases.py splits a client latency by (docs/phases.md).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Collection, Mapping
from types import TracebackType

import httpx

from pytest_llmperf.client.access import Access
from pytest_llmperf.client.metric_names import (
    COUNTER_DELTAS,
    GAUGE_MAXIMA,
    VLLM_MAX_OVER_LABEL_SETS,
    VLLM_METRICS,
    MetricNames,
)
from pytest_llmperf.metrics import spec_decode
from pytest_llmperf.metrics.histograms import Histogram, parse_histograms, window_values

__all__ = ["SAMPLE_INTERVAL_S", "ServerMetricsSampler", "by_label", "labelled", "parse_metrics",
           "parse_vllm_metrics"]

# One GET every quarter second: fine enough to see a KV-cache peak in a run of a few seconds, cheap
# for the server (rendering /metrics costs vLLM's API process ~10 ms) and the client alike.
SAMPLE_INTERVAL_S = 0.25
# A server busy with a burst can answer /metrics late; longer than this and the sample is skipped.
SCRAPE_TIMEOUT_S = 5.0

# Histogram buckets and summary quantiles are one series per bound: a sum over bounds is no number.
_BOUND_LABELS = ("le", "quantile")


def labelled(name: str, label: str, value: str) -> str:
    """The key of one label value's series of a sample kept apart by that label, written as
    Prometheus selects it: 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"}'."""
    return f'{name}{{{label}="{value}"}}'


def by_label(values: Mapping[str, float], name: str, label: str) -> dict[str, float]:
    """The series of `name` kept apart by `label`, from parsed values: {label value: value}."""
    start = f'{name}{{{label}="'
    return {key[len(start):-2]: value for key, value in values.items() if key.startswith(start)}


def parse_metrics(text: str, names: MetricNames) -> dict[str, float]:
    """The samples `names` reads from a /metrics page. A counter whose family the page declares
    (`# TYPE name counter`) without a sample counts 0: prometheus_client shows a labelled counter
    only from its first increment (SGLang's cached tokens before the first prefix hit)."""
    values = parse_vllm_metrics(text, names.sampled, names.max_over_label_sets, names.kept_apart)
    for name in names.counter_deltas.values():
        if name not in values and f"# TYPE {name} counter" in text:
            values[name] = 0.0
    return values


def parse_vllm_metrics(text: str, names: Collection[str] | None = None,
                       max_over_label_sets: Collection[str] = VLLM_MAX_OVER_LABEL_SETS,
                       kept_apart: Mapping[str, str] | None = None) -> dict[str, float]:
    """Prometheus exposition text -> {sample name: value}, summed over label sets.

    Sample names are the exposed ones (`vllm:prompt_tokens_total`, `..._created`). Histogram
    `_bucket` series are left out (see `_BOUND_LABELS`); `_sum` and `_count` are kept. With `names`,
    only those samples are parsed: vLLM's page is ~600 lines and the library takes ~13 ms for all
    of them, time the load generator's event loop would stall for at every sample. A sample in
    `kept_apart` (name -> label) is summed per value of that label, under `labelled` keys.
    """
    # Imported here so that importing the plugin does not import prometheus_client.
    from prometheus_client.parser import text_string_to_metric_families

    if names is not None:
        text = _only_samples_of(text, names)
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if any(label in sample.labels for label in _BOUND_LABELS):
                continue
            key = sample.name
            apart = kept_apart.get(key) if kept_apart else None
            if apart is not None and apart in sample.labels:
                key = labelled(key, apart, sample.labels[apart])
            seen = values.get(key)
            if seen is None:
                values[key] = sample.value
            elif sample.name in max_over_label_sets:
                values[key] = max(seen, sample.value)
            else:
                values[key] = seen + sample.value
    return values


def _only_samples_of(text: str, names: Collection[str]) -> str:
    """The sample lines of `names` only. Comment lines go too: without `# TYPE` the parser keeps
    each sample under its exposed name, which is the name we look up."""
    kept = [
        line for line in text.splitlines()
        if line and line[0] != "#" and line.split("{", 1)[0].split(" ", 1)[0] in names
    ]
    return "\n".join(kept) + "\n"


class ServerMetricsSampler:
    """Samples a server's `/metrics` for the duration of an `async with` block.

        async with ServerMetricsSampler(base_url) as sampler:
            ...  # the run
        sampler.summary()  # {} when the server had no metrics; sampler.warning says why

    The first sample is taken on entry (the baseline for counter deltas), then one every
    `interval_s` in a background task, and a final one on exit. Pass the run's own
    `httpx.AsyncClient` to share it; by default the sampler opens its own one-connection client,
    so its GETs never take a connection from the load generator's pool; `access` gives it the
    headers (an API key) and TLS trust every request to the server needs (access.py). `names`:
    the server kind's samples (vLLM's by default); None for a kind with none we know: nothing is
    asked, and the summary is empty without a warning (the session says why).
    """

    def __init__(self, base_url: str, http_client: httpx.AsyncClient | None = None,
                 interval_s: float = SAMPLE_INTERVAL_S, *, access: Access | None = None,
                 names: MetricNames | None = VLLM_METRICS) -> None:
        if not (isinstance(interval_s, (int, float)) and interval_s > 0):
            raise ValueError(f"ServerMetricsSampler interval_s must be > 0, got {interval_s!r}")
        self.url = base_url.rstrip("/") + "/metrics"
        self.interval_s = float(interval_s)
        self.access = access or Access()
        self.names = names
        self._http = http_client
        self._owns_http = http_client is None
        self._task: asyncio.Task[None] | None = None
        self._first: dict[str, float] | None = None
        self._last: dict[str, float] = {}
        self._maxima: dict[str, float] = {}
        # The phase histograms at the window's first and last sample (module docstring).
        self._window_start: dict[str, Histogram] | None = None
        self._window_end: dict[str, Histogram] | None = None
        self._samples = 0
        self._failures = 0
        self._error: str | None = None

    async def __aenter__(self) -> "ServerMetricsSampler":
        if self.names is None:
            return self
        if self._owns_http:
            self._http = httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S,
                                           limits=httpx.Limits(max_connections=1),
                                           headers=list(self.access.headers),
                                           verify=self.access.ssl_context())
        # A server that fails the first sample has no metrics to give: poll no further.
        if await self._sample(edge=True):
            self._task = asyncio.create_task(self._poll(), name="llmperf-server-metrics")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool:
        try:
            await self._stop_polling()
            # After Ctrl-C or a cancelled run, stop at once rather than wait on one more GET.
            if self._samples and (exc_type is None or issubclass(exc_type, Exception)):
                await self._sample(edge=True)
        finally:
            if self._owns_http and self._http is not None:
                await self._http.aclose()
                self._http = None
        return False  # the run's own exception, if any, goes on unchanged

    async def _poll(self) -> None:
        # The interval is the gap between samples, not a fixed clock: a slow answer (a busy
        # server) delays the next GET instead of triggering back-to-back catch-up GETs.
        while True:
            await asyncio.sleep(self.interval_s)
            await self._sample()

    async def _stop_polling(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    async def _sample(self, edge: bool = False) -> bool:
        """One GET; True if it gave this kind's metrics. Never raises (except on cancellation).
        At an `edge` of the window (the first sample, the last) the phase histograms are read
        too."""
        try:
            response = await self._http.get(self.url, timeout=SCRAPE_TIMEOUT_S)
            if response.status_code != 200:
                return self._failed(f"HTTP {response.status_code}")
            values = parse_metrics(response.text, self.names)
            histograms = (parse_histograms(response.text, self.names.phases.values())
                          if edge and self.names.phases else None)
        except Exception as exc:  # a scrape must never break the run it observes
            return self._failed(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        # A page of this kind may hold none of our samples yet (SGLang's appear with the first
        # request): it still counts, as its counters start from there.
        if not values and self.names.prefix not in response.text:
            server = self.names.server
            return self._failed(f"no {server} metrics in the response (not a {server} server?)")
        self._record(values)
        if histograms is not None:
            self._window_end = histograms
            if self._window_start is None:
                self._window_start = histograms
        return True

    def _failed(self, reason: str) -> bool:
        self._failures += 1
        self._error = self.access.redact(" ".join(reason.split()))  # the warning is one line
        return False

    def _record(self, values: dict[str, float]) -> None:
        if self._first is None:
            self._first = values
        self._last = values
        self._samples += 1
        for key, name in self.names.gauge_maxima.items():
            if name in values:
                self._maxima[key] = max(self._maxima.get(key, -math.inf), values[name])

    @property
    def samples(self) -> int:
        """Successful samples so far."""
        return self._samples

    @property
    def warning(self) -> str | None:
        """Why the summary is empty or rests on fewer samples than taken; None if none failed."""
        if self._error is None:
            return None
        if self._samples < 2:
            return f"no server metrics: GET {self.url} failed: {self._error}"
        return (f"{self._failures} of {self._failures + self._samples} samples of {self.url} "
                f"failed (last: {self._error}); server metrics use the other {self._samples}")

    def summary(self) -> dict[str, float]:
        """The run's server-side numbers; {} with fewer than two samples (no delta to take).

        A metric this server does not export is NaN; so is the hit rate of a run with no
        prefix-cache queries. Gauge maxima are over the samples: a peak shorter than the
        interval can fall between two of them. Speculative decoding's keys are there only where
        the server exports its counters (`_spec_decode`); the phases' ("queue_s.mean", ...) only
        where its histograms were read at both edges of the window.
        """
        if self._samples < 2 or self._first is None:
            return {}
        first, last = self._first, self._last
        out: dict[str, float] = {key: self._maxima.get(key, math.nan) for key in GAUGE_MAXIMA}
        for key in COUNTER_DELTAS:
            name = self.names.counter_deltas.get(key)
            out[key] = last.get(name, math.nan) - first.get(name, math.nan)
        queries, hits = out["prefix_cache_queries"], out["prefix_cache_hits"]
        out["prefix_cache_hit_rate"] = hits / queries if queries > 0 else math.nan
        out.update(self._spec_decode(first, last))
        if self._window_start is not None and self._window_end is not self._window_start:
            out.update(window_values(self._window_start, self._window_end, self.names.phases))
        out["samples"] = self._samples
        return out

    def _spec_decode(self, first: Mapping[str, float], last: Mapping[str, float]
                     ) -> dict[str, float]:
        """Acceptance over the run (metrics/spec_decode.py); {} for an engine that does not
        draft: it has none of the counters. A series missing from the first sample counts from 0,
        as `vllm bench serve` counts it."""
        spec = self.names.spec_decode
        if spec is None or spec.drafts not in last:
            return {}

        def change(before: Mapping[str, float], after: Mapping[str, float], key: str) -> float:
            return after.get(key, math.nan) - before.get(key, 0.0)

        totals = [change(first, last, name) for name in spec.totals]
        before, after = (by_label(values, spec.accepted_per_position, spec.position_label)
                         for values in (first, last))
        by_position = {position: change(before, after, position) for position in after}
        return spec_decode.acceptance(*totals, by_position)
