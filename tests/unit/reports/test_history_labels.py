"""The history chart's change-point labels never overlap: a label that would touch another goes
to the next row, and the chart grows by that row (reports/history_chart.py)."""

from __future__ import annotations

import copy
import re
from datetime import datetime, timedelta, timezone

from pytest_llmperf.cli import main
from pytest_llmperf.history import location, record
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.reports.history_chart import CHAR_PX, HEIGHT, ROW, WIDTH, label_rows
from tests.unit.history.builders import DOCUMENT

FIRST = datetime(2026, 10, 1, 3, tzinfo=timezone.utc)


def test_touching_labels_go_to_the_next_free_row():
    assert label_rows([(0, 100), (50, 150), (120, 200), (160, 260)]) == [0, 1, 0, 1]
    assert label_rows([(0, 100), (101, 150)]) == [0, 0]
    assert label_rows([]) == []


def test_two_close_change_points_label_on_two_rows_of_a_taller_chart(tmp_path):
    # 40 nights; the level steps up at night 20 and again at night 23: two changes ~50 px apart
    tpots = [0.010] * 19 + [0.0125] * 3 + [0.016] * 18
    path = tmp_path / "history.sqlite"
    store = HistoryStore.open(location.resolve(str(path), tmp_path))
    for night, tpot in enumerate(tpots):
        document = copy.deepcopy(DOCUMENT)
        document["datetime"] = (FIRST + timedelta(days=night)).isoformat()
        result = document["llmperf"]["results"][0]
        result["gate"] = {"tolerance": 0.1, "metrics": ["tpot_s.p50"]}
        result["metrics"]["tpot_s.p50"]["value"] = tpot
        store.record(record.from_document(document, environ={}))
    store.close()
    page = tmp_path / "index.html"
    assert main(["history", "--history", str(path), "--html", str(page), "--last", "40"]) == 0
    svg = re.search(r"<svg .*?</svg>", page.read_text(), re.S).group(0)
    assert f'viewBox="0 0 {WIDTH} {HEIGHT + ROW}"' in svg
    labels = re.findall(r'<text x="([\d.]+)" y="(\d+)" text-anchor="(\w+)" '
                        r'style="fill:[^"]+;font-weight:600">([^<]+)</text>', svg)
    assert [(y, text.split(":")[0]) for _, y, _, text in labels] == [("13", "1"), ("39", "2")]
    boxes = []
    for x, y, anchor, text in labels:
        width = CHAR_PX * len(text)
        low = float(x) if anchor == "start" else float(x) - width
        boxes.append((int(y), low, low + width))
    (row_a, low_a, high_a), (row_b, low_b, high_b) = boxes
    assert row_a != row_b and not (high_a < low_b or high_b < low_a)  # they would have touched
