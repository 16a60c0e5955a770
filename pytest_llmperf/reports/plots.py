"""The report's pictures as PNGs, drawn with matplotlib (the optional `plots` extra) from what
plotdata.py reads out of run files: `llmperf plot RUN.json ... -o DIR` writes them, and the HTML
report (html.py) inlines them.

Figures are drawn on matplotlib's Agg canvas directly, never through pyplot: no display, no
global figure state, nothing left open between pictures (docs/reports.md, Plots).
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.errors import LlmperfError
from pytest_llmperf.ids import without_side
from pytest_llmperf.metrics.phases import Split
from pytest_llmperf.reports import plotdata
from pytest_llmperf.reports.plotdata import LATENCY_NAMES, PlotData

MISSING = "plots need matplotlib: pip install 'pytest-llmperf[plots]'"
DPI = 100
PASS_COLOR, FAIL_COLOR, BAND_COLOR = "tab:green", "tab:red", "tab:green"


class PlotsUnavailable(LlmperfError):
    """matplotlib is not installed; the message says which extra installs it."""


@dataclass(frozen=True)
class Picture:
    name: str  # the PNG's file name
    title: str  # what it shows, for a caption
    png: bytes


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _new_figure(width: float, height: float, columns: int = 1, rows: int = 1):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotsUnavailable(MISSING) from None
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns, squeeze=False)
    return figure, [ax for row in axes for ax in row]


def _title(figure, text: str) -> None:
    """The figure's title, wrapped onto as many lines as its width needs: matplotlib cuts a
    title wider than the figure at both edges (an engine's full spec often is)."""
    title = figure.suptitle(text)
    room = figure.get_figwidth() * DPI * 0.96
    width = title.get_window_extent(figure.canvas.get_renderer()).width
    if width <= room:
        return
    chars = max(20, int(len(text) * room / width))
    title.set_text(textwrap.fill(text, chars, break_on_hyphens=False))


def _png(figure) -> bytes:
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=DPI)
    return out.getvalue()


def slug(text: str) -> str:
    """A file name's part from a test id: "suites/test_cpu.py::test_x[a]" -> "test_cpu-test_x-a"."""
    text = re.sub(r"^.*/", "", text).replace(".py::", "-")
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-") or "run"


def _ms(seconds: float) -> float:
    return seconds * 1e3


def _scale(metric: str) -> tuple[float, str]:
    """Seconds are drawn in ms; a throughput (`_tok_s`, `_req_s`) is per second, not seconds."""
    base = metric.split(".")[0]
    if base.endswith("_s") and not base.endswith(("_tok_s", "_req_s")):
        return 1e3, " (ms)"
    return 1.0, ""


def _short(test: str) -> str:
    return test.split("::", 1)[-1]


def _log_if_wide(ax, ratio: float = 20.0) -> None:
    """A log y axis when the values span more than `ratio`: past the knee a latency grows by
    orders of magnitude, and a linear axis then flattens every point before it."""
    low, high = ax.dataLim.y0, ax.dataLim.y1
    if low > 0 and high / low > ratio:
        ax.set_yscale("log")
        _plain_numbers(ax.yaxis)


def _plain_numbers(axis) -> None:
    """Log-axis ticks at 1, 2 and 5 of each decade, written 20 and 500 rather than 10^1."""
    from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(StrMethodFormatter("{x:g}"))
    axis.set_minor_formatter(NullFormatter())


# ---------------------------------------------------------------- pictures


