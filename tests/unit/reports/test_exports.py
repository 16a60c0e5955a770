"""`llmperf export`: a stored night as Prometheus text, Bencher's metric format and PyTorch OSS
benchmark records, each checked against the format's published rules or example (export_formats/), and
the command's one-line errors. The real Pushgateway: test_pushgateway.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_llmperf.cli import main
from pytest_llmperf.metrics.registry import BY_NAME
from pytest_llmperf.reports.exports.bencher import measure_slug
from pytest_llmperf.reports.exports.prometheus import metric_name
from tests.unit.reports.export_nights import TEST, TPOTS, make_store

DATA = Path(__file__).parent / "export_formats"


def export(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["export", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path) -> str:
    return make_store(tmp_path)


@pytest.mark.parametrize(("ours", "theirs"), [
    ("ttft_s.p50", ("llmperf_ttft_seconds", "p50")),
    ("output_throughput_tok_s", ("llmperf_output_throughput_tokens_per_second", "")),
    ("output_throughput_tok_s_per_gpu",
     ("llmperf_output_throughput_tokens_per_second_per_gpu", "")),
    ("goodput_req_s", ("llmperf_goodput_requests_per_second", "")),
    ("energy_per_token_j", ("llmperf_energy_per_token_joules", "")),
    ("usd_per_1m_output_tok", ("llmperf_usd_per_million_output_tokens", "")),
    ("server:kv_cache_usage_max", ("llmperf_server_kv_cache_usage_max", "")),
    ("turn2:itl_s.p99", ("llmperf_turn2_itl_seconds", "p99")),
])
def test_metric_names_spell_base_units_and_keep_the_statistic_as_a_label(ours, theirs):
    assert metric_name(ours) == theirs


def test_every_registered_metric_has_a_valid_name_with_no_abbreviated_unit():
    for ours in BY_NAME:
        name, _ = metric_name(ours)
        assert re.fullmatch(r"llmperf_[a-z0-9_]+", name), name
        assert not name.endswith(("_s", "_tok", "_j")), name


def test_prometheus_text_parses_with_the_nights_values_and_labels(capsys, store):
    code, out, _ = export(capsys, "--format", "prometheus", "--store", store)
    assert code == 0
    families = {family.name: family for family in text_string_to_metric_families(out)}
    assert set(families) == {"llmperf_tpot_seconds", "llmperf_output_throughput_tokens_per_second",
                             "llmperf_result_info", "llmperf_run_timestamp_seconds"}
    assert all(family.type == "gauge" for family in families.values())
    (tpot,) = families["llmperf_tpot_seconds"].samples
    assert tpot.value == TPOTS[1]
    assert tpot.labels == {"test": TEST, "series": tpot.labels["series"], "hardware": "cpu",
                           "shape": tpot.labels["shape"], "host": "node-7",
                           "engine": "tiny-llama", "workload": "a x48", "stat": "p50"}
    assert tpot.labels["shape"].startswith("cpu-")
    (when,) = families["llmperf_run_timestamp_seconds"].samples
    assert when.value == 1795230000.0  # 2026-11-21T03:00:00Z
    assert "energy" not in out  # stored without a value: no sample


def test_bencher_export_and_the_published_example_pass_the_same_schema(capsys, store):
    schema = json.loads((DATA / "bmf.schema.json").read_text())  # Bencher's published schema
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(json.loads((DATA / "bmf_example.json").read_text()), schema)
    code, out, _ = export(capsys, "--format", "bencher", "--store", store, "--run", "1")
    document = json.loads(out)
    jsonschema.validate(document, schema)
    measures = document[TEST]
    assert measures["tpot-s-p50"]["value"] == TPOTS[0]
    assert measures["tpot-s-p50"]["lower_value"] == pytest.approx(TPOTS[0] - 0.0001)
    assert measures["tpot-s-p50"]["upper_value"] == pytest.approx(TPOTS[0] + 0.0001)
    assert measures["output-throughput-tok-s"] == {"value": 450.5}  # no spread: no bounds
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({TEST: {"tpot-s-p50": {"lower_value": 1.0}}}, schema)


def test_bencher_measure_slugs_are_lower_case_words_joined_by_dashes():
    assert measure_slug("server:TTFT_s.p99") == "server-ttft-s-p99"
    # a Measure's slug is at most 64 characters (the page's "Order of Precedence")
    assert max(len(measure_slug(f"{name}.p99")) for name in BY_NAME) <= 64


def _shape(value):
    """A JSON value's fields and types, as far as the example spells them."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    return "number" if isinstance(value, float | int) else type(value).__name__


