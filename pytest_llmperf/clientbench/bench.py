"""`llmperf bench-client`: the client measured against a server whose timing is known.

For each load it runs our client and, when vLLM is installed, `vllm bench serve` against the same
mock server (mockserver.py) one after the other, and prints per client: achieved output tok/s and
token chunks/s, the server's own emitted chunks/s (so a server that fell behind shows), the
client's CPU microseconds per chunk, TTFT p50 and TPOT p50 beside the server's true values, ICL p99
and our self-check's verdict.

CPU per chunk is read the same way for both clients, from outside: the CPU time of the client's
processes (from /proc) over the steady part of the run, the stretch in which the server emitted
the middle 80% of its chunks, divided by the chunks emitted in it. Start-up, imports and the
drain at the end are not in it.

On a machine with two or more cores the server is pinned to the last core and the clients to the
others, so the two never fight over one core.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_llmperf.client.measure import Endpoint, LoadPlan
from pytest_llmperf.client.patterns import Concurrency, LoadPattern, Rate
from pytest_llmperf.client.readers import reader_kind
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.client.workers import measure_in_workers
from pytest_llmperf.clientbench.mockprocess import BenchError, MockProcess
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.records import Request

__all__ = ["BenchConfig", "Load", "main_bench", "make_loads"]

PROMPT_TOKENS = 32
STEADY = (0.1, 0.9)  # the share of the server's chunks that bounds the steady window
SAMPLE_S = 0.05
VLLM_TIMEOUT_S = 600
@dataclass(frozen=True)
class Load:
    label: str
    pattern: LoadPattern
    requests: int


def make_loads(streams: list[int], rates: list[int] | None, output_tokens: int,
               interval_s: float) -> list[Load]:
    """Closed loops (four rounds of requests each) and open-loop Poisson rates (six seconds of
    arrivals each); by default the rates that keep about 128 and 512 streams open."""
    loads = [Load(f"{c} streams", Concurrency(max_concurrency=c), max(256, 4 * c))
             for c in streams]
    request_s = output_tokens * interval_s
    for rate in rates or [round(n / request_s) for n in (128, 512)]:
        loads.append(Load(f"{rate} req/s", Rate(requests_per_s=rate), int(rate * 6)))
    return loads


@dataclass
class Row:
    client: str
    out_tok_s: float
    chunks_s: float
    server_chunks_s: float
    cpu_us_per_chunk: float
    ttft_p50_ms: float
    tpot_p50_ms: float
    icl_p99_ms: float
    true_ttft_p50_ms: float
    true_tpot_p50_ms: float
    server_cpu_pct: float  # of one core, over the steady window: near 100 the server is the limit
    verdict: str = ""


# ---------------------------------------------------------------- the server and its watcher


def _cpu_s(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited: its CPU up to the last sample is already counted
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


class CpuWatch:
    """Samples (time, client CPU s, each server process's CPU s, server chunks) in a thread
    until stopped."""

    def __init__(self, server: MockProcess) -> None:
        self.server = server
        self.pids: list[int] = []
        self.samples: list[tuple[float, float, tuple[float, ...], int]] = []
        self._stop = threading.Event()
        self._last_cpu = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "CpuWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            if self.pids:
                # An exited worker's CPU is gone from /proc: never let the total go backwards.
                self._last_cpu = max(self._last_cpu, _cpu_s(self.pids))
            server_cpu = tuple(_cpu_s([pid]) for pid in self.server.pids)
            self.samples.append((time.perf_counter(), self._last_cpu, server_cpu,
                                 self.server.chunks()))

    def _steady(self) -> tuple[tuple, tuple] | None:
        """The first and last samples of the steady window, or None if it is too short."""
        if len(self.samples) < 3:
            return None
        total = self.samples[-1][3] - self.samples[0][3]
        lo = self.samples[0][3] + STEADY[0] * total
        hi = self.samples[0][3] + STEADY[1] * total
        inside = [s for s in self.samples if lo <= s[3] <= hi]
        if len(inside) < 2 or inside[-1][3] == inside[0][3] or inside[-1][0] == inside[0][0]:
            return None
        return inside[0], inside[-1]

    def cpu_us_per_chunk(self) -> float:
        steady = self._steady()
        if steady is None:
            return math.nan
        first, last = steady
        return (last[1] - first[1]) / (last[3] - first[3]) * 1e6

    def server_cpu_pct(self) -> float:
        """The busiest server process's share of its core: near 100, the server is the limit."""
        steady = self._steady()
        if steady is None:
            return math.nan
        first, last = steady
        return max(b - a for a, b in zip(first[2], last[2])) / (last[0] - first[0]) * 100


# ---------------------------------------------------------------- the two clients


def run_ours(server: MockProcess, load: Load, output_tokens: int, workers: int,
             api: str) -> Row:
    from pytest_llmperf.client.openai import ClientOptions

    # Chat takes text; completions take token ids, as the plugin sends them.
    prompt = "x " * PROMPT_TOKENS if api == "chat" else tuple(range(100, 100 + PROMPT_TOKENS))
    requests = [Request(prompt, PROMPT_TOKENS, output_tokens)] * load.requests
    endpoint = Endpoint(server.url, "mock", ClientOptions(api=api))
    server.reset()
    with CpuWatch(server) as watch:
        measured = measure_in_workers(endpoint, LoadPlan(requests, load.pattern),
                                      workers=workers, on_started=watch.pids.extend)
    metrics = compute_metrics(measured.records)
    truth = server.truth()
    check = check_client(metrics, measured.client, load.pattern)
    return Row(
        client=f"ours x{measured.client.workers}",
        out_tok_s=metrics.output_throughput_tok_s,
        chunks_s=measured.client.chunks / max(metrics.duration_s, 1e-9),
        server_chunks_s=truth["chunks_per_s"],
        cpu_us_per_chunk=watch.cpu_us_per_chunk(),
        ttft_p50_ms=metrics.ttft_s.p50 * 1e3, tpot_p50_ms=metrics.tpot_s.p50 * 1e3,
        icl_p99_ms=metrics.icl_s.p99 * 1e3,
        true_ttft_p50_ms=truth["ttft_s_p50"] * 1e3, true_tpot_p50_ms=truth["tpot_s_p50"] * 1e3,
        server_cpu_pct=watch.server_cpu_pct(), verdict=check.summary(),
    )


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def run_vllm(server: MockProcess, load: Load, output_tokens: int, tokenizer: str,
             cpus: set[int] | None) -> Row:
    """`vllm bench serve` against the same server: aiohttp, one process."""
    pattern = load.pattern
    rate = str(pattern.requests_per_s) if pattern.open_loop else "inf"
    with tempfile.TemporaryDirectory() as tmp:
        args = [sys.executable, "-m", "pytest_llmperf.clientbench.vllm_cli", "bench", "serve",
                "--backend", "vllm", "--base-url", server.url, "--model", "mock",
                "--tokenizer", tokenizer,
                "--dataset-name", "random", "--random-input-len", str(PROMPT_TOKENS),
                "--random-output-len", str(output_tokens), "--num-prompts", str(load.requests),
                "--request-rate", rate, "--ignore-eos", "--disable-tqdm", "--seed", "0",
                "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
                "--save-result", "--result-dir", tmp, "--result-filename", "r.json"]
        if not pattern.open_loop:
            args += ["--max-concurrency", str(pattern.max_concurrency)]
        server.reset()
        with CpuWatch(server) as watch:
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, preexec_fn=_pin(cpus))
            watch.pids.append(proc.pid)
            out = _finish(proc)
        if proc.returncode != 0:
            tail = " | ".join(out.strip().splitlines()[-3:])
            raise BenchError(f"vllm bench serve exited {proc.returncode}", tail)
        result = json.loads(Path(tmp, "r.json").read_text())
    truth = server.truth()
    return Row(
        client="vllm bench",
        out_tok_s=result["output_throughput"],
        chunks_s=result["output_throughput"],  # one token per chunk from this server
        server_chunks_s=truth["chunks_per_s"],
        cpu_us_per_chunk=watch.cpu_us_per_chunk(),
        ttft_p50_ms=result["median_ttft_ms"], tpot_p50_ms=result["median_tpot_ms"],
        icl_p99_ms=result["p99_itl_ms"],
        true_ttft_p50_ms=truth["ttft_s_p50"] * 1e3, true_tpot_p50_ms=truth["tpot_s_p50"] * 1e3,
        server_cpu_pct=watch.server_cpu_pct(), verdict="-",
    )