def sweep_picture(sweep: plotdata.Sweep) -> Picture:
    """Output throughput against TTFT and TPOT (p50 solid, p99 dashed), a line per engine, each
    point labelled with its load: the Lambda-style throughput-versus-latency curve."""
    figure, axes = _new_figure(11, 4.2, columns=2)
    for ax, latency in zip(axes, ("ttft_s", "tpot_s")):
        for index, (engine, points) in enumerate(sweep.lines.items()):
            color = f"C{index}"
            xs = [p.throughput for p in points]
            for stat, style in (("p50", "-o"), ("p99", "--x")):
                ys = [_ms(p.latencies[f"{latency}.{stat}"]) for p in points]
                label = f"{engine} {stat}" if len(sweep.lines) > 1 else stat
                ax.plot(xs, ys, style, color=color, label=label, alpha=1 if stat == "p50" else .6)
            for point in points:
                ax.annotate(point.label, (point.throughput,
                                          _ms(point.latencies[f"{latency}.p50"])),
                            textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_xlabel("output throughput (tok/s)")
        ax.set_ylabel(f"{LATENCY_NAMES[latency]} (ms)")
        ax.margins(x=0.1)  # room for the last point's label
        _log_if_wide(ax)
        ax.grid(alpha=.3, which="both")
        ax.legend(fontsize=8)
    engines = f" ({next(iter(sweep.lines))})" if len(sweep.lines) == 1 else ""
    _title(figure, f"{_short(sweep.test)}: throughput vs latency{engines}")
    return Picture(f"sweep-{slug(sweep.test)}.png",
                   f"{sweep.test}: output throughput against TTFT and TPOT, a point per load",
                   _png(figure))


def capacity_picture(search: plotdata.CapacitySearch) -> Picture:
    """Each probe's value of each SLO metric at its load (a rate, or a trace replay's speedup),
    passed (o) or failed (x), numbered in the order the search ran them, against the SLO's
    limit; the capacity found as a line."""
    names = search.metrics or ["ttft_s.p90"]
    figure, axes = _new_figure(5.2 * len(names), 4.2, columns=len(names))
    for ax, name in zip(axes, names):
        scale, unit = _scale(name)
        for order, probe in enumerate(search.probes, 1):
            value = probe.values.get(name, math.nan) * scale
            ax.plot(probe.load, value, "o" if probe.passed else "X", markersize=8,
                    color=PASS_COLOR if probe.passed else FAIL_COLOR)
            ax.annotate(str(order), (probe.load, value), textcoords="offset points",
                        xytext=(5, 5), fontsize=8)
        for bound, word in ((search.slo_max.get(name), "max"), (search.slo_min.get(name), "min")):
            if bound is not None:
                ax.axhline(bound * scale, color=FAIL_COLOR, linestyle="--",
                           label=f"SLO {word} {bound * scale:g}{unit.strip(' ()')}")
        if search.capacity is not None:
            ax.axvline(search.capacity, color=PASS_COLOR, linestyle=":",
                       label=f"capacity {plotdata.load_label(search.capacity, search.kind)}")
        ax.set_xscale("log", base=2)  # the search doubles, then bisects in log space
        ax.xaxis.set_major_formatter("{x:g}")
        ax.set_xlabel("trace speedup (x its recorded pace), probes numbered in order"
                      if search.kind == "speedup" else
                      "offered rate (req/s), probes numbered in order")
        ax.set_ylabel(name + unit)
        _log_if_wide(ax)
        ax.grid(alpha=.3, which="both")
        ax.legend(fontsize=8)
    _title(figure, f"{_short(search.test)}: capacity search (o met the SLO, x missed)")
    return Picture(f"capacity-{slug(search.test)}.png",
                   f"{search.test}: the capacity search's probes against the SLO", _png(figure))


def turns_picture(found: plotdata.TurnLatencies) -> Picture:
    """A conversation run's TTFT at each turn index, p50 solid and p90 dashed; each turn's tick
    says how long its prompts were (turn t carries the t - 1 turns before it)."""
    figure, (ax,) = _new_figure(7, 4.2)
    ax.plot(found.turns, [_ms(v) for v in found.ttft_p50], "-o", color="C0", label="p50")
    ax.plot(found.turns, [_ms(v) for v in found.ttft_p90], "--x", color="C0", alpha=.6,
            label="p90")
    ax.set_xticks(found.turns, [f"{turn}\n{tokens:.0f} tok" if math.isfinite(tokens)
                                else str(turn)
                                for turn, tokens in zip(found.turns, found.prompt_tokens)],
                  fontsize=8)
    ax.set_xlabel("turn (and its mean prompt length)")
    ax.set_ylabel("TTFT (ms)")
    ax.set_ylim(bottom=0)  # turn against turn: a bar from zero reads as the ratio it is
    ax.grid(alpha=.3)
    ax.legend(fontsize=8)
    requests = f", {found.requests[0]} per turn" if len(set(found.requests)) == 1 else ""
    _title(figure, f"{_short(found.test)}: TTFT by turn ({found.engine}{requests})")
    return Picture(f"turns-{slug(found.test)}.png",
                   f"{found.test}: TTFT p50 and p90 at each conversation turn", _png(figure))


def rate_picture(found: plotdata.RateTimeline) -> Picture:
    """A trace replay's requests per second over the run: offered (due by the trace's schedule,
    shaded) and achieved (finished), per bin; where achieved stays under offered, the engine
    fell behind the trace."""
    figure, (ax,) = _new_figure(11, 3.8)
    edges = found.edges
    ax.stairs(found.offered_req_s, edges, fill=True, color="C0", alpha=.25,
              label="offered (due by the trace)")
    ax.stairs(found.offered_req_s, edges, color="C0", linewidth=1)
    ax.stairs(found.achieved_req_s, edges, color="C1", linewidth=2, label="achieved (finished)")
    ax.set_xlim(0, edges[-1])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since the first request was due")
    ax.set_ylabel(f"requests/s (bins of {found.bin_s:g} s)")
    ax.grid(alpha=.3)
    # How far behind the trace the engine is at each bin's end: due so far minus finished.
    behind = ax.twinx()
    behind.plot(edges, [0.0, *found.behind], ":", color="grey", label="due, not yet finished")
    behind.set_ylim(bottom=0)
    behind.set_ylabel("requests due, not yet finished", color="grey")
    lines = ax.get_legend_handles_labels()
    more = behind.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="upper right")
    offered = sum(found.offered_req_s) * found.bin_s
    achieved = sum(found.achieved_req_s) * found.bin_s
    _title(figure, f"{_short(found.test)}: offered vs achieved request rate ({found.engine}; "
                   f"{achieved:.0f} of {offered:.0f} requests finished)")
    return Picture(f"rate-{slug(found.test)}.png",
                   f"{found.test}: the trace's offered request rate against the achieved one, "
                   "per time bin", _png(figure))


