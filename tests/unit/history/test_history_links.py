"""The history page's links: each chart has a stable id from its series and metric
(#series-...), its heading links to it, and each listed regression links to its chart."""

from __future__ import annotations

import copy
import re

from pytest_llmperf.cli import main
from pytest_llmperf.history import location, record
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.reports.history_page import anchor
from tests.unit.history.builders import DOCUMENT

TPOTS = [0.0100, 0.0102, 0.0099, 0.0101, 0.0125, 0.0126, 0.0124]


def test_every_chart_has_a_stable_link_and_each_regression_links_its_chart(tmp_path):
    path = tmp_path / "history.sqlite"
    store = HistoryStore.open(location.resolve(str(path), tmp_path))
    for night, tpot in enumerate(TPOTS, start=1):
        document = copy.deepcopy(DOCUMENT)
        document["datetime"] = f"2026-11-{night:02d}T03:00:00+00:00"
        result = document["llmperf"]["results"][0]
        result["gate"] = {"tolerance": 0.1, "metrics": ["tpot_s.p50"]}
        result["metrics"]["tpot_s.p50"]["value"] = tpot
        store.record(record.from_document(document, environ={}))
    (series,) = {point.series for point in store.points(result["test_id"], None)}
    store.close()
    page = tmp_path / "index.html"
    assert main(["history", "--history", str(path), "--html", str(page)]) == 0
    html = page.read_text()
    ids = re.findall(r'<section class="chart" id="([^"]+)"', html)
    assert ids == [anchor(series, "tpot_s.p50")] == [f"series-{series}-tpot_s-p50"]
    assert f'<a href="#{ids[0]}" title="a link to this chart">#</a></h2>' in html
    (item,) = re.findall(r"<ul class=\"regressions\">(.*?)</ul>", html)
    assert f'<a href="#{ids[0]}">chart</a>' in item
