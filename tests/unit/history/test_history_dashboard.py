"""The history page a team shares, `llmperf history --json` and the Grafana panel's SQL, over one
store of two GPU shapes' nights: a chat test on 8x H200 whose TPOT rose 25% on the night it
moved from host gpu-3 to gpu-7 with vLLM 0.31.0 -> 0.32.0 (open), and an offline test on 8x H100
whose TPOT rose 30% (acknowledged). Each run links the CI job that made it (GitHub Actions,
GitLab, Jenkins). The page is opened in Debian's headless Chromium: a screenshot, and the DOM
after a host filter given in the address."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

import pytest

from pytest_llmperf.cli import main
from pytest_llmperf.history import location, record
from pytest_llmperf.history.acks import Ack
from pytest_llmperf.history.store import HistoryStore
from tests.unit.history.builders import DOCUMENT

CHAT = "suites/test_gpu_llama8b.py::test_chat_conversations"  # as docs/history.md names it
OFFLINE = "suites/test_gpu_llama8b.py::test_offline"
CHAT_TPOT_MS = [10.0, 10.2, 9.9, 10.1, 9.8, 10.0, 12.5, 12.6, 12.4, 12.5]
OFFLINE_TPOT_MS = [20.0, 20.2, 19.9, 26.0, 26.1, 25.9]
H200 = {"hardware_class": "h200", "device_name": "NVIDIA H200", "device_count": 8}
H100 = {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 8}
ACK_REASON = "vLLM 0.32's new scheduler; fix tracked upstream"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "history.md"


def ci_environ(night: int) -> dict[str, str]:
    """The CI variables of a night: GitHub Actions, then GitLab, then Jenkins."""
    if night <= 4:
        return {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "team/llm",
                "GITHUB_RUN_ID": str(100 + night)}
    if night <= 8:
        return {"CI_JOB_URL": f"https://gitlab.example.com/team/llm/-/jobs/{500 + night}"}
    return {"BUILD_URL": f"https://jenkins.example.com/job/nightly/{night}/"}


def run_of(test: str, night: int, tpot_ms: float, *, fingerprint: dict, host: str,
           vllm: str, hour: int = 3, verdict: str = "pass") -> record.RunRecord:
    doc = copy.deepcopy(DOCUMENT)
    doc["datetime"] = f"2026-11-{night:02d}T{hour:02d}:00:00+00:00"
    doc["llmperf"]["fingerprint"] = {**fingerprint, "vllm": vllm, "torch": "2.11.0"}
    result = doc["llmperf"]["results"][0]
    result.update(test_id=test, key=test.split("::")[1], verdict=verdict,
                  engine_label="llama-8b", gate={"tolerance": 0.1, "metrics": ["tpot_s.p50"]})
    result["metrics"] = {"tpot_s.p50": {"value": tpot_ms / 1000, "spread": 0.0001, "n": 3,
                                        "direction": "lower"}}
    return dataclasses.replace(record.from_document(doc, environ=ci_environ(night)), host=host)


def fill(store: HistoryStore) -> None:
    """Runs 1-11: the chat test's nights 1-10 (from night 7 on gpu-7 with vLLM 0.32.0) and a
    CLIENT LIMITED night 11; runs 12-17: the offline test's nights 5-10 and its ack."""
    for night, tpot in enumerate(CHAT_TPOT_MS, 1):
        late = night >= 7
        store.record(run_of(CHAT, night, tpot, fingerprint=H200,
                            host="gpu-7" if late else "gpu-3",
                            vllm="0.32.0" if late else "0.31.0"))
    store.record(run_of(CHAT, 11, 50.0, fingerprint=H200, host="gpu-7", vllm="0.32.0",
                        verdict="CLIENT LIMITED"))
    for night, tpot in enumerate(OFFLINE_TPOT_MS, 5):
        store.record(run_of(OFFLINE, night, tpot, fingerprint=H100, host="gpu-9",
                            vllm="0.32.0", hour=4))
    store.record_ack(Ack(OFFLINE, "tpot_s.p50", ACK_REASON, "ana",
                         datetime(2026, 11, 10, 9, tzinfo=timezone.utc),
                         datetime(2099, 1, 2, tzinfo=timezone.utc)))


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "history.sqlite"
    store = HistoryStore.open(location.resolve(str(path), tmp_path))
    fill(store)
    store.close()
    return path