def distribution_picture(latency: str, found: Sequence[plotdata.Distribution]) -> Picture:
    """One box per test over the requests of its representative run: quartiles, median, and
    whiskers from the fastest to the slowest request; a log axis, as tests differ by orders of
    magnitude."""
    figure, (ax,) = _new_figure(11, 1.2 + 0.32 * len(found))
    stats = [{"label": f"{_short(d.test)} (n={d.n})", "whislo": _ms(d.minimum),
              "q1": _ms(d.q1), "med": _ms(d.median), "q3": _ms(d.q3),
              "whishi": _ms(d.maximum), "fliers": []} for d in found]
    ax.bxp(stats, orientation="horizontal", widths=0.6, showfliers=False)
    ax.invert_yaxis()  # the file's first test on top, as in the table
    ax.set_xscale("log")
    _plain_numbers(ax.xaxis)
    # A zero (two tokens in one chunk: an ITL of 0) has no place on a log axis; its whisker
    # runs to the left edge, set by the smallest positive value.
    positive = [v for d in found for v in (d.minimum, d.q1, d.median) if v > 0]
    if positive:
        ax.set_xlim(left=_ms(min(positive)) / 1.5)
    ax.set_xlabel(f"{LATENCY_NAMES[latency]} (ms), log scale: box = quartiles and median, "
                  "whiskers = fastest and slowest request")
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="x", alpha=.3, which="both")
    _title(figure, f"{LATENCY_NAMES[latency]} per test (the requests of each test's "
                   "representative run)")
    return Picture(f"latency-{latency.removesuffix('_s')}.png",
                   f"{LATENCY_NAMES[latency]} distribution of each test's requests", _png(figure))


def ab_picture(found: Sequence[plotdata.AbMetric]) -> Picture:
    """A row per A/B test and metric: each pair's B/A ratio (dots), their median (diamond) with
    its interval (bar), 1 (no change) and the worst ratio the tolerance allows (red tick)."""
    figure, (ax,) = _new_figure(11, 1.4 + 0.45 * len(found))
    for row, item in enumerate(found):
        color = FAIL_COLOR if item.status == "regression" else "C0"
        ax.plot(item.ratios, [row] * len(item.ratios), "o", color=color, alpha=.45)
        low, high = item.interval
        if math.isfinite(low) and math.isfinite(high):
            ax.plot([low, high], [row, row], "-", color=color, linewidth=4, alpha=.6)
        ax.plot(item.median, row, "D", color=color, markersize=8)
        if math.isfinite(item.worst_allowed):
            ax.plot(item.worst_allowed, row, "|", color=FAIL_COLOR, markersize=22, mew=2)
    ax.axvline(1.0, color="grey", linewidth=1)
    ax.set_yticks(range(len(found)), [f"{without_side(_short(item.test))}: "
                                      f"{item.metric}" for item in found], fontsize=8)
    ax.invert_yaxis()
    ax.margins(y=0.15)
    # (A NaN worst_allowed is not > 0.)
    ratios = [r for item in found for r in (*item.ratios, item.worst_allowed) if r > 0]
    if ratios and max(ratios) / min(ratios) > 4:  # e.g. batching: 8x the throughput
        ax.set_xscale("log")
        _plain_numbers(ax.xaxis)
    ax.set_xlabel("B / A: dots = pairs, diamond = median, bar = its interval, "
                  "red tick = worst allowed", fontsize=9)
    ax.grid(axis="x", alpha=.3, which="both")
    _title(figure, "A/B: paired ratios against the tolerance (red: regression)")
    return Picture("ab-ratios.png", "A/B: each pair's B/A ratio, the median and its interval, "
                   "against the worst ratio the tolerance allows", _png(figure))