def _holds(ours, example) -> bool:
    if isinstance(example, dict):
        return isinstance(ours, dict) and all(
            key in ours and (key in ("args", "extra_info") or _holds(ours[key], item))
            for key, item in example.items())
    return ours == example


def test_pytorch_records_have_every_field_of_vllms_record_with_its_type(capsys, store):
    (example,) = json.loads((DATA / "pytorch_vllm_example.json").read_text())["records"]
    code, out, _ = export(capsys, "--format", "pytorch", "--store", store)
    records = json.loads(out)
    assert [r["metric"]["name"] for r in records] == ["output_throughput_tok_s", "tpot_s.p50"]
    for ours in records:
        assert _holds(_shape(ours), _shape(example)), ours
        assert isinstance(ours["benchmark"]["extra_info"], dict)
        assert isinstance(ours["metric"]["extra_info"], dict)
    assert records[1]["metric"]["benchmark_values"] == [TPOTS[1]]
    assert records[1]["model"] == {"name": "suites/models/tiny-llama"}
    assert records[1]["benchmark"]["mode"] == "inference"  # the wiki's "Training or inference"
    assert records[1]["benchmark"]["extra_info"]["test_id"] == TEST
    assert records[1]["benchmark"]["extra_info"]["host"] == "node-7"
    assert not _holds(_shape({"metric": {"name": "x"}}), _shape(example))


def test_a_night_in_a_postgresql_store_exports_as_from_sqlite(capsys, tmp_path, postgres_db):
    sqlite = export(capsys, "--format", "bencher", "--store", make_store(tmp_path))
    postgres = export(capsys, "--format", "bencher", "--store",
                      make_store(tmp_path, url=postgres_db))
    assert postgres == sqlite
    assert json.loads(postgres[1])[TEST]["tpot-s-p50"]["value"] == TPOTS[1]


def test_output_file(capsys, store, tmp_path):
    code, out, _ = export(capsys, "--format", "bencher", "--store", store, "-o",
                          str(tmp_path / "night.json"))
    assert (code, out) == (0, f"bencher export written to {tmp_path / 'night.json'}\n")
    assert json.loads((tmp_path / "night.json").read_text())[TEST]


@pytest.mark.parametrize(("argv", "message"), [
    (["--run", "yesterday"], "--run 'yesterday': give a run number (as `llmperf history TEST` "
                             "shows it) or 'latest'"),
    (["--run", "9"], "--run 9: {store} holds no run 9; `llmperf history TEST` shows the run "
                     "numbers, or give --run latest"),
    (["--push", "http://127.0.0.1:9091", "--format", "bencher"],
     "--push sends Prometheus text to a Pushgateway; give --format prometheus, not bencher"),
    (["--push", "pushgateway:9091"],
     "--push 'pushgateway:9091': give the Pushgateway's URL, e.g. http://pushgateway:9091"),
])
def test_bad_input_is_one_line(capsys, store, argv, message):
    code, out, err = export(capsys, "--format", "prometheus", "--store", store, *argv)
    assert (code, out) == (2, "")
    assert err == f"llmperf: error: {message.format(store=store)}\n"


def test_a_store_that_is_not_there_is_one_line(capsys, tmp_path):
    code, _, err = export(capsys, "--format", "bencher", "--store", str(tmp_path / "no.sqlite"))
    assert code == 2
    assert err == (f"llmperf: error: --store {tmp_path / 'no.sqlite'}: no store here; give the "
                   "one `llmperf nightly --store` or --llmperf-history wrote to\n")
