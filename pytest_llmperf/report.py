"""The end-of-session table: a row per measured test, the key metrics readable at a glance.

Latencies are shown in milliseconds (the unit people quote for TTFT/TPOT), throughput in tok/s.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from pytest_llmperf.result import Result

# (header, metric name, scale, format): one place defines what the summary shows.
COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("ok", "completed", 1, "{:.0f}"),
    ("fail", "failed", 1, "{:.0f}"),
    ("out tok/s", "output_throughput_tok_s", 1, "{:.1f}"),
    ("req/s", "request_throughput_req_s", 1, "{:.2f}"),
    ("TTFT p50", "ttft_s.p50", 1e3, "{:.1f}"),
    ("TTFT p99", "ttft_s.p99", 1e3, "{:.1f}"),
    ("TPOT p50", "tpot_s.p50", 1e3, "{:.2f}"),
    ("ITL p50", "itl_s.p50", 1e3, "{:.2f}"),
    ("E2EL p50", "e2el_s.p50", 1e3, "{:.0f}"),
    ("queue p99", "queue_s.p99", 1e3, "{:.2f}"),
    # Server-side, from vLLM's /metrics during the run (blank for servers without them).
    ("KV max%", "server:kv_cache_usage_max", 100, "{:.0f}"),
    ("hit%", "server:prefix_cache_hit_rate", 100, "{:.0f}"),
)
UNITS_LINE = ("latencies in ms (TTFT time to first token, TPOT time per output token after the "
              "first, ITL token-normalized inter-token latency, E2EL end to end, queue = client "
              "lag); KV max% = peak KV-cache use, hit% = prefix-cache hit rate (server /metrics)")


def _cell(value: float, scale: float, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value * scale)


def _value(result: Result, name: str) -> float | None:
    if name.startswith("server:"):
        return result.server_metrics.get(name.partition(":")[2])
    return result.value(name)


def summary_rows(results: Sequence[Result], verdicts: dict[str, str]) -> list[list[str]]:
    rows = []
    for result in results:
        cells = [result.test_id, result.engine_label, result.workload_label]
        cells += [_cell(_value(result, name), scale, fmt) for _, name, scale, fmt in COLUMNS]
        cells.append(verdicts.get(result.test_id, ""))
        rows.append(cells)
    return rows


def format_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Left-align text columns (the first three), right-align numbers."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [str(c).ljust(w) if i < 3 or i == len(header) - 1 else str(c).rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


HEADER = ["test", "engine", "workload", *(c[0] for c in COLUMNS), "verdict"]
ENGINE = HEADER.index("engine")


def engine_keys(labels: Iterable[str]) -> dict[str, str]:
    """Short names for the engine column, as a full label (every non-default setting) would make
    the table too wide to read: the model's name, numbered (#1, #2, in order of appearance) where
    one model is served with several specs. engine_lines spells each one out under the table."""
    model_of = {label: label.split(" ", 1)[0] for label in labels}  # in order of appearance
    models = Counter(model_of.values())
    numbered: Counter[str] = Counter()
    keys = {}
    for label, model in model_of.items():
        if models[model] == 1:
            keys[label] = model
        else:
            numbered[model] += 1
            keys[label] = f"{model}#{numbered[model]}"
    return keys


def table_lines(rows: list[list[str]]) -> list[str]:
    """The table for rows from summary_rows (possibly from several pytest-xdist workers), engines
    by their short keys."""
    if not rows:
        return []
    keys = engine_keys(row[ENGINE] for row in rows)
    keyed = [[*row[:ENGINE], keys[row[ENGINE]], *row[ENGINE + 1:]] for row in rows]
    return format_table(HEADER, keyed) + [UNITS_LINE]


def engine_lines(rows: list[list[str]], starts: Iterable[tuple[str, float]] = ()) -> list[str]:
    """The legend of the engine column, with each engine's start time where this session started
    it (`starts`: label and seconds to healthy, from every worker), then engines that started but
    measured nothing."""
    seconds: dict[str, list[float]] = {}
    for label, took in starts:
        seconds.setdefault(label, []).append(took)

    def healthy(label: str) -> str:
        took = seconds.pop(label, [])  # popped: what is left started but measured nothing
        return "healthy after " + ", ".join(f"{s:.1f} s" for s in took) if took else ""

    lines = []
    for label, key in engine_keys(row[ENGINE] for row in rows).items():
        lines.append(f"engine {key} = {label}" + (f"; {h}" if (h := healthy(label)) else ""))
    lines += [f"engine {label}: {healthy(label)}" for label in list(seconds)]
    return lines


def summary_lines(results: Sequence[Result], verdicts: dict[str, str] | None = None) -> list[str]:
    """The table and its engine legend; `verdicts` maps a test id to its gate verdict (e.g.
    "pass", "REGRESSION")."""
    rows = summary_rows(results, verdicts or {})
    return table_lines(rows) + engine_lines(rows)


def extra_lines(extras, verdicts: dict[str, str]) -> list[str]:
    """Gated metrics that are not a run's (SLO capacity, offline throughput): one line each."""
    lines = []
    for test_id, estimates, detail in extras:
        values = ", ".join(f"{name} = {est.value:,.2f}" for name, est in estimates.items())
        verdict = verdicts.get(test_id, "")
        lines.append(f"{test_id}: {values} ({detail})" + (f"  {verdict}" if verdict else ""))
    return lines