def history_picture(test: str, series: Sequence[plotdata.History]) -> Picture:
    """A panel per gated metric of one test: its value in each run (oldest left, error bar = the
    run's spread) inside the band its baseline allows (shaded, baseline dashed)."""
    figure, axes = _new_figure(4.2 * len(series), 3.8, columns=len(series))
    for ax, item in zip(axes, series):
        scale, unit = _scale(item.metric)
        xs = range(len(item.points))
        ys = [p.value * scale for p in item.points]
        ax.errorbar(xs, ys, yerr=[p.spread * scale for p in item.points], fmt="-o", color="C0",
                    capsize=3)
        if item.band is not None:
            # Noise can widen the band below zero, where no latency or throughput goes.
            ax.axhspan(max(item.band.low, 0.0) * scale, item.band.high * scale, color=BAND_COLOR,
                       alpha=.15, label="baseline band")
            ax.axhline(item.band.baseline * scale, color=BAND_COLOR, linestyle="--",
                       label="baseline")
            outside = [(x, y) for x, y in zip(xs, ys)
                       if not item.band.low * scale <= y <= item.band.high * scale]
            if outside:  # past the band: a regression, or an improvement the baseline missed
                ax.plot(*zip(*outside), "o", color=FAIL_COLOR, label="outside the band",
                        zorder=3)  # over the line's own markers
            ax.legend(fontsize=7)
        ax.set_xticks(list(xs), [p.started[5:16].replace("T", " ") for p in item.points],
                      rotation=45, ha="right", fontsize=7)
        ax.set_title(item.metric + unit, fontsize=9)
        ax.grid(alpha=.3)
    _title(figure, f"{_short(test)} over {len(series[0].points)} runs")
    return Picture(f"history-{slug(test)}.png",
                   f"{test}: each gated metric per run, with its baseline's band", _png(figure))


# A phase keeps its colour from test to test: the engine's phases in blues and greens, the part
# outside the engine in orange.
PHASE_COLORS = {"queue": "tab:red", "prefill": "tab:blue", "decode": "tab:cyan",
                "hand-off": "tab:gray", "server": "tab:blue", "frontend and wire": "tab:orange"}


def phases_picture(found: Sequence[tuple[str, Split]]) -> Picture:
    """A bar per test: its mean TTFT as 100%, stacked by where the time went (metrics/phases.py),
    the engine's phases first, frontend and wire last, the TTFT in ms at its end. Shares, not ms:
    tests differ by orders of magnitude, and a shared ms axis flattens the fast ones. A negative
    part (a client faster than the engine's own clock, within noise) is drawn as nothing."""
    figure, (ax,) = _new_figure(11, 1.6 + 0.42 * len(found))
    shown: set[str] = set()
    for row, (test, split) in enumerate(found):
        widths = [(label, max(seconds, 0.0)) for label, seconds in split.parts]
        whole = sum(width for _, width in widths) or 1.0
        left = 0.0
        for label, width in widths:
            share = 100 * width / whole
            ax.barh(row, share, left=left, color=PHASE_COLORS.get(label, "C7"),
                    label=None if label in shown else label)
            shown.add(label)
            left += share
        ax.annotate(f"{_ms(split.total):,.1f} ms", (100, row), textcoords="offset points",
                    xytext=(4, -3), fontsize=8)
    ax.set_yticks(range(len(found)), [_short(test) for test, _ in found], fontsize=8)
    ax.invert_yaxis()  # the first test on top, as in the table
    ax.set_xlim(0, 112)  # room for the TTFT at each bar's end
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("share of the mean TTFT (%): the engine's queue, prefill and hand-off, then "
                  "the API server, the network and the client")
    ax.grid(axis="x", alpha=.3)
    figure.legend(fontsize=8, loc="outside lower center", ncol=len(shown))
    _title(figure, "Where the time to first token went (means; the engine's own timings)")
    return Picture("phases-ttft.png", "each test's mean TTFT split into the engine's phases and "
                   "frontend and wire", _png(figure))


def pictures(data: PlotData) -> list[Picture]:
    """Every picture `data` has something for, in reading order; PlotsUnavailable without
    matplotlib."""
    out = [sweep_picture(sweep) for sweep in data.sweeps]
    out += [capacity_picture(search) for search in data.searches]
    out += [turns_picture(found) for found in data.turns]
    out += [rate_picture(found) for found in data.timelines]
    out += [distribution_picture(name, found) for name, found in data.distributions.items()]
    if data.ab:
        out.append(ab_picture(data.ab))
    by_test: dict[str, list[plotdata.History]] = {}
    for item in data.history:
        by_test.setdefault(item.test, []).append(item)
    out += [history_picture(test, series) for test, series in by_test.items()]
    return out


def write(found: Sequence[Picture], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for picture in found:
        path = directory / picture.name
        path.write_bytes(picture.png)
        paths.append(path)
    return paths
