"""--llmperf-cost-per-hour: parsing, per hardware class, each engine's share, and $ per 1M
tokens."""

from __future__ import annotations

import pytest

from pytest_llmperf.metrics.cost import (
    ENGINE,
    GPU,
    MACHINE,
    PER_OUTPUT,
    PER_TOTAL,
    RULE,
    Price,
    as_price,
    engine_share,
    for_hardware,
    missing_note,
    parse_cost_per_hour,
    per_million_tokens,
    share_of,
)

H100_X8 = {"hardware_class": "h100", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 8}
CPU = {"hardware_class": "cpu", "device_count": 0}


def test_one_price_for_any_hardware():
    assert parse_cost_per_hour(" 2.49 ") == Price(2.49, MACHINE)
    assert for_hardware(Price(2.49), "h100") == for_hardware(Price(2.49), "cpu") == Price(2.49)
    assert for_hardware(None, "cpu") is None


@pytest.mark.parametrize("text, price", [
    ("2.49/gpu", Price(2.49, GPU)), ("2.49 / GPU", Price(2.49, GPU)),
    ("12/engine", Price(12.0, ENGINE)), ("2.49/machine", Price(2.49, MACHINE)),
])
def test_a_price_says_what_it_is_for(text, price):
    assert parse_cost_per_hour(text) == price


def test_a_price_per_hardware_class():
    prices = parse_cost_per_hour("h100=2.49/gpu, H200 = 3.5,\ncpu=0.1/engine,")
    assert prices == {"h100": Price(2.49, GPU), "h200": Price(3.5), "cpu": Price(0.1, ENGINE)}
    assert for_hardware(prices, "h200") == Price(3.5)
    assert for_hardware(prices, "a100-80gb") is None
    assert missing_note(prices, "a100-80gb") == (
        "no cost columns: --llmperf-cost-per-hour has no price for hardware class a100-80gb "
        "(it has h100, h200, cpu); add a100-80gb=USD")
    assert missing_note(prices, "cpu") is None and missing_note(Price(2.0), "cpu") is None


def test_one_price_per_gpu_on_a_cpu_machine_gives_a_note_not_a_cost():
    per_gpu = parse_cost_per_hour("2.49/gpu")
    assert for_hardware(per_gpu, "h100") == per_gpu
    assert for_hardware(per_gpu, "cpu") is None
    assert missing_note(per_gpu, "cpu") == (
        "no cost columns: --llmperf-cost-per-hour is a price per GPU and hardware class cpu has "
        "no GPUs; give one price per class (h100=2.49/gpu, cpu=0.10)")
    assert missing_note(per_gpu, "h100") is None


def test_a_cpu_price_per_gpu_is_refused():
    with pytest.raises(ValueError) as error:
        parse_cost_per_hour("h100=2.49/gpu, cpu=0.1/gpu")
    assert str(error.value) == ("cpu=0.1/gpu: hardware class cpu has no GPUs; price the machine "
                                "(cpu=0.1) or one engine (cpu=0.1/engine)")


@pytest.mark.parametrize("text", ["", "free", "0", "-1", "nan", "inf", "h100", "h100=",
                                  "tpu=2", "h100=2,cpu=x", ",", "2.49/node", "2.49/", "/gpu",
                                  "0/gpu", "h100=2.49/hour", "2.49/gpu/engine"])
def test_a_bad_price_says_what_is_expected(text):
    with pytest.raises(ValueError) as error:
        parse_cost_per_hour(text)
    assert str(error.value) == RULE
    assert RULE == (
        "expected US dollars per hour, a number above 0: the machine's (2.49), one GPU's "
        "(2.49/gpu) or one engine's (2.49/engine), or one such price per hardware class "
        "(h100=2.49/gpu, cpu=0.10; classes: h100, h200, a100-80gb, a100-40gb, gpu, cpu)")


