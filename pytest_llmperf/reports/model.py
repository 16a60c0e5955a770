"""What the end-of-session reports say about each measurement: its row (plain data) and the
columns a row can show. The terminal summary (terminal.py), the Markdown report (markdown.py) and
the JUnit properties (junit.py) all read rows from here, so the three never disagree.

A row is JSON-able on purpose: under pytest-xdist each worker builds its own and sends them to the
controller, which writes the reports (session/outputs.py). Latencies are shown in milliseconds
(the unit people quote for TTFT/TPOT), throughput in tok/s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.client import server_info
from pytest_llmperf.ids import side_of
from pytest_llmperf.metrics import cost, phases, registry
from pytest_llmperf.metrics.derived import Derived, by_test, derive_all
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.numbers import finite_or_none
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.status import Status

# {"test_id", "engine", "workload", "status": a Status' value or "", "values": {key: float|None},
#  "server": which vLLM served it (client/server_info.py), "cost": the engine's share of the
#  price (cost.Share.describe; "" without a price), "gpus": each card's telemetry
#  (GpuTelemetry.to_dict; GPU runs only), "detectable": per gated metric, what its noise lets
#  the gate see (verdict/detectable.of_report; only where something was gated)}
Row = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """A table column: one metric (its header, scale and meaning from metrics/registry.py) and
    how its cells are written."""

    key: str  # a metric name (registry.py)
    fmt: str
    optional: bool = False  # shown only where some row has a value (cost, goodput)
    priority: int | None = None  # its rank in the short table (1 first); None: only with -v

    @property
    def metric(self) -> registry.Metric:
        return registry.known(self.key)

    @property
    def header(self) -> str:
        statistic = self.key.partition(".")[2]
        return f"{self.metric.header} {statistic}" if statistic else self.metric.header

    @property
    def scale(self) -> float:
        return self.metric.scale

    @property
    def meaning(self) -> str:
        return self.metric.meaning

    def cell(self, values: Mapping[str, float | None]) -> str:
        value = values.get(self.key)
        return "-" if value is None else self.fmt.format(value * self.scale)


# Every column, in the order a table shows them: each metric's definition says how a table
# shows it (metrics/metric.py's Column).
COLUMNS: tuple[Column, ...] = tuple(Column(name, column.fmt, column.optional, column.priority)
                                    for name, _, column in registry.columns())
# Measured values a row keeps although no column shows them: the cost is worked out from the
# total throughput, and the -v line of where the time went from the phases (metrics/phases.py).
EXTRA_VALUES = ("total_throughput_tok_s", *phases.REPORT_VALUES)

NOT_JUDGED = "not judged"
_LAST = len(Status)  # the rank of a row that is no problem: after every problem


def status_of(row: Row) -> Status | None:
    return Status(row["status"]) if row["status"] else None


def verdict_text(row: Row) -> str:
    """The verdict column's words for a row ("" for a point that was never judged)."""
    status = status_of(row)
    return status.summary if status else ""


def rank(status: Status | None) -> int:
    """Worst first: the reports put these rows on top so a reader sees them without
    scrolling."""
    return _LAST if status is None or status.severity is None else status.severity


def _value(result: Result, key: str) -> float | None:
    if key.startswith(registry.SERVER_PREFIX):
        return finite_or_none(result.server_metrics.get(key.partition(":")[2]))
    metric = registry.known(key)
    if metric.derive is not None:
        return None  # derived once per result (metrics/derived.py)
    if metric.absent and any(key not in run.flat() for run in result.runs):
        return None  # not in some run (a CPU has no energy counter)
    return finite_or_none(result.value(key))


