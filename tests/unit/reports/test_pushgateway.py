"""`llmperf export --format prometheus --push URL` against a real Pushgateway
(pushgateway_server.py): the night's series read back by name from the gateway's /metrics,
one group per runner shape and host, and a refused or unreachable gateway as one line."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_llmperf.cli import main
from pytest_llmperf.reports.exports import pushgateway as gateway
from tests.unit.reports.export_nights import TEST, TPOTS, make_store
from tests.unit.reports.pushgateway_server import _free_port, pushgateway, scrape  # noqa: F401


def samples(url: str, name: str) -> list:
    found = [family for family in text_string_to_metric_families(scrape(url))
             if family.name == name]
    return found[0].samples if found else []


def test_a_pushed_night_is_read_back_by_name_and_the_next_night_replaces_it(
        capsys, tmp_path, pushgateway):  # noqa: F811
    store = make_store(tmp_path)
    assert main(["export", "--format", "prometheus", "--store", store, "--run", "1",
                 "--push", pushgateway]) == 0
    assert capsys.readouterr().out.startswith(
        f"llmperf export: run 1 pushed to {pushgateway}/metrics/job/llmperf/shape@base64/")
    (tpot,) = samples(pushgateway, "llmperf_tpot_seconds")
    assert (tpot.value, tpot.labels["test"], tpot.labels["stat"]) == (TPOTS[0], TEST, "p50")
    assert (tpot.labels["job"], tpot.labels["host"]) == ("llmperf", "node-7")
    assert main(["export", "--format", "prometheus", "--store", store,
                 "--push", pushgateway]) == 0
    (tpot,) = samples(pushgateway, "llmperf_tpot_seconds")  # one group: replaced, not added
    assert tpot.value == TPOTS[1]
    (throughput,) = samples(pushgateway, "llmperf_output_throughput_tokens_per_second")
    assert throughput.value == 449.5


def test_two_hosts_are_two_groups_even_with_a_slash_in_a_name(tmp_path, pushgateway):  # noqa: F811
    # Both hosts pushed here: the gateway is the module's, and under pytest-xdist (CI's first
    # step) the test above may run on the other worker, against its own gateway.
    for host in ("node-7", "rack 2/node 1"):
        folder = tmp_path / host.replace("/", "_")
        folder.mkdir()
        store = make_store(folder, environ={"LLMPERF_HOST": host})
        assert main(["export", "--format", "prometheus", "--store", store,
                     "--push", pushgateway]) == 0
    hosts = {sample.labels["host"] for sample in samples(pushgateway, "llmperf_tpot_seconds")}
    assert hosts == {"node-7", "rack 2/node 1"}


def test_a_refused_push_and_an_unreachable_gateway_are_one_line(pushgateway):  # noqa: F811
    with pytest.raises(gateway.PushError) as refused:
        gateway.push(pushgateway, {"host": "x"}, "not { prometheus text\n")
    assert str(refused.value).startswith(
        f"--push {pushgateway}: the Pushgateway refused the night (HTTP 400: ")
    assert "\n" not in str(refused.value)
    nobody = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(gateway.PushError) as unreachable:
        gateway.push(nobody, {"host": "x"}, "")
    assert str(unreachable.value) == (
        f"--push {nobody}: cannot reach the Pushgateway ([Errno 111] Connection refused); "
        "check the URL and that it is running")