def _finish(proc: subprocess.Popen) -> str:
    """Its output once it ended; a BenchError, with it killed, if it runs past VLLM_TIMEOUT_S."""
    try:
        return proc.communicate(timeout=VLLM_TIMEOUT_S)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise BenchError("vllm bench serve",
                         f"still running after {VLLM_TIMEOUT_S} s; killed it") from None


def _pin(cpus: set[int] | None):
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


# ---------------------------------------------------------------- the table

COLUMNS = ("load", "client", "out tok/s", "chunks/s", "server chunks/s", "server CPU",
           "CPU us/chunk", "TTFT p50 (true)", "TPOT p50 (true)", "ICL p99", "self-check")


def format_row(load: str, row: Row) -> list[str]:
    return [load, row.client, f"{row.out_tok_s:,.0f}", f"{row.chunks_s:,.0f}",
            f"{row.server_chunks_s:,.0f}", f"{row.server_cpu_pct:.0f}%",
            f"{row.cpu_us_per_chunk:.1f}",
            f"{row.ttft_p50_ms:.2f} ({row.true_ttft_p50_ms:.2f})",
            f"{row.tpot_p50_ms:.2f} ({row.true_tpot_p50_ms:.2f})", f"{row.icl_p99_ms:.1f}",
            row.verdict]