def summary_rows(records: Sequence[MeasurementRecord],
                 usd_per_hour: cost.Price | float | None = None,
                 root: Path | None = None,
                 derived: Sequence[Derived] | None = None) -> list[Row]:
    """A row per record that measured a run, with its verdict;
    `usd_per_hour` (the price, cost.for_hardware; a bare number is the machine's) adds the cost
    columns, at each engine's share of it; `root` (pytest's rootdir) is where a relative model
    path is, for the roofline. `derived` (one per measured record, metrics/derived.py): the
    per-GPU, cost and roofline numbers where the caller has worked them out already; else they
    are worked out here from `usd_per_hour` and `root`."""
    measured = [record for record in records if record.result is not None]
    results = [record.result for record in measured]
    derived = by_test(derive_all(results, usd_per_hour, root) if derived is None else derived)
    rows = []
    for record in measured:
        result = record.result
        found = derived[result.test_id]
        keys = [column.key for column in COLUMNS] + list(EXTRA_VALUES)
        values = {key: _value(result, key) for key in keys}
        values.update(found.values())
        share = found.share
        rows.append({"test_id": record.test_id, "engine": result.engine_label,
                     "workload": result.workload_label,
                     "status": record.status.value if record.status else "", "values": values,
                     "server": dict(result.server), "cost": share.describe() if share else "",
                     **({"detectable": dict(record.detectable)} if record.detectable else {}),
                     **({"gpus": [card.to_dict() for card in result.gpu_telemetry]}
                        if result.gpu_telemetry else {})})
    return rows


def gpu_lines(rows: Iterable[Row]) -> list[str]:
    """One line per GPU test and card: what the card did over the measured requests
    (machine/gpu_telemetry.py); nothing for a CPU run."""
    return [f"{row['test_id']}: {gpu_text(card)}" for row in rows for card in row.get("gpus", ())]


def gpu_text(card: Mapping[str, Any]) -> str:
    """"GPU 0: SM 1,755 MHz (min 1,515), memory 2,619 MHz, 612 W (max 699), up to 53 C,
    16.0 kJ; clock events: sw power cap 91% of samples; held below application clocks 88% of
    the time" (each part only where the card reported it)."""
    parts = []
    if card.get("sm_clock_mhz_mean") is not None:
        parts.append(f"SM {card['sm_clock_mhz_mean']:,.0f} MHz "
                     f"(min {card['sm_clock_mhz_min']:,.0f})")
    if card.get("memory_clock_mhz_mean") is not None:
        parts.append(f"memory {card['memory_clock_mhz_mean']:,.0f} MHz")
    if card.get("power_w_mean") is not None:
        parts.append(f"{card['power_w_mean']:,.0f} W (max {card['power_w_max']:,.0f})")
    if card.get("temperature_c_max") is not None:
        parts.append(f"up to {card['temperature_c_max']:.0f} C")
    if (joules := card.get("energy_j")) is not None:
        parts.append(f"{joules / 1e3:,.1f} kJ" if joules >= 1e3 else f"{joules:,.0f} J")
    text = f"GPU {card['index']}: " + ", ".join(parts)
    events = [f"{name} {share:.0%}" for name, share in (card.get("reason_shares") or {}).items()]
    if events:
        text += f"; clock events: {', '.join(events)} of samples"
    below = (card.get("violation_shares") or {}).get("below application clocks")
    if below is not None:
        text += f"; held below application clocks {below:.0%} of the time"
    return text


def by_severity(rows: Iterable[Row]) -> list[Row]:
    """Errors, regressions, missed targets and client-limited runs first; otherwise in the order
    they were measured (a stable sort)."""
    return sorted(rows, key=lambda row: rank(status_of(row)))


def shown_columns(rows: Sequence[Row]) -> list[Column]:
    """Every column, less the optional ones no row has a value for (cost without a price,
    goodput without an SLO)."""
    return [column for column in COLUMNS if not column.optional
            or any(row["values"].get(column.key) is not None for row in rows)]


def legend(columns: Iterable[Column]) -> str:
    """One sentence saying what the shown columns mean: the latencies (in ms), then the rest."""
    columns = list(columns)
    latencies = list(dict.fromkeys(c.meaning for c in columns if c.meaning and c.scale == 1e3))
    others = list(dict.fromkeys(c.meaning for c in columns if c.meaning and c.scale != 1e3))
    return "; ".join(["latencies in ms" + (f" ({', '.join(latencies)})" if latencies else ""),
                      *others])


