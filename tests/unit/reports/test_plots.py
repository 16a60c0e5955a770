"""`llmperf plot`: which PNGs a run file gives, and the one line without matplotlib. (What the
pictures hold is tested in test_plotdata.py; how they read was checked by eye, docs/reports.md.)"""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.cli import main
from pytest_llmperf.reports import plots
from pytest_llmperf.reports.plotdata import gather
from tests.unit.reports.plot_documents import FILE, RATE, document, result

PNG = b"\x89PNG\r\n\x1a\n"
STATS = {"min": 0.01, "q1": 0.02, "median": 0.03, "q3": 0.04, "max": 0.09, "rounds": 20}


def run_file():
    slo = {"max": {"ttft_s.p90": 0.1}, "min": {}}
    return document(
        result("test_sweep@w-rate8", RATE),
        result("test_sweep@w-rate16", {**RATE, "requests_per_s": 16.0}),
        {**result("test_cap@p-rate4", {**RATE, "requests_per_s": 4.0}, **{"ttft_s.p90": 0.02}),
         "capacity": {"slo": slo, "passed": True, "reason": ""}},
        {**result("test_ab (B)"), "ab": {"tolerance": 0.1, "metrics": {"tpot_s.p50": {
            "ratios": [1.0, 1.1], "median": 1.05, "interval": [1.0, 1.1], "status": "pass"}}}},
        benchmarks=[{"group": FILE + "test_ab (B)", "extra_info": {"metric": "ttft_s"},
                     "stats": STATS}])


def test_slug():
    assert plots.slug("suites/test_cpu.py::test_x[a b]") == "test_cpu-test_x-a-b"


def test_every_kind_of_picture_as_a_png():
    pytest.importorskip("matplotlib")
    found = plots.pictures(gather([run_file()]))
    assert [p.name for p in found] == ["sweep-test_x-test_sweep.png", "capacity-test_x-test_cap.png",
                                       "latency-ttft.png", "ab-ratios.png"]
    assert all(p.png.startswith(PNG) for p in found)


def test_the_command_writes_them_and_history_from_several_files(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    older = {**run_file(), "datetime": "2026-11-19T02:00:00+00:00"}
    paths = []
    for name, doc in (("old.json", older), ("new.json", run_file())):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(doc))
    # test_ab (B) is an A/B side: no baseline, no history; the points are not gated either.
    assert main(["plot", *map(str, paths), "-o", str(tmp_path / "out")]) == 0
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["ab-ratios.png", "capacity-test_x-test_cap.png", "latency-ttft.png",
                       "sweep-test_x-test_sweep.png"]
    assert capsys.readouterr().out.splitlines()[0] == str(tmp_path / "out" /
                                                          "sweep-test_x-test_sweep.png")
    plain = {**run_file(), "datetime": "2026-11-19T02:00:00+00:00"}
    plain["llmperf"]["results"].append(result("test_gated"))
    paths[0].write_text(json.dumps(plain))
    assert main(["plot", *map(str, paths), "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "history-test_x-test_gated.png").read_bytes().startswith(PNG)


def test_without_matplotlib_one_line_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plots, "available", lambda: False)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(run_file()))
    assert main(["plot", str(path), "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == ("llmperf: error: plots need matplotlib: "
                                       "pip install 'pytest-llmperf[plots]'\n")
    assert not (tmp_path / "out").exists()


def test_not_a_run_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text("{}")
    assert main(["plot", str(path)]) == 2
    assert capsys.readouterr().err == (
        f'llmperf: error: {path}: not a pytest-llmperf run file (no "llmperf" key); write one '
        "with --llmperf-json PATH or --llmperf-save NAME\n")


def test_a_title_wider_than_its_figure_wraps_and_a_short_one_stays():
    """matplotlib cuts a title wider than the figure at both edges; an engine's whole spec in a
    7-inch figure's title was cut so (seen in an --llmperf-html page of an H200 run)."""
    pytest.importorskip("matplotlib")
    engine = ("llama-3.1-8b load=dummy len=16384 seqs=1024 batched=8192 mem=0.9 "
              "prefix_cache=True extra_args=skip-tokenizer-init:True")
    figure, _ = plots._new_figure(7, 4.2)
    plots._title(figure, f"test_chat_conversations: TTFT by turn ({engine}, 128 per turn)")
    title = figure.get_suptitle()
    assert title.count("\n") >= 1 and title.replace("\n", " ").endswith("128 per turn)")
    extent = figure._suptitle.get_window_extent(figure.canvas.get_renderer())
    assert extent.x0 >= 0 and extent.x1 <= figure.get_figwidth() * plots.DPI
    figure, _ = plots._new_figure(7, 4.2)
    plots._title(figure, "test_x over 3 runs")
    assert figure.get_suptitle() == "test_x over 3 runs"
