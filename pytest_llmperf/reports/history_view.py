"""What `llmperf history` shows of the results store, as data: for each test, each series (same
hardware family, engine spec and workload: history/identity.py) and each gated metric (and the
cost and energy per token, where the latest run measured them), every stored run, the change
points (history/changepoints.py, at the test's tolerance) and the band of its committed
baseline, when there is one. history_table.py prints it, history_page.py draws it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.history.changepoints import Change
from pytest_llmperf.history.series import Series, changed_text, series_of, what_changed
from pytest_llmperf.history.store import HistoryStore, Point
from pytest_llmperf.history.trend import is_worse
from pytest_llmperf.machine.hardware import is_gpu_fingerprint
from pytest_llmperf.metrics import cost, energy
from pytest_llmperf.reports.plotdata import Band, band_of
from pytest_llmperf.verdict import gate, shapes
from pytest_llmperf.verdict.baselines import BaselineError, load_baseline

__all__ = ["DEFAULT_LAST", "ChangeFact", "SeriesView", "change_facts", "hardware_label",
           "views"]

# The runs `llmperf history` reads per test unless told otherwise: a table of them fits a screen
# or two, and the change points of the last 100 runs take milliseconds (docs/history.md).
DEFAULT_LAST = 100


@dataclass(frozen=True)
class SeriesView:
    """One metric of one series: every stored run (`points`, not-points included) and the
    series the change points were found in (`series`: points only)."""

    test_id: str
    metric: str
    points: tuple[Point, ...]
    series: Series
    tolerance: float
    band: Band | None = None
    baseline_file: str = ""

    @property
    def last(self) -> Point:
        return self.points[-1]

    @property
    def hardware(self) -> str:
        return hardware_label(self.last)

    @property
    def engine(self) -> str:
        return self.last.engine_label or "(engine)"

    @property
    def hosts(self) -> list[str]:
        return sorted({point.host for point in self.points if point.host})


@dataclass(frozen=True)
class ChangeFact:
    """A change point as the dashboard and `--json` show it: its first run (`at`), the series'
    run before it, and what else changed between the two (history/series.py's what_changed;
    `clause` is the trend gate's words for it)."""

    number: int  # 1, 2, ... in the view, the label of its marker on the chart
    change: Change
    at: Point
    before: Point
    worse: bool
    what: tuple[str, ...]
    clause: str


def change_facts(view: SeriesView) -> list[ChangeFact]:
    series = view.series
    return [ChangeFact(number, change, series.at(change), series.points[change.index - 1],
                       is_worse(view.metric, change),
                       tuple(what_changed(series.points[change.index - 1], series.at(change))),
                       changed_text(series, change))
            for number, change in enumerate(series.changes, 1)]


def hardware_label(point: Point) -> str:
    """"cpu: AMD EPYC, 2 cores (cpu-1a2b3c4d5e)", "h100: 8x NVIDIA H100 80GB HBM3 (...)"."""
    fp = point.fingerprint
    if not is_gpu_fingerprint(fp):
        model = fp.get("cpu_model") or fp.get("device_name") or "cpu"
        what = f"{model}, {fp.get('cpu_cores')} cores"
    else:
        what = f"{fp.get('device_count')}x {fp.get('device_name')}"
    return f"{fp.get('hardware_class', '?')}: {what} ({point.family})"


def _tolerance(points: Sequence[Point], given: float | None) -> float:
    """--tolerance, else what the test declared in its latest run, else the gate's default."""
    if given is not None:
        return given
    declared = points[-1].gate.get("tolerance")
    return float(declared) if isinstance(declared, (int, float)) else gate.DEFAULT_TOLERANCE


def _gated(points: Sequence[Point]) -> list[str]:
    return list((points[-1].gate or {}).get("metrics") or gate.DEFAULT_GATED)


# Charted beside the gated metrics where the series' latest run measured them: what a token
# costs (a priced run) and the energy it takes (a GPU run with NVML's energy counter).
MEASURED = (cost.PER_OUTPUT, energy.PER_OUTPUT_TOKEN)


def _charted(points: Sequence[Point]) -> list[str]:
    gated = _gated(points)
    return gated + [name for name in MEASURED
                    if name not in gated and name in points[-1].values]


def _band(baseline_dir: Path | None, point: Point, test_id: str, metric: str
          ) -> tuple[Band | None, str]:
    suite = test_id.split("::", 1)[0]
    if baseline_dir is None or not suite or not point.hardware_class:
        return None, ""
    # The runner shape's folder: an engine on 8 GPUs has its tables in "<class>-8gpu".
    folder = shapes.folder(point.hardware_class, shapes.engine_gpus(point.engine))
    path = baseline_dir / folder / f"{Path(suite).stem}.toml"
    if not path.is_file():
        return None, ""
    try:
        baseline = load_baseline(path, point.key)
    except BaselineError:
        return None, ""  # a broken table is the gate's to report, not the dashboard's
    entry = baseline.metrics.get(metric) if baseline else None
    return (band_of(metric, entry, 0.0), str(path)) if entry else (None, "")


def views(store: HistoryStore, test_ids: Sequence[str], *, metrics: Sequence[str] | None = None,
          last: int | None = DEFAULT_LAST, tolerance: float | None = None,
          baseline_dir: Path | None = None) -> list[SeriesView]:
    """Every (test, series, metric) of `test_ids`, newest series last."""
    out = []
    for test_id in test_ids:
        groups: dict[str, list[Point]] = {}
        for point in store.points(test_id, metrics, last=last, also=MEASURED):
            groups.setdefault(point.series, []).append(point)
        for points in sorted(groups.values(), key=lambda p: p[-1].run_id or 0):
            band_tolerance = _tolerance(points, tolerance)
            for metric in metrics or _charted(points):
                band, where = _band(baseline_dir, points[-1], test_id, metric)
                out.append(SeriesView(test_id, metric, tuple(points),
                                      series_of(points, metric, band_tolerance),
                                      band_tolerance, band, where))
    return out