def render(table: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = []
    for n, r in enumerate(table):
        lines.append("  ".join(c.ljust(w) if i in (0, 1, len(COLUMNS) - 1) else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


@dataclass
class BenchConfig:
    interval_ms: float = 10.0
    output_tokens: int = 128
    workers: int = 1
    api: str = "completions"
    loads: list[Load] = field(default_factory=list)
    with_vllm: bool = True
    tokenizer: str = "suites/models/tiny-llama"
    json_path: Path | None = None
    server_procs: int = 1


def split_cores(cores: list[int], server_procs: int) -> tuple[list[int] | None, list[int]]:
    """The server's processes on the last cores, one each, and the clients on the rest; on a
    machine with too few cores for that, nothing is pinned."""
    if len(cores) <= server_procs:
        return None, cores
    return cores[-server_procs:], cores[:-server_procs]


def main_bench(config: BenchConfig, out=sys.stdout) -> int:
    cores = sorted(os.sched_getaffinity(0))
    server_cpus, client_cores = split_cores(cores, config.server_procs)
    client_cpus = set(client_cores) if server_cpus else None
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)  # inherited by our workers and by vllm bench
    loads = config.loads or make_loads([64, 256, 512, 1024], None, config.output_tokens,
                                       config.interval_ms / 1e3)
    with_vllm = config.with_vllm and vllm_available()
    print(f"mock server: one chunk per stream every {config.interval_ms:g} ms, "
          f"{PROMPT_TOKENS} tokens in, {config.output_tokens} out, {config.api}; "
          f"server on cores {server_cpus or cores} ({config.server_procs} process"
          f"{'es' if config.server_procs > 1 else ''}), clients on {client_cores}; "
          f"our socket reader: {reader_kind()}"
          + ("" if with_vllm else "; no vllm bench rows (vLLM not installed, or turned off)"),
          file=out)
    table, rows = [list(COLUMNS)], []
    try:
        failure = _measure_all(config, loads, with_vllm, server_cpus, client_cpus, table, rows)
    finally:  # whatever stopped the run, the rows measured before it are kept
        print(render(table), file=out, flush=True)
        if config.json_path:
            config.json_path.write_text(json.dumps(rows, indent=1))
    if failure:
        print(f"llmperf bench-client: {failure}", file=sys.stderr, flush=True)
        return 1
    return 0


def _measure_all(config: BenchConfig, loads: list[Load], with_vllm: bool,
                 server_cpus: list[int] | None, client_cpus: set[int] | None,
                 table: list[list[str]], rows: list[dict]) -> str | None:
    """Measure the loads in turn, adding to `table` and `rows` as each client's row comes; what
    stopped it early, in one line (a BenchError's), or None. The server is gone on return."""
    try:
        server = MockProcess(config.interval_ms / 1e3, server_cpus, config.server_procs)
    except BenchError as exc:
        return exc.line("start-up")
    try:
        for load in loads:
            try:
                _measure_load(server, load, config, with_vllm, client_cpus, table, rows)
            except BenchError as exc:
                return exc.line(load.label)
            print(f"measured {load.label}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    return None


def _measure_load(server: MockProcess, load: Load, config: BenchConfig, with_vllm: bool,
                  client_cpus: set[int] | None, table: list[list[str]], rows: list[dict]) -> None:
    ours = run_ours(server, load, config.output_tokens, config.workers, config.api)
    table.append(format_row(load.label, ours))
    rows.append({"load": load.label, **ours.__dict__})
    if with_vllm and config.api == "completions":
        theirs = run_vllm(server, load, config.output_tokens, config.tokenizer, client_cpus)
        table.append(format_row("", theirs))
        ratio = ours.out_tok_s / theirs.out_tok_s
        cpu = theirs.cpu_us_per_chunk / ours.cpu_us_per_chunk
        table.append(["", "ratio", f"{ratio:.2f}x", "", "", "", f"{cpu:.2f}x less", "",
                      "", "", ""])
        rows.append({"load": load.label, **theirs.__dict__})