def test_the_ci_job_of_each_system_is_recorded():
    assert record.ci_url(ci_environ(1)) == "https://github.com/team/llm/actions/runs/101"
    assert record.ci_url(ci_environ(5)) == "https://gitlab.example.com/team/llm/-/jobs/505"
    assert record.ci_url(ci_environ(9)) == "https://jenkins.example.com/job/nightly/9/"
    assert record.ci_url({**ci_environ(1), **ci_environ(5)}).endswith("/actions/runs/101")
    assert record.ci_url({"GITHUB_RUN_ID": "7"}) is None  # a partial GitHub set is no URL
    assert record.ci_url({}) is None


def _json(store_arg: str, capsys) -> dict:
    assert main(["history", "--history", store_arg, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_json_document(store_path, capsys):
    found = _json(str(store_path), capsys)
    assert (found["format"], found["version"], found["store"]) == (
        "pytest-llmperf history", 1, str(store_path))
    chat, offline = found["series"]
    assert (chat["test_id"], chat["metric"], chat["hosts"], chat["tolerance"]) == (
        CHAT, "tpot_s.p50", ["gpu-3", "gpu-7"], 0.1)
    assert chat["hardware"].startswith("h200: 8x NVIDIA H200 (h200-")
    assert [p["run"] for p in chat["points"]] == list(range(1, 12))
    assert chat["points"][6] == {
        "run": 7, "date": "2026-11-07T03:00:00+00:00", "value": 12.5 / 1000, "spread": 0.0001,
        "verdict": "pass", "point": True, "commit": "1a2b3c4d5e6f7a8b9c0d", "host": "gpu-7",
        "vllm": "0.32.0", "ci_url": "https://gitlab.example.com/team/llm/-/jobs/507"}
    assert chat["points"][10]["verdict"] == "CLIENT LIMITED" and not chat["points"][10]["point"]
    assert chat["changes"] == [{
        "number": 1, "run": 7, "date": "2026-11-07T03:00:00+00:00", "run_before": 6,
        "before": pytest.approx(0.01), "after": pytest.approx(0.0125), "percent": 25.0,
        "worse": True,
        "what_changed": ["host gpu-3 -> gpu-7", "vllm 0.31.0 -> 0.32.0"],
        "text": "what changed at run 7: host gpu-3 -> gpu-7, vllm 0.31.0 -> 0.32.0",
        "ci_url": "https://gitlab.example.com/team/llm/-/jobs/507",
        "ci_url_before": "https://gitlab.example.com/team/llm/-/jobs/506"}]
    opened = {"state": "open", "test_id": CHAT, "metric": "tpot_s.p50",
              "series": chat["series"], "run": 7, "date": "2026-11-07T03:00:00+00:00",
              "percent": 25.0, "nights": 4,
              "line": f"open: {CHAT} tpot_s.p50 +25.0% since run 7 (2026-11-07, commit "
                      "1a2b3c4d5e), 4 nights",
              "ci_url": "https://gitlab.example.com/team/llm/-/jobs/507", "ack": None}
    assert chat["regression"] == opened
    assert offline["regression"]["state"] == "acknowledged"
    assert offline["regression"]["ack"] == {
        "who": "ana", "reason": ACK_REASON, "recorded_at": "2026-11-10T09:00:00+00:00",
        "until": "2099-01-02T00:00:00+00:00"}
    assert found["regressions"] == [opened, offline["regression"]]
    # The same regressions, in the same words, as `llmperf history` lists them.
    assert main(["history", "--history", str(store_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        r["line"] for r in found["regressions"]]
    assert main(["history", "--history", str(store_path), "--json", "--html", "x.html"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_page_says_when_what_changed_and_links_the_ci_jobs(store_path, tmp_path, capsys):
    page = tmp_path / "index.html"
    assert main(["history", "--history", str(store_path), "--html", str(page)]) == 0
    assert capsys.readouterr().out == f"history dashboard written to {page}\n"
    html = page.read_text()
    assert "src=" not in html and "<link" not in html  # nothing loaded from anywhere
    ticks = re.findall(r'text-anchor="middle">([^<]+)</text>', html)
    assert ticks == ["2026-11-02", "2026-11-04", "2026-11-06", "2026-11-08", "2026-11-10",
                     "2026-11-06", "2026-11-07", "2026-11-08", "2026-11-09", "2026-11-10"]
    # The change point's line is halfway between nights 6 and 7: the axis runs from x 80 (night
    # 1, 03:00) to 930 (night 11), 85 pixels a day; its words end 4 pixels left of it.
    assert ('<line x1="547.5" x2="547.5" y1="4" y2="200" stroke="#cf222e" stroke-dasharray="5 '
            '4" stroke-width="1.5"/><text x="543.5" y="13" text-anchor="end" style="fill:'
            '#cf222e;font-weight:600">1: +25.0% at run 7</text><text x="543.5" y="26" '
            'text-anchor="end">host gpu-3 -&gt; gpu-7, vllm 0.31.0 -&gt; 0.32.0</text>') in html
    assert ('<li value="1"><b>2026-11-07 03:00 UTC, run 7</b>: <span class="worse">10.0 ms '
            "-&gt; 12.5 ms (+25.0%, worse)</span>; what changed: host gpu-3 -&gt; gpu-7, vllm "
            '0.31.0 -&gt; 0.32.0 (<a href="https://gitlab.example.com/team/llm/-/jobs/506">run '
            '6</a>, <a href="https://gitlab.example.com/team/llm/-/jobs/507">run 7</a>)</li>'
            ) in html
    assert html.count('<a href="https://github.com/team/llm/actions/runs/10') == 4  # the dots
    assert '<a href="https://jenkins.example.com/job/nightly/10/"><circle' in html
    assert ('<span class="acknowledged">acknowledged</span>: suites/test_gpu_llama8b.py::'
            "test_offline tpot_s.p50 +30.0% since run 15 (2026-11-08, commit 1a2b3c4d5e), 3 "
            "nights; acknowledged by ana on 2026-11-10 until 2099-01-01: vLLM 0.32&#x27;s new "
            "scheduler; fix tracked upstream") in html
    assert ('<select id="host" onchange="applyFilters()"><option value="">all</option><option '
            'value="gpu-3">gpu-3</option><option value="gpu-7">gpu-7</option><option '
            'value="gpu-9">gpu-9</option></select>') in html
    assert '<select id="hardware"' in html and '<select id="engine"' in html


def _chromium(*args: str) -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (scripts/install-cpu installs Debian's)")
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", *args], capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout


def test_the_page_in_a_browser(store_path, tmp_path):
    """A screenshot (kept as the test's dashboard.png) and the filters as the browser runs
    them, chosen by the address as a shared link would."""
    page = tmp_path / "index.html"
    assert main(["history", "--history", str(store_path), "--html", str(page)]) == 0
    shot = tmp_path / "dashboard.png"
    _chromium("--window-size=1000,1000", f"--screenshot={shot}", page.as_uri())
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    assert image.size == (1000, 1000)
    colors = {image.getpixel((x, y)) for x in range(0, 1000) for y in range(0, 1000)}
    assert (207, 34, 46) in colors  # the change points' dashed lines (#cf222e)
    assert (9, 105, 218) in colors  # the runs' dots (#0969da)
    dom = _chromium("--dump-dom", page.as_uri() + "#host=gpu-3")
    sections = re.findall(r'<section class="chart"[^>]*data-hosts="([^"]*)"[^>]*?( style="display: none;")?>', dom)
    assert sections == [("gpu-3 gpu-7", ""), ("gpu-9", ' style="display: none;"')]
    assert '<span id="shown">1</span>' in dom
    listed = re.findall(r'<li data-key="[^"]*"( style="display: none;")?><span class="(\w+)"',
                        dom)
    assert listed == [("", "open"), (' style="display: none;"', "acknowledged")]
    faded = re.findall(r'data-host="(gpu-\d)"[^>]*style="opacity: 0.2;"', dom)
    assert faded == ["gpu-7"] * 5 + ["gpu-9"] * 6  # every run not on gpu-3
    h100 = re.search(r'data-hardware="(h100: [^"]+)"', dom).group(1)
    dom = _chromium("--dump-dom", f"{page.as_uri()}#hardware={quote(h100)}&engine=llama-8b")
    sections = re.findall(r'<section class="chart"[^>]*data-hosts="([^"]*)"[^>]*?( style="display: none;")?>', dom)
    assert sections == [("gpu-3 gpu-7", ' style="display: none;"'), ("gpu-9", "")]
    assert 'style="opacity' not in dom  # no host chosen: every run as it is


def grafana_sql() -> str:
    """The SQL block under "A Grafana panel over the PostgreSQL store" in docs/history.md."""
    text = DOCS.read_text().split("### A Grafana panel over the PostgreSQL store", 1)[1]
    return re.search(r"```sql\n(.*?)```", text, re.S).group(1)


def test_the_grafana_panel_sql_on_a_postgresql_store(postgres_db, tmp_path, capsys):
    import psycopg

    store = HistoryStore.open(location.resolve(postgres_db, tmp_path))
    fill(store)
    store.close()
    # Grafana's expansion of the macro (docs/history.md cites it), for nights 2 to 11: night 1
    # is before the range, night 11 was CLIENT LIMITED, the offline test is another test.
    sql = grafana_sql().replace(
        "$__timeFilter(runs.started_at)",
        "runs.started_at BETWEEN '2026-11-02T00:00:00Z' AND '2026-11-11T23:59:59Z'")
    with psycopg.connect(postgres_db) as connection:
        rows = connection.execute(sql).fetchall()
    expected = [(datetime(2026, 11, night, 3, tzinfo=timezone.utc),
                 "gpu-7" if night >= 7 else "gpu-3", CHAT_TPOT_MS[night - 1] / 1000)
                for night in range(2, 11)]
    assert rows == expected
    # The same values as `llmperf history --json` on the same store, CI links included.
    chat = _json(postgres_db, capsys)["series"][0]
    assert [(datetime.fromisoformat(p["date"]), p["host"], p["value"])
            for p in chat["points"][1:10]] == expected
    assert [p["ci_url"] for p in chat["points"][8:10]] == [
        "https://jenkins.example.com/job/nightly/9/", "https://jenkins.example.com/job/nightly/10/"]


def test_a_run_without_a_date_puts_the_chart_in_run_order(tmp_path, capsys):
    path = tmp_path / "history.sqlite"
    store = HistoryStore.open(location.resolve(str(path), tmp_path))
    for night, tpot in enumerate(CHAT_TPOT_MS[:3], 1):
        run = run_of(CHAT, night, tpot, fingerprint=H200, host="gpu-3", vllm="0.31.0")
        store.record(dataclasses.replace(run, started_at=None) if night == 2 else run)
    store.close()
    page = tmp_path / "index.html"
    assert main(["history", "--history", str(path), "--html", str(page)]) == 0
    html = page.read_text()
    assert re.findall(r'text-anchor="middle">([^<]+)</text>', html) == ["run 1", "run 2", "run 3"]
    assert "run 2, no date, host gpu-3" in html  # the dot's tooltip


def priced_store(tmp_path: Path) -> Path:
    """Six nights of the chat test on 8x H200 with a price and NVML's energy counter: the
    dollars per million output tokens in the run file's "cost", the joules per output token a
    metric, both 25% up from night 4 with TPOT."""
    path = tmp_path / "priced.sqlite"
    store = HistoryStore.open(location.resolve(str(path), tmp_path))
    for night, tpot in enumerate([10.0, 10.1, 9.9, 12.5, 12.6, 12.4], 1):
        doc = copy.deepcopy(DOCUMENT)
        doc["datetime"] = f"2026-11-29T{night:02d}:10:00+00:00"  # six runs in one morning
        doc["llmperf"]["fingerprint"] = {**H200, "vllm": "0.32.0", "torch": "2.11.0"}
        result = doc["llmperf"]["results"][0]
        result.update(test_id=CHAT, key="test_chat_conversations", engine_label="llama-8b",
                      gate={"tolerance": 0.1, "metrics": ["tpot_s.p50"]})
        result["metrics"] = {
            "tpot_s.p50": {"value": tpot / 1000, "spread": 0.0001, "n": 3, "direction": "lower"},
            "energy_per_output_token_j": {"value": tpot * 0.05, "spread": 0.001, "n": 3,
                                          "direction": "lower"}}
        result["cost"] = {"usd_per_hour": 19.92, "price_usd_per_hour": 2.49, "price_per": "gpu",
                          "engine_gpus": 8, "machine_gpus": 8,
                          "usd_per_1m_output_tok": tpot * 0.02, "usd_per_1m_total_tok": 0.1}
        store.record(record.from_document(doc, environ=ci_environ(night)))
    store.close()
    return path


def test_cost_and_energy_per_token_are_charted_where_measured(tmp_path):
    page = tmp_path / "index.html"
    assert main(["history", "--history", str(priced_store(tmp_path)), "--html", str(page)]) == 0
    html = page.read_text()
    charts = re.findall(r'<svg [^>]* aria-label="([^"]+)">', html)
    assert charts == ["tpot_s.p50", "usd_per_1m_output_tok", "energy_per_output_token_j"]
    # One morning's runs: a tick every hour, the date on the first.
    assert re.findall(r'text-anchor="middle">([^<]+)</text>', html)[:6] == [
        "2026-11-29 02:00", "03:00", "04:00", "05:00", "06:00", "2026-11-29 02:00"]
    for metric in ("usd_per_1m_output_tok", "energy_per_output_token_j"):
        section = html.split(f'-{metric}"', 1)[1].split("</section>", 1)[0]
        assert "+25.0% at run 4" in section, section[:2000]
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 960 ' in html


MEASURE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" src="index.html" style="width:%dpx;height:900px;border:0"></iframe>
<pre id="sizes"></pre><script>
document.getElementById('page').addEventListener('load', () => {
  const inner = document.getElementById('page').contentDocument;
  const svg = inner.querySelector('svg.plot'), frame = inner.querySelector('.plot-frame');
  document.getElementById('sizes').textContent = JSON.stringify({
    page: inner.documentElement.scrollWidth, frame: frame.clientWidth,
    chart: Math.round(svg.getBoundingClientRect().width)});
});
</script></body></html>"""


def test_the_page_fills_a_desktop_and_scrolls_its_charts_on_a_phone(tmp_path):
    """The page laid out in a frame of a desktop's width and of a phone's (390 pixels: headless
    Chromium lays a window out no narrower than 500), measured by the browser, and shot (kept
    as desktop.png and phone.png). On the desktop a chart spans its section; on the phone the
    page keeps the screen's width and only the chart's frame scrolls, its labels at 760/960 of
    their size."""
    page = tmp_path / "index.html"
    assert main(["history", "--history", str(priced_store(tmp_path)), "--html", str(page)]) == 0
    sizes = {}
    for name, width in (("desktop", 1400), ("phone", 390)):
        wrapper = tmp_path / f"{name}.html"
        wrapper.write_text(MEASURE % width)
        dom = _chromium("--allow-file-access-from-files", "--dump-dom", wrapper.as_uri())
        sizes[name] = json.loads(re.search(r'<pre id="sizes">([^<]*)</pre>', dom).group(1))
        _chromium("--allow-file-access-from-files", f"--window-size={max(width, 600)},900",
                  f"--screenshot={tmp_path / f'{name}.png'}", wrapper.as_uri())
    desktop, phone = sizes["desktop"], sizes["phone"]
    assert desktop["page"] == 1400 and desktop["chart"] == desktop["frame"] > 1300, sizes
    assert phone["page"] == 390 and phone["chart"] == 760 and phone["frame"] < 390, sizes
