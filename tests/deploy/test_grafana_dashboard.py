"""deploy/grafana/llmperf-nights.json: valid JSON, and every PromQL query in it (panels and
variables) names a metric `llmperf export --format prometheus` writes, with a `stat` label
exactly where the metric is a distribution (reports/exports/prometheus.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pytest_llmperf.metrics.registry import BY_NAME, STATISTICS
from pytest_llmperf.reports.exports.prometheus import RESULT_INFO, RUN_TIMESTAMP, metric_name

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "llmperf-nights.json"
SELECTOR = re.compile(r"\b(llmperf_[a-z0-9_]+)(\{[^}]*\})?")


def written() -> dict[str, bool]:
    """Every name the exporter writes -> whether its samples carry a `stat` label."""
    names = {metric_name(name)[0]: metric.distribution for name, metric in BY_NAME.items()}
    return names | {RESULT_INFO: False, RUN_TIMESTAMP: False}


def queries(dashboard: dict) -> list[str]:
    found = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    return found + [variable["query"]["query"] for variable in dashboard["templating"]["list"]
                    if variable["type"] == "query"]


def problems(dashboard: dict) -> list[str]:
    known, out = written(), []
    for query in queries(dashboard):
        selectors = SELECTOR.findall(query)
        if not selectors:
            out.append(f"{query}: names no llmperf_ metric")
        for name, labels in selectors:
            stat = re.search(r'stat="([^"]*)"', labels)
            if name not in known:
                out.append(f"{query}: {name} is not written")
            elif known[name] != bool(stat) or (stat and stat[1] not in STATISTICS):
                out.append(f"{query}: {name}'s stat label")
    return out


def test_every_query_names_a_metric_the_exporter_writes():
    dashboard = json.loads(DASHBOARD.read_text())
    assert len(queries(dashboard)) == 13
    assert problems(dashboard) == []
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])


def test_a_misspelt_metric_or_a_missing_statistic_is_found():
    dashboard = json.loads(DASHBOARD.read_text())
    dashboard["panels"][1]["targets"][0]["expr"] = 'llmperf_ttft_s{stat="p50"}'
    dashboard["panels"][2]["targets"][0]["expr"] = "llmperf_tpot_seconds"
    dashboard["panels"][3]["targets"][0]["expr"] = 'llmperf_itl_seconds{stat="p42"}'
    assert problems(dashboard) == [
        "llmperf_ttft_s{stat=\"p50\"}: llmperf_ttft_s is not written",
        "llmperf_tpot_seconds: llmperf_tpot_seconds's stat label",
        "llmperf_itl_seconds{stat=\"p42\"}: llmperf_itl_seconds's stat label"]