def test_the_machine_price_is_shared_by_the_gpus_an_engine_uses():
    # $2.40 for 8 GPUs: $0.30 per GPU an engine holds, so 8 engines of TP=1 pay what one of
    # TP=8 pays.
    one = engine_share(Price(2.4), engine_gpus=1, machine_gpus=8)
    assert one.usd_per_hour == pytest.approx(0.3, rel=1e-12)
    assert one.describe() == "cost 0.3 USD/h: 1 of 8 GPUs of a 2.4 USD/h machine"
    assert engine_share(Price(2.4), 8, 8).usd_per_hour == 2.4
    assert 8 * one.usd_per_hour == pytest.approx(2.4, rel=1e-12)
    # A spec claiming more GPUs than there are (a deployment's) pays the whole machine, no more.
    assert engine_share(Price(2.4), 16, 8).usd_per_hour == 2.4


def test_a_cpu_machine_is_charged_whole():
    share = engine_share(Price(0.1), engine_gpus=1, machine_gpus=0)
    assert share.usd_per_hour == 0.1
    assert share.describe() == "cost 0.1 USD/h: the whole machine"


def test_a_gpu_price_counts_the_engines_gpus_and_an_engine_price_does_not():
    per_gpu = engine_share(Price(2.49, GPU), engine_gpus=2, machine_gpus=8)
    assert per_gpu.usd_per_hour == 2 * 2.49
    assert per_gpu.describe() == "cost 4.98 USD/h: 2 GPUs at 2.49 USD/h each"
    assert engine_share(Price(2.49, GPU), 1, 8).describe() == \
        "cost 2.49 USD/h: 1 GPU at 2.49 USD/h each"
    per_engine = engine_share(Price(12.0, ENGINE), engine_gpus=4, machine_gpus=8)
    assert per_engine.usd_per_hour == 12.0
    assert per_engine.describe() == "cost 12 USD/h per engine"


def test_a_results_share_reads_its_engine_spec_and_fingerprint():
    # TP 2 x PP 2 x DP 1 = 4 of the 8 GPUs; the spec leaves vLLM's defaults out.
    engine = {"model": "m", "tensor_parallel_size": 2, "pipeline_parallel_size": 2}
    share = share_of(Price(2.4), engine, H100_X8)
    assert (share.engine_gpus, share.machine_gpus) == (4, 8)
    assert share.usd_per_hour == pytest.approx(1.2, rel=1e-12)
    assert share.to_dict() == {"usd_per_hour": share.usd_per_hour, "price_usd_per_hour": 2.4,
                               "price_per": "machine", "engine_gpus": 4, "machine_gpus": 8}
    assert share_of(Price(2.4), {"model": "m", "data_parallel_size": 8}, H100_X8) \
        .usd_per_hour == pytest.approx(2.4, rel=1e-12)
    assert share_of(Price(0.1), {"model": "m"}, CPU).usd_per_hour == 0.1
    assert share_of(Price(0.1), {"model": "m"}, {}).machine_gpus == 0  # no fingerprint: a CPU


def test_a_bare_number_is_the_machines_price():
    assert as_price(2.49) == Price(2.49, MACHINE)
    assert as_price(Price(1.0, GPU)) == Price(1.0, GPU)
    assert as_price(None) is None


def test_dollars_per_million_tokens():
    # $3.60 an hour is $0.001 a second; at 1000 tok/s that is $1 per million tokens.
    values = {"output_throughput_tok_s": 1000.0, "total_throughput_tok_s": 4000.0}
    assert per_million_tokens(values, 3.6) == {PER_OUTPUT: pytest.approx(1.0, rel=1e-12),
                                               PER_TOTAL: pytest.approx(0.25, rel=1e-12)}


def test_no_price_or_no_throughput_no_cost():
    values = {"output_throughput_tok_s": 1000.0, "total_throughput_tok_s": None}
    assert per_million_tokens(values, None) == {PER_OUTPUT: None, PER_TOTAL: None}
    assert per_million_tokens(values, 3.6)[PER_TOTAL] is None
    assert per_million_tokens({"output_throughput_tok_s": 0.0}, 3.6)[PER_OUTPUT] is None