def verdict_counts(rows: Iterable[Row]) -> list[tuple[Status | None, int]]:
    """How many rows got each verdict (None: never judged), worst first, then by count."""
    # Rows without a verdict are sweep and capacity-search points: measured, never judged.
    counts = Counter(status_of(row) for row in rows)
    return sorted(counts.items(), key=lambda item: (rank(item[0]), -item[1], counted(item[0])))


def counted(status: Status | None) -> str:
    """A verdict's words in the counts of a report's headline."""
    return status.summary if status else NOT_JUDGED


def problem(status: Status | None) -> bool:
    """Whether the reports mark this verdict (and list its rows first)."""
    return status is not None and status.severity is not None


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


def engine_lines(rows: Sequence[Row], starts: Iterable[tuple[str, float]] = (),
                 deaths: Iterable[tuple[str, int, bool]] = ()) -> list[str]:
    """The legend of the engine column, with the vLLM each engine ran (server_texts), its share
    of the price where the cost columns show (the rows' "cost"), its start times where this
    session started it (`starts`: label and seconds to healthy, from every worker) and its
    restarts after dying or stalling (`deaths`: label, restarts, given up), then engines that
    started but measured nothing."""
    seconds: dict[str, list[float]] = {}
    for label, took in starts:
        seconds.setdefault(label, []).append(took)
    restarts: dict[str, tuple[int, bool]] = {}
    for label, count, given_up in deaths:
        before, gave_up = restarts.get(label, (0, False))
        restarts[label] = (before + count, gave_up or given_up)

    def healthy(label: str) -> str:
        took = seconds.pop(label, [])  # popped: what is left started but measured nothing
        parts = ["healthy after " + ", ".join(f"{s:.1f} s" for s in took)] if took else []
        count, given_up = restarts.get(label, (0, False))
        parts += [f"restarted {count} time(s) after dying or stalling"] if count else []
        parts += ["then not started again"] if given_up else []
        return "; ".join(parts)

    versions = server_texts(rows)
    costs = {row["engine"]: row["cost"] for row in rows if row.get("cost")}
    lines = []
    for label, key in engine_keys(row["engine"] for row in rows).items():
        parts = [part for part in (versions.get(label), costs.get(label), healthy(label)) if part]
        lines.append(f"engine {key} = {label}" + "".join(f"; {part}" for part in parts))
    lines += [f"engine {label}: {healthy(label)}" for label in list(seconds)]
    return lines


def server_texts(rows: Iterable[Row]) -> dict[str, str]:
    """Per engine label, which vLLM served it ("vLLM 0.32.0"), by side where the two sides of an
    A/B ran different ones under one label (only `python` differs, and the label leaves it out):
    "A: vLLM 0.32.0 / B: vLLM 0.31.0"."""
    sides: dict[str, dict[str | None, Mapping[str, str]]] = {}
    for row in rows:
        if row.get("server"):
            sides.setdefault(row["engine"], {}).setdefault(side_of(row["test_id"]), row["server"])
    texts = {}
    for label, found in sides.items():
        by_side = "A" in found and "B" in found and server_info.sides_text(found["A"], found["B"])
        texts[label] = by_side or next(filter(None, map(server_info.describe, found.values())), "")
    return texts


def extra_lines(records: Iterable[MeasurementRecord]) -> list[str]:
    """Gated metrics that are not a run's (SLO capacity, offline throughput): one line each."""
    lines = []
    for record in records:
        if record.extras is None:
            continue
        values = ", ".join(f"{name} = {est.value:,.2f}"
                           for name, est in record.extras.estimates.items())
        verdict = record.status.summary if record.status else ""
        lines.append(f"{record.test_id}: {values} ({record.extras.detail})"
                     + (f"  {verdict}" if verdict else ""))
    return lines
